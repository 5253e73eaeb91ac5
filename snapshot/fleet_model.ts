/**
 * The fleet report's model: what a fleet comparison ({@link buildFleetReport} in `fleet.ts`)
 * takes and gives (members, cohorts, groups, outliers, their differences), the readings it
 * leaves out by design, and the natural order it sorts node names in.
 *
 * @module
 */
import type { ChangeKind } from "./diff.ts";
import { compareKeys } from "./model.ts";
import type { MeasurementType, Reading, Snapshot } from "./model.ts";

/**
 * Readings that name the node itself (or one of its GPUs), so they differ across any fleet
 * by design.
 */
export const FLEET_IDENTITY_IGNORE_PATTERNS: readonly string[] = [
  "K8s.node.source-node",
  "K8s.node.provider-id",
  "OS.sysctl./proc/sys/kernel/hostname",
  "GPU.gpu-*.uuid",
  "GPU.gpu-*.serial",
];

/**
 * Measurement types that describe the cluster, not the node: every node's snapshot carries
 * the same NodeTopology (every node's labels and taints), differing only by when it was taken.
 * A fleet compares nodes, so it leaves them out; they also grow with the cluster (one entry per
 * distinct label value, so the per-node `kubernetes.io/hostname` alone is one per node), which
 * would make a fleet's comparison quadratic in its size. Two-snapshot diffs still compare them;
 * cohorts still read node labels from them.
 */
export const FLEET_CLUSTER_SCOPED_TYPES: readonly MeasurementType[] = ["NodeTopology"];

/** One node of a fleet. */
export interface FleetMember {
  /** Node name (usually `metadata.source-node`); made unique by {@link buildFleetReport}. */
  node: string;
  /** Its snapshot. */
  snapshot: Snapshot;
}

/** Nodes that share one configuration of a measurement type. */
export interface FleetGroup {
  /** Node names, naturally sorted. */
  nodes: string[];
  /** Whether this is the reference (largest) group. */
  majority: boolean;
}

/** How the fleet splits on one measurement type. */
export interface FleetMeasurement {
  /** The measurement type. */
  type: MeasurementType;
  /** Groups of identical configuration, largest first. */
  groups: FleetGroup[];
}

/** One reading where an outlier differs from the fleet's reference. */
export interface FleetDifference {
  /** `<Type>.<subtype>.<key>`. */
  path: string;
  /** `modified`, `added` (only this node has it) or `removed` (this node lacks it). */
  kind: ChangeKind;
  /** The node's reading; absent for `removed`. */
  value?: Reading;
  /** The reference reading; absent for `added`. */
  fleet?: Reading;
  /** How many nodes carry the reference reading (or lack the path, for `added`). */
  fleetNodes: number;
}

/** A whole subtype of the reference that an outlier lacks (e.g. its collector failed). */
export interface FleetAbsentSubtype {
  /** `<Type>.<subtype>`. */
  subtype: string;
  /** How many reference readings it holds (each is also a `removed` difference). */
  readings: number;
  /** How many nodes carry this subtype. */
  fleetNodes: number;
}

/** A node outside the reference group of at least one measurement type of its cohort. */
export interface FleetOutlier {
  /** Node name. */
  node: string;
  /** Its cohort's name. */
  cohort: string;
  /** Its differences, sorted by path. */
  differences: FleetDifference[];
  /**
   * Reference subtypes this node lacks entirely, sorted; their readings are also in
   * `differences`, so renderers may show one line per subtype instead. Omitted when none.
   */
  absentSubtypes?: FleetAbsentSubtype[];
}

/** One reading column of the fleet matrix: a path where some node differs. */
export interface FleetColumn {
  /** `<Type>.<subtype>.<key>`. */
  path: string;
  /** The measurement type. */
  type: MeasurementType;
  /** The cohort's reference reading; absent when the reference lacks the path. */
  fleet?: Reading;
  /** How many nodes of the cohort agree with the reference here. */
  fleetNodes: number;
}

/** Nodes that should be alike, compared with each other only. */
export interface FleetCohort {
  /** Its name, e.g. `NVIDIA H100 80GB HBM3 ×8 · p5.48xlarge`, or `fleet` for one cohort. */
  name: string;
  /** The values of the cohort keys ({@link FleetReport.groupBy}) its nodes share. */
  key: Record<string, string | null>;
  /** Node names, naturally sorted. */
  nodes: string[];
  /** How the cohort splits per measurement type present in it. */
  measurements: FleetMeasurement[];
  /** Readings where some node of the cohort differs (every reading with `allReadings`). */
  columns: FleetColumn[];
  /** Outlier nodes in the cohort. */
  outliers: number;
}

/** A member that could not be compared: its file or document unreadable, invalid or too large. */
export interface FleetUnreadable {
  /** The node's name as far as it is known (its file's name, or `<source>#<n>`). */
  node: string;
  /** Where it was read from (a file, or a stream and the document's place in it). */
  source: string;
  /** Why it could not be compared (the first line of the error). */
  reason: string;
}

/** The fleet report: cohorts, their groups per measurement, outliers and differing readings. */
export interface FleetReport {
  /** Every node name, naturally sorted. */
  nodes: string[];
  /** The keys that define the cohorts (empty: the whole fleet is one cohort). */
  groupBy: string[];
  /** Cohorts, largest first (ties by name). */
  cohorts: FleetCohort[];
  /** Outlier nodes, naturally sorted. */
  outliers: FleetOutlier[];
  /** Members that could not be compared, naturally sorted; the rest of the report stands. */
  unreadable: FleetUnreadable[];
  /** Totals. */
  summary: {
    /** Nodes compared. */
    nodes: number;
    /** Cohorts. */
    cohorts: number;
    /** Cohorts of one node (nothing to compare it with). */
    singletons: number;
    /** Nodes outside some reference group of their cohort. */
    outliers: number;
    /** Differences over all outliers. */
    differences: number;
    /** Members that could not be compared. */
    unreadable: number;
  };
}

/** Options for {@link buildFleetReport}. */
export interface FleetOptions {
  /** Glob patterns of paths to leave out, on top of {@link FLEET_IDENTITY_IGNORE_PATTERNS}. */
  ignore?: readonly string[];
  /** Put every reading in {@link FleetCohort.columns}, not only differing ones. @default false */
  allReadings?: boolean;
  /**
   * Cohort keys: reading paths or node labels; `["none"]` for one cohort.
   * @default [] (the default cohort: GPU model and count, instance type, node pool)
   */
  groupBy?: readonly string[];
}

const NAME_CHUNK_REGEXP = /\d+|\D+/g;

/**
 * Natural order of node names (`gpu-node-2` before `gpu-node-10`): runs of digits compare
 * as numbers, the rest byte-wise. Plain code rather than `Intl.Collator`, whose ICU start-up
 * would cost every command tens of milliseconds, and whose order depends on the locale.
 *
 * @param a first name
 * @param b second name
 * @returns negative, zero or positive
 */
export function compareNodeNames(a: string, b: string): number {
  const x = a.match(NAME_CHUNK_REGEXP) ?? [];
  const y = b.match(NAME_CHUNK_REGEXP) ?? [];
  for (let i = 0; i < Math.min(x.length, y.length); i++) {
    const p = x[i] as string;
    const q = y[i] as string;
    if (p === q) continue;
    const digits = /^\d/.test(p) && /^\d/.test(q);
    if (digits) {
      const pn = p.replace(/^0+(?=\d)/, "");
      const qn = q.replace(/^0+(?=\d)/, "");
      if (pn.length !== qn.length) return pn.length - qn.length;
      if (pn !== qn) return compareKeys(pn, qn);
      continue;
    }
    return compareKeys(p, q);
  }
  return x.length - y.length || compareKeys(a, b);
}
