/**
 * `aicr snapshot` end to end beside its floor, measured side by side in one run on the
 * local cluster (figures only, no asserts):
 *
 * - `floor`: create a Job that runs `true` and wait for its Complete condition (the
 *   control plane and kubelet stand-in's own cost of one pod);
 * - `aicr`: a full `aicr snapshot` with the built binary (gate, RBAC, Job, the agent's
 *   collection in the pod, read, cleanup until the pod is gone).
 *
 * Runs alternate so both see the same machine load. Goal: aicr adds under 1.5 s. The cluster has
 * one amd64 GPU node and a system node (an arm64 one would run its agent under emulation here).
 *
 * ```sh
 * deno run -A bench/snapshot_bench.ts --runs=5     # reuses $AICR_CLUSTER_DIR if set
 * ```
 *
 * @module
 */
import { parseArgs } from "node:util";
import { createNamespace, useTestCluster } from "../tests/cluster/harness.ts";
import { aicr, AICR_BIN } from "../tests/e2e/_aicr.ts";
import { jobTrue } from "./_job_true.ts";

const { values } = parseArgs({
  args: Deno.args,
  options: { runs: { type: "string", default: "5" } },
});
const runs = Number(values.runs);

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)] ?? NaN;
}

function say(line: string): void {
  // deno-lint-ignore no-console
  console.log(line);
}

// One amd64 GPU node and one system node, as the other snapshot benches: with the default nodes the
// scheduler may pick the GB200 node, whose arm64 agent runs under qemu-user here (seconds, not the
// tool's cost).
const env = await useTestCluster({
  kubelet: { nodes: { "p5-h100": 1, "system-m7i": 1 }, aicrBin: AICR_BIN },
});
try {
  const ns = await createNamespace(env.admin, "bench-snapshot");
  const floor: number[] = [];
  const full: number[] = [];
  for (let i = 0; i < runs; i++) {
    floor.push(await jobTrue(env.admin, ns, `true-${i}`));

    const t0 = performance.now();
    const run = await aicr(["snapshot", "--kubeconfig", env.cluster.adminKubeconfig, "-n", ns]);
    full.push(performance.now() - t0);
    if (run.code !== 0) throw new Error(`aicr snapshot failed (exit ${run.code}):\n${run.stderr}`);
  }
  const f = median(floor);
  const a = median(full);
  say(
    `floor (Job running true): median ${Math.round(f)} ms, runs [${
      floor.map(Math.round).join(", ")
    }]`,
  );
  say(
    `aicr snapshot end to end: median ${Math.round(a)} ms, runs [${
      full.map(Math.round).join(", ")
    }]`,
  );
  say(
    `aicr adds ${Math.round(a - f)} ms over the floor (goal: under 1500 ms); ratio ${
      (a / f).toFixed(2)
    }`,
  );
  await env.admin.request("DELETE", `/api/v1/namespaces/${ns}`);
} finally {
  await env.stop();
}
