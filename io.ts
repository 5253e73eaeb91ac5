/**
 * Floor-0 helpers both controller-side and node-side code need: bounded concurrency
 * ({@link mapConcurrent}), the one abortable {@link sleep}, atomic file writes ({@link writeFileAtomic}) and joining read chunks
 * ({@link concatBytes}).
 *
 * @module
 */
import {
  accessSync,
  close as closeFd,
  closeSync,
  constants,
  lstatSync,
  mkdirSync,
  openSync,
  readdirSync,
  readlinkSync,
  readSync,
  realpathSync,
  renameSync,
  rmdirSync,
  rmSync,
  statSync,
  writeFile as writeFd,
  writeFileSync,
  writeSync,
} from "node:fs";
import type { Stats } from "node:fs";
import { basename, dirname, join, resolve } from "node:path";
import { InterruptedError, UsageError } from "./errors.ts";

/**
 * Maps over items with at most `limit` calls in flight, keeping the results in order.
 * The first rejection rejects the whole map after the calls in flight settle.
 *
 * @param items the inputs
 * @param limit most calls at once (at least 1)
 * @param fn the call
 * @returns the results, in input order
 */
export async function mapConcurrent<T, R>(
  items: readonly T[],
  limit: number,
  fn: (item: T, index: number) => Promise<R>,
): Promise<R[]> {
  const results: R[] = new Array(items.length);
  let next = 0;
  let failure: { error: unknown } | undefined;
  async function worker(): Promise<void> {
    while (failure === undefined && next < items.length) {
      const index = next++;
      try {
        results[index] = await fn(items[index] as T, index);
      } catch (error) {
        failure ??= { error };
      }
    }
  }
  const workers = Array.from({ length: Math.max(1, Math.min(limit, items.length)) }, worker);
  await Promise.all(workers);
  if (failure !== undefined) throw failure.error;
  return results;
}

/** The longest timer `setTimeout` takes (2^31-1 ms); a longer sleep is cut to it. */
const MAX_TIMER_MS = 2_147_483_647;

/**
 * Waits `ms` milliseconds, or less when `signal` aborts: the one abortable sleep. It never
 * rejects; a caller that must stop on abort checks `signal.aborted` (or `throwIfAborted()`)
 * after it, so an early wake is not mistaken for an error and no timer outlives the wait.
 *
 * @param ms how long (cut to 2^31-1: a caller waiting longer loops)
 * @param signal ends the wait early
 * @returns resolves when the time is up or the signal aborted
 */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const timer = setTimeout(done, Math.min(Math.max(ms, 0), MAX_TIMER_MS));
    function done(): void {
      clearTimeout(timer);
      signal?.removeEventListener("abort", done);
      resolve();
    }
    signal?.addEventListener("abort", done, { once: true });
  });
}

/** Options of the output checks and writes. */
export interface OutputOptions {
  /**
   * What is written, for messages (`Cannot write <what> to '<path>': ...`; an empty string gives
   * `Cannot write '<path>': ...`). @default "snapshot"
   */
  what?: string;
  /** Whether missing folders are created (else a missing folder is refused). @default true */
  createFolders?: boolean;
  /**
   * Whether the file named may be a symbolic link to follow (`-o /dev/stdout`, a linked file the
   * user named). `false` for a file aicr names inside an output folder: a link (or anything but a
   * regular file) found there is refused, naming it, and the file is always published by a
   * rename, which replaces a link that appears meanwhile instead of writing through it.
   * @default true
   */
  followLinks?: boolean;
  /**
   * {@link checkOutputFolder} only: entries of an existing folder that aicr may write into;
   * one that is a symbolic link or not a regular file is refused up front, naming it.
   */
  entries?: RegExp;
  /**
   * Ends a wait for a pipe's reader and a write into a full pipe (SIGINT/SIGTERM): the write
   * then fails with an {@link InterruptedError}. Regular files and devices are written at once.
   */
  signal?: AbortSignal;
}

/**
 * Checks, before anything else happens, that a file can be written at a path, by doing what the
 * write will do: the missing folders are created one level at a time and a temporary file is
 * created exclusively in the last, then both are removed again. A directory, a path under a
 * regular file, a place where `mkdir` or `open` fails (procfs answers ENOENT under a folder that
 * exists, a read-only mount, a full disk) is refused here instead of after the work is done. An
 * existing device or pipe is only checked for write permission (opening a pipe could wait for its
 * reader).
 *
 * @param path the destination
 * @param options what is written, for the message
 * @throws {UsageError} naming the path and why it cannot be written (exit 2)
 */
export function checkOutputFile(path: string, options: OutputOptions = {}): Promise<void> {
  try {
    probeOutput(path, {
      what: options.what ?? "snapshot",
      folder: false,
      createFolders: options.createFolders ?? true,
      followLinks: options.followLinks ?? true,
    });
    return Promise.resolve();
  } catch (error) {
    return Promise.reject(error);
  }
}

/**
 * Checks, before anything else happens, that files can be written into a folder (created if
 * missing), as {@link checkOutputFile} does for a file: the missing folders are created one level
 * at a time and a temporary file inside, then both are removed again.
 *
 * @param path the folder
 * @param options what is written, for the message
 * @throws {UsageError} naming the path and why it cannot be written (exit 2)
 */
export function checkOutputFolder(path: string, options: OutputOptions = {}): Promise<void> {
  try {
    probeOutput(path, {
      what: options.what ?? "snapshots",
      folder: true,
      createFolders: options.createFolders ?? true,
      followLinks: true,
    });
    if (options.entries) refuseLinkedEntries(path, options.entries, options.what ?? "snapshots");
    return Promise.resolve();
  } catch (error) {
    return Promise.reject(error);
  }
}

/** A failure of an output path, as the user sees it: a usage error naming the path (exit 2). */
function outputFailure(path: string, what: string): (why: string, cause?: unknown) => never {
  return (why, cause) => {
    throw new UsageError(
      `Cannot write ${what ? `${what} to ` : ""}'${path}': ${why}`,
      cause === undefined ? {} : { cause },
    );
  };
}

/** A system call's error code and message, for a message naming the path. */
function describeFsError(error: unknown): string {
  const code = (error as { code?: string }).code;
  const message = error instanceof Error ? error.message : String(error);
  return code ? `${code}: ${message.replace(/^[A-Z]+: /, "")}` : message;
}

/** Where a write goes, found without writing: through symlinks, and what is there. */
interface OutputPlace {
  /** The path through its symlinks. */
  target: string;
  /** What is at the target now, if anything. */
  existing: Stats | undefined;
  /** The folders to create, outermost first (empty when the folder exists). */
  missing: string[];
}

/**
 * The checks every write makes first, with synchronous metadata calls (a short command never
 * loads `node:fs/promises` or starts the thread pool for them): not a directory (unless `folder`),
 * an existing file writable, else the nearest existing folder a writable directory.
 */
function findOutputPlace(
  path: string,
  fail: (why: string, cause?: unknown) => never,
  options: { folder: boolean; createFolders: boolean; followLinks: boolean },
): OutputPlace {
  const { folder } = options;
  // Not following: the folder through its links (the user's choice), the file itself never.
  const target = options.followLinks || folder
    ? realpathOr(resolve(path))
    : join(realpathOr(dirname(resolve(path))), basename(path));
  if (!options.followLinks && !folder) refuseLink(target, fail);
  const existing = statOrUndefined(target);
  if (existing) {
    if (folder) {
      if (!existing.isDirectory()) fail("it is not a directory; give a folder path");
      return { target, existing, missing: [] };
    }
    // guard: output-directory: a directory is never the output file
    if (existing.isDirectory()) fail("it is a directory; give a file path");
    try {
      accessSync(target, constants.W_OK);
    } catch {
      fail("it is not writable");
    }
    return { target, existing, missing: [] };
  }
  const missing: string[] = [];
  let dir = folder ? target : dirname(target);
  for (;;) {
    let info: Stats | undefined;
    try {
      info = statSync(dir);
    } catch (error) {
      const code = (error as { code?: string }).code;
      // ENOTDIR: a component above is not a folder; keep walking up to name it.
      if (code !== "ENOENT" && code !== "ENOTDIR") {
        fail(`its folder '${dir}' cannot be read (${code})`, error);
      }
    }
    if (info) {
      // guard: output-never-exists: a path under a regular file is refused up front
      if (!info.isDirectory()) fail(`'${dir}' is not a directory, so the path can never exist`);
      try {
        accessSync(dir, constants.W_OK | constants.X_OK);
      } catch {
        fail(`the folder '${dir}' is not writable`);
      }
      if (missing.length > 0 && !options.createFolders) {
        fail(`its folder '${missing[0]}' does not exist`);
      }
      return { target, existing, missing };
    }
    missing.unshift(dir);
    const parent = dirname(dir);
    if (parent === dir) fail("no folder of it exists");
    dir = parent;
  }
}

/**
 * Creates folders one level at a time, outermost first, each with one `mkdir` (never a recursive
 * one: Node's loops forever where `mkdir` answers ENOENT under a folder that exists, as procfs
 * does). A folder that appeared meanwhile is fine.
 *
 * @returns the folders this call created, outermost first
 */
function makeFolders(missing: readonly string[], fail: (why: string, cause?: unknown) => never) {
  const made: string[] = [];
  for (const dir of missing) {
    try {
      mkdirSync(dir, { mode: 0o777 });
      made.push(dir);
    } catch (error) {
      if ((error as { code?: string }).code === "EEXIST" && statOrUndefined(dir)?.isDirectory()) {
        continue;
      }
      removeFolders(made);
      fail(`the folder '${dir}' cannot be created (${describeFsError(error)})`, error);
    }
  }
  return made;
}

/** Removes folders a probe created, innermost first; a folder something else filled stays. */
function removeFolders(made: readonly string[]): void {
  for (const dir of [...made].reverse()) {
    try {
      rmdirSync(dir);
    } catch {
      // not empty any more, or gone: left as it is
    }
  }
}

/** {@link checkOutputFile} and {@link checkOutputFolder}: the checks, then a trial write undone. */
function probeOutput(
  path: string,
  options: { what: string; folder: boolean; createFolders: boolean; followLinks: boolean },
): void {
  const fail = outputFailure(path, options.what);
  const place = findOutputPlace(path, fail, options);
  // A device or a pipe is written into as it is: opening a pipe could wait for its reader.
  if (place.existing && !place.existing.isFile() && !place.existing.isDirectory()) return;
  const made = makeFolders(place.missing, fail);
  const dir = options.folder ? place.target : dirname(place.target);
  const temp = join(
    dir,
    `.${options.folder ? "aicr" : basename(place.target)}.${tempSuffix()}.tmp`,
  );
  try {
    closeSync(openSync(temp, "wx", 0o600));
  } catch (error) {
    removeFolders(made);
    fail(`a file cannot be created in '${dir}' (${describeFsError(error)})`, error);
  }
  removeTemp(temp);
  removeFolders(made);
}

/**
 * Refuses a file aicr names in an output folder when it is there already as a symbolic link, or
 * as anything but a regular file: written through, the link would put the file where it points.
 */
function refuseLink(target: string, fail: (why: string, cause?: unknown) => never): void {
  let info: Stats;
  try {
    info = lstatSync(target);
  } catch {
    return; // not there: it will be created, exclusively, by a rename
  }
  // guard: output-no-follow: a file aicr names in an output folder is never written through a link
  if (info.isSymbolicLink()) {
    let to = "";
    try {
      to = ` to '${readlinkSync(target)}'`;
    } catch {
      // unreadable: named without its target
    }
    fail(
      `it is a symbolic link${to} that was there before this run; aicr never follows a link in an output folder: remove it, or write elsewhere`,
    );
  }
  if (!info.isFile()) {
    fail(
      "it is there already and is not a regular file; aicr writes only regular files into an output folder: remove it, or write elsewhere",
    );
  }
}

/** {@link checkOutputFolder}'s `entries`: an existing link (or non-file) among them is refused. */
function refuseLinkedEntries(folder: string, entries: RegExp, what: string): void {
  let names: string[];
  try {
    names = readdirSync(folder);
  } catch {
    return; // made by the probe and removed again, or not listable: checked per file later
  }
  for (const name of names.filter((n) => entries.test(n)).sort()) {
    const path = join(folder, name);
    refuseLink(path, outputFailure(path, what));
  }
}

/** A path through its symlinks, or the path itself when that fails. */
function realpathOr(path: string): string {
  try {
    return realpathSync(path);
  } catch {
    return path;
  }
}

/** A path's stat, or undefined when that fails. */
function statOrUndefined(path: string): Stats | undefined {
  try {
    return statSync(path);
  } catch {
    return undefined;
  }
}

/** A file written in pieces and published whole ({@link openAtomicFile}). */
export interface AtomicFile {
  /** Appends text or bytes. @throws {UsageError} naming the path */
  write(data: string | Uint8Array): Promise<void>;
  /** Publishes the file: the temporary file is renamed over the path. @throws {UsageError} */
  commit(): Promise<void>;
  /** Removes the temporary file; nothing is published. Never throws. */
  discard(): Promise<void>;
}

/**
 * Twelve random hex digits for a temporary file's name. The file is created exclusively (`wx`),
 * so the name needs to be unlikely to collide, not secret; Go's `os.CreateTemp` draws its names
 * from a non-cryptographic source too. Drawing them without `node:crypto` keeps a short run
 * from loading it (about 8 ms of CPU for `aicr agent -o <file>`).
 *
 * @returns the digits
 */
function tempSuffix(): string {
  let hex = "";
  for (let i = 0; i < 6; i++) hex += Math.floor(Math.random() * 256).toString(16).padStart(2, "0");
  return hex;
}

/** An atomic write's file, open: a device or pipe written into, or a temporary file beside it. */
interface OpenedTarget {
  /** The open file. */
  fd: number;
  /** What it is published as (through symlinks). */
  target: string;
  /** The temporary file renamed over `target` on commit; absent for a device or pipe. */
  temp?: string;
  /** A pipe (opened non-blocking): written in {@link PIPE_CHUNK} pieces, waiting when full. */
  pipe: boolean;
  /** A write's failure, as the user sees it (naming the path). */
  failure: (error: unknown) => UsageError | InterruptedError;
}

/**
 * The most bytes one write into a pipe takes: POSIX's PIPE_BUF on Linux, so a non-blocking write
 * is taken whole or refused whole (EAGAIN), never cut at an unknown length.
 */
const PIPE_CHUNK = 4096;
/** The longest pause between two tries at a pipe (no reader yet, or full). */
const PIPE_PAUSE_MAX_MS = 50;

/**
 * Opens where an atomic write goes. A regular file gets a temporary file beside it, created
 * exclusively after its missing folders (one level at a time), with synchronous calls (a few
 * system calls: a short command never loads `node:fs/promises` or starts the thread pool for
 * them). A device (`-o /dev/null`, `-o /dev/stdout` on a terminal) is opened itself: renaming over
 * it would replace the device node, so it is written into instead. A pipe (`mkfifo`,
 * `-o >(gzip)`, `-o /dev/stdout` into a pipe) is opened non-blocking and, while no process reads
 * it, tried again (with short pauses) until one does or `signal` aborts: a pipe no one reads never
 * blocks the event loop or a thread the process would wait for at exit, so signals stay honoured.
 *
 * @throws {UsageError} naming the path when it cannot be written
 * @throws {InterruptedError} when `signal` aborts while no process reads the pipe
 */
async function openTarget(
  path: string,
  mode: number,
  options: {
    what: string;
    createFolders: boolean;
    followLinks: boolean;
    signal?: AbortSignal | undefined;
  },
): Promise<OpenedTarget> {
  const { what } = options;
  const fail = outputFailure(path, what);
  // A path that can never exist fails here, before a folder is made.
  const { target, existing, missing } = findOutputPlace(path, fail, {
    folder: false,
    createFolders: options.createFolders,
    followLinks: options.followLinks,
  });
  const failure = (error: unknown): UsageError | InterruptedError => {
    if (error instanceof UsageError || error instanceof InterruptedError) return error;
    try {
      return fail(describeFsError(error), error);
    } catch (named) {
      return named as UsageError;
    }
  };
  // guard: output-pipe: a pipe is written into, never renamed over
  if (existing?.isFIFO()) {
    return {
      fd: await openPipe(target, { path, what, signal: options.signal }),
      target,
      pipe: true,
      failure,
    };
  }
  // guard: output-device: a device is written into, never renamed over
  if (existing && !existing.isFile()) {
    try {
      return { fd: openSync(target, "w"), target, pipe: false, failure };
    } catch (error) {
      throw failure(error);
    }
  }
  makeFolders(missing, fail);
  const dir = dirname(target);
  const temp = join(dir, `.${basename(target)}.${tempSuffix()}.tmp`);
  try {
    return { fd: openSync(temp, "wx", mode), target, temp, pipe: false, failure };
  } catch (error) {
    removeTemp(temp);
    throw failure(error);
  }
}

/** The interrupt of a pipe's write, naming the path. */
function pipeInterrupted(path: string, what: string, signal: AbortSignal): InterruptedError {
  return new InterruptedError(
    `Cannot write ${what ? `${what} to ` : ""}'${path}': interrupted (${String(signal.reason)})`,
  );
}

/**
 * Opens a pipe for writing without blocking: ENXIO (no reader yet) is tried again after a short
 * pause, until a process opens it for reading or `signal` aborts.
 */
async function openPipe(
  target: string,
  context: { path: string; what: string; signal: AbortSignal | undefined },
): Promise<number> {
  const { signal } = context;
  let wait = 0;
  for (;;) {
    if (signal?.aborted) throw pipeInterrupted(context.path, context.what, signal);
    try {
      return openSync(target, constants.O_WRONLY | constants.O_NONBLOCK | constants.O_NOCTTY);
    } catch (error) {
      if ((error as { code?: string }).code !== "ENXIO") {
        outputFailure(context.path, context.what)(describeFsError(error), error);
      }
    }
    wait = Math.min(Math.max(1, wait * 2), PIPE_PAUSE_MAX_MS);
    await sleep(wait, signal);
  }
}

/**
 * Writes bytes into a non-blocking pipe in {@link PIPE_CHUNK} pieces; while it is full (EAGAIN)
 * it pauses briefly and tries again, until `signal` aborts. Every megabyte it yields to the event
 * loop, so a fast reader cannot hold off a signal either.
 */
async function writePipe(
  fd: number,
  bytes: Uint8Array,
  context: { path: string; what: string; signal: AbortSignal | undefined },
): Promise<void> {
  const { signal } = context;
  let offset = 0;
  let wait = 0;
  let sinceYield = 0;
  while (offset < bytes.length) {
    if (signal?.aborted) throw pipeInterrupted(context.path, context.what, signal);
    try {
      const written = writeSync(fd, bytes, offset, Math.min(PIPE_CHUNK, bytes.length - offset));
      offset += written;
      sinceYield += written;
      wait = 0;
      if (sinceYield >= 1 << 20) {
        sinceYield = 0;
        await sleep(0, signal);
      }
    } catch (error) {
      if ((error as { code?: string }).code !== "EAGAIN") throw error;
      wait = Math.min(Math.max(1, wait * 2), PIPE_PAUSE_MAX_MS);
      await sleep(wait, signal);
    }
  }
}

/** Removes a temporary file, if it is there: the write has failed either way. */
function removeTemp(temp: string): void {
  try {
    rmSync(temp, { force: true });
  } catch {
    // nothing to remove, or it cannot be
  }
}

/** Publishes an opened target once its file is closed: the temporary file renamed over it. */
function publish(opened: OpenedTarget): void {
  if (opened.temp === undefined) return;
  try {
    renameSync(opened.temp, opened.target);
  } catch (error) {
    removeTemp(opened.temp);
    throw opened.failure(error);
  }
}

/**
 * Opens a file to be written in pieces and published atomically: a temporary file beside it,
 * renamed over it by {@link AtomicFile.commit}. A device or pipe (`-o /dev/stdout`) is written
 * into directly instead (a pipe without blocking, see {@link OutputOptions.signal}). Opening a
 * file takes a few synchronous calls; the pieces are written asynchronously.
 *
 * @param path the destination
 * @param mode file mode @default 0o644
 * @param options what is written (messages), and the signal that ends a wait on a pipe
 * @returns the open file
 * @throws {UsageError} naming the path when it cannot be written (exit 2)
 * @throws {InterruptedError} when `signal` aborts while no process reads the pipe
 */
export async function openAtomicFile(
  path: string,
  mode = 0o644,
  options: OutputOptions = {},
): Promise<AtomicFile> {
  const what = options.what ?? "snapshot";
  const opened = await openTarget(path, mode, {
    what,
    createFolders: options.createFolders ?? true,
    followLinks: options.followLinks ?? true,
    signal: options.signal,
  });
  const { fd, temp, failure } = opened;
  let closed: Promise<void> | undefined;
  const close = () =>
    closed ??= new Promise<void>((done, fail) =>
      closeFd(fd, (error) => error ? fail(error) : done())
    );
  const discard = async () => {
    await close().catch(() => {});
    if (temp !== undefined) removeTemp(temp);
  };
  return {
    async write(data) {
      try {
        if (opened.pipe) {
          const bytes = typeof data === "string" ? new TextEncoder().encode(data) : data;
          await writePipe(fd, bytes, { path, what, signal: options.signal });
        } else {
          await new Promise<void>((done, fail) =>
            writeFd(fd, data, (error) => error ? fail(error) : done())
          );
        }
      } catch (error) {
        // A device keeps its place; a temporary file goes with the failed write.
        if (temp !== undefined) await discard();
        throw failure(error);
      }
    },
    async commit() {
      try {
        await close();
      } catch (error) {
        if (temp !== undefined) removeTemp(temp);
        throw failure(error);
      }
      publish(opened);
    },
    discard,
  };
}

/**
 * Writes a file atomically: a temporary file beside it (after its missing folders, one level at
 * a time), then a rename. A device or pipe is written into instead (a pipe without blocking, see
 * {@link OutputOptions.signal}).
 *
 * @param path the destination
 * @param text the content
 * @param mode file mode @default 0o644
 * @param options what is written (messages), and the signal that ends a wait on a pipe
 * @throws {UsageError} naming the path when it cannot be written (exit 2)
 * @throws {InterruptedError} when `signal` aborts while the pipe is not read
 */
export async function writeFileAtomic(
  path: string,
  text: string,
  mode = 0o644,
  options: OutputOptions = {},
): Promise<void> {
  const what = options.what ?? "snapshot";
  const opened = await openTarget(path, mode, {
    what,
    createFolders: options.createFolders ?? true,
    followLinks: options.followLinks ?? true,
    signal: options.signal,
  });
  if (opened.pipe) {
    try {
      await writePipe(opened.fd, new TextEncoder().encode(text), {
        path,
        what,
        signal: options.signal,
      });
    } catch (error) {
      throw opened.failure(error);
    } finally {
      closeQuietly(opened.fd);
    }
    return;
  }
  // One whole text (a snapshot, a report) in a few system calls, without loading
  // `node:fs/promises` or a thread-pool hop per step.
  const { temp } = opened;
  writeAndClose(opened.fd, text, opened.failure, () => {
    if (temp !== undefined) removeTemp(temp);
  });
  publish(opened);
}

/** Closes a file descriptor; a failure to close is no news after the write's outcome. */
function closeQuietly(fd: number): void {
  try {
    closeSync(fd);
  } catch {
    // already reported, or nothing to report
  }
}

/**
 * Writes a whole text into an open file and closes it. On a failure the file is closed anyway,
 * `undo` runs and the failure is thrown.
 */
function writeAndClose(
  fd: number,
  text: string,
  failure: (error: unknown) => Error,
  undo: () => void = () => {},
): void {
  try {
    writeFileSync(fd, text);
  } catch (error) {
    closeQuietly(fd);
    undo();
    throw failure(error);
  }
  try {
    closeSync(fd);
  } catch (error) {
    undo();
    throw failure(error);
  }
}

/**
 * Like `Promise.all`, but waits for every promise to settle before it rejects with the first
 * failure (in argument order): work still in flight cannot log after the caller has already
 * reported the failure and moved on.
 *
 * @param promises the promises, as a tuple
 * @returns their values, in order
 * @throws the first rejection's reason, once all have settled
 */
export async function allSettledOrThrow<T extends readonly unknown[]>(
  promises: { readonly [K in keyof T]: Promise<T[K]> },
): Promise<T> {
  const settled = await Promise.allSettled(promises as readonly Promise<unknown>[]);
  const failed = settled.find((r): r is PromiseRejectedResult => r.status === "rejected");
  if (failed) throw failed.reason;
  return settled.map((r) => (r as PromiseFulfilledResult<unknown>).value) as unknown as T;
}

/**
 * Joins chunks read from a stream or file into one array.
 *
 * @param chunks the chunks, in order
 * @param total their summed length
 * @returns one array of `total` bytes
 */
export function concatBytes(chunks: readonly Uint8Array[], total: number): Uint8Array {
  const out = new Uint8Array(total);
  let offset = 0;
  for (const chunk of chunks) {
    out.set(chunk, offset);
    offset += chunk.length;
  }
  return out;
}

/** Options of {@link readTextFileBounded}. */
export interface BoundedReadOptions {
  /** What is read, for messages (`Cannot read <what> '<path>': ...`). */
  what: string;
  /** The path as the user gave it, for messages. @default the path */
  shown?: string;
  /** SIGINT/SIGTERM: ends a wait on a pipe whose writer is slow. */
  signal?: AbortSignal;
}

/**
 * Reads a whole text file, never more than `maxBytes`: a regular file's size is checked before a
 * byte is read (a 300 MB config is refused at once, not parsed); a pipe or device is opened
 * non-blocking and read as it comes (pausing while it is empty, until `signal` aborts), stopping
 * one byte past the cap. Neither blocks the event loop nor a thread the process waits for at exit.
 *
 * @param path the file
 * @param maxBytes the cap
 * @param options what it is (messages) and the signal
 * @returns the text (UTF-8)
 * @throws {UsageError} naming the path: missing, a directory, over the cap, unreadable (exit 2)
 * @throws {InterruptedError} when `signal` aborts while a pipe is read
 */
export async function readTextFileBounded(
  path: string,
  maxBytes: number,
  options: BoundedReadOptions,
): Promise<string> {
  const shown = options.shown ?? path;
  const fail = (why: string, cause?: unknown): never => {
    throw new UsageError(
      `Cannot read ${options.what} '${shown}': ${why}`,
      cause === undefined ? {} : { cause },
    );
  };
  let info: Stats | undefined;
  try {
    info = statSync(path);
  } catch (error) {
    fail(describeFsError(error), error);
  }
  if (info?.isDirectory()) fail("it is a directory; give a file");
  if (info?.isFile() && info.size > maxBytes) {
    fail(`it is ${info.size} bytes, over the ${maxBytes}-byte cap`);
  }
  let fd: number;
  try {
    fd = openSync(path, constants.O_RDONLY | constants.O_NONBLOCK | constants.O_NOCTTY);
  } catch (error) {
    return fail(describeFsError(error), error);
  }
  try {
    const chunks: Uint8Array[] = [];
    let total = 0;
    let wait = 0;
    for (;;) {
      const chunk = new Uint8Array(Math.min(1 << 16, maxBytes + 1 - total));
      let read: number;
      try {
        read = readSync(fd, chunk, 0, chunk.length, null);
      } catch (error) {
        if ((error as { code?: string }).code !== "EAGAIN") fail(describeFsError(error), error);
        if (options.signal?.aborted) {
          throw new InterruptedError(
            `Cannot read ${options.what} '${shown}': interrupted (${
              String(options.signal.reason)
            })`,
          );
        }
        wait = Math.min(Math.max(1, wait * 2), PIPE_PAUSE_MAX_MS);
        await sleep(wait, options.signal);
        continue;
      }
      if (read === 0) break;
      wait = 0;
      chunks.push(chunk.subarray(0, read));
      total += read;
      if (total > maxBytes) fail(`it exceeds the ${maxBytes}-byte cap`);
    }
    return new TextDecoder().decode(concatBytes(chunks, total));
  } finally {
    closeQuietly(fd);
  }
}
