/**
 * A fast YAML reader for the layout `encodeSnapshot` writes (what `aicr daemonset fetch -o dir/`
 * leaves on disk), the inverse of `yaml_writer.ts`: the fixed structure is read line by line;
 * plain strings, decimal numbers and simple double-quoted strings are decoded directly, and the
 * `yaml` library decodes every other scalar and key (in the same position, once, then cached).
 * The files of a fleet repeat each other line for line, so each map's lines are first compared
 * with the same map's in the previous file, many at a time, and only a line that differs is
 * looked up (its decoded entry cached per map). Anything else, a comment, a blank line, a
 * multi-line scalar, a flow collection, an alias, a repeated key, another key order, returns
 * `undefined` and the caller parses the document with the library (which also gives the located
 * errors). Accepted documents give exactly what the library's `toJS()` gives.
 *
 * Why: `aicr diff --fleet` over 1,000 fetched files spent ~100 ms per 270 KiB file in the
 * library's parser, and over 10,000 files of 45 KiB ~3 ms per file in this reader's first form.
 *
 * @module
 */
import { parseDocument } from "yaml";
import { setOwn } from "./model.ts";
import type { Reading } from "./model.ts";

/** Characters of scalar and key texts remembered; past this the caches start over. */
const CACHE_CHARS = 4 * 1024 * 1024;
const FAIL = Symbol("not a plain scalar");
/** One `key: value` line of a map, decoded. */
export interface YamlEntry {
  /** The whole line, indentation included (detached from its file's text). */
  readonly line: string;
  /** The key. */
  readonly key: string;
  /** The value as the library's `toJS()` gives it (integers as bigint). */
  readonly value: unknown;
  /** The value as a validated reading: a safe integer as a number. */
  readonly reading: Reading;
  /** What one consumer derived from this entry (the fleet builder: its path and value ids). */
  memo?: { owner: object; pid: number; vid: number };
}
/**
 * Characters the templates may hold (their copies, and the files their slices keep alive); past
 * this (a fleet whose subtypes are named differently on every node) they start over.
 */
const TEMPLATE_CHARS = 64 * 1024 * 1024;
/** Maps shorter than this are copied into their template; longer ones kept as slices. */
const COPIED_TEMPLATE_CHARS = 64 * 1024;

/** The last map read in one place of the document: its text, where it starts, its entries. */
interface Template {
  text: string;
  start: number;
  entries: readonly YamlEntry[];
  /** Characters it keeps alive. */
  held: number;
}
/**
 * What one reader remembers from document to document: the files of a fleet repeat each other,
 * so decoded scalars, keys and lines are kept, and per map the last one read (its template: the
 * lines are first compared with the same map's in the previous file, many lines at a time, and a
 * line is only looked up when it differs). A fleet builder or a stream owns one for its documents;
 * a lone document gets a fresh one. Bounded: past {@link CACHE_CHARS} characters of texts (or
 * {@link TEMPLATE_CHARS} of templates) it starts over.
 */
export class YamlReadCaches {
  /** Characters of scalar and key texts remembered. */
  cachedChars = 0;
  /** Decoded values by their text. */
  readonly values = new Map<string, unknown>();
  /** Decoded keys by their text. */
  readonly keys = new Map<string, string | typeof FAIL>();
  /** Per map (its measurement, subtype and field): its lines read so far, decoded. */
  readonly entries = new Map<string, Map<string, YamlEntry | typeof FAIL>>();
  /** Characters the templates hold. */
  templateChars = 0;
  /** Per map, the last one read. */
  readonly templates = new Map<string, Template>();
}

function remember<T>(
  caches: YamlReadCaches,
  cache: Map<string, T>,
  text: string,
  decoded: T,
): T {
  if (caches.cachedChars + text.length > CACHE_CHARS) {
    caches.values.clear();
    caches.keys.clear();
    caches.entries.clear();
    caches.templates.clear();
    caches.templateChars = 0;
    caches.cachedChars = 0;
  }
  caches.cachedChars += text.length;
  cache.set(text, decoded);
  return decoded;
}

/** The library's `toJS()` of a small document, or FAIL on any error or warning. */
function libraryValue(text: string): unknown {
  const doc = parseDocument(text, { intAsBigInt: true, uniqueKeys: false });
  if (doc.errors.length > 0 || doc.warnings.length > 0) return FAIL;
  try {
    return doc.toJS();
  } catch {
    // An alias without its anchor, and the like.
    return FAIL;
  }
}

function isScalar(value: unknown): boolean {
  return value === null || (typeof value !== "object" && value !== undefined);
}

/** Plain scalars read without the library: printable ASCII, no indicator first. */
const SIMPLE_PLAIN_REGEXP = /^(?:[0-9A-Za-z_./(]|[-+][0-9A-Za-z.])[ -~]*$/;
/** The YAML 1.2 core schema's decimal int and floats (the library's own tests). */
const INT_REGEXP = /^[-+]?[0-9]+$/;
const FLOAT_REGEXP = /^[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?$/;
/** Plain texts the core schema reads as null, a bool, an octal or hex int, inf or NaN. */
const OTHER_TAG_REGEXP =
  /^(?:~|[Nn]ull|NULL|[Tt]rue|TRUE|[Ff]alse|FALSE|0o[0-7]+|0x[0-9a-fA-F]+|[-+]?\.(?:inf|Inf|INF)|\.nan|\.NaN|\.NAN)$/;
/** Double-quoted printable ASCII whose only escapes are `\t`, `\n`, `\\` and `\"`. */
const SIMPLE_QUOTED_REGEXP = /^"(?:[ !#-[\]-~]|\\[tn\\"])*"$/;
const ESCAPE_REGEXP = /\\([tn\\"])/g;
const ESCAPES: Record<string, string> = { t: "\t", n: "\n", "\\": "\\", '"': '"' };

/**
 * A one-line plain scalar the library reads as a string or a decimal number, or a simple
 * double-quoted string, decoded without it (the library reads every other text); FAIL when in
 * doubt. Plain: no `: ` or ` #` inside, no `:` or space at the end.
 *
 * @param text the scalar as written
 * @param key whether it is a key (which stays the text: a key that reads as a number is left
 *   to the library, as `007: x` is `"7"`)
 */
function simpleScalar(text: string, key: boolean): unknown {
  if (text.charCodeAt(0) === 34) {
    if (!SIMPLE_QUOTED_REGEXP.test(text)) return FAIL;
    const inner = text.slice(1, -1);
    return inner.includes("\\")
      ? inner.replace(ESCAPE_REGEXP, (_, c) => ESCAPES[c] as string)
      : inner;
  }
  if (
    !SIMPLE_PLAIN_REGEXP.test(text) || text.includes(": ") || text.includes(" #") ||
    text.endsWith(":") || text.endsWith(" ") || OTHER_TAG_REGEXP.test(text)
  ) {
    return FAIL;
  }
  if (INT_REGEXP.test(text)) return key ? FAIL : BigInt(text);
  if (FLOAT_REGEXP.test(text)) return key ? FAIL : parseFloat(text);
  return text;
}

/**
 * A copy of a substring that does not keep the whole text alive: V8 makes a slice of 13 or more
 * characters share its parent's buffer, so a cached key or reading would hold its whole file.
 */
function detach(text: string): string {
  return (" " + text).slice(1);
}

/** The library's reading of `k: <text>`, when it is one scalar on that line. */
function decodeValue(caches: YamlReadCaches, text: string): unknown {
  const simple = simpleScalar(text, false);
  if (simple !== FAIL) return simple;
  const known = caches.values.get(text);
  if (known !== undefined || caches.values.has(text)) return known;
  const js = libraryValue(`k: ${text}`) as Record<string, unknown> | typeof FAIL | null;
  const decoded = js !== FAIL && js !== null && typeof js === "object" &&
      Object.keys(js).length === 1 && Object.hasOwn(js, "k") && isScalar(js.k)
    ? js.k
    : FAIL;
  return remember(caches, caches.values, text, decoded);
}

/** The library's reading of the key in `<text>: 0`, nested as the keys the reader sees. */
function decodeKey(caches: YamlReadCaches, text: string): string | typeof FAIL {
  const simple = simpleScalar(text, true);
  if (simple !== FAIL) return simple as string;
  const known = caches.keys.get(text);
  if (known !== undefined) return known;
  // Nested, not at the document's start (where a byte order mark would be dropped).
  const js = libraryValue(`k:\n  ${text}: 0`) as Record<string, unknown> | typeof FAIL | null;
  const inner = js !== FAIL && js !== null && typeof js === "object" ? js.k : undefined;
  const entries = inner !== null && typeof inner === "object" ? Object.entries(inner) : [];
  const decoded = entries.length === 1 && entries[0]?.[1] === 0n ? entries[0][0] : FAIL;
  return remember(caches, caches.keys, text, decoded);
}

/** Where a quoted key ends (the index after its closing quote), or -1. */
function quotedEnd(line: string, start: number): number {
  const quote = line[start];
  for (let i = start + 1; i < line.length; i++) {
    const c = line[i];
    if (quote === '"' && c === "\\") i++;
    else if (c === quote) {
      if (quote === "'" && line[i + 1] === "'") i++;
      else return i + 1;
    }
  }
  return -1;
}

/** Splits `<key>: <value>` at `indent`; undefined when the line is not one such entry. */
function entry(line: string, indent: number): [string, string] | undefined {
  const first = line[indent];
  if (first === undefined || first === " " || first === "\t") return undefined;
  let end: number;
  if (first === '"' || first === "'") {
    end = quotedEnd(line, indent);
    if (end < 0) return undefined;
  } else {
    // A plain key: up to the first ': ' (or a ':' ending the line); no comment, no indicator.
    // `-`, `?` and `:` start a plain key when a non-space follows (`---`, `:x`).
    const next = line[indent + 1];
    if (
      "-?:".includes(first) ? next === undefined || next === " " : ",[]{}#&*!|>%@`".includes(first)
    ) {
      return undefined;
    }
    end = line.indexOf(": ", indent);
    if (end < 0) end = line.endsWith(":") ? line.length - 1 : -1;
    if (end < 0) return undefined;
    const key = line.slice(indent, end);
    if (key.includes(" #") || key.includes("\t") || key.endsWith(" ")) return undefined;
  }
  if (line[end] !== ":" || (end + 1 < line.length && line[end + 1] !== " ")) return undefined;
  return [line.slice(indent, end), line.slice(end + 2)];
}

/** The end of the line starting at `pos`: its newline, or the end of the text. */
function lineEnd(text: string, pos: number): number {
  const end = text.indexOf("\n", pos);
  return end < 0 ? text.length : end;
}

/** Whether the line starting at `pos` is exactly `line`. */
function lineIs(text: string, pos: number, line: string): boolean {
  const end = pos + line.length;
  return text.startsWith(line, pos) && (end === text.length || text.charCodeAt(end) === 10);
}

/**
 * Where the template goes on after a line off it with this key: past the template's line of
 * that key when it is near (a changed value, or lines removed before it), else -1 (an added
 * line).
 */
function resync(template: readonly YamlEntry[] | undefined, at: number, key: string): number {
  if (template === undefined) return -1;
  for (let k = at; k < at + 4 && k < template.length; k++) {
    if ((template[k] as YamlEntry).key === key) return k + 1;
  }
  return -1;
}

/** The length of `count` template lines from `at`, with their newlines. */
function spanOf(entries: readonly YamlEntry[], at: number, count: number): number {
  let length = 0;
  for (let i = at; i < at + count; i++) length += (entries[i] as YamlEntry).line.length + 1;
  return length;
}

/**
 * How many lines of the text at `pos` are the template's from `at` (at `tpos` in its text),
 * compared in chunks that double while they match and halve when one does not: a map with a
 * few changed lines costs a few comparisons, not one per line.
 *
 * @returns the lines matched and their length, with their newlines
 */
function matchingLines(
  text: string,
  pos: number,
  template: Template,
  at: number,
  tpos: number,
): { lines: number; length: number } {
  const entries = template.entries;
  let matched = 0;
  let matchedLength = 0;
  let chunk = 8;
  while (chunk > 0 && at + matched < entries.length) {
    const count = Math.min(chunk, entries.length - at - matched);
    const length = spanOf(entries, at + matched, count);
    if (
      text.slice(pos, pos + length) === template.text.slice(tpos, tpos + length) &&
      pos + length <= text.length
    ) {
      matched += count;
      matchedLength += length;
      pos += length;
      tpos += length;
      chunk *= 2;
    } else chunk = count === 1 ? 0 : count >> 1;
  }
  return { lines: matched, length: matchedLength };
}

const MIN_SAFE = BigInt(Number.MIN_SAFE_INTEGER);
const MAX_SAFE = BigInt(Number.MAX_SAFE_INTEGER);

/**
 * A decoded scalar as a validated reading: an integer the library read as a bigint is a number
 * when it is safe (as `parseSnapshot` validates it), every other scalar as it is.
 *
 * @param value a scalar as the library's `toJS()` gives it
 * @returns the reading
 */
export function toReading(value: unknown): Reading {
  return typeof value === "bigint" && value >= MIN_SAFE && value <= MAX_SAFE
    ? Number(value)
    : value as Reading;
}

/**
 * Reads one map of scalars whose entries sit at `indent`, from `pos`; FAIL on doubt (a line that
 * is no such entry, a repeated key).
 *
 * @param context names the map among a document's maps, for its template and line cache
 */
function readMap(
  caches: YamlReadCaches,
  text: string,
  place: { pos: number; indent: number; context: string },
): { entries: YamlEntry[]; next: number } | typeof FAIL {
  const { indent, context } = place;
  let pos = place.pos;
  const template = caches.templates.get(context);
  let known = caches.entries.get(context);
  if (known === undefined) caches.entries.set(context, known = new Map());
  const start = pos;
  const read: YamlEntry[] = [];
  let at = 0;
  let tpos = template?.start ?? 0;
  // The template's keys are unique: while every line stands for one of its lines, in its order
  // (the same line, or the same key with another value), no key can repeat. Keys are collected,
  // to find a repeat, only from the first line that does not (an added one) on.
  let keys: Set<string> | undefined;
  while (pos < text.length) {
    if (template !== undefined && at < template.entries.length) {
      const { lines: same, length: matchedLength } = matchingLines(text, pos, template, at, tpos);
      if (same > 0) {
        const matched = template.entries;
        for (let i = at; i < at + same; i++) read.push(matched[i] as YamlEntry);
        if (keys !== undefined) {
          for (let i = at; i < at + same; i++) {
            const key = (matched[i] as YamlEntry).key;
            if (keys.has(key)) return FAIL;
            keys.add(key);
          }
        }
        pos += matchedLength;
        tpos += matchedLength;
        at += same;
        continue;
      }
    }
    let end = text.indexOf("\n", pos);
    if (end < 0) end = text.length;
    const line = text.slice(pos, end);
    let i = 0;
    while (i < indent && line.charCodeAt(i) === 32) i++;
    if (i < indent || line.charCodeAt(indent) === 32) break;
    const decoded = decodeLine(caches, known, line, indent);
    if (decoded === FAIL) return FAIL;
    const next = keys === undefined ? resync(template?.entries, at, decoded.key) : -1;
    if (next >= 0) {
      tpos += spanOf(template?.entries ?? [], at, next - at);
      at = next;
    } else if (keys === undefined) keys = new Set(read.map((e) => e.key));
    if (keys !== undefined) {
      if (keys.has(decoded.key)) return FAIL;
      keys.add(decoded.key);
    }
    read.push(decoded);
    pos = end + 1;
  }
  keepTemplate(caches, context, { text, start, end: pos, read });
  return { entries: read, next: pos };
}

/** A line of a map (cached per map), decoded; FAIL when it is no `key: scalar` line. */
function decodeLine(
  caches: YamlReadCaches,
  known: Map<string, YamlEntry | typeof FAIL>,
  line: string,
  indent: number,
): YamlEntry | typeof FAIL {
  const decoded = known.get(line);
  if (decoded !== undefined) return decoded;
  const detached = detach(line);
  const parts = entry(detached, indent);
  const key = parts ? decodeKey(caches, parts[0]) : FAIL;
  const value = parts ? decodeValue(caches, parts[1]) : FAIL;
  return remember(
    caches,
    known,
    detached,
    key === FAIL || value === FAIL
      ? FAIL
      : { line: detached, key, value, reading: toReading(value) },
  );
}

/** Keeps the map just read (`text` from `start` to `end`) as its place's template. */
function keepTemplate(
  caches: YamlReadCaches,
  context: string,
  map: { text: string; start: number; end: number; read: readonly YamlEntry[] },
): void {
  const { text, start, end, read } = map;
  // A slice keeps its whole file alive as long as the template: a small map is copied; a large
  // one (a cluster's label lists: each copy would be that much garbage) is kept as a slice, its
  // file counted against the budget.
  const mapText = text.slice(start, end);
  const copy = mapText.length < COPIED_TEMPLATE_CHARS;
  const held = copy ? mapText.length : text.length;
  caches.templateChars += held - (caches.templates.get(context)?.held ?? 0);
  if (caches.templateChars > TEMPLATE_CHARS) {
    caches.templates.clear();
    caches.templateChars = held;
  }
  caches.templates.set(context, {
    text: copy ? detach(mapText) : mapText,
    start: 0,
    entries: read,
    held,
  });
}

/** A structural line at `pos`: `<pad><name>:` opening a block, or `<pad><name>: {}` / `[]`. */
function opens(text: string, pos: number, block: string, empty: string) {
  if (lineIs(text, pos, block)) return "block";
  if (lineIs(text, pos, empty)) return "empty";
  return undefined;
}

/** A map of a document read by {@link walkSnapshotYaml}: its entries, keys unique. */
export type YamlMap = readonly YamlEntry[];

/** A subtype of a document read by {@link walkSnapshotYaml}. */
export interface YamlSubtype {
  /** The decoded `subtype` scalar (validation checks it is a string). */
  subtype: unknown;
  /** Its `data` entries. */
  data: YamlMap;
  /** Its `context` entries, when the document has the field (`{}`: none). */
  context?: YamlMap;
}

/** A snapshot document in `encodeSnapshot`'s layout, its maps as lists of decoded lines. */
export interface YamlSnapshot {
  /** The decoded `kind`. */
  kind: unknown;
  /** The decoded `apiVersion`. */
  apiVersion: unknown;
  /** The metadata's entries. */
  metadata: YamlMap;
  /** The measurements in document order. */
  measurements: { type: unknown; subtypes?: YamlSubtype[] }[];
}

/**
 * Reads a snapshot document written in `encodeSnapshot`'s layout into its decoded lines, without
 * building its maps (the fleet builder takes the lines as they are).
 *
 * @param text the document
 * @param caches what the reader remembers across documents @default fresh ones
 * @returns the document, or undefined when the text departs from the layout
 */
export function walkSnapshotYaml(
  text: string,
  caches: YamlReadCaches = new YamlReadCaches(),
): YamlSnapshot | undefined {
  if (text.includes("\r") || !text.startsWith("kind: ")) return undefined;
  const header: unknown[] = [];
  let pos = 0;
  for (const name of ["kind", "apiVersion"]) {
    const end = lineEnd(text, pos);
    const parts = entry(text.slice(pos, end), 0);
    if (!parts || parts[0] !== name) return undefined;
    const value = decodeValue(caches, parts[1]);
    if (value === FAIL) return undefined;
    header.push(value);
    pos = end + 1;
  }
  const doc: YamlSnapshot = {
    kind: header[0],
    apiVersion: header[1],
    metadata: [],
    measurements: [],
  };
  const metadata = opens(text, pos, "metadata:", "metadata: {}");
  if (!metadata) return undefined;
  pos = lineEnd(text, pos) + 1;
  if (metadata === "block") {
    const read = readMap(caches, text, { pos, indent: 2, context: "metadata" });
    if (read === FAIL || read.next === pos) return undefined;
    doc.metadata = read.entries;
    pos = read.next;
  }
  const list = opens(text, pos, "measurements:", "measurements: []");
  if (!list) return undefined;
  pos = lineEnd(text, pos) + 1;
  if (list === "empty") return pos >= text.length ? doc : undefined;
  while (pos < text.length) {
    if (!text.startsWith("  - type: ", pos)) return undefined;
    let end = lineEnd(text, pos);
    const typeText = text.slice(pos + 10, end);
    const type = decodeValue(caches, typeText);
    if (type === FAIL) return undefined;
    const measurement: YamlSnapshot["measurements"][number] = { type };
    doc.measurements.push(measurement);
    pos = end + 1;
    if (!lineIs(text, pos, "    subtypes:")) continue;
    pos += 14;
    const subtypes: YamlSubtype[] = [];
    measurement.subtypes = subtypes;
    while (pos < text.length && text.startsWith("      - subtype: ", pos)) {
      end = lineEnd(text, pos);
      const nameText = text.slice(pos + 17, end);
      const name = decodeValue(caches, nameText);
      if (name === FAIL) return undefined;
      pos = end + 1;
      const maps: YamlMap[] = [];
      for (const field of FIELDS) {
        const opened = opens(text, pos, field.block, field.empty);
        if (!opened) {
          if (field.name === "data") return undefined;
          break;
        }
        pos = lineEnd(text, pos) + 1;
        if (opened === "empty") maps.push([]);
        else {
          const context = `${typeText}\n${nameText}\n${field.name}`;
          const read = readMap(caches, text, { pos, indent: 10, context });
          if (read === FAIL || read.next === pos) return undefined;
          maps.push(read.entries);
          pos = read.next;
        }
      }
      const subtype: YamlSubtype = { subtype: name, data: maps[0] as YamlMap };
      if (maps[1] !== undefined) subtype.context = maps[1];
      subtypes.push(subtype);
    }
    if (subtypes.length === 0) return undefined;
  }
  return doc;
}

const FIELDS = ["data", "context"].map((name) => ({
  name,
  block: `        ${name}:`,
  empty: `        ${name}: {}`,
}));

/** A map's entries as the library's `toJS()` map (keys unique, in document order). */
function toMap(map: YamlMap): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const e of map) setOwn(out, e.key, e.value);
  return out;
}

/**
 * Reads a snapshot document written in `encodeSnapshot`'s layout.
 *
 * @param text the document
 * @param caches what the reader remembers across documents @default fresh ones
 * @returns what the library's `toJS()` gives, or undefined when the text departs from the layout
 */
export function readSnapshotYaml(text: string, caches?: YamlReadCaches): unknown {
  const doc = walkSnapshotYaml(text, caches);
  if (doc === undefined) return undefined;
  return {
    kind: doc.kind,
    apiVersion: doc.apiVersion,
    metadata: toMap(doc.metadata),
    measurements: doc.measurements.map((m) => {
      const out: Record<string, unknown> = { type: m.type };
      if (m.subtypes) {
        out.subtypes = m.subtypes.map((s) => {
          const subtype: Record<string, unknown> = { subtype: s.subtype, data: toMap(s.data) };
          if (s.context) subtype.context = toMap(s.context);
          return subtype;
        });
      }
      return out;
    }),
  };
}
