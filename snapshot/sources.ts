/**
 * Where snapshots are read from: a file, a directory (fleet), `-` (stdin), `cm://namespace/name`
 * or an `http(s)://` URL. The reading itself is injected ({@link SnapshotSourceLoader}; the real
 * one is `controller/sources.ts`); this module resolves names, enforces the size caps and turns
 * what it read into snapshots, or a fleet one member at a time, with errors that name the input.
 *
 * @module
 */
import { basename, extname, resolve } from "node:path";
import {
  InterruptedError,
  NotFoundError,
  ToolError,
  UnavailableError,
  UsageError,
} from "../errors.ts";
import { redactUrl } from "../redact.ts";
import { MAX_DOCUMENT_BYTES, parseSnapshot } from "./codec.ts";
import { FLEET_TOPOLOGY_FILE, isClusterTopologyDocument } from "./model.ts";
import type { Snapshot } from "./model.ts";
import type { FleetMember, FleetUnreadable } from "./fleet.ts";
import { fleetDocuments } from "./stream.ts";
import { parseConfigMapUri } from "./target.ts";

/** The largest fleet stream (one file, stdin or ConfigMap holding many snapshots). */
export const MAX_FLEET_STREAM_BYTES = 256 * 1024 * 1024;

/** What a path is, if it exists. */
export interface PathInfo {
  /** Whether it is a directory. */
  isDirectory: boolean;
  /** Size in bytes. */
  size: number;
}

/** The I/O `aicr diff` needs, injected so tests and the composition root choose it. */
export interface SnapshotSourceLoader {
  /** Reads a whole file as UTF-8, failing once it exceeds `maxBytes` (a device never ends). */
  readFile(path: string, maxBytes: number): Promise<string>;
  /** Describes a path; `undefined` when it does not exist. */
  stat(path: string): Promise<PathInfo | undefined>;
  /** Names of the entries of a directory. */
  readDirectory(path: string): Promise<string[]>;
  /** Reads stdin to its end, failing once it exceeds `maxBytes`. */
  readStdin(maxBytes: number): Promise<string>;
  /**
   * Reads a ConfigMap's `data`; `undefined` (or a thrown {@link NotFoundError}) when it
   * does not exist.
   */
  readConfigMap(namespace: string, name: string): Promise<Record<string, string> | undefined>;
  /** Writes a whole file (for `--output`). */
  writeFile(path: string, text: string): Promise<void>;
  /**
   * GETs an `http(s)://` URL, failing once the body exceeds `maxBytes`, the deadline passes or
   * (https) the server's certificate does not verify.
   */
  readUrl?(url: string, maxBytes: number): Promise<string>;
}

/** Options for reading sources. */
export interface SourceOptions {
  /** Working directory for relative paths. */
  cwd: string;
  /** The option the source came from, for messages (the CLI names its flag). @default "baseline" */
  option?: string;
  /**
   * SIGINT/SIGTERM: a fleet directory's read stops between two files (the read gives the event
   * loop a turn at least every {@link YIELD_EVERY_MS}, so the signal is seen at all).
   */
  signal?: AbortSignal;
}

/** The longest a fleet read runs before the event loop gets a turn (signals, timers). */
const YIELD_EVERY_MS = 50;

/**
 * A turn of the event loop every {@link YIELD_EVERY_MS} of reading (files are read synchronously
 * one after the other: without it a signal's handler would wait for the whole fleet), then
 * the interrupt, when the signal came.
 */
function createReadTurns(signal: AbortSignal | undefined): () => Promise<void> {
  let last = Date.now();
  return async () => {
    if (Date.now() - last >= YIELD_EVERY_MS) {
      await new Promise((resolve) => setTimeout(resolve, 0));
      last = Date.now();
    }
    if (signal?.aborted) {
      throw new InterruptedError(
        `Cannot read the fleet: interrupted (${String(signal.reason)})`,
      );
    }
  };
}

/** Text read from one source, with the name errors use. */
interface SourceText {
  source: string;
  text: string;
}

async function readSource(
  source: string,
  loader: SnapshotSourceLoader,
  maxBytes: number,
  options: SourceOptions,
): Promise<SourceText> {
  if (source === "-") return { source, text: await loader.readStdin(maxBytes) };
  if (source.startsWith("cm://")) {
    return { source, text: await readConfigMapSnapshot(source, loader, options.option) };
  }
  if (/^https?:\/\//i.test(source)) {
    if (!loader.readUrl) {
      throw new UsageError(
        `Cannot read snapshot '${redactUrl(source)}': URL sources are not wired in`,
      );
    }
    return { source, text: await loader.readUrl(source, maxBytes) };
  }
  const path = resolve(options.cwd, source);
  const info = await loader.stat(path);
  if (!info) throw new NotFoundError(`Cannot read snapshot '${redactUrl(source)}': no such file`);
  if (info.isDirectory) {
    throw new UsageError((option) =>
      `Cannot read snapshot '${redactUrl(source)}': it is a directory (use ${option("fleet")})`
    );
  }
  if (info.size > maxBytes) {
    throw new UsageError(
      `Cannot read snapshot '${
        redactUrl(source)
      }': file is ${info.size} bytes, over the ${maxBytes}-byte cap`,
    );
  }
  return { source, text: await readKnownFile(source, loader, options, maxBytes) };
}

/** Reads a file already described (it exists, is no directory, fits the cap). */
async function readKnownFile(
  source: string,
  loader: SnapshotSourceLoader,
  options: SourceOptions,
  maxBytes = MAX_DOCUMENT_BYTES,
): Promise<string> {
  try {
    return await loader.readFile(resolve(options.cwd, source), maxBytes);
  } catch (error) {
    throw new UsageError(
      `Cannot read snapshot '${redactUrl(source)}': ${
        error instanceof Error ? error.message : error
      }`,
      { cause: error },
    );
  }
}

async function readConfigMapSnapshot(
  uri: string,
  loader: SnapshotSourceLoader,
  option = "baseline",
): Promise<string> {
  const { namespace, name } = parseConfigMapUri(uri, option);
  let data: Record<string, string> | undefined;
  try {
    data = await loader.readConfigMap(namespace, name);
  } catch (error) {
    // Keep the error's class of failure (exit code), and name the input.
    if (error instanceof ToolError) {
      throw new ToolError(`Cannot read snapshot '${uri}'`, error.code, error.httpStatus, {
        cause: error,
      });
    }
    throw new UnavailableError(
      `Cannot read snapshot '${uri}': ${error instanceof Error ? error.message : error}`,
      { cause: error },
    );
  }
  if (!data) throw new NotFoundError(`Cannot read snapshot '${uri}': ConfigMap not found`);
  const format = (data.format ?? "yaml").trim() || "yaml";
  const keys = [
    ...new Set([`snapshot.${format}`, "snapshot.yaml", "snapshot.json", "snapshot.txt"]),
  ];
  for (const key of keys) {
    const text = data[key];
    if (text !== undefined) return text;
  }
  throw new NotFoundError(
    `Cannot read snapshot '${uri}': ConfigMap has no snapshot data (none of the keys ${
      keys.map((k) => `'${k}'`).join(", ")
    })`,
  );
}

/**
 * Loads one snapshot from a file, `-` or `cm://ns/name`.
 *
 * @param source the source as given on the command line
 * @param loader the I/O
 * @param options working directory
 * @returns the validated snapshot
 * @throws {UsageError} for unreadable, oversized or invalid documents (naming the source)
 * @throws {NotFoundError} for a missing file or ConfigMap
 */
export async function loadSnapshot(
  source: string,
  loader: SnapshotSourceLoader,
  options: SourceOptions,
): Promise<Snapshot> {
  const { text } = await readSource(source, loader, MAX_DOCUMENT_BYTES, options);
  return parseSnapshot(text, { source: redactUrl(source) });
}

const FLEET_EXTENSIONS: ReadonlySet<string> = new Set([".yaml", ".yml", ".json"]);

/**
 * Loads a fleet: every source is a directory (its `*.yaml`, `*.yml` and `*.json` files,
 * not recursive, in name order) or a stream (a file, `-` or `cm://`) of `---`-separated
 * YAML documents, a JSON array of snapshots, or JSON lines. Node names come from
 * `metadata.source-node`, else from the file name (or the source and index).
 *
 * @param sources the sources as given on the command line
 * @param loader the I/O
 * @param options working directory
 * @returns the fleet members in input order
 * @throws {UsageError} for invalid inputs, or when no snapshot is found
 * @throws {NotFoundError} for a missing path or ConfigMap
 */
export async function loadFleet(
  sources: readonly string[],
  loader: SnapshotSourceLoader,
  options: SourceOptions,
): Promise<FleetMember[]> {
  const members: FleetMember[] = [];
  await readFleet(sources, loader, options, { add: (member) => void members.push(member) });
  return members;
}

/**
 * Where {@link readFleet} hands what it reads: each member, or (with `unreadable`) each file or
 * document that could not be read. A `FleetBuilder` is one.
 */
export interface FleetSink {
  /** Takes each member, in input order. */
  add(member: FleetMember): void;
  /**
   * Takes a directory's file straight from its text, instead of `add` with the parsed snapshot,
   * when it can (`FleetBuilder.addYaml`); false to have it parsed and given to `add`.
   */
  addYaml?: FleetYamlReader;
  /**
   * Takes a member that could not be read (a file or document that is corrupt, invalid, too
   * large or unreadable) and the read goes on; without it the first such member is an error.
   */
  unreadable?(entry: FleetUnreadable): void;
}

/**
 * {@link loadFleet} one snapshot at a time: each member is handed to `sink.add` as soon as it is
 * parsed, and the next file is read only after, so memory holds one file (at most
 * {@link MAX_DOCUMENT_BYTES}) or one stream (at most {@link MAX_FLEET_STREAM_BYTES}) plus what
 * the sink keeps. There is no cap on the fleet as a whole: a directory's files are checked
 * against the per-file cap before any is read.
 *
 * With `sink.unreadable`, one bad file or document (corrupt, invalid, over the per-file cap,
 * unreadable) is handed there and the others are read; a source that cannot be read at all (a
 * missing path, an empty directory, a stream that cannot be split), or a fleet with no readable
 * member, is still an error.
 *
 * @param sources the sources as given on the command line
 * @param loader the I/O
 * @param options working directory
 * @param sink takes the members, and the unreadable ones
 * @returns the number of members read (readable or not)
 * @throws {UsageError} for invalid inputs, or when no snapshot is found
 * @throws {NotFoundError} for a missing path or ConfigMap
 */
export async function readFleet(
  sources: readonly string[],
  loader: SnapshotSourceLoader,
  options: SourceOptions,
  sink: FleetSink,
): Promise<number> {
  let count = 0;
  let readable = 0;
  let firstFailure: unknown;
  const guarded: FleetSink = {
    add(member) {
      readable++;
      sink.add(member);
    },
    ...(sink.addYaml
      ? {
        addYaml: (text, nodeName) => {
          const taken = (sink.addYaml as FleetYamlReader)(text, nodeName);
          if (taken) readable++;
          return taken;
        },
      }
      : {}),
    ...(sink.unreadable
      ? {
        unreadable(entry) {
          firstFailure ??= new UsageError(
            `Cannot read snapshot '${entry.source}': ${entry.reason}`,
          );
          (sink.unreadable as NonNullable<FleetSink["unreadable"]>)(entry);
        },
      }
      : {}),
  };
  for (const source of sources) {
    if (source !== "-" && !source.startsWith("cm://")) {
      const info = await loader.stat(resolve(options.cwd, source));
      if (info?.isDirectory) {
        count += await readFleetDirectory(source, loader, options, guarded);
        continue;
      }
    }
    count += await readFleetStream(source, loader, options, guarded);
  }
  // Nothing to compare the unreadable ones with: the first one's error is the answer.
  if (readable === 0 && firstFailure !== undefined) throw firstFailure;
  return count;
}

/** One stream source (a file, `-` or `cm://`): its documents in order. */
async function readFleetStream(
  source: string,
  loader: SnapshotSourceLoader,
  options: SourceOptions,
  sink: FleetSink,
): Promise<number> {
  const { text } = await readSource(source, loader, MAX_FLEET_STREAM_BYTES, options);
  const shown = redactUrl(source);
  const single = source !== "-" && !source.startsWith("cm://");
  // The first document waits for the second: a stream of one is named after its file.
  let first: Snapshot | undefined;
  let firstAt = 0;
  let index = 0;
  const name = (snapshot: Snapshot, i: number, alone: boolean) =>
    snapshot.metadata["source-node"] ||
    (alone && single ? basename(source, extname(source)) : `${shown}#${i + 1}`);
  const unreadable = sink.unreadable;
  const onError = unreadable
    ? (error: unknown, where: { index: number; source: string }) => {
      index++;
      unreadable({ node: `${shown}#${where.index + 1}`, source: where.source, reason: why(error) });
    }
    : undefined;
  let documents = 0;
  for (const snapshot of fleetDocuments(text, shown, onError)) {
    // The fetch's cluster topology document (its last): no node's, never compared.
    if (isClusterTopologyDocument(snapshot)) continue;
    documents++;
    if (documents === 1) {
      first = snapshot;
      firstAt = index;
    } else {
      if (documents === 2) {
        sink.add({ node: name(first as Snapshot, firstAt, false), snapshot: first as Snapshot });
      }
      sink.add({ node: name(snapshot, index, false), snapshot });
    }
    index++;
  }
  if (index === 0) {
    throw new UsageError(`Cannot read fleet '${shown}': it holds no snapshot documents`);
  }
  if (documents === 1) {
    sink.add({
      node: name(first as Snapshot, firstAt, index === 1),
      snapshot: first as Snapshot,
    });
  }
  return index;
}

/** The first line of an error, for the report. */
function why(error: unknown): string {
  const text = error instanceof Error ? error.message : String(error);
  return text.split("\n")[0] ?? "";
}

/** Reads a member from its YAML text, or returns false for the caller to parse it. */
export type FleetYamlReader = (text: string, nodeName: (sourceNode: string) => string) => boolean;

async function readFleetDirectory(
  source: string,
  loader: SnapshotSourceLoader,
  options: SourceOptions,
  sink: FleetSink,
): Promise<number> {
  const dir = resolve(options.cwd, source);
  const files = (await loader.readDirectory(dir))
    // The fetch's cluster topology beside the node files: no node's, never read.
    .filter((f) => FLEET_EXTENSIONS.has(extname(f).toLowerCase()) && f !== FLEET_TOPOLOGY_FILE)
    .sort();
  if (files.length === 0) {
    throw new UsageError(
      `Cannot read fleet '${source}': directory holds no .yaml, .yml or .json files`,
    );
  }
  const names = files.map((file) => source.endsWith("/") ? source + file : `${source}/${file}`);
  // Sizes first: a file over the per-file cap fails (or is reported) before anything is read.
  const infos: (PathInfo | undefined)[] = [];
  const oversize = new Set<number>();
  const turn = createReadTurns(options.signal);
  for (const [i, name] of names.entries()) {
    await turn();
    const info = await loader.stat(resolve(options.cwd, name));
    const size = info?.size ?? 0;
    if (size > MAX_DOCUMENT_BYTES) {
      const error = new UsageError(
        `Cannot read snapshot '${name}': file is ${size} bytes, over the ${MAX_DOCUMENT_BYTES}-byte cap`,
      );
      if (!sink.unreadable) throw error;
      oversize.add(i);
    }
    infos.push(info);
  }
  for (const [i, name] of names.entries()) {
    await turn();
    const file = files[i] as string;
    const nodeName = (sourceNode: string) => sourceNode || basename(file, extname(file));
    if (oversize.has(i)) {
      sink.unreadable?.({
        node: nodeName(""),
        source: name,
        reason: `file is ${infos[i]?.size} bytes, over the ${MAX_DOCUMENT_BYTES}-byte cap`,
      });
      continue;
    }
    try {
      await readFleetFile(name, infos[i], { loader, options, sink, nodeName });
    } catch (error) {
      if (!sink.unreadable) throw error;
      sink.unreadable({ node: nodeName(""), source: name, reason: why(error) });
    }
  }
  return names.length;
}

/** One file of a fleet directory, described already (undefined when it was not there). */
async function readFleetFile(
  name: string,
  info: PathInfo | undefined,
  context: {
    loader: SnapshotSourceLoader;
    options: SourceOptions;
    sink: FleetSink;
    nodeName: (sourceNode: string) => string;
  },
): Promise<void> {
  const { loader, options, sink, nodeName } = context;
  let snapshot: Snapshot;
  // Described above: read at once, unless it was not there or is a directory (for the error).
  if (info && !info.isDirectory) {
    const text = await readKnownFile(name, loader, options);
    if (sink.addYaml?.(text, nodeName)) return;
    snapshot = parseSnapshot(text, { source: name });
  } else snapshot = await loadSnapshot(name, loader, options);
  sink.add({ node: nodeName(snapshot.metadata["source-node"]), snapshot });
}
