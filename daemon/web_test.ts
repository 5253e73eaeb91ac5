import assert from "node:assert/strict";
import { request as httpsRequest } from "node:https";
import { NOOP_LOGGER } from "../log.ts";
import { createCachingAuthorizer } from "./auth.ts";
import { createDaemon } from "./daemon.ts";
import { serve } from "./serve.ts";
import { fakeCollector, fakeKubeAuth, generateTestTls } from "./_testing.ts";
import { LightHeaders, LightRequest, LightResponse, useLightWebClasses } from "./web.ts";

const TLS = generateTestTls();

/** Everything a headers object shows: its iteration, lookups and cookies. */
function headersView(headers: Headers | LightHeaders): unknown {
  const seen: [string, string][] = [];
  headers.forEach((value, key) => seen.push([key, value]));
  return {
    entries: [...headers.entries()],
    forEach: seen,
    keys: [...headers.keys()],
    values: [...headers.values()],
    get: ["X-A", "x-b", "set-cookie", "absent"].map((name) => headers.get(name)),
    has: ["x-a", "absent"].map((name) => headers.has(name)),
    cookies: headers.getSetCookie(),
  };
}

Deno.test("LightHeaders shows what Headers shows for the same calls", () => {
  const build = <H extends Headers | LightHeaders>(make: (init?: never) => H): H => {
    const h = make({ "x-b": " two ", "X-A": "1" } as never);
    h.append("x-a", "again");
    h.append("Set-Cookie", "a=1");
    h.append("set-cookie", "b=2");
    h.set("x-c", "3");
    h.append("x-d", "4");
    h.delete("X-D");
    return h;
  };
  const native = build((init) => new Headers(init));
  const light = build((init) => new LightHeaders(init));
  assert.deepEqual(headersView(light), headersView(native));
  // Made from another headers object, and from pairs.
  assert.deepEqual(headersView(new LightHeaders(light)), headersView(new Headers(native)));
  const pairs: [string, string][] = [["x-a", "1"], ["x-a", "2"], ["x-b", "\t3 "]];
  assert.deepEqual(headersView(new LightHeaders(pairs)), headersView(new Headers(pairs)));
  const bad: [string, string][] = [["bad name", "v"], ["x", "a\nb"]];
  for (const pair of bad) {
    assert.throws(() => new Headers([pair]), TypeError);
    assert.throws(() => new LightHeaders([pair]), TypeError);
  }
});

Deno.test("LightRequest holds the URL, method, headers and signal as Request does", () => {
  const controller = new AbortController();
  for (
    const [url, method] of [
      ["https://h:8443/a/../b/./c?q=a%20b#frag", "get"],
      ["http://localhost/%7Euser", "PATCH"],
      ["https://h/x", "custom"],
    ]
  ) {
    const init = { method: method as string, headers: { accept: "x" }, signal: controller.signal };
    const native = new Request(url as string, init);
    const light = new LightRequest(url as string, init);
    assert.equal(light.url, native.url);
    assert.equal(light.method, native.method);
    assert.equal(light.headers.get("Accept"), native.headers.get("Accept"));
    assert.equal(light.signal, controller.signal);
  }
  assert.throws(() => new LightRequest("not a url"), TypeError);
  assert.throws(() => new LightRequest("https://h/", { method: "POST", body: "x" }), TypeError);
});

Deno.test("LightResponse holds the status, headers and body as Response does", async () => {
  const cases: [string | Uint8Array | null, ResponseInit][] = [
    ["h\u00e9llo", { status: 201, headers: { "x-a": "1" } }],
    ["typed", { headers: { "content-type": "application/json" } }],
    [new TextEncoder().encode("bytes"), { status: 200 }],
    [null, { status: 304, statusText: "Not Modified", headers: { etag: '"e"' } }],
  ];
  for (const [body, init] of cases) {
    const native = new Response(body as BodyInit | null, init);
    const light = new LightResponse(body, init as never);
    assert.equal(light.status, native.status);
    assert.equal(light.statusText, native.statusText);
    assert.equal(light.ok, native.ok);
    assert.deepEqual([...light.headers.entries()], [...native.headers.entries()]);
    assert.deepEqual(
      new Uint8Array(await light.arrayBuffer()),
      new Uint8Array(await native.arrayBuffer()),
    );
    // A response made from another, as Hono answers HEAD.
    const copy = new LightResponse(null, light as never);
    assert.equal(copy.status, light.status);
    assert.deepEqual([...copy.headers.entries()], [...light.headers.entries()]);
  }
});

/** A raw HTTPS request through node:https: status, headers but the date, body. */
function rawRequest(
  url: string,
  options: { method?: string; headers?: Record<string, string> } = {},
): Promise<unknown> {
  return new Promise((resolve, reject) => {
    const req = httpsRequest(url, {
      method: options.method ?? "GET",
      headers: options.headers ?? {},
      ca: TLS.ca,
      agent: false,
    }, (res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (chunk) => (body += chunk));
      res.on("end", () => {
        const { date: _date, ...headers } = res.headers;
        resolve({ status: res.statusCode, headers, body });
      });
      res.on("error", reject);
    });
    req.on("error", reject);
    req.end();
  });
}

/** The daemon's answers to one set of requests, from a fresh daemon with a fixed clock. */
async function daemonAnswers(): Promise<unknown[]> {
  const clock = Date.parse("2026-03-21T10:30:05Z");
  const daemon = createDaemon({
    collect: fakeCollector().collect,
    auth: createCachingAuthorizer(fakeKubeAuth(), { clock: () => clock }),
    clock: () => clock,
    log: NOOP_LOGGER,
    build: { version: "0.1.0", commit: "abc" },
    nodeName: "node-1",
  });
  const server = await serve(daemon.app, {
    hostname: "127.0.0.1",
    port: 0,
    tls: { cert: TLS.cert, key: TLS.key },
  });
  const reader = { authorization: "Bearer token-reader" };
  try {
    const answers: unknown[] = [];
    const ask = async (path: string, init: Parameters<typeof rawRequest>[1] = {}) =>
      answers.push(await rawRequest(`${server.url}${path}`, init));
    await ask("/healthz");
    await ask("/readyz");
    await ask("/v1/snapshot");
    await ask("/v1/snapshot", { headers: { authorization: "Bearer token-other" } });
    await ask("/v1/snapshot", { headers: reader });
    await ask("/v1/snapshot?format=json", { headers: reader });
    await ask("/v1/snapshot/gpu", { headers: { ...reader, accept: "application/json" } });
    await ask("/v1/snapshot/Nope", { headers: reader });
    await ask("/v1/snapshot", { method: "HEAD", headers: reader });
    await ask("/v1/snapshot?format=xml", { headers: reader });
    await ask("/v1/snapshot", { method: "DELETE" });
    await ask("/elsewhere");
    const etag = (answers[4] as { headers: Record<string, string> }).headers.etag ?? "";
    await ask("/v1/snapshot", { headers: { ...reader, "if-none-match": etag } });
    await ask("/v1/history", { headers: reader });
    return answers;
  } finally {
    await server.shutdown();
    await daemon.close();
  }
}

Deno.test("the daemon answers the same bytes with web.ts's classes as with the runtime's", async () => {
  const globals = globalThis as unknown as Record<string, unknown>;
  const saved = { Headers: globals.Headers, Request: globals.Request, Response: globals.Response };
  const byRuntime = await daemonAnswers();
  let byLight: unknown[];
  useLightWebClasses(globals);
  try {
    assert.equal(globalThis.Response, LightResponse as unknown);
    byLight = await daemonAnswers();
  } finally {
    Object.assign(globals, saved);
  }
  assert.deepEqual(byLight, byRuntime);
  const statuses = byRuntime.map((a) => (a as { status: number }).status);
  // healthz, readyz before any collection, no token, denied, YAML, JSON, one measurement, an
  // unknown one, HEAD, a bad format, another method, another path, If-None-Match, history.
  const want = [200, 503, 401, 403, 200, 200, 200, 404, 200, 400, 405, 404, 304, 200];
  assert.deepEqual(statuses, want);
});
