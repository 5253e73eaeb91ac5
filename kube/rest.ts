/**
 * The HTTPS transport to the Kubernetes API: credentials from a kubeconfig (`connection.ts`:
 * read directly, or through `@kubernetes/client-node` for exec and auth-provider plugins),
 * one HTTP/2 connection per client carrying every request and stream when the server offers it
 * (`h2.ts`), else HTTP/1.1 connections kept alive and reused (one bounded pool per client), JSON in
 * and out, Status bodies parsed into {@link KubeApiError}, bounded retries with backoff for
 * idempotent requests, and line-delimited streams for watches and logs.
 *
 * @module
 */
import type http from "node:http";
import type https from "node:https";
import type { Readable } from "node:stream";
import type tls from "node:tls";
import { Buffer } from "node:buffer";
import { TimeoutError, ToolError } from "../errors.ts";
import { sleep as sleepFor } from "../io.ts";
import type { KubeConnection } from "./connection.ts";
import {
  type Answer,
  type ConnectionInfo,
  createH2Transport,
  type H2Transport,
  type H2TransportOptions,
  TLS_OPTION_NAMES,
  type TlsOptions,
} from "./h2.ts";
import {
  credentialsRejectedHints,
  KubeApiError,
  UNREACHABLE_HINTS,
  untrustedCertificateError,
} from "./errors.ts";
import type { CallerIdentity } from "./errors.ts";

/** Query parameters; undefined values are left out. */
export type Query = Record<string, string | number | boolean | undefined>;

/** One API request. */
export interface RestRequest {
  /** HTTP method. */
  method: "GET" | "POST" | "PUT" | "PATCH" | "DELETE";
  /** Absolute API path, e.g. `/api/v1/namespaces/default/pods`. */
  path: string;
  /** Query parameters. */
  query?: Query;
  /** JSON body. */
  body?: unknown;
  /** Content type of the body. @default "application/json" */
  contentType?: string;
  /** The Accept header. @default "application/json" */
  accept?: string;
  /** More request headers (e.g. a credential for a proxied pod); never overrides the kubeconfig's. */
  headers?: Record<string, string>;
  /** Cancels the request. */
  signal?: AbortSignal;
  /**
   * Retries after the first attempt, instead of the client's own count: 0 for a caller
   * that retries itself within its own deadline. @default the client's `retries`
   */
  retries?: number;
  /** Per-attempt timeout. @default 30000 */
  timeoutMs?: number;
  /**
   * Stop reading the answer past this many bytes and fail with a
   * {@link ResponseTooLargeError} (a daemon answering through the pod proxy). @default unbounded
   */
  maxResponseBytes?: number;
  /**
   * Called with each answer's headers, before its status is judged (a daemon's build headers
   * through the pod proxy).
   */
  onHeaders?: (headers: http.IncomingHttpHeaders) => void;
  /**
   * Whether the request may be sent again after a retryable failure. GETs and
   * UID-pinned deletes are; creates are not (a lost response must not duplicate).
   * @default method === "GET"
   */
  idempotent?: boolean;
}

/** Line stream of a long-running response (watch, follow logs). */
export interface LineStream extends AsyncIterable<string> {
  /** Stops the stream and closes the connection. */
  close(): void;
}

/** The transport every Kubernetes call goes through. */
export interface RestClient {
  /** The API server URL. */
  readonly server: string;
  /** The identity's default namespace from the kubeconfig context, if any. */
  readonly defaultNamespace: string | undefined;
  /** Sends a request and parses the JSON response. */
  json<T>(request: RestRequest): Promise<T>;
  /** Sends a request and returns the body as text. */
  text(request: RestRequest): Promise<string>;
  /** Opens a streaming GET and yields its lines. */
  lines(request: Omit<RestRequest, "method" | "body">): Promise<LineStream>;
}

/** Options for {@link createRestClient}. */
export interface RestClientOptions {
  /** Retries after the first attempt for idempotent requests. @default 4 */
  retries?: number;
  /** First backoff delay. @default 200 */
  backoffMs?: number;
  /** Sleep, injectable for tests. */
  sleep?: (ms: number, signal?: AbortSignal) => Promise<void>;
  /**
   * Told each `Warning` header the API server sends (a deprecated field, a field it
   * dropped), with the object the request wrote (`POST /api/v1/.../configmaps name=x`).
   */
  onWarning?: (warning: string, object: string) => void;
  /**
   * Cancels every request that carries no signal of its own: a verb with nothing to clean up
   * (`baseline list`) passes SIGINT/SIGTERM's, so a slow or hung API server cannot hold it.
   * A verb that cleans up after the signal never sets it (its cleanup calls must still run).
   */
  signal?: AbortSignal;
  /**
   * The most one request may take, from connecting to the last byte of its answer, per attempt
   * (`--request-timeout`); it also caps each request's own silence bound. 0 lifts the default
   * bound (30 s of silence) from requests that set none. Streams (watches, followed logs) are
   * bounded until their answer starts. @default undefined: each request's own bound
   */
  requestTimeoutMs?: number;
  /**
   * Told each new connection to the API server and its protocol (`h2`; `http/1.1` once, when
   * the server offers no HTTP/2).
   */
  onConnect?: (info: ConnectionInfo) => void;
  /**
   * The HTTP/2 connection's idle and PING bounds, and a hook told each answered PING (tests
   * shorten the bounds; every command keeps client-go's 30 s and 15 s).
   */
  h2?: Pick<H2TransportOptions, "idleMs" | "pingTimeoutMs" | "onPing">;
}

/** Methods that write: they are sent with `fieldValidation=Strict`. */
const WRITE_METHODS: ReadonlySet<RestRequest["method"]> = new Set(["POST", "PUT", "PATCH"]);

/**
 * Parses `Warning` headers (RFC 7234: `299 - "text"`, comma-joined when several), the way
 * kubectl prints them.
 *
 * @param header the header value(s)
 * @returns each warning's text
 */
export function parseWarningHeaders(header: string | string[] | undefined): string[] {
  if (header === undefined) return [];
  const out: string[] = [];
  for (const value of Array.isArray(header) ? header : [header]) {
    const pattern = /\d{3} \S+ "((?:[^"\\]|\\.)*)"/g;
    let found = false;
    for (const m of value.matchAll(pattern)) {
      out.push((m[1] ?? "").replace(/\\(.)/g, "$1"));
      found = true;
    }
    if (!found && value.trim() !== "") out.push(value.trim());
  }
  return out;
}

/**
 * The object a request writes, for a warning line: method, path and the body's name.
 *
 * @param request the request
 * @returns e.g. `POST /api/v1/namespaces/ns/configmaps name=x`
 */
function writtenObject(request: RestRequest): string {
  const name = (request.body as { metadata?: { name?: unknown } } | undefined)?.metadata?.name;
  return `${request.method} ${request.path}${
    request.method === "POST" && typeof name === "string" ? ` name=${name}` : ""
  }`;
}

/**
 * A transport that loads its kubeconfig on the first request, so connecting costs
 * nothing until the cluster is used. A broken kubeconfig fails that first request with
 * the same {@link UsageError} an eager load would give.
 *
 * @param load loads the kubeconfig
 * @param options retry policy
 * @returns the REST client
 */
export function createLazyRestClient(
  load: () => Promise<KubeConnection>,
  options: RestClientOptions = {},
): RestClient {
  let ready: Promise<RestClient> | undefined;
  let loaded: RestClient | undefined;
  const client = (): Promise<RestClient> => {
    ready ??= load().then((connection) => (loaded = createRestClient(connection, options)));
    return ready;
  };
  return {
    get server() {
      return loaded?.server ?? "(kubeconfig not loaded yet)";
    },
    get defaultNamespace() {
      return loaded?.defaultNamespace;
    },
    async json<T>(request: RestRequest): Promise<T> {
      return await (await client()).json<T>(request);
    },
    async text(request: RestRequest): Promise<string> {
      return await (await client()).text(request);
    },
    async lines(request): Promise<LineStream> {
      return await (await client()).lines(request);
    },
  };
}

/**
 * The same transport (its connection, retries and bounds), whose requests without a signal of
 * their own carry `signal`.
 *
 * @param rest the transport
 * @param signal ends those requests
 * @returns the transport
 */
export function restWithSignal(rest: RestClient, signal: AbortSignal): RestClient {
  const signalled = <R extends { signal?: AbortSignal }>(request: R): R =>
    request.signal ? request : { ...request, signal };
  return {
    get server() {
      return rest.server;
    },
    get defaultNamespace() {
      return rest.defaultNamespace;
    },
    json: (request) => rest.json(signalled(request)),
    text: (request) => rest.text(signalled(request)),
    lines: (request) => rest.lines(signalled(request)),
  };
}

/**
 * Creates the transport for a kubeconfig.
 *
 * @param connection the loaded kubeconfig: server, identity, credentials
 * @param options retry policy
 * @returns the REST client
 */
export function createRestClient(
  connection: KubeConnection,
  options: RestClientOptions = {},
): RestClient {
  const { retries = 4, backoffMs = 200, sleep = sleepFor, onWarning } = options;
  const server = connection.server.replace(/\/+$/, "");
  const base = new URL(server);
  const defaultNamespace = connection.namespace;
  const identity: CallerIdentity = { context: connection.context, user: connection.user, server };
  const transport: Transport = {
    connection,
    base,
    server,
    identity,
    pool: connectionPool(base.protocol),
    h2: createH2Transport({
      ...options.h2,
      ...(options.onConnect ? { onConnect: options.onConnect } : {}),
    }),
    secure: secureContexts(),
  };
  const send = (request: RestRequest, stream: boolean) => sendRequest(transport, request, stream);
  const signalled = <R extends { signal?: AbortSignal }>(request: R): R =>
    options.signal && !request.signal ? { ...request, signal: options.signal } : request;
  const bounded = requestDeadline(options.requestTimeoutMs, server);
  const attempt = (request: RestRequest) => withDeadline(bounded, request, attemptOnce);

  const attemptOnce = async (request: RestRequest): Promise<string> =>
    await readAnswer(request, await send(request, false), { identity, onWarning });

  async function withRetries(request: RestRequest): Promise<string> {
    const idempotent = request.idempotent ?? request.method === "GET";
    for (let n = 0;; n++) {
      try {
        return await attempt(request);
      } catch (error) {
        const retryable = error instanceof KubeApiError && error.isRetryable && idempotent &&
          !request.signal?.aborted;
        if (!retryable || n >= (request.retries ?? retries)) throw error;
        const wait = error.retryAfterSeconds !== undefined
          ? Math.min(error.retryAfterSeconds * 1000, 30_000)
          : backoffMs * 2 ** n * (0.75 + Math.random() / 2);
        await sleep(wait, request.signal);
        request.signal?.throwIfAborted();
      }
    }
  }

  return {
    server,
    defaultNamespace,
    async json<T>(request: RestRequest): Promise<T> {
      const text = await withRetries(signalled(request));
      return (text === "" ? {} : JSON.parse(text)) as T;
    },
    text(request: RestRequest): Promise<string> {
      return withRetries(signalled(request));
    },
    async lines(request): Promise<LineStream> {
      const full: RestRequest = { ...signalled(request), method: "GET" };
      const res = await withDeadline(bounded, full, (request) => send(request, true));
      const status = res.statusCode;
      if (status < 200 || status >= 300) {
        throw statusError(full, status, await readAll(res.body), {
          retryAfter: res.headers["retry-after"],
          identity,
        });
      }
      return lineStream(res.body);
    },
  };
}

/**
 * Reads a whole answer: its text when the status is 2xx, else the status's error. Its headers go
 * to the request's `onHeaders`, its warnings to `onWarning`.
 */
async function readAnswer(
  request: RestRequest,
  res: Answer,
  context: { identity: CallerIdentity; onWarning: RestClientOptions["onWarning"] },
): Promise<string> {
  const { identity, onWarning } = context;
  // A connection cut mid-body is a connection failure too (retryable when idempotent),
  // not a bare "aborted".
  const text = await readAll(res.body, request.maxResponseBytes).catch((error) => {
    if (error instanceof ResponseTooLargeError) throw error;
    throw connectionError(request, identity, error);
  });
  request.onHeaders?.(res.headers);
  if (onWarning) {
    for (const warning of parseWarningHeaders(res.headers.warning)) {
      onWarning(warning, writtenObject(request));
    }
  }
  const status = res.statusCode;
  if (status >= 200 && status < 300) return text;
  throw statusError(request, status, text, { retryAfter: res.headers["retry-after"], identity });
}

/**
 * The `--request-timeout` bound of one attempt: the request with a deadline in its signal (a
 * {@link TimeoutError} naming the option when it passes) and its silence bound capped, and the
 * call that ends the deadline.
 *
 * @param limitMs the bound; 0 lifts the default silence bound; undefined changes nothing
 * @param server the API server, for the message
 * @returns a function bounding one request
 */
function requestDeadline(
  limitMs: number | undefined,
  server: string,
): (request: RestRequest) => { request: RestRequest; done(): void } {
  return (request) => {
    if (limitMs === undefined) return { request, done() {} };
    if (limitMs === 0) {
      return { request: { ...request, timeoutMs: request.timeoutMs ?? 0 }, done() {} };
    }
    const deadline = new AbortController();
    const timer = setTimeout(() => {
      deadline.abort(
        new TimeoutError((option) =>
          `Cannot ${
            describeRequest(request)
          } on '${server}': no complete answer within the request timeout of ${
            formatMs(limitMs)
          }: raise '${option("requestTimeout")}' (0 for none)`
        ),
      );
    }, limitMs);
    const signal = request.signal
      ? AbortSignal.any([request.signal, deadline.signal])
      : deadline.signal;
    const timeoutMs = Math.min(request.timeoutMs ?? limitMs, limitMs);
    return { request: { ...request, signal, timeoutMs }, done: () => clearTimeout(timer) };
  };
}

/**
 * Runs one call of a request under its deadline, and ends the deadline after it: a stream is
 * bounded until its answer starts, then lasts as long as its caller wants.
 */
async function withDeadline<T>(
  bounded: ReturnType<typeof requestDeadline>,
  request: RestRequest,
  call: (request: RestRequest) => Promise<T>,
): Promise<T> {
  const deadline = bounded(request);
  try {
    return await call(deadline.request);
  } finally {
    deadline.done();
  }
}

function formatMs(ms: number): string {
  return ms % 1000 === 0 ? `${ms / 1000}s` : `${ms}ms`;
}

/**
 * Most connections one client keeps open to its API server at once; requests beyond wait for a
 * free one. Streams (watches, followed logs) hold a connection for long, so they never take one
 * from this pool.
 */
export const MAX_POOLED_SOCKETS = 16;
/** Idle connections kept for reuse. */
const MAX_FREE_SOCKETS = 8;
/** How long an idle connection is kept. */
const IDLE_SOCKET_MS = 30_000;

/**
 * One client's keep-alive agent, made on its first request (node:http(s) loads then): a TLS
 * handshake per connection instead of per request. Idle connections do not keep the process
 * alive.
 */
function connectionPool(protocol: string): () => Promise<http.Agent> {
  let agent: Promise<http.Agent> | undefined;
  return () =>
    agent ??= (protocol === "http:" ? import("node:http") : import("node:https")).then((lib) =>
      new lib.Agent({
        keepAlive: true,
        maxSockets: MAX_POOLED_SOCKETS,
        maxFreeSockets: MAX_FREE_SOCKETS,
        scheduling: "lifo",
        // An idle connection is closed after this long (a load balancer may drop it sooner; the
        // stale-connection retry covers that).
        timeout: IDLE_SOCKET_MS,
      })
    );
}

/** A request's options with the secure context Node's TLS connect takes. */
export type TlsRequestOptions = https.RequestOptions & { secureContext?: tls.SecureContext };

/** The request options a TLS secure context is made of, as a connection applies them. */
const CONTEXT_OPTIONS = ["ca", "cert", "key", "pfx", "passphrase"] as const;
/** Request options that do not go into a secure context. */
const CONNECTION_OPTIONS = new Set([
  "rejectUnauthorized",
  "servername",
  "headers",
  "auth",
  "agent",
]);

/**
 * One client's TLS secure contexts: Node makes one for every new connection from the request's
 * `ca`, `cert` and `key` (parsing each PEM and building a certificate store again: about 1 ms of
 * CPU per connection, and a run opens several at once). A request whose TLS options are only
 * these gets the context made for the same values; one with any other TLS option is left to
 * Node.
 *
 * @returns sets `secureContext` on a request's options when it can
 */
export function secureContexts(): (options: TlsRequestOptions) => Promise<void> {
  let made: { key: string; context: Promise<tls.SecureContext> } | undefined;
  return async (options) => {
    if (options.secureContext) return;
    const given: Record<string, unknown> = {};
    for (const [name, value] of Object.entries(options)) {
      if (value === undefined || CONNECTION_OPTIONS.has(name)) continue;
      if (!(CONTEXT_OPTIONS as readonly string[]).includes(name)) return;
      given[name] = value;
    }
    if (Object.keys(given).length === 0) return;
    const key = CONTEXT_OPTIONS.map((name) => {
      const value = given[name];
      return value === undefined
        ? ""
        : Buffer.isBuffer(value)
        ? value.toString("base64")
        : String(value);
    }).join("\0");
    if (made?.key !== key) {
      made = { key, context: import("node:tls").then((lib) => lib.createSecureContext(given)) };
    }
    options.secureContext = await made.context;
  };
}

/**
 * Sends one request with the kubeconfig's credentials; resolves with the answer once its
 * headers arrive (a connection failure rejects as a {@link KubeApiError} of status 0). Over the
 * client's HTTP/2 connection when the server offers it, else over HTTP/1.1: pooled, a stream on a
 * connection of its own.
 */
async function sendRequest(
  target: Transport,
  request: RestRequest,
  stream: boolean,
): Promise<Answer> {
  const { connection, base } = target;
  const opts: TlsRequestOptions = {};
  await connection.apply(opts);
  if (base.protocol === "https:") await target.secure(opts);
  const url = new URL(base.pathname.replace(/\/$/, "") + request.path, base);
  for (const [key, value] of Object.entries(request.query ?? {})) {
    if (value !== undefined) url.searchParams.set(key, String(value));
  }
  // A field the server does not know (one newer than the cluster) is an error naming
  // it, never silently dropped.
  if (WRITE_METHODS.has(request.method) && !url.searchParams.has("fieldValidation")) {
    url.searchParams.set("fieldValidation", "Strict");
  }
  const body = request.body === undefined ? undefined : JSON.stringify(request.body);
  const headers: Record<string, string> = {
    ...request.headers,
    ...(opts.headers as Record<string, string> | undefined),
    Accept: request.accept ?? "application/json",
    "User-Agent": "aicr",
  };
  if (body !== undefined) {
    headers["Content-Type"] = request.contentType ?? "application/json";
    headers["Content-Length"] = String(Buffer.byteLength(body));
  }
  const retryStale = request.idempotent ?? request.method === "GET";
  // A connection of the kubeconfig's own (a proxy's agent) is never replaced.
  if (url.protocol === "https:" && opts.agent === undefined && connection.pooled) {
    const answer = await target.h2.send({
      url,
      method: request.method,
      headers,
      ...(body !== undefined ? { body } : {}),
      tls: tlsPart(opts),
      ...(typeof opts.auth === "string" ? { auth: opts.auth } : {}),
      timeoutMs: request.timeoutMs ?? 30_000,
      stream,
      ...(request.signal ? { signal: request.signal } : {}),
    }, retryStale).catch((error) =>
      Promise.reject(connectionError(request, target.identity, error))
    );
    if (answer) return answer;
  }
  if (opts.agent === undefined) {
    // A stream gets a connection of its own, closed with it.
    opts.agent = stream || !connection.pooled ? false : await target.pool();
  }
  return await sendHttp1(target, { url, opts, headers, body, stream }, request, retryStale);
}

/** The TLS options of a request's options, those set. */
function tlsPart(opts: TlsRequestOptions): TlsOptions {
  const out: Record<string, unknown> = {};
  for (const name of TLS_OPTION_NAMES) if (opts[name] !== undefined) out[name] = opts[name];
  return out as TlsOptions;
}

/** Where one client's requests go: its kubeconfig's connection and its transports. */
interface Transport {
  connection: KubeConnection;
  base: URL;
  server: string;
  pool: () => Promise<http.Agent>;
  h2: H2Transport;
  secure: (options: TlsRequestOptions) => Promise<void>;
  identity: CallerIdentity;
}

/**
 * TCP keepalive of an HTTP/1.1 stream's connection: its first probe after this long without a
 * byte (client-go's dialer keeps 30 s too). A watch on HTTP/2 has the transport's PING instead; on
 * HTTP/1.1 (a proxy that offers no h2) nothing else would notice its connection die without a word
 * (a host gone from the network, a NAT entry expired), and the watch would wait for ever. Under
 * Node, libuv then probes every second, ten times: such a connection fails about 40 s after its
 * last byte. The probes also keep a NAT entry alive.
 */
export const STREAM_KEEPALIVE_MS = 30_000;

/** Sends one request over HTTP/1.1 (the pool, or a connection of its own). */
async function sendHttp1(
  target: Transport,
  prepared: {
    url: URL;
    opts: TlsRequestOptions;
    headers: Record<string, string>;
    body: string | undefined;
    stream: boolean;
  },
  request: RestRequest,
  retryStale: boolean,
): Promise<Answer> {
  const { url, opts, headers, body, stream } = prepared;
  // Loaded on the first request: node:https (and TLS under it) costs every start of the binary
  // about 20 ms of CPU and 8 MiB, and a local agent or `aicr version` never sends one.
  const lib = url.protocol === "http:" ? await import("node:http") : await import("node:https");
  const send = (retryStale: boolean): Promise<Answer> =>
    new Promise((resolve, reject) => {
      const req = lib.request(url, { ...opts, method: request.method, headers }, (res) => {
        if (!stream) req.setTimeout(0);
        resolve({ statusCode: res.statusCode ?? 0, headers: res.headers, body: res });
      });
      const timeoutMs = request.timeoutMs ?? 30_000;
      if (!stream) {
        req.setTimeout(timeoutMs, () => req.destroy(new Error(`timed out after ${timeoutMs} ms`)));
      } else req.once("socket", (socket) => socket.setKeepAlive(true, STREAM_KEEPALIVE_MS));
      const onAbort = () => req.destroy(request.signal?.reason ?? new Error("aborted"));
      if (request.signal) {
        if (request.signal.aborted) onAbort();
        else request.signal.addEventListener("abort", onAbort, { once: true });
      }
      req.on("error", (error) => {
        // The server closed an idle kept-alive connection as the request went out on it: a request
        // that may be sent twice goes once more, at once, on a new connection (as Go's transport).
        if (
          retryStale && req.reusedSocket && isStaleConnection(error) && !request.signal?.aborted
        ) {
          resolve(send(false));
        } else reject(connectionError(request, target.identity, error));
      });
      req.on("close", () => request.signal?.removeEventListener("abort", onAbort));
      if (body !== undefined) req.write(body);
      req.end();
    });
  return await send(retryStale);
}

/** Whether an error is a closed connection (reset or broken pipe), not a timeout or refusal. */
function isStaleConnection(error: unknown): boolean {
  const code = (error as { code?: unknown } | undefined)?.code;
  return code === "ECONNRESET" || code === "EPIPE";
}

function lineStream(res: Readable): LineStream {
  res.setEncoding("utf8");
  return {
    close() {
      res.destroy();
    },
    async *[Symbol.asyncIterator]() {
      let buffer = "";
      try {
        for await (const chunk of res) {
          buffer += chunk as string;
          let index: number;
          while ((index = buffer.indexOf("\n")) >= 0) {
            const line = buffer.slice(0, index);
            buffer = buffer.slice(index + 1);
            yield line;
          }
        }
      } catch (error) {
        // A destroyed stream ends the iteration; a reset connection surfaces as an error.
        if (!res.destroyed || (error as { code?: string }).code !== "ERR_STREAM_PREMATURE_CLOSE") {
          if (!res.destroyed) throw error;
        }
      }
      if (buffer !== "") yield buffer;
    },
  };
}

/** An answer grew past the request's `maxResponseBytes`; reading stopped there. */
export class ResponseTooLargeError extends Error {
  /** @param maxBytes the bound */
  constructor(maxBytes: number) {
    super(`the answer exceeds the ${maxBytes}-byte bound; reading stopped`);
    this.name = "ResponseTooLargeError";
  }
}

async function readAll(res: Readable, maxBytes = Infinity): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of res) {
    size += (chunk as Buffer).length;
    if (size > maxBytes) {
      res.destroy();
      throw new ResponseTooLargeError(maxBytes);
    }
    chunks.push(chunk as Buffer);
  }
  // A stream its connection's end destroyed ends like a complete one (Node and Deno push the end
  // of an HTTP/2 stream on destroy): what was read is a part, perhaps none, of the answer.
  if (res.readableAborted) throw new Error("the connection closed before the answer was complete");
  return Buffer.concat(chunks).toString("utf8");
}

function describeRequest(request: RestRequest): string {
  return `${request.method} ${request.path}`;
}

function statusError(
  request: RestRequest,
  status: number,
  text: string,
  context: { retryAfter: string | string[] | undefined; identity: CallerIdentity },
): KubeApiError {
  const { retryAfter, identity } = context;
  let reason = "";
  let message = text.trim().slice(0, 500);
  try {
    const parsed = JSON.parse(text) as { reason?: string; message?: string };
    reason = parsed.reason ?? "";
    message = parsed.message ?? message;
  } catch {
    // Not a Status object (e.g. a proxy's HTML); keep the raw text.
  }
  const header = Array.isArray(retryAfter) ? retryAfter[0] : retryAfter;
  const seconds = header !== undefined && /^\d+$/.test(header) ? Number(header) : undefined;
  if (status === 401) {
    // The server does not know who asks: no RBAC fix helps, new credentials do.
    return new KubeApiError(
      `Cannot ${
        describeRequest(request)
      }: 401 Unauthorized: the API server rejected the credentials (invalid or expired)`,
      status,
      reason || "Unauthorized",
      { details: credentialsRejectedHints(identity) },
    );
  }
  return new KubeApiError(
    `Cannot ${describeRequest(request)}: ${status}${reason ? ` ${reason}` : ""}: ${message}`,
    status,
    reason,
    seconds === undefined ? {} : { retryAfterSeconds: seconds },
  );
}

function connectionError(request: RestRequest, identity: CallerIdentity, error: unknown): unknown {
  if (request.signal?.aborted) return request.signal.reason ?? error;
  if (error instanceof ToolError) return error;
  const detail = error instanceof Error ? error.message : String(error);
  const trust = untrustedCertificateError(request, identity, error);
  if (trust) return trust;
  return new KubeApiError(
    `Cannot reach Kubernetes API server '${identity.server}' for ${
      describeRequest(request)
    }: ${detail}`,
    0,
    "ConnectionFailure",
    { cause: error, details: UNREACHABLE_HINTS },
  );
}
