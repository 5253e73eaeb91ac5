/**
 * Benchmark of the daemon on loopback, in one run (figures only, no asserts):
 *
 * - cached `GET /v1/snapshot` (bearer token, cached TokenReview/SAR, cached encoding) beside a
 *   Hono hello-world, both served by the same `daemon/serve.ts` HTTPS stack on this runtime,
 *   each driven by N keep-alive clients in a Worker: requests per second, p50 and p99
 *   latency, and the ratio. Goals: at least half the hello-world's requests per second, p99
 *   under 10 ms.
 * - collections triggered by 100 simultaneous cold requests. Goal: exactly 1.
 *
 * ```sh
 * deno run -A bench/daemon_bench.ts                      # 8 clients, 3 rounds of 3 s each
 * deno run -A bench/daemon_bench.ts --clients=16 --seconds=2 --rounds=1 --sysctls=1000
 * ```
 *
 * Writes the figures as JSON to `bench/.out/daemon.json` too.
 *
 * @module
 */
import { readFileSync } from "node:fs";
import { mkdir, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import process from "node:process";
import { parseArgs } from "node:util";
import { Hono } from "hono";
import { createCachingAuthorizer, createDaemon, serve } from "../daemon/mod.ts";
import type { RunningServer } from "../daemon/mod.ts";
import { fakeCollector, fakeKubeAuth, generateTestTls, OK_REPORTS } from "../daemon/_testing.ts";
import { NOOP_LOGGER } from "../log.ts";
import { parseSnapshot } from "../snapshot/mod.ts";
import type { Snapshot } from "../snapshot/mod.ts";
import type { LoadRequest, LoadResult } from "./_daemon_load.ts";

const HERE = dirname(fileURLToPath(import.meta.url));
const enc = new TextEncoder();
const out = (s: string) => Deno.stdout.writeSync(enc.encode(`${s}\n`));

const { values: args } = parseArgs({
  args: Deno.args,
  options: {
    clients: { type: "string", default: "8" },
    seconds: { type: "string", default: "3" },
    rounds: { type: "string", default: "3" },
    sysctls: { type: "string", default: "0" },
  },
});
const CLIENTS = Number(args.clients);
const DURATION_MS = Number(args.seconds) * 1000;
const ROUNDS = Number(args.rounds);

function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? NaN;
}

async function load(request: LoadRequest): Promise<LoadResult & { cpuUs: number }> {
  const before = process.cpuUsage();
  const result = await loadInWorker(request);
  const cpu = process.cpuUsage(before);
  return { ...result, cpuUs: cpu.user + cpu.system };
}

function loadInWorker(request: LoadRequest): Promise<LoadResult> {
  const worker = new Worker(new URL("./_daemon_load.ts", import.meta.url), { type: "module" });
  return new Promise((resolve, reject) => {
    worker.onmessage = (event: MessageEvent<LoadResult>) => {
      worker.terminate();
      resolve(event.data);
    };
    worker.onerror = (event) => {
      worker.terminate();
      reject(new Error(event.message));
    };
    worker.postMessage(request);
  });
}

interface Figures {
  rps: number;
  /** Process CPU (server and client together) per request, µs. */
  cpuUsPerReq: number;
  p50: number;
  p99: number;
  ok: number;
  errors: number;
  bodyBytes: number;
}

function figures(result: LoadResult & { cpuUs: number }): Figures {
  const sorted = [...result.latencies].sort((a, b) => a - b);
  return {
    rps: result.ok / (result.elapsedMs / 1000),
    cpuUsPerReq: result.cpuUs / Math.max(1, result.ok),
    p50: percentile(sorted, 50),
    p99: percentile(sorted, 99),
    ok: result.ok,
    errors: result.errors,
    bodyBytes: result.bodyBytes,
  };
}

function benchSnapshot(extraSysctls: number): Snapshot {
  const text = readFileSync(
    join(HERE, "..", "snapshot", "testdata", "h100-gpu-node-1.yaml"),
    "utf8",
  );
  const snapshot = parseSnapshot(text);
  if (extraSysctls > 0) {
    const os = snapshot.measurements.find((m) => m.type === "OS");
    const data: Record<string, string> = {};
    for (let i = 0; i < extraSysctls; i++) data[`/proc/sys/kernel/bench_key_${i}`] = String(i);
    os?.subtypes.push({ subtype: "bench-sysctl", data });
  }
  return snapshot;
}

const tls = generateTestTls();
const serveOptions = { hostname: "127.0.0.1", port: 0, tls: { cert: tls.cert, key: tls.key } };

// (a) the daemon, cache warm.
const kube = fakeKubeAuth();
const collector = fakeCollector({
  snapshot: benchSnapshot(Number(args.sysctls)),
  reports: OK_REPORTS,
});
const daemon = createDaemon({
  collect: collector.collect,
  auth: createCachingAuthorizer(kube),
  clock: Date.now,
  log: NOOP_LOGGER,
  build: { version: "bench", commit: "bench" },
  nodeName: "gpu-node-1",
}, { maxAgeMs: 3_600_000 });
const daemonServer = await serve(daemon.app.fetch, serveOptions);

// (b) a Hono hello-world on the same stack.
const hello = new Hono();
hello.get("/", (c) => c.text("Hello Hono!"));
const helloServer = await serve(hello.fetch, serveOptions);

const snapshotRequest = (server: RunningServer): LoadRequest => ({
  url: `${server.url}/v1/snapshot`,
  headers: { authorization: "Bearer token-reader" },
  ca: tls.ca,
  concurrency: CLIENTS,
  durationMs: DURATION_MS,
});
const helloRequest = (server: RunningServer): LoadRequest => ({
  url: `${server.url}/`,
  headers: {},
  ca: tls.ca,
  concurrency: CLIENTS,
  durationMs: DURATION_MS,
});

out(
  `# daemon bench: ${Deno.build.target}, deno ${Deno.version.deno}, ${navigator.hardwareConcurrency} cores`,
);
out(
  `# ${CLIENTS} keep-alive clients in a Worker, ${
    DURATION_MS / 1000
  } s per run, ${ROUNDS} rounds, HTTPS on 127.0.0.1`,
);

// Warm up both (JIT, TLS sessions, caches).
await load({ ...helloRequest(helloServer), durationMs: 1000 });
await load({ ...snapshotRequest(daemonServer), durationMs: 1000 });

const helloRuns: Figures[] = [];
const snapshotRuns: Figures[] = [];
for (let round = 0; round < ROUNDS; round++) {
  helloRuns.push(figures(await load(helloRequest(helloServer))));
  snapshotRuns.push(figures(await load(snapshotRequest(daemonServer))));
}

function best(runs: Figures[]): Figures {
  return runs.reduce((a, b) => (b.rps > a.rps ? b : a));
}
const h = best(helloRuns);
const s = best(snapshotRuns);
const fmt = (f: Figures) =>
  `${f.rps.toFixed(0).padStart(7)} req/s  ${f.cpuUsPerReq.toFixed(0).padStart(4)} µs CPU/req  p50 ${
    f.p50.toFixed(2).padStart(6)
  } ms  p99 ${
    f.p99.toFixed(2).padStart(6)
  } ms  (${f.ok} ok, ${f.errors} errors, body ${f.bodyBytes} B)`;
out("");
for (let round = 0; round < ROUNDS; round++) {
  out(`round ${round + 1}: hello ${fmt(helloRuns[round] as Figures)}`);
  out(`round ${round + 1}: snap  ${fmt(snapshotRuns[round] as Figures)}`);
}
out("");
out(`hello-world         ${fmt(h)}`);
out(`cached /v1/snapshot ${fmt(s)}`);
const ratio = s.rps / h.rps;
const cpuRatio = h.cpuUsPerReq / s.cpuUsPerReq;
out(
  `ratio snapshot/hello: ${ratio.toFixed(2)} req/s (goal >= 0.50: ${
    ratio >= 0.5 ? "met" : "NOT met"
  }); by CPU per request ${cpuRatio.toFixed(2)}`,
);
out(`snapshot p99: ${s.p99.toFixed(2)} ms (goal < 10 ms: ${s.p99 < 10 ? "met" : "NOT met"})`);
out(
  `TokenReviews: ${kube.reviews}, SubjectAccessReviews: ${kube.checks.length} (cached after the first)`,
);

await daemonServer.shutdown();
await helloServer.shutdown();
await daemon.close();

// Cold start: 100 simultaneous requests before any collection; nvidia-smi takes 200 ms here.
const coldCollector = fakeCollector({ snapshot: benchSnapshot(0), reports: OK_REPORTS });
coldCollector.delayMs = 200;
const cold = createDaemon({
  collect: coldCollector.collect,
  auth: createCachingAuthorizer(fakeKubeAuth()),
  clock: Date.now,
  log: NOOP_LOGGER,
  build: { version: "bench", commit: "bench" },
  nodeName: "gpu-node-1",
});
const coldServer = await serve(cold.app.fetch, serveOptions);
const coldClient = Deno.createHttpClient({ caCerts: [tls.ca] });
const t0 = performance.now();
const statuses = await Promise.all(
  Array.from({ length: 100 }, async () => {
    const res = await fetch(`${coldServer.url}/v1/snapshot`, {
      client: coldClient,
      headers: { authorization: "Bearer token-reader" },
    });
    await res.arrayBuffer();
    return res.status;
  }),
);
const coldMs = performance.now() - t0;
coldClient.close();
await coldServer.shutdown();
await cold.close();
const all200 = statuses.every((code) => code === 200);
out(
  `cold: 100 simultaneous requests -> ${coldCollector.calls} collection(s) (goal exactly 1: ${
    coldCollector.calls === 1 ? "met" : "NOT met"
  }), ${all200 ? "all 200" : `statuses ${[...new Set(statuses)].join(",")}`}, ${
    coldMs.toFixed(0)
  } ms`,
);

await mkdir(join(HERE, ".out"), { recursive: true });
await writeFile(
  join(HERE, ".out", "daemon.json"),
  JSON.stringify(
    {
      clients: CLIENTS,
      durationMs: DURATION_MS,
      rounds: ROUNDS,
      hello: h,
      snapshot: s,
      ratio,
      cpuRatio,
      coldCollections: coldCollector.calls,
      coldMs,
      runs: { hello: helloRuns, snapshot: snapshotRuns },
    },
    null,
    2,
  ) + "\n",
);
