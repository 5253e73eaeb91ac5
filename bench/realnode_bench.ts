/**
 * The real-kubelet lane beside the kubelet stand-in, measured side by side in one run (figures
 * only, no asserts; runs alternate so both see the same machine load):
 *
 * - `start_ms`: from nothing to usable. Stand-in: control plane + stand-in nodes registered.
 *   Lane: netns, control plane in it, images built offline and imported, containerd and real
 *   kubelets up, nodes Ready, the GPU node's `nvidia.com/gpu` allocatable.
 * - `job_true_ms`: a Job running `true`, create → Complete (stand-in: the host's `true`; lane:
 *   `/bin/true` in a real container from the lane's minimal image).
 * - `snapshot_ms`: a default `aicr snapshot` end to end with the built binary (the lane's run
 *   inside its netns), until the pod is gone.
 *
 * ```sh
 * deno task bench:realnode                 # 2 starts, 5 Jobs and 5 snapshots each
 * deno task bench:realnode --starts=1 --runs=3
 * ```
 *
 * Writes the figures as JSON to `bench/.out/realnode.json` too.
 *
 * @module
 */
import { mkdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { REPO_ROOT } from "../tests/cluster/cluster.ts";
import { createNamespace, type TestCluster, useTestCluster } from "../tests/cluster/harness.ts";
import { aicr, AICR_BIN } from "../tests/e2e/_aicr.ts";
import { jobTrue } from "./_job_true.ts";
import {
  laneUnavailable,
  PULL_SECRET,
  type RealNodeEnv,
  useRealNodeLane,
} from "../tests/realnode/harness.ts";
import { TRUE_IMAGE } from "../tests/realnode/lane.ts";

const { values } = parseArgs({
  args: Deno.args,
  options: {
    starts: { type: "string", default: "2" },
    runs: { type: "string", default: "5" },
  },
});
const starts = Number(values.starts);
const runs = Number(values.runs);

function say(line: string): void {
  // deno-lint-ignore no-console
  console.log(line);
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)] ?? NaN;
}

function line(name: string, standIn: number[], lane: number[]): void {
  const fmt = (xs: number[]) =>
    `median ${Math.round(median(xs))} ms [${xs.map(Math.round).join(", ")}]`;
  say(
    `${name}: stand-in ${fmt(standIn)} | real kubelet ${fmt(lane)} | ratio ${
      (median(lane) / median(standIn)).toFixed(2)
    }`,
  );
}

const unavailable = laneUnavailable();
if (unavailable) {
  say(unavailable);
  Deno.exit(1);
}

const figures: Record<string, number[]> = {
  start_standin_ms: [],
  start_lane_ms: [],
  job_true_standin_ms: [],
  job_true_lane_ms: [],
  snapshot_standin_ms: [],
  snapshot_lane_ms: [],
};
// Fresh starts, alternating; the last of each stays for the runs.
let standIn: TestCluster | undefined;
let lane: RealNodeEnv | undefined;
try {
  for (let i = 0; i < starts; i++) {
    await standIn?.stop();
    await lane?.stop();
    standIn = lane = undefined;
    let t0 = performance.now();
    // One amd64 GPU node and a system node: an arm64 one's agent would run under qemu-user here.
    // A cluster of its own (a start is what is measured), even beside an `AICR_CLUSTER_DIR` one.
    standIn = await useTestCluster({
      kubelet: { nodes: { "p5-h100": 1, "system-m7i": 1 }, aicrBin: AICR_BIN },
      own: true,
    });
    figures.start_standin_ms!.push(performance.now() - t0);
    t0 = performance.now();
    Deno.env.delete("AICR_REALNODE_DIR");
    lane = await useRealNodeLane({ nodes: 2 });
    figures.start_lane_ms!.push(performance.now() - t0);
  }
  const s = standIn!;
  const l = lane!;
  const nsS = await createNamespace(s.admin, "bench-rn");
  const nsL = await createNamespace(l.admin, "bench-rn");
  await l.createPullSecret(nsL);
  for (let i = 0; i < runs; i++) {
    figures.job_true_standin_ms!.push(
      await jobTrue(s.admin, nsS, `true-${i}`, "busybox:1.36", ["true"]),
    );
    figures.job_true_lane_ms!.push(
      await jobTrue(l.admin, nsL, `true-${i}`, TRUE_IMAGE, ["/bin/true"]),
    );
    let t0 = performance.now();
    const a = await aicr(["snapshot", "--kubeconfig", s.cluster.adminKubeconfig, "-n", nsS]);
    figures.snapshot_standin_ms!.push(performance.now() - t0);
    if (a.code !== 0) throw new Error(`stand-in aicr snapshot failed (${a.code}):\n${a.stderr}`);
    t0 = performance.now();
    // The lane's nodes pull the binary's own image from the lane's registry, as a cluster would.
    const b = await l.aicr([
      "snapshot",
      "--kubeconfig",
      l.kubeconfig,
      "-n",
      nsL,
      "--image",
      l.image,
      "--image-pull-secret",
      PULL_SECRET,
    ]);
    figures.snapshot_lane_ms!.push(performance.now() - t0);
    if (b.code !== 0) throw new Error(`lane aicr snapshot failed (${b.code}):\n${b.stderr}`);
  }
  say(`real-kubelet lane vs kubelet stand-in, ${starts} start(s), ${runs} run(s) each`);
  line("start (to usable nodes)", figures.start_standin_ms!, figures.start_lane_ms!);
  line(
    "Job running true, create -> Complete",
    figures.job_true_standin_ms!,
    figures.job_true_lane_ms!,
  );
  line("aicr snapshot end to end", figures.snapshot_standin_ms!, figures.snapshot_lane_ms!);
  await mkdir(join(REPO_ROOT, "bench", ".out"), { recursive: true });
  await writeFile(
    join(REPO_ROOT, "bench", ".out", "realnode.json"),
    JSON.stringify({ starts, runs, figures }, null, 2) + "\n",
  );
} finally {
  await standIn?.stop();
  await lane?.stop();
}
