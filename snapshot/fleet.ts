/**
 * Fleet comparison: many node snapshots grouped by identical configuration per
 * measurement type. The largest group of each type is the fleet's reference (ties go to
 * the group holding the first node by name); every node outside it is an outlier, listed
 * with the readings where it differs from the reference and how many nodes share the
 * reference value, e.g. `gpu-node-17: GPU.smi.driver 570.86.15 (fleet: 570.124.06 on 41 nodes)`.
 *
 * Readings compare as in {@link diffSnapshots} (schema types, NodeTopology node sets,
 * ignore patterns); per-node identity readings ({@link FLEET_IDENTITY_IGNORE_PATTERNS})
 * are left out on top, since they differ on every node by design.
 *
 * @module
 */
import { canonicalReading, compileIgnore, readingSchema } from "./diff.ts";
import type { ChangeKind } from "./diff.ts";
import { compareKeys, MEASUREMENT_TYPES } from "./model.ts";
import type { MeasurementType, Reading, Snapshot } from "./model.ts";

/** Readings that name the node itself, so they differ across any fleet by design. */
export const FLEET_IDENTITY_IGNORE_PATTERNS: readonly string[] = [
  "K8s.node.source-node",
  "K8s.node.provider-id",
  "OS.sysctl./proc/sys/kernel/hostname",
];

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

/** A node outside the reference group of at least one measurement type. */
export interface FleetOutlier {
  /** Node name. */
  node: string;
  /** Its differences, sorted by path. */
  differences: FleetDifference[];
}

/** One reading column of the fleet matrix: a path where some node differs. */
export interface FleetColumn {
  /** `<Type>.<subtype>.<key>`. */
  path: string;
  /** The measurement type. */
  type: MeasurementType;
  /** The reference reading; absent when the reference lacks the path. */
  fleet?: Reading;
  /** How many nodes agree with the reference here. */
  fleetNodes: number;
}

/** The fleet report: groups per measurement, outliers and the differing readings. */
export interface FleetReport {
  /** Every node name, naturally sorted. */
  nodes: string[];
  /** How the fleet splits per measurement type present anywhere. */
  measurements: FleetMeasurement[];
  /** Outlier nodes, naturally sorted. */
  outliers: FleetOutlier[];
  /** Readings where at least one node differs, sorted by path. */
  columns: FleetColumn[];
  /** Totals. */
  summary: {
    /** Nodes compared. */
    nodes: number;
    /** Nodes outside some reference group. */
    outliers: number;
    /** Differences over all outliers. */
    differences: number;
  };
}

/** Options for {@link buildFleetReport}. */
export interface FleetOptions {
  /** Glob patterns of paths to leave out, on top of {@link FLEET_IDENTITY_IGNORE_PATTERNS}. */
  ignore?: readonly string[];
}

const COLLATOR = new Intl.Collator("en", { numeric: true });

/**
 * Natural order of node names (`gpu-node-2` before `gpu-node-10`).
 *
 * @param a first name
 * @param b second name
 * @returns negative, zero or positive
 */
export function compareNodeNames(a: string, b: string): number {
  return COLLATOR.compare(a, b) || compareKeys(a, b);
}

/** Interned readings of one path: value ids by equality key, a sample reading per id. */
interface PathTable {
  path: string;
  type: MeasurementType;
  ids: Map<string, number>;
  samples: Reading[];
  counts: number[];
  present: number;
}

/**
 * Groups a fleet by configuration and finds its outliers.
 *
 * @param members the nodes and their snapshots, in any order
 * @param options ignore patterns
 * @returns the fleet report
 */
export function buildFleetReport(
  members: readonly FleetMember[],
  options: FleetOptions = {},
): FleetReport {
  const ignored = compileIgnore([...FLEET_IDENTITY_IGNORE_PATTERNS, ...(options.ignore ?? [])]);
  const names = uniqueNames(members.map((m) => m.node));
  const order = names.map((_, i) => i).sort((a, b) =>
    compareNodeNames(names[a] as string, names[b] as string)
  );

  const paths: PathTable[] = [];
  const pathIds = new Map<string, number>();
  // Per node, per type: flat [pathId, valueId, pathId, valueId, ...] sorted by path id.
  const configs: Map<MeasurementType, Int32Array>[] = [];
  const typesSeen = new Set<MeasurementType>();
  for (const member of members) {
    const perType = new Map<MeasurementType, number[]>();
    for (const m of member.snapshot.measurements) {
      typesSeen.add(m.type);
      let pairs = perType.get(m.type);
      if (!pairs) perType.set(m.type, pairs = []);
      for (const s of m.subtypes) {
        const topology = m.type === "NodeTopology" &&
          (s.subtype === "taint" || s.subtype === "label");
        const prefix = `${m.type}.${s.subtype}.`;
        for (const key of Object.keys(s.data)) {
          const path = prefix + key;
          if (ignored(path)) continue;
          const value = s.data[key] as Reading;
          let pid = pathIds.get(path);
          if (pid === undefined) {
            pid = paths.length;
            pathIds.set(path, pid);
            paths.push({ path, type: m.type, ids: new Map(), samples: [], counts: [], present: 0 });
          }
          const table = paths[pid] as PathTable;
          const canonical = canonicalReading(
            value,
            readingSchema(m.type, s.subtype, key),
            topology,
          );
          let vid = table.ids.get(canonical);
          if (vid === undefined) {
            vid = table.samples.length;
            table.ids.set(canonical, vid);
            table.samples.push(value);
            table.counts.push(0);
          }
          pairs.push(pid, vid);
        }
      }
    }
    const config = new Map<MeasurementType, Int32Array>();
    for (const [type, pairs] of perType) config.set(type, sortPairs(pairs));
    configs.push(config);
  }
  // Count each distinct (path, value) once per node, after duplicates were merged.
  for (const config of configs) {
    for (const pairs of config.values()) {
      for (let i = 0; i < pairs.length; i += 2) {
        const table = paths[pairs[i] as number] as PathTable;
        table.counts[pairs[i + 1] as number]!++;
        table.present++;
      }
    }
  }

  const n = members.length;
  const measurements: FleetMeasurement[] = [];
  const differences = new Map<number, FleetDifference[]>();
  const columns = new Map<number, FleetColumn>();
  for (const type of MEASUREMENT_TYPES) {
    if (!typesSeen.has(type)) continue;
    const groups = new Map<string, number[]>();
    for (const i of order) {
      const pairs = configs[i]?.get(type);
      const key = pairs ? pairs.join(",") : "absent";
      let group = groups.get(key);
      if (!group) groups.set(key, group = []);
      group.push(i);
    }
    // Map iteration follows first appearance in name order, so ties go to the first node.
    const sorted = [...groups.values()].sort((a, b) => b.length - a.length);
    const reference = sorted[0] as number[];
    measurements.push({
      type,
      groups: sorted.map((g) => ({
        nodes: g.map((i) => names[i] as string),
        majority: g === reference,
      })),
    });
    const refPairs = configs[reference[0] as number]?.get(type) ?? new Int32Array();
    const refMap = new Map<number, number>();
    for (let i = 0; i < refPairs.length; i += 2) {
      refMap.set(refPairs[i] as number, refPairs[i + 1] as number);
    }
    for (const group of sorted.slice(1)) {
      const pairs = configs[group[0] as number]?.get(type) ?? new Int32Array();
      const found = compareToReference(pairs, refMap, paths, n);
      for (const d of found) {
        const pid = pathIds.get(d.path) as number;
        if (!columns.has(pid)) {
          const column: FleetColumn = { path: d.path, type, fleetNodes: d.fleetNodes };
          if (d.fleet !== undefined) column.fleet = d.fleet;
          columns.set(pid, column);
        }
      }
      for (const i of group) {
        let list = differences.get(i);
        if (!list) differences.set(i, list = []);
        list.push(...found);
      }
    }
  }

  const outliers: FleetOutlier[] = order
    .filter((i) => differences.has(i))
    .map((i) => ({
      node: names[i] as string,
      differences: (differences.get(i) as FleetDifference[]).sort((a, b) =>
        compareKeys(a.path, b.path)
      ),
    }));
  return {
    nodes: order.map((i) => names[i] as string),
    measurements,
    outliers,
    columns: [...columns.values()].sort((a, b) => compareKeys(a.path, b.path)),
    summary: {
      nodes: n,
      outliers: outliers.length,
      differences: outliers.reduce((sum, o) => sum + o.differences.length, 0),
    },
  };
}

function compareToReference(
  pairs: Int32Array,
  reference: Map<number, number>,
  paths: readonly PathTable[],
  nodeCount: number,
): FleetDifference[] {
  const out: FleetDifference[] = [];
  const seen = new Set<number>();
  for (let i = 0; i < pairs.length; i += 2) {
    const pid = pairs[i] as number;
    const vid = pairs[i + 1] as number;
    seen.add(pid);
    const table = paths[pid] as PathTable;
    const ref = reference.get(pid);
    if (ref === vid) continue;
    if (ref === undefined) {
      out.push({
        path: table.path,
        kind: "added",
        value: table.samples[vid] as Reading,
        fleetNodes: nodeCount - table.present,
      });
    } else {
      out.push({
        path: table.path,
        kind: "modified",
        value: table.samples[vid] as Reading,
        fleet: table.samples[ref] as Reading,
        fleetNodes: table.counts[ref] as number,
      });
    }
  }
  for (const [pid, ref] of reference) {
    if (seen.has(pid)) continue;
    const table = paths[pid] as PathTable;
    out.push({
      path: table.path,
      kind: "removed",
      fleet: table.samples[ref] as Reading,
      fleetNodes: table.counts[ref] as number,
    });
  }
  return out;
}

function sortPairs(pairs: number[]): Int32Array {
  // Later duplicates of a path win, as in flattenSnapshot.
  const byPath = new Map<number, number>();
  for (let i = 0; i < pairs.length; i += 2) byPath.set(pairs[i] as number, pairs[i + 1] as number);
  const ids = [...byPath.keys()].sort((a, b) => a - b);
  const out = new Int32Array(ids.length * 2);
  ids.forEach((pid, j) => {
    out[j * 2] = pid;
    out[j * 2 + 1] = byPath.get(pid) as number;
  });
  return out;
}

function uniqueNames(nodes: readonly string[]): string[] {
  const used = new Map<string, number>();
  return nodes.map((raw, i) => {
    const name = raw === "" ? `snapshot-${i + 1}` : raw;
    const count = (used.get(name) ?? 0) + 1;
    used.set(name, count);
    return count === 1 ? name : `${name}#${count}`;
  });
}
