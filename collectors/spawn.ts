/**
 * Starting a process with its stdout and stderr piped to this one, two ways behind one shape:
 * `node:child_process`, and Node's own process and pipe handles without it.
 *
 * `node:child_process` loads `net`, `dgram` and the stream modules and makes a `net.Socket` per
 * pipe: on a node agent that only runs `nvidia-smi` that was about 7 ms of CPU and 3 MiB of peak
 * RSS of an agent run (measured in plain Node: requiring it alone +6.6 ms and +2.8 MiB; a spawn
 * that reads 200 KB through it, 9 ms and 3 MiB more than the same through the handles). Node
 * itself builds `child_process` on `process_wrap` (a process handle with an exit callback) and
 * `pipe_wrap` (a pipe handle whose reads arrive through `stream_wrap`'s shared state), which
 * `process.binding()` gives to user code. Their calling conventions are Node's internals: they
 * changed between Node releases (`spawn` took one options object before Node 24, eight
 * arguments now), and a wrong call is an abort, not an exception. So the handles are used only
 * under the Node major this was written against, {@link BINDING_NODE_MAJOR} (the single
 * executable's pinned base; `spawn_test.ts` runs them there and fails when they are not used);
 * anything else, Deno included, uses `node:child_process`.
 *
 * @module
 */
import { spawn } from "node:child_process";
import process from "node:process";

/** What a piped child reports, each at most once except the output. */
export interface PipedEvents {
  /** A chunk of its stdout. */
  stdout(chunk: Uint8Array): void;
  /** A chunk of its stderr. */
  stderr(chunk: Uint8Array): void;
  /** It could not be started (the error carries the errno `code`, e.g. `EACCES`). */
  error(error: Error): void;
  /** It ended; its pipes may still be open (a grandchild holding them). */
  exit(): void;
  /** It ended and both pipes are closed: its exit code, or the signal that ended it. */
  close(code: number | null, signal: string | null): void;
}

/** A started child. */
export interface PipedChild {
  /** Its process id (undefined when it did not start). */
  readonly pid: number | undefined;
  /** Sends it a signal. */
  kill(signal: "SIGKILL"): void;
  /** Stops reading its pipes, so `close` comes once it has ended. */
  closePipes(): void;
}

/**
 * Starts `executable` with `args`, stdin closed, stdout and stderr piped, in a process group and
 * session of its own (so a timeout can kill the whole tree), with this process's environment.
 */
export type PipedSpawner = (
  executable: string,
  args: readonly string[],
  events: PipedEvents,
) => PipedChild;

/**
 * The spawner over `node:child_process`.
 *
 * @param executable the program's path
 * @param args its arguments
 * @param events what it reports
 * @returns the child
 */
export function childProcessSpawner(
  executable: string,
  args: readonly string[],
  events: PipedEvents,
): PipedChild {
  const child = spawn(executable, [...args], { stdio: ["ignore", "pipe", "pipe"], detached: true });
  child.stdout.on("data", (chunk: Uint8Array) => events.stdout(chunk));
  child.stderr.on("data", (chunk: Uint8Array) => events.stderr(chunk));
  child.on("error", (error) => events.error(error));
  child.on("exit", () => events.exit());
  child.on("close", (code, signal) => events.close(code, signal));
  return {
    get pid() {
      return child.pid;
    },
    kill: (signal) => void child.kill(signal),
    closePipes: () => {
      child.stdout.destroy();
      child.stderr.destroy();
    },
  };
}

/** The Node major whose process and pipe handles {@link bindingSpawner} knows how to call. */
export const BINDING_NODE_MAJOR = 24;

/** Node's `process_wrap`, `pipe_wrap` and `stream_wrap` bindings, as much as is used here. */
interface Bindings {
  Process: new () => ProcessHandle;
  processFlags: { kProcessFlagDetached: number };
  Pipe: new (type: number) => PipeHandle;
  pipeSocket: number;
  state: Int32Array;
  kReadBytesOrError: number;
  kArrayBufferOffset: number;
}

interface ProcessHandle {
  pid: number;
  onexit: (exitStatus: number, signal: string) => void;
  spawn(
    file: string,
    args: string[],
    cwd: string | undefined,
    envPairs: string[],
    stdio: object[],
    flags: number,
    uid: number | undefined,
    gid: number | undefined,
  ): number;
  kill(signal: number): number;
  close(): void;
}

interface PipeHandle {
  onread: (buffer: ArrayBuffer | undefined) => void;
  readStart(): number;
  close(callback?: () => void): void;
}

/** libuv's end of file, as a read reports it. */
const UV_EOF = -4095;

function nodeBindings(): Bindings | undefined {
  if ((globalThis as { Deno?: unknown }).Deno) return undefined;
  if (Number(process.versions.node?.split(".")[0]) !== BINDING_NODE_MAJOR) return undefined;
  const binding = (process as unknown as { binding?: (name: string) => unknown }).binding;
  if (typeof binding !== "function") return undefined;
  try {
    const processWrap = binding("process_wrap") as {
      Process: Bindings["Process"];
      constants: Bindings["processFlags"];
    };
    const pipeWrap = binding("pipe_wrap") as {
      Pipe: Bindings["Pipe"];
      constants: { SOCKET: number };
    };
    const streamWrap = binding("stream_wrap") as {
      streamBaseState: Int32Array;
      kReadBytesOrError: number;
      kArrayBufferOffset: number;
    };
    if (
      typeof processWrap.Process !== "function" || typeof pipeWrap.Pipe !== "function" ||
      !(streamWrap.streamBaseState instanceof Int32Array) ||
      typeof processWrap.constants?.kProcessFlagDetached !== "number"
    ) return undefined;
    return {
      Process: processWrap.Process,
      processFlags: processWrap.constants,
      Pipe: pipeWrap.Pipe,
      pipeSocket: pipeWrap.constants.SOCKET,
      state: streamWrap.streamBaseState,
      kReadBytesOrError: streamWrap.kReadBytesOrError,
      kArrayBufferOffset: streamWrap.kArrayBufferOffset,
    };
  } catch {
    return undefined;
  }
}

/** A start failure as `node:child_process` names it (`spawn <file> EACCES`, with `code`). */
function spawnError(errno: number, executable: string): Error {
  const util = process.getBuiltinModule("node:util");
  const code = util.getSystemErrorName(errno);
  return Object.assign(new Error(`spawn ${executable} ${code}`), {
    errno,
    code,
    syscall: `spawn ${executable}`,
    path: executable,
  });
}

/**
 * The spawner over Node's own process and pipe handles, when this runtime is the Node major they
 * are known for ({@link BINDING_NODE_MAJOR}); undefined elsewhere.
 *
 * @returns the spawner, or undefined
 */
export function bindingSpawner(): PipedSpawner | undefined {
  const bindings = nodeBindings();
  if (!bindings) return undefined;
  const { Process, Pipe, state } = bindings;
  return (executable, args, events) => {
    const handle = new Process();
    const pipes = [new Pipe(bindings.pipeSocket), new Pipe(bindings.pipeSocket)];
    let open = pipes.length;
    let ended: { code: number | null; signal: string | null } | undefined;
    let closed = false;
    const finish = () => {
      if (closed || open > 0 || !ended) return;
      closed = true;
      events.close(ended.code, ended.signal);
    };
    const closePipe = (pipe: PipeHandle) => {
      if (!pipes.includes(pipe)) return;
      pipes.splice(pipes.indexOf(pipe), 1);
      pipe.close(() => {
        open--;
        finish();
      });
    };
    handle.onexit = (exitStatus, signal) => {
      ended = signal ? { code: null, signal } : { code: exitStatus, signal: null };
      handle.close();
      events.exit();
      finish();
    };
    const envPairs: string[] = [];
    for (const [key, value] of Object.entries(process.env)) {
      if (value !== undefined) envPairs.push(`${key}=${value}`);
    }
    const [out, err] = pipes as [PipeHandle, PipeHandle];
    const errno = handle.spawn(
      executable,
      [executable, ...args],
      undefined,
      envPairs,
      [{ type: "ignore" }, { type: "pipe", handle: out }, { type: "pipe", handle: err }],
      bindings.processFlags.kProcessFlagDetached,
      undefined,
      undefined,
    );
    if (errno !== 0) {
      // As child_process: the error first, then close (once the pipes are closed).
      handle.close();
      ended = { code: null, signal: null };
      queueMicrotask(() => events.error(spawnError(errno, executable)));
      for (const pipe of [...pipes]) closePipe(pipe);
      return { pid: undefined, kill: () => {}, closePipes: () => {} };
    }
    for (const [pipe, deliver] of [[out, events.stdout], [err, events.stderr]] as const) {
      pipe.onread = (buffer) => {
        const read = state[bindings.kReadBytesOrError] ?? UV_EOF;
        if (read > 0 && buffer) {
          deliver(new Uint8Array(buffer, state[bindings.kArrayBufferOffset] ?? 0, read));
        } else if (read < 0) {
          // End of file, or a read error (the child's output ends there either way).
          closePipe(pipe);
        }
      };
      pipe.readStart();
    }
    const pid = handle.pid;
    return {
      pid,
      kill: () => {
        if (!ended) handle.kill(9);
      },
      closePipes: () => {
        for (const pipe of [...pipes]) closePipe(pipe);
      },
    };
  };
}

let chosen: PipedSpawner | undefined;

/**
 * The spawner this runtime uses: {@link bindingSpawner} where it can, else
 * {@link childProcessSpawner}.
 *
 * @returns the spawner
 */
export function pipedSpawner(): PipedSpawner {
  chosen ??= bindingSpawner() ?? childProcessSpawner;
  return chosen;
}
