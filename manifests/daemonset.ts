/**
 * The DaemonSet of `aicr daemon`: one pod per selected node serving that node's
 * snapshot over HTTPS (`/v1/snapshot`, `/healthz`, `/readyz`, `/metrics`).
 *
 * Design, and what stays configurable until the daemon's install flow settles:
 * - Same placement and security as the agent Job: the same selectors, the same
 *   tolerate-all default, the same privileged/restricted postures and per-OS host
 *   mounts, so a daemon snapshot equals a Job snapshot of that node.
 * - Host networking follows the posture (on when privileged, like the Job, so the
 *   collectors see the host); `hostNetwork` overrides it. With host networking the
 *   port is bound on the node itself: pick one nothing else on the nodes uses.
 * - TLS: the installer's daemons make their own key in memory and get a certificate for their
 *   node through the CSR API (`--csr-signer`, with the pod's name, UID and IP from the
 *   downward API); a `kubernetes.io/tls` Secret mounted read-only at {@link DAEMON_TLS_DIR}
 *   still works for hand-made setups; `insecureHttp` exists for local tests only.
 * - Probes: liveness on `/healthz`, readiness on `/readyz` (503 until the first
 *   snapshot succeeds), so a rollout waits for real data.
 * - No GPU request even with a GPU-targeting config: a long-lived pod holding
 *   `nvidia.com/gpu` would take a GPU from workloads on every node. Use a runtime class.
 * - Smaller resources than the Job (the daemon idles between collections).
 *
 * @module
 */
import { UsageError } from "../errors.ts";
import {
  daemonLabels,
  daemonSelectorLabels,
  DEFAULT_DAEMON_NAME,
  validateDaemonName,
} from "./names.ts";
import { agentPodParts } from "./_pod.ts";
import { validatePriorityClassName } from "./signer.ts";
import type { PodOptions } from "./_pod.ts";
import type {
  Affinity,
  Container,
  DaemonSetManifest,
  Probe,
  ResourceRequirements,
  VolumeMount,
} from "./types.ts";

/** The daemon's default port (the `aicr daemon --port` default). */
export const DEFAULT_DAEMON_PORT = 8443;
/** Where the TLS Secret is mounted. */
const DAEMON_TLS_DIR = "/etc/aicr/tls";

/** The daemon's resources, both postures. */
const DAEMON_RESOURCES: ResourceRequirements = {
  requests: { cpu: "100m", memory: "256Mi", "ephemeral-storage": "256Mi" },
  limits: { cpu: "1", memory: "1Gi", "ephemeral-storage": "1Gi" },
};

/**
 * How the daemon serves: its own certificate from the CSR API under this signer (key made in
 * the pod, never stored; the installer's choice), TLS from a Secret, or plain HTTP for local
 * tests.
 */
export type DaemonTls =
  | {
    csrSigner: string;
    /**
     * Accept only reader tokens bound to this node (`--require-node-bound-token`); off for API
     * servers before 1.31, which cannot bind a token to a Node. @default true
     */
    nodeBoundTokens?: boolean;
  }
  | { secretName: string }
  | { insecureHttp: true };

/** The DaemonSet's configuration. */
export interface DaemonSetConfig extends PodOptions {
  /** Namespace. */
  namespace: string;
  /** Name of the DaemonSet (and default ServiceAccount). @default "aicr-daemon" */
  name?: string;
  /** ServiceAccount the pods run as. @default the name */
  serviceAccountName?: string;
  /** TLS source. */
  tls: DaemonTls;
  /** Port to serve on. @default 8443 */
  port?: number;
  /** Host networking. @default the value of `privileged` */
  hostNetwork?: boolean;
  /** More `aicr daemon` flags, e.g. `["--refresh-interval", "10m"]`. */
  extraArgs?: readonly string[];
  /** The installing run's ID (labels only). */
  runId?: string;
  /** The installing invocation's ID (labels only, with `runId`). */
  invocationId?: string;
  /**
   * Bind the pod's own address (`--listen $(POD_IP)`, `POD_IP` from `status.podIP`): with host
   * networking every node's daemon then binds only its node's address, and the kubelet probes
   * the pod IP anyway. @default true
   */
  listenOnPodIp?: boolean;
  /**
   * `--token-audience`: the audience callers' tokens must carry (the installer's
   * `aicr-daemon:$(NODE_NAME)`, one per node).
   */
  tokenAudience?: string;
  /**
   * `priorityClassName` of the daemon's pods. Absent: the cluster's default priority (a
   * snapshot daemon should not preempt GPU work; see the README for a class that schedules it
   * first on a new node without evicting anything).
   */
  priorityClassName?: string;
  /**
   * The pods' affinity, given whole: it replaces the one made from `architectures` (which must
   * then be in it when the image lacks some architecture).
   */
  affinity?: Affinity;
}

function probe(path: string, port: number, scheme: "HTTP" | "HTTPS", period: number): Probe {
  return { httpGet: { path, port, scheme }, periodSeconds: period, timeoutSeconds: 5 };
}

/**
 * The daemon container's arguments.
 *
 * @param port the port
 * @param tls the TLS source
 * @param extraArgs more flags
 * @returns the args
 */
export function daemonArgs(
  port: number,
  tls: DaemonTls,
  extraArgs: readonly string[] = [],
): string[] {
  return [
    "daemon",
    "--port",
    String(port),
    ...("csrSigner" in tls
      ? [
        "--csr-signer",
        tls.csrSigner,
        "--pod-name",
        "$(POD_NAME)",
        "--pod-uid",
        "$(POD_UID)",
        "--pod-ip",
        "$(POD_IP)",
        ...(tls.nodeBoundTokens === false ? [] : ["--require-node-bound-token"]),
      ]
      : "secretName" in tls
      ? [
        "--tls-cert-file",
        `${DAEMON_TLS_DIR}/tls.crt`,
        "--tls-key-file",
        `${DAEMON_TLS_DIR}/tls.key`,
      ]
      : ["--insecure-http"]),
    ...extraArgs,
  ];
}

/** The daemon's container: `aicr daemon` listening on the pod IP, probed on its own port. */
function daemonContainer(
  config: DaemonSetConfig,
  pod: ReturnType<typeof agentPodParts>,
  serving: { port: number; scheme: "HTTP" | "HTTPS"; mounts: VolumeMount[] },
): Container {
  const { port, scheme, mounts } = serving;
  const { tls, listenOnPodIp = true } = config;
  return {
    name: "aicr",
    image: pod.container.image,
    command: ["aicr"],
    // A daemon that exits (another program, without aicr's `daemon` verb) leaves its last log
    // lines in its termination state, where install and fetch read and name them.
    terminationMessagePolicy: "FallbackToLogsOnError",
    args: daemonArgs(port, tls, [
      ...(listenOnPodIp ? ["--listen", "$(POD_IP)"] : []),
      ...(config.tokenAudience !== undefined ? ["--token-audience", config.tokenAudience] : []),
      ...(config.extraArgs ?? []),
    ]),
    env: [
      ...(listenOnPodIp || "csrSigner" in tls
        ? [{ name: "POD_IP", valueFrom: { fieldRef: { fieldPath: "status.podIP" } } }]
        : []),
      ...("csrSigner" in tls
        ? [
          { name: "POD_NAME", valueFrom: { fieldRef: { fieldPath: "metadata.name" } } },
          { name: "POD_UID", valueFrom: { fieldRef: { fieldPath: "metadata.uid" } } },
        ]
        : []),
      ...pod.env,
    ],
    ports: [{ name: scheme.toLowerCase(), containerPort: port, protocol: "TCP" }],
    resources: pod.container.resources,
    securityContext: pod.container.securityContext,
    volumeMounts: mounts,
    livenessProbe: { ...probe("/healthz", port, scheme, 20), failureThreshold: 3 },
    // Every 5 s: a daemon serves its certificate on its next poll once signed, and the node's
    // daemon should turn Ready a few seconds later, not up to 10.
    readinessProbe: probe("/readyz", port, scheme, 5),
  };
}

/**
 * Builds the DaemonSet.
 *
 * @param config the configuration
 * @returns the DaemonSet manifest
 * @throws {UsageError} when a value cannot go into the manifest
 */
export function buildDaemonSet(config: DaemonSetConfig): DaemonSetManifest {
  const {
    namespace,
    name = DEFAULT_DAEMON_NAME,
    port = DEFAULT_DAEMON_PORT,
    privileged = true,
    tls,
  } = config;
  validateDaemonName(name);
  if (!Number.isInteger(port) || port < 1 || port > 65535) {
    throw new UsageError(
      (option) =>
        `Cannot use '${
          option("port")
        }' as it must be a whole number from 1 to 65535: current value is '${port}'`,
    );
  }
  const labels = daemonLabels({
    name,
    ...(config.runId !== undefined ? { runId: config.runId } : {}),
    ...(config.invocationId !== undefined ? { invocationId: config.invocationId } : {}),
  });
  const hostNetwork = config.hostNetwork ?? privileged;
  const pod = agentPodParts(config, {
    defaults: DAEMON_RESOURCES,
    gpu: false,
    logPrefix: "daemon",
    hostNetwork,
  });
  const volumes = [...pod.volumes];
  const mounts = [...pod.container.volumeMounts];
  if ("secretName" in tls) {
    volumes.push({ name: "tls", secret: { secretName: tls.secretName, defaultMode: 0o440 } });
    mounts.push({ name: "tls", mountPath: DAEMON_TLS_DIR, readOnly: true });
  }
  const scheme = "insecureHttp" in tls ? "HTTP" : "HTTPS";
  // Restricted pods have no host namespaces, unless host networking is asked for explicitly.
  const host = privileged ? pod.host : hostNetwork ? { hostNetwork: true } : {};
  return {
    apiVersion: "apps/v1",
    kind: "DaemonSet",
    metadata: { name, namespace, labels },
    spec: {
      selector: { matchLabels: daemonSelectorLabels(name) },
      updateStrategy: { type: "RollingUpdate", rollingUpdate: { maxUnavailable: 1 } },
      template: {
        metadata: { labels: { ...labels } },
        spec: {
          serviceAccountName: config.serviceAccountName ?? name,
          restartPolicy: "Always",
          ...host,
          ...(host.hostNetwork ? { dnsPolicy: "ClusterFirstWithHostNet" as const } : {}),
          ...pod.placement,
          ...(config.affinity ? { affinity: config.affinity } : {}),
          ...(config.priorityClassName !== undefined
            ? { priorityClassName: validatePriorityClassName(config.priorityClassName) }
            : {}),
          securityContext: pod.podSecurityContext,
          containers: [daemonContainer(config, pod, { port, scheme, mounts })],
          volumes,
        },
      },
    },
  };
}
