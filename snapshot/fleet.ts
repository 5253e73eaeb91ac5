/**
 * Fleet comparison: many node snapshots, first split into cohorts of nodes that should be
 * alike (GPU model and count, instance type, node pool: see `cohort.ts`), then grouped by
 * identical configuration per measurement type within each cohort. The largest group of
 * each type is the cohort's reference (ties go to the group holding the first node by
 * name); every node outside it is an outlier, listed with the readings where it differs
 * from the reference and how many nodes of its cohort share the reference value, e.g.
 * `gpu-node-17: GPU.smi.driver 570.86.15 (cohort: 570.124.06 on 41 nodes)`. A cohort of one
 * node has nothing to be compared with and is reported as such, never as drift.
 *
 * Readings compare as in {@link diffSnapshots} (schema types, NodeTopology node sets,
 * ignore patterns); per-node identity readings ({@link FLEET_IDENTITY_IGNORE_PATTERNS})
 * are left out on top, since they differ on every node by design.
 *
 * @module
 */
import { createCohortReader } from "./cohort.ts";
import { canonicalReading, compileIgnore, readingSchema } from "./diff.ts";
import type { ChangeKind, ReadingSchema } from "./diff.ts";
import {
  ACCEPTED_API_VERSIONS,
  compareKeys,
  isMeasurementType,
  MEASUREMENT_TYPES,
  setOwn,
  SNAPSHOT_KIND,
} from "./model.ts";
import type { Measurement, MeasurementType, Reading, ReadingMap, Snapshot } from "./model.ts";
import { walkSnapshotYaml, YamlReadCaches } from "./yaml_reader.ts";
import type { YamlMap, YamlSnapshot, YamlSubtype } from "./yaml_reader.ts";

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

/** Interned readings of one path: value ids by equality key, a sample reading per id. */
interface PathTable {
  path: string;
  type: MeasurementType;
  /** `<Type>.<subtype>` and its id. */
  subtype: string;
  sid: number;
  schema: ReadingSchema;
  topology: boolean;
  /** Plain string readings: the text itself (or null) is the equality key. */
  plain: boolean;
  ids: Map<string | null, number>;
  /** Non-plain readings: value id by raw reading, to skip re-canonicalising. */
  raw: Map<Reading, number>;
  samples: Reading[];
  counts: number[];
  present: number;
}

/**
 * Splits a fleet into cohorts, groups each cohort by configuration and finds its outliers.
 *
 * @param members the nodes and their snapshots, in any order
 * @param options ignore patterns, cohort keys, all readings
 * @returns the fleet report
 * @throws {UsageError} when a `groupBy` key is on no snapshot
 */
export function buildFleetReport(
  members: readonly FleetMember[],
  options: FleetOptions = {},
): FleetReport {
  const builder = createFleetBuilder(options);
  for (const member of members) builder.add(member);
  return builder.finish();
}

/** Builds a fleet report from members added one at a time (see {@link createFleetBuilder}). */
export interface FleetBuilder {
  /**
   * Reads one member; the builder keeps only its interned configuration, not the snapshot,
   * so a caller that parses one snapshot at a time holds one at a time.
   */
  add(member: FleetMember): void;
  /**
   * Reads one member straight from its YAML text in `encodeSnapshot`'s layout (what
   * `aicr daemonset fetch -o dir/` writes), as {@link FleetBuilder.add} reads the snapshot
   * `parseSnapshot` makes of it, without making it: each line is matched to the same line of
   * the last file and its path and value ids are remembered with it.
   *
   * @param text the document
   * @param nodeName the member's name from its `metadata.source-node` (`""` when absent)
   * @returns false, having read nothing, when the text departs from the layout or is not a
   *   valid snapshot in canonical order: the caller parses it (for its error) and calls `add`
   */
  addYaml(text: string, nodeName: (sourceNode: string) => string): boolean;
  /**
   * Records a member that could not be read (its file or document is corrupt, invalid or too
   * large): the report lists it as unreadable and compares the others.
   */
  unreadable(entry: FleetUnreadable): void;
  /**
   * Splits the members into cohorts and compares them.
   *
   * @throws {UsageError} when a `groupBy` key is on no snapshot
   */
  finish(): FleetReport;
}

/**
 * Makes a {@link FleetBuilder}: {@link buildFleetReport} for a fleet read one snapshot at a
 * time (10,000 snapshots need not be in memory at once).
 *
 * @param options ignore patterns, cohort keys, all readings
 * @returns the builder
 * @throws {UsageError} when `groupBy` combines `none` with other keys
 */
export function createFleetBuilder(options: FleetOptions = {}): FleetBuilder {
  const reader = new FleetReader(createFleetTables(options));
  const { unreadable } = reader.tables;
  return {
    // A member the comparison cannot take (whatever the reason) is reported, not fatal: one
    // odd node never loses the report of the others.
    add(member) {
      try {
        reader.add(member);
      } catch (error) {
        reader.rollBack();
        unreadable.push({ node: member.node, source: member.node, reason: firstLine(error) });
      }
    },
    addYaml(text, nodeName) {
      try {
        return reader.addYaml(text, nodeName);
      } catch {
        // Read again by parseSnapshot and `add`, which names the failure.
        reader.rollBack();
        return false;
      }
    },
    unreadable: (entry) => void unreadable.push({ ...entry }),
    finish: () => finishFleet(reader.tables),
  };
}

function firstLine(error: unknown): string {
  const text = error instanceof Error ? error.message : String(error);
  return text.split("\n")[0] ?? "";
}

/** What a {@link FleetBuilder} keeps while members are added, and how it adds them. */
class FleetReader {
  /**
   * Per subtype, per key: the path id, or -1 when ignored. Keys from Object.keys() are
   * internalised strings, so this lookup avoids building and hashing a path per reading.
   */
  readonly keyTables = new Map<MeasurementType, Map<string, Map<string, number>>>();
  /**
   * Per path: the node that set it last, and where in that node's pairs (a path read twice in
   * one snapshot keeps its later reading).
   */
  readonly lastNode: number[] = [];
  readonly lastPos: number[] = [];

  /** What reading this fleet's YAML files remembers from one to the next. */
  readonly yamlCaches = new YamlReadCaches();

  constructor(readonly tables: FleetTables) {}

  /** A subtype's path ids by key. */
  keysOf(type: MeasurementType, subtype: string): Map<string, number> {
    let bySubtype = this.keyTables.get(type);
    if (!bySubtype) this.keyTables.set(type, bySubtype = new Map());
    let keys = bySubtype.get(subtype);
    if (!keys) bySubtype.set(subtype, keys = new Map());
    return keys;
  }

  /** The id of a path, its table made on first sight; -1 when it is ignored. */
  pathId(keys: Map<string, number>, type: MeasurementType, subtype: string, key: string): number {
    let pid = keys.get(key);
    if (pid === undefined) {
      pid = internPath(this.tables, type, subtype, key);
      keys.set(key, pid);
      // A new path gets its slots at once: the arrays stay packed and read in bounds.
      while (this.lastNode.length < this.tables.paths.length) {
        this.lastNode.push(-1);
        this.lastPos.push(0);
      }
    }
    return pid;
  }

  /** Adds one reading to a node's pairs of its type; a path read twice keeps its later reading. */
  place(pairs: number[], pid: number, vid: number, nodeIndex: number): void {
    if (this.lastNode[pid] === nodeIndex) {
      pairs[(this.lastPos[pid] as number) + 1] = vid;
      return;
    }
    this.lastNode[pid] = nodeIndex;
    this.lastPos[pid] = pairs.length;
    pairs.push(pid, vid);
  }

  /**
   * Forgets a member whose reading failed part way: nothing of it was committed (its name, its
   * cohort readings and its configuration go in last), and the paths it placed are freed for
   * the next member, which gets the same index.
   */
  rollBack(): void {
    const nodeIndex = this.tables.configs.length;
    for (let pid = 0; pid < this.lastNode.length; pid++) {
      if (this.lastNode[pid] === nodeIndex) this.lastNode[pid] = -1;
    }
  }

  add(member: FleetMember): void {
    const { configs, paths } = this.tables;
    const nodeIndex = configs.length;
    const perType = new Map<MeasurementType, number[]>();
    for (const m of member.snapshot.measurements) {
      if (FLEET_CLUSTER_SCOPED_TYPES.includes(m.type)) continue;
      let pairs = perType.get(m.type);
      if (!pairs) perType.set(m.type, pairs = []);
      for (const s of m.subtypes) {
        const keys = this.keysOf(m.type, s.subtype);
        const data = s.data;
        for (const key of Object.keys(data)) {
          // Keys from Object.keys() are internalised strings: the lookup hashes no new string.
          const pid = this.pathId(keys, m.type, s.subtype, key);
          if (pid < 0) continue;
          this.place(pairs, pid, valueId(paths[pid] as PathTable, data[key] as Reading), nodeIndex);
        }
      }
    }
    const config = finishConfig(this.tables, perType);
    this.tables.cohortReader.observe(member.snapshot);
    this.tables.rawNames.push(member.node);
    configs.push(config);
  }

  addYaml(text: string, nodeName: (sourceNode: string) => string): boolean {
    let doc: YamlSnapshot | undefined;
    try {
      doc = walkSnapshotYaml(text, this.yamlCaches);
    } catch {
      // A scalar the library could not read (nested too deeply, ...): parseSnapshot says why.
      return false;
    }
    const sourceNode = doc === undefined ? undefined : validYamlSnapshot(doc);
    if (doc === undefined || sourceNode === undefined) return false;
    const { configs, cohortReader } = this.tables;
    const nodeIndex = configs.length;
    // The cohort keys read a few subtypes (GPU.smi, the node's NodeTopology): those only.
    const observed: Measurement[] = [];
    const perType = new Map<MeasurementType, number[]>();
    for (const m of doc.measurements) {
      const type = m.type as MeasurementType;
      const subtypes = m.subtypes ?? [];
      observed.push({
        type,
        subtypes: subtypes
          .filter((s) => cohortReader.wants(type, s.subtype as string))
          .map((s) => ({ subtype: s.subtype as string, data: readingMap(s.data) })),
      });
      if (FLEET_CLUSTER_SCOPED_TYPES.includes(type)) continue;
      let pairs = perType.get(type);
      if (!pairs) perType.set(type, pairs = []);
      for (const s of subtypes) this.addEntries(pairs, type, s, nodeIndex);
    }
    const config = finishConfig(this.tables, perType);
    cohortReader.observe({
      kind: SNAPSHOT_KIND,
      apiVersion: doc.apiVersion as string,
      metadata: { timestamp: "", version: "", "source-node": sourceNode },
      measurements: observed,
    });
    this.tables.rawNames.push(nodeName(sourceNode));
    configs.push(config);
    return true;
  }

  /** A subtype's data lines into a node's pairs, each line's ids remembered on the line. */
  addEntries(pairs: number[], type: MeasurementType, s: YamlSubtype, nodeIndex: number): void {
    const subtype = s.subtype as string;
    for (const entry of s.data) {
      let memo = entry.memo;
      if (memo === undefined || memo.owner !== this.tables) {
        const pid = this.pathId(this.keysOf(type, subtype), type, subtype, entry.key);
        const vid = pid < 0 ? -1 : valueId(this.tables.paths[pid] as PathTable, entry.reading);
        entry.memo = memo = { owner: this.tables, pid, vid };
      }
      if (memo.pid >= 0) this.place(pairs, memo.pid, memo.vid, nodeIndex);
    }
  }
}

/** A node's pairs per type, sorted by path id. */
function finishConfig(
  tables: FleetTables,
  perType: Map<MeasurementType, number[]>,
): Map<MeasurementType, Int32Array> {
  const config = new Map<MeasurementType, Int32Array>();
  for (const [type, pairs] of perType) {
    // Most nodes of a cohort share a type's configuration: one copy is kept for all of them.
    const sorted = sortPairs(pairs);
    const hash = hashPairs(sorted);
    let same = tables.shared.get(hash);
    if (!same) tables.shared.set(hash, same = []);
    let kept = same.find((p) => samePairs(p, sorted));
    if (!kept) same.push(kept = sorted);
    config.set(type, kept);
  }
  return config;
}

/** The id of a reading among its path's values, interned on first sight. */
function valueId(table: PathTable, value: Reading): number {
  if (table.plain) {
    const canonical = value === null ? null : typeof value === "string" ? value : String(value);
    return table.ids.get(canonical) ?? addValue(table, canonical, value);
  }
  // Raw readings first: every node of a cluster carries the same NodeTopology strings, so
  // their node lists are split and sorted once, not once per node.
  let vid = table.raw.get(value);
  if (vid === undefined) {
    const canonical = canonicalReading(value, table.schema, table.topology);
    vid = table.ids.get(canonical) ?? addValue(table, canonical, value);
    table.raw.set(value, vid);
  }
  return vid;
}

/**
 * What `parseSnapshot` checks of a document read fast, and the canonical order the builder
 * relies on (measurements in type order, where a path read twice keeps the later reading).
 *
 * @returns its `metadata.source-node` (`""` when absent), or undefined when `parseSnapshot`
 *   must read it (invalid, out of order, or metadata that is not all strings)
 */
function validYamlSnapshot(doc: YamlSnapshot): string | undefined {
  if (doc.kind !== SNAPSHOT_KIND) return undefined;
  if (typeof doc.apiVersion !== "string" || !ACCEPTED_API_VERSIONS.includes(doc.apiVersion)) {
    return undefined;
  }
  let sourceNode = "";
  for (const e of doc.metadata) {
    if (typeof e.value !== "string") return undefined;
    if (e.key === "source-node") sourceNode = e.value;
  }
  let lastOrder = -1;
  for (const m of doc.measurements) {
    if (!isMeasurementType(m.type)) return undefined;
    const order = MEASUREMENT_TYPES.indexOf(m.type);
    if (order < lastOrder) return undefined;
    lastOrder = order;
    for (const s of m.subtypes ?? []) if (typeof s.subtype !== "string") return undefined;
  }
  return sourceNode;
}

/** A map's readings as the record `parseSnapshot` makes (keys sorted, as `normalizeSnapshot`). */
function readingMap(map: YamlMap): ReadingMap {
  const sorted = [...map].sort((a, b) => compareKeys(a.key, b.key));
  const out: ReadingMap = {};
  for (const e of sorted) setOwn(out, e.key, e.reading);
  return out;
}

/** Empty tables for a builder with these options. */
function createFleetTables(options: FleetOptions): FleetTables {
  return {
    options,
    ignored: compileIgnore([...FLEET_IDENTITY_IGNORE_PATTERNS, ...(options.ignore ?? [])]),
    subtypeIds: new Map(),
    cohortReader: createCohortReader(options.groupBy ?? []),
    rawNames: [],
    unreadable: [],
    paths: [],
    pathIds: new Map(),
    subtypeNodes: [],
    configs: [],
    shared: new Map(),
  };
}

/** The id of a reading's path, its table made on first sight; -1 when the path is ignored. */
function internPath(
  tables: FleetTables,
  type: MeasurementType,
  subtype: string,
  key: string,
): number {
  const { paths, pathIds, subtypeIds, subtypeNodes } = tables;
  const path = `${type}.${subtype}.${key}`;
  if (tables.ignored(path)) return -1;
  let pid = pathIds.get(path);
  if (pid === undefined) {
    pid = paths.length;
    pathIds.set(path, pid);
    const schema = readingSchema(type, subtype, key);
    const topology = type === "NodeTopology" && (subtype === "taint" || subtype === "label");
    const subtypePath = `${type}.${subtype}`;
    let sid = subtypeIds.get(subtypePath);
    if (sid === undefined) {
      sid = subtypeNodes.length;
      subtypeIds.set(subtypePath, sid);
      subtypeNodes.push(0);
    }
    paths.push({
      path,
      type,
      subtype: subtypePath,
      sid,
      schema,
      topology,
      plain: schema === "string" && !topology,
      ids: new Map(),
      raw: new Map(),
      samples: [],
      counts: [],
      present: 0,
    });
  }
  return pid;
}

/** What a fleet builder has read: interned paths and values, and each node's configuration. */
interface FleetTables {
  readonly options: FleetOptions;
  /** Whether a path is left out (identity readings and the caller's ignore patterns). */
  readonly ignored: (path: string) => boolean;
  /** `<Type>.<subtype>` to its id. */
  readonly subtypeIds: Map<string, number>;
  readonly cohortReader: ReturnType<typeof createCohortReader>;
  readonly rawNames: string[];
  /** Members that could not be read or compared. */
  readonly unreadable: FleetUnreadable[];
  readonly paths: PathTable[];
  readonly pathIds: Map<string, number>;
  /** Per subtype id: the nodes of the cohort at hand that carry it. */
  readonly subtypeNodes: number[];
  /** Per node, per type: flat [pathId, valueId, pathId, valueId, ...] sorted by path id. */
  readonly configs: Map<MeasurementType, Int32Array>[];
  /** Each distinct configuration of a type once, by {@link hashPairs}. */
  readonly shared: Map<string, Int32Array[]>;
}

/**
 * Counts each distinct (path, value) once per node of the cohort, after duplicates were
 * merged, and the nodes carrying each subtype ({@link resetCohortCounts} once it is done).
 *
 * @returns the measurement types the cohort carries
 */
function countCohort(
  tables: FleetTables,
  indices: readonly number[],
  subtypeLast: number[],
): Set<MeasurementType> {
  const { paths, configs, subtypeNodes } = tables;
  subtypeNodes.fill(0);
  const cohortTypes = new Set<MeasurementType>();
  for (const nodeIndex of indices) {
    for (const [type, pairs] of configs[nodeIndex] as Map<MeasurementType, Int32Array>) {
      cohortTypes.add(type);
      for (let i = 0; i < pairs.length; i += 2) {
        const table = paths[pairs[i] as number] as PathTable;
        table.counts[pairs[i + 1] as number]!++;
        table.present++;
        if (subtypeLast[table.sid] !== nodeIndex) {
          subtypeLast[table.sid] = nodeIndex;
          subtypeNodes[table.sid]!++;
        }
      }
    }
  }
  return cohortTypes;
}

function resetCohortCounts(tables: FleetTables, indices: readonly number[]): void {
  const { paths, configs } = tables;
  for (const nodeIndex of indices) {
    for (const pairs of (configs[nodeIndex] as Map<MeasurementType, Int32Array>).values()) {
      for (let i = 0; i < pairs.length; i += 2) {
        const table = paths[pairs[i] as number] as PathTable;
        table.counts[pairs[i + 1] as number] = 0;
        table.present = 0;
      }
    }
  }
}

/**
 * Groups the cohort's nodes by their configuration of one type: by a hash, confirmed by
 * comparing with the group's first. Largest group first; groups follow first appearance in
 * name order and the sort is stable, so ties go to the first node.
 */
function groupByConfiguration(
  tables: FleetTables,
  indices: readonly number[],
  type: MeasurementType,
): number[][] {
  const { configs } = tables;
  const groups: number[][] = [];
  const byHash = new Map<string, number[][]>();
  for (const i of indices) {
    const pairs = configs[i]?.get(type);
    const hash = pairs ? hashPairs(pairs) : "absent";
    let candidates = byHash.get(hash);
    if (!candidates) byHash.set(hash, candidates = []);
    let group = candidates.find((g) => samePairs(configs[g[0] as number]?.get(type), pairs));
    if (!group) {
      group = [];
      candidates.push(group);
      groups.push(group);
    }
    group.push(i);
  }
  return [...groups].sort((a, b) => b.length - a.length);
}

/**
 * Compares one cohort's nodes, type by type, with the largest group's configuration: the
 * groups, the columns the report shows, and each other node's differences and absent subtypes
 * (into `findings`).
 */
function compareCohort(
  tables: FleetTables,
  cohort: { indices: readonly number[]; types: Set<MeasurementType> },
  names: readonly string[],
  findings: NodeFindings,
): { measurements: FleetMeasurement[]; columns: Map<number, FleetColumn> } {
  const { paths, pathIds, configs, subtypeNodes, options } = tables;
  const { indices } = cohort;
  const measurements: FleetMeasurement[] = [];
  const columns = new Map<number, FleetColumn>();
  for (const type of MEASUREMENT_TYPES) {
    if (!cohort.types.has(type)) continue;
    const sorted = groupByConfiguration(tables, indices, type);
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
    if (options.allReadings) {
      for (const [pid, vid] of refMap) {
        const table = paths[pid] as PathTable;
        columns.set(pid, {
          path: table.path,
          type,
          fleet: table.samples[vid] as Reading,
          fleetNodes: table.counts[vid] as number,
        });
      }
    }
    for (const group of sorted.slice(1)) {
      const pairs = configs[group[0] as number]?.get(type) ?? new Int32Array();
      const found = compareToReference(pairs, refMap, paths, indices.length);
      const gaps = absentSubtypes(found, refMap, paths, pathIds, subtypeNodes);
      for (const d of found) {
        const pid = pathIds.get(d.path) as number;
        if (!columns.has(pid)) {
          const column: FleetColumn = { path: d.path, type, fleetNodes: d.fleetNodes };
          if (d.fleet !== undefined) column.fleet = d.fleet;
          columns.set(pid, column);
        }
      }
      recordFindings(group, { found, gaps }, findings);
    }
  }
  return { measurements, columns };
}

/** The report of every member read: cohorts, their groups and columns, the outliers. */
function finishFleet(tables: FleetTables): FleetReport {
  const { rawNames, cohortReader, subtypeNodes, configs } = tables;
  const names = uniqueNames(rawNames);
  const order = names.map((_, i) => i).sort((a, b) =>
    compareNodeNames(names[a] as string, names[b] as string)
  );
  const assignment = cohortReader.assign(names);
  const cohortMembers = membersByCohort(order, assignment.cohortOf);

  const findings: NodeFindings = { differences: new Map(), absences: new Map() };
  const cohorts: FleetCohort[] = [];
  const subtypeLast: number[] = subtypeNodes.map(() => -1);
  for (const [cohortName, indices] of cohortMembers) {
    const types = countCohort(tables, indices, subtypeLast);
    const compared = compareCohort(tables, { indices, types }, names, findings);
    resetCohortCounts(tables, indices);
    cohorts.push({
      name: cohortName,
      key: assignment.values.get(cohortName) ?? {},
      nodes: indices.map((i) => names[i] as string),
      measurements: compared.measurements,
      columns: [...compared.columns.values()].sort((a, b) => compareKeys(a.path, b.path)),
      outliers: indices.filter((i) => findings.differences.has(i)).length,
    });
  }
  const outliers = listOutliers(order, { names, cohortOf: assignment.cohortOf }, findings);
  const unreadable = [...tables.unreadable].sort((a, b) => compareNodeNames(a.node, b.node));
  return {
    nodes: order.map((i) => names[i] as string),
    groupBy: assignment.keys,
    cohorts,
    outliers,
    unreadable,
    summary: {
      nodes: configs.length,
      cohorts: cohorts.length,
      singletons: cohorts.filter((c) => c.nodes.length === 1).length,
      outliers: outliers.length,
      differences: outliers.reduce((sum, o) => sum + o.differences.length, 0),
      unreadable: unreadable.length,
    },
  };
}

/** Per node index: its differences from its cohort's majority, and the subtypes it lacks. */
interface NodeFindings {
  differences: Map<number, FleetDifference[]>;
  absences: Map<number, FleetAbsentSubtype[]>;
}

/** Adds one group's differences and absent subtypes to each of its nodes' findings. */
function recordFindings(
  group: readonly number[],
  compared: { found: readonly FleetDifference[]; gaps: readonly FleetAbsentSubtype[] },
  findings: NodeFindings,
): void {
  for (const i of group) {
    let list = findings.differences.get(i);
    if (!list) findings.differences.set(i, list = []);
    // One push per item: spreading a list as arguments overflows the stack past ~100,000.
    for (const d of compared.found) list.push(d);
    if (compared.gaps.length > 0) {
      let absent = findings.absences.get(i);
      if (!absent) findings.absences.set(i, absent = []);
      for (const gap of compared.gaps) absent.push(gap);
    }
  }
}

/** The members of each cohort (in `order`), largest cohort first, ties by name. */
function membersByCohort(
  order: readonly number[],
  cohortOf: readonly string[],
): Map<string, number[]> {
  const members = new Map<string, number[]>();
  for (const i of order) {
    const name = cohortOf[i] as string;
    let list = members.get(name);
    if (!list) members.set(name, list = []);
    list.push(i);
  }
  const names = [...members.keys()].sort((a, b) =>
    (members.get(b) as number[]).length - (members.get(a) as number[]).length ||
    compareKeys(a, b)
  );
  return new Map(names.map((name) => [name, members.get(name) as number[]]));
}

/** The nodes that differ from their cohort's majority, in `order`, findings sorted by path. */
function listOutliers(
  order: readonly number[],
  nodes: { names: readonly string[]; cohortOf: readonly string[] },
  found: NodeFindings,
): FleetOutlier[] {
  return order
    .filter((i) => found.differences.has(i))
    .map((i) => {
      const outlier: FleetOutlier = {
        node: nodes.names[i] as string,
        cohort: nodes.cohortOf[i] as string,
        differences: (found.differences.get(i) as FleetDifference[]).sort((a, b) =>
          compareKeys(a.path, b.path)
        ),
      };
      const absent = found.absences.get(i);
      if (absent) {
        outlier.absentSubtypes = absent.sort((a, b) => compareKeys(a.subtype, b.subtype));
      }
      return outlier;
    });
}

function addValue(table: PathTable, canonical: string | null, value: Reading): number {
  const vid = table.samples.length;
  table.ids.set(canonical, vid);
  table.samples.push(value);
  table.counts.push(0);
  return vid;
}

function absentSubtypes(
  found: readonly FleetDifference[],
  reference: Map<number, number>,
  paths: readonly PathTable[],
  pathIds: Map<string, number>,
  subtypeNodes: readonly number[],
): FleetAbsentSubtype[] {
  const refCounts = new Map<number, number>();
  for (const pid of reference.keys()) {
    const sid = (paths[pid] as PathTable).sid;
    refCounts.set(sid, (refCounts.get(sid) ?? 0) + 1);
  }
  const removed = new Map<number, number>();
  const other = new Set<number>();
  for (const d of found) {
    const sid = (paths[pathIds.get(d.path) as number] as PathTable).sid;
    if (d.kind === "removed") removed.set(sid, (removed.get(sid) ?? 0) + 1);
    else other.add(sid);
  }
  const out: FleetAbsentSubtype[] = [];
  for (const [sid, count] of removed) {
    if (other.has(sid) || count !== refCounts.get(sid)) continue;
    const table = paths.find((t) => t.sid === sid) as PathTable;
    out.push({ subtype: table.subtype, readings: count, fleetNodes: subtypeNodes[sid] as number });
  }
  return out;
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
  let sorted = true;
  for (let i = 2; i < pairs.length; i += 2) {
    if ((pairs[i] as number) < (pairs[i - 2] as number)) {
      sorted = false;
      break;
    }
  }
  if (sorted) return new Int32Array(pairs);
  // Pack (pathId, valueId) into one exact double, sort numerically, unpack.
  const packed = new Float64Array(pairs.length / 2);
  for (let i = 0; i < pairs.length; i += 2) {
    packed[i / 2] = (pairs[i] as number) * PACK + (pairs[i + 1] as number);
  }
  packed.sort();
  const out = new Int32Array(pairs.length);
  for (let j = 0; j < packed.length; j++) {
    const x = packed[j] as number;
    const pid = Math.floor(x / PACK);
    out[j * 2] = pid;
    out[j * 2 + 1] = x - pid * PACK;
  }
  return out;
}

/** Value ids per path stay below 2^24; path ids below 2^29: the packed value is exact. */
const PACK = 2 ** 24;

function hashPairs(pairs: Int32Array): string {
  let h1 = 0x811c9dc5;
  let h2 = 0x9747b28c;
  for (let i = 0; i < pairs.length; i++) {
    const x = pairs[i] as number;
    h1 = Math.imul(h1 ^ x, 16777619);
    h2 = Math.imul(h2 ^ x, 0x5bd1e995);
    h2 ^= h2 >>> 15;
  }
  return `${pairs.length}:${h1 >>> 0}:${h2 >>> 0}`;
}

function samePairs(a: Int32Array | undefined, b: Int32Array | undefined): boolean {
  if (a === b) return true;
  if (a === undefined || b === undefined) return false;
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
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
