/**
 * The fleet builder's memory: each member read once (from its snapshot, or straight from its
 * YAML text) into interned paths and values, and kept as one sorted (path, value) array per
 * measurement type, each distinct array once for all the nodes that share it. Nothing of a
 * snapshot is kept beyond that.
 *
 * @module
 */
import { createCohortReader } from "./cohort.ts";
import { canonicalReading, compileIgnore, readingSchema } from "./diff.ts";
import type { ReadingSchema } from "./diff.ts";
import { FLEET_CLUSTER_SCOPED_TYPES, FLEET_IDENTITY_IGNORE_PATTERNS } from "./fleet_model.ts";
import type { FleetMember, FleetOptions, FleetUnreadable } from "./fleet_model.ts";
import {
  ACCEPTED_API_VERSIONS,
  compareKeys,
  isMeasurementType,
  MEASUREMENT_TYPES,
  setOwn,
  SNAPSHOT_KIND,
} from "./model.ts";
import type { Measurement, MeasurementType, Reading, ReadingMap } from "./model.ts";
import { walkSnapshotYaml, YamlReadCaches } from "./yaml_reader.ts";
import type { YamlMap, YamlSnapshot, YamlSubtype } from "./yaml_reader.ts";

/** Interned readings of one path: value ids by equality key, a sample reading per id. */
export interface PathTable {
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

/** What a fleet builder (`fleet.ts`) keeps while members are added, and how it adds them. */
export class FleetReader {
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
export function createFleetTables(options: FleetOptions): FleetTables {
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
export interface FleetTables {
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

function addValue(table: PathTable, canonical: string | null, value: Reading): number {
  const vid = table.samples.length;
  table.ids.set(canonical, vid);
  table.samples.push(value);
  table.counts.push(0);
  return vid;
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

/** A configuration's hash: equal pairs hash equal; {@link samePairs} confirms a match. */
export function hashPairs(pairs: Int32Array): string {
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

/** Whether two configurations (sorted pairs, or absent) are the same. */
export function samePairs(a: Int32Array | undefined, b: Int32Array | undefined): boolean {
  if (a === b) return true;
  if (a === undefined || b === undefined) return false;
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}
