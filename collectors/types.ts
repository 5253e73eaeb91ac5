/**
 * The narrow interfaces the collectors depend on: readers of the host, of processes,
 * of the Kubernetes API and of systemd. Real implementations live at the edges
 * (`host.ts`, `dbus.ts`, and the lead's `kube/`); tests pass in-memory fakes.
 *
 * @module
 */
import type { ObjectMeta } from "../kube/mod.ts";
import type { Logger } from "../log.ts";
import type { Measurement, MeasurementType, SourceStatus } from "../snapshot/mod.ts";

/** Names of the five collectors, as used in options and reports. */
export type CollectorName = "k8s" | "gpu" | "os" | "systemd" | "topology";

/** Every collector name, in canonical (measurement) order. */
export const COLLECTOR_NAMES: readonly CollectorName[] = [
  "k8s",
  "gpu",
  "os",
  "systemd",
  "topology",
];

/** Which measurement type each collector produces. */
export const COLLECTOR_TYPES: Readonly<Record<CollectorName, MeasurementType>> = {
  k8s: "K8s",
  gpu: "GPU",
  os: "OS",
  systemd: "SystemD",
  topology: "NodeTopology",
};

/** Upstream per-collector timeouts in milliseconds. */
export const DEFAULT_TIMEOUTS_MS: Readonly<Record<CollectorName, number>> = {
  k8s: 60_000,
  gpu: 10_000,
  os: 10_000,
  systemd: 10_000,
  topology: 90_000,
};

/** One directory entry returned by {@link HostReader.readDir}. */
export interface DirEntry {
  /** Base name. */
  name: string;
  /** A regular file (symlinks are not followed). */
  isFile: boolean;
  /** A directory (symlinks are not followed). */
  isDirectory: boolean;
  /** A symbolic link. */
  isSymlink: boolean;
}

/**
 * Reads files of the host. All paths are absolute host paths; an implementation may
 * prefix a host root (e.g. `/host` in a pod, or a fixture tree in tests).
 */
export interface HostReader {
  /**
   * Reads a whole file.
   *
   * @throws {NotFoundError} when the file does not exist
   * @throws {PermissionError} when it cannot be read
   * @throws {FileTooLargeError} when it has more than `maxBytes` bytes
   * @throws {ToolError} on any other failure
   */
  readFile(path: string, maxBytes?: number): Promise<Uint8Array>;
  /**
   * Lists a directory without following symlinks.
   *
   * @throws {NotFoundError} / {PermissionError} / {ToolError} like readFile
   */
  readDir(path: string): Promise<DirEntry[]>;
  /** Whether a path exists (false on any error). */
  exists(path: string): Promise<boolean>;
  /**
   * Reads many small text files in one go (the sysctl walk's): each file's UTF-8 text, or
   * undefined where the file cannot be read, has more than `maxBytes` bytes or is not valid
   * UTF-8. Optional: without it, each file is read with {@link readFile}.
   */
  readTexts?(paths: readonly string[], maxBytes: number): Promise<(string | undefined)[]>;
}

/** Options of {@link CommandRunner.run}. */
export interface RunOptions {
  /** Kill the process and throw {@link TimeoutError} after this many milliseconds. */
  timeoutMs: number;
  /** Abort (kill) the process early. */
  signal?: AbortSignal;
  /** Fail when stdout grows beyond this (default 64 MiB). */
  maxOutputBytes?: number;
}

/** What a finished process gave back. */
export interface RunResult {
  /** Exit code (128 + signal number when killed by a signal). */
  exitCode: number;
  /** Raw standard output. */
  stdout: Uint8Array;
  /** Standard error as text (bounded). */
  stderr: string;
}

/** Runs an executable found on PATH (or given absolutely). */
export interface CommandRunner {
  /**
   * Runs a command to completion.
   *
   * @throws {NotFoundError} when the executable is not on PATH
   * @throws {TimeoutError} when `timeoutMs` passes or `signal` aborts
   * @throws {ToolError} when it cannot be started or its output is too large
   */
  run(command: string, args: string[], options: RunOptions): Promise<RunResult>;
}

/** A D-Bus value with its signature, as systemd answered it. */
export interface DbusValue {
  /** The D-Bus type signature of the value, e.g. `s`, `t`, `as`, `a(sasbttttuii)`. */
  signature: string;
  /**
   * The decoded value: `string` (s, o, g), `boolean` (b), `number` (y n q i u d h and
   * x/t when safe), `bigint` (x/t beyond 2^53), arrays (`a…`: JS arrays; `a{…}`: arrays
   * of `[key, value]` pairs; structs: arrays), and {@link DbusValue} for variants.
   */
  value: unknown;
}

/** Reads systemd unit properties. */
export interface SystemdBus {
  /**
   * Every property of a unit (`Properties.GetAll` with an empty interface name).
   *
   * @throws {UnavailableError} when systemd cannot be reached (no socket, auth refused)
   * @throws {ToolError} when the call for this unit fails
   */
  getUnitProperties(unit: string, signal?: AbortSignal): Promise<Record<string, DbusValue>>;
  /** Closes the connection, if one was opened. */
  close(): Promise<void>;
}

/** Object metadata, as much as the collectors read: the one object-metadata type of `kube/`. */
export type KubeObjectMeta = Pick<ObjectMeta, "name" | "namespace" | "labels">;

/** A container or init/ephemeral container: only its image is read. */
export interface KubeContainer {
  /** Image reference, e.g. `registry.k8s.io/kube-apiserver:v1.33.5`. */
  image?: string;
  /** Container name. */
  name?: string;
}

/** A Pod, reduced to what `K8s.image` reads. */
export interface KubePod {
  /** Metadata. */
  metadata?: KubeObjectMeta;
  /** Spec. */
  spec?: {
    containers?: KubeContainer[];
    initContainers?: KubeContainer[];
    ephemeralContainers?: KubeContainer[];
  };
}

/** A taint on a node. */
export interface KubeTaint {
  /** Taint key. */
  key: string;
  /** Taint value (may be absent). */
  value?: string;
  /** `NoSchedule`, `PreferNoSchedule` or `NoExecute`. */
  effect: string;
}

/** A Node, reduced to what `K8s.node` and `NodeTopology` read. */
export interface KubeNode {
  /** Metadata (name, labels). */
  metadata?: KubeObjectMeta;
  /** Spec. */
  spec?: { providerID?: string; taints?: KubeTaint[] };
  /** Status. */
  status?: {
    nodeInfo?: {
      containerRuntimeVersion?: string;
      kubeletVersion?: string;
      kernelVersion?: string;
      operatingSystem?: string;
      osImage?: string;
    };
  };
}

/** A DaemonSet, reduced to what the OKE detection reads. */
export interface KubeDaemonSet {
  /** Metadata. */
  metadata?: KubeObjectMeta;
  /** Spec: the pod template's containers. */
  spec?: { template?: { spec?: { containers?: KubeContainer[] } } };
}

/** Any object as plain JSON (custom resources). */
export interface KubeObject {
  /** apiVersion. */
  apiVersion?: string;
  /** kind. */
  kind?: string;
  /** Metadata. */
  metadata?: KubeObjectMeta;
  /** Spec, untyped. */
  spec?: unknown;
  /** Other fields. */
  [field: string]: unknown;
}

/** Answer of `GET /version`. */
export interface KubeServerVersion {
  /** e.g. `v1.33.5-eks-3025e55`. */
  gitVersion?: string;
  /** e.g. `linux/amd64`. */
  platform?: string;
  /** e.g. `go1.24.4`. */
  goVersion?: string;
}

/** One API resource from discovery (`ServerPreferredResources`). */
export interface KubeApiResource {
  /** API group, `""` for core. */
  group: string;
  /** Version, e.g. `v1`. */
  version: string;
  /** Kind, e.g. `ClusterPolicy`. */
  kind: string;
  /** Plural resource name, e.g. `clusterpolicies`; subresources contain a `/`. */
  plural: string;
  /** Whether the resource is namespaced. */
  namespaced: boolean;
}

/** Options of a paginated list call. */
export interface ListOptions {
  /** Page size (`limit`). */
  limit?: number;
  /** Continue token from the previous page. */
  continue?: string;
  /** Cancels the call. */
  signal?: AbortSignal;
}

/** One page of a list. */
export interface ListPage<T> {
  /** The items of this page. */
  items: T[];
  /** The token for the next page; absent or empty on the last page. */
  continue?: string;
}

/**
 * The Kubernetes reads the K8s and NodeTopology collectors make. Implemented by
 * `kube/` with @kubernetes/client-node; every list is cluster-wide (all namespaces).
 * Errors are ToolErrors: {@link PermissionError} for 403, {@link NotFoundError} for
 * 404, {@link UnavailableError} for connection problems.
 */
export interface ClusterReader {
  /** `GET /version`. */
  serverVersion(signal?: AbortSignal): Promise<KubeServerVersion>;
  /** `GET /api/v1/pods` across all namespaces, one page. */
  listPods(options?: ListOptions): Promise<ListPage<KubePod>>;
  /** `GET /api/v1/nodes/<name>`. */
  getNode(name: string, signal?: AbortSignal): Promise<KubeNode>;
  /** `GET /api/v1/nodes`, one page. */
  listNodes(options?: ListOptions): Promise<ListPage<KubeNode>>;
  /**
   * Discovery: the preferred version of every resource of every group. Partial
   * results (some groups failing) are returned, not thrown.
   */
  listApiResources(signal?: AbortSignal): Promise<KubeApiResource[]>;
  /** `GET /apis/<group>/<version>/<plural>` across all namespaces, one page. */
  listCustomObjects(
    group: string,
    version: string,
    plural: string,
    options?: ListOptions,
  ): Promise<ListPage<KubeObject>>;
  /** `GET /apis/apps/v1/daemonsets` across all namespaces, one page. */
  listDaemonSets(options?: ListOptions): Promise<ListPage<KubeDaemonSet>>;
}

/** What the collectors are given. */
export interface CollectorDeps {
  /** Host files. */
  host: HostReader;
  /** Processes (nvidia-smi). */
  exec: CommandRunner;
  /** The Kubernetes API; absent when there is no client (no kubeconfig, not in a cluster). */
  cluster?: ClusterReader;
  /** systemd over D-Bus, or a factory that connects lazily; absent means "no systemd". */
  systemd?: SystemdBus | (() => SystemdBus);
  /** Environment lookup (node name). */
  env: (name: string) => string | undefined;
  /** Logger. */
  log: Logger;
  /** Millisecond clock for durations. @default a monotonic clock (`process.hrtime`) */
  now?: () => number;
}

/** Options of {@link collectMeasurements}. */
export interface CollectOptions {
  /** systemd units to read. @default ["containerd.service", "docker.service", "kubelet.service"] */
  systemdUnits?: string[];
  /** Truncate node lists in NodeTopology to N names plus ` (+K more)`; 0 = no limit. */
  maxNodesPerEntry?: number;
  /**
   * NodeTopology of every node (`cluster`: one LIST, the Job's agent, as upstream) or of this
   * node alone (`node`: one GET of its Node, the daemon; the fleet fetch lists the cluster
   * once). @default "cluster"
   */
  topologyScope?: "cluster" | "node";
  /** Per-collector timeouts overriding {@link DEFAULT_TIMEOUTS_MS}. */
  timeoutsMs?: Partial<Record<CollectorName, number>>;
  /** Cancels every collector. */
  signal?: AbortSignal;
  /** Run only these collectors. @default all */
  only?: CollectorName[];
  /** Node name for `K8s.node`. @default NODE_NAME → KUBERNETES_NODE_NAME → HOSTNAME */
  nodeName?: string;
}

/** How one collector went. */
export interface CollectorReport {
  /** The collector. */
  collector: CollectorName;
  /** The measurement type it produced. */
  type: MeasurementType;
  /** `ok` when it returned (even with degraded subtypes), `failed` when it threw, `timeout`. */
  status: "ok" | "failed" | "timeout";
  /** Wall time in milliseconds. */
  durationMs: number;
  /** The error message when not ok. */
  error?: string;
}

/** The result of {@link collectMeasurements}. */
export interface CollectResult {
  /** One measurement per collector run, in canonical order. */
  measurements: Measurement[];
  /** One report per collector run, in canonical order. */
  reports: CollectorReport[];
}

/** Per-source status words, re-exported for collectors' convenience. */
export type { SourceStatus };
