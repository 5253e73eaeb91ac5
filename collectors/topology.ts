/**
 * The NodeTopology collector: every node's taints and labels, folded into
 * `summary`, `taint` and `label` subtypes with upstream's pipe encoding.
 *
 * Encoding (nodes sorted, comma-joined, optionally truncated to N plus ` (+K more)`):
 * - `taint`: `key: "<effect>|<value>|<nodes>"`; when a key has several distinct
 *   (effect, value) pairs, `key.<effect>: "<value>|<nodes>"`; and when one key and
 *   effect have several values (upstream's collision, decided by Go map order), each
 *   gets `key.<effect>.<value>: "<value>|<nodes>"`, so the result is deterministic.
 * - `label`: `key: "<value>|<nodes>"`; when a key has several values,
 *   `key.<value>: "<value>|<nodes>"`.
 * - `summary`: `node-count`, `taint-count`, `label-count` (ints; counts of the maps).
 *
 * Two scopes. `cluster` (the Job's agent, as upstream): one LIST of every node. `node` (the
 * DaemonSet's daemon): a GET of its own Node only, folded the same way (so `label` and `taint`
 * name that node alone), and `summary` carries `scope: node` beside `node-count: 1`, so nobody
 * reads one daemon's answer as the cluster's; `aicr daemonset fetch` collects the cluster's
 * topology once per fetch instead (`controller/fleet_topology.ts`).
 *
 * @module
 */
import { NODE_SCOPE_READING } from "../snapshot/mod.ts";
import type { Measurement, ReadingMap, SourceStatus } from "../snapshot/mod.ts";
import { listAll } from "./k8s.ts";
import { messageOf, statusOf, subtype } from "./status.ts";
import type { CollectorDeps, KubeNode } from "./types.ts";

const SOURCE = "LIST /api/v1/nodes";

/** What a NodeTopology measurement covers: every node, or the collecting node alone. */
export type TopologyScope = "cluster" | "node";

function ownSource(nodeName: string): string {
  return `GET /api/v1/nodes/${nodeName}`;
}

/**
 * Formats a node list: sorted, comma-joined, truncated to `max` names plus ` (+K more)`.
 *
 * @param nodes node names
 * @param max names kept; 0 keeps all
 * @returns the list text
 */
export function formatNodes(nodes: Iterable<string>, max = 0): string {
  const sorted = [...new Set(nodes)].sort();
  if (max > 0 && sorted.length > max) {
    return `${sorted.slice(0, max).join(",")} (+${sorted.length - max} more)`;
  }
  return sorted.join(",");
}

function addTo<K>(map: Map<K, Set<string>>, key: K, node: string): void {
  let set = map.get(key);
  if (!set) map.set(key, set = new Set());
  set.add(node);
}

/**
 * Folds nodes into the three topology subtypes' readings.
 *
 * @param nodes every node
 * @param options `maxNodesPerEntry` (0 = no limit)
 * @returns `summary`, `taint` and `label` readings
 */
export function foldTopology(
  nodes: readonly KubeNode[],
  options: { maxNodesPerEntry?: number } = {},
): { summary: ReadingMap; taint: ReadingMap; label: ReadingMap } {
  const max = options.maxNodesPerEntry ?? 0;
  // key -> effect -> value -> nodes
  const taints = new Map<string, Map<string, Map<string, Set<string>>>>();
  const labels = new Map<string, Map<string, Set<string>>>();
  for (const node of nodes) {
    const name = node.metadata?.name ?? "";
    for (const taint of node.spec?.taints ?? []) {
      let byEffect = taints.get(taint.key);
      if (!byEffect) taints.set(taint.key, byEffect = new Map());
      let byValue = byEffect.get(taint.effect);
      if (!byValue) byEffect.set(taint.effect, byValue = new Map());
      addTo(byValue, taint.value ?? "", name);
    }
    for (const [key, value] of Object.entries(node.metadata?.labels ?? {})) {
      let byValue = labels.get(key);
      if (!byValue) labels.set(key, byValue = new Map());
      addTo(byValue, value, name);
    }
  }
  const taint: ReadingMap = {};
  for (const key of [...taints.keys()].sort()) {
    const byEffect = taints.get(key)!;
    const combos = [...byEffect.values()].reduce((n, byValue) => n + byValue.size, 0);
    for (const effect of [...byEffect.keys()].sort()) {
      const byValue = byEffect.get(effect)!;
      for (const value of [...byValue.keys()].sort()) {
        const list = formatNodes(byValue.get(value)!, max);
        if (combos === 1) taint[key] = `${effect}|${value}|${list}`;
        else if (byValue.size === 1) taint[`${key}.${effect}`] = `${value}|${list}`;
        else taint[`${key}.${effect}.${value}`] = `${value}|${list}`;
      }
    }
  }
  const label: ReadingMap = {};
  for (const key of [...labels.keys()].sort()) {
    const byValue = labels.get(key)!;
    for (const value of [...byValue.keys()].sort()) {
      const list = formatNodes(byValue.get(value)!, max);
      const target = byValue.size === 1 ? key : `${key}.${value}`;
      // A real label key equal to a disambiguated one keeps the first writer (sorted order).
      if (!(target in label)) label[target] = `${value}|${list}`;
    }
  }
  const summary: ReadingMap = {
    "node-count": nodes.length,
    "taint-count": Object.keys(taint).length,
    "label-count": Object.keys(label).length,
  };
  return { summary, taint, label };
}

/**
 * The topology measurement when the node list could not be read.
 *
 * @param status why
 * @param message one line of detail
 * @returns the three subtypes with `data: {}` and the status
 */
export function topologyUnavailable(status: SourceStatus, message: string): Measurement {
  return {
    type: "NodeTopology",
    subtypes: ["summary", "taint", "label"].map((name) =>
      subtype(name, {}, status, SOURCE, message)
    ),
  };
}

/** The measurement of folded readings that were read (status ok) from `source`. */
function folded(
  readings: { summary: ReadingMap; taint: ReadingMap; label: ReadingMap },
  source: string,
): Measurement {
  return {
    type: "NodeTopology",
    subtypes: [
      subtype("summary", readings.summary, "ok", source),
      subtype("taint", readings.taint, "ok", source),
      subtype("label", readings.label, "ok", source),
    ],
  };
}

/**
 * The topology of one node alone, as a daemon reports it: its labels and taints folded as
 * {@link foldTopology} folds a cluster (each list names this node only), `summary` with
 * `scope: node`.
 *
 * @param node the node object
 * @returns `summary`, `taint` and `label` readings
 */
export function foldOwnTopology(
  node: KubeNode,
): { summary: ReadingMap; taint: ReadingMap; label: ReadingMap } {
  const folded = foldTopology([node]);
  return { ...folded, summary: { ...folded.summary, [NODE_SCOPE_READING]: "node" } };
}

/**
 * This node's topology: one GET of its own Node (the daemon's scope). Never throws.
 *
 * @param deps the cluster reader
 * @param options the node and signal
 * @returns the measurement
 */
export async function collectOwnTopology(
  deps: Pick<CollectorDeps, "cluster">,
  options: { nodeName: string; signal?: AbortSignal },
): Promise<Measurement> {
  const { cluster } = deps;
  const source = ownSource(options.nodeName);
  const failed = (status: SourceStatus, message: string): Measurement => ({
    type: "NodeTopology",
    subtypes: ["summary", "taint", "label"].map((name) =>
      subtype(
        name,
        name === "summary" ? { [NODE_SCOPE_READING]: "node" } : {},
        status,
        source,
        message,
      )
    ),
  });
  if (cluster === undefined) {
    return failed("absent", "Cannot read this node: no Kubernetes client (not in a cluster)");
  }
  if (!options.nodeName) {
    return failed("absent", "Cannot read this node: its name is unknown (set NODE_NAME)");
  }
  try {
    return folded(foldOwnTopology(await cluster.getNode(options.nodeName, options.signal)), source);
  } catch (error) {
    return failed(statusOf(error), messageOf(error));
  }
}

/**
 * Lists every node (pages of 500) and folds them. Never throws. Without a client the
 * result is upstream's empty measurement (zero counts, empty maps) with status
 * `absent`; a failed list gives empty subtypes with the failure's status (upstream
 * drops the measurement).
 *
 * @param deps the cluster reader
 * @param options truncation and signal
 * @returns the measurement
 */
export async function collectTopology(
  deps: Pick<CollectorDeps, "cluster">,
  options: { maxNodesPerEntry?: number; signal?: AbortSignal } = {},
): Promise<Measurement> {
  const { cluster } = deps;
  if (cluster === undefined) {
    const message = "Cannot list nodes: no Kubernetes client (no kubeconfig, not in a cluster)";
    const folded = foldTopology([]);
    return {
      type: "NodeTopology",
      subtypes: [
        subtype("summary", folded.summary, "absent", SOURCE, message),
        subtype("taint", {}, "absent", SOURCE, message),
        subtype("label", {}, "absent", SOURCE, message),
      ],
    };
  }
  try {
    const nodes = await listAll(
      (o) => cluster.listNodes(o),
      options.signal ? { signal: options.signal } : {},
    );
    return folded(
      foldTopology(
        nodes,
        options.maxNodesPerEntry === undefined
          ? {}
          : { maxNodesPerEntry: options.maxNodesPerEntry },
      ),
      SOURCE,
    );
  } catch (error) {
    return topologyUnavailable(statusOf(error), messageOf(error));
  }
}
