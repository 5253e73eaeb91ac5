/**
 * Real host adapters: a {@link HostReader} over `node:fs` with an optional root prefix,
 * and a {@link CommandRunner} over `node:child_process` that resolves commands on PATH.
 *
 * @module
 */
import {
  accessSync,
  closeSync,
  constants as fsConstants,
  lstatSync,
  openSync,
  readdirSync,
  readFileSync,
  readSync,
} from "node:fs";
import path from "node:path";
import process from "node:process";
import {
  NotFoundError,
  PermissionError,
  TimeoutError,
  ToolError,
  UnavailableError,
} from "../errors.ts";
import { concatBytes } from "../io.ts";
import { Buffer } from "node:buffer";
import { decodeUtf8 } from "./status.ts";
import { pipedSpawner } from "./spawn.ts";
import type { PipedSpawner } from "./spawn.ts";
import type { CommandRunner, DirEntry, HostReader, RunOptions, RunResult } from "./types.ts";

/** Default read bound: upstream's file parser rejects files above 1 MiB. */
export const DEFAULT_MAX_FILE_BYTES = 1 << 20;
/** Default bound on a command's stdout. */
export const DEFAULT_MAX_OUTPUT_BYTES = 64 << 20;
const MAX_STDERR_CHARS = 4096;

/** A file is larger than the bound its reader set. */
export class FileTooLargeError extends ToolError {
  /**
   * Creates the error.
   *
   * @param message what was too large
   */
  constructor(message: string) {
    super(message, "usage", 413);
    this.name = "FileTooLargeError";
  }
}

/**
 * Turns a `node:fs` or `node:child_process` error into a ToolError.
 *
 * @param error the thrown value
 * @param action what was attempted, e.g. `read '/proc/cmdline'`
 * @returns a NotFoundError, PermissionError or ToolError keeping `cause`
 */
export function toToolError(error: unknown, action: string): ToolError {
  if (error instanceof ToolError) return error;
  const code = (error as { code?: string } | undefined)?.code;
  const detail = error instanceof Error ? error.message : String(error);
  if (code === "ENOENT" || code === "ENOTDIR") {
    return new NotFoundError(`Cannot ${action}: it does not exist`, { cause: error });
  }
  if (code === "EACCES" || code === "EPERM") {
    return new PermissionError(`Cannot ${action}: permission denied`, { cause: error });
  }
  if (code === "ECONNREFUSED" || code === "ECONNRESET" || code === "EPIPE") {
    return new UnavailableError(`Cannot ${action}: ${detail}`, { cause: error });
  }
  return new ToolError(`Cannot ${action}: ${detail}`, "internal", 500, { cause: error });
}

/**
 * One scratch buffer every synchronous read fills before its bytes are copied out: a fresh 64 KiB
 * buffer per file (most procfs/sysfs files hold a few bytes) made the sysctl walk's ~1,300 reads
 * allocate about 80 MiB, which cost time in the garbage collector and raised the peak RSS.
 */
const SCRATCH = new Uint8Array(64 * 1024);

/**
 * Reads a file up to `maxBytes`, in chunks until EOF (procfs reports size 0).
 *
 * @param full the path to open
 * @param hostPath the path as the caller named it (for messages)
 * @param maxBytes the bound
 * @returns the bytes (a copy sized to the file, never a view of the scratch buffer)
 * @throws {FileTooLargeError} when the file holds more than `maxBytes`
 */
function readBounded(full: string, hostPath: string, maxBytes: number): Uint8Array {
  const fd = openSync(full, "r");
  try {
    const chunks: Uint8Array[] = [];
    let total = 0;
    while (total <= maxBytes) {
      const want = Math.min(SCRATCH.length, maxBytes + 1 - total);
      const bytesRead = readSync(fd, SCRATCH, 0, want, null);
      if (bytesRead === 0) break;
      chunks.push(SCRATCH.slice(0, bytesRead));
      total += bytesRead;
    }
    if (total > maxBytes) {
      throw new FileTooLargeError(
        `Cannot read '${hostPath}': it is larger than the bound: current limit is ${maxBytes} bytes`,
      );
    }
    if (chunks.length === 1) return chunks[0] as Uint8Array;
    return concatBytes(chunks, total);
  } finally {
    closeSync(fd);
  }
}

/**
 * Reads a small text file in one call (open, read to the end, close and decode, all in the
 * runtime's native code): its UTF-8 text, or undefined when it cannot be read, is larger than
 * `maxBytes` or is not valid UTF-8. The one-call read replaces what cannot be decoded with U+FFFD,
 * so text holding U+FFFD (or a BOM) is read again byte for byte and decoded strictly.
 *
 * @param full the path to open
 * @param maxBytes the bound
 * @returns the text, or undefined
 */
function readSmallText(full: string, maxBytes: number): string | undefined {
  let text: string;
  try {
    text = readFileSync(full, "utf8");
  } catch {
    return undefined;
  }
  // Every UTF-16 code unit of decoded UTF-8 came from at least one byte.
  if (text.length > maxBytes) return undefined;
  if (text.includes("\ufffd") || text.charCodeAt(0) === 0xfeff) {
    try {
      return decodeUtf8(readBounded(full, full, maxBytes));
    } catch {
      return undefined;
    }
  }
  if (text.length * 3 > maxBytes && Buffer.byteLength(text, "utf8") > maxBytes) return undefined;
  return text;
}

/**
 * Creates a reader of host files under `root` (default `/`).
 *
 * @param options `root`: directory prepended to every absolute path
 * @returns the reader
 */
export function createHostReader(options: { root?: string } = {}): HostReader {
  const root = path.resolve(options.root ?? "/");
  function resolve(hostPath: string): string {
    if (!hostPath.startsWith("/")) {
      throw new TypeError(`Cannot resolve host path '${hostPath}': it is not absolute`);
    }
    return root === "/" ? hostPath : path.join(root, hostPath);
  }
  return {
    // Reads and listings are synchronous system calls behind the async interface: procfs and
    // sysfs answer from memory, and a promise-based open/read/close per file (a thread-pool hop
    // each) cost the sysctl walk's ~1,000 files most of the collection's time.
    readFile(hostPath: string, maxBytes = DEFAULT_MAX_FILE_BYTES): Promise<Uint8Array> {
      try {
        return Promise.resolve(readBounded(resolve(hostPath), hostPath, maxBytes));
      } catch (error) {
        return Promise.reject(toToolError(error, `read '${hostPath}'`));
      }
    },
    readDir(hostPath: string): Promise<DirEntry[]> {
      try {
        const entries = readdirSync(resolve(hostPath), { withFileTypes: true });
        return Promise.resolve(entries.map((entry) => ({
          name: entry.name,
          isFile: entry.isFile(),
          isDirectory: entry.isDirectory(),
          isSymlink: entry.isSymbolicLink(),
        })));
      } catch (error) {
        return Promise.reject(toToolError(error, `list '${hostPath}'`));
      }
    },
    readTexts(paths: readonly string[], maxBytes: number): Promise<(string | undefined)[]> {
      try {
        return Promise.resolve(paths.map((hostPath) => readSmallText(resolve(hostPath), maxBytes)));
      } catch (error) {
        return Promise.reject(error);
      }
    },
    exists(hostPath: string): Promise<boolean> {
      try {
        lstatSync(resolve(hostPath));
        return Promise.resolve(true);
      } catch {
        return Promise.resolve(false);
      }
    },
  };
}

/**
 * Finds an executable on a PATH string, with synchronous calls: a run starts its process before
 * the caller's next step (the GPU collector's nvidia-smi runs beside the OS collector's reads,
 * which would otherwise hold back a promise-based lookup until they are done).
 *
 * @param command a bare name or a path containing `/`
 * @param searchPath a `:`-separated PATH
 * @returns the absolute path, or undefined when not found
 */
export function findExecutable(command: string, searchPath: string): string | undefined {
  const candidates = command.includes("/")
    ? [path.resolve(command)]
    : searchPath.split(":").filter((dir) => dir !== "").map((dir) => path.join(dir, command));
  for (const candidate of candidates) {
    try {
      accessSync(candidate, fsConstants.X_OK);
    } catch {
      continue; // not here; try the next directory
    }
    let isDirectory = false;
    try {
      isDirectory = lstatSync(candidate).isDirectory();
    } catch {
      // gone since: taken as found, as before
    }
    if (isDirectory) continue;
    return candidate;
  }
  return undefined;
}

/**
 * Creates a runner of local processes.
 *
 * @param options `path`: the PATH to search (default: this process's PATH); `spawner`: how a
 * process is started (default: {@link pipedSpawner}, this runtime's)
 * @returns the runner
 */
export function createCommandRunner(
  options: { path?: string; spawner?: PipedSpawner } = {},
): CommandRunner {
  const searchPath = options.path ?? process.env.PATH ?? "/usr/local/bin:/usr/bin:/bin";
  const spawner = options.spawner ?? pipedSpawner();
  return {
    async run(command: string, args: string[], runOptions: RunOptions): Promise<RunResult> {
      const { timeoutMs, signal, maxOutputBytes = DEFAULT_MAX_OUTPUT_BYTES } = runOptions;
      const display = [command, ...args].join(" ");
      const executable = findExecutable(command, searchPath);
      if (executable === undefined) {
        // The PATH itself stays out of the message: it ends up in snapshots.
        throw new NotFoundError(`Cannot run '${command}': it is not on PATH`);
      }
      if (signal?.aborted) {
        throw new TimeoutError(`Cannot run '${display}': the collection was cancelled`);
      }
      return await runProcess(spawner, executable, args, {
        display,
        timeoutMs,
        maxOutputBytes,
        ...(signal ? { signal } : {}),
      });
    },
  };
}

/**
 * Runs a found executable in its own process group and collects its output: the whole group is
 * killed on timeout, cancellation or too much output.
 *
 * @returns exit code (128 + signal number when killed by a signal), stdout, stderr (bounded)
 */
function runProcess(
  spawner: PipedSpawner,
  executable: string,
  args: string[],
  options: { display: string; timeoutMs: number; maxOutputBytes: number; signal?: AbortSignal },
): Promise<RunResult> {
  const { display, timeoutMs, maxOutputBytes, signal } = options;
  return new Promise<RunResult>((resolve, reject) => {
    const chunks: Uint8Array[] = [];
    let size = 0;
    let stderr = "";
    const stderrText = new TextDecoder();
    let failure: ToolError | undefined;
    function stop(error: ToolError): void {
      if (failure === undefined) failure = error;
      try {
        if (child.pid !== undefined) process.kill(-child.pid, "SIGKILL");
      } catch {
        child.kill("SIGKILL");
      }
    }
    function onAbort(): void {
      stop(new TimeoutError(`Cannot run '${display}': the collection was cancelled`));
    }
    // Its own process group, so a timeout kills the whole tree (a wrapper script's
    // children would otherwise keep stdout open).
    const child = spawner(executable, args, {
      stdout: (chunk) => {
        size += chunk.length;
        if (size > maxOutputBytes) {
          stop(
            new ToolError(
              `Cannot run '${display}': its output is too large: current limit is ${maxOutputBytes} bytes`,
            ),
          );
          return;
        }
        chunks.push(chunk);
      },
      stderr: (chunk) => {
        if (stderr.length < MAX_STDERR_CHARS) {
          const text = stderrText.decode(chunk, { stream: true });
          stderr += text.slice(0, MAX_STDERR_CHARS - stderr.length);
        }
      },
      error: (error) => {
        if (failure === undefined) failure = toToolError(error, `run '${display}'`);
      },
      // Once killed, do not wait for grandchildren to close the pipes.
      exit: () => {
        if (failure !== undefined) child.closePipes();
      },
      close: (code, killSignal) => {
        clearTimeout(timer);
        signal?.removeEventListener("abort", onAbort);
        if (failure !== undefined) {
          reject(failure);
          return;
        }
        const out = concatBytes(chunks, size);
        const exitCode = code ?? (killSignal ? 128 + signalNumber(killSignal) : 1);
        resolve({ exitCode, stdout: out, stderr });
      },
    });
    const timer = setTimeout(
      () =>
        stop(
          new TimeoutError(`Cannot run '${display}': it did not finish within ${timeoutMs} ms`),
        ),
      timeoutMs,
    );
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

function signalNumber(name: string): number {
  const table: Record<string, number> = { SIGHUP: 1, SIGINT: 2, SIGKILL: 9, SIGTERM: 15 };
  return table[name] ?? 0;
}
