/**
 * One fleet fetch in its own process, for `daemonset_bench.ts --simulate N` (so each run's peak
 * memory is its own): the whole `aicr daemonset fetch` command (`runCli`, the real direct
 * transport and TLS, the streaming writer) against the simulated daemons, with only the API
 * server replaced by an in-memory one (DaemonSet, one pod per simulated node, the CA ConfigMap,
 * the TokenRequest, and the simulated fleet's Node objects for the fetch's one topology LIST). `--hold` runs the fetch as it was before the streaming writer instead:
 * `fetchFleet` keeping every snapshot, then `writeFleet`.
 *
 * Reads `{ ca, port, nodes, namespace }` as JSON on stdin; arguments: the concurrency, the
 * output (`dir/`, a file, or `-` for stdout, thrown away), and optionally `--hold`. Prints
 * one JSON line: `{ ms, cpuMs, peakMiB, code }` (CPU of the whole process, start included).
 *
 * @module
 */
import { Buffer } from "node:buffer";
import { readFileSync } from "node:fs";
import process from "node:process";
import { fetchFleet, writeFleet } from "../controller/mod.ts";
import type { FleetOutput } from "../controller/mod.ts";
import { runCli } from "../cli/mod.ts";
import type { KubeClient, RestRequest } from "../kube/mod.ts";
import { createLogger } from "../log.ts";
import { daemonCaConfigMapName, daemonSelectorLabels } from "../manifests/mod.ts";
import { processDeps } from "../mod.ts";
import { mixedCounts, mixedFleetNodes } from "../snapshot/testdata/mixed_fleet.ts";
import { createFakeKube } from "../tests/fakes/kube.ts";

interface Sim {
  ca: string;
  port: number;
  namespace: string;
  nodes: { node: string; ip: string }[];
}

function peakMiB(): number {
  const status = readFileSync("/proc/self/status", "utf8");
  return Number(/VmHWM:\s+(\d+)/.exec(status)?.[1] ?? NaN) / 1024;
}

/** The in-memory API server the fetch reads: the daemon's objects, and a reader token. */
function simulatedApi(sim: Sim) {
  const fake = createFakeKube();
  const { namespace } = sim;
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
  const labels = daemonSelectorLabels("aicr-daemon");
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
  // The nodes the fetch lists once for the cluster's NodeTopology (the simulated fleet's own).
  for (const node of mixedFleetNodes(mixedCounts(sim.nodes.length))) {
    fake.put("Node", node as Parameters<typeof fake.put>[1]);
  }
  // TokenRequest, one per node: each simulated daemon accepts only the token for its node; and
  // one without an audience, the reader's for the API server (the topology LIST). The signer's
  // list of pending certificate requests is empty.
  const client: KubeClient = {
    ...fake.client,
    rest: {
      ...fake.client.rest,
      json: <T>(request: RestRequest) => {
        if (request.method === "GET") return Promise.resolve({ items: [] } as T);
        const audience = (request.body as { spec: { audiences?: string[] } }).spec.audiences?.[0];
        const node = String(audience ?? "api").replace(/^aicr-daemon:/, "");
        return Promise.resolve({ status: { token: `token-reader@${node}` } } as T);
      },
    },
    // The reader's client: the same in-memory API server.
    withBearerToken: () => client,
  };
  return client;
}

async function main(): Promise<void> {
  const [concurrency = "16", output = "-", mode] = process.argv.slice(2);
  const chunks: Uint8Array[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Uint8Array);
  const sim = JSON.parse(Buffer.concat(chunks).toString("utf8")) as Sim;
  const kube = simulatedApi(sim);
  const t0 = performance.now();
  let code: number;
  const discard = { write: () => {} };
  if (mode === "--hold") {
    const fleet = await fetchFleet({ kube, log: createLogger(discard) }, {
      namespace: sim.namespace,
      transport: "direct",
      concurrency: Number(concurrency),
    });
    const target: FleetOutput = output === "-"
      ? { kind: "stream", path: undefined }
      : output.endsWith("/")
      ? { kind: "directory", path: output }
      : { kind: "stream", path: output };
    await writeFleet(fleet.results, target, discard, fleet.topology?.document);
    code = fleet.results.every((r) => r.status === "ok") ? 0 : 9;
  } else {
    const deps = {
      ...processDeps(new AbortController().signal),
      stdout: discard,
      stderr: discard,
      makeLogger: () => createLogger(discard),
      connectKube: () => kube,
    };
    code = await runCli([
      "daemonset",
      "fetch",
      "-n",
      sim.namespace,
      "--transport",
      "direct",
      "--concurrency",
      concurrency,
      "-o",
      output,
    ], deps);
  }
  const ms = performance.now() - t0;
  const cpu = process.cpuUsage();
  const cpuMs = (cpu.user + cpu.system) / 1000;
  process.stdout.write(JSON.stringify({ ms, cpuMs, peakMiB: peakMiB(), code }) + "\n");
}

if (import.meta.main) await main();
