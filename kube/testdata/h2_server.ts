/**
 * An HTTP/2 API server stand-in over TLS for the transport's tests, and the PING scenarios they run
 * under Deno and, bundled, under Node 24 (the release runtime): `node_h2_ping.ts`.
 *
 * @module
 */
import { Buffer } from "node:buffer";
import type http from "node:http";
import type http2 from "node:http2";
import type { Socket } from "node:net";
import { generateDaemonCa, generateServingKey, issueServingCertificate } from "../../x509.ts";
import { nativeConnection } from "../connection.ts";
import { KubeApiError } from "../errors.ts";
import { createH2Transport } from "../h2.ts";
import type { ConnectionInfo, H2Request } from "../h2.ts";
import { mergeKubeConfigs, selectContext } from "../kubeconfig.ts";
import { createRestClient } from "../rest.ts";
import type { RestClient } from "../rest.ts";

/** A CA and a serving certificate for 127.0.0.1. */
export function servingMaterial(): { ca: string; cert: string; key: string } {
  const now = new Date();
  const ca = generateDaemonCa({ now });
  const key = generateServingKey();
  const cert = issueServingCertificate({
    ca,
    publicKey: key.publicKey,
    node: "localhost",
    ipAddresses: ["127.0.0.1"],
    now,
    lifetimeSeconds: 3600,
  });
  return {
    ca: ca.caCert,
    cert,
    key: key.privateKey.export({ type: "pkcs8", format: "pem" }) as string,
  };
}

/** Answers one stream: the stream, its headers, its connection and its number on it. */
export type StreamHandler = (
  stream: http2.ServerHttp2Stream,
  headers: http2.IncomingHttpHeaders,
  session: http2.ServerHttp2Session,
  nth: number,
) => void;

/** A running {@link h2Server}. */
export interface H2TestServer extends AsyncDisposable {
  /** Its port on 127.0.0.1. */
  port: number;
  /** The CA its certificate is from. */
  ca: string;
  /** Each stream's request headers, in arrival order. */
  seen: http2.IncomingHttpHeaders[];
  /** Connections made so far. */
  readonly connections: number;
}

/**
 * An HTTP/2 server over TLS (ALPN `h2` only) counting its connections and each connection's
 * streams; `handle` answers each stream.
 */
export async function h2Server(handle: StreamHandler): Promise<H2TestServer> {
  const { createSecureServer } = await import("node:http2");
  const material = servingMaterial();
  const sessions = new Set<http2.ServerHttp2Session>();
  const seen: http2.IncomingHttpHeaders[] = [];
  let connections = 0;
  const server = createSecureServer({ cert: material.cert, key: material.key });
  server.on("session", (session) => {
    connections++;
    sessions.add(session);
    let nth = 0;
    session.on("close", () => sessions.delete(session));
    session.on("error", () => {});
    session.on("stream", (stream, headers) => {
      seen.push(headers);
      stream.on("error", () => {});
      handle(stream, headers, session, ++nth);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as { port: number }).port;
  return {
    port,
    ca: material.ca,
    seen,
    get connections() {
      return connections;
    },
    async [Symbol.asyncDispose]() {
      for (const session of sessions) session.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

/** A running {@link http1Server}. */
export interface Http1TestServer extends AsyncDisposable {
  /** Its port on 127.0.0.1. */
  port: number;
  /** The CA its certificate is from. */
  ca: string;
  /** TLS connections made so far. */
  readonly connections: number;
}

/** An HTTPS server that offers no HTTP/2 (ALPN none: HTTP/1.1), counting its connections. */
export async function http1Server(handle: http.RequestListener): Promise<Http1TestServer> {
  const { createServer } = await import("node:https");
  const material = servingMaterial();
  let connections = 0;
  const server = createServer({ cert: material.cert, key: material.key }, handle);
  server.on("secureConnection", () => connections++);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    port: (server.address() as { port: number }).port,
    ca: material.ca,
    get connections() {
      return connections;
    },
    async [Symbol.asyncDispose]() {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

/** A REST client of `https://127.0.0.1:port` trusting `ca`, with a bearer token, no retries. */
export function restClientOf(
  port: number,
  ca: string,
  onConnect: (info: ConnectionInfo) => void,
): RestClient {
  const connection = nativeConnection(selectContext(
    mergeKubeConfigs([{
      path: "/lab.kubeconfig",
      document: {
        clusters: [{
          name: "lab",
          cluster: {
            server: `https://127.0.0.1:${port}`,
            "certificate-authority-data": Buffer.from(ca).toString("base64"),
          },
        }],
        users: [{ name: "admin", user: { token: "t0ken" } }],
        contexts: [{ name: "lab", context: { cluster: "lab", user: "admin" } }],
        "current-context": "lab",
      },
    }]),
    undefined,
  ));
  return createRestClient(connection, { retries: 0, onConnect });
}

/** Answers a stream with `body` as JSON. */
export function answer(stream: http2.ServerHttp2Stream, body: unknown): void {
  stream.respond({ ":status": 200, "content-type": "application/json" });
  stream.end(JSON.stringify(body));
}

/** A running {@link tcpRelay}. */
export interface TcpRelay extends AsyncDisposable {
  /** Its port on 127.0.0.1. */
  port: number;
  /** Stops carrying bytes on the connections it has, keeping them open. */
  silence(): void;
  /** Closes the connections it has. */
  cut(): void;
}

/**
 * A TCP relay in front of `port`. Its `silence()` stops carrying bytes either way on the
 * connections it has, keeping them open: a host gone from the network, as the client sees it. Its
 * `cut()` closes them: a killed server, as the client sees it. Connections made afterwards are
 * carried.
 */
export async function tcpRelay(port: number): Promise<TcpRelay> {
  const net = await import("node:net");
  const live = new Set<{ silent: boolean }>();
  const sockets = new Set<Socket>();
  const relay = net.createServer((client) => {
    const state = { silent: false };
    live.add(state);
    const upstream = net.connect(port, "127.0.0.1");
    for (const [from, to] of [[client, upstream], [upstream, client]] as const) {
      sockets.add(from);
      from.on("data", (chunk) => {
        if (!state.silent) to.write(chunk);
      });
      from.on("error", () => {});
      from.on("close", () => to.destroy());
    }
  });
  await new Promise<void>((resolve) => relay.listen(0, "127.0.0.1", resolve));
  const cut = () => {
    for (const socket of sockets) socket.destroy();
    sockets.clear();
    live.clear();
  };
  return {
    port: (relay.address() as { port: number }).port,
    silence: () => {
      for (const state of live) state.silent = true;
      live.clear();
    },
    cut,
    async [Symbol.asyncDispose]() {
      cut();
      await new Promise((resolve) => relay.close(resolve));
    },
  };
}

/** A GET over a transport, a watch (`?watch=true`) unless `stream` is false. */
function watchRequest(port: number, ca: string, path: string, stream = true): H2Request {
  return {
    url: new URL(`https://127.0.0.1:${port}${path}${stream ? "?watch=true" : ""}`),
    method: "GET",
    headers: {},
    tls: { ca },
    timeoutMs: 0,
    stream,
  };
}

/** `promise`, or a rejection naming the deadline when it takes longer. */
function withDeadline<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`still waiting after ${ms} ms`)), ms);
  });
  return Promise.race([promise, late]).finally(() => clearTimeout(timer));
}

/** The text of a body until it ends, or its error. */
async function readBody(body: AsyncIterable<Buffer | string>): Promise<string> {
  let text = "";
  for await (const chunk of body) text += chunk.toString();
  return text;
}

/** What {@link pingScenarios} saw. */
export interface PingReport {
  /**
   * A watch on a connection that fell silent: its first line, the PINGs answered before the
   * silence, how it failed, after how long.
   */
  dead: { first: string; pings: number; error: string; tookMs: number };
  /** The request after it: its answer and the server's connection count then. */
  next: { body: string; connections: number };
  /** A watch silent for several PING rounds on a live connection: its text, PINGs, connections. */
  live: { body: string; pings: number; connections: number };
}

/** The idle and PING bounds the scenarios use, and a counter of the PINGs answered. */
function bounds(pings: { n: number }) {
  return { idleMs: 200, pingTimeoutMs: 300, onPing: () => pings.n++ };
}

/**
 * Runs the transport's PING scenarios: a watch whose connection falls silent after several
 * answered PINGs, the request after it, and a silent watch on a live connection.
 *
 * @returns what each saw (a failure's message as text)
 */
export async function pingScenarios(): Promise<PingReport> {
  await using server = await h2Server((stream, headers) => {
    if (String(headers[":path"]).includes("watch=true")) {
      stream.respond({ ":status": 200 });
      stream.write('{"type":"ADDED"}\n'); // then nothing: the watch has nothing to say
      if (String(headers[":path"]).includes("live")) {
        setTimeout(() => stream.end('{"type":"DELETED"}\n'), 1500);
      }
      return;
    }
    answer(stream, { path: headers[":path"] });
  });
  await using relay = await tcpRelay(server.port);
  const deadPings = { n: 0 };
  const transport = createH2Transport(bounds(deadPings));
  const watch = await transport.send(watchRequest(relay.port, server.ca, "/watch"), false);
  if (!watch) throw new Error("the server answered in HTTP/1.1");
  const first = await new Promise<string>((resolve) =>
    watch.body.once("data", (chunk) => resolve(String(chunk)))
  );
  // Live for several idle bounds first: each silence is asked about, not only the first.
  await new Promise((resolve) => setTimeout(resolve, 900));
  relay.silence();
  const pings = deadPings.n;
  const started = Date.now();
  const error = await withDeadline(readBody(watch.body), 5000).then(
    (text) => `no error; the watch ended with '${text}'`,
    (e: Error) => e.message,
  );
  const dead = { first, pings, error, tookMs: Date.now() - started };
  const nextAnswer = await transport.send(watchRequest(relay.port, server.ca, "/p", false), true);
  const next = { body: nextAnswer ? await readBody(nextAnswer.body) : "", connections: 0 };
  next.connections = server.connections;
  const livePings = { n: 0 };
  const live = await createH2Transport(bounds(livePings)).send(
    watchRequest(server.port, server.ca, "/watch-live"),
    false,
  );
  const liveBody = live ? await withDeadline(readBody(live.body), 5000) : "";
  return {
    dead,
    next,
    live: { body: liveBody, pings: livePings.n, connections: server.connections - 2 },
  };
}

/** What {@link cutScenarios} saw: per body length sent before the cut, how the GET failed. */
export type CutReport = { bodyLength: number; status: number; retryable: boolean; error: string }[];

/**
 * GETs whose answer is cut by its connection closing after the headers (and no body, or part of
 * one): a killed API server, as the client sees it.
 *
 * @returns how each failed (a GET that resolved is reported with status -1)
 */
export async function cutScenarios(): Promise<CutReport> {
  const report: CutReport = [];
  for (const partial of ["", '{"kind":"Job","metadata":{"na']) {
    const relay: { cut?: () => void } = {};
    await using server = await h2Server((stream) => {
      stream.respond({ ":status": 200, "content-type": "application/json" });
      if (partial !== "") stream.write(partial);
      setTimeout(() => relay.cut?.(), 50);
    });
    await using cutting = await tcpRelay(server.port);
    relay.cut = cutting.cut;
    const rest = restClientOf(cutting.port, server.ca, () => {});
    const outcome = await rest.json({ method: "GET", path: "/apis/batch/v1/namespaces/ns/jobs/j" })
      .then(
        (body) => ({ status: -1, retryable: false, error: `resolved: ${JSON.stringify(body)}` }),
        (error) => ({
          status: error instanceof KubeApiError ? error.status : -2,
          retryable: error instanceof KubeApiError && error.isRetryable,
          error: String(error),
        }),
      );
    report.push({ bodyLength: partial.length, ...outcome });
  }
  return report;
}

/**
 * A watch over HTTP/1.1 (a server that offers no h2), held open after its first line: the TCP
 * keepalive timer of its connection as the kernel shows it (`ss -o`), in seconds, or undefined
 * when the socket has none.
 *
 * @returns the first line and the keepalive timer
 */
export async function http1WatchKeepalive(): Promise<{ first: string; keepaliveSec?: number }> {
  const { execFileSync } = await import("node:child_process");
  await using server = await http1Server((_req, res) => {
    res.setHeader("content-type", "application/json");
    res.write('{"type":"ADDED"}\n'); // then nothing: the watch has nothing to say
  });
  const rest = restClientOf(server.port, server.ca, () => {});
  const watch = await rest.lines({ path: "/api/v1/pods", query: { watch: true } });
  const lines = watch[Symbol.asyncIterator]();
  const first = String((await lines.next()).value);
  const shown = execFileSync("ss", ["-tnoH", "state", "established", `dport = :${server.port}`], {
    encoding: "utf8",
  });
  watch.close();
  const timer = /timer:\(keepalive,(?:(\d+)min)?(\d+(?:\.\d+)?)sec/.exec(shown);
  if (!timer) return { first };
  return { first, keepaliveSec: Number(timer[1] ?? 0) * 60 + Number(timer[2]) };
}
