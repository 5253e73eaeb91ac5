/**
 * The pod pieces the agent Job and the DaemonSet share: security posture (privileged
 * or PSS-restricted), per-OS host mounts, resources with overrides, node placement and
 * the common environment. Private to `manifests/`.
 *
 * @module
 */
import { UsageError } from "../errors.ts";
import { isDns1123Subdomain } from "./names.ts";
import { quantityValue } from "./quantity.ts";
import type {
  Affinity,
  Container,
  EnvVar,
  NodeSelectorRequirement,
  PodSecurityContext,
  PodSpec,
  ResourceList,
  ResourceRequirements,
  SecurityContext,
  Toleration,
  Volume,
  VolumeMount,
} from "./types.ts";

/** Node OS families `--os` accepts. */
export const NODE_OS_FAMILIES = ["ubuntu", "rhel", "cos", "amazonlinux", "ol", "talos"] as const;

/** One node OS family. */
export type NodeOs = typeof NODE_OS_FAMILIES[number];

/**
 * Checks an `--os` value.
 *
 * @param value any string
 * @returns whether it is a supported OS family
 */
export function isNodeOs(value: string): value is NodeOs {
  return (NODE_OS_FAMILIES as readonly string[]).includes(value);
}

/** The toleration used when `--toleration` is not given: every taint, every effect. */
const TOLERATE_ALL: readonly Toleration[] = [{ operator: "Exists" }];

/** The label GPU auto-targeting selects on. */
export const GPU_PRESENT_LABEL = "nvidia.com/gpu.present";

/** The extended resource `--require-gpu` asks for. */
const GPU_RESOURCE = "nvidia.com/gpu";

/** Where the GKE driver installer puts the NVIDIA userland on COS nodes. */
const COS_NVIDIA_HOST_PATH = "/home/kubernetes/bin/nvidia";
/** Where the agent sees the COS NVIDIA userland (nvidia-smi is in `bin/`). */
const COS_NVIDIA_MOUNT_PATH = "/usr/local/nvidia";

/** Host mounts of one OS family in privileged mode. */
export interface OsProfile {
  /** Mount `/run/systemd` (the SystemD collector's private socket). */
  systemd: boolean;
  /** Mount the host's `/etc/os-release` over the image's. */
  osRelease: boolean;
  /** Mount the GKE NVIDIA userland (COS). */
  cosNvidia: boolean;
}

/**
 * The privileged-mode host mounts of an OS family. Ubuntu, RHEL, Oracle Linux and
 * Amazon Linux get the upstream pair (`/run/systemd` as a Directory and
 * `/etc/os-release` as a File). COS keeps that pair and adds its NVIDIA userland
 * read-only, because COS has no driver on the host PATH and nvidia-smi lives under
 * `/home/kubernetes/bin/nvidia`. Talos runs no systemd: a Directory-typed
 * `/run/systemd` mount would keep the pod from ever starting, so it is left out and
 * the SystemD collector reports no units; `/etc/os-release` exists on Talos and is
 * mounted.
 *
 * @param os the OS family, or undefined for the upstream default
 * @returns the profile
 */
function osProfile(os: NodeOs | undefined): OsProfile {
  switch (os) {
    case "talos":
      return { systemd: false, osRelease: true, cosNvidia: false };
    case "cos":
      return { systemd: true, osRelease: true, cosNvidia: true };
    default:
      return { systemd: true, osRelease: true, cosNvidia: false };
  }
}

/** The pod-level and container-level security of one mode. */
export interface PodSecurity {
  /** Host PID, network and IPC (privileged only). */
  host: Pick<PodSpec, "hostPID" | "hostNetwork" | "hostIPC">;
  /** Pod security context. */
  pod: PodSecurityContext;
  /** Container security context. */
  container: SecurityContext;
}

/**
 * The security posture: privileged (root, host namespaces, SYS_ADMIN and SYS_CHROOT)
 * or PSS "restricted" (uid 65534, no host namespaces, RuntimeDefault seccomp, drop
 * ALL, read-only root).
 *
 * @param privileged `--privileged`
 * @param options `hostNetwork` overrides host networking in privileged mode
 * @returns the security contexts
 */
export function podSecurity(
  privileged: boolean,
  options: { hostNetwork?: boolean } = {},
): PodSecurity {
  if (privileged) {
    return {
      host: { hostPID: true, hostNetwork: options.hostNetwork ?? true, hostIPC: true },
      pod: { runAsUser: 0, runAsGroup: 0, fsGroup: 0, fsGroupChangePolicy: "OnRootMismatch" },
      container: {
        privileged: true,
        runAsUser: 0,
        runAsGroup: 0,
        allowPrivilegeEscalation: true,
        capabilities: { add: ["SYS_ADMIN", "SYS_CHROOT"] },
      },
    };
  }
  return {
    host: {},
    pod: {
      runAsNonRoot: true,
      runAsUser: 65534,
      runAsGroup: 65534,
      fsGroup: 65534,
      seccompProfile: { type: "RuntimeDefault" },
    },
    container: {
      privileged: false,
      runAsNonRoot: true,
      runAsUser: 65534,
      runAsGroup: 65534,
      allowPrivilegeEscalation: false,
      readOnlyRootFilesystem: true,
      capabilities: { drop: ["ALL"] },
      seccompProfile: { type: "RuntimeDefault" },
    },
  };
}

/** Volumes and their mounts. */
export interface PodVolumes {
  /** Pod volumes. */
  volumes: Volume[];
  /** Container mounts. */
  mounts: VolumeMount[];
}

/**
 * The volumes: `tmp` (emptyDir at /tmp) always, plus the OS profile's read-only host
 * mounts in privileged mode. Restricted mode has no hostPath at all.
 *
 * @param privileged `--privileged`
 * @param os `--os`
 * @returns volumes and mounts
 */
function podVolumes(privileged: boolean, os: NodeOs | undefined): PodVolumes {
  const volumes: Volume[] = [{ name: "tmp", emptyDir: {} }];
  const mounts: VolumeMount[] = [{ name: "tmp", mountPath: "/tmp" }];
  if (!privileged) return { volumes, mounts };
  const profile = osProfile(os);
  if (profile.systemd) {
    volumes.push({ name: "run-systemd", hostPath: { path: "/run/systemd", type: "Directory" } });
    mounts.push({ name: "run-systemd", mountPath: "/run/systemd", readOnly: true });
  }
  if (profile.osRelease) {
    volumes.push({ name: "host-os-release", hostPath: { path: "/etc/os-release", type: "File" } });
    mounts.push({ name: "host-os-release", mountPath: "/etc/os-release", readOnly: true });
  }
  if (profile.cosNvidia) {
    volumes.push({
      name: "cos-nvidia",
      hostPath: { path: COS_NVIDIA_HOST_PATH, type: "DirectoryOrCreate" },
    });
    mounts.push({ name: "cos-nvidia", mountPath: COS_NVIDIA_MOUNT_PATH, readOnly: true });
  }
  return { volumes, mounts };
}

/** Options for {@link podResources}. */
export interface ResourceOptions {
  /** The defaults of this mode. */
  defaults: ResourceRequirements;
  /** Add `nvidia.com/gpu: 1` to the limits. */
  gpu: boolean;
  /** `--requests`, merged over the defaults. */
  requests?: ResourceList;
  /** `--limits`, merged over the defaults. */
  limits?: ResourceList;
}

/**
 * Resources: the mode's defaults, the GPU limit, then the overrides name by name.
 *
 * @param options defaults, GPU and overrides
 * @returns requests and limits
 * @throws {UsageError} when a request exceeds its limit
 */
export function podResources(options: ResourceOptions): ResourceRequirements {
  const { defaults, gpu, requests = {}, limits = {} } = options;
  const resolved: ResourceRequirements = {
    requests: { ...defaults.requests, ...requests },
    limits: { ...defaults.limits, ...(gpu ? { [GPU_RESOURCE]: "1" } : {}), ...limits },
  };
  for (const [name, request] of Object.entries(resolved.requests)) {
    const limit = resolved.limits[name];
    if (limit !== undefined && quantityValue(request) > quantityValue(limit)) {
      throw new UsageError(
        (option) =>
          `Cannot use '${
            option("requests")
          }' as the ${name} request must not exceed its limit ${limit} (raise it with '${
            option("limits")
          }'): current value is '${name}=${request}'`,
      );
    }
  }
  return resolved;
}

/** Options for {@link podPlacement}. */
export interface PlacementOptions {
  /** `--node-selector`. */
  nodeSelector?: Record<string, string>;
  /** Inject `nvidia.com/gpu.present=true` (GPU auto-targeting chose it). */
  autoTargetGpu?: boolean;
  /** `--toleration`; empty or absent tolerates everything. */
  tolerations?: readonly Toleration[];
  /** `--image-pull-secret`. */
  imagePullSecrets?: readonly string[];
  /** `--runtime-class`. */
  runtimeClass?: string;
  /**
   * The CPU architectures the image has (`kubernetes.io/arch` values, from its platforms): the
   * pod lands only on nodes of one of them. Absent: anywhere.
   */
  architectures?: readonly string[];
}

/** The node label that names a node's CPU architecture. */
export const ARCH_LABEL = "kubernetes.io/arch";

/**
 * Node placement and pull settings of the pod.
 *
 * @param options selectors, tolerations, pull secrets, runtime class
 * @returns the pod spec fields
 * @throws {UsageError} when a pull secret or runtime class is not a valid name
 */
export function podPlacement(
  options: PlacementOptions,
): Pick<
  PodSpec,
  "nodeSelector" | "tolerations" | "imagePullSecrets" | "runtimeClassName" | "affinity"
> {
  const { nodeSelector = {}, autoTargetGpu = false, tolerations = [], imagePullSecrets = [] } =
    options;
  for (const secret of imagePullSecrets) {
    if (!isDns1123Subdomain(secret)) {
      throw new UsageError(
        (option) =>
          `Cannot use '${
            option("imagePullSecret")
          }' as it must be a Secret name (DNS-1123 subdomain): current value is '${secret}'`,
      );
    }
  }
  if (options.runtimeClass !== undefined && !isDns1123Subdomain(options.runtimeClass)) {
    throw new UsageError(
      (option) =>
        `Cannot use '${
          option("runtimeClass")
        }' as it must be a RuntimeClass name (DNS-1123 subdomain): current value is '${options.runtimeClass}'`,
    );
  }
  const selector = { ...nodeSelector, ...(autoTargetGpu ? { [GPU_PRESENT_LABEL]: "true" } : {}) };
  return {
    ...(Object.keys(selector).length > 0 ? { nodeSelector: selector } : {}),
    tolerations: (tolerations.length > 0 ? tolerations : TOLERATE_ALL).map((t) => ({ ...t })),
    ...(imagePullSecrets.length > 0
      ? { imagePullSecrets: imagePullSecrets.map((name) => ({ name })) }
      : {}),
    ...(options.runtimeClass !== undefined ? { runtimeClassName: options.runtimeClass } : {}),
    ...(options.architectures ? { affinity: archAffinity(options.architectures) } : {}),
  };
}

/**
 * The node affinity that keeps a pod off nodes of an architecture its image lacks: required
 * `kubernetes.io/arch In [...]`.
 *
 * @param architectures the image's architectures
 * @returns the affinity
 * @throws {UsageError} when the list is empty
 */
function archAffinity(architectures: readonly string[]): Affinity {
  if (architectures.length === 0) {
    throw new UsageError(
      (option) =>
        `Cannot place the pod as '${
          option("imagePlatforms")
        }' names no platform: give at least one, e.g. linux/amd64`,
    );
  }
  return {
    nodeAffinity: {
      requiredDuringSchedulingIgnoredDuringExecution: {
        nodeSelectorTerms: [{
          matchExpressions: [{ key: ARCH_LABEL, operator: "In", values: [...architectures] }],
        }],
      },
    },
  };
}

/**
 * A required node affinity that holds both the architectures' term and the user's requirements
 * (`--node-affinity`): one term, so every requirement must hold (AND).
 *
 * @param options the image's architectures (absent: any) and the user's requirements
 * @returns the affinity, or undefined when there is nothing to require
 * @throws {UsageError} when the architectures list is empty
 */
export function requiredNodeAffinity(options: {
  architectures?: readonly string[] | undefined;
  requirements: readonly NodeSelectorRequirement[];
}): Affinity | undefined {
  const arch = options.architectures
    ? archAffinity(options.architectures).nodeAffinity
      ?.requiredDuringSchedulingIgnoredDuringExecution?.nodeSelectorTerms[0]?.matchExpressions ??
      []
    : [];
  const expressions = [...arch, ...options.requirements.map((r) => ({ ...r }))];
  if (expressions.length === 0) return undefined;
  return {
    nodeAffinity: {
      requiredDuringSchedulingIgnoredDuringExecution: {
        nodeSelectorTerms: [{ matchExpressions: expressions }],
      },
    },
  };
}

/** Options for {@link commonEnv}. */
export interface EnvOptions {
  /** `AICR_LOG_PREFIX`. */
  logPrefix: string;
  /** `--max-nodes-per-entry`; written only when > 0. */
  maxNodesPerEntry?: number;
  /** `--runtime-class`; with one, `NVIDIA_VISIBLE_DEVICES=all`. */
  runtimeClass?: string;
}

/**
 * The environment both modes share after their own first variables: log prefix,
 * `NODE_NAME` from the downward API, topology truncation, and GPU visibility through
 * the runtime class.
 *
 * @param options prefix, truncation, runtime class
 * @returns the variables
 * @throws {UsageError} when `maxNodesPerEntry` is not a non-negative integer
 */
function commonEnv(options: EnvOptions): EnvVar[] {
  const { logPrefix, maxNodesPerEntry = 0, runtimeClass } = options;
  if (!Number.isInteger(maxNodesPerEntry) || maxNodesPerEntry < 0) {
    throw new UsageError(
      (option) =>
        `Cannot use '${
          option("maxNodesPerEntry")
        }' as it must be a whole number, 0 or more: current value is '${maxNodesPerEntry}'`,
    );
  }
  return [
    { name: "AICR_LOG_PREFIX", value: logPrefix },
    { name: "NODE_NAME", valueFrom: { fieldRef: { fieldPath: "spec.nodeName" } } },
    ...(maxNodesPerEntry > 0
      ? [{ name: "AICR_MAX_NODES_PER_ENTRY", value: String(maxNodesPerEntry) }]
      : []),
    ...(runtimeClass !== undefined ? [{ name: "NVIDIA_VISIBLE_DEVICES", value: "all" }] : []),
  ];
}

/**
 * Checks the image reference is usable.
 *
 * @param image `--image`
 * @returns the image
 * @throws {UsageError} when it is empty or holds whitespace
 */
export function validateImage(image: string): string {
  if (image === "" || /\s/.test(image)) {
    throw new UsageError(
      (option) =>
        `Cannot use '${
          option("image")
        }' as it must be an image reference such as 'ghcr.io/nvidia/aicr:v1.0.0': current value is '${image}'`,
    );
  }
  return image;
}

/** The pod knobs the agent Job and the DaemonSet share. */
export interface PodOptions extends PlacementOptions {
  /** `--image`. */
  image: string;
  /** `--privileged`. @default true */
  privileged?: boolean;
  /** `--os`. */
  os?: NodeOs;
  /** `--requests`, merged over the mode's defaults. */
  requests?: ResourceList;
  /** `--limits`, merged over the mode's defaults. */
  limits?: ResourceList;
  /** `--max-nodes-per-entry`. */
  maxNodesPerEntry?: number;
}

/** What differs between the Job and the DaemonSet when their pods are assembled. */
export interface PodMode {
  /** Default resources. */
  defaults: ResourceRequirements;
  /** Add the GPU limit. */
  gpu: boolean;
  /** `AICR_LOG_PREFIX`. */
  logPrefix: string;
  /** Host networking override (privileged only). */
  hostNetwork?: boolean;
}

/** The assembled shared parts of an aicr pod. */
export interface PodParts {
  /** Host namespaces. */
  host: Pick<PodSpec, "hostPID" | "hostNetwork" | "hostIPC">;
  /** Node selector, tolerations, pull secrets, runtime class. */
  placement: Pick<
    PodSpec,
    "nodeSelector" | "tolerations" | "imagePullSecrets" | "runtimeClassName" | "affinity"
  >;
  /** Pod security context. */
  podSecurityContext: PodSecurityContext;
  /** The container fields both modes share. */
  container: Pick<Container, "image" | "resources" | "securityContext" | "volumeMounts">;
  /** The shared environment (after each mode's own first variables). */
  env: EnvVar[];
  /** Pod volumes. */
  volumes: Volume[];
}

/**
 * Assembles what the agent Job and the DaemonSet pods share, validating every value.
 *
 * @param options the shared knobs
 * @param mode defaults, GPU, log prefix, host networking
 * @returns the parts
 * @throws {UsageError} when a value cannot go into a pod
 */
export function agentPodParts(options: PodOptions, mode: PodMode): PodParts {
  const { privileged = true } = options;
  const security = podSecurity(
    privileged,
    mode.hostNetwork === undefined ? {} : { hostNetwork: mode.hostNetwork },
  );
  const { volumes, mounts } = podVolumes(privileged, options.os);
  return {
    host: security.host,
    placement: podPlacement(options),
    podSecurityContext: security.pod,
    container: {
      image: validateImage(options.image),
      resources: podResources({
        defaults: mode.defaults,
        gpu: mode.gpu,
        ...(options.requests ? { requests: options.requests } : {}),
        ...(options.limits ? { limits: options.limits } : {}),
      }),
      securityContext: security.container,
      volumeMounts: mounts,
    },
    env: commonEnv({
      logPrefix: mode.logPrefix,
      ...(options.maxNodesPerEntry !== undefined
        ? { maxNodesPerEntry: options.maxNodesPerEntry }
        : {}),
      ...(options.runtimeClass !== undefined ? { runtimeClass: options.runtimeClass } : {}),
    }),
    volumes,
  };
}
