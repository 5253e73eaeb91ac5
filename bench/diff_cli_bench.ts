/**
 * Bench of `aicr diff --fleet` through the real CLI path (issue #15 part 5): a directory of
 * `<node>.yaml` files as `aicr daemonset fetch -o dir/` writes them, read by `runCli(["diff",
 * "--fleet", dir, "-t", "json", "-o", file])` in a process of its own (so its peak RSS is the
 * command's alone): time, CPU and peak memory, side by side for several fleet sizes.
 *
 * Fleets: the mixed fleet (55 % H100, 30 % GB200, the rest CPU nodes, from the real captures),
 * padded to ~1,300 readings per node, one planted sysctl change per 1,000 nodes. Two layouts:
 *
 * - `cluster`: NodeTopology of the whole cluster in every file, as the daemon collects it today
 *   (244 KiB of YAML per file at 1,000 nodes, growing with the cluster: only 1,000 is practical).
 * - `own`: NodeTopology cut to the node's own labels and taints (what "topology once per fetch"
 *   leaves per node; the cohort keys come from these), so a file's size does not grow with the
 *   cluster.
 *
 * Goal: 10,000 nodes under 10 s and under 1 GiB.
 *
 * ```sh
 * deno run -A bench/diff_cli_bench.ts [--sizes=1000:cluster,1000:own,10000:own] [--runs=3]
 * ```
 *
 * @module
 */
import { Buffer } from "node:buffer";
import { readFileSync } from "node:fs";
import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import process from "node:process";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { runCli } from "../cli/mod.ts";
import { createLogger } from "../log.ts";
import { processDeps } from "../mod.ts";
import { encodeSnapshot } from "../snapshot/mod.ts";
import { padSnapshot, setReading } from "../snapshot/testdata/generate.ts";
import { generateMixedFleet, mixedCounts } from "../snapshot/testdata/mixed_fleet.ts";

const ROOT = dirname(dirname(fileURLToPath(import.meta.url)));
const MIB = 1024 * 1024;
const READINGS_PAD = 600;

function peakMiB(): number {
  const status = readFileSync("/proc/self/status", "utf8");
  return Number(/VmHWM:\s+(\d+)/.exec(status)?.[1] ?? NaN) / 1024;
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)] ?? NaN;
}

/** Writes the fleet's files; prints `{ files, mib }`. */
async function writeFleetFiles(total: number, layout: string, dir: string): Promise<void> {
  await mkdir(dir, { recursive: true });
  let bytes = 0;
  let i = 0;
  for (
    const snapshot of generateMixedFleet(mixedCounts(total), { ownTopology: layout === "own" })
  ) {
    padSnapshot(snapshot, READINGS_PAD);
    if (i % 1000 === 17) setReading(snapshot, "OS.sysctl./proc/sys/vm/swappiness", "10");
    const text = encodeSnapshot(snapshot, "yaml");
    bytes += Buffer.byteLength(text);
    await writeFile(join(dir, `${snapshot.metadata["source-node"]}.yaml`), text);
    i++;
  }
  process.stdout.write(JSON.stringify({ files: i, mib: bytes / MIB }) + "\n");
}

/** Runs the whole `aicr diff --fleet` command; prints `{ ms, cpuMs, peakMiB, code, ... }`. */
async function runDiff(dir: string): Promise<void> {
  const discard = { write: () => {} };
  const out = `${dir}.report.json`;
  const deps = {
    ...processDeps(new AbortController().signal),
    stdout: discard,
    stderr: { write: (t: string) => void process.stderr.write(t) },
    makeLogger: () => createLogger(discard),
  };
  const t0 = performance.now();
  const code = await runCli(["diff", "--fleet", dir, "-t", "json", "-o", out], deps);
  const ms = performance.now() - t0;
  const cpu = process.cpuUsage();
  const report = JSON.parse(await readFile(out, "utf8")) as {
    summary: { nodes: number; cohorts: number; outliers: number };
  };
  await rm(out, { force: true });
  process.stdout.write(
    JSON.stringify({
      ms,
      cpuMs: (cpu.user + cpu.system) / 1000,
      peakMiB: peakMiB(),
      code,
      ...report.summary,
    }) + "\n",
  );
}

async function child(args: string[]): Promise<Record<string, number>> {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", "--no-prompt", fileURLToPath(import.meta.url), "--child", ...args],
    stdout: "piped",
    stderr: "inherit",
  }).output();
  if (out.code !== 0) throw new Error(`bench child ${args.join(" ")} failed: exit ${out.code}`);
  return JSON.parse(new TextDecoder().decode(out.stdout));
}

const out = (s: string) => Deno.stdout.writeSync(new TextEncoder().encode(`${s}\n`));

if (import.meta.main) {
  const childAt = Deno.args.indexOf("--child");
  if (childAt >= 0) {
    const [mode, a, b, c] = Deno.args.slice(childAt + 1);
    if (mode === "write") await writeFleetFiles(Number(a), b as string, c as string);
    else await runDiff(a as string);
  } else {
    const { values } = parseArgs({
      args: Deno.args,
      options: {
        sizes: { type: "string", default: "1000:cluster,1000:own,10000:own" },
        runs: { type: "string", default: "3" },
      },
    });
    await mkdir(join(ROOT, ".cluster-runs"), { recursive: true });
    const scratch = await mkdtemp(join(ROOT, ".cluster-runs", "bench-diff-cli-"));
    const load = () => readFileSync("/proc/loadavg", "utf8").split(" ").slice(0, 3).join(" ");
    out(`aicr diff --fleet DIR -t json -o FILE, the whole command per process; load ${load()}`);
    const rows: { size: number; layout: string; ms: number; cpuMs: number; peak: number }[] = [];
    try {
      for (const spec of values.sizes.split(",")) {
        const [size, layout = "own"] = spec.split(":");
        const dir = join(scratch, `${size}-${layout}`);
        const written = await child(["write", size as string, layout, dir]);
        const runs: Record<string, number>[] = [];
        for (let r = 0; r < Number(values.runs); r++) runs.push(await child(["diff", dir]));
        await rm(dir, { recursive: true, force: true });
        const ms = median(runs.map((r) => r.ms as number));
        const cpuMs = median(runs.map((r) => r.cpuMs as number));
        const peak = median(runs.map((r) => r.peakMiB as number));
        const first = runs[0] as Record<string, number>;
        rows.push({ size: Number(size), layout, ms, cpuMs, peak });
        out(
          `  ${size} nodes, topology ${layout}: ${written.files} files, ${
            (written.mib as number).toFixed(0)
          } MiB (${
            ((written.mib as number) * 1024 / (written.files as number)).toFixed(0)
          } KiB each); ` +
            `median ${(ms / 1000).toFixed(2)} s wall, ${(cpuMs / 1000).toFixed(2)} s CPU, ${
              peak.toFixed(0)
            } MiB peak; runs [${
              runs.map((r) => ((r.ms as number) / 1000).toFixed(2)).join(", ")
            }] s; ` +
            `exit ${first.code}, ${first.nodes} nodes, ${first.cohorts} cohorts, ${first.outliers} outliers`,
        );
      }
      const own1k = rows.find((r) => r.size === 1000 && r.layout === "own");
      const own10k = rows.find((r) => r.size === 10_000 && r.layout === "own");
      if (own1k && own10k) {
        out(
          `  10k/1k (own): wall x${(own10k.ms / own1k.ms).toFixed(1)}, CPU x${
            (own10k.cpuMs / own1k.cpuMs).toFixed(1)
          }, peak x${(own10k.peak / own1k.peak).toFixed(2)}; 10,000: ${
            (own10k.ms / 1000).toFixed(2)
          } s (goal < 10 s: ${own10k.ms < 10_000 ? "met" : "MISSED"}), ${
            own10k.peak.toFixed(0)
          } MiB (goal < 1024: ${own10k.peak < 1024 ? "met" : "MISSED"})`,
        );
      }
      out(`load after: ${load()}`);
    } finally {
      await rm(scratch, { recursive: true, force: true });
    }
  }
}
