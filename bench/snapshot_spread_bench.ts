/**
 * How steady `aicr snapshot` end to end is (issue #30): N consecutive runs on the local cluster,
 * first on a quiet machine, then with one core kept busy by `yes > /dev/null` beside it (started
 * and stopped here), each printing p50, p90 and p90/p50 (goal: p90 at most 1.25x p50), and a
 * per-phase breakdown from the run's own `--debug --log-json` lines (times on one clock):
 *
 * | phase     | from                                 | to                                    |
 * | --------- | ------------------------------------ | ------------------------------------- |
 * | start     | the process is spawned               | `snapshot agent run` (reads, gate)    |
 * | create    | `snapshot agent run`                 | `agent Job created` (RBAC, ConfigMap) |
 * | wait      | `agent Job created`                  | `agent finished; reading its snapshot` |
 * | read      | `agent finished; ...`                | `snapshot read` (and the agent's report) |
 * | deliver   | `snapshot read`                      | `snapshot saved to file`              |
 * | cleanup   | `snapshot saved to file`             | `cleanup: done`                       |
 * | exit      | `cleanup: done`                      | the process has exited                |
 *
 * ```sh
 * AICR_CLUSTER_DIR=$PWD/.cluster-mine deno run -A bench/snapshot_spread_bench.ts --runs=20
 * ```
 *
 * @module
 */
import { parseArgs } from "node:util";
import { mkdtemp, rm } from "node:fs/promises";
import { join } from "node:path";
import { tmpdir } from "node:os";
import { createNamespace, useTestCluster } from "../tests/cluster/harness.ts";
import { AICR_BIN } from "../tests/e2e/_aicr.ts";

const { values } = parseArgs({
  args: Deno.args,
  options: { runs: { type: "string", default: "20" } },
});
const runs = Number(values.runs);

const PHASES = ["start", "create", "wait", "read", "deliver", "cleanup", "exit"] as const;
/** The log line that ends each phase (the last phase ends at the process's exit). */
const MARKS = [
  "snapshot agent run",
  "agent Job created",
  "agent finished; reading its snapshot",
  "snapshot read",
  "snapshot saved to file",
  "cleanup: done",
];

function say(line: string): void {
  // deno-lint-ignore no-console
  console.log(line);
}

function percentile(xs: readonly number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)] ?? NaN;
}

/** One run: its end-to-end time and phases, in ms. */
async function oneRun(
  kubeconfig: string,
  ns: string,
  out: string,
): Promise<{ total: number; phases: number[] }> {
  const spawned = Date.now();
  const child = new Deno.Command(AICR_BIN, {
    args: ["--debug", "--log-json", "snapshot", "--kubeconfig", kubeconfig, "-n", ns, "-o", out],
    env: { HOME: "/nonexistent" },
    clearEnv: true,
    stdout: "null",
    stderr: "piped",
  }).output();
  const result = await child;
  const exited = Date.now();
  const stderr = new TextDecoder().decode(result.stderr);
  if (result.code !== 0) throw new Error(`aicr snapshot failed (exit ${result.code}):\n${stderr}`);
  const times = new Map<string, number>();
  for (const line of stderr.split("\n")) {
    if (!line.startsWith("{")) continue;
    const entry = JSON.parse(line) as { time: string; msg: string; component?: string };
    if (entry.component) continue; // the agent's own lines
    const mark = MARKS.find((m) => entry.msg.startsWith(m));
    if (mark && !times.has(mark)) times.set(mark, Date.parse(entry.time));
  }
  const points = [spawned, ...MARKS.map((m) => times.get(m) ?? NaN), exited];
  return {
    total: exited - spawned,
    phases: PHASES.map((_, i) => (points[i + 1] as number) - (points[i] as number)),
  };
}

async function series(label: string, kubeconfig: string, ns: string, dir: string) {
  const loadBefore = Deno.loadavg()[0] ?? NaN;
  const totals: number[] = [];
  const phases: number[][] = PHASES.map(() => []);
  for (let i = 0; i < runs; i++) {
    const run = await oneRun(kubeconfig, ns, join(dir, `${label}-${i}.yaml`));
    totals.push(run.total);
    run.phases.forEach((ms, p) => phases[p]?.push(ms));
  }
  const p50 = percentile(totals, 50);
  const p90 = percentile(totals, 90);
  say(
    `${label}: ${runs} runs, p50 ${Math.round(p50)} ms, p90 ${Math.round(p90)} ms, p90/p50 ${
      (p90 / p50).toFixed(2)
    }x (goal <= 1.25x), max ${Math.round(Math.max(...totals))} ms; load average ${
      loadBefore.toFixed(2)
    } -> ${(Deno.loadavg()[0] ?? NaN).toFixed(2)}`,
  );
  say(`  runs [${totals.map(Math.round).join(", ")}]`);
  for (const [p, name] of PHASES.entries()) {
    const xs = phases[p] ?? [];
    say(
      `  ${name.padEnd(8)} p50 ${String(Math.round(percentile(xs, 50))).padStart(5)} ms  p90 ${
        String(Math.round(percentile(xs, 90))).padStart(5)
      } ms  max ${String(Math.round(Math.max(...xs))).padStart(5)} ms`,
    );
  }
}

// The same nodes as `bench:upstream`'s cluster rows: one H100 node (amd64) for the agent, one
// system node; no GB200 node, whose agent would run under qemu-user here. A cluster of its own
// even beside a running `AICR_CLUSTER_DIR` one, whose nodes (the test set has a GB200) would
// put some runs on the arm64 node.
const env = await useTestCluster({
  kubelet: { nodes: { "p5-h100": 1, "system-m7i": 1 }, aicrBin: AICR_BIN },
  own: true,
});
const dir = await mkdtemp(join(tmpdir(), "aicr-spread-"));
try {
  const ns = await createNamespace(env.admin, "bench-spread");
  const kubeconfig = env.cluster.adminKubeconfig;
  // One warm-up run (page cache, the kubelet's first pull of the image).
  await oneRun(kubeconfig, ns, join(dir, "warm.yaml"));
  await series("quiet", kubeconfig, ns, dir);
  const busy = new Deno.Command("sh", { args: ["-c", "exec yes > /dev/null"] }).spawn();
  try {
    await series("one core busy (yes > /dev/null)", kubeconfig, ns, dir);
  } finally {
    busy.kill("SIGKILL");
    await busy.status;
  }
} finally {
  await rm(dir, { recursive: true, force: true });
  await env.stop();
}
