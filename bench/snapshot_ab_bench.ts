/**
 * Two builds of aicr side by side: `aicr snapshot -o file` on the local cluster, runs alternating
 * (A, B, A, B, ...) so both see the same machine, each timed from spawn to exit with its CPU
 * (user + system) and peak RSS from GNU time. For a change to the CLI (its transport, its wait):
 * the agent in the pod is the stand-in's binary (`--agent`, default A) for both, so only the CLI
 * differs. With `--busy`, one core is kept busy by `yes > /dev/null` beside the runs. Figures
 * only, no asserts.
 *
 * ```sh
 * git worktree add /tmp/before HEAD~1 && (cd /tmp/before && deno task build)
 * deno task build
 * deno run -A bench/snapshot_ab_bench.ts --a=/tmp/before/dist/aicr --b=dist/aicr --runs=15
 * ```
 *
 * @module
 */
import { parseArgs } from "node:util";
import { mkdtemp, rm } from "node:fs/promises";
import { join, resolve } from "node:path";
import { tmpdir } from "node:os";
import { createNamespace, useTestCluster } from "../tests/cluster/harness.ts";

const { values } = parseArgs({
  args: Deno.args,
  options: {
    a: { type: "string" },
    b: { type: "string" },
    agent: { type: "string" },
    runs: { type: "string", default: "15" },
    busy: { type: "boolean", default: false },
  },
});
if (!values.a || !values.b) {
  throw new Error("give both builds: --a=<aicr binary> --b=<aicr binary>");
}
const builds = { A: resolve(values.a), B: resolve(values.b) };
const runs = Number(values.runs);

function say(line: string): void {
  // deno-lint-ignore no-console
  console.log(line);
}

function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 ? s[mid] as number : ((s[mid - 1] as number) + (s[mid] as number)) / 2;
}

/** One run: wall ms, CPU ms, peak RSS MiB, and the API connections its `--debug` lines name. */
async function oneRun(binary: string, kubeconfig: string, ns: string, out: string) {
  const spawned = performance.now();
  const result = await new Deno.Command("/usr/bin/time", {
    args: [
      "-f",
      "TIME %U %S %M",
      binary,
      "--debug",
      "snapshot",
      "--kubeconfig",
      kubeconfig,
      "-n",
      ns,
      "-o",
      out,
    ],
    env: { HOME: "/nonexistent", PATH: "/usr/bin:/bin" },
    clearEnv: true,
    stdout: "null",
    stderr: "piped",
  }).output();
  const wall = performance.now() - spawned;
  const stderr = new TextDecoder().decode(result.stderr);
  if (result.code !== 0) throw new Error(`${binary} snapshot failed:\n${stderr.slice(-3000)}`);
  const time = /TIME (\S+) (\S+) (\d+)/.exec(stderr);
  return {
    wall,
    cpu: (Number(time?.[1]) + Number(time?.[2])) * 1000,
    rss: Number(time?.[3]) / 1024,
    connections: stderr.split("\n").filter((l) => l.includes("connected to the API server"))
      .length,
  };
}

// A cluster of its own, with the agent binary asked for, even beside an `AICR_CLUSTER_DIR` one.
const env = await useTestCluster({
  kubelet: { nodes: { "p5-h100": 1, "system-m7i": 1 }, aicrBin: resolve(values.agent ?? builds.A) },
  own: true,
});
const dir = await mkdtemp(join(tmpdir(), "aicr-ab-"));
try {
  const ns = await createNamespace(env.admin, "bench-ab");
  const kubeconfig = env.cluster.adminKubeconfig;
  type Run = Awaited<ReturnType<typeof oneRun>>;
  const figures: Record<"A" | "B", Run[]> = { A: [], B: [] };
  for (const [name, binary] of Object.entries(builds)) {
    await oneRun(binary, kubeconfig, ns, join(dir, `warm-${name}.yaml`));
  }
  const loadBefore = Deno.loadavg()[0] ?? NaN;
  const busy = values.busy
    ? new Deno.Command("sh", { args: ["-c", "exec yes > /dev/null"] }).spawn()
    : undefined;
  try {
    for (let i = 0; i < runs; i++) {
      for (const name of ["A", "B"] as const) {
        figures[name].push(await oneRun(builds[name], kubeconfig, ns, join(dir, `${name}.yaml`)));
      }
    }
  } finally {
    busy?.kill("SIGKILL");
    await busy?.status;
  }
  say(
    `${runs} alternating runs each${values.busy ? ", one core busy" : ""}, load average ${
      loadBefore.toFixed(2)
    } -> ${(Deno.loadavg()[0] ?? NaN).toFixed(2)}`,
  );
  for (const name of ["A", "B"] as const) {
    const f = figures[name];
    say(
      `${name} ${builds[name]}: wall ${median(f.map((r) => r.wall)).toFixed(0)} ms, CPU ${
        median(f.map((r) => r.cpu)).toFixed(0)
      } ms, peak RSS ${median(f.map((r) => r.rss)).toFixed(1)} MiB, API connections said ${
        median(f.map((r) => r.connections))
      }`,
    );
    say(`  walls [${f.map((r) => Math.round(r.wall)).join(", ")}]`);
  }
  const ratio = (k: "wall" | "cpu") =>
    (median(figures.B.map((r) => r[k])) / median(figures.A.map((r) => r[k]))).toFixed(2);
  say(`B/A: wall ${ratio("wall")}x, CPU ${ratio("cpu")}x`);
} finally {
  await rm(dir, { recursive: true, force: true });
  await env.stop();
}
