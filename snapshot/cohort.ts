/**
 * Cohorts of a fleet: which nodes should be alike. A real GPU cluster holds pools of
 * different machines (H100 beside GB200, CPU system nodes, several instance types); a node
 * is compared only with the nodes of its cohort, so a GB200 is never "drift" against an H100.
 *
 * The default cohort is read from the snapshots themselves: the GPU model and count
 * (`GPU.smi.gpu.model`, `GPU.smi.gpu-count`), and, when the NodeTopology readings carry
 * them, the node's instance type (`node.kubernetes.io/instance-type`) and node pool (EKS node
 * group, Karpenter node pool, GKE node pool, AKS agent pool). `--group-by KEY` replaces the
 * default with explicit keys: a reading path (`GPU.smi.gpu.model`) or a node label
 * (`node.kubernetes.io/instance-type`); `none` puts every node in one cohort.
 *
 * Node labels come from the NodeTopology `label` subtype, which lists every node of the
 * cluster with each label value (`"<value>|<node>,<node>"`, or `<key>.<value>` keys when a
 * label has several values), so any node's snapshot can name the labels of all of them.
 *
 * @module
 */
import { UsageError } from "../errors.ts";
import { isMeasurementType, NODE_SCOPE_READING } from "./model.ts";
import type { Reading, Snapshot } from "./model.ts";

/** `--group-by none`: every node in one cohort. */
export const GROUP_BY_NONE = "none";

/** Reading path of the GPU model of a node. */
export const GPU_MODEL_PATH = "GPU.smi.gpu.model";
/** Reading path of the GPU count of a node. */
const GPU_COUNT_PATH = "GPU.smi.gpu-count";

/** Labels that name a node's instance type, first present wins. */
export const INSTANCE_TYPE_LABELS: readonly string[] = [
  "node.kubernetes.io/instance-type",
  "beta.kubernetes.io/instance-type",
];

/** Labels that name a node's pool (EKS, eksctl, Karpenter, GKE, AKS, OKE), first present wins. */
export const NODE_POOL_LABELS: readonly string[] = [
  "eks.amazonaws.com/nodegroup",
  "alpha.eksctl.io/nodegroup-name",
  "karpenter.sh/nodepool",
  "cloud.google.com/gke-nodepool",
  "kubernetes.azure.com/agentpool",
  "oci.oraclecloud.com/node-pool",
];

/** How one cohort key reads a node. */
interface KeySpec {
  /** Name shown in reports and documents (`GPU.smi.gpu.model`, `instance-type`, a label). */
  name: string;
  /** A reading path, or label names (first present wins). */
  path?: string;
  labels?: readonly string[];
}

/** The cohorts of a fleet, per member. */
export interface CohortAssignment {
  /** Keys that define the cohorts (empty: one cohort). */
  keys: string[];
  /** Per member (input order): its cohort's name. */
  cohortOf: string[];
  /** Per cohort name: its key values (null when the node has none). */
  values: Map<string, Record<string, string | null>>;
}

/** The cohort name when every node is in one cohort. */
const WHOLE_FLEET_COHORT = "fleet";

/**
 * Assigns every member of a fleet to a cohort.
 *
 * @param members node names (unique) and snapshots
 * @param groupBy explicit keys (`[]`: the default cohort; `["none"]`: one cohort)
 * @returns the cohort of each member
 * @throws {UsageError} when an explicit key is on no snapshot, or `none` is combined
 */
export function assignCohorts(
  members: readonly { node: string; snapshot: Snapshot }[],
  groupBy: readonly string[] = [],
): CohortAssignment {
  const reader = createCohortReader(groupBy);
  for (const m of members) reader.observe(m.snapshot);
  return reader.assign(members.map((m) => m.node));
}

/** Reads cohort keys from snapshots one at a time, so a fleet need not be held whole. */
export interface CohortReader {
  /** Reads what the cohort keys need from the next member's snapshot. */
  observe(snapshot: Snapshot): void;
  /**
   * Whether {@link CohortReader.observe} reads this subtype's readings: a snapshot holding only
   * these subtypes (and every measurement, for their order) is observed the same.
   */
  wants(type: string, subtype: string): boolean;
  /**
   * Assigns the members observed so far, in order, to cohorts.
   *
   * @param nodes the members' unique node names, in the order observed
   */
  assign(nodes: readonly string[]): CohortAssignment;
}

/**
 * Makes a {@link CohortReader}.
 *
 * @param groupBy explicit keys (`[]`: the default cohort; `["none"]`: one cohort)
 * @returns the reader
 * @throws {UsageError} when `none` is combined with other keys
 */
export function createCohortReader(groupBy: readonly string[] = []): CohortReader {
  if (groupBy.includes(GROUP_BY_NONE)) {
    if (groupBy.length > 1) {
      throw new UsageError(
        `Cannot group by '${groupBy.join(", ")}': '${GROUP_BY_NONE}' stands alone`,
      );
    }
    return {
      observe() {},
      wants: () => false,
      assign: (nodes) => ({
        keys: [],
        cohortOf: nodes.map(() => WHOLE_FLEET_COHORT),
        values: new Map([[WHOLE_FLEET_COHORT, {}]]),
      }),
    };
  }
  const explicit = groupBy.length > 0;
  const specs: KeySpec[] = explicit
    ? groupBy.map((key) =>
      isMeasurementType(key.slice(0, key.indexOf("."))) ? { name: key, path: key } : {
        name: key,
        labels: [key],
      }
    )
    : [
      { name: GPU_MODEL_PATH, path: GPU_MODEL_PATH },
      { name: GPU_COUNT_PATH, path: GPU_COUNT_PATH },
      { name: "instance-type", labels: INSTANCE_TYPE_LABELS },
      { name: "node-pool", labels: NODE_POOL_LABELS },
    ];
  const labels = createLabelIndex(specs.flatMap((s) => s.labels ?? []));
  const pathValues = specs.map(() => [] as (string | null)[]);
  const paths = specs.flatMap((s) => s.path === undefined ? [] : [s.path]);
  const anyLabels = specs.some((s) => s.labels !== undefined && s.labels.length > 0);
  return {
    wants: (type, subtype) =>
      (anyLabels && type === "NodeTopology" && LABEL_INDEX_SUBTYPES.includes(subtype)) ||
      paths.some((p) => p.startsWith(`${type}.${subtype}.`)),
    observe(snapshot) {
      specs.forEach((spec, i) => {
        if (spec.path !== undefined) {
          (pathValues[i] as (string | null)[]).push(readingText(readPath(snapshot, spec.path)));
        }
      });
      labels.add(snapshot);
    },
    assign(nodes) {
      const columns = specs.map((spec, i) => {
        if (spec.path !== undefined) return pathValues[i] as (string | null)[];
        // A default label whose lists were cut to '(+K more)' cannot name every node: rather
        // than split a pool into "known" and "unknown" halves, the default leaves it out.
        if (!explicit && (spec.labels ?? []).some((l) => labels.truncated.has(l))) {
          return nodes.map(() => null);
        }
        return nodes.map((node) => {
          for (const label of spec.labels ?? []) {
            const value = labels.index.get(label)?.get(node);
            if (value !== undefined) return value;
          }
          return null;
        });
      });
      return assignFromColumns(nodes, specs, columns, explicit);
    },
  };
}

function assignFromColumns(
  nodes: readonly string[],
  specs: readonly KeySpec[],
  columns: readonly (readonly (string | null)[])[],
  explicit: boolean,
): CohortAssignment {
  const used: KeySpec[] = [];
  const kept: (readonly (string | null)[])[] = [];
  specs.forEach((spec, i) => {
    const column = columns[i] as (string | null)[];
    if (column.some((v) => v !== null)) {
      used.push(spec);
      kept.push(column);
    } else if (explicit) {
      throw new UsageError(
        `Cannot group by '${spec.name}': no snapshot has a reading or node label '${spec.name}' (a path such as '${GPU_MODEL_PATH}', a node label such as '${
          INSTANCE_TYPE_LABELS[0]
        }', or '${GROUP_BY_NONE}')`,
      );
    }
  });
  const cohortOf: string[] = [];
  const values = new Map<string, Record<string, string | null>>();
  const byTuple = new Map<string, string>();
  nodes.forEach((_, i) => {
    const tuple = kept.map((c) => c[i] ?? null);
    const id = JSON.stringify(tuple);
    let name = byTuple.get(id);
    if (name === undefined) {
      const base = used.length === 0
        ? WHOLE_FLEET_COHORT
        : explicit
        ? used.map((s, k) => `${s.name}=${tuple[k] ?? "(none)"}`).join(", ")
        : defaultName(used, tuple);
      name = base;
      for (let n = 2; values.has(name); n++) name = `${base} #${n}`;
      byTuple.set(id, name);
      values.set(name, Object.fromEntries(used.map((s, k) => [s.name, tuple[k] ?? null])));
    }
    cohortOf.push(name);
  });
  return { keys: used.map((s) => s.name), cohortOf, values };
}

/** `NVIDIA H100 80GB HBM3 ×8 · p5.48xlarge · pool gpu-a`, `no GPU · m7i.4xlarge`. */
function defaultName(used: readonly KeySpec[], tuple: readonly (string | null)[]): string {
  const at = (name: string) => {
    const i = used.findIndex((s) => s.name === name);
    return i < 0 ? undefined : tuple[i];
  };
  const model = at(GPU_MODEL_PATH);
  const count = at(GPU_COUNT_PATH);
  const parts: string[] = [];
  if (model) parts.push(count && count !== "1" ? `${model} ×${count}` : model);
  else if (count !== undefined) {
    parts.push(count === null || count === "0" ? "no GPU" : `${count} GPUs`);
  }
  const instance = at("instance-type");
  if (instance) parts.push(instance);
  const pool = at("node-pool");
  if (pool) parts.push(`pool ${pool}`);
  return parts.length > 0 ? parts.join(" · ") : "(no cohort keys)";
}

function readingText(value: Reading | undefined): string | null {
  if (value === undefined || value === null) return null;
  return typeof value === "string" ? value : String(value);
}

/**
 * Reads one reading of a snapshot by path (`<Type>.<subtype>.<key>`); the longest subtype
 * that fits wins, since subtypes and keys may both hold dots.
 *
 * @param snapshot the snapshot
 * @param path the reading path
 * @returns the reading, or undefined when the snapshot lacks it
 */
export function readPath(snapshot: Snapshot, path: string): Reading | undefined {
  const dot = path.indexOf(".");
  const type = path.slice(0, dot);
  const rest = path.slice(dot + 1);
  let best: Reading | undefined;
  let bestLength = -1;
  for (const m of snapshot.measurements) {
    if (m.type !== type) continue;
    for (const s of m.subtypes) {
      if (s.subtype.length <= bestLength || !rest.startsWith(s.subtype + ".")) continue;
      const key = rest.slice(s.subtype.length + 1);
      if (Object.hasOwn(s.data, key)) {
        best = s.data[key] as Reading;
        bestLength = s.subtype.length;
      }
    }
  }
  return best;
}

const MORE_SUFFIX_REGEXP = / \(\+\d+ more\)$/;

/** The NodeTopology subtypes the label index reads. */
const LABEL_INDEX_SUBTYPES = ["label", "summary", "taint"];

/**
 * Node → value for each wanted label, from the NodeTopology `label` readings of the
 * snapshots. Every snapshot of one cluster carries the same lists, so a topology already
 * read (same summary counts and taints) is skipped: a 10,000-node fleet reads one. Labels whose lists
 * were cut to `(+K more)` are named in `truncated`.
 */
function createLabelIndex(wanted: readonly string[]): {
  index: Map<string, Map<string, string>>;
  truncated: Set<string>;
  add(snapshot: Snapshot): void;
} {
  const index = new Map<string, Map<string, string>>(wanted.map((l) => [l, new Map()]));
  const truncated = new Set<string>();
  const seen = new Set<string>();
  return {
    index,
    truncated,
    add(snapshot) {
      if (wanted.length === 0) return;
      const topology = snapshot.measurements.find((m) => m.type === "NodeTopology");
      const label = topology?.subtypes.find((s) => s.subtype === "label");
      if (!label) return;
      // The same cluster seen again (same counts): skip it without walking its entries, which
      // are one per distinct label value (one per node for kubernetes.io/hostname).
      const summary = topology?.subtypes.find((s) => s.subtype === "summary")?.data;
      // A daemon's own-node topology (scope node) names its node alone and is small: every
      // one is read (nodes of equal counts would otherwise look like one cluster seen again).
      const own = summary?.[NODE_SCOPE_READING] === "node";
      // Not the label entries themselves: enumerating an object of 10,000 keys per snapshot
      // is what made a 10,000-node fleet quadratic. The taints are few and name nodes too.
      const taint = topology?.subtypes.find((s) => s.subtype === "taint")?.data;
      const key = summary && !own
        ? `${JSON.stringify(summary)}\n${JSON.stringify(taint ?? {})}`
        : undefined;
      if (key !== undefined && seen.has(key)) return;
      const entries: [string, string, string][] = [];
      for (const [key, raw] of Object.entries(label.data)) {
        if (typeof raw !== "string") continue;
        const bar = raw.indexOf("|");
        if (bar < 0) continue;
        const value = raw.slice(0, bar);
        const name = index.has(key)
          ? key
          : key.endsWith("." + value) && index.has(key.slice(0, key.length - value.length - 1))
          ? key.slice(0, key.length - value.length - 1)
          : undefined;
        if (name !== undefined) entries.push([name, value, raw.slice(bar + 1)]);
      }
      if (!own) {
        const fingerprint = key ??
          entries.map(([n, v, nodes]) => `${n}=${v}:${nodes.length}:${nodes.slice(-24)}`)
            .join("\n");
        if (seen.has(fingerprint)) return;
        seen.add(fingerprint);
      }
      for (const [name, value, nodes] of entries) {
        const map = index.get(name) as Map<string, string>;
        const whole = nodes.replace(MORE_SUFFIX_REGEXP, "");
        if (whole.length !== nodes.length) truncated.add(name);
        for (const node of whole.split(",")) {
          if (node !== "" && !map.has(node)) map.set(node, value);
        }
      }
    },
  };
}
