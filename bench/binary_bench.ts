/**
 * Figures of the single binary: its size, the cold start of `aicr version` and of
 * `aicr agent --help` (median wall time of N fresh processes, each from an empty directory with
 * an empty environment), and the peak resident memory of an `aicr agent` run (the child's
 * `ru_maxrss` as reported by GNU time), each beside its goal.
 *
 * ```sh
 * deno run -A scripts/build.ts && deno run -A bench/binary_bench.ts            # dist/aicr, 30 runs
 * deno run -A bench/binary_bench.ts --binary /tmp/aicr --runs 50 --json       # also JSON on stdout
 * deno run -A bench/binary_bench.ts --no-floor                                # skip the floor row
 * deno run -A bench/binary_bench.ts --kubeconfig .cluster/admin.kubeconfig    # + agent with a cluster
 * ```
 *
 * A last row, the floor, times an empty script sealed on the same Node base the same way: what any
 * Node single executable costs on this host under its current load (the machine is shared).
 *
 * "Cold" means a new process every time (nothing of aicr stays resident between runs); the file is
 * in the page cache after the warm-up runs, as it is on a node that started the agent once.
 *
 * @module
 */
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdir, mkdtemp, rm, stat, writeFile } from "node:fs/promises";
import { cpus, loadavg, tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import process from "node:process";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { sealNodeSea } from "../scripts/build.ts";

const REPO_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const GNU_TIME = "/usr/bin/time";

/** Goals from issue #8. */
export const GOALS = { coldStartMs: 80, agentPeakRssMiB: 120 } as const;

/** One timed run. */
interface Timed {
  code: number | null;
  millis: number;
  stdout: string;
  stderr: string;
}

function timeRun(
  command: string,
  args: readonly string[],
  options: { cwd: string; env: Record<string, string> },
): Promise<Timed> {
  return new Promise((resolvePromise, reject) => {
    const started = performance.now();
    const child = spawn(command, args, { cwd: options.cwd, env: options.env, stdio: "pipe" });
    let stdout = "";
    let stderr = "";
    child.stdout.setEncoding("utf8").on("data", (chunk: string) => (stdout += chunk));
    child.stderr.setEncoding("utf8").on("data", (chunk: string) => (stderr += chunk));
    child.on("error", reject);
    child.on("exit", (code) => {
      const millis = performance.now() - started;
      child.on("close", () => resolvePromise({ code, millis, stdout, stderr }));
    });
  });
}

/**
 * The median of some numbers.
 *
 * @param values the numbers, not empty
 * @returns their median
 */
export function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

/** Cold-start figures of one command line. */
export interface ColdStart {
  args: string[];
  runs: number;
  medianMs: number;
  minMs: number;
  maxMs: number;
  /** Mean CPU time (user + system) per run from GNU time, 10 ms resolution; load-insensitive. */
  cpuMs?: number;
  /** Exit code of the last run; `null` when its output was not the command's. */
  code: number | null;
  /** First line of stderr of a failed run, if any. */
  error?: string;
}

async function coldStart(
  binary: string,
  args: string[],
  options: { runs: number; cwd: string; expect?: string },
): Promise<ColdStart> {
  const env: Record<string, string> = {};
  for (let i = 0; i < 3; i++) await timeRun(binary, args, { cwd: options.cwd, env });
  const times: number[] = [];
  let last: Timed | undefined;
  for (let i = 0; i < options.runs; i++) {
    last = await timeRun(binary, args, { cwd: options.cwd, env });
    times.push(last.millis);
  }
  const result: ColdStart = {
    args,
    runs: options.runs,
    medianMs: median(times),
    minMs: Math.min(...times),
    maxMs: Math.max(...times),
    code: last?.code ?? null,
  };
  if (existsSync(GNU_TIME)) {
    let cpu = 0;
    for (let i = 0; i < options.runs; i++) {
      const ran = await timeRun(GNU_TIME, ["-f", "AICR_CPU=%U %S", binary, ...args], {
        cwd: options.cwd,
        env,
      });
      const match = /AICR_CPU=([\d.]+) ([\d.]+)/.exec(ran.stderr);
      if (match) cpu += (Number(match[1]) + Number(match[2])) * 1000;
    }
    result.cpuMs = cpu / options.runs;
  }
  if (last && last.code !== 0) result.error = last.stderr.trim().split("\n")[0] ?? "";
  else if (last && options.expect && !last.stdout.includes(options.expect)) {
    // commander answers `aicr <unknown> --help` with the root help and exit 0: not a figure.
    result.code = null;
    result.error = `stdout lacks '${options.expect}'`;
  }
  return result;
}

/** Peak-memory figures of one command line. */
export interface PeakRss {
  args: string[];
  /** Peak resident set size in MiB, or `undefined` when it could not be measured. */
  mib?: number;
  code: number | null;
  /** Why there is no figure, or the first line of stderr of a failed run. */
  note?: string;
}

async function peakRss(
  binary: string,
  args: string[],
  options: { cwd: string; env: Record<string, string> },
): Promise<PeakRss> {
  if (!existsSync(GNU_TIME)) return { args, code: null, note: `${GNU_TIME} is not installed` };
  // GNU time reports the child's ru_maxrss from wait4(2) in KiB: the kernel's own high-water mark.
  const ran = await timeRun(GNU_TIME, ["-f", "AICR_MAXRSS_KIB=%M", binary, ...args], options);
  const match = /AICR_MAXRSS_KIB=(\d+)/.exec(ran.stderr);
  const exitMatch = /Command exited with non-zero status (\d+)/.exec(ran.stderr);
  const code = exitMatch ? Number(exitMatch[1]) : ran.code;
  const result: PeakRss = { args, code };
  if (match) result.mib = Number(match[1]) / 1024;
  else result.note = "GNU time printed no figure";
  if (code !== 0) {
    const line = ran.stderr.split("\n").find((l) => l.trim() && !l.startsWith("AICR_MAXRSS_KIB"));
    result.note = `exit ${code}: ${line?.trim() ?? ""}`;
  }
  return result;
}

/** Everything {@link runBench} measured. */
export interface BinaryFigures {
  binary: string;
  version: string;
  bytes: number;
  /** 1-minute load average before and after, and the core count: the figures' context. */
  load: { before: number; after: number; cores: number };
  coldStart: ColdStart[];
  peakRss: PeakRss[];
  /** An empty script sealed on the same Node base: what any Node SEA costs on this host now. */
  floor?: { coldStart: ColdStart; peakRss: PeakRss };
}

/**
 * Measures the binary.
 *
 * @param binary path of the binary
 * @param options number of timed runs per command
 * @returns the figures
 */
export async function runBench(
  binary: string,
  options: { runs?: number; floor?: boolean; kubeconfig?: string } = {},
): Promise<BinaryFigures> {
  const { runs = 30, floor = true, kubeconfig } = options;
  const cwd = await mkdtemp(join(tmpdir(), "aicr-bench-"));
  try {
    const version = await timeRun(binary, ["version"], { cwd, env: {} });
    const figures: BinaryFigures = {
      binary,
      version: version.stdout.trim().split("\n").join(", "),
      bytes: (await stat(binary)).size,
      load: { before: loadavg()[0]!, after: 0, cores: cpus().length },
      coldStart: [],
      peakRss: [],
    };
    figures.coldStart.push(await coldStart(binary, ["version"], { runs, cwd, expect: "aicr " }));
    figures.coldStart.push(
      await coldStart(binary, ["agent", "--help"], { runs, cwd, expect: "Usage: aicr agent" }),
    );
    // The agent as a pod would run it, minus the cluster: it collects from this host and prints
    // the Snapshot on stdout (the Kubernetes collectors find no in-cluster config and report so).
    const agentEnv: Record<string, string> = { NODE_NAME: "bench-node" };
    figures.peakRss.push(await peakRss(binary, ["version"], { cwd, env: {} }));
    figures.peakRss.push(await peakRss(binary, ["agent"], { cwd, env: agentEnv }));
    if (kubeconfig) {
      // The same agent with a cluster: the K8s collectors load the client and read the API.
      const withCluster = await peakRss(binary, ["agent"], {
        cwd,
        env: { ...agentEnv, KUBECONFIG: kubeconfig },
      });
      withCluster.args = ["agent", "(KUBECONFIG)"];
      figures.peakRss.push(withCluster);
    }
    if (floor) {
      const empty = join(cwd, "empty.cjs");
      await writeFile(empty, "");
      const floorBin = join(cwd, "floor");
      await sealNodeSea(empty, floorBin, { work: cwd });
      figures.floor = {
        coldStart: await coldStart(floorBin, [], { runs, cwd }),
        peakRss: await peakRss(floorBin, [], { cwd, env: {} }),
      };
      await rm(floorBin);
    }
    figures.load.after = loadavg()[0]!;
    return figures;
  } finally {
    await rm(cwd, { recursive: true, force: true });
  }
}

function mark(ok: boolean | undefined): string {
  return ok === undefined ? "?" : ok ? "ok" : "OVER";
}

/**
 * Renders the figures as a Markdown table with the goals beside them.
 *
 * @param figures what {@link runBench} measured
 * @returns the table
 */
export function formatTable(figures: BinaryFigures): string {
  const rows: string[][] = [
    ["binary size", `${(figures.bytes / (1 << 20)).toFixed(1)} MiB (${figures.bytes} B)`, "-", ""],
  ];
  for (const cold of figures.coldStart) {
    const failed = cold.code !== 0 ? ` (exit ${cold.code}: ${cold.error})` : "";
    rows.push([
      `cold start \`aicr ${cold.args.join(" ")}\``,
      `${cold.medianMs.toFixed(1)} ms median of ${cold.runs} (min ${cold.minMs.toFixed(1)}, max ${
        cold.maxMs.toFixed(1)
      }; cpu ${cold.cpuMs === undefined ? "n/a" : `${cold.cpuMs.toFixed(0)} ms`})${failed}`,
      `< ${GOALS.coldStartMs} ms`,
      cold.code === 0 ? mark(cold.medianMs < GOALS.coldStartMs) : "FAILED",
    ]);
  }
  for (const peak of figures.peakRss) {
    const isAgent = peak.args[0] === "agent";
    rows.push([
      `peak RSS \`aicr ${peak.args.join(" ")}\``,
      `${peak.mib === undefined ? "n/a" : `${peak.mib.toFixed(1)} MiB`}${
        peak.note ? ` (${peak.note})` : ""
      }`,
      isAgent ? `< ${GOALS.agentPeakRssMiB} MiB` : "-",
      peak.code !== 0
        ? "FAILED"
        : isAgent
        ? mark(peak.mib === undefined ? undefined : peak.mib < GOALS.agentPeakRssMiB)
        : "",
    ]);
  }
  if (figures.floor) {
    const { coldStart: cold, peakRss: peak } = figures.floor;
    rows.push([
      "floor: empty Node SEA, same base",
      `${cold.medianMs.toFixed(1)} ms median (min ${cold.minMs.toFixed(1)}; cpu ${
        cold.cpuMs === undefined ? "n/a" : `${cold.cpuMs.toFixed(0)} ms`
      }), ${peak.mib === undefined ? "n/a" : `${peak.mib.toFixed(1)} MiB`}`,
      "-",
      "",
    ]);
  }
  const header = ["figure", "measured", "goal", ""];
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (cells: string[]) => `| ${cells.map((c, i) => c.padEnd(widths[i]!)).join(" | ")} |`;
  return [
    `${figures.binary}: ${figures.version}`,
    `load average ${figures.load.before.toFixed(2)} -> ${
      figures.load.after.toFixed(2)
    } on ${figures.load.cores} cores`,
    "",
    line(header),
    `|${widths.map((w) => "-".repeat(w + 2)).join("|")}|`,
    ...rows.map(line),
  ].join("\n");
}

async function main(args: string[]): Promise<number> {
  const { values } = parseArgs({
    args,
    options: {
      binary: { type: "string", default: join(REPO_ROOT, "dist", "aicr") },
      runs: { type: "string", default: "30" },
      json: { type: "boolean", default: false },
      "no-floor": { type: "boolean", default: false },
      kubeconfig: { type: "string" },
    },
  });
  const binary = resolve(values.binary);
  if (!existsSync(binary)) {
    process.stderr.write(
      `Cannot benchmark '${binary}' as it does not exist: run 'deno run -A scripts/build.ts' first\n`,
    );
    return 1;
  }
  const runs = Number(values.runs);
  if (!Number.isInteger(runs) || runs < 1) {
    process.stderr.write(
      `Cannot benchmark as '--runs' must be a positive integer: current value is '${values.runs}'\n`,
    );
    return 2;
  }
  const figures = await runBench(binary, {
    runs,
    floor: !values["no-floor"],
    ...(values.kubeconfig ? { kubeconfig: resolve(values.kubeconfig) } : {}),
  });
  process.stdout.write(formatTable(figures) + "\n");
  const outDir = join(REPO_ROOT, "bench", ".out");
  await mkdir(outDir, { recursive: true });
  await writeFile(join(outDir, "binary.json"), JSON.stringify(figures, null, 2) + "\n");
  if (values.json) process.stdout.write(JSON.stringify(figures, null, 2) + "\n");
  return 0;
}

if (import.meta.main) {
  process.exitCode = await main(process.argv.slice(2));
}
