/**
 * The contract between DaemonSet mode's two sides, which never import each other: the
 * certificate the installer makes (`controller/_x509.ts`) is accepted by the daemon's server
 * (`daemon/serve.ts`), and the fleet's direct transport (`controller/fleet.ts`) verifies it.
 */
import assert from "node:assert/strict";
import { request } from "node:https";
import { generateDaemonTls } from "../x509.ts";
import { AnswerTooLargeError, nodeDirectGet } from "../controller/fleet.ts";
import { serve, validateTls } from "../daemon/serve.ts";

Deno.test("x509: the daemon's validateTls() accepts the installer's certificate and key", () => {
  const tls = generateDaemonTls({
    dnsNames: ["aicr-daemon.aicr-system.svc", "aicr-daemon.aicr-system.svc.cluster.local"],
    ipAddresses: ["127.0.0.1", "fd00::1"],
    now: new Date("2026-12-02T18:00:00Z"),
    validDays: 30,
  });
  assert.doesNotThrow(() => validateTls({ cert: tls.cert, key: tls.key }));
});

function get(
  url: string,
  options: { ca: string; servername: string },
): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(url, { ...options, agent: false }, (res) => {
      let body = "";
      res.on("data", (chunk) => (body += chunk));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on("error", reject);
    req.end();
  });
}

Deno.test("x509: serve() handshakes with the generated pair; a client trusting another CA refuses", async () => {
  const tls = generateDaemonTls({ dnsNames: ["aicr-daemon.ns.svc"], now: new Date() });
  const server = await serve(() => new Response("ok"), {
    hostname: "127.0.0.1",
    port: 0,
    tls: { cert: tls.cert, key: tls.key },
  });
  try {
    const url = `https://127.0.0.1:${server.port}/`;
    // The node IP is not in the certificate: the fixed service name is what is checked.
    const res = await get(url, { ca: tls.caCert, servername: "aicr-daemon.ns.svc" });
    assert.equal(res.status, 200);
    assert.equal(res.body, "ok");
    const stranger = generateDaemonTls({ dnsNames: ["aicr-daemon.ns.svc"], now: new Date() });
    await assert.rejects(get(url, { ca: stranger.caCert, servername: "aicr-daemon.ns.svc" }));
  } finally {
    await server.shutdown();
  }
});

Deno.test("fleet: the real direct transport stops reading an answer at the bound", async () => {
  const tls = generateDaemonTls({ dnsNames: ["aicr-daemon.ns.svc"], now: new Date() });
  const huge = new Uint8Array(3 << 20).fill(0x61);
  const server = await serve(
    () => new Response(huge),
    { hostname: "127.0.0.1", port: 0, tls: { cert: tls.cert, key: tls.key } },
  );
  try {
    await assert.rejects(
      nodeDirectGet({
        url: `https://127.0.0.1:${server.port}/v1/snapshot`,
        token: "t",
        connectTimeoutMs: 2000,
        ca: tls.caCert,
        servername: "aicr-daemon.ns.svc",
        signal: AbortSignal.timeout(20_000),
        maxBytes: 1 << 20,
      }),
      (e) => e instanceof AnswerTooLargeError && /1048576-byte bound/.test(e.message),
    );
  } finally {
    await server.shutdown();
  }
});

Deno.test("fleet: the real direct transport verifies the published CA and name, and bounds only connecting", async () => {
  const tls = generateDaemonTls({ dnsNames: ["aicr-daemon.ns.svc"], now: new Date() });
  const timers = new Set<ReturnType<typeof setTimeout>>();
  // A generous connect bound (a loaded machine still connects to itself well within it); the
  // daemon answers only once that bound has passed since the request reached it, so after the
  // connection was made, whatever the machine's speed.
  const connectTimeoutMs = 2_000;
  const server = await serve(async (request) => {
    await new Promise((resolve) => timers.add(setTimeout(resolve, connectTimeoutMs + 500)));
    return new Response(request.headers.get("authorization") ?? "none");
  }, { hostname: "127.0.0.1", port: 0, tls: { cert: tls.cert, key: tls.key } });
  try {
    const base = {
      url: `https://127.0.0.1:${server.port}/v1/snapshot`,
      token: "t0ken",
      connectTimeoutMs,
    };
    // Slower to answer than the connect timeout: still answered.
    const answer = await nodeDirectGet({
      ...base,
      ca: tls.caCert,
      servername: "aicr-daemon.ns.svc",
      signal: AbortSignal.timeout(30_000),
    });
    assert.equal(answer.status, 200);
    assert.equal(answer.body, "Bearer t0ken");
    await assert.rejects(
      nodeDirectGet({
        ...base,
        ca: tls.caCert,
        servername: "aicr-daemon.other.svc",
        signal: AbortSignal.timeout(5000),
      }),
      "another name is refused",
    );
    const stranger = generateDaemonTls({ dnsNames: ["aicr-daemon.ns.svc"], now: new Date() });
    await assert.rejects(
      nodeDirectGet({
        ...base,
        ca: stranger.caCert,
        servername: "aicr-daemon.ns.svc",
        signal: AbortSignal.timeout(5000),
      }),
      "another CA is refused",
    );
    await assert.rejects(
      nodeDirectGet({
        ...base,
        ca: tls.caCert,
        servername: "aicr-daemon.ns.svc",
        signal: AbortSignal.timeout(200),
      }),
      "the deadline aborts a slow answer",
    );
  } finally {
    for (const t of timers) clearTimeout(t);
    await server.shutdown();
  }
});
