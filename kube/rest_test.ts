import assert from "node:assert/strict";
import { createServer } from "node:http";
import { Buffer } from "node:buffer";
import { exitCodeOf, formatError } from "../errors.ts";
import { KubeApiError } from "./errors.ts";
import { readContextNamespace } from "./kubeconfig.ts";
import { createRestClient, parseWarningHeaders, secureContexts } from "./rest.ts";
import type { TlsRequestOptions } from "./rest.ts";
import {
  apiStatus as status,
  loopbackKubeConfig as loopbackConfig,
  scriptedApiServer as scriptedServer,
} from "../tests/fakes/api_server.ts";

Deno.test("rest: a 401 says the credentials were rejected, whose, and how to refresh them", async () => {
  const seen: string[] = [];
  await using server = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen: () => {} },
    (req) => {
      seen.push(`${req.method} ${new URL(req.url).pathname} ${req.headers.get("authorization")}`);
      return Response.json({
        kind: "Status",
        apiVersion: "v1",
        status: "Failure",
        message: "Unauthorized",
        reason: "Unauthorized",
        code: 401,
      }, { status: 401 });
    },
  );
  const rest = createRestClient(loopbackConfig(server.addr.port), { retries: 0 });
  const error = await rest.json({
    method: "POST",
    path: "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
    body: {},
  }).then(() => undefined, (e: unknown) => e);
  assert.ok(error instanceof KubeApiError);
  assert.equal(error.status, 401);
  assert.equal(exitCodeOf(error), 4);
  const text = formatError(error);
  assert.match(
    text,
    /^error: Cannot POST \/apis\/authorization\.k8s\.io\/v1\/selfsubjectaccessreviews: 401 Unauthorized: the API server rejected the credentials \(invalid or expired\)/,
  );
  assert.match(
    text,
    /kubeconfig user 'alice' \(context 'lab-admin'\): they are invalid or expired/,
  );
  assert.match(text, /refresh them with the command that wrote them/);
  assert.match(text, /kubectl --context lab-admin auth whoami/);
  assert.deepEqual(seen, [
    "POST /apis/authorization.k8s.io/v1/selfsubjectaccessreviews Bearer expired-token",
  ]);
  assert.equal(rest.defaultNamespace, "team-a");
});

Deno.test("rest: a 403 keeps the server's own message and no credential hint", async () => {
  await using server = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen: () => {} },
    () =>
      Response.json({
        kind: "Status",
        message: 'pods is forbidden: User "alice" cannot list resource "pods"',
        reason: "Forbidden",
        code: 403,
      }, { status: 403 }),
  );
  const rest = createRestClient(loopbackConfig(server.addr.port), { retries: 0 });
  const error = await rest.json({ method: "GET", path: "/api/v1/namespaces/x/pods" }).then(
    () => undefined,
    (e: unknown) => e,
  );
  assert.ok(error instanceof KubeApiError);
  assert.equal(exitCodeOf(error), 4);
  const text = formatError(error);
  assert.match(text, /403 Forbidden: pods is forbidden: User "alice" cannot list/);
  assert.doesNotMatch(text, /credentials/);
});

/** A rest client on the loopback server whose sleeps are recorded, not slept. */
function restOn(port: number, retries = 4) {
  const sleeps: number[] = [];
  const rest = createRestClient(loopbackConfig(port), {
    retries,
    backoffMs: 100,
    sleep: (ms) => {
      sleeps.push(ms);
      return Promise.resolve();
    },
  });
  return { rest, sleeps };
}

Deno.test("rest: a GET carries the token and query, and parses the JSON answer", async () => {
  await using server = await scriptedServer([{ status: 200, body: { kind: "Pod" } }]);
  const { rest } = restOn(server.port);
  const pod = await rest.json<{ kind: string }>({
    method: "GET",
    path: "/api/v1/namespaces/team-a/pods",
    query: { labelSelector: "a=b", limit: 5, continue: undefined },
  });
  assert.equal(pod.kind, "Pod");
  assert.deepEqual(server.seen.map((r) => `${r.method} ${r.path}${r.query}`), [
    "GET /api/v1/namespaces/team-a/pods?labelSelector=a%3Db&limit=5",
  ]);
  assert.equal(server.seen[0]?.auth, "Bearer expired-token");
});

Deno.test("rest: a GET is retried after 5xx and 429 with backoff, Retry-After honoured", async () => {
  await using server = await scriptedServer([
    status(503, "ServiceUnavailable"),
    { ...status(429, "TooManyRequests"), headers: { "Retry-After": "3" } },
    status(500, "InternalError"),
    { status: 200, body: { ok: true } },
  ]);
  const { rest, sleeps } = restOn(server.port);
  assert.deepEqual(await rest.json({ method: "GET", path: "/version" }), { ok: true });
  assert.equal(server.seen.length, 4);
  assert.equal(sleeps.length, 3);
  // First backoff: 100 ms with ±25 % jitter; then Retry-After's 3 s; then 400 ms ±25 %.
  assert.ok(sleeps[0]! >= 75 && sleeps[0]! <= 125, String(sleeps[0]));
  assert.equal(sleeps[1], 3000);
  assert.ok(sleeps[2]! >= 300 && sleeps[2]! <= 500, String(sleeps[2]));
});

Deno.test("rest: retries stop after their number, with the last answer's error", async () => {
  await using server = await scriptedServer([status(503, "ServiceUnavailable", "etcd is down")]);
  const { rest } = restOn(server.port, 2);
  const error = await rest.json({ method: "GET", path: "/api/v1/nodes" }).catch((e) => e);
  assert.ok(error instanceof KubeApiError);
  assert.equal(error.status, 503);
  assert.match(error.message, /^Cannot GET \/api\/v1\/nodes: 503 ServiceUnavailable: etcd is down/);
  assert.equal(server.seen.length, 3, "the first attempt and two retries");
});

Deno.test("rest: a request's own retries count replaces the client's (0: one attempt)", async () => {
  await using server = await scriptedServer([status(503, "ServiceUnavailable", "etcd is down")]);
  const { rest, sleeps } = restOn(server.port, 4);
  const error = await rest.json({ method: "DELETE", path: "/x", idempotent: true, retries: 0 })
    .catch((e) => e);
  assert.ok(error instanceof KubeApiError);
  assert.equal(error.status, 503);
  assert.equal(server.seen.length, 1, "one attempt, no retry");
  assert.deepEqual(sleeps, []);
});

Deno.test("rest: a create is never resent, a lost answer included (it may have landed)", async () => {
  await using server = await scriptedServer([{ cut: "before-answer" }, { status: 201, body: {} }]);
  const { rest, sleeps } = restOn(server.port);
  const error = await rest.json({
    method: "POST",
    path: "/api/v1/namespaces/team-a/configmaps",
    body: { metadata: { name: "x" } },
  }).catch((e) => e);
  assert.ok(error instanceof KubeApiError);
  assert.equal(error.status, 0);
  assert.equal(error.reason, "ConnectionFailure");
  assert.match(
    error.message,
    /^Cannot reach Kubernetes API server 'http:\/\/127\.0\.0\.1:\d+' for POST/,
  );
  assert.equal(server.seen.length, 1);
  assert.deepEqual(sleeps, []);
  // 5xx on a create is not resent either.
  await using second = await scriptedServer([status(500, "InternalError")]);
  const again = restOn(second.port);
  await assert.rejects(again.rest.json({ method: "POST", path: "/api/v1/x", body: {} }));
  assert.equal(second.seen.length, 1);
});

Deno.test("rest: an idempotent request is resent after a lost answer or a cut body", async () => {
  await using server = await scriptedServer([
    { cut: "before-answer" },
    { cut: "mid-body" },
    { status: 200, body: { kind: "Status", status: "Success" } },
  ]);
  const { rest, sleeps } = restOn(server.port);
  const answer = await rest.json<{ status: string }>({
    method: "DELETE",
    path: "/api/v1/namespaces/team-a/pods/p",
    body: { kind: "DeleteOptions", preconditions: { uid: "u-1" } },
    idempotent: true,
  });
  assert.equal(answer.status, "Success");
  assert.equal(server.seen.length, 3);
  assert.equal(sleeps.length, 2);
  // The same UID-pinned body every time.
  for (const r of server.seen) assert.equal(JSON.parse(r.body).preconditions.uid, "u-1");
});

Deno.test("rest: a 4xx answer is not retried, and an aborted request rejects with its reason", async () => {
  await using server = await scriptedServer([status(404, "NotFound", 'pods "p" not found')]);
  const { rest, sleeps } = restOn(server.port);
  const error = await rest.json({ method: "GET", path: "/api/v1/namespaces/a/pods/p" }).catch((
    e,
  ) => e);
  assert.ok(error instanceof KubeApiError && error.isNotFound);
  assert.equal(server.seen.length, 1);
  assert.deepEqual(sleeps, []);
  const reason = new Error("received SIGINT");
  const aborted = AbortSignal.abort(reason);
  await assert.rejects(
    rest.json({ method: "GET", path: "/version", signal: aborted }),
    (e) => e === reason,
  );
});

Deno.test("rest: lines() yields a watch's lines, the last one without a newline too", async () => {
  const server = createServer((_req, res) => {
    res.writeHead(200, { "Content-Type": "application/json" });
    res.write('{"type":"ADDED"}\n{"type":"MOD');
    res.end('IFIED"}\n{"type":"DELETED"}');
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  try {
    const { rest } = restOn((server.address() as { port: number }).port);
    const stream = await rest.lines({ path: "/api/v1/pods", query: { watch: true } });
    const lines: string[] = [];
    for await (const line of stream) lines.push(line);
    assert.deepEqual(lines, ['{"type":"ADDED"}', '{"type":"MODIFIED"}', '{"type":"DELETED"}']);
  } finally {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
});

Deno.test("readContextNamespace() reads the current or named context's namespace from the file", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const path = `${dir}/config`;
    await Deno.writeTextFile(
      path,
      [
        "apiVersion: v1",
        "kind: Config",
        "clusters:\n- name: lab\n  cluster:\n    server: https://127.0.0.1:9",
        "users:\n- name: alice\n  user:\n    token: t",
        "contexts:",
        "- name: a\n  context:\n    cluster: lab\n    user: alice\n    namespace: team-a",
        "- name: b\n  context:\n    cluster: lab\n    user: alice",
        "current-context: a",
        "",
      ].join("\n"),
    );
    const env = () => undefined;
    assert.deepEqual(await readContextNamespace({ kubeconfig: path }, env), {
      context: "a",
      namespace: "team-a",
    });
    assert.deepEqual(await readContextNamespace({ kubeconfig: path, context: "b" }, env), {
      context: "b",
      namespace: undefined,
    });
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("parseWarningHeaders() reads each RFC 7234 warning's text, escapes undone", () => {
  assert.deepEqual(parseWarningHeaders(undefined), []);
  assert.deepEqual(parseWarningHeaders('299 - "unknown field \\"spec\\""'), [
    'unknown field "spec"',
  ]);
  assert.deepEqual(
    parseWarningHeaders(['299 - "a", 299 - "b, c"', '299 - "d"']),
    ["a", "b, c", "d"],
  );
  assert.deepEqual(parseWarningHeaders("not the usual shape"), ["not the usual shape"]);
});

/**
 * A loopback server counting its connections; `closeReused` drops the second request on a
 * connection unanswered, as a server closing an idle kept-alive connection just as a request
 * went out on it.
 */
async function connectionCountingServer(closeReused: boolean) {
  let connections = 0;
  const requests: string[] = [];
  const perSocket = new WeakMap<object, number>();
  const server = createServer((req, res) => {
    const n = (perSocket.get(req.socket) ?? 0) + 1;
    perSocket.set(req.socket, n);
    requests.push(`${req.method} ${req.url} #${n}`);
    req.resume();
    req.on("end", () => {
      if (closeReused && n === 2) {
        req.socket.destroy();
        return;
      }
      res.writeHead(200, { "Content-Type": "application/json" });
      res.end("{}");
    });
  });
  server.on("connection", () => connections++);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    port: (server.address() as { port: number }).port,
    requests,
    connections: () => connections,
    async [Symbol.asyncDispose]() {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

Deno.test("rest: requests one after another share one kept-alive connection", async () => {
  await using server = await connectionCountingServer(false);
  const { rest } = restOn(server.port);
  for (let i = 0; i < 5; i++) await rest.json({ method: "GET", path: `/api/v1/r${i}` });
  await rest.json({ method: "POST", path: "/api/v1/x", body: {} });
  assert.equal(server.connections(), 1);
  assert.equal(server.requests.at(-1), "POST /api/v1/x?fieldValidation=Strict #6");
});

Deno.test("rest: a GET on a kept-alive connection the server closed goes again at once", async () => {
  await using server = await connectionCountingServer(true);
  const { rest, sleeps } = restOn(server.port);
  await rest.json({ method: "GET", path: "/a" });
  await rest.json({ method: "GET", path: "/b" });
  assert.deepEqual(server.requests, ["GET /a #1", "GET /b #2", "GET /b #1"]);
  assert.deepEqual(sleeps, [], "resent without a backoff");
  // (Whether a create is resent there depends on the runtime: Node's client does not, and neither
  // does this transport; Deno's own client resends it beneath us.)
});

Deno.test("secureContexts: one TLS context per client for the same trust and key; other TLS options left to Node", async () => {
  const secure = secureContexts();
  const first: TlsRequestOptions = { ca: "CA PEM", cert: "CERT", key: "KEY", headers: { a: "1" } };
  const second: TlsRequestOptions = { ca: "CA PEM", cert: "CERT", key: "KEY", servername: "x" };
  await secure(first);
  await secure(second);
  assert.ok(first.secureContext, "a context was made");
  assert.equal(second.secureContext, first.secureContext, "and shared by the same values");
  const other: TlsRequestOptions = { ca: "OTHER CA", cert: "CERT", key: "KEY" };
  await secure(other);
  assert.notEqual(other.secureContext, first.secureContext, "other values, another context");
  const ciphers: TlsRequestOptions = { ca: "CA PEM", ciphers: "TLS_AES_128_GCM_SHA256" };
  await secure(ciphers);
  assert.equal(ciphers.secureContext, undefined, "an option beyond trust and key: Node's own");
  const none: TlsRequestOptions = { headers: { Authorization: "Bearer t" } };
  await secure(none);
  assert.equal(none.secureContext, undefined, "nothing to put in a context");
});

Deno.test("rest: a server certificate another CA signed is said as such, once, without network advice", async () => {
  const { generateDaemonCa, generateServingKey, issueServingCertificate } = await import(
    "../x509.ts"
  );
  const { createServer: createHttpsServer } = await import("node:https");
  const { mergeKubeConfigs, selectContext } = await import("./kubeconfig.ts");
  const { nativeConnection } = await import("./connection.ts");
  const now = new Date();
  const serverCa = generateDaemonCa({ now });
  const otherCa = generateDaemonCa({ now });
  const key = generateServingKey();
  const cert = issueServingCertificate({
    ca: serverCa,
    publicKey: key.publicKey,
    node: "localhost",
    ipAddresses: ["127.0.0.1"],
    now,
    lifetimeSeconds: 3600,
  });
  let requests = 0;
  const server = createHttpsServer(
    { cert, key: key.privateKey.export({ type: "pkcs8", format: "pem" }) as string },
    (_req, res) => {
      requests++;
      res.end("{}");
    },
  );
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  try {
    const port = (server.address() as { port: number }).port;
    const connection = nativeConnection(selectContext(
      mergeKubeConfigs([{
        path: "/prod.kubeconfig",
        document: {
          clusters: [{
            name: "prod",
            cluster: {
              server: `https://127.0.0.1:${port}`,
              "certificate-authority-data": Buffer.from(otherCa.caCert).toString("base64"),
            },
          }],
          users: [{ name: "alice", user: { token: "t" } }],
          contexts: [{ name: "prod-admin", context: { cluster: "prod", user: "alice" } }],
          "current-context": "prod-admin",
        },
      }]),
      undefined,
    ));
    const sleeps: number[] = [];
    const rest = createRestClient(connection, {
      sleep: (ms: number) => {
        sleeps.push(ms);
        return Promise.resolve();
      },
    });
    const error = await rest.json({ method: "GET", path: "/api/v1/nodes" }).catch((e) => e);
    assert.ok(error instanceof KubeApiError);
    const text = formatError(error);
    assert.match(
      text,
      /^error: Cannot GET \/api\/v1\/nodes on 'https:\/\/127\.0\.0\.1:\d+': the server's certificate is not signed by the CA of context 'prod-admin'/,
    );
    assert.doesNotMatch(text, /VPN|firewall|use-system-ca|caused by/);
    assert.equal(exitCodeOf(error), 6);
    assert.equal(error.isRetryable, false, "a certificate does not change between retries");
    assert.deepEqual(sleeps, []);
    assert.equal(requests, 0);
    // The same server through its own CA answers: the error was the trust, not the network.
    const trusted = nativeConnection(selectContext(
      mergeKubeConfigs([{
        path: "/prod.kubeconfig",
        document: {
          clusters: [{
            name: "prod",
            cluster: {
              server: `https://127.0.0.1:${port}`,
              "certificate-authority-data": Buffer.from(serverCa.caCert).toString("base64"),
            },
          }],
          users: [{ name: "alice", user: { token: "t" } }],
          contexts: [{ name: "prod-admin", context: { cluster: "prod", user: "alice" } }],
          "current-context": "prod-admin",
        },
      }]),
      undefined,
    ));
    assert.deepEqual(await createRestClient(trusted).json({ method: "GET", path: "/x" }), {});
  } finally {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
});

Deno.test("rest: text() hands the answer's headers to onHeaders (a daemon's build through the pod proxy)", async () => {
  await using server = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen: () => {} },
    () => new Response("body", { headers: { "x-aicr-commit": "3c5f0d2" } }),
  );
  const rest = createRestClient(loopbackConfig(server.addr.port), { retries: 0 });
  let commit: unknown;
  const body = await rest.text({
    method: "GET",
    path: "/api/v1/namespaces/ns/pods/https:p:8443/proxy/v1/snapshot",
    onHeaders: (headers) => void (commit = headers["x-aicr-commit"]),
  });
  assert.equal(body, "body");
  assert.equal(commit, "3c5f0d2");
});

/** A loopback server whose answers come slowly: headers after `headersMs`, then `chunks` lines every `everyMs`. */
function slowServer(options: { headersMs: number; chunks: number; everyMs: number }) {
  const later = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
  let requests = 0;
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, async () => {
    requests++;
    await later(options.headersMs);
    let sent = 0;
    const body = new ReadableStream<Uint8Array>({
      async pull(controller) {
        if (sent === options.chunks) {
          controller.close();
          return;
        }
        if (sent > 0) await later(options.everyMs);
        controller.enqueue(new TextEncoder().encode(sent === 0 ? `{"n":${sent}` : ` \n`));
        if (++sent === options.chunks) controller.enqueue(new TextEncoder().encode("}\n"));
      },
    });
    return new Response(body, { headers: { "content-type": "application/json" } });
  });
  // Shutting down waits for the answers in flight (each ends within its own timers).
  return {
    server,
    requests: () => requests,
    [Symbol.asyncDispose]: () => server.shutdown(),
  };
}

Deno.test({
  name: "rest: requestTimeoutMs bounds a whole answer, even one that keeps trickling in",
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    // An answer that takes ~1 s in all, a byte every 100 ms: never silent for long.
    await using slow = slowServer({ headersMs: 0, chunks: 10, everyMs: 100 });
    const config = loopbackConfig(slow.server.addr.port);
    const request = { method: "GET", path: "/api/v1/namespaces" } as const;
    // Without the option the answer arrives whole (the silence bound never fires).
    const whole = await createRestClient(config, { retries: 0 }).json<{ n: number }>(request);
    assert.equal(whole.n, 0);

    const error = await createRestClient(config, { retries: 2, requestTimeoutMs: 300 })
      .json(request).then(() => undefined, (e: unknown) => e);
    assert.equal(exitCodeOf(error), 5, String(error));
    assert.match(
      (error as Error).message,
      /^Cannot GET \/api\/v1\/namespaces on 'http:\/\/127\.0\.0\.1:\d+': no complete answer within the request timeout of 300ms: raise 'requestTimeout' \(0 for none\)$/,
    );
    // Not retried: the first answer plus this one, never a third.
    assert.equal(slow.requests(), 2);
  },
});

Deno.test({
  name: "rest: requestTimeoutMs bounds opening a stream, never the stream once it flows",
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    await using late = slowServer({ headersMs: 1000, chunks: 1, everyMs: 0 });
    const lateClient = createRestClient(loopbackConfig(late.server.addr.port), {
      requestTimeoutMs: 200,
    });
    const error = await lateClient.lines({ path: "/api/v1/pods", query: { watch: true } })
      .then(() => undefined, (e: unknown) => e);
    assert.equal(exitCodeOf(error), 5, String(error));

    await using flowing = slowServer({ headersMs: 0, chunks: 6, everyMs: 100 });
    const client = createRestClient(loopbackConfig(flowing.server.addr.port), {
      requestTimeoutMs: 200,
    });
    const stream = await client.lines({ path: "/api/v1/pods", query: { watch: true } });
    const lines: string[] = [];
    for await (const line of stream) lines.push(line);
    // Six chunks over ~500 ms, read to the end past the 200 ms bound.
    assert.equal(lines.join("").replaceAll(" ", ""), '{"n":0}');
    assert.equal(lines.length, 6);
  },
});
