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
  mkdirSync,
  openSync,
  realpathSync,
  renameSync,
  rmSync,
  statSync,
  writeFile as writeFd,
  writeFileSync,
} from "node:fs";
import type { Stats } from "node:fs";
import { basename, dirname, join, resolve } from "node:path";
import { UsageError } from "./errors.ts";

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

/**
 * Checks, before anything else happens, that a file can be written at a path: not a
 * directory, an existing file or device writable, or else a nearest existing ancestor that
 * is a writable directory (missing folders are created at write time). A path that can
 * never exist (under a regular file or a device) is refused here instead of failing, or
 * looping, after the work is done.
 *
 * @param path the destination
 * @param what what is written, for the message @default "snapshot"
 * @throws {UsageError} naming the path and why it cannot be written
 */
export function checkOutputFile(path: string, what = "snapshot"): Promise<void> {
  try {
    checkOutputFileNow(path, what);
    return Promise.resolve();
  } catch (error) {
    return Promise.reject(error);
  }
}

/**
 * {@link checkOutputFile} with synchronous calls (a few metadata lookups): a short command
 * never loads `node:fs/promises` or starts the thread pool for them.
 */
function checkOutputFileNow(path: string, what: string): void {
  const fail = (why: string): never => {
    throw new UsageError(`Cannot write ${what} to '${path}': ${why}`);
  };
  const full = resolve(path);
  const target = realpathOr(full);
  const existing = statOrUndefined(target);
  if (existing) {
    if (existing.isDirectory()) fail("it is a directory; give a file path");
    try {
      accessSync(target, constants.W_OK);
    } catch {
      fail("it is not writable");
    }
    return;
  }
  let dir = dirname(target);
  for (;;) {
    let info: Stats | undefined;
    try {
      info = statSync(dir);
    } catch (error) {
      const code = (error as { code?: string }).code;
      // ENOTDIR: a component above is not a folder; keep walking up to name it.
      if (code !== "ENOENT" && code !== "ENOTDIR") {
        fail(`its folder '${dir}' cannot be read (${code})`);
      }
    }
    if (info) {
      if (!info.isDirectory()) fail(`'${dir}' is not a directory, so the path can never exist`);
      try {
        accessSync(dir, constants.W_OK | constants.X_OK);
      } catch {
        fail(`the folder '${dir}' is not writable`);
      }
      return;
    }
    const parent = dirname(dir);
    if (parent === dir) fail("no folder of it exists");
    dir = parent;
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
  /** Appends text. @throws {UsageError} naming the path */
  write(text: string): Promise<void>;
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
  /** A write's failure, as the user sees it (naming the path). */
  failure: (error: unknown) => UsageError;
}

/**
 * Opens where an atomic write goes, with synchronous calls (a few system calls: a short
 * command never loads `node:fs/promises` or starts the thread pool for them). A device or pipe
 * (`-o /dev/null`, `-o /dev/stdout`, `-o >(gzip)`) is opened itself: renaming over it would
 * replace the device node, so it is written into instead. Anything else gets a temporary file
 * beside it, created exclusively.
 *
 * @throws {UsageError} naming the path when it cannot be written
 */
function openTarget(path: string, mode: number): OpenedTarget {
  // A path that can never exist fails here, before `mkdir -p` meets a file in its way.
  checkOutputFileNow(path, "snapshot");
  const failure = (error: unknown) =>
    new UsageError(
      `Cannot write snapshot to '${path}': ${error instanceof Error ? error.message : error}`,
      { cause: error },
    );
  // Through symlinks (`-o /dev/stdout`, a linked config folder) to what they name.
  const target = realpathOr(resolve(path));
  const existing = statOrUndefined(target);
  if (existing && !existing.isFile()) {
    if (existing.isDirectory()) {
      throw new UsageError(
        `Cannot write snapshot to '${path}': it is a directory; give a file path`,
      );
    }
    try {
      return { fd: openSync(target, "w"), target, failure };
    } catch (error) {
      throw failure(error);
    }
  }
  const dir = dirname(target);
  const temp = join(dir, `.${basename(target)}.${tempSuffix()}.tmp`);
  try {
    mkdirSync(dir, { recursive: true });
    return { fd: openSync(temp, "wx", mode), target, temp, failure };
  } catch (error) {
    removeTemp(temp);
    throw failure(error);
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
 * into directly instead. Opening takes a few synchronous calls; the pieces are written
 * asynchronously.
 *
 * @param path the destination
 * @param mode file mode @default 0o644
 * @returns the open file
 * @throws {UsageError} naming the path when it cannot be written (exit 2)
 */
export function openAtomicFile(path: string, mode = 0o644): Promise<AtomicFile> {
  let opened: OpenedTarget;
  try {
    opened = openTarget(path, mode);
  } catch (error) {
    return Promise.reject(error);
  }
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
  return Promise.resolve({
    async write(text) {
      try {
        await new Promise<void>((done, fail) =>
          writeFd(fd, text, (error) => error ? fail(error) : done())
        );
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
  });
}

/**
 * Writes a file atomically: a temporary file beside it, then a rename.
 *
 * @param path the destination
 * @param text the content
 * @param mode file mode @default 0o644
 * @throws {UsageError} naming the path when it cannot be written (exit 2)
 */
export function writeFileAtomic(path: string, text: string, mode = 0o644): Promise<void> {
  try {
    writeFileAtomicNow(path, text, mode);
    return Promise.resolve();
  } catch (error) {
    return Promise.reject(error);
  }
}

/**
 * {@link writeFileAtomic} with synchronous calls, step for step what {@link openAtomicFile},
 * `write` and `commit` do: one whole text written by a short command (a snapshot, a report) in a
 * few system calls, without loading `node:fs/promises` or a thread-pool hop per step.
 */
function writeFileAtomicNow(path: string, text: string, mode: number): void {
  const opened = openTarget(path, mode);
  const { temp } = opened;
  writeAndClose(opened.fd, text, opened.failure, () => {
    if (temp !== undefined) removeTemp(temp);
  });
  publish(opened);
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
    try {
      closeSync(fd);
    } catch {
      // the write has failed either way
    }
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
