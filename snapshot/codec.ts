/**
 * Encoding and decoding of snapshot documents: YAML and JSON, validation with the
 * offending field and line, and the ConfigMap size budget.
 *
 * @module
 */
import {
  isMap,
  isScalar,
  isSeq,
  LineCounter,
  parseAllDocuments,
  parseDocument,
  stringify,
  visit,
} from "yaml";
import type { Document } from "yaml";
import { readSnapshotYaml, toReading as safeReading } from "./yaml_reader.ts";
import type { YamlReadCaches } from "./yaml_reader.ts";
import { snapshotYamlDocument, writeSnapshotYaml, YAML_WRITE_OPTIONS } from "./yaml_writer.ts";
import type { YamlWriteCaches } from "./yaml_writer.ts";
import { UsageError } from "../errors.ts";
import {
  ACCEPTED_API_VERSIONS,
  isMeasurementType,
  isNormalized,
  MEASUREMENT_TYPES,
  normalizeSnapshot,
  setOwn,
  SNAPSHOT_KIND,
} from "./model.ts";
import type {
  Measurement,
  Reading,
  ReadingMap,
  Snapshot,
  SnapshotMetadata,
  Subtype,
} from "./model.ts";

/** Output encodings. */
const SNAPSHOT_FORMATS = ["yaml", "json"] as const;

/** One output encoding. */
export type SnapshotFormat = typeof SNAPSHOT_FORMATS[number];

/** A ConfigMap holds at most 1 MiB in all (keys, values and metadata). */
const CONFIGMAP_MAX_BYTES = 1024 * 1024;

/** Bytes of a ConfigMap kept free for metadata, labels and the small data keys. */
const CONFIGMAP_RESERVED_BYTES = 16 * 1024;

/** The largest encoded snapshot a ConfigMap can carry. */
export const CONFIGMAP_SNAPSHOT_BUDGET = CONFIGMAP_MAX_BYTES - CONFIGMAP_RESERVED_BYTES;

/** The largest snapshot document readers accept (a fleet stream may hold many). */
export const MAX_DOCUMENT_BYTES = 16 * 1024 * 1024;

/** Aliases a YAML document may expand before it is rejected as an alias bomb. */
const MAX_ALIAS_COUNT = 100;

/**
 * Checks that a string names an output format.
 *
 * @param value any string
 * @returns whether it is `yaml` or `json`
 */
export function isSnapshotFormat(value: unknown): value is SnapshotFormat {
  return typeof value === "string" && (SNAPSHOT_FORMATS as readonly string[]).includes(value);
}

/**
 * Encodes a snapshot. The output is deterministic: canonical measurement order,
 * sorted keys, 2-space indent, no line folding, trailing newline.
 *
 * @param snapshot the snapshot
 * @param format `yaml` (default) or `json`
 * @param options what the YAML writer remembers across snapshots (a daemon's collections, a
 *   fleet's nodes) @default fresh caches
 * @returns the document text
 */
export function encodeSnapshot(
  snapshot: Snapshot,
  format: SnapshotFormat = "yaml",
  options: { yamlCaches?: YamlWriteCaches } = {},
): string {
  const normalized = isNormalized(snapshot) ? snapshot : normalizeSnapshot(snapshot);
  if (format === "yaml") {
    const fast = writeSnapshotYaml(normalized, options.yamlCaches);
    if (fast !== undefined) return fast;
  }
  const doc = toPlainDocument(normalized);
  if (format === "json") return encodeJson(doc) + "\n";
  return encodeYamlWithLibrary(doc);
}

/**
 * The `yaml` library's encoding of a plain snapshot document, which {@link encodeSnapshot}
 * matches byte for byte without it (see `yaml_writer.ts`), falling back to it only for
 * multi-line strings.
 *
 * @param doc the plain document (kind, apiVersion, metadata, measurements)
 * @returns the YAML text
 */
export function encodeYamlWithLibrary(doc: unknown): string {
  return snapshotYamlDocument(doc).toString(YAML_WRITE_OPTIONS);
}

/**
 * A snapshot as the plain document the encoders write (for comparing encoders).
 *
 * @param snapshot the snapshot
 * @returns kind, apiVersion, metadata and measurements, normalised
 */
export function plainSnapshotDocument(snapshot: Snapshot): Record<string, unknown> {
  return toPlainDocument(normalizeSnapshot(snapshot));
}

/**
 * Encodes any JSON-like value with `bigint`s written as exact integers.
 *
 * @param value the value
 * @returns 2-space indented JSON
 */
export function encodeJson(value: unknown): string {
  return JSON.stringify(
    value,
    (_key, v) => typeof v === "bigint" ? (JSON as unknown as RawJson).rawJSON(v.toString()) : v,
    2,
  );
}

interface RawJson {
  rawJSON(text: string): unknown;
}

function toPlainDocument(snapshot: Snapshot): Record<string, unknown> {
  return {
    kind: snapshot.kind,
    apiVersion: snapshot.apiVersion,
    metadata: snapshot.metadata,
    measurements: snapshot.measurements.map((m) => {
      const out: Record<string, unknown> = { type: m.type };
      if (m.subtypes.length > 0) {
        out.subtypes = m.subtypes.map((s) => {
          const sub: Record<string, unknown> = { subtype: s.subtype, data: s.data };
          if (s.context) sub.context = s.context;
          return sub;
        });
      }
      return out;
    }),
  };
}

/** Options for {@link parseSnapshot}. */
export interface ParseSnapshotOptions {
  /** Name of the input for error messages (a path, `-`, `cm://ns/name`). */
  source?: string;
  /**
   * What the YAML reader remembers across documents (a stream's, a fleet's). @default fresh ones
   */
  yamlCaches?: YamlReadCaches;
}

/**
 * Parses and validates one snapshot document (YAML or JSON; JSON is read as YAML 1.2).
 *
 * @param text the document text
 * @param options the input's name for errors
 * @returns the normalised snapshot
 * @throws {UsageError} naming the input, the field and the line when the document is invalid
 */
export function parseSnapshot(text: string, options: ParseSnapshotOptions = {}): Snapshot {
  const source = options.source ?? "input";
  checkDocumentSize(text, source);
  return guardNesting(source, () => {
    if (JSON_START_REGEXP.test(text)) return parseJsonSnapshot(text, source);
    const fast = readSnapshotYaml(text, options.yamlCaches);
    if (fast !== undefined) {
      // Our own layout, read without the library's node tree; an invalid document is read
      // again by the library below, for the error with its line.
      const adopted = adoptSnapshot(fast);
      if (adopted !== undefined) return adopted;
      try {
        return normalizeSnapshot(validateSnapshot(fast, rejectForLibrary));
      } catch (error) {
        if (error !== NEEDS_LIBRARY) throw error;
      }
    }
    const lineCounter = new LineCounter();
    const doc = parseDocument(text, YAML_PARSE_OPTIONS(lineCounter));
    return decodeDocument(doc, lineCounter, source);
  });
}

const NEEDS_LIBRARY = Symbol("read again by the library");

const rejectForLibrary: Fail = () => {
  throw NEEDS_LIBRARY;
};

/**
 * Runs a parse step and turns a stack overflow (a document nested thousands of levels
 * deep: the YAML and JSON parsers recurse per level) into a usage error naming the
 * input. A snapshot is five levels deep, so no valid document comes near the limit.
 *
 * @param source the input's name for the message
 * @param parse the parse step
 * @returns what the step returns
 * @throws {UsageError} naming the input when the document nests too deeply
 */
export function guardNesting<T>(source: string, parse: () => T): T {
  try {
    return parse();
  } catch (error) {
    // guard: snapshot-depth: a document nesting too deeply is refused, named
    if (isStackOverflow(error) || (error instanceof UsageError && isStackOverflow(error.cause))) {
      throw new UsageError(
        `Cannot parse snapshot '${source}': it nests too deeply (a snapshot document is five levels deep: measurements, subtypes, data, readings)`,
      );
    }
    throw error;
  }
}

function isStackOverflow(error: unknown): boolean {
  // V8 reports it as a RangeError, or as a SyntaxError when a regular expression overflowed.
  return error instanceof Error && /Maximum call stack size exceeded/.test(error.message);
}

const JSON_START_REGEXP = /^\s*[{[]/;

/**
 * The yaml library's own `uniqueKeys` check is quadratic in a mapping's size (a 1 MiB
 * sysctl map took seconds), so duplicates are found by {@link assertUniqueKeys} instead.
 */
function YAML_PARSE_OPTIONS(lineCounter: LineCounter) {
  return { intAsBigInt: true, uniqueKeys: false, lineCounter, prettyErrors: true } as const;
}

/** JSON.parse keeps integers beyond 2^53 exact as bigint (through the source text). */
function keepBigIntegers(_key: string, value: unknown, context?: { source?: string }): unknown {
  if (typeof value === "number" && !Number.isSafeInteger(value) && context?.source) {
    if (/^-?\d+$/.test(context.source)) return BigInt(context.source);
  }
  return value;
}

/** A document that starts like JSON is strict JSON (YAML would accept `{"a": }`), read fast. */
const UNSAFE_INTEGER_REGEXP = /\d{16}/;

function parseJsonSnapshot(text: string, source: string): Snapshot {
  let value: unknown;
  try {
    // The reviver (a call per value) only where an integer beyond 2^53 can be: 16 digits in a row.
    value = UNSAFE_INTEGER_REGEXP.test(text)
      ? JSON.parse(text, keepBigIntegers as (key: string, value: unknown) => unknown)
      : JSON.parse(text);
  } catch (error) {
    throw new UsageError(
      `Cannot parse snapshot '${source}' as JSON: ${
        error instanceof Error ? error.message : error
      }`,
      { cause: error },
    );
  }
  // Line numbers are only needed for an error: parse for positions only then.
  const locate = (path: (string | number)[]) => {
    const lineCounter = new LineCounter();
    return lineOf(parseDocument(text, YAML_PARSE_OPTIONS(lineCounter)), lineCounter, path);
  };
  return normalizeSnapshot(validateSnapshot(value, failure(source, locate)));
}

function failure(
  source: string,
  locate: (path: (string | number)[]) => number | undefined,
): Fail {
  return (path, problem) => {
    const line = locate(path);
    throw new UsageError(
      `Cannot read snapshot '${source}': field '${formatPath(path)}'${
        line ? ` (line ${line})` : ""
      } ${problem}`,
    );
  };
}

/** Rejects a mapping that repeats a key, naming the key and its line (one pass, a Set per map). */
function assertUniqueKeys(doc: Document, lineCounter: LineCounter, source: string): void {
  visit(doc, {
    Map(_key, map) {
      const seen = new Set<string>();
      for (const pair of map.items) {
        const key = isScalar(pair.key) ? String(pair.key.value) : String(pair.key);
        if (seen.has(key)) {
          const range = isScalar(pair.key) ? pair.key.range : undefined;
          const where = range ? ` at line ${lineCounter.linePos(range[0]).line}` : "";
          throw new UsageError(
            `Cannot parse snapshot '${source}'${where}: map keys must be unique: '${key}' repeats`,
          );
        }
        seen.add(key);
      }
    },
  });
}

/**
 * Parses a stream of snapshot documents (`---`-separated YAML, or one JSON document).
 *
 * @param text the stream
 * @param options the input's name for errors
 * @returns every snapshot in order
 * @throws {UsageError} on the first invalid document, naming its index and line
 */
export function parseSnapshotStream(text: string, options: ParseSnapshotOptions = {}): Snapshot[] {
  const source = options.source ?? "input";
  if (new TextEncoder().encode(text).length > MAX_DOCUMENT_BYTES * 64) {
    throw new UsageError(`Cannot read snapshots from '${source}': stream exceeds 1 GiB`);
  }
  return guardNesting(source, () => {
    const lineCounter = new LineCounter();
    const docs = parseAllDocuments(text, YAML_PARSE_OPTIONS(lineCounter));
    if (!Array.isArray(docs)) return [];
    return docs
      .filter((doc) => doc.contents !== null)
      .map((doc) => decodeDocument(doc, lineCounter, source));
  });
}

function checkDocumentSize(text: string, source: string): void {
  // Cheap upper bound first: UTF-8 needs at most 3 bytes per UTF-16 unit.
  if (text.length * 3 <= MAX_DOCUMENT_BYTES) return;
  const bytes = new TextEncoder().encode(text).length;
  // guard: snapshot-size: a document over the cap is refused
  if (bytes > MAX_DOCUMENT_BYTES) {
    throw new UsageError(
      `Cannot read snapshot '${source}': document is ${bytes} bytes, over the ${MAX_DOCUMENT_BYTES}-byte cap`,
    );
  }
}

function decodeDocument(doc: Document, lineCounter: LineCounter, source: string): Snapshot {
  const firstError = doc.errors[0];
  if (firstError) {
    const pos = firstError.linePos?.[0];
    const where = pos ? ` at line ${pos.line}, column ${pos.col}` : "";
    throw new UsageError(
      `Cannot parse snapshot '${source}'${where}: ${firstError.message.split(" at line ")[0]}`,
    );
  }
  assertUniqueKeys(doc, lineCounter, source);
  let value: unknown;
  try {
    // guard: snapshot-aliases: alias expansion is bounded;
    // mutant: `maxAliasCount: MAX_ALIAS_COUNT` -> `maxAliasCount: -1`
    value = doc.toJS({ maxAliasCount: MAX_ALIAS_COUNT });
  } catch (error) {
    throw new UsageError(
      `Cannot parse snapshot '${source}': ${error instanceof Error ? error.message : error}`,
      { cause: error },
    );
  }
  const locate = (path: (string | number)[]) => lineOf(doc, lineCounter, path);
  return normalizeSnapshot(validateSnapshot(value, failure(source, locate)));
}

type Fail = (path: (string | number)[], problem: string) => never;

/**
 * `normalizeSnapshot(validateSnapshot(value))` without the two copies, for a document our own
 * writer wrote (read by `readSnapshotYaml`): when it is valid and already in canonical order
 * (keys sorted, measurements in type order, the three metadata keys present, no empty context),
 * it is the snapshot itself, its safe integers turned to numbers in place. Anything else gives
 * undefined, and the caller validates and normalises as usual (with the error messages).
 *
 * @param value what `readSnapshotYaml` read (fresh objects, owned by the caller)
 * @returns the snapshot, or undefined
 */
function adoptSnapshot(value: unknown): Snapshot | undefined {
  if (!isRecord(value) || value.kind !== SNAPSHOT_KIND) return undefined;
  const keys = Object.keys(value);
  if (keys.length !== 4 || keys[2] !== "metadata" || keys[3] !== "measurements") return undefined;
  if (typeof value.apiVersion !== "string" || !ACCEPTED_API_VERSIONS.includes(value.apiVersion)) {
    return undefined;
  }
  const metadata = value.metadata;
  if (!isRecord(metadata) || !isCanonicalStrings(metadata)) return undefined;
  for (const key of ["timestamp", "version", "source-node"]) {
    if (!Object.hasOwn(metadata, key)) return undefined;
  }
  const measurements = value.measurements;
  if (!Array.isArray(measurements)) return undefined;
  let lastOrder = -1;
  for (const m of measurements) {
    if (!isRecord(m) || !isMeasurementType(m.type)) return undefined;
    const order = MEASUREMENT_TYPES.indexOf(m.type);
    if (order < lastOrder) return undefined;
    lastOrder = order;
    if (m.subtypes === undefined) m.subtypes = [];
    if (!Array.isArray(m.subtypes)) return undefined;
    for (const s of m.subtypes) {
      if (!isRecord(s) || typeof s.subtype !== "string" || !isRecord(s.data)) return undefined;
      if (!adoptReadings(s.data)) return undefined;
      if (s.context !== undefined && (!isRecord(s.context) || !isCanonicalStrings(s.context))) {
        return undefined;
      }
      if (s.context !== undefined && Object.keys(s.context).length === 0) return undefined;
    }
  }
  return value as unknown as Snapshot;
}

/** Whether a record's keys are in {@link sortKeys} order (array indices enumerate first). */
function isSortedKeys(keys: readonly string[]): boolean {
  let last: string | undefined;
  for (const key of keys) {
    if (ARRAY_INDEX_REGEXP.test(key) && Number(key) < 4294967295) continue;
    if (last !== undefined && !(last < key)) return false;
    last = key;
  }
  return true;
}

const ARRAY_INDEX_REGEXP = /^(?:0|[1-9][0-9]*)$/;

/** Sorted keys and string values (metadata, context). */
function isCanonicalStrings(record: Record<string, unknown>): boolean {
  const keys = Object.keys(record);
  for (const key of keys) if (typeof record[key] !== "string") return false;
  return isSortedKeys(keys);
}

/** Sorted keys and scalar readings; safe bigints become numbers in place, as `toReading`. */
function adoptReadings(data: Record<string, unknown>): boolean {
  const keys = Object.keys(data);
  for (const key of keys) {
    const v = data[key];
    if (typeof v === "string" || typeof v === "boolean" || typeof v === "number" || v === null) {
      continue;
    }
    if (typeof v !== "bigint") return false;
    data[key] = safeReading(v);
  }
  return isSortedKeys(keys);
}

function validateSnapshot(value: unknown, fail: Fail): Snapshot {
  if (!isRecord(value)) return fail([], "must be a mapping with kind, apiVersion and measurements");
  if (value.kind !== SNAPSHOT_KIND) {
    fail(["kind"], `must be '${SNAPSHOT_KIND}': current value is ${describe(value.kind)}`);
  }
  if (typeof value.apiVersion !== "string" || !ACCEPTED_API_VERSIONS.includes(value.apiVersion)) {
    fail(
      ["apiVersion"],
      `must be one of ${ACCEPTED_API_VERSIONS.map((v) => `'${v}'`).join(", ")}: current value is ${
        describe(value.apiVersion)
      }`,
    );
  }
  const metadata: Record<string, string> = {};
  if (value.metadata !== undefined && value.metadata !== null) {
    if (!isRecord(value.metadata)) fail(["metadata"], "must be a mapping of strings");
    for (const [key, v] of Object.entries(value.metadata as Record<string, unknown>)) {
      if (typeof v === "object" && v !== null) fail(["metadata", key], "must be a scalar");
      setOwn(metadata, key, v === null || v === undefined ? "" : String(v));
    }
  }
  metadata.timestamp ??= "";
  metadata.version ??= "";
  metadata["source-node"] ??= "";
  const rawMeasurements = value.measurements ?? [];
  if (!Array.isArray(rawMeasurements)) fail(["measurements"], "must be a list");
  const measurements = (rawMeasurements as unknown[]).map((m, i) =>
    validateMeasurement(m, ["measurements", i], fail)
  );
  return {
    kind: SNAPSHOT_KIND,
    apiVersion: value.apiVersion as string,
    metadata: metadata as SnapshotMetadata,
    measurements,
  };
}

function validateMeasurement(value: unknown, path: (string | number)[], fail: Fail): Measurement {
  if (!isRecord(value)) return fail(path, "must be a mapping with type and subtypes");
  if (!isMeasurementType(value.type)) {
    fail(
      [...path, "type"],
      `must be one of ${MEASUREMENT_TYPES.join(", ")}: current value is ${describe(value.type)}`,
    );
  }
  const raw = value.subtypes ?? [];
  if (!Array.isArray(raw)) fail([...path, "subtypes"], "must be a list");
  const subtypes = (raw as unknown[]).map((s, i) =>
    validateSubtype(s, [...path, "subtypes", i], fail)
  );
  return { type: value.type as Measurement["type"], subtypes };
}

function validateSubtype(value: unknown, path: (string | number)[], fail: Fail): Subtype {
  if (!isRecord(value)) return fail(path, "must be a mapping with subtype and data");
  const name = value.subtype ?? "";
  if (typeof name !== "string") fail([...path, "subtype"], "must be a string");
  const rawData = value.data ?? {};
  if (!isRecord(rawData)) fail([...path, "data"], "must be a mapping of scalar readings");
  const data: ReadingMap = {};
  const raw = rawData as Record<string, unknown>;
  for (const key of Object.keys(raw)) {
    const v = raw[key];
    // The common readings need no path (built only for the failure message).
    const plain = typeof v === "string" || typeof v === "boolean" ||
      typeof v === "number" || v === null;
    setOwn(data, key, plain ? v : toReading(v, [...path, "data", key], fail));
  }
  const out: Subtype = { subtype: name as string, data };
  if (value.context !== undefined && value.context !== null) {
    if (!isRecord(value.context)) fail([...path, "context"], "must be a mapping of strings");
    const context: Record<string, string> = {};
    for (const [key, v] of Object.entries(value.context as Record<string, unknown>)) {
      if (typeof v === "object" && v !== null) fail([...path, "context", key], "must be a scalar");
      setOwn(context, key, String(v));
    }
    if (Object.keys(context).length > 0) out.context = context;
  }
  return out;
}

function toReading(value: unknown, path: (string | number)[], fail: Fail): Reading {
  if (value === null || value === undefined) return null;
  if (typeof value === "bigint") return safeReading(value);
  if (typeof value === "string" || typeof value === "number" || typeof value === "boolean") {
    return value;
  }
  if (value instanceof Date) return value.toISOString();
  return fail(path, "must be a scalar reading (string, number, bool or null)");
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function describe(value: unknown): string {
  if (value === undefined) return "missing";
  if (typeof value === "string") return `'${value}'`;
  return typeof value === "object" ? JSON.stringify(value) : String(value);
}

function formatPath(path: (string | number)[]): string {
  if (path.length === 0) return "(document)";
  return path.map((p, i) => typeof p === "number" ? `[${p}]` : i === 0 ? p : `.${p}`).join("");
}

function lineOf(
  doc: Document,
  lineCounter: LineCounter,
  path: (string | number)[],
): number | undefined {
  // Walk as deep as the path exists; report the deepest node found.
  for (let n = path.length; n >= 0; n--) {
    const node = n === 0 ? doc.contents : doc.getIn(path.slice(0, n), true);
    if (node && (isMap(node) || isSeq(node) || isScalar(node)) && node.range) {
      return lineCounter.linePos(node.range[0]).line;
    }
  }
  return undefined;
}

/** One entry of a size report: a measurement or subtype and its encoded size. */
export interface SizeEntry {
  /** `Type` or `Type.subtype`. */
  path: string;
  /** Bytes of its YAML encoding. */
  bytes: number;
}

/**
 * Sizes each subtype of a snapshot, largest first.
 *
 * @param snapshot the snapshot
 * @returns entries sorted by size, descending
 */
function sizeReport(snapshot: Snapshot): SizeEntry[] {
  const encoder = new TextEncoder();
  const entries: SizeEntry[] = [];
  for (const m of snapshot.measurements) {
    for (const s of m.subtypes) {
      const bytes = encoder.encode(stringify(s.data, { lineWidth: 0 })).length;
      entries.push({ path: `${m.type}.${s.subtype}`, bytes });
    }
  }
  return entries.sort((a, b) => b.bytes - a.bytes);
}

/**
 * Checks that an encoded snapshot fits a ConfigMap.
 *
 * @param snapshot the snapshot (for the size report)
 * @param encoded its encoding
 * @param target where it was going, for the message
 * @throws {UsageError} naming the largest subtypes and the fix when it does not fit
 */
export function assertFitsConfigMap(snapshot: Snapshot, encoded: string, target: string): void {
  const bytes = new TextEncoder().encode(encoded).length;
  if (bytes <= CONFIGMAP_SNAPSHOT_BUDGET) return;
  const largest = sizeReport(snapshot).slice(0, 5).map((e) => `  - ${e.path}: ${e.bytes} bytes`);
  throw new UsageError(
    `Cannot write snapshot to '${target}': it is ${bytes} bytes and a ConfigMap holds at most ${CONFIGMAP_SNAPSHOT_BUDGET} bytes of snapshot`,
    {
      details: [
        "largest readings:",
        ...largest,
        (option) =>
          `write it to a file or stdout instead, or exclude readings (for example ${
            option("maxNodesPerEntry")
          } for NodeTopology)`,
      ],
    },
  );
}
