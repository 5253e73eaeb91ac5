/**
 * A fast YAML writer for the snapshot document's fixed shape, byte for byte what the `yaml`
 * library writes for it (`encodeSnapshot`'s options), without building a YAML node tree per
 * document. A scalar whose form is beyond doubt is written directly: a plain string the library
 * leaves plain (decided by the library's own YAML 1.1 tag tests), a printable ASCII string it
 * double-quotes (with tabs too), plain lines of printable ASCII (a literal block scalar), a finite
 * number, a bigint, a boolean, null. The library decides any other scalar (non-ASCII text, a very
 * long key: once, then cached, so a fleet whose snapshots share readings pays once), and writes
 * any other reading that takes several lines (a block scalar) together with its key, nested as
 * deep as it sits, so its indentation rules see the same context.
 *
 * Why: a fleet fetch writes every node's snapshot as YAML; through the library that costs
 * ~60 ms for a 270 KiB snapshot, a minute of CPU for 1,000 nodes; and the agent writes one
 * snapshot per run, where asking the library once per distinct scalar (a cold cache) cost more
 * than the library's whole document, and a real host's multi-line `kernel.core_modes` sent every
 * run back to the library.
 *
 * @module
 */
import { Document, Scalar, visit } from "yaml";
import type { Reading, Snapshot } from "./model.ts";

/** The library's `toString` options `encodeSnapshot` uses. */
export const YAML_WRITE_OPTIONS = {
  indent: 2,
  lineWidth: 0,
  minContentWidth: 0,
  indentSeq: true,
} as const;

/**
 * Builds the library's YAML document of a plain value the way `encodeSnapshot` does: YAML 1.1
 * quoting, strings with a tab double-quoted.
 *
 * @param value the plain value
 * @returns the document, ready for `toString(YAML_WRITE_OPTIONS)`
 */
export function snapshotYamlDocument(value: unknown): Document {
  // YAML 1.1 quoting keeps `"yes"`, `"on"` and timestamps strings for YAML 1.1 readers too.
  const doc = new Document(value, { version: "1.1" });
  // A tab inside a plain scalar is legal YAML 1.2 but PyYAML and ruamel.yaml (YAML 1.1)
  // refuse it (`/proc/sys/fs/dentry-state` holds tabs): such strings are double-quoted,
  // as upstream's encoder writes them.
  visit(doc, {
    Scalar(_key, node) {
      if (typeof node.value === "string" && node.value.includes("\t")) {
        node.type = Scalar.QUOTE_DOUBLE;
      }
    },
  });
  return doc;
}

/**
 * Distinct scalars and keys remembered; past this the caches start over. Only what the direct
 * path leaves to the library is cached (tabs, non-ASCII, `-0`, ...), so a fleet fits in far less;
 * a daemon caches its volatile tab-separated readings anew at each collection (`fs.dentry-state`,
 * `fs.file-nr`), and at 200,000 entries that grew for weeks to tens of MiB before a clear.
 */
const CACHE_LIMIT = 10_000;

/**
 * What one writer remembers from snapshot to snapshot: the library's text of each scalar and key
 * it was asked for (a fleet's snapshots, a daemon's collections, share most readings). The
 * writer of many snapshots owns one; a lone snapshot gets a fresh one.
 */
export class YamlWriteCaches {
  /** Strings by themselves (no derived key to build and hash per lookup). */
  readonly strings = new Map<string, string | null>();
  /** Other readings, by type and value. */
  readonly others = new Map<string, string | null>();
  /** Keys. */
  readonly keys = new Map<string, string | null>();
}

function remember(cache: Map<string, string | null>, id: string, text: string | null): void {
  if (cache.size >= CACHE_LIMIT) cache.clear();
  cache.set(id, text);
}

/** A plain scalar the library refuses to write plain (its own pattern, `stringifyString.js`). */
const NOT_PLAIN =
  /^[\n\t ,[\]{}#&*!|>'"%@`]|^[?-]$|^[?-][ \t]|[\n:][ \t]|[ \t]\n|[\n\t ]#|[\n\t :]$/;
/**
 * A path or name of letters, digits, `_`, `-`, `.` and `/`, starting with `/` or `_`: written plain
 * (nothing in it needs quotes, and every YAML 1.1 tag test needs another first character).
 */
const PLAIN_PATH = /^[/_][-\w./]*$/;
/** Printable ASCII without `"` and `\`: double-quoted as `"text"` with nothing escaped. */
const QUOTABLE = /^[ !#-[\]-~]*$/;
/** The library's longest implicit key is 1024 characters; far below that, no doubt. */
const MAX_DIRECT_KEY = 1000;

/**
 * Printable ASCII and tabs, with a tab: the library double-quotes such a value (see
 * `snapshotYamlDocument`), and its double-quoted form of it is JSON's (nothing but `"`, `\` and
 * the tab escaped; no line to fold at `lineWidth: 0`).
 */
const TABBED = /^[\t -~]*\t[\t -~]*$/;
/**
 * Two or more lines of printable ASCII, each starting and ending with a non-space: the library
 * writes such a value as a literal block scalar, stripped (`|-`), each line at the pair's indent
 * plus two.
 */
const PLAIN_LINES = /^[!-~](?:[ -~]*[!-~])?(?:\n[!-~](?:[ -~]*[!-~])?)+$/;

/**
 * The YAML 1.1 tags a plain string could be read as (null, bool, int, float, merge, sexagesimal,
 * timestamp): the `yaml` library's own tests of its YAML 1.1 schema (its default tags but `str`,
 * with their `test`), in one alternation; each is anchored at both ends, so the alternation matches
 * where any of them does. Written out so the writer never builds the library's schema (a test
 * checks it against the library's tests, as they are).
 */
export const YAML11_TAG_TEST =
  /(?:^(?:~|[Nn]ull|NULL)?$)|(?:^(?:Y|y|[Yy]es|YES|[Tt]rue|TRUE|[Oo]n|ON)$)|(?:^(?:N|n|[Nn]o|NO|[Ff]alse|FALSE|[Oo]ff|OFF)$)|(?:^[-+]?0b[0-1_]+$)|(?:^[-+]?0[0-7_]+$)|(?:^[-+]?[0-9][0-9_]*$)|(?:^[-+]?0x[0-9a-fA-F_]+$)|(?:^(?:[-+]?\.(?:inf|Inf|INF)|\.nan|\.NaN|\.NAN)$)|(?:^[-+]?(?:[0-9][0-9_]*)?(?:\.[0-9_]*)?[eE][-+]?[0-9]+$)|(?:^[-+]?(?:[0-9][0-9_]*)?\.[0-9_]*$)|(?:^<<$)|(?:^[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+$)|(?:^[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+\.[0-9_]*$)|(?:^([0-9]{4})-([0-9]{1,2})-([0-9]{1,2})(?:(?:t|T|[ \t]+)([0-9]{1,2}):([0-9]{1,2}):([0-9]{1,2}(\.[0-9]+)?)(?:[ \t]*(Z|[-+][012]?[0-9](?::[0-9]{2})?))?)?$)/;

/**
 * A string as the library writes it on one line, decided without it; undefined when in doubt.
 *
 * @param text the string
 * @param isKey whether it is the key of a nested map (never one of the top-level map)
 */
function directString(text: string, isKey: boolean): string | undefined {
  // Most keys: a path (`/proc/sys/...`) is plain, no other type starts with `/` or `_`.
  if (PLAIN_PATH.test(text) && text.length <= MAX_DIRECT_KEY) return text;
  if (!QUOTABLE.test(text)) return undefined;
  // `<<` is the YAML 1.1 merge key: the library has its own rules for it, as key and as value.
  if (text === "<<") return undefined;
  // An empty key is written explicit (`? ""`), a long one too.
  if (isKey && (text === "" || text.length > MAX_DIRECT_KEY)) return undefined;
  // Needing quotes and holding no `"`, it is double-quoted, with nothing to escape.
  if (NOT_PLAIN.test(text)) return `"${text}"`;
  if (YAML11_TAG_TEST.test(text)) return `"${text}"`;
  return text;
}

/** A reading as the library writes it, decided without it; undefined when in doubt. */
function directValue(value: Reading): string | undefined {
  switch (typeof value) {
    case "string":
      return directString(value, false) ??
        (TABBED.test(value) ? JSON.stringify(value) : undefined);
    case "number":
      return Number.isFinite(value) && !Object.is(value, -0) ? JSON.stringify(value) : undefined;
    case "bigint":
      return String(value);
    case "boolean":
      return value ? "true" : "false";
    default:
      return value === null ? "null" : undefined;
  }
}

/** How the library writes `value` as a map value on one line; null when it needs more. */
function valueText(caches: YamlWriteCaches, value: Reading): string | null {
  const direct = directValue(value);
  if (direct !== undefined) return direct;
  const cache = typeof value === "string" ? caches.strings : caches.others;
  const id = typeof value === "string"
    ? value
    : typeof value === "number" && Object.is(value, -0)
    ? "n-0"
    : (typeof value).charAt(0) + String(value);
  let text = cache.get(id);
  if (text === undefined) {
    const line = snapshotYamlDocument({ k: value }).toString(YAML_WRITE_OPTIONS);
    text = line.startsWith("k: ") && line.indexOf("\n") === line.length - 1
      ? line.slice(3, -1)
      : null;
    remember(cache, id, text);
  }
  return text;
}

/** How the library writes `key` as an implicit key of a nested map; null when it needs more. */
function keyText(caches: YamlWriteCaches, key: string): string | null {
  const direct = directString(key, true);
  if (direct !== undefined) return direct;
  let text = caches.keys.get(key);
  if (text === undefined) {
    // Nested, not at column 0: a document's top-level `---` key is quoted, a nested one not.
    const lines = snapshotYamlDocument({ k: { [key]: 0 } }).toString(YAML_WRITE_OPTIONS);
    const line = lines.startsWith("k:\n  ") ? lines.slice(5) : "";
    text = line.endsWith(": 0\n") && line.indexOf("\n") === line.length - 1 &&
        !line.startsWith("? ")
      ? line.slice(0, -4)
      : null;
    remember(caches.keys, key, text);
  }
  return text;
}

/**
 * Appends the library's rendering of one `key: value` pair whose key sits at `indent`: the pair
 * is written nested in as many one-key maps as make that indent, so the library sees the same
 * context (its block-scalar and document-marker rules depend on the depth), and the wrapper
 * lines are dropped. Keys inside a list item sit where they would in nested maps, at the same
 * depth for the library.
 */
function pairWithLibrary(out: string[], indent: string, key: string, value: Reading): void {
  let nested: Record<string, unknown> = {};
  Object.defineProperty(nested, key, { value, enumerable: true, writable: true });
  const depth = indent.length / 2;
  for (let i = 0; i < depth; i++) nested = { w: nested };
  const lines = snapshotYamlDocument(nested).toString(YAML_WRITE_OPTIONS).split("\n");
  out.push(lines.slice(depth).join("\n"));
}

function writeMap(
  caches: YamlWriteCaches,
  out: string[],
  indent: string,
  name: string,
  record: Readonly<Record<string, Reading>>,
): void {
  const entries = Object.keys(record);
  if (entries.length === 0) {
    out.push(`${name}: {}\n`);
    return;
  }
  out.push(`${name}:\n`);
  // Indexed: see `child()` in collectors/xml.ts (an agent writes one snapshot per process).
  for (let i = 0; i < entries.length; i++) {
    const key = entries[i] as string;
    const value = record[key] as Reading;
    const k = keyText(caches, key);
    if (k !== null && typeof value === "string" && PLAIN_LINES.test(value)) {
      const inner = `${indent}  `;
      out.push(`${indent}${k}: |-\n${inner}${value.replaceAll("\n", `\n${inner}`)}\n`);
      continue;
    }
    const v = valueText(caches, value);
    if (k === null || v === null) pairWithLibrary(out, indent, key, value);
    else out.push(`${indent}${k}: ${v}\n`);
  }
}

/**
 * Writes a normalised snapshot as YAML, as the library would with `encodeSnapshot`'s options.
 *
 * @param snapshot the snapshot, already normalised (sorted keys, canonical order)
 * @param caches what the writer remembers across snapshots @default fresh ones
 * @returns the text, or undefined when a kind, apiVersion, type or subtype needs the library
 */
export function writeSnapshotYaml(
  snapshot: Snapshot,
  caches: YamlWriteCaches = new YamlWriteCaches(),
): string | undefined {
  const out: string[] = [];
  for (const [name, value] of [["kind", snapshot.kind], ["apiVersion", snapshot.apiVersion]]) {
    const v = valueText(caches, value as string);
    if (v === null) return undefined;
    out.push(`${name}: ${v}\n`);
  }
  writeMap(caches, out, "  ", "metadata", snapshot.metadata as unknown as Record<string, Reading>);
  if (snapshot.measurements.length === 0) out.push("measurements: []\n");
  else out.push("measurements:\n");
  for (const m of snapshot.measurements) {
    const type = valueText(caches, m.type);
    if (type === null) return undefined;
    out.push(`  - type: ${type}\n`);
    if (m.subtypes.length === 0) continue;
    out.push("    subtypes:\n");
    for (const s of m.subtypes) {
      const subtype = valueText(caches, s.subtype);
      if (subtype === null) return undefined;
      out.push(`      - subtype: ${subtype}\n`);
      writeMap(caches, out, "          ", "        data", s.data);
      if (s.context) writeMap(caches, out, "          ", "        context", s.context);
    }
  }
  return out.join("");
}
