/**
 * Bench of `aicr diff --fleet` on the largest inputs under the caps (issue #28 item 4): a
 * node's snapshot may be 16 MiB, so one odd node can differ in hundreds of thousands of
 * readings. Each case runs the whole command (`runCli(["diff", "--fleet", dir, "-t", FORMAT,
 * "-o", file])`) in a process of its own, so its peak RSS is the command's alone: wall, CPU and
 * peak memory, per case and format.
 *
 * - `3x400k`: 3 nodes x 400,000 readings (~9.5 MiB of YAML each), the third differing from the
 *   others in 150,000 of them (the size that overflowed the stack before: exit 8).
 * - `10x9MB`: 10 files of 9 MB (~370,000 readings each), every node differing from the
 *   majority in 1,000 readings of its own.
 *
 * ```sh
 * deno run -A bench/fleet_scale_bench.ts [--cases=3x400k,10x9MB] [--formats=json,table,yaml,html] [--runs=1]
 * ```
 *
 * @module
 */
import { readFileSync, statSync } from "node:fs";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import process from "node:process";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { runCli } from "../cli/mod.ts";
import { createLogger } from "../log.ts";
import { processDeps } from "../mod.ts";
import { encodeSnapshot } from "../snapshot/mod.ts";
import { makeNodeSnapshot } from "../snapshot/testdata/generate.ts";

const ROOT = dirname(dirname(fileURLToPath(import.meta.url)));
const MIB = 1024 * 1024;

/** The shapes: nodes, readings per node, and which readings each node changes. */
const CASES: Record<
  string,
  { nodes: number; readings: number; changed: (n: number) => Set<number> | "first" }
> = {
  "3x400k": { nodes: 3, readings: 400_000, changed: (n) => (n === 2 ? "first" : new Set()) },
  "10x9MB": {
    nodes: 10,
    readings: 370_000,
    changed: (n) => new Set(Array.from({ length: 1000 }, (_, i) => n * 1000 + i)),
  },
};

function peakMiB(): number {
  const status = readFileSync("/proc/self/status", "utf8");
  return Number(/VmHWM:\s+(\d+)/.exec(status)?.[1] ?? NaN) / 1024;
}

/** Writes a case's files; prints `{ files, mib }`. */
async function writeCase(name: string, dir: string): Promise<void> {
  const shape = CASES[name];
  if (!shape) throw new Error(`unknown case ${name}`);
  await mkdir(dir, { recursive: true });
  let bytes = 0;
  for (let n = 0; n < shape.nodes; n++) {
    const snapshot = makeNodeSnapshot(`gpu-${String(n).padStart(2, "0")}`);
    const sysctl = snapshot.measurements.find((m) => m.type === "OS")?.subtypes
      .find((s) => s.subtype === "sysctl");
    if (!sysctl) throw new Error("fixture lacks OS.sysctl");
    const changed = shape.changed(n);
    for (let i = 0; i < shape.readings; i++) {
      const differs = changed === "first" ? i < 150_000 : changed.has(i);
      sysctl.data[`/p/${i}`] = differs ? `x${i % 10}` : String(i % 10);
    }
    const text = encodeSnapshot(snapshot, "yaml");
    bytes += text.length;
    await writeFile(join(dir, `${snapshot.metadata["source-node"]}.yaml`), text);
  }
  process.stdout.write(JSON.stringify({ files: shape.nodes, mib: bytes / MIB }) + "\n");
}

/** Runs the whole command; prints `{ ms, cpuMs, peakMiB, code, outMiB, outliers, differences }`. */
async function runDiff(dir: string, format: string): Promise<void> {
  const discard = { write: () => {} };
  const out = `${dir}.report.${format}`;
  const deps = {
    ...processDeps(new AbortController().signal),
    stdout: discard,
    stderr: { write: (t: string) => void process.stderr.write(t) },
    makeLogger: () => createLogger(discard),
  };
  const t0 = performance.now();
  const code = await runCli(["diff", "--fleet", dir, "-t", format, "-o", out], deps);
  const ms = performance.now() - t0;
  const cpu = process.cpuUsage();
  const outMiB = statSync(out).size / MIB;
  let summary = { outliers: NaN, differences: NaN };
  if (format === "json") summary = JSON.parse(readFileSync(out, "utf8")).summary;
  await rm(out, { force: true });
  process.stdout.write(
    JSON.stringify({
      ms,
      cpuMs: (cpu.user + cpu.system) / 1000,
      peakMiB: peakMiB(),
      code,
      outMiB,
      ...summary,
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

const say = (s: string) => Deno.stdout.writeSync(new TextEncoder().encode(`${s}\n`));

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)] ?? NaN;
}

if (import.meta.main) {
  const childAt = Deno.args.indexOf("--child");
  if (childAt >= 0) {
    const [mode, a, b] = Deno.args.slice(childAt + 1);
    if (mode === "write") await writeCase(a as string, b as string);
    else await runDiff(a as string, b as string);
  } else {
    const { values } = parseArgs({
      args: Deno.args,
      options: {
        cases: { type: "string", default: "3x400k,10x9MB" },
        formats: { type: "string", default: "json,table,yaml,html" },
        runs: { type: "string", default: "1" },
      },
    });
    await mkdir(join(ROOT, ".cluster-runs"), { recursive: true });
    const scratch = await mkdtemp(join(ROOT, ".cluster-runs", "bench-fleet-scale-"));
    const load = () => readFileSync("/proc/loadavg", "utf8").split(" ").slice(0, 3).join(" ");
    say(`aicr diff --fleet DIR -t FORMAT -o FILE, the whole command per process; load ${load()}`);
    try {
      for (const name of values.cases.split(",")) {
        const dir = join(scratch, name);
        const written = await child(["write", name, dir]);
        say(`  ${name}: ${written.files} files, ${(written.mib as number).toFixed(1)} MiB of YAML`);
        for (const format of values.formats.split(",")) {
          const runs: Record<string, number>[] = [];
          for (let r = 0; r < Number(values.runs); r++) {
            runs.push(await child(["diff", dir, format]));
          }
          const first = runs[0] as Record<string, number>;
          say(
            `    -t ${format}: exit ${first.code}, ${
              (median(runs.map((x) => x.ms as number)) / 1000).toFixed(2)
            } s wall, ${(median(runs.map((x) => x.cpuMs as number)) / 1000).toFixed(2)} s CPU, ${
              median(runs.map((x) => x.peakMiB as number)).toFixed(0)
            } MiB peak, report ${(first.outMiB as number).toFixed(1)} MiB${
              first.outliers === null || Number.isNaN(first.outliers)
                ? ""
                : `, ${first.outliers} outliers, ${first.differences} differences`
            }`,
          );
        }
        await rm(dir, { recursive: true, force: true });
      }
      say(`load after: ${load()}`);
    } finally {
      await rm(scratch, { recursive: true, force: true });
    }
  }
}
