/**
 * A fast YAML reader for the layout `encodeSnapshot` writes (what `aicr daemonset fetch -o dir/`
 * leaves on disk), the inverse of `yaml_writer.ts`: the fixed structure is read line by line, and
 * the `yaml` library decodes each distinct scalar and key (in the same position, once, then
 * cached), so a fleet whose snapshots share most readings and every NodeTopology string pays
 * once. Anything else, a comment, a blank line, a multi-line scalar, a flow collection, an alias,
 * a repeated key, another key order, returns `undefined` and the caller parses the document with
 * the library (which also gives the located errors). Accepted documents give exactly what the
 * library's `toJS()` gives.
 *
 * Why: `aicr diff --fleet` over 1,000 fetched files spent ~100 ms per 270 KiB file in the
 * library's parser.
 *
 * @module
 */
import { parseDocument } from "yaml";
import { setOwn } from "./model.ts";

/** Characters of scalar and key texts remembered; past this the caches start over. */
const CACHE_CHARS = 32 * 1024 * 1024;
let cachedChars = 0;
const FAIL = Symbol("not a plain scalar");
const values = new Map<string, unknown>();
const keys = new Map<string, string | typeof FAIL>();
const entries = new Map<string, [string, unknown] | typeof FAIL>();

function remember<T>(cache: Map<string, T>, text: string, decoded: T): T {
  if (cachedChars + text.length > CACHE_CHARS) {
    values.clear();
    keys.clear();
    entries.clear();
    cachedChars = 0;
  }
  cachedChars += text.length;
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
function decodeValue(text: string): unknown {
  const simple = simpleScalar(text, false);
  if (simple !== FAIL) return simple;
  const known = values.get(text);
  if (known !== undefined || values.has(text)) return known;
  const js = libraryValue(`k: ${text}`) as Record<string, unknown> | typeof FAIL | null;
  const decoded = js !== FAIL && js !== null && typeof js === "object" &&
      Object.keys(js).length === 1 && Object.hasOwn(js, "k") && isScalar(js.k)
    ? js.k
    : FAIL;
  return remember(values, text, decoded);
}

/** The library's reading of the key in `<text>: 0`, nested as the keys the reader sees. */
function decodeKey(text: string): string | typeof FAIL {
  const simple = simpleScalar(text, true);
  if (simple !== FAIL) return simple as string;
  const known = keys.get(text);
  if (known !== undefined) return known;
  // Nested, not at the document's start (where a byte order mark would be dropped).
  const js = libraryValue(`k:\n  ${text}: 0`) as Record<string, unknown> | typeof FAIL | null;
  const inner = js !== FAIL && js !== null && typeof js === "object" ? js.k : undefined;
  const entries = inner !== null && typeof inner === "object" ? Object.entries(inner) : [];
  const decoded = entries.length === 1 && entries[0]?.[1] === 0n ? entries[0][0] : FAIL;
  return remember(keys, text, decoded);
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

/** Reads one map of scalars whose entries sit at `indent`, from `lines[at]`; FAIL on doubt. */
function readMap(
  lines: readonly string[],
  at: number,
  indent: number,
): { map: Record<string, unknown>; next: number } | typeof FAIL {
  const map: Record<string, unknown> = {};
  const pad = " ".repeat(indent);
  let i = at;
  for (; i < lines.length; i++) {
    let line = lines[i] as string;
    if (!line.startsWith(pad) || line[indent] === " ") break;
    // Whole lines repeat across a fleet's files: one lookup per line, no slicing.
    let decoded = entries.get(line);
    if (decoded === undefined) {
      line = detach(line);
      const parts = entry(line, indent);
      const key = parts ? decodeKey(parts[0]) : FAIL;
      const value = parts ? decodeValue(parts[1]) : FAIL;
      decoded = remember(entries, line, key === FAIL || value === FAIL ? FAIL : [key, value]);
    }
    if (decoded === FAIL || Object.hasOwn(map, decoded[0])) return FAIL;
    setOwn(map, decoded[0], decoded[1]);
  }
  return { map, next: i };
}

/** A structural line: `<pad><name>:` opening a block, or `<pad><name>: {}` / `[]` empty. */
function opens(line: string | undefined, pad: string, name: string, empty: string) {
  if (line === `${pad}${name}:`) return "block";
  if (line === `${pad}${name}: ${empty}`) return "empty";
  return undefined;
}

/**
 * Reads a snapshot document written in `encodeSnapshot`'s layout.
 *
 * @param text the document
 * @returns what the library's `toJS()` gives, or undefined when the text departs from the layout
 */
export function readSnapshotYaml(text: string): unknown {
  if (text.includes("\r") || !text.startsWith("kind: ")) return undefined;
  const lines = text.split("\n");
  if (lines[lines.length - 1] === "") lines.pop();
  const doc: Record<string, unknown> = {};
  let i = 0;
  for (const name of ["kind", "apiVersion"]) {
    const parts = entry(lines[i] ?? "", 0);
    if (!parts || parts[0] !== name) return undefined;
    const value = decodeValue(parts[1]);
    if (value === FAIL) return undefined;
    doc[name] = value;
    i++;
  }
  const metadata = opens(lines[i], "", "metadata", "{}");
  if (!metadata) return undefined;
  i++;
  if (metadata === "block") {
    const read = readMap(lines, i, 2);
    if (read === FAIL || read.next === i) return undefined;
    doc.metadata = read.map;
    i = read.next;
  } else doc.metadata = {};
  const list = opens(lines[i], "", "measurements", "[]");
  if (!list) return undefined;
  i++;
  const measurements: Record<string, unknown>[] = [];
  doc.measurements = measurements;
  if (list === "empty") return i === lines.length ? doc : undefined;
  while (i < lines.length) {
    const head = lines[i] as string;
    if (!head.startsWith("  - type: ")) return undefined;
    const type = decodeValue(head.slice(10));
    if (type === FAIL) return undefined;
    const measurement: Record<string, unknown> = { type };
    measurements.push(measurement);
    i++;
    if (lines[i] !== "    subtypes:") continue;
    i++;
    const subtypes: Record<string, unknown>[] = [];
    measurement.subtypes = subtypes;
    while (i < lines.length && (lines[i] as string).startsWith("      - subtype: ")) {
      const name = decodeValue((lines[i] as string).slice(17));
      if (name === FAIL) return undefined;
      const subtype: Record<string, unknown> = { subtype: name };
      subtypes.push(subtype);
      i++;
      for (const field of ["data", "context"]) {
        const opened = opens(lines[i], "        ", field, "{}");
        if (!opened) {
          if (field === "data") return undefined;
          break;
        }
        i++;
        if (opened === "empty") subtype[field] = {};
        else {
          const read = readMap(lines, i, 10);
          if (read === FAIL || read.next === i) return undefined;
          subtype[field] = read.map;
          i = read.next;
        }
      }
    }
    if (subtypes.length === 0) return undefined;
  }
  return doc;
}
