/**
 * Benchmarks of the test cluster (figures only, no asserts):
 *
 * - `cluster_start_ms`: startCluster() from cached binaries to ready (apiserver /readyz, scheduler and
 *   controller-manager healthy, `default` ServiceAccount present). Goal: under 20 s.
 * - `job_true_ms`: the floor of one agent run, creating a Job that runs `true` until its Complete
 *   condition is seen.
 * - `nodes50_register_ms` and idle CPU with 50 simulated nodes (2-core budget).
 *
 * ```sh
 * deno task bench:cluster            # 3 starts, 5 Jobs, the 50-node stage
 * deno task bench:cluster --starts=1 --jobs=3 --no-50
 * ```
 *
 * Writes the figures as JSON to `bench/.out/cluster.json` too.
 *
 * @module
 */

import { readFileSync } from "node:fs";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { buildCluster, type Cluster, startCluster } from "../tests/cluster/cluster.ts";
import { createApi, type Obj } from "../tests/kubelet/api.ts";
import { startKubelet } from "../tests/kubelet/kubelet.ts";

const enc = new TextEncoder();
const out = (s: string) => Deno.stdout.writeSync(enc.encode(`${s}\n`));

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)] ?? NaN;
}

function report(name: string, xs: number[]): void {
  out(
    `${name}: median ${Math.round(median(xs))} ms, min ${Math.round(Math.min(...xs))} ms, runs [${
      xs.map(Math.round).join(", ")
    }]`,
  );
}

/** The component's own pid: the recorded one is a watchdog shell whose child it is (or itself). */
function componentPid(pid: number): number {
  try {
    const kids = readFileSync(`/proc/${pid}/task/${pid}/children`, "latin1").trim().split(/\s+/);
    const kcp = kids.find((k) => k && readFileSync(`/proc/${k}/cmdline`, "latin1").includes("kcp"));
    return kcp ? Number(kcp) : pid;
  } catch {
    return pid;
  }
}

/** CPU seconds (user+system) a process has used, from /proc/<pid>/stat. */
function cpuSeconds(pid: number | "self"): number {
  const stat = readFileSync(`/proc/${pid}/stat`, "latin1");
  const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return (Number(f[11]) + Number(f[12])) / 100;
}

/**
 * Creates `runs` Jobs running `true` one after another; returns create→Complete times, and
 * create→pod Succeeded times (the difference is the Job controller's own pod-update batching).
 */
async function jobTrue(
  cluster: Cluster,
  runs: number,
  label: string,
): Promise<{ complete: number[]; podDone: number[] }> {
  const admin = createApi(cluster.server, {
    ca: readFileSync(cluster.caFile, "utf8"),
    cert: readFileSync(cluster.adminCert.cert, "utf8"),
    key: readFileSync(cluster.adminCert.key, "utf8"),
  });
  const times: number[] = [];
  const podDone: number[] = [];
  const ns = `bench-${label}`;
  await admin.request("POST", "/api/v1/namespaces", { metadata: { name: ns } });
  while (
    (await admin.request("GET", `/api/v1/namespaces/${ns}/serviceaccounts/default`)).status !== 200
  ) {
    await new Promise((r) => setTimeout(r, 50));
  }
  for (let i = 0; i < runs; i++) {
    const name = `true-${i}`;
    const t0 = performance.now();
    const res = await admin.request("POST", `/apis/batch/v1/namespaces/${ns}/jobs`, {
      apiVersion: "batch/v1",
      kind: "Job",
      metadata: { name },
      spec: {
        backoffLimit: 0,
        template: {
          spec: {
            restartPolicy: "Never",
            containers: [{ name: "main", image: "busybox", command: ["true"] }],
          },
        },
      },
    });
    if (res.status !== 201) {
      throw new Error(`Cannot create Job: HTTP ${res.status} ${res.body.message}`);
    }
    let done = 0;
    while (true) {
      if (!done) {
        const pods = await admin.request(
          "GET",
          `/api/v1/namespaces/${ns}/pods?labelSelector=${encodeURIComponent(`job-name=${name}`)}`,
        );
        if (pods.body.items?.[0]?.status?.phase === "Succeeded") done = performance.now() - t0;
      }
      const j = await admin.request("GET", `/apis/batch/v1/namespaces/${ns}/jobs/${name}`);
      if (
        j.body.status?.conditions?.some((c: Obj) => c.type === "Complete" && c.status === "True")
      ) break;
      if (performance.now() - t0 > 120_000) throw new Error("Job did not complete in 120 s");
      await new Promise((r) => setTimeout(r, 10));
    }
    times.push(performance.now() - t0);
    podDone.push(done || NaN);
  }
  admin.close();
  return { complete: times, podDone };
}

/** Creates a DaemonSet tolerating every taint and returns the ms until `want` pods are ready. */
async function daemonSetReady(cluster: Cluster, want: number): Promise<number> {
  const admin = createApi(cluster.server, {
    ca: readFileSync(cluster.caFile, "utf8"),
    cert: readFileSync(cluster.adminCert.cert, "utf8"),
    key: readFileSync(cluster.adminCert.key, "utf8"),
  });
  const path = "/apis/apps/v1/namespaces/default/daemonsets";
  const t0 = performance.now();
  const res = await admin.request("POST", path, {
    apiVersion: "apps/v1",
    kind: "DaemonSet",
    metadata: { name: "bench-ds" },
    spec: {
      selector: { matchLabels: { app: "bench-ds" } },
      template: {
        metadata: { labels: { app: "bench-ds" } },
        spec: {
          tolerations: [{ operator: "Exists" }],
          terminationGracePeriodSeconds: 1,
          containers: [{ name: "main", image: "busybox", command: ["sleep", "3600"] }],
        },
      },
    },
  });
  if (res.status !== 201) {
    throw new Error(`Cannot create DaemonSet: HTTP ${res.status} ${res.body.message}`);
  }
  while (true) {
    const d = await admin.request("GET", `${path}/bench-ds`);
    if ((d.body.status?.numberReady ?? 0) >= want) break;
    if (performance.now() - t0 > 120_000) {
      throw new Error(`DaemonSet not ready in 120 s: ${JSON.stringify(d.body.status)}`);
    }
    await new Promise((r) => setTimeout(r, 20));
  }
  const took = performance.now() - t0;
  await admin.request("DELETE", `${path}/bench-ds`, {
    apiVersion: "v1",
    kind: "DeleteOptions",
    propagationPolicy: "Foreground",
  });
  while (
    (await admin.request("GET", "/api/v1/namespaces/default/pods?labelSelector=app%3Dbench-ds"))
      .body.items?.length
  ) {
    await new Promise((r) => setTimeout(r, 100));
  }
  admin.close();
  return took;
}

if (import.meta.main) {
  const { values } = parseArgs({
    args: Deno.args,
    options: {
      starts: { type: "string", default: "3" },
      jobs: { type: "string", default: "5" },
      "no-50": { type: "boolean", default: false },
    },
  });
  const figures: Record<string, unknown> = {};
  const bt0 = performance.now();
  await buildCluster({ log: () => {} });
  out(`cluster_build_cached_check_ms: ${Math.round(performance.now() - bt0)}`);

  const starts: number[] = [];
  const stops: number[] = [];
  for (let i = 0; i < Number(values.starts); i++) {
    const dir = await mkdtemp(join(tmpdir(), "aicr-bench-"));
    const t0 = performance.now();
    const cluster = await startCluster({ stateDir: dir, log: () => {} });
    starts.push(performance.now() - t0);
    if (i < Number(values.starts) - 1) {
      const s0 = performance.now();
      await cluster.stop();
      stops.push(performance.now() - s0);
      await rm(dir, { recursive: true, force: true });
      continue;
    }
    report("cluster_start_ms", starts);
    figures.cluster_start_ms = starts;
    if (stops.length) report("cluster_stop_ms", stops);
    figures.cluster_stop_ms = stops;

    const k0 = performance.now();
    const kubelet = await startKubelet(cluster, { nodes: { "system-m7i": 1 } });
    out(`kubelet_1node_start_ms: ${Math.round(performance.now() - k0)}`);
    const jobs = await jobTrue(cluster, Number(values.jobs), "one");
    report("job_true_ms (1 node)", jobs.complete);
    report("job_true_pod_succeeded_ms (1 node)", jobs.podDone);
    figures.job_true_ms = jobs.complete;
    figures.job_true_pod_succeeded_ms = jobs.podDone;
    await kubelet.stop();

    if (!values["no-50"]) {
      const n0 = performance.now();
      const big = await startKubelet(cluster, {
        nodes: { "p5-h100": 20, "p6-gb200": 10, "system-m7i": 20 },
      });
      const reg = performance.now() - n0;
      out(`nodes50_register_ms: ${Math.round(reg)}`);
      const apiPid = componentPid(cluster.processes.find((p) => p.name === "kube-apiserver")!.pid);
      const c0 = { self: cpuSeconds("self"), api: cpuSeconds(apiPid) };
      await new Promise((r) => setTimeout(r, 30_000));
      const idle = {
        kubelet: (cpuSeconds("self") - c0.self) / 30,
        apiserver: (cpuSeconds(apiPid) - c0.api) / 30,
      };
      out(
        `nodes50_idle_cpu_cores: kubelet ${idle.kubelet.toFixed(3)}, kube-apiserver ${
          idle.apiserver.toFixed(3)
        } (30 s window)`,
      );
      const ds = await daemonSetReady(cluster, 50);
      out(
        `daemonset50_ready_ms: ${
          Math.round(ds)
        } (create -> 50 pods Running and Ready, one per node)`,
      );
      figures.daemonset50_ready_ms = ds;
      const jobs50 = await jobTrue(cluster, Number(values.jobs), "fifty");
      report("job_true_ms (50 nodes)", jobs50.complete);
      report("job_true_pod_succeeded_ms (50 nodes)", jobs50.podDone);
      Object.assign(figures, {
        nodes50_register_ms: reg,
        nodes50_idle_cpu_cores: idle,
        job_true_ms_50: jobs50.complete,
      });
      await big.stop();
    }
    await cluster.stop();
    await rm(dir, { recursive: true, force: true });
  }
  await mkdir(new URL("./.out/", import.meta.url), { recursive: true });
  await writeFile(
    new URL("./.out/cluster.json", import.meta.url),
    JSON.stringify(figures, null, 2) + "\n",
  );
}
