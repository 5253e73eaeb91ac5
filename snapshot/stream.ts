/**
 * Fleet streams: many snapshots in one text (YAML documents, a JSON array, or JSON lines),
 * parsed one document at a time. Pure: the callers read the text.
 *
 * @module
 */
import { parseDocument } from "yaml";
import { UsageError } from "../errors.ts";
import { guardNesting, parseSnapshot, parseSnapshotStream } from "./codec.ts";
import { YamlReadCaches } from "./yaml_reader.ts";
import type { Snapshot } from "./model.ts";

/**
 * Parses the text of a fleet stream: YAML documents, a JSON array, or JSON lines.
 *
 * @param text the stream
 * @param source its name for errors
 * @returns the snapshots in order
 * @throws {UsageError} on the first invalid document, naming the source
 */
export function parseFleetText(text: string, source: string): Snapshot[] {
  return [...fleetDocuments(text, source)];
}

/** Takes a document of a stream that could not be read, and where it is. */
export type FleetDocumentError = (error: unknown, where: { index: number; source: string }) => void;

/**
 * {@link parseFleetText} one snapshot at a time: each document is parsed when it is asked for,
 * so a caller that keeps a digest of each holds one parsed snapshot at a time.
 *
 * @param text the stream
 * @param source its name for errors
 * @param onError takes each document that is invalid, and the stream goes on with the next;
 *   without it the first invalid document ends the stream with its error. A stream that cannot
 *   be split into documents fails whole either way.
 * @returns the snapshots in order
 * @throws {UsageError} on the first invalid document, naming the source
 */
export function* fleetDocuments(
  text: string,
  source: string,
  onError?: FleetDocumentError,
): Generator<Snapshot> {
  // The documents of one stream repeat each other: one reader's caches serve them all.
  const yamlCaches = new YamlReadCaches();
  const each = function* (items: Iterable<[number, string, string]>): Generator<Snapshot> {
    for (const [index, item, where] of items) {
      if (!onError) {
        yield parseSnapshot(item, { source: where, yamlCaches });
        continue;
      }
      let snapshot: Snapshot;
      try {
        snapshot = parseSnapshot(item, { source: where, yamlCaches });
      } catch (error) {
        onError(error, { index, source: where });
        continue;
      }
      yield snapshot;
    }
  };
  const start = text.trimStart();
  if (start.startsWith("[")) {
    // A JSON array: split it with the YAML parser (bigints stay exact), then validate each.
    const doc = guardNesting(source, () => parseDocument(text, { intAsBigInt: true }));
    const first = doc.errors[0];
    if (first) throw new UsageError(`Cannot parse fleet '${source}': ${first.message}`);
    const items = (doc.contents as { items?: unknown[] } | null)?.items ?? [];
    yield* each(items.map((item, i) => [i, String(item), `${source}[${i}]`]));
    return;
  }
  if (start.startsWith("{")) {
    const lines = text.split("\n").filter((l) => l.trim() !== "");
    if (lines.length > 1 && lines.every((l) => l.trimStart().startsWith("{"))) {
      yield* each(lines.map((line, i) => [i, line, `${source} line ${i + 1}`]));
      return;
    }
  }
  const documents = splitYamlStream(text);
  if (documents.length <= 1) {
    yield* parseSnapshotStream(text, { source });
    return;
  }
  // One document at a time keeps one syntax tree in memory, not the whole fleet's.
  yield* each(documents.map((doc, i) => [i, doc, `${source} (document ${i + 1})`]));
}

/**
 * Splits a YAML stream at its `---` document markers (at column 0; content after the
 * marker on the same line stays with its document), dropping empty documents. A stream
 * with directives (`%YAML`) or `...` end markers is returned whole.
 *
 * @param text the stream
 * @returns the documents' texts
 */
export function splitYamlStream(text: string): string[] {
  if (/^(%|\.\.\.(\s|$))/m.test(text)) return [text];
  // Scan for marker lines instead of splitting into lines: a fleet stream can be 100 MiB.
  const docs: string[] = [];
  let start = 0;
  // Content after a marker on its own line belongs to the document the marker starts.
  let carried = "";
  const push = (end: number) => {
    const doc = carried + text.slice(start, end);
    if (doc.replace(/#.*$/gm, "").trim() !== "") docs.push(doc.endsWith("\n") ? doc : doc + "\n");
  };
  for (const marker of text.matchAll(/^---(?=[ \t\r]|$)([^\n]*)(?:\n|$)/gm)) {
    push(marker.index);
    const rest = (marker[1] ?? "").trim();
    carried = rest === "" ? "" : rest + "\n";
    start = marker.index + marker[0].length;
  }
  push(text.length);
  return docs;
}
