/**
 * A fast YAML writer for the snapshot document's fixed shape, byte for byte what the `yaml`
 * library writes for it (`encodeSnapshot`'s options), without building a YAML node tree per
 * document: the library decides how each distinct scalar and key is written (once, then
 * cached, so a fleet whose snapshots share most readings and every NodeTopology string pays
 * once), this writer only lays out the fixed structure. A scalar the library would write over
 * several lines (a block scalar) makes the caller fall back to the library for the document.
 *
 * Why: a fleet fetch writes every node's snapshot as YAML; through the library that costs
 * ~60 ms for a 270 KiB snapshot, a minute of CPU for 1,000 nodes.
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

/** Distinct scalars and keys remembered; past this the caches start over. */
const CACHE_LIMIT = 200_000;
// Strings by themselves (no derived key to build and hash per lookup), other readings apart.
const strings = new Map<string, string | null>();
const others = new Map<string, string | null>();
const keys = new Map<string, string | null>();

function remember(cache: Map<string, string | null>, id: string, text: string | null): void {
  if (cache.size >= CACHE_LIMIT) cache.clear();
  cache.set(id, text);
}

/** How the library writes `value` as a map value on one line; null when it needs more. */
function valueText(value: Reading): string | null {
  const cache = typeof value === "string" ? strings : others;
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
function keyText(key: string): string | null {
  let text = keys.get(key);
  if (text === undefined) {
    // Nested, not at column 0: a document's top-level `---` key is quoted, a nested one not.
    const lines = snapshotYamlDocument({ k: { [key]: 0 } }).toString(YAML_WRITE_OPTIONS);
    const line = lines.startsWith("k:\n  ") ? lines.slice(5) : "";
    text = line.endsWith(": 0\n") && line.indexOf("\n") === line.length - 1 &&
        !line.startsWith("? ")
      ? line.slice(0, -4)
      : null;
    remember(keys, key, text);
  }
  return text;
}

/** Thrown inside the writer when a scalar needs the library's layout. */
const NEEDS_LIBRARY = Symbol("needs the library");

function writeMap(
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
  for (const key of entries) {
    const k = keyText(key);
    const v = valueText(record[key] as Reading);
    if (k === null || v === null) throw NEEDS_LIBRARY;
    out.push(`${indent}${k}: ${v}\n`);
  }
}

/**
 * Writes a normalised snapshot as YAML, as the library would with `encodeSnapshot`'s options.
 *
 * @param snapshot the snapshot, already normalised (sorted keys, canonical order)
 * @returns the text, or undefined when some scalar needs the library (multi-line strings)
 */
export function writeSnapshotYaml(snapshot: Snapshot): string | undefined {
  const out: string[] = [];
  try {
    for (const [name, value] of [["kind", snapshot.kind], ["apiVersion", snapshot.apiVersion]]) {
      const v = valueText(value as string);
      if (v === null) return undefined;
      out.push(`${name}: ${v}\n`);
    }
    writeMap(out, "  ", "metadata", snapshot.metadata as unknown as Record<string, Reading>);
    if (snapshot.measurements.length === 0) out.push("measurements: []\n");
    else out.push("measurements:\n");
    for (const m of snapshot.measurements) {
      const type = valueText(m.type);
      if (type === null) return undefined;
      out.push(`  - type: ${type}\n`);
      if (m.subtypes.length === 0) continue;
      out.push("    subtypes:\n");
      for (const s of m.subtypes) {
        const subtype = valueText(s.subtype);
        if (subtype === null) return undefined;
        out.push(`      - subtype: ${subtype}\n`);
        writeMap(out, "          ", "        data", s.data);
        if (s.context) writeMap(out, "          ", "        context", s.context);
      }
    }
  } catch (error) {
    if (error === NEEDS_LIBRARY) return undefined;
    throw error;
  }
  return out.join("");
}
