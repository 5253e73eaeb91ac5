/**
 * Benchmark of node collection (figures only, no asserts): the agent's wall time for
 * `collectMeasurements()` on this host beside the floor, the sum of its sources' own
 * costs measured with plain `node:` calls (reading the same files, walking `/proc/sys`,
 * trying the systemd sockets, running nvidia-smi). Goal: collection adds under 20 % over
 * that floor and finishes under 1 s without a GPU.
 *
 * Two scenarios: `no-gpu` (nvidia-smi not on PATH) and `fake-gpu` (a fake nvidia-smi on
 * PATH that prints the H100 fixture). Runs are interleaved; medians are reported.
 *
 * ```sh
 * node_modules/.bin/deno run -A bench/collect_bench.ts            # 15 runs per scenario
 * node_modules/.bin/deno run -A bench/collect_bench.ts --runs=5
 * ```
 *
 * Writes the figures as JSON to `bench/.out/collect.json` too.
 *
 * @module
 */
import { execFile } from "node:child_process";
import { chmod, mkdir, mkdtemp, open, readdir, rm, writeFile } from "node:fs/promises";
import { createConnection } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { fileURLToPath } from "node:url";
import { NOOP_LOGGER } from "../log.ts";
import {
  collectMeasurements,
  createCommandRunner,
  createHostReader,
  createSystemdBus,
  SYSTEM_BUS_SOCKET,
  SYSTEMD_PRIVATE_SOCKET,
} from "../collectors/mod.ts";

const enc = new TextEncoder();
const out = (s: string) => Deno.stdout.writeSync(enc.encode(`${s}\n`));
const H100 = fileURLToPath(
  new URL("../tests/fixtures/nvidia-smi-q-x.h100.xml", import.meta.url),
);
const BASE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)] ?? NaN;
}

async function time<T>(fn: () => Promise<T>): Promise<number> {
  const t0 = performance.now();
  await fn();
  return performance.now() - t0;
}

async function readRaw(path: string): Promise<void> {
  // Same shape of work as the agent: read to EOF (procfs reports size 0), at most 1 MiB + 1.
  let handle;
  try {
    handle = await open(path, "r");
  } catch {
    return;
  }
  try {
    const buffer = new Uint8Array(64 * 1024);
    let total = 0;
    while (total <= 1 << 20) {
      const { bytesRead } = await handle.read(buffer, 0, buffer.length, null);
      if (bytesRead === 0) break;
      total += bytesRead;
    }
  } catch {
    // unreadable sysctl files are skipped by the agent too
  } finally {
    await handle.close();
  }
}

async function walkSysctlRaw(dir: string): Promise<void> {
  const entries = await readdir(dir, { withFileTypes: true });
  for (const entry of entries) {
    const full = `${dir}/${entry.name}`;
    if (entry.isSymbolicLink()) continue;
    if (entry.isDirectory()) {
      if (full !== "/proc/sys/net") await walkSysctlRaw(full);
    } else if (entry.isFile() && !full.startsWith("/proc/sys/dev/cdrom/")) {
      await readRaw(full);
    }
  }
}

function connectRaw(path: string): Promise<void> {
  return new Promise((resolve) => {
    const socket = createConnection({ path });
    socket.once("connect", () => (socket.destroy(), resolve()));
    socket.once("error", () => (socket.destroy(), resolve()));
  });
}

function runRaw(file: string): Promise<void> {
  return new Promise((resolve, reject) => {
    execFile(file, ["-q", "-x"], { encoding: "buffer", maxBuffer: 64 << 20 }, (error) => {
      if (error) reject(error);
      else resolve();
    });
  });
}

/** Each source's own cost, measured one after the other with plain node: calls. */
async function floor(smi: string | undefined): Promise<Record<string, number>> {
  const costs: Record<string, number> = {
    cmdline: await time(() => readRaw("/proc/cmdline")),
    sysctl: await time(() => walkSysctlRaw("/proc/sys")),
    modules: await time(() => readRaw("/proc/modules")),
    release: await time(() => readRaw("/etc/os-release")),
    systemd: await time(async () => {
      await connectRaw(SYSTEMD_PRIVATE_SOCKET);
      await connectRaw(SYSTEM_BUS_SOCKET);
    }),
  };
  if (smi) costs.nvidiaSmi = await time(() => runRaw(smi));
  return costs;
}

async function agent(
  pathEnv: string,
): Promise<{ wallMs: number; perCollector: Record<string, number> }> {
  const t0 = performance.now();
  const { reports } = await collectMeasurements({
    host: createHostReader({ root: "/" }),
    exec: createCommandRunner({ path: pathEnv }),
    systemd: () => createSystemdBus(),
    env: (name) => Deno.env.get(name),
    log: NOOP_LOGGER,
  });
  const wallMs = performance.now() - t0;
  return {
    wallMs,
    perCollector: Object.fromEntries(reports.map((r) => [r.collector, r.durationMs])),
  };
}

const { values } = parseArgs({
  args: Deno.args,
  options: { runs: { type: "string", default: "15" } },
});
const runs = Math.max(1, Number(values.runs));
const dir = await mkdtemp(join(tmpdir(), "aicr-bench-smi-"));
const smi = join(dir, "nvidia-smi");
await writeFile(smi, `#!/bin/sh\nexec cat '${H100}'\n`);
await chmod(smi, 0o755);

const results: Record<string, unknown> = {};
try {
  const scenarios = [
    { name: "no-gpu", path: BASE_PATH, smi: undefined },
    { name: "fake-gpu", path: `${dir}:${BASE_PATH}`, smi },
  ];
  const samples = new Map<
    string,
    { wall: number[]; floorSum: number[]; floorMax: number[]; sources: Record<string, number[]> }
  >();
  for (const s of scenarios) {
    samples.set(s.name, { wall: [], floorSum: [], floorMax: [], sources: {} });
  }
  // Two warm-up rounds (JIT, page cache), then interleaved measured rounds.
  for (let round = -2; round < runs; round++) {
    for (const s of scenarios) {
      const costs = await floor(s.smi);
      const { wallMs } = await agent(s.path);
      if (round < 0) continue;
      const entry = samples.get(s.name)!;
      entry.wall.push(wallMs);
      entry.floorSum.push(Object.values(costs).reduce((a, b) => a + b, 0));
      entry.floorMax.push(Math.max(...Object.values(costs)));
      for (const [k, v] of Object.entries(costs)) (entry.sources[k] ??= []).push(v);
    }
  }
  out(`collect_bench: ${runs} runs per scenario, medians (2 cores shared; figures vary with load)`);
  for (const [name, e] of samples) {
    const wall = median(e.wall);
    const sum = median(e.floorSum);
    const max = median(e.floorMax);
    const sources = Object.entries(e.sources).map(([k, v]) => `${k} ${median(v).toFixed(1)}`).join(
      ", ",
    );
    out(
      `${name}: agent wall ${wall.toFixed(1)} ms; floor (sum of sources) ${sum.toFixed(1)} ms; ` +
        `ratio wall/floor ${(wall / sum).toFixed(2)} (overhead ${
          ((wall / sum - 1) * 100).toFixed(0)
        } %); ` +
        `slowest source ${max.toFixed(1)} ms`,
    );
    out(`  sources (ms): ${sources}`);
    out(`  agent wall runs (ms): [${e.wall.map((x) => x.toFixed(0)).join(", ")}]`);
    results[name] = {
      wallMs: wall,
      floorSumMs: sum,
      floorMaxMs: max,
      ratio: wall / sum,
      runs: e.wall,
      sources: e.sources,
    };
  }
  const noGpu = samples.get("no-gpu")!;
  out(
    `goal: no-gpu wall < 1000 ms: ${median(noGpu.wall) < 1000 ? "met" : "NOT met"}; ` +
      `overhead < 20 %: ${
        median(noGpu.wall) / median(noGpu.floorSum) < 1.2 ? "met" : "NOT met"
      } (no-gpu), ` +
      `${
        median(samples.get("fake-gpu")!.wall) / median(samples.get("fake-gpu")!.floorSum) < 1.2
          ? "met"
          : "NOT met"
      } (fake-gpu)`,
  );
  const outDir = fileURLToPath(new URL("./.out/", import.meta.url));
  await mkdir(outDir, { recursive: true });
  await writeFile(join(outDir, "collect.json"), JSON.stringify(results, null, 2) + "\n");
} finally {
  await rm(dir, { recursive: true, force: true });
}
