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
/** One `key: value` line of a map, decoded. */
interface Entry {
  /** The whole line, indentation included (detached from its file's text). */
  line: string;
  key: string;
  value: unknown;
}
const entries = new Map<string, Entry | typeof FAIL>();
/**
 * Per map (its measurement, subtype and field), the entries of the last one read: the files of
 * a fleet repeat each other line for line, so a line is first compared with the one at the same
 * place in the previous file (no slice, no hash), and only looked up when it differs.
 */
const templates = new Map<string, readonly Entry[]>();

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

/** Where the template goes on after a line off it with this key (a changed, added or removed line). */
function resync(template: readonly Entry[] | undefined, at: number, key: string): number {
  if (template === undefined) return at;
  for (let k = at; k < at + 4 && k < template.length; k++) {
    if ((template[k] as Entry).key === key) return k + 1;
  }
  return at;
}

/**
 * Reads one map of scalars whose entries sit at `indent`, from `pos`; FAIL on doubt.
 *
 * @param context names the map among a document's maps, for its template
 */
function readMap(
  text: string,
  pos: number,
  indent: number,
  context: string,
): { map: Record<string, unknown>; next: number } | typeof FAIL {
  const map: Record<string, unknown> = {};
  const template = templates.get(context);
  const read: Entry[] = [];
  let at = 0;
  // The template's keys are unique, and lines on it come in its order: keys need checking for a
  // repeat only once a line off the template was read.
  let checkKeys = false;
  while (pos < text.length) {
    let decoded = template?.[at];
    if (decoded !== undefined && lineIs(text, pos, decoded.line)) at++;
    else {
      const end = lineEnd(text, pos);
      let i = 0;
      while (i < indent && text.charCodeAt(pos + i) === 32) i++;
      if (i < indent || text.charCodeAt(pos + indent) === 32) break;
      let line = text.slice(pos, end);
      let known = entries.get(line);
      if (known === undefined) {
        line = detach(line);
        const parts = entry(line, indent);
        const key = parts ? decodeKey(parts[0]) : FAIL;
        const value = parts ? decodeValue(parts[1]) : FAIL;
        known = remember(
          entries,
          line,
          key === FAIL || value === FAIL ? FAIL : { line, key, value },
        );
      }
      if (known === FAIL) return FAIL;
      decoded = known;
      checkKeys = true;
      at = resync(template, at, decoded.key);
    }
    if (checkKeys && Object.hasOwn(map, decoded.key)) return FAIL;
    setOwn(map, decoded.key, decoded.value);
    read.push(decoded);
    pos += decoded.line.length + 1;
  }
  templates.set(context, read);
  return { map, next: pos };
}

/** A structural line at `pos`: `<pad><name>:` opening a block, or `<pad><name>: {}` / `[]`. */
function opens(text: string, pos: number, block: string, empty: string) {
  if (lineIs(text, pos, block)) return "block";
  if (lineIs(text, pos, empty)) return "empty";
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
  const doc: Record<string, unknown> = {};
  let pos = 0;
  for (const name of ["kind", "apiVersion"]) {
    const end = lineEnd(text, pos);
    const parts = entry(text.slice(pos, end), 0);
    if (!parts || parts[0] !== name) return undefined;
    const value = decodeValue(parts[1]);
    if (value === FAIL) return undefined;
    doc[name] = value;
    pos = end + 1;
  }
  const metadata = opens(text, pos, "metadata:", "metadata: {}");
  if (!metadata) return undefined;
  pos = lineEnd(text, pos) + 1;
  if (metadata === "block") {
    const read = readMap(text, pos, 2, "metadata");
    if (read === FAIL || read.next === pos) return undefined;
    doc.metadata = read.map;
    pos = read.next;
  } else doc.metadata = {};
  const list = opens(text, pos, "measurements:", "measurements: []");
  if (!list) return undefined;
  pos = lineEnd(text, pos) + 1;
  const measurements: Record<string, unknown>[] = [];
  doc.measurements = measurements;
  if (list === "empty") return pos >= text.length ? doc : undefined;
  while (pos < text.length) {
    if (!text.startsWith("  - type: ", pos)) return undefined;
    let end = lineEnd(text, pos);
    const typeText = text.slice(pos + 10, end);
    const type = decodeValue(typeText);
    if (type === FAIL) return undefined;
    const measurement: Record<string, unknown> = { type };
    measurements.push(measurement);
    pos = end + 1;
    if (!lineIs(text, pos, "    subtypes:")) continue;
    pos += 14;
    const subtypes: Record<string, unknown>[] = [];
    measurement.subtypes = subtypes;
    while (pos < text.length && text.startsWith("      - subtype: ", pos)) {
      end = lineEnd(text, pos);
      const nameText = text.slice(pos + 17, end);
      const name = decodeValue(nameText);
      if (name === FAIL) return undefined;
      const subtype: Record<string, unknown> = { subtype: name };
      subtypes.push(subtype);
      pos = end + 1;
      for (const field of FIELDS) {
        const opened = opens(text, pos, field.block, field.empty);
        if (!opened) {
          if (field.name === "data") return undefined;
          break;
        }
        pos = lineEnd(text, pos) + 1;
        if (opened === "empty") subtype[field.name] = {};
        else {
          const read = readMap(text, pos, 10, `${typeText}\n${nameText}\n${field.name}`);
          if (read === FAIL || read.next === pos) return undefined;
          subtype[field.name] = read.map;
          pos = read.next;
        }
      }
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
