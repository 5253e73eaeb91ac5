/**
 * The in-cluster signer of the daemons' serving certificates: a Deployment of `aicr daemonset
 * signer` (the same image as the daemons), two replicas of which one leads through a
 * `coordination.k8s.io` Lease, and that Lease, created empty so the signer never needs `create`.
 *
 * Design:
 * - Two replicas, spread over nodes when the scheduler can (a preferred pod anti-affinity on the
 *   hostname): a node going away leaves a replica to take the Lease over.
 * - Linux nodes only, no tolerations: the signer needs no GPU node and no host access, so it
 *   stays off tainted (GPU, control-plane) nodes unless told otherwise.
 * - PSS `restricted`: uid 65534, read-only root, no capabilities, RuntimeDefault seccomp, no
 *   host namespaces, no volumes but its ServiceAccount token. It listens on no port: it has no
 *   server, and its health is the Lease (a replica that stops renewing loses it).
 * - The CA Secret is read through the API (its Role may `get` that one Secret), never mounted.
 * - `terminationGracePeriodSeconds` leaves time to release the Lease on SIGTERM, so the other
 *   replica takes over at once on a rollout instead of after the Lease's duration.
 *
 * @module
 */
import { UsageError } from "../errors.ts";
import { podPlacement, podResources, podSecurity, validateImage } from "./_pod.ts";
import {
  DEFAULT_DAEMON_NAME,
  isDns1123Subdomain,
  signerLabels,
  signerName,
  signerSelectorLabels,
  validateDaemonName,
} from "./names.ts";
import type { Labels } from "./names.ts";
import type {
  Affinity,
  Container,
  DeploymentManifest,
  LeaseManifest,
  ResourceList,
  ResourceRequirements,
} from "./types.ts";

/** The signer's replicas: one leads, one waits to take over. */
export const DEFAULT_SIGNER_REPLICAS = 2;

/**
 * The signer's resources, measured (README, "Placement, priority, requests and limits"): a
 * replica holds 71-74 MiB resident while idle (the binary's pages included) and a pass over
 * 1,000 requests adds about 24 MiB and 2.7 s of CPU; requests cover the idle replica and a burst,
 * limits bound a run-away.
 */
export const SIGNER_RESOURCES: ResourceRequirements = {
  requests: { cpu: "10m", memory: "96Mi" },
  limits: { cpu: "500m", memory: "256Mi" },
};

/** Seconds between SIGTERM and SIGKILL: enough to finish a request and release the Lease. */
const SIGNER_GRACE_SECONDS = 30;

/** Configuration of the signer's Deployment. */
export interface SignerConfig {
  /** The daemon's namespace. */
  namespace: string;
  /** The daemon's name (the signer's objects are `<name>-signer`). @default "aicr-daemon" */
  name?: string;
  /** The image (the daemons'). */
  image: string;
  /** Pull secrets. */
  imagePullSecrets?: readonly string[];
  /** Replicas. @default 2 */
  replicas?: number;
  /** Requests, merged over {@link SIGNER_RESOURCES}. */
  requests?: ResourceList;
  /** Limits, merged over {@link SIGNER_RESOURCES}. */
  limits?: ResourceList;
  /** `priorityClassName` of the signer's pods. */
  priorityClassName?: string;
  /** The image's CPU architectures: its pods land only on nodes of one of them. */
  architectures?: readonly string[];
  /** More `aicr daemonset signer` flags. */
  extraArgs?: readonly string[];
  /** The installing run's ID (labels only). */
  runId?: string;
  /** The installing invocation's ID (labels only, with `runId`). */
  invocationId?: string;
}

/**
 * The signer container's arguments: `daemonset signer` for this install.
 *
 * @param namespace the daemon's namespace
 * @param name the daemon's name
 * @param extraArgs more flags
 * @returns the args
 */
export function signerArgs(
  namespace: string,
  name: string,
  extraArgs: readonly string[] = [],
): string[] {
  return ["daemonset", "signer", "--namespace", namespace, "--name", name, ...extraArgs];
}

function labelsOf(
  config: Pick<SignerConfig, "runId" | "invocationId">,
  name: string,
): Labels {
  return signerLabels({
    name,
    ...(config.runId !== undefined ? { runId: config.runId } : {}),
    ...(config.invocationId !== undefined ? { invocationId: config.invocationId } : {}),
  });
}

function checkReplicas(replicas: number): number {
  if (!Number.isInteger(replicas) || replicas < 1 || replicas > 10) {
    throw new UsageError(
      (option) =>
        `Cannot use '${
          option("signerReplicas")
        }' as it must be a whole number from 1 to 10: current value is '${replicas}'`,
    );
  }
  return replicas;
}

/**
 * Checks a `priorityClassName`: a DNS-1123 subdomain.
 *
 * @param value the name
 * @returns the name
 * @throws {UsageError} when it is not one
 */
export function validatePriorityClassName(value: string): string {
  if (!isDns1123Subdomain(value)) {
    throw new UsageError(
      (option) =>
        `Cannot use '${
          option("priorityClassName")
        }' as it must be a PriorityClass name (DNS-1123 subdomain): current value is '${value}'`,
    );
  }
  return value;
}

function checkPullSecrets(secrets: readonly string[]): { name: string }[] {
  return secrets.map((secret) => {
    if (!isDns1123Subdomain(secret)) {
      throw new UsageError(
        (option) =>
          `Cannot use '${
            option("imagePullSecret")
          }' as it must be a Secret name (DNS-1123 subdomain): current value is '${secret}'`,
      );
    }
    return { name: secret };
  });
}

/**
 * Nodes of the image's architectures (required, as the DaemonSet's), and the replicas spread over
 * nodes where the scheduler can (preferred, never required: one-node clusters).
 */
function signerAffinity(name: string, architectures: readonly string[] | undefined): Affinity {
  const arch = architectures ? podPlacement({ architectures }).affinity : undefined;
  return {
    ...(arch?.nodeAffinity ? { nodeAffinity: arch.nodeAffinity } : {}),
    podAntiAffinity: {
      preferredDuringSchedulingIgnoredDuringExecution: [{
        weight: 100,
        podAffinityTerm: {
          labelSelector: { matchLabels: signerSelectorLabels(name) },
          topologyKey: "kubernetes.io/hostname",
        },
      }],
    },
  };
}

function signerContainer(config: SignerConfig, name: string): Container {
  const security = podSecurity(false);
  return {
    name: "signer",
    image: validateImage(config.image),
    command: ["aicr"],
    args: signerArgs(config.namespace, name, config.extraArgs),
    env: [
      // The Lease holder's identity starts with the pod's name, so `status` names the pod.
      { name: "POD_NAME", valueFrom: { fieldRef: { fieldPath: "metadata.name" } } },
      { name: "AICR_LOG_PREFIX", value: "signer" },
    ],
    resources: podResources({
      defaults: SIGNER_RESOURCES,
      gpu: false,
      ...(config.requests ? { requests: config.requests } : {}),
      ...(config.limits ? { limits: config.limits } : {}),
    }),
    securityContext: security.container,
    volumeMounts: [],
  };
}

/**
 * Builds the signer's Deployment.
 *
 * @param config namespace, daemon name, image and pod knobs
 * @returns the Deployment
 * @throws {UsageError} when a value cannot go into the manifest
 */
export function buildSignerDeployment(config: SignerConfig): DeploymentManifest {
  const { namespace, name = DEFAULT_DAEMON_NAME, replicas = DEFAULT_SIGNER_REPLICAS } = config;
  validateDaemonName(name);
  const labels = labelsOf(config, name);
  const pullSecrets = checkPullSecrets(config.imagePullSecrets ?? []);
  const security = podSecurity(false);
  return withoutEmptyLists({
    apiVersion: "apps/v1",
    kind: "Deployment",
    metadata: { name: signerName(name), namespace, labels },
    spec: {
      replicas: checkReplicas(replicas),
      revisionHistoryLimit: 3,
      selector: { matchLabels: signerSelectorLabels(name) },
      // A new replica starts before an old one goes: a rollout never leaves no candidate.
      strategy: { type: "RollingUpdate", rollingUpdate: { maxSurge: 1, maxUnavailable: 0 } },
      template: {
        metadata: { labels: { ...labels } },
        spec: {
          serviceAccountName: signerName(name),
          restartPolicy: "Always",
          nodeSelector: { "kubernetes.io/os": "linux" },
          tolerations: [],
          affinity: signerAffinity(name, config.architectures),
          ...(config.priorityClassName !== undefined
            ? { priorityClassName: validatePriorityClassName(config.priorityClassName) }
            : {}),
          ...(pullSecrets.length > 0 ? { imagePullSecrets: pullSecrets } : {}),
          terminationGracePeriodSeconds: SIGNER_GRACE_SECONDS,
          securityContext: security.pod,
          containers: [signerContainer(config, name)],
          volumes: [],
        },
      },
    },
  });
}

/**
 * Builds the signer's Lease, empty: the install creates it so the signer's Role needs only
 * `get` and `update` on this one name; the replica that acquires it writes the spec.
 *
 * @param config namespace, daemon name and run identity
 * @returns the Lease
 */
export function buildSignerLease(
  config: Pick<SignerConfig, "namespace" | "name" | "runId" | "invocationId">,
): LeaseManifest {
  const { namespace, name = DEFAULT_DAEMON_NAME } = config;
  return {
    apiVersion: "coordination.k8s.io/v1",
    kind: "Lease",
    metadata: { name: signerName(name), namespace, labels: labelsOf(config, name) },
    spec: {},
  };
}

/**
 * The Deployment without its empty lists (tolerations, volumes, mounts): the API server drops
 * them, so `kubectl apply` of a rendered file would otherwise report the Deployment `configured`
 * on every apply and a GitOps tool see drift that is not there.
 */
function withoutEmptyLists(deployment: DeploymentManifest): DeploymentManifest {
  const pod = deployment.spec.template.spec as Partial<
    DeploymentManifest["spec"]["template"]["spec"]
  >;
  if (pod.tolerations?.length === 0) delete pod.tolerations;
  if (pod.volumes?.length === 0) delete pod.volumes;
  for (const container of pod.containers ?? []) {
    const c = container as Partial<typeof container>;
    if (c.volumeMounts?.length === 0) delete c.volumeMounts;
  }
  return deployment;
}
