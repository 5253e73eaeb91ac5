/**
 * Semantic drift between two snapshots: measurement → subtype → key, with the schema's
 * reading types deciding when `5128` and `"5128"` are the same value, NodeTopology's
 * folded node lists compared as sets, volatile readings ignored by pattern, and
 * `metadata` (timestamp, version, node) never counted.
 *
 * Subtype `context` (status, source, message) is not a reading: it never counts as drift.
 * A change of `context.status` (a missing status reads as `ok`) is reported on its own in
 * {@link DiffResult.statusChanges}, so "the collector could not ask" is visible next to
 * the readings that vanished because of it.
 *
 * @module
 */
import { compareKeys } from "./model.ts";
import type { MeasurementType, Reading, Snapshot } from "./model.ts";

/** How a change came about, seen from the baseline. */
export type ChangeKind = "added" | "removed" | "modified";

/** One reading that differs between baseline and target. */
export interface Change {
  /** `added` (only in target), `removed` (only in baseline) or `modified`. */
  kind: ChangeKind;
  /** Always `info` (the only severity upstream knows). */
  severity: "info";
  /** `<Type>.<subtype>.<key>`, e.g. `GPU.smi.driver`. */
  path: string;
  /** The baseline reading, typed as read; absent for `added`. */
  baseline?: Reading;
  /** The target reading, typed as read; absent for `removed`. */
  target?: Reading;
  /** For a NodeTopology reading whose node list changed: nodes that joined and left. */
  nodes?: { added: string[]; removed: string[] };
}

/** Counts of {@link Change}s by kind. */
export interface DiffSummary {
  /** Readings only in the target. */
  added: number;
  /** Readings only in the baseline. */
  removed: number;
  /** Readings on both sides with different values. */
  modified: number;
  /** All changes; drift means `total > 0`. */
  total: number;
}

/** A subtype whose `context.status` differs (reported, never counted as drift). */
export interface StatusChange {
  /** `<Type>.<subtype>`. */
  path: string;
  /** Baseline status (`ok` when the subtype carries none); absent if the subtype is absent. */
  baseline?: string;
  /** Target status; absent if the subtype is absent. */
  target?: string;
}

/** The result document of `aicr diff` for two snapshots (upstream shape, typed values). */
export interface DiffResult {
  /** Name of the baseline input (path, `-`, `cm://ns/name`). */
  baselineSource: string;
  /** Name of the target input. */
  targetSource: string;
  /** Every change, sorted by path. */
  changes: Change[];
  /** Counts by kind. */
  summary: DiffSummary;
  /** Collector status changes, sorted by path; not part of {@link DiffSummary}. */
  statusChanges: StatusChange[];
}

/**
 * Readings that change on every boot or every second without any configuration change.
 * Checked against a real `/proc/sys` sampled seconds apart, plus systemd's runtime
 * counters, PIDs and timestamps. `--no-default-ignores` turns them back on.
 */
export const DEFAULT_IGNORE_PATTERNS: readonly string[] = [
  "OS.sysctl./proc/sys/kernel/random/*",
  "OS.sysctl./proc/sys/kernel/ns_last_pid",
  "OS.sysctl./proc/sys/kernel/pty/nr",
  "OS.sysctl./proc/sys/fs/dentry-state",
  "OS.sysctl./proc/sys/fs/file-nr",
  "OS.sysctl./proc/sys/fs/inode-*",
  "OS.sysctl./proc/sys/fs/aio-nr",
  "OS.sysctl./proc/sys/fs/quota/*",
  "SystemD.*Timestamp",
  "SystemD.*TimestampMonotonic",
  "SystemD.*.MainPID",
  "SystemD.*.ExecMainPID",
  "SystemD.*.ControlPID",
  "SystemD.*.InvocationID",
  "SystemD.*.MemoryCurrent",
  "SystemD.*.MemoryPeak",
  "SystemD.*.MemorySwapCurrent",
  "SystemD.*.MemorySwapPeak",
  "SystemD.*.MemoryZSwapCurrent",
  "SystemD.*.MemoryAvailable",
  "SystemD.*.CPUUsageNSec",
  "SystemD.*.TasksCurrent",
  "SystemD.*.IOReadBytes",
  "SystemD.*.IOReadOperations",
  "SystemD.*.IOWriteBytes",
  "SystemD.*.IOWriteOperations",
  "SystemD.*.IPIngressBytes",
  "SystemD.*.IPIngressPackets",
  "SystemD.*.IPEgressBytes",
  "SystemD.*.IPEgressPackets",
];

/**
 * The type the snapshot schema (aicr-behaviour §1.3) gives a reading:
 * `string`, `int` and `bool` readings compare by meaning (`5128` equals `"5128"` in a
 * string reading, `"8"` equals `8` in an int one, `"true"` equals `true` in a bool one);
 * `typed` readings, whose type carries information (SystemD's D-Bus typing, readings the
 * schema does not list), compare by type and value.
 */
export type ReadingSchema = "string" | "int" | "bool" | "typed";

const STRING_SUBTYPES: Readonly<Record<string, readonly string[]>> = {
  OS: ["grub", "sysctl", "release"],
  K8s: ["server", "image", "policy", "node"],
  NodeTopology: ["taint", "label"],
};

/**
 * Looks up the schema type of a reading.
 *
 * @param type the measurement type
 * @param subtype the subtype name
 * @param key the reading key
 * @returns how values of this reading compare
 */
export function readingSchema(type: string, subtype: string, key: string): ReadingSchema {
  if (STRING_SUBTYPES[type]?.includes(subtype)) return "string";
  if (type === "OS" && subtype === "kmod") return "bool";
  if (type === "NodeTopology" && subtype === "summary") return "int";
  if (type === "GPU" && subtype === "smi") return key === "gpu-count" ? "int" : "string";
  if (type === "GPU" && subtype === "hardware") {
    if (key === "gpu-count") return "int";
    if (key === "gpu-present" || key === "driver-loaded") return "bool";
    return "string";
  }
  return "typed";
}

const INT_TEXT = /^[+-]?\d+$/;
const MORE_SUFFIX = /^(.*?)( \(\+\d+ more\))$/;

/**
 * The equality key of a reading under its schema: two readings are the same value
 * exactly when their keys are equal. NodeTopology `taint`/`label` values
 * (`"<effect>|<value>|<nodes>"`, `"<value>|<nodes>"`) get their node list sorted, so a
 * reordered list is the same value.
 *
 * @param value the reading
 * @param schema its schema type from {@link readingSchema}
 * @param topology whether the reading is a folded NodeTopology taint or label
 * @returns a string that is equal for equal values
 */
export function canonicalReading(value: Reading, schema: ReadingSchema, topology = false): string {
  if (value === null) return "null";
  if (schema === "string") {
    const text = String(value);
    return "s:" + (topology ? canonicalFolded(text) : text);
  }
  if (schema === "int" && typeof value === "string" && INT_TEXT.test(value.trim())) {
    return "n:" + BigInt(value.trim()).toString();
  }
  if (schema === "bool" && (value === "true" || value === "false")) return "b:" + value;
  switch (typeof value) {
    case "string":
      return "s:" + value;
    case "boolean":
      return "b:" + value;
    case "bigint":
      return "n:" + value.toString();
    default:
      return "n:" + (Number.isInteger(value) ? BigInt(value).toString() : String(value));
  }
}

/** A folded NodeTopology value split into its fixed prefix and its node list. */
interface FoldedValue {
  prefix: string;
  nodes: string[];
  more: string;
}

function splitFolded(text: string): FoldedValue | undefined {
  const bar = text.lastIndexOf("|");
  if (bar < 0) return undefined;
  let list = text.slice(bar + 1);
  let more = "";
  const m = MORE_SUFFIX.exec(list);
  if (m) {
    list = m[1] ?? "";
    more = m[2] ?? "";
  }
  const nodes = list === "" ? [] : list.split(",").map((n) => n.trim()).sort(compareKeys);
  return { prefix: text.slice(0, bar), nodes, more };
}

function canonicalFolded(text: string): string {
  const folded = splitFolded(text);
  return folded ? `${folded.prefix}|${folded.nodes.join(",")}${folded.more}` : text;
}

function isFoldedTopology(type: string, subtype: string): boolean {
  return type === "NodeTopology" && (subtype === "taint" || subtype === "label");
}

/**
 * Compiles `--ignore` glob patterns over reading paths (`<Type>.<subtype>.<key>`):
 * `*` matches any run of characters (dots and slashes included), `?` one character,
 * everything else itself. Answers are cached per path, so a fleet pays once per path.
 *
 * @param patterns glob patterns
 * @returns a predicate telling whether a path is ignored
 */
export function compileIgnore(patterns: readonly string[]): (path: string) => boolean {
  if (patterns.length === 0) return () => false;
  const body = patterns.map((p) =>
    p.replace(/[.+^${}()|[\]\\]/g, "\\$&").replace(/\*/g, ".*").replace(/\?/g, ".")
  ).join("|");
  const regexp = new RegExp(`^(?:${body})$`, "s");
  const cache = new Map<string, boolean>();
  return (path) => {
    let hit = cache.get(path);
    if (hit === undefined) {
      hit = regexp.test(path);
      cache.set(path, hit);
    }
    return hit;
  };
}

/** One reading of a snapshot, flattened. */
export interface FlatReading {
  /** `<Type>.<subtype>.<key>`. */
  path: string;
  /** The measurement type. */
  type: MeasurementType;
  /** The subtype name. */
  subtype: string;
  /** The key. */
  key: string;
  /** The reading as read. */
  value: Reading;
  /** Its equality key ({@link canonicalReading}). */
  canonical: string;
}

/**
 * Flattens a snapshot's readings (metadata and context left out), skipping ignored paths.
 * A measurement type or subtype given twice merges, later readings winning.
 *
 * @param snapshot the snapshot
 * @param ignored predicate from {@link compileIgnore}
 * @returns readings by path
 */
function flattenSnapshot(
  snapshot: Snapshot,
  ignored: (path: string) => boolean = () => false,
): Map<string, FlatReading> {
  const out = new Map<string, FlatReading>();
  for (const m of snapshot.measurements) {
    for (const s of m.subtypes) {
      const topology = isFoldedTopology(m.type, s.subtype);
      const prefix = `${m.type}.${s.subtype}.`;
      for (const [key, value] of Object.entries(s.data)) {
        const path = prefix + key;
        if (ignored(path)) continue;
        const schema = readingSchema(m.type, s.subtype, key);
        out.set(path, {
          path,
          type: m.type,
          subtype: s.subtype,
          key,
          value,
          canonical: canonicalReading(value, schema, topology),
        });
      }
    }
  }
  return out;
}

/** Options for {@link diffSnapshots}. */
export interface DiffOptions {
  /** Name of the baseline input. @default "baseline" */
  baselineSource?: string;
  /** Name of the target input. @default "target" */
  targetSource?: string;
  /** Glob patterns of paths to leave out (add {@link DEFAULT_IGNORE_PATTERNS} yourself). */
  ignore?: readonly string[];
}

/**
 * Compares two snapshots semantically.
 *
 * @param baseline the reference snapshot
 * @param target the snapshot checked against it
 * @param options source names and ignore patterns
 * @returns changes sorted by path, their summary and collector status changes
 */
export function diffSnapshots(
  baseline: Snapshot,
  target: Snapshot,
  options: DiffOptions = {},
): DiffResult {
  const { baselineSource = "baseline", targetSource = "target", ignore = [] } = options;
  const ignored = compileIgnore(ignore);
  const before = flattenSnapshot(baseline, ignored);
  const after = flattenSnapshot(target, ignored);
  const changes: Change[] = [];
  for (const [path, b] of before) {
    const t = after.get(path);
    if (!t) {
      changes.push({ kind: "removed", severity: "info", path, baseline: b.value });
    } else if (t.canonical !== b.canonical) {
      const change: Change = {
        kind: "modified",
        severity: "info",
        path,
        baseline: b.value,
        target: t.value,
      };
      if (isFoldedTopology(b.type, b.subtype)) {
        const nodes = nodeMovement(b.value, t.value);
        if (nodes) change.nodes = nodes;
      }
      changes.push(change);
    }
  }
  for (const [path, t] of after) {
    if (!before.has(path)) changes.push({ kind: "added", severity: "info", path, target: t.value });
  }
  changes.sort((x, y) => compareKeys(x.path, y.path));
  return {
    baselineSource,
    targetSource,
    changes,
    summary: summarize(changes),
    statusChanges: diffStatuses(baseline, target, ignored),
  };
}

function nodeMovement(
  baseline: Reading,
  target: Reading,
): { added: string[]; removed: string[] } | undefined {
  const b = splitFolded(String(baseline));
  const t = splitFolded(String(target));
  if (!b || !t) return undefined;
  const bs = new Set(b.nodes);
  const ts = new Set(t.nodes);
  const added = t.nodes.filter((n) => !bs.has(n));
  const removed = b.nodes.filter((n) => !ts.has(n));
  return added.length > 0 || removed.length > 0 ? { added, removed } : undefined;
}

/**
 * Counts changes by kind.
 *
 * @param changes the changes
 * @returns the summary
 */
export function summarize(changes: readonly Change[]): DiffSummary {
  const summary: DiffSummary = { added: 0, removed: 0, modified: 0, total: changes.length };
  for (const c of changes) summary[c.kind]++;
  return summary;
}

function statuses(snapshot: Snapshot): Map<string, string> {
  const out = new Map<string, string>();
  for (const m of snapshot.measurements) {
    for (const s of m.subtypes) out.set(`${m.type}.${s.subtype}`, s.context?.status ?? "ok");
  }
  return out;
}

function diffStatuses(
  baseline: Snapshot,
  target: Snapshot,
  ignored: (path: string) => boolean,
): StatusChange[] {
  const before = statuses(baseline);
  const after = statuses(target);
  const out: StatusChange[] = [];
  for (const path of new Set([...before.keys(), ...after.keys()])) {
    // A whole subtype ignored (`SystemD.docker.service.*`) hides its status too.
    if (ignored(`${path}.*`)) continue;
    const b = before.get(path);
    const t = after.get(path);
    if (b === t) continue;
    // A subtype appearing or vanishing with status ok is already told by its readings.
    if ((b === undefined && t === "ok") || (t === undefined && b === "ok")) continue;
    const change: StatusChange = { path };
    if (b !== undefined) change.baseline = b;
    if (t !== undefined) change.target = t;
    out.push(change);
  }
  return out.sort((x, y) => compareKeys(x.path, y.path));
}
