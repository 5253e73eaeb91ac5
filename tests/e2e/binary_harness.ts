/**
 * Helpers for the single-binary smoke test: find (or build) `dist/aicr`, copy it alone into an
 * empty directory, and run it there with an empty environment, optionally as uid/gid 65534,
 * without a network (`unshare -n`) and from a read-only bind mount (`unshare -m`).
 *
 * ```ts ignore
 * const bin = await ensureBinary();
 * await using box = await isolatedCopy(bin);
 * const ran = await runAicr(box.bin, ["version"], { cwd: box.dir, user: "nobody", readOnly: box.dir });
 * ```
 *
 * @module
 */
import assert from "node:assert/strict";
import { chmod, copyFile, mkdtemp, readdir, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import process from "node:process";
import { fileURLToPath } from "node:url";
import { defaultOut } from "../../scripts/build.ts";
import { type Arch, commandLine, type Emulator, hostArch } from "../../scripts/node_base.ts";

/** The repository root. */
export const REPO_ROOT: string = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..");

/** The version every build of this tree reports: `package.json`'s, without a leading `v`. */
export const PACKAGE_VERSION: string = (JSON.parse(
  Deno.readTextFileSync(join(REPO_ROOT, "package.json")),
) as { version: string }).version;

/** The uid and gid of `nobody`, which the restricted agent pod runs as. */
export const NOBODY = 65534;

const SETPRIV = "/usr/bin/setpriv";
const UNSHARE = "/usr/bin/unshare";
const MOUNT = "/bin/mount";
const SH = "/bin/sh";

/** Whether this process can switch users and make namespaces (root with the tools installed). */
export function canIsolate(): boolean {
  const isRoot = process.getuid?.() === 0;
  return isRoot && [SETPRIV, UNSHARE, MOUNT, SH].every((path) => exists(path));
}

function exists(path: string): boolean {
  try {
    Deno.statSync(path);
    return true;
  } catch {
    return false;
  }
}

const SOURCE_SKIP = new Set(["node_modules", "dist", "tests", "bench", "coverage", ".git"]);

async function newestSource(dir: string): Promise<number> {
  let newest = 0;
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    if (entry.name.startsWith(".") || SOURCE_SKIP.has(entry.name)) continue;
    const path = join(dir, entry.name);
    if (entry.isDirectory()) newest = Math.max(newest, await newestSource(path));
    else if (/\.(ts|json)$/.test(entry.name) && !entry.name.endsWith("_test.ts")) {
      newest = Math.max(newest, (await stat(path)).mtimeMs);
    }
  }
  return newest;
}

/**
 * The binary under test: `$AICR_BIN` as is, else `<repo>/dist/aicr`, built first by
 * `scripts/build.ts` when it is missing or older than a source file. For another architecture
 * than this host's: `$AICR_BIN_LINUX_ARM64` (or `_AMD64`), else `dist/aicr-linux-<arch>`, built
 * the same way (`--arch`).
 *
 * @param arch the binary's architecture. @default this host's
 * @returns the binary's absolute path
 * @throws {Error} when the build fails
 */
export async function ensureBinary(arch: Arch = hostArch()): Promise<string> {
  const native = arch === hostArch();
  const given = Deno.env.get(native ? "AICR_BIN" : `AICR_BIN_LINUX_${arch.toUpperCase()}`);
  if (given) return resolve(given);
  const bin = defaultOut(arch);
  const built = await stat(bin).then((s) => s.mtimeMs, () => 0);
  if (built > 0 && built >= await newestSource(REPO_ROOT)) return bin;
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", join(REPO_ROOT, "scripts", "build.ts"), "--arch", arch],
    cwd: REPO_ROOT,
    stdout: "piped",
    stderr: "piped",
  }).output();
  if (!out.success) {
    const text = new TextDecoder().decode(out.stderr) + new TextDecoder().decode(out.stdout);
    throw new Error(`Cannot test the binary as building '${bin}' failed: ${text.trim()}`);
  }
  return bin;
}

/** An empty directory holding only a copy of the binary; removed on dispose. */
export interface IsolatedCopy extends AsyncDisposable {
  /** The directory, mode 0755, owned by root. */
  dir: string;
  /** `<dir>/aicr`. */
  bin: string;
  /** A second empty directory owned by 65534, for verbs that write into the working directory. */
  writable: string;
}

/**
 * Copies the binary alone into a fresh empty directory.
 *
 * @param binary the binary to copy
 * @returns the directory and the copy
 */
export async function isolatedCopy(binary: string): Promise<IsolatedCopy> {
  const dir = await mkdtemp(join(tmpdir(), "aicr-binary-"));
  await chmod(dir, 0o755);
  const bin = join(dir, "aicr");
  await copyFile(binary, bin);
  await chmod(bin, 0o755);
  const writable = await mkdtemp(join(tmpdir(), "aicr-binary-out-"));
  await chmod(writable, 0o755);
  if (process.getuid?.() === 0) await Deno.chown(writable, NOBODY, NOBODY);
  return {
    dir,
    bin,
    writable,
    async [Symbol.asyncDispose]() {
      await rm(dir, { recursive: true, force: true });
      await rm(writable, { recursive: true, force: true });
    },
  };
}

/** How to run the binary. */
export interface RunOptions {
  /** Working directory. */
  cwd: string;
  /** `root` (this process's user) or `nobody` (uid/gid 65534, no groups). @default "root" */
  user?: "root" | "nobody";
  /** A directory (the binary's) to bind-mount read-only first, in a private mount namespace. */
  readOnly?: string;
  /** Run in a new network namespace: only a downed loopback, no route anywhere. */
  noNetwork?: boolean;
  /** Run the binary (another architecture's) under this emulator (qemu-user). */
  emulator?: Emulator | undefined;
}

/** One finished run. */
export interface Ran {
  code: number;
  stdout: string;
  stderr: string;
  /** The command line actually spawned, for failure messages. */
  argv: string[];
}

/**
 * Runs the binary with an EMPTY environment (no PATH, no HOME) in `cwd`.
 *
 * @param bin the binary
 * @param args its arguments
 * @param options working directory, user, read-only and network isolation
 * @returns exit code and output
 */
export async function runAicr(
  bin: string,
  args: readonly string[],
  options: RunOptions,
): Promise<Ran> {
  const { cwd, user = "root", readOnly, noNetwork = false, emulator } = options;
  const line = commandLine(emulator, bin, args);
  let argv: string[] = [line.command, ...line.args];
  if (user === "nobody") {
    argv = [SETPRIV, `--reuid=${NOBODY}`, `--regid=${NOBODY}`, "--clear-groups", ...argv];
  }
  if (readOnly || noNetwork) {
    const flags = [...(readOnly ? ["-m"] : []), ...(noNetwork ? ["-n"] : [])];
    // $1 = the read-only directory, $2 = the working directory, then the command line. In the
    // new mount namespace the directory is bind-mounted onto itself and remounted read-only.
    const remount = `${MOUNT} --bind "$1" "$1" && ${MOUNT} -o remount,bind,ro "$1" && `;
    const script = `${readOnly ? remount : ""}cd "$2" && shift 2 && exec "$@"`;
    argv = [UNSHARE, ...flags, SH, "-c", script, "sh", readOnly ?? "/", cwd, ...argv];
  }
  const [command, ...rest] = argv as [string, ...string[]];
  const out = await new Deno.Command(command, {
    args: rest,
    cwd,
    env: {},
    clearEnv: true,
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).output();
  const decoder = new TextDecoder();
  return {
    code: out.code,
    stdout: decoder.decode(out.stdout),
    stderr: decoder.decode(out.stderr),
    argv,
  };
}

/**
 * Describes a run for an assertion message.
 *
 * @param ran the run
 * @returns its command line, exit code and output
 */
export function describeRun(ran: Ran): string {
  return `${ran.argv.join(" ")}\nexit ${ran.code}\nstdout:\n${
    ran.stdout.slice(0, 2000)
  }\nstderr:\n${ran.stderr.slice(0, 2000)}`;
}

/**
 * A port on 127.0.0.1 that was free a moment ago.
 *
 * @returns the port number
 */
export function freePort(): number {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const { port } = listener.addr as Deno.NetAddr;
  listener.close();
  return port;
}

/**
 * Starts the binary in the background with an empty environment, stderr piped.
 *
 * @param bin the binary
 * @param args its arguments
 * @param cwd the working directory
 * @param emulator runs the binary (another architecture's) under it
 * @returns the child process
 */
export function spawnAicr(
  bin: string,
  args: readonly string[],
  cwd: string,
  emulator?: Emulator,
): Deno.ChildProcess {
  const line = commandLine(emulator, bin, args);
  return new Deno.Command(line.command, {
    args: line.args,
    cwd,
    env: {},
    clearEnv: true,
    stdin: "null",
    stdout: "null",
    stderr: "piped",
  }).spawn();
}

/**
 * Asserts stderr holds only aicr's own lines: nothing the runtime prints by itself (Node's
 * `(node:PID) ExperimentalWarning: ...` and its `--trace-warnings` hint).
 *
 * @param stderr what the process wrote to stderr
 * @param what whose stderr, for the failure message
 */
export function assertQuiet(stderr: string, what: string): void {
  for (const line of stderr.split("\n")) {
    assert.doesNotMatch(line, /^\(node:\d+\)|Warning: |--trace-warnings/, `${what}: ${stderr}`);
  }
}
