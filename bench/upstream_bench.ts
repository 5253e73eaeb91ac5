/**
 * aicr beside the upstream Go implementation (NVIDIA/aicr), measured side by side in one run,
 * runs alternating so both see the same machine load (figures and ratios only, no asserts):
 *
 * 1. the agent on a fake 8x H100 node (a fake `nvidia-smi` first on PATH printing
 *    `tests/fixtures/nvidia-smi-q-x.h100.xml`): upstream `AICR_AGENT_MODE=true aicr snapshot -o f`
 *    beside `aicr agent -o f`, wall time, CPU and peak RSS (GNU time's `ru_maxrss`);
 * 2. `version` cold start and peak RSS (upstream `aicr --version`, ours `aicr version`), with the
 *    floor: an empty script sealed as a Node single executable on the same base;
 *    With `--cold`, both again with each binary dropped from the page cache before its run (as a
 *    node whose cache no longer holds the image), beside the floor dropped alike;
 * 3. `aicr snapshot` end to end on the local cluster (the kubelet stand-in maps the image
 *    `localhost/aicr-upstream` to the upstream binary), both to stdout on the same H100 node: the
 *    total, the moment the snapshot reached stdout, and our phases (start, gate, RBAC, Job, agent,
 *    read, deliver, cleanup) from the arrival times of our `--debug` lines in extra runs;
 * 4. the image layer: each binary gzip-compressed, beside the floor;
 * 5. with `--realnode`, `aicr snapshot` end to end on the real-kubelet lane (`tests/realnode/`)
 *    beside upstream's, whose image is built here offline from the upstream binary.
 *
 * Every binary is staged as a container runtime unpacks a layer (`_stage.ts`: 64 KiB writes).
 *
 * The upstream binary is never part of this repository: pass it (`AICR_UPSTREAM_BIN`) or a
 * checkout of its source to build offline (`AICR_UPSTREAM_SRC`, everything but `demos/`; built with
 * `go build -mod=vendor` into `bench/.out/`). Without either, it says how to get one and exits 1.
 *
 * ```sh
 * deno task build
 * AICR_UPSTREAM_BIN=/work/upstream-bin/aicr deno task bench:upstream
 * AICR_UPSTREAM_SRC=/work/upstream-aicr deno task bench:upstream --runs=15 --agent-runs=21
 * deno task bench:upstream --no-cluster          # local rows only
 * deno task bench:upstream --no-local            # cluster rows only
 * deno task bench:upstream --no-local --realnode # also on the real-kubelet lane (root, containerd)
 * deno task bench:upstream --no-cluster --cold   # also with each binary dropped from the page cache
 * deno task bench:upstream --no-local --busy     # cluster rows with one core kept busy
 * ```
 *
 * @module
 */
import { spawn } from "node:child_process";
import { createHash } from "node:crypto";
import {
  closeSync,
  existsSync,
  fdatasyncSync,
  openSync,
  readdirSync,
  readFileSync,
  statSync,
} from "node:fs";
import { mkdir, mkdtemp, rename, rm, writeFile } from "node:fs/promises";
import { cpus, loadavg, tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import process from "node:process";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { gzipSync } from "node:zlib";
import { sealNodeSea } from "../scripts/build.ts";
import { DAEMON_RSS_GOAL_MIB, fakeH100Path, procFigures, startBenchDaemon } from "./_daemon_rss.ts";
import { stage } from "./_stage.ts";
import { imageRepository } from "../tests/kubelet/images.ts";

const REPO_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const OUT_DIR = join(REPO_ROOT, "bench", ".out");
const GNU_TIME = "/usr/bin/time";
/** The image repository the kubelet stand-in maps to the upstream binary. */
export const UPSTREAM_IMAGE = "localhost/aicr-upstream:v0.11.1";
const GPU_SELECTOR = "nvidia.com/gpu.present=true";

/** Goals of issue #30 (#13's before them), as ratios of ours to upstream's (lower is better). */
export const GOALS = {
  agentWall: 1.25,
  agentRss: 1.25,
  snapshotTotal: 0.7,
  snapshotDelivered: 0.8,
  version: 1.5,
} as const;

const HOW_TO_GET_UPSTREAM = `Cannot compare with upstream as no upstream aicr binary was given.
Get one (nothing of it is committed here):
  1. a checkout of NVIDIA/aicr (v0.11.1) without demos/, e.g.
       git clone --no-checkout <NVIDIA/aicr> /work/upstream-src && cd /work/upstream-src
       git archive HEAD -- . ':(exclude)demos' | tar -x -C /work/upstream-aicr
  2. either let this bench build it offline from its vendor/ folder:
       AICR_UPSTREAM_SRC=/work/upstream-aicr deno task bench:upstream
     or build it yourself and pass the binary:
       (cd /work/upstream-aicr && GOFLAGS=-mod=vendor GOPROXY=off go build -mod=vendor -o /work/upstream-bin/aicr ./cmd/aicr)
       AICR_UPSTREAM_BIN=/work/upstream-bin/aicr deno task bench:upstream`;

function say(line: string): void {
  process.stdout.write(line + "\n");
}

/**
 * The median of some numbers.
 *
 * @param values the numbers
 * @returns their median (NaN when empty)
 */
export function median(values: readonly number[]): number {
  if (values.length === 0) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

/** One finished child, with when each output line arrived. */
interface Ran {
  code: number | null;
  millis: number;
  stdout: string;
  stderr: string;
  /** Milliseconds after spawn at which the last stdout chunk arrived (NaN: none). */
  lastStdoutMs: number;
  /** Each stderr line with its arrival time after spawn. */
  stderrLines: { ms: number; line: string }[];
}

function runTimed(
  command: string,
  args: readonly string[],
  options: { cwd?: string; env: Record<string, string> },
): Promise<Ran> {
  return new Promise((resolvePromise, reject) => {
    const started = performance.now();
    const child = spawn(command, args, {
      cwd: options.cwd ?? REPO_ROOT,
      env: options.env,
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    let partial = "";
    let lastStdoutMs = NaN;
    const stderrLines: Ran["stderrLines"] = [];
    child.stdout.setEncoding("utf8").on("data", (chunk: string) => {
      lastStdoutMs = performance.now() - started;
      stdout += chunk;
    });
    child.stderr.setEncoding("utf8").on("data", (chunk: string) => {
      const ms = performance.now() - started;
      stderr += chunk;
      const lines = (partial + chunk).split("\n");
      partial = lines.pop() ?? "";
      for (const line of lines) stderrLines.push({ ms, line });
    });
    child.on("error", reject);
    child.on("exit", (code) => {
      const millis = performance.now() - started;
      child.on(
        "close",
        () => resolvePromise({ code, millis, stdout, stderr, lastStdoutMs, stderrLines }),
      );
    });
  });
}

/** One measured process: wall, CPU and peak RSS. */
interface Measured {
  wallMs: number;
  cpuMs: number;
  rssMiB: number;
}

async function measure(
  binary: string,
  args: readonly string[],
  env: Record<string, string>,
  cwd: string,
): Promise<Measured> {
  const ran = await runTimed(
    GNU_TIME,
    ["-f", "AICR_BENCH %M %U %S", binary, ...args],
    { cwd, env },
  );
  const match = /AICR_BENCH (\d+) ([\d.]+) ([\d.]+)/.exec(ran.stderr);
  if (ran.code !== 0 || !match) {
    throw new Error(
      `Cannot measure '${binary} ${args.join(" ")}': exit ${ran.code}\n${ran.stderr.slice(-2000)}`,
    );
  }
  return {
    wallMs: ran.millis,
    cpuMs: (Number(match[2]) + Number(match[3])) * 1000,
    rssMiB: Number(match[1]) / 1024,
  };
}

/** Folders of the checkout that are not part of the binary. */
const NOT_BUILT = new Set(["node_modules", "tests", "bench", "dist", "docs"]);

/**
 * The newest production source newer than a built binary (a stale `dist/aicr` measures
 * another tree), or undefined when the binary is newer than every `.ts` file that goes into it.
 */
function sourcesNewerThan(binary: string): string | undefined {
  const built = statSync(binary).mtimeMs;
  const walk = (dir: string, top: boolean): string | undefined => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      if (entry.name.startsWith(".") || (top && NOT_BUILT.has(entry.name))) continue;
      const path = join(dir, entry.name);
      if (entry.isDirectory()) {
        const found = walk(path, false);
        if (found) return found;
      } else if (
        entry.name.endsWith(".ts") && !entry.name.endsWith("_test.ts") &&
        statSync(path).mtimeMs > built
      ) return path;
    }
    return undefined;
  };
  return walk(REPO_ROOT, true);
}

/** Resolves the upstream binary from the environment, building it from source when asked. */
async function upstreamBinary(env: Record<string, string | undefined>): Promise<string> {
  const bin = env.AICR_UPSTREAM_BIN;
  if (bin) {
    if (!existsSync(bin)) {
      throw new Error(
        `Cannot use AICR_UPSTREAM_BIN: '${bin}' does not exist\n${HOW_TO_GET_UPSTREAM}`,
      );
    }
    return resolve(bin);
  }
  const src = env.AICR_UPSTREAM_SRC;
  if (!src) throw new Error(HOW_TO_GET_UPSTREAM);
  if (!existsSync(join(src, "go.mod")) || !existsSync(join(src, "vendor"))) {
    throw new Error(
      `Cannot build upstream from AICR_UPSTREAM_SRC='${src}': no go.mod and vendor/ there\n${HOW_TO_GET_UPSTREAM}`,
    );
  }
  const tag = createHash("sha256").update(resolve(src)).digest("hex").slice(0, 12);
  const out = join(OUT_DIR, `upstream-aicr-${tag}`);
  if (existsSync(out)) return out;
  say(`building upstream from ${src} (go build -mod=vendor, offline; minutes on a busy machine)`);
  await mkdir(OUT_DIR, { recursive: true });
  const ran = await runTimed("go", ["build", "-mod=vendor", "-o", `${out}.partial`, "./cmd/aicr"], {
    cwd: src,
    env: { ...(process.env as Record<string, string>), GOFLAGS: "-mod=vendor", GOPROXY: "off" },
  });
  if (ran.code !== 0) {
    throw new Error(
      `Cannot build upstream in '${src}': go build exited ${ran.code}\n${ran.stderr}`,
    );
  }
  await rename(`${out}.partial`, out);
  return out;
}

function ratio(ours: number, theirs: number): string {
  return `${(ours / theirs).toFixed(2)}x`;
}

function verdict(ours: number, theirs: number, goal: number): string {
  return ours / theirs <= goal ? `ok (goal <= ${goal}x)` : `OVER (goal <= ${goal}x)`;
}

/** Renders rows as a Markdown table. */
function table(header: string[], rows: string[][]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? "").length)));
  const line = (cells: string[]) =>
    `| ${cells.map((c, i) => (c ?? "").padEnd(widths[i]!)).join(" | ")} |`;
  return [
    line(header),
    `|${widths.map((w) => "-".repeat(w + 2)).join("|")}|`,
    ...rows.map(line),
  ].join("\n");
}

function fmtMs(ms: number): string {
  return ms >= 1000 ? `${(ms / 1000).toFixed(2)} s` : `${ms.toFixed(0)} ms`;
}

/**
 * Drops a file's pages from the page cache (written back first: dirty pages stay): GNU dd's
 * `iflag=nocache count=0` advises the kernel to drop the whole file.
 */
async function evict(file: string): Promise<void> {
  const fd = openSync(file, "r");
  try {
    fdatasyncSync(fd);
  } finally {
    closeSync(fd);
  }
  const ran = await runTimed("dd", [`if=${file}`, "iflag=nocache", "count=0", "status=none"], {
    env: { PATH: process.env.PATH ?? "/usr/bin:/bin" },
  });
  if (ran.code !== 0) throw new Error(`Cannot drop '${file}' from the page cache: ${ran.stderr}`);
}

/** Local rows: the agent on a fake H100 node, `version`, and the floor. */
async function localRows(
  ours: string,
  upstream: string,
  options: { runs: number; floor: boolean; work: string; cold: boolean },
): Promise<string[][]> {
  const { runs, work } = options;
  const path = await fakeH100Path(work);
  const agentEnv = { PATH: path, NODE_NAME: "bench-h100" };
  const upOut = join(work, "upstream.yaml");
  const ourOut = join(work, "aicr.yaml");
  const agent = { up: [] as Measured[], ours: [] as Measured[] };
  const version = { up: [] as Measured[], ours: [] as Measured[], floor: [] as Measured[] };
  let floorBin: string | undefined;
  if (options.floor) {
    const empty = join(work, "empty.cjs");
    await writeFile(empty, "");
    await sealNodeSea(empty, join(work, "floor.sealed"), { work });
    floorBin = await stage(join(work, "floor.sealed"), work, "floor");
  }
  // Warm the page cache for both binaries (a node that ran the agent once).
  for (let i = 0; i < 2; i++) {
    await measure(
      upstream,
      ["snapshot", "-o", upOut],
      { ...agentEnv, AICR_AGENT_MODE: "true" },
      work,
    );
    await measure(ours, ["agent", "-o", ourOut], agentEnv, work);
  }
  const agentUp = () =>
    measure(upstream, ["snapshot", "-o", upOut], { ...agentEnv, AICR_AGENT_MODE: "true" }, work);
  const agentOurs = () => measure(ours, ["agent", "-o", ourOut], agentEnv, work);
  for (let i = 0; i < runs; i++) {
    // Which binary goes first alternates: a run right after the other's is not a run after a pause.
    if (i % 2 === 0) {
      agent.up.push(await agentUp());
      agent.ours.push(await agentOurs());
    } else {
      agent.ours.push(await agentOurs());
      agent.up.push(await agentUp());
    }
    version.up.push(await measure(upstream, ["--version"], {}, work));
    version.ours.push(await measure(ours, ["version"], {}, work));
    if (floorBin) version.floor.push(await measure(floorBin, [], {}, work));
  }
  // Cold: each binary's pages dropped from the page cache before its run, as on a node whose
  // cache no longer holds the image (the shared libraries stay cached for both).
  const cold = { agentUp: [] as Measured[], agentOurs: [] as Measured[], floor: [] as Measured[] };
  const coldVersion = { up: [] as Measured[], ours: [] as Measured[] };
  for (let i = 0; options.cold && i < runs; i++) {
    await evict(upstream);
    cold.agentUp.push(
      await measure(
        upstream,
        ["snapshot", "-o", upOut],
        { ...agentEnv, AICR_AGENT_MODE: "true" },
        work,
      ),
    );
    await evict(ours);
    cold.agentOurs.push(await measure(ours, ["agent", "-o", ourOut], agentEnv, work));
    await evict(upstream);
    coldVersion.up.push(await measure(upstream, ["--version"], {}, work));
    await evict(ours);
    coldVersion.ours.push(await measure(ours, ["version"], {}, work));
    if (floorBin) {
      await evict(floorBin);
      cold.floor.push(await measure(floorBin, [], {}, work));
    }
  }
  const m = (xs: Measured[], k: keyof Measured) => median(xs.map((x) => x[k]));
  const rows: string[][] = [];
  const add = (what: string, up: number, our: number, unit: (n: number) => string, goal?: number) =>
    rows.push([
      what,
      unit(up),
      unit(our),
      ratio(our, up),
      goal === undefined ? "" : verdict(our, up, goal),
    ]);
  const mib = (n: number) => `${n.toFixed(1)} MiB`;
  add(
    "agent on a fake 8x H100 node, wall",
    m(agent.up, "wallMs"),
    m(agent.ours, "wallMs"),
    fmtMs,
    GOALS.agentWall,
  );
  add("same, CPU (user+sys)", m(agent.up, "cpuMs"), m(agent.ours, "cpuMs"), fmtMs);
  add("same, peak RSS", m(agent.up, "rssMiB"), m(agent.ours, "rssMiB"), mib, GOALS.agentRss);
  add(
    "`version` cold start, wall",
    m(version.up, "wallMs"),
    m(version.ours, "wallMs"),
    fmtMs,
    GOALS.version,
  );
  // CPU beside wall: on a shared machine the wall time is mostly waiting for a core.
  add("same, CPU (user+sys)", m(version.up, "cpuMs"), m(version.ours, "cpuMs"), fmtMs);
  add("same, peak RSS", m(version.up, "rssMiB"), m(version.ours, "rssMiB"), mib, GOALS.version);
  if (floorBin) {
    const floor = (against: Measured[]) =>
      `${ratio(m(version.floor, "wallMs"), m(against, "wallMs"))}, ${
        ratio(m(version.floor, "cpuMs"), m(against, "cpuMs"))
      }, ${ratio(m(version.floor, "rssMiB"), m(against, "rssMiB"))}`;
    rows.push([
      "floor: empty Node SEA, same base (wall, CPU, RSS), beside upstream's `--version`",
      "",
      `${fmtMs(m(version.floor, "wallMs"))}, ${fmtMs(m(version.floor, "cpuMs"))}, ${
        mib(m(version.floor, "rssMiB"))
      }`,
      floor(version.up),
      "",
    ]);
    rows.push(["  same floor beside upstream's agent", "", "", floor(agent.up), ""]);
  }
  if (options.cold) {
    add(
      "agent, cold page cache (binary evicted before each run), wall",
      m(cold.agentUp, "wallMs"),
      m(cold.agentOurs, "wallMs"),
      fmtMs,
    );
    add(
      "`version`, cold page cache, wall",
      m(coldVersion.up, "wallMs"),
      m(coldVersion.ours, "wallMs"),
      fmtMs,
    );
    if (floorBin) {
      rows.push([
        "  floor, cold page cache, wall (beside upstream's agent, its `--version`)",
        "",
        fmtMs(m(cold.floor, "wallMs")),
        `${ratio(m(cold.floor, "wallMs"), m(cold.agentUp, "wallMs"))}, ${
          ratio(m(cold.floor, "wallMs"), m(coldVersion.up, "wallMs"))
        }`,
        "",
      ]);
    }
  }
  rows.push(
    ...await daemonRows(ours, {
      agentCpuMs: m(agent.ours, "cpuMs"),
      work,
      path,
      collections: 10,
    }),
  );
  const layer = (file: string) => gzipSync(readFileSync(file), { level: 6 }).length / (1 << 20);
  rows.push([
    "image layer: the binary, gzip -6",
    mib(layer(upstream)),
    mib(layer(ours)),
    ratio(layer(ours), layer(upstream)),
    floorBin ? `floor ${mib(layer(floorBin))}` : "",
  ]);
  return rows;
}

/**
 * The daemon on the same fake H100 node (plain HTTP, no auth, loopback only): its steady RSS after
 * 100 cached requests, and its CPU per collection over fresh collections (`?fresh=true`).
 */
async function daemonRows(
  ours: string,
  options: { agentCpuMs: number; work: string; path: string; collections: number },
): Promise<string[][]> {
  const daemon = await startBenchDaemon(ours, options);
  const { base, child, steady } = daemon;
  try {
    const cpuBefore = procFigures(child.pid as number).cpuMs;
    for (let i = 0; i < options.collections; i++) {
      const res = await fetch(`${base}/v1/snapshot?fresh=true`);
      await res.text();
      if (!res.ok) throw new Error(`daemon answered ${res.status} to ?fresh=true`);
    }
    const perCollection = (procFigures(child.pid as number).cpuMs - cpuBefore) /
      options.collections;
    return [
      [
        "daemon: steady RSS after 100 cached requests",
        "",
        `${steady.rssMiB.toFixed(1)} MiB`,
        "",
        steady.rssMiB <= DAEMON_RSS_GOAL_MIB
          ? `ok (goal <= ${DAEMON_RSS_GOAL_MIB} MiB)`
          : `OVER (goal <= ${DAEMON_RSS_GOAL_MIB} MiB)`,
      ],
      [
        `daemon: CPU per fresh collection (${options.collections}) beside the local agent's CPU`,
        "",
        `${fmtMs(perCollection)} vs ${fmtMs(options.agentCpuMs)}`,
        ratio(perCollection, options.agentCpuMs),
        perCollection / options.agentCpuMs <= 1.5 ? "ok (goal <= 1.5x)" : "OVER (goal <= 1.5x)",
      ],
    ];
  } finally {
    await daemon.stop();
  }
}

/** Phase boundaries: the first `--debug` line matching each, in order. */
const PHASES: { name: string; marker: RegExp }[] = [
  { name: "start and gate (process, pre-flight reads, access reviews)", marker: /gate passed/ },
  { name: "RBAC (run-scoped creates)", marker: /run RBAC created/ },
  { name: "Job (create)", marker: /agent Job created/ },
  { name: "agent (schedule, run, report)", marker: /agent finished; reading its snapshot/ },
  { name: "read (ConfigMap, validate)", marker: /snapshot read/ },
];

/**
 * Rows of our phases, medians over `--debug` runs; with `AICR_BENCH_TIMELINE=1`, also the last
 * run's stderr lines with their arrival times (ms after spawn), for a closer look.
 */
function phaseRows(phased: readonly Ran[]): string[][] {
  const rows: string[][] = [];
  const names = [...PHASES.map((p) => p.name), "deliver (encode, stdout)"];
  names.push("cleanup (UID-pinned deletes, pods gone), exit");
  const perRun = phased.map(phasesOf);
  for (const name of names) {
    const values = perRun.map((p) => p.get(name)).filter((v): v is number => v !== undefined);
    if (values.length > 0) {
      rows.push([`  ours --debug: ${name}`, "", fmtMs(median(values)), "", ""]);
    }
  }
  rows.push(["  ours --debug: total", "", fmtMs(median(phased.map((r) => r.millis))), "", ""]);
  const last = phased.at(-1);
  if (process.env.AICR_BENCH_TIMELINE === "1" && last) {
    for (const { ms, line } of last.stderrLines) {
      say(`${String(Math.round(ms)).padStart(6)} ${line}`);
    }
  }
  return rows;
}

/** Splits one `--debug` run into phases by its lines' arrival times. */
function phasesOf(ran: Ran): Map<string, number> {
  const out = new Map<string, number>();
  let prev = 0;
  for (const { name, marker } of PHASES) {
    const hit = ran.stderrLines.find((l) => marker.test(l.line));
    if (!hit) continue;
    out.set(name, hit.ms - prev);
    prev = hit.ms;
  }
  const delivered = Number.isNaN(ran.lastStdoutMs) ? prev : ran.lastStdoutMs;
  out.set("deliver (encode, stdout)", Math.max(0, delivered - prev));
  out.set("cleanup (UID-pinned deletes, pods gone), exit", ran.millis - delivered);
  return out;
}

/** Cluster rows: `aicr snapshot` end to end, both to stdout on the H100 node. */
async function clusterRows(
  ours: string,
  upstream: string,
  options: { runs: number },
): Promise<string[][]> {
  const { useTestCluster, createNamespace } = await import("../tests/cluster/harness.ts");
  const env = await useTestCluster({
    kubelet: {
      nodes: { "p5-h100": 1, "system-m7i": 1 },
      aicrBin: ours,
      // The stand-in pulls by exact reference or repository (`tests/kubelet/images.ts`).
      images: { [imageRepository(UPSTREAM_IMAGE)]: upstream },
    },
  });
  try {
    const ns = await createNamespace(env.admin, "bench-upstream");
    const kubeconfig = env.cluster.adminKubeconfig;
    const base = { PATH: process.env.PATH ?? "/usr/bin:/bin", AICR_BIN: ours };
    const upArgs = [
      "snapshot",
      "--kubeconfig",
      kubeconfig,
      "--namespace",
      ns,
      "--image",
      UPSTREAM_IMAGE,
      "--node-selector",
      GPU_SELECTOR,
    ];
    const ourArgs = ["snapshot", "--kubeconfig", kubeconfig, "-n", ns, "-o", "-"];
    const up: Ran[] = [];
    const mine: Ran[] = [];
    const phased: Ran[] = [];
    const check = (who: string, ran: Ran) => {
      if (ran.code !== 0 || !ran.stdout.includes("kind: Snapshot")) {
        throw new Error(
          `${who} snapshot failed (exit ${ran.code}) or printed no snapshot:\n${
            ran.stderr.slice(-3000)
          }${
            who === "upstream"
              ? `\n(a reused AICR_CLUSTER_DIR cluster needs its kubelet started with AICR_KUBELET_IMAGES='{"${
                imageRepository(UPSTREAM_IMAGE)
              }":"${upstream}"}')`
              : ""
          }`,
        );
      }
    };
    // One warm-up each: page cache, the API server's caches.
    check("upstream", await runTimed(upstream, upArgs, { env: base }));
    check("aicr", await runTimed(ours, ourArgs, { env: base }));
    for (let i = 0; i < options.runs; i++) {
      const u = await runTimed(upstream, upArgs, { env: base });
      check("upstream", u);
      up.push(u);
      const o = await runTimed(ours, ourArgs, { env: base });
      check("aicr", o);
      mine.push(o);
      const p = await runTimed(ours, ["--debug", ...ourArgs], { env: base });
      check("aicr --debug", p);
      phased.push(p);
    }
    await env.admin.request("DELETE", `/api/v1/namespaces/${ns}`);
    const upTotal = median(up.map((r) => r.millis));
    const upOut = median(up.map((r) => r.lastStdoutMs));
    const ourTotal = median(mine.map((r) => r.millis));
    const ourOut = median(mine.map((r) => r.lastStdoutMs));
    const rows: string[][] = [
      [
        `\`aicr snapshot\` end to end, median of ${options.runs}`,
        fmtMs(upTotal),
        fmtMs(ourTotal),
        ratio(ourTotal, upTotal),
        verdict(ourTotal, upTotal, GOALS.snapshotTotal),
      ],
      [
        "snapshot reached stdout (ours beside upstream's total)",
        fmtMs(upTotal),
        fmtMs(ourOut),
        ratio(ourOut, upTotal),
        verdict(ourOut, upTotal, GOALS.snapshotDelivered),
      ],
      ["  upstream: its snapshot reached stdout", fmtMs(upOut), "", "", ""],
    ];
    rows.push(...phaseRows(phased));
    return rows;
  } finally {
    await env.stop();
  }
}

/** The upstream image the real-kubelet lane runs, built offline for this bench only. */
export const UPSTREAM_LANE_IMAGE = "aicr.local/upstream-aicr:v0.11.1";

/**
 * Real-kubelet lane rows (`tests/realnode/`): `aicr snapshot` end to end beside upstream's, both
 * run inside the lane's network namespace against real kubelets, containerd and runc. Ours pulls
 * the binary under test from the lane's registry (pushed here with its own `aicr image push`, with
 * the pull secret); upstream's image is built here, offline, as an OCI layout of the upstream
 * binary and the libraries it links (never kept: it lives in the lane's state folder) and
 * imported into every node's containerd.
 */
async function realnodeRows(
  ours: string,
  upstream: string,
  options: { runs: number },
): Promise<string[][]> {
  const { laneUnavailable, PULL_SECRET, useRealNodeLane } = await import(
    "../tests/realnode/harness.ts"
  );
  const unavailable = laneUnavailable();
  if (unavailable) return [["real-kubelet lane", "", "", "", `not run: ${unavailable}`]];
  const { buildOciImage, withLibraries } = await import("../tests/realnode/images.ts");
  const { createNamespace } = await import("../tests/cluster/harness.ts");
  const env = await useRealNodeLane({ nodes: 1 });
  try {
    const tar = join(env.lane.stateDir, "images", "upstream-aicr.tar");
    await buildOciImage({
      ref: UPSTREAM_LANE_IMAGE,
      files: await withLibraries(upstream, "/usr/local/bin/aicr"),
      dirs: { "/tmp": 0o1777 },
      config: { Env: ["PATH=/usr/local/bin:/usr/bin:/bin"], Entrypoint: ["/usr/local/bin/aicr"] },
    }, tar);
    for (const node of env.lane.nodes) {
      const ran = await runTimed("ctr", [
        "--address",
        node.socket,
        "-n",
        "k8s.io",
        "images",
        "import",
        tar,
      ], { env: { PATH: process.env.PATH ?? "/usr/bin:/bin" } });
      if (ran.code !== 0) throw new Error(`Cannot import upstream's image: ${ran.stderr}`);
    }
    const [netns, ...netnsArgs] = env.inNetns as [string, ...string[]];
    const base = { PATH: "/usr/sbin:/usr/bin:/sbin:/bin", HOME: process.env.HOME ?? "/root" };
    const pushed = await runTimed(netns, [
      ...netnsArgs,
      ours,
      "image",
      "push",
      `${env.registry.host}/aicr`,
      "--ca-file",
      env.registry.caFile,
      "--registry-config",
      env.registry.authFile,
    ], { env: base });
    const image = pushed.stdout.trim();
    if (pushed.code !== 0 || !/@sha256:/.test(image)) {
      throw new Error(`Cannot push the binary's image into the lane: ${pushed.stderr}`);
    }
    const ns = await createNamespace(env.admin, "bench-upstream");
    await env.createPullSecret(ns);
    const upArgs = [
      ...netnsArgs,
      upstream,
      "snapshot",
      "--kubeconfig",
      env.kubeconfig,
      "--namespace",
      ns,
      "--image",
      UPSTREAM_LANE_IMAGE,
      "--node-selector",
      GPU_SELECTOR,
    ];
    const ourArgs = [
      ...netnsArgs,
      ours,
      "snapshot",
      "--kubeconfig",
      env.kubeconfig,
      "-n",
      ns,
      "-o",
      "-",
      "--image",
      image,
      "--image-pull-secret",
      PULL_SECRET,
    ];
    const check = (who: string, ran: Ran) => {
      if (ran.code !== 0 || !ran.stdout.includes("kind: Snapshot")) {
        throw new Error(
          `${who} snapshot on the real-kubelet lane failed (exit ${ran.code}):\n${
            ran.stderr.slice(-3000)
          }`,
        );
      }
    };
    // One warm-up each: the images' first start, the API server's caches.
    check("upstream", await runTimed(netns, upArgs, { env: base }));
    check("aicr", await runTimed(netns, ourArgs, { env: base }));
    const up: Ran[] = [];
    const mine: Ran[] = [];
    const phased: Ran[] = [];
    const [, ...ourRest] = ourArgs.slice(netnsArgs.length);
    const phasedArgs = [...netnsArgs, ours, "--debug", ...ourRest];
    for (let i = 0; i < options.runs; i++) {
      const u = await runTimed(netns, upArgs, { env: base });
      check("upstream", u);
      up.push(u);
      const o = await runTimed(netns, ourArgs, { env: base });
      check("aicr", o);
      mine.push(o);
      const p = await runTimed(netns, phasedArgs, { env: base });
      check("aicr --debug", p);
      phased.push(p);
    }
    const upTotal = median(up.map((r) => r.millis));
    const ourTotal = median(mine.map((r) => r.millis));
    return [
      [
        `\`aicr snapshot\` end to end on the real-kubelet lane (containerd, runc), median of ${options.runs}`,
        fmtMs(upTotal),
        fmtMs(ourTotal),
        ratio(ourTotal, upTotal),
        verdict(ourTotal, upTotal, GOALS.snapshotTotal),
      ],
      [
        "  same, snapshot reached stdout",
        fmtMs(median(up.map((r) => r.lastStdoutMs))),
        fmtMs(median(mine.map((r) => r.lastStdoutMs))),
        "",
        "",
      ],
      ...phaseRows(phased),
    ];
  } finally {
    await env.stop();
  }
}

async function main(args: string[]): Promise<number> {
  const { values } = parseArgs({
    args,
    options: {
      runs: { type: "string", default: "15" },
      "agent-runs": { type: "string", default: "15" },
      binary: { type: "string" },
      "no-cluster": { type: "boolean", default: false },
      "no-local": { type: "boolean", default: false },
      realnode: { type: "boolean", default: false },
      cold: { type: "boolean", default: false },
      "no-floor": { type: "boolean", default: false },
      busy: { type: "boolean", default: false },
    },
  });
  const runs = Number(values.runs);
  const agentRuns = Number(values["agent-runs"]);
  for (const [flag, n] of [["--runs", runs], ["--agent-runs", agentRuns]] as const) {
    if (!Number.isInteger(n) || n < 1) {
      process.stderr.write(`Cannot benchmark as '${flag}' must be a positive integer\n`);
      return 2;
    }
  }
  if (!existsSync(GNU_TIME)) {
    process.stderr.write(
      `Cannot measure peak RSS as ${GNU_TIME} is missing: apt-get install time\n`,
    );
    return 1;
  }
  let upstream: string;
  try {
    upstream = await upstreamBinary(process.env);
  } catch (error) {
    process.stderr.write(`${(error as Error).message}\n`);
    return 1;
  }
  let ours = resolve(values.binary ?? process.env.AICR_BIN ?? join(REPO_ROOT, "dist", "aicr"));
  if (!existsSync(ours)) {
    process.stderr.write(
      `Cannot benchmark '${ours}' as it does not exist: run 'deno task build'\n`,
    );
    return 1;
  }
  const staleBy = sourcesNewerThan(ours);
  if (staleBy) {
    process.stderr.write(
      `WARN '${ours}' is older than ${staleBy}: it does not measure this checkout; run 'deno task build' or pass --binary\n`,
    );
  }
  const work = await mkdtemp(join(tmpdir(), "aicr-upstream-bench-"));
  const cleanup = [work];
  const before = loadavg()[0]!;
  try {
    say(`upstream ${upstream}; aicr ${ours}`);
    const staged = await mkdtemp(join(tmpdir(), "aicr-upstream-bench-bin-"));
    cleanup.push(staged);
    ours = await stage(ours, staged, "aicr");
    upstream = await stage(upstream, staged, "aicr-upstream");
    say(`both staged in ${staged} (64 KiB writes, as an image layer is unpacked)`);
    const rows = values["no-local"] ? [] : await localRows(ours, upstream, {
      runs: agentRuns,
      floor: !values["no-floor"],
      work,
      cold: values.cold,
    });
    // With --busy, one core is kept busy beside the cluster rows, as a laptop or CI runner is.
    const busy = values.busy && !values["no-cluster"]
      ? spawn("sh", ["-c", "exec yes > /dev/null"], { stdio: "ignore" })
      : undefined;
    try {
      if (!values["no-cluster"]) rows.push(...(await clusterRows(ours, upstream, { runs })));
    } finally {
      busy?.kill("SIGKILL");
    }
    if (busy) say("cluster rows measured with one core kept busy (yes > /dev/null)");
    if (values.realnode) rows.push(...(await realnodeRows(ours, upstream, { runs })));
    say(
      `load average ${before.toFixed(2)} -> ${loadavg()[0]!.toFixed(2)} on ${cpus().length} cores` +
        (values["no-local"] ? "" : `; local rows: median of ${agentRuns} alternating runs`),
    );
    say("");
    say(table(["measure (same run)", "upstream Go", "aicr", "ratio", "goal"], rows));
    return 0;
  } finally {
    for (const dir of cleanup) await rm(dir, { recursive: true, force: true });
  }
}

if (import.meta.main) {
  process.exitCode = await main(process.argv.slice(2));
}
