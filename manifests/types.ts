/**
 * Minimal plain types of the Kubernetes objects aicr builds, shaped exactly like
 * their JSON (only the fields aicr sets). Kept free of `@kubernetes/client-node` so
 * the core never depends on the client's classes.
 *
 * @module
 */
import type { ObjectMeta as KubeObjectMeta } from "../kube/mod.ts";
import type { Labels } from "./names.ts";

/**
 * `metadata` of an object aicr creates: the one object-metadata type of `kube/`, the fields aicr
 * sets, with the name required.
 */
export type ObjectMeta = Pick<KubeObjectMeta, "namespace" | "labels" | "annotations"> & {
  /** Object name. */
  name: string;
};

/** Pod template `metadata`. */
export interface TemplateMeta {
  /** Labels of the pods. */
  labels: Labels;
  /** Annotations of the pods. */
  annotations?: Record<string, string>;
}

/** Resource name → quantity, e.g. `{ cpu: "1", memory: "4Gi" }`. */
export type ResourceList = Record<string, string>;

/** `resources` of a container. */
export interface ResourceRequirements {
  /** Requests. */
  requests: ResourceList;
  /** Limits. */
  limits: ResourceList;
}

/** A toleration. */
export interface Toleration {
  /** Taint key; absent with `Exists` tolerates every key. */
  key?: string;
  /** `Equal` or `Exists`. */
  operator: "Equal" | "Exists";
  /** Taint value (only with `Equal`). */
  value?: string;
  /** Taint effect; absent tolerates every effect. */
  effect?: "NoSchedule" | "PreferNoSchedule" | "NoExecute";
}

/** One environment variable, literal or from the downward API. */
export interface EnvVar {
  /** Name. */
  name: string;
  /** Literal value. */
  value?: string;
  /** Downward API source. */
  valueFrom?: { fieldRef: { fieldPath: string } };
}

/** A Linux seccomp profile reference. */
export interface SeccompProfile {
  /** Only `RuntimeDefault` is used. */
  type: "RuntimeDefault";
}

/** Container `securityContext`. */
export interface SecurityContext {
  /** Privileged container. */
  privileged?: boolean;
  /** Refuse to start as root. */
  runAsNonRoot?: boolean;
  /** User ID. */
  runAsUser?: number;
  /** Group ID. */
  runAsGroup?: number;
  /** setuid and friends. */
  allowPrivilegeEscalation?: boolean;
  /** Read-only root filesystem. */
  readOnlyRootFilesystem?: boolean;
  /** Capabilities to add and drop. */
  capabilities?: { add?: string[]; drop?: string[] };
  /** Seccomp profile. */
  seccompProfile?: SeccompProfile;
}

/** Pod `securityContext`. */
export interface PodSecurityContext {
  /** Refuse to start as root. */
  runAsNonRoot?: boolean;
  /** User ID. */
  runAsUser?: number;
  /** Group ID. */
  runAsGroup?: number;
  /** Volume group. */
  fsGroup?: number;
  /** When to chown volumes. */
  fsGroupChangePolicy?: "OnRootMismatch" | "Always";
  /** Seccomp profile. */
  seccompProfile?: SeccompProfile;
}

/** A volume mount. */
export interface VolumeMount {
  /** Volume name. */
  name: string;
  /** Path in the container. */
  mountPath: string;
  /** Mount read-only. */
  readOnly?: boolean;
}

/** The hostPath types aicr uses. */
export type HostPathType = "Directory" | "File" | "DirectoryOrCreate";

/** A volume: emptyDir, hostPath or secret. */
export interface Volume {
  /** Volume name. */
  name: string;
  /** Scratch space. */
  emptyDir?: Record<string, never>;
  /** A host path. */
  hostPath?: { path: string; type: HostPathType };
  /** A Secret's keys as files. */
  secret?: { secretName: string; defaultMode?: number };
}

/** An HTTP(S) probe. */
export interface Probe {
  /** The request. */
  httpGet: { path: string; port: number; scheme: "HTTP" | "HTTPS" };
  /** Delay before the first probe. */
  initialDelaySeconds?: number;
  /** Interval. */
  periodSeconds?: number;
  /** Per-probe timeout. */
  timeoutSeconds?: number;
  /** Failures before acting. */
  failureThreshold?: number;
}

/** A container port. */
export interface ContainerPort {
  /** Port name. */
  name: string;
  /** Port number. */
  containerPort: number;
  /** Protocol. */
  protocol: "TCP";
}

/** A container. */
export interface Container {
  /** Name. */
  name: string;
  /** Image reference. */
  image: string;
  /** Entrypoint. */
  command: string[];
  /** Arguments. */
  args: string[];
  /** Environment. */
  env: EnvVar[];
  /** Ports. */
  ports?: ContainerPort[];
  /** Requests and limits. */
  resources: ResourceRequirements;
  /** Security context. */
  securityContext: SecurityContext;
  /** Mounts. */
  volumeMounts: VolumeMount[];
  /** Liveness probe. */
  livenessProbe?: Probe;
  /** Readiness probe. */
  readinessProbe?: Probe;
  /** The file whose content the kubelet reports as the termination message. */
  terminationMessagePath?: string;
  /** `File` (the default) or `FallbackToLogsOnError`: the log's tail as the message on a failure. */
  terminationMessagePolicy?: "File" | "FallbackToLogsOnError";
}

/** One requirement of a node selector term (`kubectl`'s set-based label selector, on nodes). */
export interface NodeSelectorRequirement {
  /** The label key. */
  key: string;
  /** How the label is compared. */
  operator: "In" | "NotIn" | "Exists" | "DoesNotExist" | "Gt" | "Lt";
  /** The values (`In`, `NotIn`: one or more; `Gt`, `Lt`: one integer; none otherwise). */
  values?: string[];
}

/** One node selector term: its requirements all hold (AND). */
export interface NodeSelectorTerm {
  /** Requirements on the node's labels. */
  matchExpressions?: NodeSelectorRequirement[];
}

/** Node affinity: required terms (any one, OR) and preferred ones (weighted). */
export interface NodeAffinity {
  /** A node must match one of these terms. */
  requiredDuringSchedulingIgnoredDuringExecution?: { nodeSelectorTerms: NodeSelectorTerm[] };
  /** Nodes matching these terms score higher. */
  preferredDuringSchedulingIgnoredDuringExecution?: {
    weight: number;
    preference: NodeSelectorTerm;
  }[];
}

/** One weighted pod (anti-)affinity term. */
export interface WeightedPodAffinityTerm {
  /** 1 to 100. */
  weight: number;
  /** The pods, and the topology they are counted in. */
  podAffinityTerm: { labelSelector: { matchLabels: Labels }; topologyKey: string };
}

/** A pod's affinity. */
export interface Affinity {
  /** Which nodes. */
  nodeAffinity?: NodeAffinity;
  /** Away from which pods. */
  podAntiAffinity?: { preferredDuringSchedulingIgnoredDuringExecution: WeightedPodAffinityTerm[] };
}

/** A pod spec. */
export interface PodSpec {
  /** ServiceAccount the pod runs as. */
  serviceAccountName: string;
  /** `Never` for the Job, `Always` for the DaemonSet. */
  restartPolicy: "Never" | "Always";
  /** Host PID namespace. */
  hostPID?: boolean;
  /** Host network namespace. */
  hostNetwork?: boolean;
  /** Host IPC namespace. */
  hostIPC?: boolean;
  /** DNS policy (set with host networking). */
  dnsPolicy?: "ClusterFirst" | "ClusterFirstWithHostNet";
  /** Node selector. */
  nodeSelector?: Record<string, string>;
  /** Tolerations. */
  tolerations: Toleration[];
  /** Pull secrets. */
  imagePullSecrets?: { name: string }[];
  /** Runtime class (e.g. `nvidia`). */
  runtimeClassName?: string;
  /** Priority class (scheduling order and preemption). */
  priorityClassName?: string;
  /** Node and pod (anti-)affinity. */
  affinity?: Affinity;
  /** How long the containers get between SIGTERM and SIGKILL. */
  terminationGracePeriodSeconds?: number;
  /** Pod security context. */
  securityContext: PodSecurityContext;
  /** Containers. */
  containers: Container[];
  /** Volumes. */
  volumes: Volume[];
}

/** A Job manifest. */
export interface JobManifest {
  /** `batch/v1`. */
  apiVersion: "batch/v1";
  /** `Job`. */
  kind: "Job";
  /** Metadata. */
  metadata: ObjectMeta;
  /** Spec. */
  spec: {
    /** Always 1. */
    completions: number;
    /** Always 1. */
    parallelism: number;
    /** `NonIndexed`. */
    completionMode: "NonIndexed";
    /** Always 0: the first pod failure fails the Job. */
    backoffLimit: number;
    /** Garbage collection after finishing. */
    ttlSecondsAfterFinished: number;
    /** Hard deadline of the whole Job. */
    activeDeadlineSeconds: number;
    /** The pod template. */
    template: { metadata: TemplateMeta; spec: PodSpec };
  };
}

/** A DaemonSet manifest. */
export interface DaemonSetManifest {
  /** `apps/v1`. */
  apiVersion: "apps/v1";
  /** `DaemonSet`. */
  kind: "DaemonSet";
  /** Metadata. */
  metadata: ObjectMeta;
  /** Spec. */
  spec: {
    /** Selects the pods (immutable). */
    selector: { matchLabels: Labels };
    /** Rolling update, one node at a time. */
    updateStrategy: { type: "RollingUpdate"; rollingUpdate: { maxUnavailable: number } };
    /** The pod template. */
    template: { metadata: TemplateMeta; spec: PodSpec };
  };
}

/** A Deployment manifest (the in-cluster signer). */
export interface DeploymentManifest {
  /** `apps/v1`. */
  apiVersion: "apps/v1";
  /** `Deployment`. */
  kind: "Deployment";
  /** Metadata. */
  metadata: ObjectMeta;
  /** Spec. */
  spec: {
    /** Pods. */
    replicas: number;
    /** Old ReplicaSets kept for a rollback. */
    revisionHistoryLimit: number;
    /** Selects the pods (immutable). */
    selector: { matchLabels: Labels };
    /** Rolling update: a new pod before an old one goes. */
    strategy: {
      type: "RollingUpdate";
      rollingUpdate: { maxSurge: number; maxUnavailable: number };
    };
    /** The pod template. */
    template: { metadata: TemplateMeta; spec: PodSpec };
  };
}

/** A Lease manifest (`coordination.k8s.io/v1`), created empty: the holder writes its spec. */
export interface LeaseManifest {
  /** `coordination.k8s.io/v1`. */
  apiVersion: "coordination.k8s.io/v1";
  /** `Lease`. */
  kind: "Lease";
  /** Metadata. */
  metadata: ObjectMeta;
  /** Nobody holds it yet. */
  spec: Record<string, never>;
}
