/**
 * The only module that knows which runtime runs aicr (Deno in development,
 * `deno compile` or a Node.js single executable in release). Everything else uses
 * web APIs and `node:` modules.
 *
 * @module
 */
import { readdirSync, readFileSync } from "node:fs";
import process from "node:process";

interface DenoLike {
  args: string[];
  version: { deno: string };
}

function denoGlobal(): DenoLike | undefined {
  return (globalThis as { Deno?: DenoLike }).Deno;
}

/**
 * The command-line arguments after the program (and script) name.
 *
 * @returns the arguments
 */
export function commandArgs(): string[] {
  const deno = denoGlobal();
  if (deno) return [...deno.args];
  // A Node single executable has argv = [execPath, argv0 as typed, ...args] (verified with
  // Node 24 SEA); plain node has [node, script, ...args].
  return process.argv.slice(2);
}

/**
 * Names the runtime, e.g. `deno 2.9.6` or `node 24.22.3`.
 *
 * @returns the runtime name and version
 */
export function runtimeName(): string {
  const deno = denoGlobal();
  return deno ? `deno ${deno.version.deno}` : `node ${process.versions.node}`;
}

/**
 * The platform this process runs on, as OCI and Kubernetes name it: `linux/amd64`,
 * `linux/arm64` (an arm64 binary under qemu-user says arm64).
 *
 * @returns `<os>/<arch>`
 */
export function platformName(): string {
  const arch = process.arch === "x64" ? "amd64" : process.arch;
  return `${process.platform}/${arch}`;
}

/**
 * What this process uses, for the `process_*` metrics: CPU time and resident memory from
 * `node:process`, open and maximum file descriptors from `/proc/self` (left out elsewhere).
 *
 * @returns CPU seconds, resident bytes, open and maximum fds, start time (seconds)
 */
export function processStats(): {
  cpuSeconds: number;
  residentBytes: number;
  openFds?: number;
  maxFds?: number;
  startTimeSeconds: number;
} {
  const cpu = process.cpuUsage();
  let openFds: number | undefined;
  let maxFds: number | undefined;
  try {
    openFds = readdirSync("/proc/self/fd").length;
    const limits = readFileSync("/proc/self/limits", "utf8");
    const soft = /^Max open files\s+(\d+)/m.exec(limits)?.[1];
    if (soft) maxFds = Number(soft);
  } catch {
    // Not Linux: the fd metrics are left out.
  }
  return {
    cpuSeconds: (cpu.user + cpu.system) / 1e6,
    residentBytes: process.memoryUsage.rss(),
    ...(openFds !== undefined ? { openFds } : {}),
    ...(maxFds !== undefined ? { maxFds } : {}),
    startTimeSeconds: Math.round((performance.timeOrigin) / 10) / 100,
  };
}

/**
 * V8 flags of the long-running daemon (`aicr daemon`): no compilers past the interpreter
 * (TurboFan, Maglev, Sparkplug). In the Node single executable a compiler's machine code is pages
 * of the binary a process touches only when it compiles something, and its code stays in the
 * heap: the daemon's steady RSS after 100 cached requests went 76.7 -> 69.6 MiB without the
 * optimising two (`bench/upstream_bench.ts`), and 64.0 -> 63.2 MiB over HTTPS without Sparkplug
 * (`bench/daemon_bench.ts`). Its CPU per collection is unchanged (its time goes to `nvidia-smi`
 * and I/O, not to hot JavaScript); a cached request costs about 17% more CPU without Sparkplug
 * (about 0.1 ms). Every other verb keeps the compilers: the flags are set in the daemon's process
 * only, by the executable's loader when the verb is the first argument (as the DaemonSet runs it,
 * `scripts/build.ts`) and again by the command itself.
 */
export const DAEMON_V8_FLAGS: readonly string[] = [
  "--no-turbofan",
  "--no-maglev",
  "--no-sparkplug",
];

/**
 * Applies {@link DAEMON_V8_FLAGS} under Node (the release runtime). Under Deno (development, and
 * the test process, which runs the daemon in-process beside everything else) it does nothing.
 *
 * @returns whether the flags were applied
 */
export function useDaemonV8Flags(): boolean {
  if (denoGlobal()) return false;
  // Loaded here, not imported: node:v8 pulls in Node's heap and stream modules, which no other
  // verb needs at start.
  process.getBuiltinModule("node:v8").setFlagsFromString(DAEMON_V8_FLAGS.join(" "));
  return true;
}

interface SeaModule {
  isSea(): boolean;
  getRawAsset(key: string): ArrayBuffer;
}

function seaModule(): SeaModule | undefined {
  if (denoGlobal()) return undefined;
  const getBuiltin = (process as { getBuiltinModule?: (id: string) => unknown }).getBuiltinModule;
  try {
    const sea = getBuiltin?.("node:sea") as SeaModule | undefined;
    return sea?.isSea() ? sea : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The path of this executable when it is aicr's Node.js single executable (what `aicr image`
 * puts into the image by default), else undefined (run from source by Deno or Node).
 *
 * @returns the executable's path
 */
export function singleExecutablePath(): string | undefined {
  return seaModule() ? process.execPath : undefined;
}

/**
 * An asset the build sealed into this single executable (a read-only view of its bytes).
 *
 * @param name the asset's key
 * @returns the bytes, or undefined when this is no single executable or it has no such asset
 */
export function singleExecutableAsset(name: string): Uint8Array | undefined {
  const sea = seaModule();
  if (!sea) return undefined;
  try {
    return new Uint8Array(sea.getRawAsset(name));
  } catch {
    return undefined;
  }
}
