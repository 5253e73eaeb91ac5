/**
 * Serves a fetch handler (a Hono app's `fetch`) over `node:https` (or, only when asked for,
 * plain `node:http`), so the same code runs under Deno and in the Node single executable. It
 * holds the small adapter between `IncomingMessage`/`ServerResponse` and web
 * `Request`/`Response`, the request bounds (body size, header size, timeouts) and the
 * graceful shutdown (stop accepting, finish in-flight requests, close idle keep-alive sockets,
 * force the rest after a bounded drain).
 *
 * @module
 */
import { createPrivateKey, X509Certificate } from "node:crypto";
import type { KeyObject } from "node:crypto";
import http from "node:http";
import type { IncomingMessage, ServerResponse } from "node:http";
import https from "node:https";
import type { AddressInfo, Socket } from "node:net";
import type { Duplex } from "node:stream";
import type { Logger } from "../log.ts";
import { NOOP_LOGGER } from "../log.ts";

/** What the server knows of a request's connection, handed to the app as its `env`. */
export interface ConnectionInfo {
  /** The peer's address (the API server's, for requests through its pod proxy). */
  remoteAddress?: string;
}

/** A web fetch handler. */
export type FetchHandler = (
  request: Request,
  connection?: ConnectionInfo,
) => Response | Promise<Response>;

/**
 * TLS 1.2 and 1.3 only, and in TLS 1.2 only AEAD suites with forward secrecy (ECDHE with
 * AES-GCM or ChaCha20-Poly1305): no CBC-SHA1, no static RSA. TLS 1.3's suites are all AEAD and
 * stay as they are: Mozilla's "intermediate" profile without its DHE suites.
 */
export const TLS_PROTOCOLS = {
  minVersion: "TLSv1.2",
  ciphers: [
    "TLS_AES_128_GCM_SHA256",
    "TLS_AES_256_GCM_SHA384",
    "TLS_CHACHA20_POLY1305_SHA256",
    "ECDHE-ECDSA-AES128-GCM-SHA256",
    "ECDHE-RSA-AES128-GCM-SHA256",
    "ECDHE-ECDSA-AES256-GCM-SHA384",
    "ECDHE-RSA-AES256-GCM-SHA384",
    "ECDHE-ECDSA-CHACHA20-POLY1305",
    "ECDHE-RSA-CHACHA20-POLY1305",
  ].join(":"),
  honorCipherOrder: true,
} as const;

/** What {@link serve} serves: a fetch handler, or an app holding one (a Hono app). */
export type Servable = FetchHandler | { fetch: FetchHandler };

/** A PEM certificate chain and its key. */
export interface TlsMaterial {
  /** PEM certificate (chain). */
  cert: string;
  /** PEM private key. */
  key: string;
}

/** Limits and timeouts of {@link serve}. */
export interface ServeLimits {
  /** Largest request body accepted, bytes; larger ones get 413. @default 0 (no bodies) */
  maxBodyBytes?: number;
  /** Largest request head (request line and headers), bytes. @default 16_384 */
  maxHeaderBytes?: number;
  /** Time allowed to receive the request head. @default 10_000 */
  headersTimeoutMs?: number;
  /** Time allowed to receive the whole request. @default 30_000 */
  requestTimeoutMs?: number;
  /** Time allowed for the handler to produce a response; then 503. @default 200_000 */
  handlerTimeoutMs?: number;
  /** How long an idle keep-alive connection stays open. @default 5_000 */
  keepAliveTimeoutMs?: number;
  /** How long a graceful shutdown waits for in-flight requests before closing sockets. @default 10_000 */
  drainTimeoutMs?: number;
}

/** Options of {@link serve}. */
export interface ServeOptions extends ServeLimits {
  /** Address to bind. @default "0.0.0.0" */
  hostname?: string;
  /** Port to bind; 0 picks a free one. @default 8443 */
  port?: number;
  /** Certificate and key. Required unless `insecureHttp` is set. */
  tls?: TlsMaterial;
  /** Serve plain HTTP (tests and local runs only). @default false */
  insecureHttp?: boolean;
  /** Aborting it starts the graceful shutdown. */
  signal?: AbortSignal;
  /** Logger. */
  log?: Logger;
}

/** A running server. */
export interface RunningServer {
  /** The bound address. */
  hostname: string;
  /** The bound port. */
  port: number;
  /** `https://host:port` (or `http://`). */
  url: string;
  /** Requests being handled right now. */
  readonly inFlight: number;
  /** Resolves once the server has stopped and every connection is closed. */
  finished: Promise<void>;
  /**
   * Stops gracefully: no new connections, in-flight requests finish (their responses carry
   * `Connection: close`), idle sockets close, and after the drain timeout the rest are cut.
   */
  shutdown(): Promise<void>;
  /**
   * Replaces the certificate and key for new connections (a rotated Secret); open connections
   * keep theirs.
   *
   * @returns the new certificate's subject and expiry
   * @throws {TypeError} when the server is plain HTTP, or the PEM texts are not a certificate
   *   and its key (the old ones stay in use)
   */
  setTls(material: TlsMaterial): TlsInfo;
}

const HOST_REGEXP = /^[A-Za-z0-9.\-]+(:\d{1,5})?$|^\[[0-9A-Fa-f:.]+\](:\d{1,5})?$/;

function plainResponse(res: ServerResponse, status: number, message: string): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const body = JSON.stringify({
    kind: "Status",
    apiVersion: "v1",
    status: "Failure",
    message,
    code: status,
  }) + "\n";
  res.writeHead(status, {
    "content-type": "application/json; charset=utf-8",
    "content-length": Buffer.byteLength(body),
    "connection": "close",
  });
  res.end(body);
}

function declaredBodyBytes(req: IncomingMessage): number | undefined {
  const te = req.headers["transfer-encoding"];
  if (te !== undefined && te !== "identity") return undefined;
  const cl = req.headers["content-length"];
  if (cl === undefined) return 0;
  const n = Number(cl);
  return Number.isSafeInteger(n) && n >= 0 ? n : undefined;
}

async function readBody(
  req: IncomingMessage,
  maxBytes: number,
): Promise<Uint8Array<ArrayBuffer> | null> {
  const chunks: Uint8Array[] = [];
  let total = 0;
  for await (const chunk of req) {
    const bytes = chunk as Uint8Array;
    total += bytes.byteLength;
    // guard: body-size: a body over the bound is refused
    if (total > maxBytes) return null;
    chunks.push(bytes);
  }
  return new Uint8Array(Buffer.concat(chunks));
}

/** What {@link validateTls} learned about a certificate. */
export interface TlsInfo {
  /** Subject of the leaf certificate. */
  subject: string;
  /** End of validity. */
  notAfter: Date;
}

/**
 * Checks that PEM texts hold a certificate and the private key that matches it. Deno's
 * node:tls accepts anything here and fails each handshake later, so serve() checks first.
 *
 * @param material the PEM certificate (chain) and key
 * @returns the leaf certificate's subject and expiry
 * @throws {TypeError} when either does not parse or the key does not match the certificate
 */
export function validateTls(material: TlsMaterial): TlsInfo {
  let certificate: X509Certificate;
  try {
    certificate = new X509Certificate(material.cert);
  } catch (error) {
    throw new TypeError(`Cannot read the TLS certificate: ${(error as Error).message}`);
  }
  let key: KeyObject;
  try {
    key = createPrivateKey(material.key);
  } catch (error) {
    throw new TypeError(`Cannot read the TLS private key: ${(error as Error).message}`);
  }
  if (!certificate.checkPrivateKey(key)) {
    throw new TypeError("Cannot use the TLS key: it does not match the certificate");
  }
  return { subject: certificate.subject, notAfter: new Date(certificate.validTo) };
}

/**
 * The URL of a node request: its target on the `Host` it names (when that is a plain host and
 * port), else on the base URL. An origin-form target ("/path?query") is appended as is, so the
 * URL is parsed only once (by the caller); anything else (absolute-form, "*") goes through the
 * URL parser here.
 */
function requestUrl(req: IncomingMessage, baseUrl: string): string {
  const host = req.headers.host;
  const base = host && HOST_REGEXP.test(host)
    ? `${baseUrl.slice(0, baseUrl.indexOf(":"))}://${host}`
    : baseUrl;
  const target = req.url ?? "/";
  return target.startsWith("/") && !target.startsWith("//")
    ? base + target
    : new URL(target, base).href;
}

/**
 * Converts a node request into a web `Request` (the body, if any, already buffered).
 *
 * @param req the node request
 * @param options base URL for relative targets, the request's signal and the body
 * @returns the web request
 * @throws {TypeError} when the target is not a valid URL
 */
export function toWebRequest(
  req: IncomingMessage,
  options: { baseUrl: string; signal: AbortSignal; body?: Uint8Array<ArrayBuffer> | null },
): Request {
  const headers = new Headers();
  const raw = req.rawHeaders;
  for (let i = 0; i + 1 < raw.length; i += 2) {
    try {
      headers.append(raw[i] as string, raw[i + 1] as string);
    } catch {
      // A header the fetch API refuses is dropped rather than failing the request.
    }
  }
  const url = requestUrl(req, options.baseUrl);
  const method = req.method ?? "GET";
  const init: RequestInit = { method, headers, signal: options.signal };
  if (options.body && options.body.byteLength > 0 && method !== "GET" && method !== "HEAD") {
    init.body = options.body;
  }
  return new Request(url, init);
}

/** Options of {@link writeWebResponse}. */
export interface WriteResponseOptions {
  /** Headers added last (e.g. `connection: close` while draining). */
  extraHeaders?: Record<string, string>;
  /** The request was a HEAD: keep the handler's headers, send no body. @default false */
  head?: boolean;
}

/**
 * Writes a web `Response` to a node response. The body is read with `arrayBuffer()` and never
 * through `response.body` (touching that getter turns a static body into a stream, which is
 * several times slower), so `Content-Length` is known and keep-alive needs no chunking;
 * streaming responses are therefore buffered, which the daemon never sends.
 *
 * @param response the web response
 * @param res the node response
 * @param options extra headers and whether the request was a HEAD
 * @returns when the response has been handed to the socket
 */
export async function writeWebResponse(
  response: Response,
  res: ServerResponse,
  options: WriteResponseOptions = {},
): Promise<void> {
  const { extraHeaders = {}, head = false } = options;
  const headers: Record<string, string | string[]> = {};
  response.headers.forEach((value, key) => {
    if (key !== "set-cookie") headers[key] = value;
  });
  const cookies = response.headers.getSetCookie();
  if (cookies.length > 0) headers["set-cookie"] = cookies;
  Object.assign(headers, extraHeaders);
  const body = await response.arrayBuffer();
  if (res.destroyed) return;
  const bodyless = head || response.status === 204 || response.status === 304;
  if (!bodyless && headers["content-length"] === undefined) {
    headers["content-length"] = String(body.byteLength);
  }
  res.writeHead(response.status, headers);
  if (bodyless || body.byteLength === 0) res.end();
  else res.end(new Uint8Array(body));
}

/**
 * Serves a fetch handler until `signal` aborts or `shutdown()` is called.
 *
 * @param handler the fetch handler (`app.fetch`), or the app itself (a Hono app)
 * @param options address, TLS material, limits and shutdown signal
 * @returns the running server, once listening
 * @throws {TypeError} when neither `tls` nor `insecureHttp` is given, or `tls` is not a
 *   certificate and its key
 */
export async function serve(
  servable: Servable,
  options: ServeOptions = {},
): Promise<RunningServer> {
  const handler = typeof servable === "function" ? servable : servable.fetch;
  const {
    hostname = "0.0.0.0",
    port = 8443,
    tls,
    insecureHttp = false,
    signal,
    log = NOOP_LOGGER,
    maxBodyBytes = 0,
    maxHeaderBytes = 16_384,
    headersTimeoutMs = 10_000,
    requestTimeoutMs = 30_000,
    handlerTimeoutMs = 200_000,
    keepAliveTimeoutMs = 5_000,
    drainTimeoutMs = 10_000,
  } = options;
  if (!tls && !insecureHttp) {
    throw new TypeError(
      "Cannot serve as 'tls' is missing: pass a certificate and key, or insecureHttp",
    );
  }
  const tlsInfo = tls ? validateTls(tls) : undefined;
  const scheme = tls ? "https" : "http";
  const state: ServeState = {
    inFlight: 0,
    draining: false,
    active: new Set<Pending>(),
    connections: new ConnectionTracker(),
  };
  const { connections } = state;
  const limits = { maxBodyBytes, handlerTimeoutMs, baseUrl: `${scheme}://${hostname}` };
  const onRequest = (req: IncomingMessage, res: ServerResponse) =>
    handleRequest(state, { handler, log, ...limits }, req, res);

  // One sweep timer for every request's deadline, instead of a timer per request.
  // A connection still sending its first head is idle here too, so it gets the head deadline.
  const sweep = startSweep(state, {
    idleLimitMs: Math.max(keepAliveTimeoutMs + 1000, headersTimeoutMs),
    handlerTimeoutMs,
  });

  const listener = (req: IncomingMessage, res: ServerResponse) => void onRequest(req, res);
  const server = createNodeServer(listener, {
    tls,
    maxHeaderBytes,
    headersTimeoutMs,
    requestTimeoutMs,
    keepAliveTimeoutMs,
  });
  trackConnections(server, { tls: tls !== undefined, connections, log });

  await listen(server, { port, hostname, sweep });
  server.on("error", (error: Error) => log.error("server error", { error: error.message }));
  // The address is read before a shutdown (an aborted signal) can close the server.
  const running = runningServer(server, state, {
    scheme,
    address: server.address() as AddressInfo,
    ...createShutdown(server, state, {
      log,
      drainTimeoutMs,
      sweep,
      ...(signal ? { signal } : {}),
    }),
  });
  log.info("listening", {
    url: running.url,
    certificateNotAfter: tlsInfo?.notAfter.toISOString(),
  });
  return running;
}

/** The listening server as its caller holds it: address, requests in flight, shutdown, TLS. */
function runningServer(
  server: http.Server | https.Server,
  state: ServeState,
  control: Pick<RunningServer, "shutdown" | "finished"> & { scheme: string; address: AddressInfo },
): RunningServer {
  const { address } = control;
  const shownHost = address.family === "IPv6" ? `[${address.address}]` : address.address;
  return {
    hostname: address.address,
    port: address.port,
    url: `${control.scheme}://${shownHost}:${address.port}`,
    get inFlight() {
      return state.inFlight;
    },
    finished: control.finished,
    shutdown: control.shutdown,
    setTls(material) {
      if (control.scheme !== "https") {
        throw new TypeError("Cannot set TLS material on a plain HTTP server");
      }
      const info = validateTls(material);
      // The protocol floor and suites are part of each context: a new one keeps them.
      (server as https.Server).setSecureContext({
        cert: material.cert,
        key: material.key,
        ...TLS_PROTOCOLS,
      });
      return info;
    },
  };
}

/**
 * One timer for every request's deadline (instead of a timer per request) and for idle
 * connections: an overdue handler is aborted and answered 503.
 */
function startSweep(
  state: ServeState,
  options: { idleLimitMs: number; handlerTimeoutMs: number },
): ReturnType<typeof setInterval> {
  const { idleLimitMs, handlerTimeoutMs } = options;
  return setInterval(() => {
    state.connections.closeIdle(idleLimitMs);
    const now = performance.now();
    for (const pending of state.active) {
      if (pending.deadline > now) continue;
      state.active.delete(pending);
      pending.controller.abort(
        new Error(`The handler did not answer within ${handlerTimeoutMs} ms`),
      );
      plainResponse(
        pending.res,
        503,
        `Cannot answer: the request took longer than ${handlerTimeoutMs} ms`,
      );
    }
  }, Math.max(10, Math.min(1000, handlerTimeoutMs / 4)));
}

/**
 * Stops accepting, closes idle connections, lets requests in flight finish, and after the drain
 * timeout closes what is left (a second more, should the runtime still count a connection).
 */
function drain(
  server: http.Server,
  state: ServeState,
  options: { log: Logger; drainTimeoutMs: number },
): Promise<void> {
  const { log, drainTimeoutMs } = options;
  return new Promise<void>((resolve) => {
    let last: ReturnType<typeof setTimeout> | undefined;
    const done = () => {
      clearTimeout(force);
      clearTimeout(last);
      resolve();
    };
    const force = setTimeout(() => {
      log.warn("drain timeout: closing remaining connections", { inFlight: state.inFlight });
      server.closeAllConnections();
      state.connections.destroyAll();
      last = setTimeout(() => {
        log.warn("server did not report closing; stopping anyway");
        done();
      }, 1000);
    }, drainTimeoutMs);
    server.close(done);
    server.closeIdleConnections();
    state.connections.closeIdle(0);
  });
}

/** A request in flight, with the deadline the sweep enforces. */
interface Pending {
  deadline: number;
  controller: AbortController;
  res: ServerResponse;
}

/** What one server shares across its requests. */
interface ServeState {
  inFlight: number;
  draining: boolean;
  active: Set<Pending>;
  connections: ConnectionTracker;
}

/**
 * Serves one request: bounded body, the Web handler, its response (or a plain 400/413/500), with
 * the request and its connection counted while it runs.
 */
async function handleRequest(
  state: ServeState,
  config: {
    handler: FetchHandler;
    log: Logger;
    maxBodyBytes: number;
    handlerTimeoutMs: number;
    baseUrl: string;
  },
  req: IncomingMessage,
  res: ServerResponse,
): Promise<void> {
  state.inFlight += 1;
  const socket = req.socket;
  const connection = state.connections.track(socket);
  connection.active += 1;
  const controller = new AbortController();
  res.once("close", () => {
    state.inFlight -= 1;
    connection.active -= 1;
    connection.idleSince = performance.now();
    if (!res.writableFinished) controller.abort(new Error("The client closed the connection"));
    // end(), not destroy(): the response may still sit in the socket's buffers.
    if (state.draining && connection.active === 0) socket.end();
  });
  const pending: Pending = {
    deadline: performance.now() + config.handlerTimeoutMs,
    controller,
    res,
  };
  state.active.add(pending);
  try {
    const declared = declaredBodyBytes(req);
    if (declared === undefined ? config.maxBodyBytes === 0 : declared > config.maxBodyBytes) {
      plainResponse(
        res,
        413,
        `Cannot accept a request body larger than ${config.maxBodyBytes} bytes`,
      );
      return;
    }
    let body: Uint8Array<ArrayBuffer> | null = null;
    if (declared !== 0) {
      body = await readBody(req, config.maxBodyBytes);
      if (body === null) {
        plainResponse(
          res,
          413,
          `Cannot accept a request body larger than ${config.maxBodyBytes} bytes`,
        );
        return;
      }
    }
    const answer = {
      baseUrl: config.baseUrl,
      signal: controller.signal,
      draining: () => state.draining,
    };
    await answerWeb(config.handler, req, res, { ...answer, body });
  } catch (error) {
    config.log.error("request handler failed", {
      error: error instanceof Error ? error.message : String(error),
    });
    plainResponse(res, 500, "Internal error: see the daemon's log");
  } finally {
    state.active.delete(pending);
  }
}

/** How one request is answered: its URL's base, its signal, and whether the server drains now. */
interface AnswerOptions {
  baseUrl: string;
  signal: AbortSignal;
  draining: () => boolean;
}

/** Answers a request through a fetch handler: a web `Request` in, a web `Response` out. */
async function answerWeb(
  handler: FetchHandler,
  req: IncomingMessage,
  res: ServerResponse,
  options: AnswerOptions & { body: Uint8Array<ArrayBuffer> | null },
): Promise<void> {
  let request: Request;
  try {
    request = toWebRequest(req, options);
  } catch {
    plainResponse(res, 400, "Cannot parse the request target");
    return;
  }
  const response = await handler(request, { remoteAddress: req.socket.remoteAddress ?? "" });
  if (res.headersSent || res.destroyed) return;
  await writeWebResponse(response, res, {
    head: req.method === "HEAD",
    ...(options.draining() ? { extraHeaders: { connection: "close" } } : {}),
  });
}

/**
 * The graceful shutdown, once, on `shutdown()` or the signal: stop accepting, drain the
 * requests in flight (up to `drainTimeoutMs`), stop the sweep, then resolve `finished`.
 */
function createShutdown(
  server: http.Server,
  state: ServeState,
  options: {
    log: Logger;
    drainTimeoutMs: number;
    sweep: ReturnType<typeof setInterval>;
    signal?: AbortSignal;
  },
): { shutdown(): Promise<void>; finished: Promise<void> } {
  const { log, drainTimeoutMs, sweep, signal } = options;
  let resolveFinished!: () => void;
  const finished = new Promise<void>((resolve) => (resolveFinished = resolve));
  let shutdownPromise: Promise<void> | undefined;

  function shutdown(): Promise<void> {
    if (shutdownPromise) return shutdownPromise;
    state.draining = true;
    signal?.removeEventListener("abort", onAbort);
    log.info("shutting down", { inFlight: state.inFlight });
    shutdownPromise = drain(server, state, { log, drainTimeoutMs })
      .then(() => clearInterval(sweep))
      .then(() => resolveFinished());
    return shutdownPromise;
  }
  function onAbort() {
    void shutdown();
  }
  if (signal?.aborted) void shutdown();
  else signal?.addEventListener("abort", onAbort, { once: true });
  return { shutdown, finished };
}

/**
 * Tracks the server's connections (for idle deadlines and the drain) and answers or logs
 * connections that fail before a request.
 */
function trackConnections(
  server: http.Server,
  options: { tls: boolean; connections: ConnectionTracker; log: Logger },
): void {
  const { tls, connections, log } = options;
  // For TLS, the socket of `secureConnection` is the request's `req.socket` (checked under Deno
  // and Node); the raw TCP socket of `connection` is not, and is its `_parent`.
  server.on(
    tls ? "secureConnection" : "connection",
    (socket: Socket) => connections.onConnection(socket),
  );
  if (tls) server.on("connection", (socket: Socket) => connections.onRawConnection(socket));
  server.on("clientError", answerClientError);
  server.on(
    "tlsClientError",
    (error: Error) => log.debug("TLS handshake failed", { error: error.message }),
  );
}

/** Listens; when that fails (port taken), stops the sweep and rejects with the error. */
function listen(
  server: http.Server,
  options: { port: number; hostname: string; sweep: ReturnType<typeof setInterval> },
): Promise<void> {
  const { port, hostname, sweep } = options;
  return new Promise<void>((resolve, reject) => {
    const onListenError = (error: Error) => {
      clearInterval(sweep);
      reject(error);
    };
    server.once("error", onListenError);
    server.listen(port, hostname, () => {
      server.off("error", onListenError);
      resolve();
    });
  });
}

/** The node:http(s) server with aicr's limits on heads, requests and keep-alive. */
function createNodeServer(
  listener: (req: IncomingMessage, res: ServerResponse) => void,
  options: {
    tls: TlsMaterial | undefined;
    maxHeaderBytes: number;
    headersTimeoutMs: number;
    requestTimeoutMs: number;
    keepAliveTimeoutMs: number;
  },
): http.Server {
  const { tls, maxHeaderBytes, headersTimeoutMs, requestTimeoutMs, keepAliveTimeoutMs } = options;
  const serverOptions = {
    maxHeaderSize: maxHeaderBytes,
    headersTimeout: headersTimeoutMs,
    requestTimeout: requestTimeoutMs,
    keepAliveTimeout: keepAliveTimeoutMs,
    // Node checks the head and request deadlines on this interval (default 30 s).
    connectionsCheckingInterval: Math.max(100, Math.min(1000, headersTimeoutMs / 2)),
  };
  const server: http.Server = tls
    ? https.createServer(
      {
        ...serverOptions,
        cert: tls.cert,
        key: tls.key,
        ...TLS_PROTOCOLS,
        handshakeTimeout: headersTimeoutMs,
      },
      listener,
    )
    : http.createServer(serverOptions, listener);
  server.headersTimeout = headersTimeoutMs;
  server.requestTimeout = requestTimeoutMs;
  server.keepAliveTimeout = keepAliveTimeoutMs;
  server.maxHeadersCount = 100;
  return server;
}

/** Answers a request Node could not parse (head too large, too slow, malformed), then closes. */
function answerClientError(error: NodeJS.ErrnoException, socket: Duplex): void {
  const status = error.code === "HPE_HEADER_OVERFLOW"
    ? "431 Request Header Fields Too Large"
    : error.code === "ERR_HTTP_REQUEST_TIMEOUT"
    ? "408 Request Timeout"
    : "400 Bad Request";
  if (socket.writable) {
    socket.end(`HTTP/1.1 ${status}\r\nConnection: close\r\nContent-Length: 0\r\n\r\n`);
  } else socket.destroy();
}

/**
 * Every connection with its requests in progress. Node tracks idle connections itself, but
 * Deno's node:http emulation does not count a connection that never carried a request as idle
 * (a fetch client opens such spares, seen after a response of about 16 KB), so it would outlive
 * both the keep-alive timeout and a graceful shutdown; this tracker closes such connections.
 *
 * Under TLS it also keeps the TCP connections that have not become a TLS socket in JavaScript:
 * Deno leaves a client's spare connection there, and it would hold a shutdown until the drain
 * timeout. They carry no request, so they are closed with the idle ones, but only once a TLS
 * socket has been seen naming its TCP socket (`_parent`), so an unknown runtime never loses a
 * live connection.
 */
class ConnectionTracker {
  #sockets = new Map<Socket, { active: number; idleSince: number }>();
  #rawSockets = new Map<Socket, { since: number; secured: boolean }>();
  #linkingWorks = false;

  /** The request bookkeeping of a connection, tracked from its first sight. */
  track(socket: Socket): { active: number; idleSince: number } {
    let state = this.#sockets.get(socket);
    if (!state) {
      state = { active: 0, idleSince: performance.now() };
      this.#sockets.set(socket, state);
      socket.once("close", () => this.#sockets.delete(socket));
    }
    return state;
  }

  /** A plain connection, or (under TLS) a secured one, whose TCP socket is linked here. */
  onConnection(socket: Socket): void {
    this.track(socket);
    const parent = (socket as { _parent?: unknown })._parent;
    const raw = parent === undefined ? undefined : this.#rawSockets.get(parent as Socket);
    if (raw) {
      raw.secured = true;
      this.#linkingWorks = true;
    }
  }

  /** A TCP connection under TLS, before its handshake. */
  onRawConnection(socket: Socket): void {
    this.#rawSockets.set(socket, { since: performance.now(), secured: false });
    socket.once("close", () => this.#rawSockets.delete(socket));
  }

  /** Closes the connections idle for at least this long. */
  closeIdle(olderThanMs: number): void {
    const now = performance.now();
    for (const [socket, state] of this.#sockets) {
      if (state.active === 0 && now - state.idleSince >= olderThanMs) socket.destroy();
    }
    if (!this.#linkingWorks) return;
    for (const [socket, state] of this.#rawSockets) {
      if (!state.secured && now - state.since >= olderThanMs) socket.destroy();
    }
  }

  /** Closes every connection (the drain timeout passed). */
  destroyAll(): void {
    for (const socket of [...this.#sockets.keys(), ...this.#rawSockets.keys()]) socket.destroy();
  }
}
