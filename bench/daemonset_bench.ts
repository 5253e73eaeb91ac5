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
 * API (DaemonSet, N pods with their loopback IPs, the CA ConfigMap, TokenRequest), and fetched by
 * `fetchFleet()` with the real direct transport at several concurrency bounds. It prints time
 * per round, the bytes moved, the daemons' reviews (the API server's load per fresh token) and
 * the fetch process's peak memory; goal: 1,000 nodes under 10 s.
 *
 * ```sh
 * deno run -A bench/daemonset_bench.ts --simulate=1000 [--rounds=3]
 * ```
 *
 * The cluster's state folder is `.cluster-runs/bench-daemonset-<pid>/` under the repository
 * (removed afterwards), or `AICR_CLUSTER_DIR` to reuse a running cluster and its nodes.
 *
 * @module
 */
import { mkdir, mkdtemp, readdir, rm } from "node:fs/promises";
import { dirname, join } from "node:path";
import process from "node:process";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { fetchFleet } from "../controller/mod.ts";
import { connectKube } from "../kube/mod.ts";
import { createLogger } from "../log.ts";
import { createNamespace, useTestCluster } from "../tests/cluster/harness.ts";
import { createFakeKube } from "../tests/fakes/kube.ts";
import { daemonCaConfigMapName, daemonSelectorLabels } from "../manifests/mod.ts";
import { readFileSync } from "node:fs";
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

function peakMiB(): number {
  const status = readFileSync("/proc/self/status", "utf8");
  return Number(/VmHWM:\s+(\d+)/.exec(status)?.[1] ?? NaN) / 1024;
}

/** `--simulate=N`: the fleet fetch against N simulated daemons (see the module doc). */
async function simulate(total: number, rounds: number): Promise<void> {
  const namespace = "aicr-bench";
  const child = new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "-A",
      "--no-prompt",
      new URL("./_fleet_sim_servers.ts", import.meta.url).pathname,
      String(total),
    ],
    env: { AICR_SIM_NAMESPACE: namespace },
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
    `simulated ${sim.nodes.length} daemons in one process (${
      Math.round(performance.now() - s0)
    } ms to start), one snapshot ${(sim.snapshotBytes / 1024).toFixed(0)} KiB as JSON`,
  );
  try {
    const fake = createFakeKube();
    const labels = daemonSelectorLabels("aicr-daemon");
    fake.put(
      "DaemonSet",
      {
        metadata: { name: "aicr-daemon", namespace, generation: 1 },
        spec: { template: { spec: { nodeSelector: {}, tolerations: [] } } },
        status: { desiredNumberScheduled: sim.nodes.length, observedGeneration: 1 },
      } as Parameters<typeof fake.put>[1],
    );
    fake.put(
      "ConfigMap",
      {
        metadata: { name: daemonCaConfigMapName("aicr-daemon"), namespace },
        data: { "ca.crt": sim.ca },
      } as Parameters<typeof fake.put>[1],
    );
    for (const [i, { node, ip }] of sim.nodes.entries()) {
      fake.put(
        "Pod",
        {
          metadata: { name: `aicr-daemon-${i}`, namespace, labels },
          spec: {
            nodeName: node,
            containers: [{ name: "daemon", ports: [{ containerPort: sim.port }] }],
          },
          status: { podIP: ip, phase: "Running", conditions: [{ type: "Ready", status: "True" }] },
        } as Parameters<typeof fake.put>[1],
      );
    }
    // TokenRequest: the fake daemons know the reader's token.
    const kube = {
      ...fake.client,
      rest: {
        ...fake.client.rest,
        json: <T>() => Promise.resolve({ status: { token: "token-reader" } } as T),
      },
    };
    const log = createLogger({ write: () => {} });
    for (const concurrency of [16, 64, 256]) {
      const times: number[] = [];
      let ok = 0;
      let bytes = 0;
      for (let round = 0; round < rounds; round++) {
        const t0 = performance.now();
        const fleet = await fetchFleet({ kube, log }, {
          namespace,
          transport: "direct",
          concurrency,
        });
        times.push(performance.now() - t0);
        ok = fleet.results.filter((r) => r.status === "ok").length;
        if (round === 0) {
          const bad = fleet.results.find((r) => r.status !== "ok");
          if (bad) out(`  first failure: ${bad.node} ${bad.status} ${bad.error}`);
        }
        bytes = sim.snapshotBytes * ok;
      }
      await writer.write(new TextEncoder().encode("stats\n"));
      const stats = await next() as { reviews: number; checks: number };
      report(
        `fetch of ${sim.nodes.length} simulated nodes, concurrency ${concurrency}, ${ok} ok, ~${
          (bytes / 1024 / 1024).toFixed(0)
        } MiB per round; daemons' TokenReviews so far ${stats.reviews}, SubjectAccessReviews ${stats.checks}`,
        times,
        10_000,
      );
    }
    out(`fetch process peak memory (VmHWM): ${peakMiB().toFixed(0)} MiB`);
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
    },
  });
  await simulate(Number(values.simulate), Number(values.rounds));
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
      const files = (await readdir(dir).catch(() => [])).length;
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
