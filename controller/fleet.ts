/**
 * DaemonSet mode, the fleet fetch: every targeted node's snapshot from its daemon, concurrently
 * with a bound, each node with its own status (ok, not ready, unreachable, denied, timed out).
 *
 * The design is daemon/README.md's "How the CLI reaches the daemons" and "Per-node identity":
 * pending daemon certificate requests are signed first (by the in-cluster signer, or here through
 * `csr/` when none runs and the caller may), and daemons about to turn Ready are waited for
 * (`fleet_signing.ts`); then, per node and within the same concurrency bound, one TokenRequest token for the reader
 * ServiceAccount with that node's audience (`aicr-daemon:<node>`) bound to that Node object
 * (10 minutes), so the user's own credential never reaches a node and no daemon can replay
 * what it received to another; then either **direct** (`https://<podIP>:<port>`, the
 * certificate verified against the install's CA and required to name the node asked), or the
 * API server's **pod proxy** (token in `X-Aicr-Authorization`, because the proxy drops
 * `Authorization`). Either way the snapshot's `source-node` must be the node asked: a mismatch
 * is that node's `wrong-identity`. `auto` tries direct on one pod and falls back to the proxy
 * for all when that pod cannot be reached.
 *
 * This module picks the nodes and the transport and runs the fetch; one node's fetch is in
 * `fleet_node.ts`, the direct HTTPS transport in `fleet_transport.ts`, and what the result
 * becomes (stream, status table, error) in `fleet_result.ts`.
 *
 * @module
 */
import { mapConcurrent, sleep as sleepFor } from "../io.ts";
import type { KubeClient } from "../kube/mod.ts";
import type { Logger } from "../log.ts";
import { daemonReaderName, DEFAULT_DAEMON_NAME } from "../manifests/mod.ts";
import type { Toleration } from "../manifests/mod.ts";
import { buildInfo } from "../version.ts";
import type { BuildInfo } from "../version.ts";
import { fetchNodeSnapshot, isConnectFailure } from "./fleet_node.ts";
import type { NodeFetch, NodeResult } from "./fleet_node.ts";
import type { FleetResult } from "./fleet_result.ts";
import { readClusterTopology } from "./fleet_topology.ts";
import type { FleetTopology } from "./fleet_topology.ts";
import { DEFAULT_MAX_ANSWER_BYTES, nodeDirectGet, readDaemonCa } from "./fleet_transport.ts";
import type { DirectGet } from "./fleet_transport.ts";
import { daemonPods } from "./install.ts";
import { signAndAwaitReady } from "./fleet_signing.ts";
import { imageVersion, warnVersionSkew } from "./version_skew.ts";
import type { DaemonPlacement, DaemonPodState } from "./install.ts";

export {
  AnswerTooLargeError,
  DEFAULT_MAX_ANSWER_BYTES,
  nodeDirectGet,
  readDaemonCa,
} from "./fleet_transport.ts";
export type { DirectGet, DirectRequest, HttpAnswer } from "./fleet_transport.ts";
export { mintReaderToken } from "./fleet_node.ts";
export type { NodeResult, NodeStatus } from "./fleet_node.ts";
export { fleetError, fleetStream, formatFleetTable } from "./fleet_result.ts";
export type { FleetResult } from "./fleet_result.ts";

/** How the CLI reaches the daemons. */
export type FleetTransport = "auto" | "direct" | "proxy";

/** Every transport value, for flag validation. */
export const FLEET_TRANSPORTS: readonly FleetTransport[] = ["auto", "direct", "proxy"];

/** What a fetch needs. */
export interface FleetDeps {
  /** The client (the caller's kubeconfig identity). */
  kube: KubeClient;
  /** Logger. */
  log: Logger;
  /** The direct transport. @default node:https */
  directGet?: DirectGet;
  /** Milliseconds clock. @default performance.now */
  clock?: () => number;
  /** Sleep (429 retry). @default setTimeout */
  sleep?: (ms: number, signal?: AbortSignal) => Promise<void>;
  /** Wall clock, for the certificates signed on the way. @default new Date() */
  now?: () => Date;
  /** The build every daemon must be. @default this binary's */
  build?: BuildInfo;
}

/** Options of {@link fetchFleet}. */
export interface FleetOptions {
  /** The daemon's namespace. */
  namespace: string;
  /** The daemon's name. @default "aicr-daemon" */
  name?: string;
  /** `--transport`. @default "auto" */
  transport?: FleetTransport;
  /** Nodes asked at once. @default 16 */
  concurrency?: number;
  /** Per-node deadline. @default 30000 */
  timeoutMs?: number;
  /** Direct connect timeout (also what `auto` waits before falling back). @default 2000 */
  connectTimeoutMs?: number;
  /** The largest answer read from one daemon (streamed, then cut). @default 16 MiB */
  maxAnswerBytes?: number;
  /** Only these nodes. @default every node with a daemon pod */
  nodes?: readonly string[];
  /** SIGINT/SIGTERM. */
  signal?: AbortSignal;
  /**
   * Takes each asked node's result as soon as it is known (the snapshot with it, when ok), with
   * the node's position in name order. When given, the returned results carry no snapshots:
   * the fetch keeps a small summary per node and memory stays bounded by the answers in flight
   * (see `createFleetWriter`). A rejection ends the fetch after the nodes in flight.
   */
  onResult?: (result: NodeResult, position: number) => Promise<void>;
  /**
   * List the nodes once, as the reader, for the cluster's NodeTopology (each daemon reports its
   * own Node only; see `fleet_topology.ts`). @default true
   */
  topology?: boolean;
}

/**
 * The `auto` transport: one ready pod is fetched directly; when that cannot connect, the fleet
 * is fetched through the API server's pod proxy. A probe that connected keeps its result (at
 * its index in `results`).
 *
 * @returns the transport for the rest of the fleet
 */
async function probeDirect(
  sorted: readonly DaemonPodState[],
  results: NodeResult[],
  deps: {
    fetchNode: (pod: DaemonPodState, via: "direct" | "proxy") => Promise<NodeResult>;
    log: Logger;
  },
): Promise<"direct" | "proxy"> {
  const probeIndex = sorted.findIndex((p) => p.ready && p.ip && p.port !== undefined);
  if (probeIndex < 0) return "direct";
  const first = await deps.fetchNode(sorted[probeIndex] as DaemonPodState, "direct");
  if (isConnectFailure(first)) {
    deps.log.info("daemons not reachable directly; using the API server's pod proxy", {
      node: first.node,
      error: first.error ?? "",
    });
    return "proxy";
  }
  results[probeIndex] = first;
  return "direct";
}

/**
 * Fetches every targeted node's snapshot. Never throws for one node's failure: each node gets
 * its status. Throws only when nothing can be asked (no CA, no token, no pods readable).
 *
 * @param deps client, logger, transport, clock
 * @param options namespace, name, transport, bounds, node filter, signal
 * @returns one result per node and the transport used
 * @throws {NotFoundError} when the daemon is not installed
 * @throws {PermissionError} when the reader token cannot be minted
 */
export async function fetchFleet(deps: FleetDeps, options: FleetOptions): Promise<FleetResult> {
  const { kube, log } = deps;
  const {
    name = DEFAULT_DAEMON_NAME,
    transport = "auto",
    concurrency = 16,
    timeoutMs = 30_000,
    connectTimeoutMs = 2000,
    maxAnswerBytes = DEFAULT_MAX_ANSWER_BYTES,
    signal,
    namespace,
  } = options;
  const clock = deps.clock ?? (() => performance.now());
  // Late joiners' certificates: signed by the signer, or here; those about to be Ready awaited.
  const wanted = options.nodes ? new Set(options.nodes) : undefined;
  const call = { namespace, name, ...(signal ? { signal } : {}) };
  await signAndAwaitReady(deps, { ...call, timeoutMs, ...(wanted ? { nodes: wanted } : {}) });
  const [ca, listed] = await Promise.all([
    transport === "proxy" ? Promise.resolve("") : readDaemonCa(kube, { namespace, name }),
    daemonPods(kube, call),
  ]);
  warnVersionSkew(log, skewOf(listed.pods, buildInfo().version), buildInfo().version, namespace);
  const pods = listed.pods.filter((p) => p.node !== "" && (!wanted || wanted.has(p.node)));
  const missing = await missingNodes(deps, listed, wanted);
  const node: NodeFetch = {
    kube,
    namespace,
    ca,
    reader: daemonReaderName(name),
    nodeBinding: { supported: true },
    connectTimeoutMs,
    timeoutMs,
    maxAnswerBytes,
    directGet: deps.directGet ?? nodeDirectGet,
    clock,
    sleep: deps.sleep ?? sleepFor,
    ...(signal ? { signal } : {}),
    build: deps.build ?? buildInfo(),
  };
  const fetchNode = (pod: DaemonPodState, via: "direct" | "proxy") =>
    fetchNodeSnapshot(node, pod, via);
  // Once per fetch, beside the nodes: the daemons report their own Node only.
  const topology = options.topology === false
    ? undefined
    : startClusterTopology(deps, { namespace, reader: node.reader, ...(signal ? { signal } : {}) });
  const sorted = [...pods].sort((a, b) => a.node.localeCompare(b.node));
  const results: NodeResult[] = new Array(sorted.length);
  const via = transport === "auto"
    ? await probeDirect(sorted, results, { fetchNode, log })
    : transport;
  const settle = async (index: number, result: NodeResult) => {
    if (!options.onResult) return void (results[index] = result);
    await options.onResult(result, index);
    const { snapshot: _handedOver, ...summary } = result;
    results[index] = summary;
  };
  const rest = sorted.map((pod, index) => ({ pod, index })).filter(({ index }) =>
    results[index] === undefined
  );
  const probed = results.findIndex((r) => r !== undefined);
  if (probed >= 0) await settle(probed, results[probed] as NodeResult);
  log.debug("fetching the fleet", { nodes: sorted.length, transport: via, concurrency });
  await mapConcurrent(rest, concurrency, async ({ pod, index }) => {
    await settle(index, await fetchNode(pod, via));
  });
  if (!node.nodeBinding.supported) {
    log.warn(
      "the API server cannot bind tokens to a Node (before 1.31): each reader token carries only its node's audience",
    );
  }
  const absent = absentResults(missing, wanted !== undefined);
  const cluster = await topology;
  return {
    results: [...results, ...absent].sort((a, b) => a.node.localeCompare(b.node)),
    transport: via,
    missingPods: missing.length,
    ...(cluster ? { topology: cluster } : {}),
  };
}

/** Lists the cluster's NodeTopology once, and warns when it cannot (the nodes are kept). */
async function startClusterTopology(
  deps: FleetDeps,
  options: { namespace: string; reader: string; signal?: AbortSignal },
): Promise<FleetTopology> {
  const topology = await readClusterTopology({ kube: deps.kube, log: deps.log }, {
    ...options,
    version: buildInfo().version,
    now: (deps.now ?? (() => new Date()))(),
  });
  if (topology.status !== "ok") {
    deps.log.warn(
      "cannot list the nodes for the cluster's NodeTopology; the node snapshots are kept",
      {
        status: topology.status,
        error: topology.message ?? "",
        remedy:
          `grant 'list nodes' to ServiceAccount ${options.namespace}/${options.reader} (reinstall the daemon) or to the caller`,
      },
    );
  }
  return topology;
}

/** Targeted nodes without a daemon pod, each its own not-ready result. */
function absentResults(missing: readonly string[], asked: boolean): NodeResult[] {
  return missing.map((node): NodeResult => ({
    node,
    pod: "",
    status: "not-ready",
    error: asked
      ? "no daemon pod on this node (not targeted, or not scheduled yet)"
      : "no daemon pod on this node yet",
    durationMs: 0,
  }));
}

/** The versions other than `version` the daemons' images say. */
function skewOf(pods: readonly DaemonPodState[], version: string): string[] {
  return [...new Set(pods.flatMap((p) => imageVersion(p.image) ?? []))].filter((v) =>
    v !== version
  );
}

/** Targeted nodes that have no daemon pod: the asked-for ones, or those the placement targets. */
async function missingNodes(
  deps: FleetDeps,
  listed: Awaited<ReturnType<typeof daemonPods>>,
  wanted: Set<string> | undefined,
): Promise<string[]> {
  const { kube, log } = deps;
  const withPod = new Set(listed.pods.map((p) => p.node));
  const missingCount = Math.max(0, (listed.desired ?? 0) - listed.pods.length);
  return wanted
    ? [...wanted].filter((node) => !withPod.has(node))
    : missingCount > 0 && listed.placement
    ? await targetedNodes(kube, listed.placement).then(
      (nodes) => nodes.filter((node) => !withPod.has(node)),
      (error) => {
        log.warn("targeted nodes without a daemon pod (cannot list nodes to name them)", {
          count: missingCount,
          error: error instanceof Error ? error.message.split("\n")[0] : String(error),
        });
        return [];
      },
    )
    : [];
}

/**
 * The tolerations the DaemonSet controller adds to every daemon pod (so node conditions do not
 * keep a daemon off its node).
 */
const DAEMONSET_TOLERATIONS: readonly Toleration[] = [
  { key: "node.kubernetes.io/not-ready", operator: "Exists", effect: "NoExecute" },
  { key: "node.kubernetes.io/unreachable", operator: "Exists", effect: "NoExecute" },
  { key: "node.kubernetes.io/disk-pressure", operator: "Exists", effect: "NoSchedule" },
  { key: "node.kubernetes.io/memory-pressure", operator: "Exists", effect: "NoSchedule" },
  { key: "node.kubernetes.io/pid-pressure", operator: "Exists", effect: "NoSchedule" },
  { key: "node.kubernetes.io/unschedulable", operator: "Exists", effect: "NoSchedule" },
  { key: "node.kubernetes.io/network-unavailable", operator: "Exists", effect: "NoSchedule" },
];

/** A node taint. */
interface Taint {
  key: string;
  value?: string;
  effect: string;
}

function tolerated(tolerations: readonly Toleration[], taint: Taint): boolean {
  return tolerations.some((t) => {
    if (t.effect !== undefined && t.effect !== taint.effect) return false;
    if (t.operator === "Exists") return t.key === undefined || t.key === taint.key;
    return t.key === taint.key && (t.value ?? "") === (taint.value ?? "");
  });
}

/**
 * The nodes a DaemonSet targets: its node selector matches and every NoSchedule/NoExecute taint
 * is tolerated (with the controller's own tolerations added).
 *
 * @param kube the client
 * @param placement the DaemonSet's node selector and tolerations
 * @returns the node names
 * @throws {KubeApiError} when nodes cannot be listed
 */
async function targetedNodes(kube: KubeClient, placement: DaemonPlacement): Promise<string[]> {
  const selector = Object.entries(placement.nodeSelector).map(([k, v]) => `${k}=${v}`).join(",");
  const nodes = await kube.listAll("Node", undefined, {
    ...(selector ? { labelSelector: selector } : {}),
    timeoutMs: 10_000,
  });
  const tolerations = [...placement.tolerations, ...DAEMONSET_TOLERATIONS];
  return nodes.filter((node) => {
    const taints = ((node.spec as { taints?: Taint[] } | undefined)?.taints ?? [])
      .filter((t) => t.effect === "NoSchedule" || t.effect === "NoExecute");
    return taints.every((taint) => tolerated(tolerations, taint));
  }).map((node) => node.metadata?.name ?? "").filter((name) => name !== "");
}
