/**
 * Fixture for node_runtime_test.ts: bundled with esbuild and run by the Node 24 of the release
 * executable, it serves a daemon over HTTPS and prints, as one JSON line, what each request got,
 * so the test checks the same stack under the runtime the release binary uses, with the daemon's
 * own V8 flags (no optimising compilers) as `aicr daemon` sets them.
 *
 * @module
 */
import { request } from "node:https";
import process from "node:process";
import { connect } from "node:tls";
import { createCachingAuthorizer, createDaemon, serve } from "../mod.ts";
import { fakeCollector, fakeKubeAuth, generateTestTls } from "../_testing.ts";
import { NOOP_LOGGER } from "../../log.ts";
import { useDaemonV8Flags } from "../../runtime.ts";

type Answer = { status: number; body: string; headers: Record<string, unknown> };

async function main(): Promise<void> {
  const daemonFlags = useDaemonV8Flags();
  const tls = generateTestTls();
  const get = (
    url: string,
    init: { method?: string; headers?: Record<string, string>; body?: string } = {},
  ) =>
    new Promise<Answer>((resolve, reject) => {
      const req = request(url, {
        method: init.method ?? "GET",
        ca: tls.ca,
        agent: false,
        headers: init.headers ?? {},
      }, (res) => {
        let body = "";
        res.on("data", (chunk) => (body += chunk));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, body, headers: res.headers }));
      });
      req.on("error", reject);
      req.end(init.body);
    });
  const collector = fakeCollector();
  collector.delayMs = 300;
  const daemon = createDaemon({
    collect: collector.collect,
    auth: createCachingAuthorizer(fakeKubeAuth()),
    clock: Date.now,
    log: NOOP_LOGGER,
    build: { version: "smoke", commit: "smoke" },
    nodeName: "node-1",
  }, { freshMinIntervalMs: 0 });
  const controller = new AbortController();
  const server = await serve(daemon.app, {
    hostname: "127.0.0.1",
    port: 0,
    tls,
    signal: controller.signal,
    headersTimeoutMs: 300,
  });
  const reader = { authorization: "Bearer token-reader" };
  const out: Record<string, unknown> = {};
  daemon.start();
  out.readyBefore = (await get(`${server.url}/readyz`)).status;
  out.anonymous = (await get(`${server.url}/v1/snapshot`)).status;
  out.denied = (await get(`${server.url}/v1/snapshot`, {
    headers: { authorization: "Bearer token-other" },
  })).status;
  const gpu = await get(`${server.url}/v1/snapshot/GPU?format=json`, { headers: reader });
  out.gpu = {
    status: gpu.status,
    types: JSON.parse(gpu.body).measurements.map((m: { type: string }) => m.type),
  };
  out.readyAfter = (await get(`${server.url}/readyz`)).status;
  out.body = (await get(`${server.url}/v1/snapshot`, { method: "POST", body: "x" })).status;
  out.bigHead =
    (await get(`${server.url}/healthz`, { headers: { "x-big": "y".repeat(20_000) } })).status;
  out.slowHead = await new Promise<string>((resolve) => {
    let got = "";
    const socket = connect({
      host: "127.0.0.1",
      port: server.port,
      ca: tls.ca,
      servername: "localhost",
    }, () => {
      socket.write("GET /healthz HTTP/1.1\r\nHost: x\r\n");
    });
    socket.on("data", (chunk) => (got += chunk.toString()));
    socket.on("error", () => {});
    socket.on("close", () => resolve(got.split("\r\n")[0] ?? ""));
  });
  // A fresh collection (300 ms) in flight when the shutdown starts still answers.
  const inFlight = get(`${server.url}/v1/snapshot?fresh=true`, { headers: reader });
  await new Promise((resolve) => setTimeout(resolve, 50));
  // What the server holds when the shutdown starts, not how long the shutdown took: a request
  // in flight then that still gets its whole answer proves the shutdown waited for it.
  out.inFlightAtShutdown = server.inFlight;
  controller.abort();
  const answer = await inFlight;
  await server.finished;
  await daemon.close();
  out.inFlight = { status: answer.status, connection: answer.headers.connection };
  out.collections = collector.calls;
  out.daemonFlags = daemonFlags;
  process.stdout.write(JSON.stringify(out) + "\n");
}

main().catch((error) => {
  process.stderr.write(`${error instanceof Error ? error.stack : String(error)}\n`);
  process.exitCode = 1;
});
