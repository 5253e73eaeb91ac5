/**
 * Benchmark of the DaemonSet mode on 50 simulated nodes (figures only, never asserted):
 *
 * - `install_ms`: `aicr daemonset install --all-nodes` (the built binary) until every pod is
 *   Ready (the kubelet stand-in's Ready: the process runs; it runs no probes).
 * - `first_full_fetch_ms`: from install's return until a fetch finds every node ok (each
 *   daemon's first collection included).
 * - `fleet_fetch_ms`: `fetchFleet()` in process over warm daemon caches, and the whole
 *   `aicr daemonset fetch -o <dir>` command (process start, token, pod list, 50 fetches, 50
 *   files), printed beside the goal: under 3 s.
 * - `uninstall_ms`: `aicr daemonset uninstall` until nothing labelled is left.
 *
 * ```sh
 * deno run -A scripts/build.ts --out .cluster-runs/bench/aicr
 * AICR_BIN=.cluster-runs/bench/aicr deno run -A bench/daemonset_bench.ts [--rounds=5] [--nodes=50]
 * ```
 *
 * `--simulate=N` (e.g. 1000) measures the fetch alone at a scale the local cluster cannot hold:
 * N daemons served from one child process (`_fleet_sim_servers.ts`: real daemon apps, real TLS
 * with the installer's server name, each on its own loopback address, the real caching
 * authorizer over a counting fake TokenReview/SubjectAccessReview), found through an in-memory
 * API (DaemonSet, N pods with their loopback IPs, the CA ConfigMap, TokenRequest), and fetched
 * by the whole `aicr daemonset fetch` command (`_fleet_fetch_child.ts`, one process per run so
 * each run's peak memory is its own) with the real direct transport, at several concurrency
 * bounds and outputs: `dir` (`-o dir/`), `file` (`-o fleet.yaml`, one stream) and `hold` (the
 * fetch as before the streaming writer: every snapshot kept, then written). It prints time per
 * run, the bytes moved, the daemons' reviews (the API server's load per fresh token) and each
 * run's peak RSS; goal: 1,000 nodes under 10 s, with memory bounded.
 *
 * ```sh
 * deno run -A bench/daemonset_bench.ts --simulate=1000 [--rounds=3] [--concurrency=16,64,256] \
 *   [--outputs=dir,file,hold] [--topology=own|cluster]
 * ```
 *
 * `--topology=own` (the default) gives each daemon the snapshot a daemon serves now:
 * NodeTopology of its own Node (`foldOwnTopology`), so a snapshot's size stays constant with N;
 * the fetch lists the simulated fleet's nodes once from the in-memory API server as the reader
 * and writes the cluster's topology once (`_cluster-topology.yaml`, counted among the files).
 * `cluster` serves the whole cluster's topology in every snapshot, as daemons did before.
 *
 * The cluster's state folder is `.cluster-runs/bench-daemonset-<pid>/` under the repository
 * (removed afterwards), or `AICR_CLUSTER_DIR` to reuse a running cluster and its nodes.
 *
 * @module
 */
import { mkdir, mkdtemp, readdir, rm, stat } from "node:fs/promises";
import { dirname, join } from "node:path";
import process from "node:process";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { fetchFleet } from "../controller/mod.ts";
import { connectKube } from "../kube/mod.ts";
import { createLogger } from "../log.ts";
import { FLEET_TOPOLOGY_FILE } from "../snapshot/mod.ts";
import { createNamespace, useTestCluster } from "../tests/cluster/harness.ts";
import { aicr, AICR_BIN } from "../tests/e2e/_aicr.ts";

const ROOT = dirname(dirname(fileURLToPath(import.meta.url)));
const enc = new TextEncoder();
const out = (s: string) => Deno.stdout.writeSync(enc.encode(`${s}\n`));
const GOAL_MS = 3000;

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)] ?? NaN;
}

function report(name: string, xs: number[], goal?: number): void {
  const m = median(xs);
  out(
    `${name}: median ${Math.round(m)} ms, min ${Math.round(Math.min(...xs))} ms, max ${
      Math.round(Math.max(...xs))
    } ms, runs [${xs.map(Math.round).join(", ")}]${
      goal === undefined ? "" : `  (goal: under ${goal} ms: ${m < goal ? "met" : "NOT met"})`
    }`,
  );
}

/** `--simulate=N`: the fleet fetch against N simulated daemons (see the module doc). */
async function simulate(
  total: number,
  rounds: number,
  concurrencies: number[],
  outputs: string[],
  topology: string,
): Promise<void> {
  const namespace = "aicr-bench";
  const child = new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "-A",
      "--no-prompt",
      new URL("./_fleet_sim_servers.ts", import.meta.url).pathname,
      String(total),
    ],
    env: { AICR_SIM_NAMESPACE: namespace, AICR_SIM_TOPOLOGY: topology },
    stdin: "piped",
    stdout: "piped",
    stderr: "inherit",
  }).spawn();
  const lines = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
  const writer = child.stdin.getWriter();
  let buffered = "";
  const next = async () => {
    while (!buffered.includes("\n")) {
      const { value, done } = await lines.read();
      if (done) throw new Error("the simulated daemons exited early");
      buffered += value;
    }
    const at = buffered.indexOf("\n");
    const line = buffered.slice(0, at);
    buffered = buffered.slice(at + 1);
    return JSON.parse(line);
  };
  const s0 = performance.now();
  const sim = await next() as {
    ca: string;
    port: number;
    nodes: { node: string; ip: string }[];
    snapshotBytes: number;
  };
  out(
    `simulated ${sim.nodes.length} daemons in one process, topology ${topology} (${
      Math.round(performance.now() - s0)
    } ms to start), one snapshot ${(sim.snapshotBytes / 1024).toFixed(0)} KiB as JSON`,
  );
  try {
    const input = new TextEncoder().encode(JSON.stringify({ ...sim, namespace }));
    const scratch = await mkdtemp(join(ROOT, ".cluster-runs", "bench-fetch-"));
    const ask = async (concurrency: number, output: string, hold: boolean) => {
      const fetcher = new Deno.Command(Deno.execPath(), {
        args: [
          "run",
          "-A",
          "--no-prompt",
          new URL("./_fleet_fetch_child.ts", import.meta.url).pathname,
          String(concurrency),
          output,
          ...(hold ? ["--hold"] : []),
        ],
        stdin: "piped",
        stdout: "piped",
        stderr: "inherit",
      }).spawn();
      const w = fetcher.stdin.getWriter();
      await w.write(input);
      await w.close();
      const done = await fetcher.output();
      return JSON.parse(new TextDecoder().decode(done.stdout)) as {
        ms: number;
        cpuMs: number;
        peakMiB: number;
        code: number;
      };
    };
    try {
      for (const concurrency of concurrencies) {
        for (const kind of outputs) {
          const times: number[] = [];
          const peaks: number[] = [];
          const cpus: number[] = [];
          const codes = new Set<number>();
          let files = 0;
          let topologyBytes = 0;
          for (let round = 0; round < rounds; round++) {
            const target = kind === "file" ? join(scratch, "fleet.yaml") : `${scratch}/fleet/`;
            const run = await ask(concurrency, target, kind === "hold");
            times.push(run.ms);
            peaks.push(run.peakMiB);
            cpus.push(run.cpuMs);
            codes.add(run.code);
            files = kind === "file" ? 1 : (await readdir(join(scratch, "fleet")).catch(() => []))
              .length;
            topologyBytes = (await stat(join(scratch, "fleet", FLEET_TOPOLOGY_FILE)).catch(() =>
              undefined
            ))?.size ?? topologyBytes;
            await rm(join(scratch, "fleet"), { recursive: true, force: true });
            await rm(join(scratch, "fleet.yaml"), { force: true });
          }
          await writer.write(new TextEncoder().encode("stats\n"));
          const stats = await next() as { reviews: number; checks: number };
          const what = kind === "hold"
            ? "fetchFleet keeping every snapshot, then writeFleet -o dir/ (as before)"
            : kind === "file"
            ? "aicr daemonset fetch -o fleet.yaml (one stream)"
            : "aicr daemonset fetch -o dir/";
          report(
            `${what}, ${sim.nodes.length} nodes, concurrency ${concurrency}, exit ${
              [...codes].join("/")
            }, ${files} file(s)${
              topologyBytes > 0
                ? ` (${FLEET_TOPOLOGY_FILE} ${(topologyBytes / 1024).toFixed(0)} KiB)`
                : ""
            }, ~${
              (sim.snapshotBytes * sim.nodes.length / 1024 / 1024).toFixed(0)
            } MiB moved; fetch process CPU median ${
              (median(cpus) / 1000).toFixed(1)
            } s; peak RSS median ${median(peaks).toFixed(0)} MiB (max ${
              Math.max(...peaks).toFixed(0)
            }); daemons' TokenReviews so far ${stats.reviews}`,
            times,
            10_000,
          );
        }
      }
    } finally {
      await rm(scratch, { recursive: true, force: true });
    }
  } finally {
    await writer.write(new TextEncoder().encode("quit\n")).catch(() => {});
    await writer.close().catch(() => {});
    await lines.cancel().catch(() => {});
    await child.status;
  }
}

if (import.meta.main && Deno.args.some((a) => a.startsWith("--simulate"))) {
  const { values } = parseArgs({
    args: Deno.args,
    options: {
      simulate: { type: "string", default: "1000" },
      rounds: { type: "string", default: "3" },
      concurrency: { type: "string", default: "16,64,256" },
      outputs: { type: "string", default: "dir,file,hold" },
      topology: { type: "string", default: "own" },
    },
  });
  await mkdir(join(ROOT, ".cluster-runs"), { recursive: true });
  await simulate(
    Number(values.simulate),
    Number(values.rounds),
    values.concurrency.split(",").map(Number),
    values.outputs.split(","),
    values.topology,
  );
} else if (import.meta.main) {
  const { values } = parseArgs({
    args: Deno.args,
    options: {
      rounds: { type: "string", default: "5" },
      nodes: { type: "string", default: "50" },
      concurrency: { type: "string", default: "16" },
    },
  });
  const total = Number(values.nodes);
  const gpu = Math.floor(total * 3 / 5);
  const nodes = {
    "p5-h100": Math.ceil(gpu / 2),
    "p6-gb200": Math.floor(gpu / 2),
    "system-m7i": total - gpu,
  };
  let stateDir: string | undefined;
  if (!Deno.env.get("AICR_CLUSTER_DIR")) {
    await mkdir(join(ROOT, ".cluster-runs"), { recursive: true });
    stateDir = await mkdtemp(join(ROOT, ".cluster-runs", "bench-daemonset-"));
    // useTestCluster() starts its own in a temporary folder; point it under the repository.
    process.env.TMPDIR = stateDir;
  }
  out(`binary: ${AICR_BIN}`);
  const t0 = performance.now();
  const env = await useTestCluster({ kubelet: { nodes } });
  out(`cluster_with_${env.nodes.length}_nodes_ms: ${Math.round(performance.now() - t0)}`);
  const kubeconfig = env.cluster.adminKubeconfig;
  const ns = await createNamespace(env.admin, "bench-ds");
  const dir = join(env.cluster.stateDir, "bench-fleet");
  try {
    const i0 = performance.now();
    const install = await aicr([
      "daemonset",
      "install",
      "--kubeconfig",
      kubeconfig,
      "-n",
      ns,
      "--image",
      "aicr:dev",
      "--all-nodes",
      "--timeout",
      "5m",
    ]);
    const installMs = performance.now() - i0;
    if (install.code !== 0) throw new Error(`install failed: ${install.stderr}`);
    out(`install_ms: ${Math.round(installMs)} (${env.nodes.length} pods Ready)`);

    const kube = connectKube({ kubeconfig }, (name) => process.env[name]);
    const log = createLogger({ write: () => {} });
    const concurrency = Number(values.concurrency);
    const f0 = performance.now();
    for (;;) {
      const fleet = await fetchFleet({ kube, log }, { namespace: ns, concurrency });
      const ok = fleet.results.filter((r) => r.status === "ok").length;
      if (ok === env.nodes.length) break;
      if (performance.now() - f0 > 300_000) throw new Error(`only ${ok} nodes ok after 5 min`);
      await new Promise((r) => setTimeout(r, 250));
    }
    out(`first_full_fetch_ms: ${Math.round(performance.now() - f0)} (first collections included)`);

    const inProcess: number[] = [];
    const command: number[] = [];
    for (let i = 0; i < Number(values.rounds); i++) {
      const s0 = performance.now();
      const fleet = await fetchFleet({ kube, log }, { namespace: ns, concurrency });
      inProcess.push(performance.now() - s0);
      const bad = fleet.results.filter((r) => r.status !== "ok");
      if (bad.length) out(`  round ${i}: ${bad.length} not ok (${bad[0]?.status})`);
      await rm(dir, { recursive: true, force: true });
      const c0 = performance.now();
      const run = await aicr([
        "daemonset",
        "fetch",
        "--kubeconfig",
        kubeconfig,
        "-n",
        ns,
        "--concurrency",
        String(concurrency),
        "-o",
        `${dir}/`,
      ]);
      command.push(performance.now() - c0);
      // One file per node, and the cluster's topology beside them.
      const files = (await readdir(dir).catch(() => [])).filter((f) => f !== FLEET_TOPOLOGY_FILE)
        .length;
      if (run.code !== 0 || files !== env.nodes.length) {
        out(`  round ${i}: exit ${run.code}, ${files} files`);
      }
    }
    out(`fleet of ${env.nodes.length} nodes, concurrency ${concurrency}, transport direct:`);
    report("fleet_fetch_ms (fetchFleet in process, warm caches)", inProcess, GOAL_MS);
    report("fleet_fetch_ms (aicr daemonset fetch -o dir/, whole command)", command, GOAL_MS);

    const u0 = performance.now();
    const uninstall = await aicr(["daemonset", "uninstall", "--kubeconfig", kubeconfig, "-n", ns]);
    out(
      `uninstall_ms: ${
        Math.round(performance.now() - u0)
      } (exit ${uninstall.code}, until no pod is left)`,
    );
  } finally {
    await aicr(["daemonset", "uninstall", "--kubeconfig", kubeconfig, "-n", ns]);
    await env.admin.request("DELETE", `/api/v1/namespaces/${ns}`);
    await env.stop();
    if (stateDir) await rm(stateDir, { recursive: true, force: true });
  }
}
