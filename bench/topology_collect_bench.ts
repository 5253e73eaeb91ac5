/**
 * The daemon's CPU per collection of its Kubernetes readings (K8s and NodeTopology) in a cluster
 * of N nodes (figures only, never asserted), before and after each daemon read its own Node only:
 *
 * - `cluster` (before): NodeTopology from a LIST of every node (pages of 500), as the Job's agent
 *   still collects it, and as every daemon did on every collection;
 * - `node` (after): one GET of its own Node, shared by the K8s and NodeTopology collectors.
 *
 * The real collectors, `createClusterReader` and `createKubeClient` run over an in-memory
 * transport that answers each request with JSON text parsed per call (as the API server's bytes
 * would be): the simulated fleet's Node objects (`mixedFleetNodes`, from the kubelet stand-in's
 * node profiles); every other path is a 404 (those readings are `absent` on both sides). It
 * prints CPU per collection, the bytes the API server would send per collection and per fleet
 * collection cycle (N daemons), side by side.
 *
 * ```sh
 * deno run -A bench/topology_collect_bench.ts [--nodes=1000,2000,5000] [--collections=10]
 * ```
 *
 * `--cluster=<state folder>` measures whole daemons instead, on a running local cluster
 * (`AICR_CLUSTER_DIR=… deno task cluster:up`): it adds Node objects (`bench-…`, labelled
 * `aicr.run/bench=topology`, removed afterwards) up to each size, starts each binary of
 * `--binaries` as `aicr daemon --insecure-http --insecure-no-auth` for one of them with the admin
 * kubeconfig, and prints each daemon's CPU per fresh collection (`?fresh=true`, from /proc): the
 * whole collection (GPU absent, this host's OS and SystemD, K8s, NodeTopology), so a binary from
 * before beside one from now shows what listing every node cost a daemon.
 *
 * ```sh
 * deno run -A bench/topology_collect_bench.ts --cluster=.cluster-mine \
 *   --binaries=<before>/dist/aicr,dist/aicr --nodes=1000,5000
 * ```
 *
 * @module
 */
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import process from "node:process";
import { parseArgs } from "node:util";
import { collectMeasurements, createClusterReader } from "../collectors/mod.ts";
import type { CollectOptions } from "../collectors/mod.ts";
import { connectKube, KubeApiError } from "../kube/mod.ts";
import { createKubeClient } from "../kube/client.ts";
import type { RestClient, RestRequest } from "../kube/rest.ts";
import { NOOP_LOGGER } from "../log.ts";
import { mixedCounts, mixedFleetNodes } from "../snapshot/testdata/mixed_fleet.ts";

const enc = new TextEncoder();
const out = (s: string) => Deno.stdout.writeSync(enc.encode(`${s}\n`));

/** An API server of N nodes in memory: pages and single nodes as JSON text. */
function memoryApi(total: number): { rest: RestClient; bytes: { sent: number } } {
  const nodes = mixedFleetNodes(mixedCounts(total));
  const byName = new Map(nodes.map((n) => [n.metadata?.name ?? "", JSON.stringify(n)]));
  const bytes = { sent: 0 };
  const pages = new Map<string, string>();
  const answer = (request: RestRequest): string => {
    const single = /^\/api\/v1\/nodes\/([^/?]+)$/.exec(request.path);
    if (single) {
      const text = byName.get(decodeURIComponent(single[1] ?? ""));
      if (text !== undefined) return text;
    }
    if (request.path === "/api/v1/nodes") {
      const limit = Number(request.query?.limit ?? 500);
      const from = Number(request.query?.continue ?? 0);
      // Serialized once: only the daemon's side is measured.
      const key = `${from}:${limit}`;
      let page = pages.get(key);
      if (page === undefined) {
        const next = from + limit < nodes.length ? String(from + limit) : undefined;
        page = JSON.stringify({
          kind: "NodeList",
          apiVersion: "v1",
          metadata: { resourceVersion: "1", ...(next ? { continue: next } : {}) },
          items: nodes.slice(from, from + limit),
        });
        pages.set(key, page);
      }
      return page;
    }
    throw new KubeApiError(`Cannot GET ${request.path}: 404 NotFound`, 404, "NotFound");
  };
  const text = (request: RestRequest) => {
    try {
      const body = answer(request);
      bytes.sent += body.length;
      return Promise.resolve(body);
    } catch (error) {
      return Promise.reject(error);
    }
  };
  const rest: RestClient = {
    server: "https://memory",
    defaultNamespace: undefined,
    text,
    json: async <T>(request: RestRequest) => JSON.parse(await text(request)) as T,
    lines: () => Promise.reject(new Error("no streams here")),
  };
  return { rest, bytes };
}

function cpuMs(): number {
  const cpu = process.cpuUsage();
  return (cpu.user + cpu.system) / 1000;
}

async function measure(
  total: number,
  scope: "cluster" | "node",
  collections: number,
): Promise<{ cpuMs: number; bytes: number; ok: boolean }> {
  const { rest, bytes } = memoryApi(total);
  const cluster = createClusterReader(createKubeClient(rest, { retries: 0 }));
  const deps = {
    cluster,
    host: { readFile: () => Promise.reject(new Error("none")) },
    env: () => undefined,
    log: NOOP_LOGGER,
  } as unknown as Parameters<typeof collectMeasurements>[0];
  const options: CollectOptions = {
    only: ["k8s", "topology"],
    nodeName: "p5-h100-1",
    topologyScope: scope,
  };
  await collectMeasurements(deps, options); // warm-up
  bytes.sent = 0;
  let ok = true;
  const c0 = cpuMs();
  for (let i = 0; i < collections; i++) {
    const { reports, measurements } = await collectMeasurements(deps, options);
    const topology = measurements.find((m) => m.type === "NodeTopology");
    ok &&= reports.every((r) => r.status === "ok") &&
      topology?.subtypes[0]?.context?.status === "ok";
  }
  return { cpuMs: (cpuMs() - c0) / collections, bytes: bytes.sent / collections, ok };
}

/** Reads a process's CPU time (utime + stime) from /proc, in milliseconds. */
function processCpuMs(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return (Number(fields[11]) + Number(fields[12])) * 10;
}

/** One daemon binary's CPU per fresh collection, as `nodeName`, against the local cluster. */
async function daemonCpuPerCollection(
  binary: string,
  options: { kubeconfig: string; nodeName: string; collections: number },
): Promise<number> {
  const port = 20000 + Math.floor(Math.random() * 20000);
  const child = spawn(binary, [
    "daemon",
    "--kubeconfig",
    options.kubeconfig,
    "--insecure-http",
    "--insecure-no-auth",
    "--listen",
    "127.0.0.1",
    "--port",
    String(port),
    "--max-age",
    "1h",
    "--fresh-min-interval",
    "0",
    "--node-name",
    options.nodeName,
  ], { env: { PATH: "/usr/bin:/bin" }, stdio: ["ignore", "ignore", "pipe"] });
  let stderr = "";
  child.stderr.setEncoding("utf8").on("data", (chunk: string) => (stderr += chunk));
  const base = `http://127.0.0.1:${port}`;
  try {
    const deadline = Date.now() + 60_000;
    while (!await fetch(`${base}/readyz`).then((r) => r.ok, () => false)) {
      if (Date.now() > deadline || child.exitCode !== null) {
        throw new Error(`Cannot start ${binary} daemon:\n${stderr.slice(-2000)}`);
      }
      await new Promise((r) => setTimeout(r, 200));
    }
    const before = processCpuMs(child.pid as number);
    for (let i = 0; i < options.collections; i++) {
      const res = await fetch(`${base}/v1/snapshot?fresh=true&format=json`);
      const body = await res.json() as { measurements?: { type: string; subtypes: unknown[] }[] };
      if (!res.ok) throw new Error(`${binary} answered ${res.status}`);
      const topology = body.measurements?.find((m) => m.type === "NodeTopology");
      const status = (topology?.subtypes[0] as { context?: { status?: string } })?.context?.status;
      if (status !== "ok") throw new Error(`${binary}: NodeTopology ${status}`);
    }
    return (processCpuMs(child.pid as number) - before) / options.collections;
  } finally {
    child.kill("SIGTERM");
    await new Promise((r) => child.once("exit", r));
  }
}

/** `--cluster`: whole daemons of each binary against the local cluster (see the module doc). */
async function onCluster(
  stateDir: string,
  binaries: string[],
  sizes: number[],
  collections: number,
): Promise<void> {
  const kubeconfig = resolve(stateDir, "admin.kubeconfig");
  const kube = connectKube({ kubeconfig }, (name) => process.env[name]);
  const selector = "aicr.run/bench=topology";
  const existing = await kube.listAll("Node", undefined, {});
  const fleet = mixedFleetNodes(mixedCounts(Math.max(...sizes)));
  let made = 0;
  try {
    for (const total of sizes) {
      for (const node of fleet.slice(made, Math.max(made, total - existing.length))) {
        const name = `bench-${node.metadata?.name}`;
        await kube.create("Node", {
          apiVersion: "v1",
          kind: "Node",
          metadata: {
            name,
            labels: {
              ...node.metadata?.labels,
              "kubernetes.io/hostname": name,
              "aicr.run/bench": "topology",
            },
          },
          spec: { taints: node.spec?.taints ?? [] },
        } as never);
        made++;
      }
      const nodes = (await kube.listAll("Node", undefined, {})).length;
      const figures = [];
      for (const binary of binaries) {
        const ms = await daemonCpuPerCollection(binary, {
          kubeconfig,
          nodeName: "bench-p5-h100-1",
          collections,
        });
        figures.push(`${binary}: ${ms.toFixed(0)} ms`);
      }
      out(`${nodes} nodes, CPU per fresh collection (${collections}): ${figures.join("; ")}`);
    }
  } finally {
    for (const node of await kube.listAll("Node", undefined, { labelSelector: selector })) {
      await kube.rest.json({ method: "DELETE", path: `/api/v1/nodes/${node.metadata?.name}` })
        .catch(() => {});
    }
  }
}

if (import.meta.main) {
  const { values } = parseArgs({
    args: Deno.args,
    options: {
      nodes: { type: "string", default: "1000,2000,5000" },
      collections: { type: "string", default: "10" },
      cluster: { type: "string" },
      binaries: { type: "string", default: "dist/aicr" },
    },
  });
  if (values.cluster !== undefined) {
    await onCluster(
      values.cluster,
      values.binaries.split(",").map((b) => resolve(b)),
      values.nodes.split(",").map(Number),
      Number(values.collections),
    );
    Deno.exit(0);
  }
  const collections = Number(values.collections);
  const mib = (n: number) => `${(n / 1024 / 1024).toFixed(n < 1024 * 1024 ? 3 : 1)} MiB`;
  out(
    `daemon collection of the K8s and NodeTopology readings, ${collections} collections each (CPU of this process; the API server an in-memory one)`,
  );
  for (const total of values.nodes.split(",").map(Number)) {
    const before = await measure(total, "cluster", collections);
    const after = await measure(total, "node", collections);
    out(
      `${total} nodes: LIST every node (before) ${before.cpuMs.toFixed(1)} ms CPU, ${
        mib(before.bytes)
      } read per collection${before.ok ? "" : " (NOT ok)"}; GET its own Node (now) ${
        after.cpuMs.toFixed(2)
      } ms CPU, ${mib(after.bytes)}${after.ok ? "" : " (NOT ok)"}; x${
        (before.cpuMs / after.cpuMs).toFixed(0)
      } less CPU; the API server per fleet collection cycle (${total} daemons): ${
        mib(before.bytes * total)
      } before, ${mib(after.bytes * total)} now`,
    );
  }
}
