/**
 * The fleet fetch's streaming sink: each node's snapshot is written the moment it arrives, so a
 * fetch of 1,000 or 10,000 nodes holds the answers in flight, not every snapshot until the end.
 *
 * - A directory gets `<node>.yaml` per ok node, each written atomically as it arrives.
 * - A stream (a file, written to a temporary file and renamed at the end, or stdout) gets the ok
 *   nodes' documents in node-name order, as before: an answer that arrives before an earlier
 *   node's waits in memory up to {@link DEFAULT_REORDER_BYTES}, and past that in a temporary
 *   folder (a node that hangs until its deadline cannot make the fetch hold the fleet).
 *
 * The cluster's NodeTopology, listed once per fetch (`fleet_topology.ts`), is written once: a
 * directory gets `_cluster-topology.yaml` beside the node files (no node can be named so, and
 * `aicr diff --fleet` skips it), a stream gets it as its last document (`topology-scope:
 * cluster`, which `aicr diff --fleet` skips too).
 *
 * Output bytes are the same as writing every result at the end ({@link writeFleet}).
 *
 * @module
 */
import { randomBytes } from "node:crypto";
import { lstat, mkdtemp, readFile, rename, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { basename, dirname, join, resolve } from "node:path";
import { checkOutputFile, checkOutputFolder, openAtomicFile, writeFileAtomic } from "../io.ts";
import type { AtomicFile } from "../io.ts";
import type { TextWriter } from "../log.ts";
import {
  encodeSnapshot,
  FLEET_TOPOLOGY_FILE,
  redactSnapshot,
  YamlWriteCaches,
} from "../snapshot/mod.ts";
import type { Redactor } from "../snapshot/mod.ts";
import type { Snapshot } from "../snapshot/mod.ts";
import type { NodeResult } from "./fleet.ts";

/** Where fetched snapshots go. */
export type FleetOutput =
  | { kind: "directory"; path: string }
  | { kind: "stream"; path: string | undefined };

/**
 * The names a fetch writes into its output folder (`<node>.yaml`, `_cluster-topology.yaml`): an
 * existing one that is a symbolic link or not a regular file is refused before the fetch.
 */
const FLEET_FOLDER_ENTRIES: RegExp = /\.yaml$/;

/**
 * Where a fetch writes, from `-o`: a directory (one that exists, or a path ending in `/`) gets a
 * file per node, anything else one stream (absent or `-`: stdout). Checked before the cluster is
 * contacted: a path that cannot be made or written fails now (exit 2), not after every node was
 * asked.
 *
 * @param value the output as given
 * @param cwd the working directory
 * @returns the output
 * @throws {UsageError} when the path cannot be written
 */
export async function resolveFleetOutput(
  value: string | undefined,
  cwd: string,
): Promise<FleetOutput> {
  if (value === undefined || value === "-") return { kind: "stream", path: undefined };
  const path = resolve(cwd, value);
  const info = await stat(path).catch(() => undefined);
  if (value.endsWith("/") || info?.isDirectory()) {
    // A link (or anything but a file) planted where a node's file goes is refused now, naming it.
    await checkOutputFolder(path, { entries: FLEET_FOLDER_ENTRIES });
    return { kind: "directory", path };
  }
  await checkOutputFile(path, { what: "snapshots" });
  return { kind: "stream", path };
}

/** Stream documents held in memory, waiting for an earlier node, before they are spooled. */
export const DEFAULT_REORDER_BYTES = 64 * 1024 * 1024;

/** Writes a fetch's results as they arrive (see the module doc). */
export interface FleetWriter {
  /**
   * Takes one asked node's result, at its position in node-name order; every position at most
   * once, in any order, concurrently.
   *
   * @throws {UsageError} naming the path when it cannot be written
   */
  put(result: NodeResult, position: number): Promise<void>;
  /**
   * Takes the cluster's NodeTopology document, once: the directory's `_cluster-topology.yaml`
   * (written now), or the stream's last document (written by `close`).
   *
   * @throws {UsageError} naming the path when it cannot be written
   */
  putTopology(document: Snapshot): Promise<void>;
  /**
   * Writes what is still waiting, publishes the stream file, and removes the spool.
   *
   * @returns the paths written (node files in name order, or the stream file; none for stdout)
   */
  close(): Promise<string[]>;
  /** After a failure: removes the spool and the unpublished stream file. Never throws. */
  abort(): Promise<void>;
}

/** Options of {@link createFleetWriter}. */
export interface FleetWriterOptions {
  /** Bytes of stream documents held in memory out of order. @default 64 MiB */
  reorderBytes?: number;
  /** The spool's parent folder. @default the system's temporary folder */
  spoolParent?: string;
  /** SIGINT/SIGTERM: ends a write into a pipe no one reads. */
  signal?: AbortSignal;
  /** `--redact`: every document redacted, and a directory's files named by the node's token. */
  redactor?: Redactor;
}

/**
 * Makes the streaming sink for one fetch (give its `put` to `fetchFleet`'s `onResult`).
 *
 * @param output a directory, a stream file, or stdout
 * @param stdout standard output
 * @param options the reorder bound and spool folder
 * @returns the writer
 */
export function createFleetWriter(
  output: FleetOutput,
  stdout: TextWriter,
  options: FleetWriterOptions = {},
): FleetWriter {
  // The fleet's snapshots share most readings: one writer's caches serve them all.
  const yamlCaches = new YamlWriteCaches();
  const { redactor } = options;
  const redact = (snapshot: Snapshot) => redactor ? redactSnapshot(snapshot, redactor) : snapshot;
  const encode = (snapshot: Snapshot) => encodeSnapshot(redact(snapshot), "yaml", { yamlCaches });
  if (output.kind === "directory") {
    return directoryWriter(output.path, encode, {
      signal: options.signal,
      fileName: (node) => `${redactor ? redactor.token(node) : node}.yaml`,
    });
  }
  return streamWriter(output.path, stdout, { ...options, encode });
}

function directoryWriter(
  dir: string,
  encode: (snapshot: Snapshot) => string,
  options: { signal: AbortSignal | undefined; fileName: (node: string) => string },
): FleetWriter {
  const { signal } = options;
  // Never through a link found in the folder: refused, naming it (a rename replaces one that
  // appears later instead of writing where it points).
  const write = { what: "snapshots", followLinks: false, ...(signal ? { signal } : {}) };
  const written: { node: string; path: string }[] = [];
  let topology: string | undefined;
  return {
    async putTopology(document) {
      const path = join(dir, FLEET_TOPOLOGY_FILE);
      await writeFileAtomic(path, encode(document), 0o644, write);
      topology = path;
    },
    async put(result) {
      if (!result.snapshot) return;
      const path = join(dir, options.fileName(result.node));
      const text = encode(result.snapshot);
      // Once a file went in, the folder is known good: the next ones skip writeFileAtomic's
      // checks (a temporary file and a rename only), and take them again on any failure.
      if (written.length === 0 || !await writeBeside(path, text)) {
        await writeFileAtomic(path, text, 0o644, write);
      }
      written.push({ node: result.node, path });
    },
    close: () =>
      Promise.resolve([
        ...written.sort((a, b) => a.node.localeCompare(b.node)).map((w) => w.path),
        ...(topology ? [topology] : []),
      ]),
    abort: () => Promise.resolve(),
  };
}

/**
 * A temporary file beside `path`, renamed over it; false (nothing left behind) on failure, or
 * when something other than a regular file is at `path` (writeFileAtomic then refuses it, named).
 */
async function writeBeside(path: string, text: string): Promise<boolean> {
  const there = await lstat(path).catch(() => undefined);
  if (there && !there.isFile()) return false;
  const temp = join(dirname(path), `.${basename(path)}.${randomBytes(6).toString("hex")}.tmp`);
  try {
    await writeFile(temp, text, { flag: "wx", mode: 0o644 });
    await rename(temp, path);
    return true;
  } catch {
    await rm(temp, { force: true }).catch(() => {});
    return false;
  }
}

/** A document waiting for its turn: in memory, spooled to a file, or none (a failed node). */
type Waiting = { text: string } | { spooled: string } | null;

/** The stream's file, opened once (a pipe written without blocking until the signal aborts). */
function openStreamFile(path: string, signal: AbortSignal | undefined): Promise<AtomicFile> {
  return openAtomicFile(path, 0o644, { what: "snapshots", ...(signal ? { signal } : {}) });
}

function streamWriter(
  path: string | undefined,
  stdout: TextWriter,
  options: FleetWriterOptions & { encode: (snapshot: Snapshot) => string },
): FleetWriter {
  const reorderBytes = options.reorderBytes ?? DEFAULT_REORDER_BYTES;
  const waiting = new Map<number, Waiting>();
  let next = 0;
  let held = 0;
  let file: Promise<AtomicFile> | undefined;
  let spool: Promise<string> | undefined;
  // Writes happen one at a time, in position order.
  let queue: Promise<void> = Promise.resolve();

  const sink = (): Promise<AtomicFile> => file ??= openStreamFile(path as string, options.signal);
  const emit = async (text: string) => {
    if (path === undefined) stdout.write(text);
    else await (await sink()).write(text);
  };
  const spoolDir = () => spool ??= mkdtemp(join(options.spoolParent ?? tmpdir(), "aicr-fetch-"));
  const textOf = async (item: Waiting): Promise<string> => {
    if (item === null) return "";
    if ("text" in item) {
      held -= item.text.length;
      return item.text;
    }
    return await takeSpooled(item.spooled);
  };
  const drain = async (all: boolean) => {
    const positions = all ? [...waiting.keys()].sort((a, b) => a - b) : [];
    for (;;) {
      const position = all ? positions.shift() : next;
      if (position === undefined || !waiting.has(position)) return;
      const item = waiting.get(position) as Waiting;
      waiting.delete(position);
      next = position + 1;
      const text = await textOf(item);
      if (text !== "") await emit(text);
    }
  };
  const serial = (step: () => Promise<void>): Promise<void> => {
    const run = queue.then(step);
    queue = run.catch(() => {});
    return run;
  };

  const writer: FleetWriter = {
    async put(result, position) {
      const text = result.snapshot ? `---\n${options.encode(result.snapshot)}` : "";
      await serial(async () => {
        if (position !== next && text !== "" && held + text.length > reorderBytes) {
          const spooled = join(await spoolDir(), `${position}.yaml`);
          await writeFile(spooled, text);
          waiting.set(position, { spooled });
        } else {
          held += text.length;
          waiting.set(position, text === "" ? null : { text });
        }
        await drain(false);
      });
    },
    // Last, after every node's: a reader that knows no topology document meets it at the end.
    putTopology: (document) => writer.put(topologyResult(document), Number.MAX_SAFE_INTEGER),
    async close() {
      await serial(() => drain(true));
      if (spool) await rm(await spool, { recursive: true, force: true });
      if (path === undefined) return [];
      // No ok node: the stream file is still written, empty.
      await (await sink()).commit();
      return [path];
    },
    async abort() {
      await queue;
      if (spool) await rm(await spool, { recursive: true, force: true }).catch(() => {});
      if (file) await (await file.catch(() => undefined))?.discard();
    },
  };
  return writer;
}

/** Reads a spooled document and removes its file. */
async function takeSpooled(path: string): Promise<string> {
  const text = await readFile(path, "utf8");
  await rm(path, { force: true });
  return text;
}

/** The topology document as a result the stream writer orders like a node's. */
function topologyResult(document: Snapshot): NodeResult {
  return { node: "", pod: "", status: "ok", snapshot: document, durationMs: 0 };
}

/**
 * Writes the ok nodes' snapshots of a finished fetch: one `<node>.yaml` per node into a
 * directory (each written atomically), or one stream to a file (atomically) or to stdout.
 *
 * @param results the fetch results, in node-name order
 * @param output where
 * @param stdout standard output
 * @param topology the cluster's NodeTopology document, when the fetch listed it
 * @returns the paths written (empty for stdout)
 * @throws {ToolError} naming the path when a file cannot be written
 */
export async function writeFleet(
  results: readonly NodeResult[],
  output: FleetOutput,
  stdout: TextWriter,
  topology?: Snapshot,
): Promise<string[]> {
  const writer = createFleetWriter(output, stdout);
  try {
    for (const [position, result] of results.entries()) await writer.put(result, position);
    if (topology) await writer.putTopology(topology);
    return await writer.close();
  } catch (error) {
    await writer.abort();
    throw error;
  }
}
