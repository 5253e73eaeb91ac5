/**
 * HTTP/2 to the API server, as client-go speaks it: one TLS connection per client carrying every
 * request, watch and followed log as a stream of its own, instead of a pooled HTTP/1.1 connection
 * (and a TLS handshake) per request in flight and one more per stream. The protocol is agreed in
 * the TLS handshake (ALPN); a server that does not offer `h2` (or a TLS terminator in front of it)
 * is spoken to in HTTP/1.1 from then on, by the caller's pool.
 *
 * The connection is made on the first request, does not keep the process alive while no stream is
 * open, is closed after {@link IDLE_SESSION_MS} without one, and is replaced when the server sends
 * GOAWAY or it fails; a request that fails on a reused connection before any answer is sent once
 * more on a new one when the caller allows (idempotent requests), as Go's transport does. A
 * connection silent that long while streams are open (a watch with nothing to say) is asked for a
 * PING, and one that leaves it unanswered for {@link PING_TIMEOUT_MS} is taken as dead (a host gone
 * from the network says nothing) and closed, failing its streams so their callers start again, as
 * client-go's transport does (`ReadIdleTimeout` 30 s, `PingTimeout` 15 s).
 *
 * @module
 */
import type http from "node:http";
import type http2 from "node:http2";
import type { Readable } from "node:stream";
import type tls from "node:tls";
import { Buffer } from "node:buffer";
import { isIP } from "node:net";
import { setTimeout } from "node:timers";

/** An answer whose headers have arrived; its body is read from `body`. */
export interface Answer {
  /** HTTP status. */
  statusCode: number;
  /** Response headers (lower case, no pseudo-headers). */
  headers: http.IncomingHttpHeaders;
  /** The body. */
  body: Readable;
}

/** One request as the transport sends it. */
export interface H2Request {
  /** Full URL, query included. */
  url: URL;
  /** HTTP method. */
  method: string;
  /** Request headers (any case; connection-specific ones are dropped). */
  headers: Record<string, string>;
  /** The body, already serialized. */
  body?: string;
  /** The TLS options of the request (CA, client certificate, secure context, SNI, verification). */
  tls: TlsOptions;
  /** Basic auth `user:password`, as `https.request` takes it. */
  auth?: string;
  /** Silence bound before the answer starts (0: none); not applied to streams. */
  timeoutMs: number;
  /** Whether the answer is a long stream (watch, followed log). */
  stream: boolean;
  /** Cancels the request. */
  signal?: AbortSignal;
}

/** The TLS part of a request's options: what the connection is made with. */
export type TlsOptions = Pick<
  tls.ConnectionOptions,
  | "ca"
  | "cert"
  | "key"
  | "pfx"
  | "passphrase"
  | "rejectUnauthorized"
  | "servername"
  | "secureContext"
>;

/** The option names of {@link TlsOptions}. */
export const TLS_OPTION_NAMES = [
  "ca",
  "cert",
  "key",
  "pfx",
  "passphrase",
  "rejectUnauthorized",
  "servername",
  "secureContext",
] as const;

/** How the connection was made, told once per connection. */
export interface ConnectionInfo {
  /** The server's origin. */
  server: string;
  /** `h2`, or `http/1.1` when the server offered no HTTP/2 (said once). */
  protocol: "h2" | "http/1.1";
}

/** Each stream's receive window. */
const STREAM_WINDOW_BYTES = 4 << 20;
/** The connection's receive window, shared by its streams. */
const SESSION_WINDOW_BYTES = 16 << 20;

/**
 * How long a connection without an open stream is kept; with streams open, the silence after which
 * it is asked for a PING.
 */
export const IDLE_SESSION_MS = 30_000;

/** How long a PING may go unanswered before the connection is taken as dead. */
export const PING_TIMEOUT_MS = 15_000;

/** Options of {@link createH2Transport}. */
export interface H2TransportOptions {
  /** Told each new connection's protocol. */
  onConnect?: (info: ConnectionInfo) => void;
  /** Silence before an idle connection is closed, or a busy one pinged. @default IDLE_SESSION_MS */
  idleMs?: number;
  /** How long a PING may go unanswered. @default PING_TIMEOUT_MS */
  pingTimeoutMs?: number;
  /** Told each answered PING's round trip. */
  onPing?: (ms: number) => void;
}

/** Request headers HTTP/2 forbids (RFC 9113 8.2.2) or carries as pseudo-headers. */
const DROPPED_HEADERS = new Set([
  "connection",
  "keep-alive",
  "proxy-connection",
  "transfer-encoding",
  "upgrade",
  "host",
]);

/** TLS options a request may carry that this transport cannot key a connection on. */
const UNKEYED_TLS = ["pfx", "passphrase"] as const;

/** One client's HTTP/2 transport. */
export interface H2Transport {
  /**
   * Sends a request over the client's connection.
   *
   * @param request the request
   * @param retryStale whether a failure on a reused connection before any answer may send it once
   *   more on a new connection
   * @returns the answer, or undefined when the server speaks only HTTP/1.1 (the caller sends it)
   */
  send(request: H2Request, retryStale: boolean): Promise<Answer | undefined>;
}

/**
 * Creates one client's HTTP/2 transport.
 *
 * @param options `onConnect`, told each new connection's protocol; the idle and PING bounds
 * @returns the transport
 */
export function createH2Transport(options: H2TransportOptions = {}): H2Transport {
  let current: Session | undefined;
  let http1Only = false;
  const keys = contextKeys();

  async function session(request: H2Request): Promise<Session | undefined> {
    const key = `${keys(request.tls.secureContext)}|${request.tls.rejectUnauthorized}|${
      request.tls.servername ?? ""
    }|${request.url.host}`;
    if (current && (current.key !== key || current.closed)) {
      current.retire();
      current = undefined;
    }
    if (!current) {
      const made = openSession(request, key, options);
      current = made;
      made.ready.catch(() => {
        if (current === made) current = undefined;
      });
    }
    const made = current;
    const opened = await abortable(made.ready, request.signal);
    if (opened === undefined) {
      if (!http1Only) options.onConnect?.({ server: request.url.origin, protocol: "http/1.1" });
      http1Only = true;
      if (current === made) current = undefined;
      return undefined;
    }
    return made;
  }

  return {
    async send(request, retryStale) {
      if (http1Only || UNKEYED_TLS.some((k) => request.tls[k] !== undefined)) return undefined;
      const open = await session(request);
      if (!open) return undefined;
      const reused = open.used;
      open.used = true;
      try {
        return await open.request(request);
      } catch (error) {
        if (!(error instanceof BeforeAnswerError)) throw error;
        // Only a connection closed under the request (GOAWAY, reset) sends it again at once; a
        // timeout or a cancel does not.
        if (!(retryStale && reused && error.closed && !request.signal?.aborted)) throw error.cause;
        open.retire();
        if (current === open) current = undefined;
        const fresh = await session(request);
        if (!fresh) return undefined;
        fresh.used = true;
        return await fresh.request(request).catch((e) =>
          Promise.reject(e instanceof BeforeAnswerError ? e.cause : e)
        );
      }
    },
  };
}

/** A request failed before any answer arrived (the error is its cause). */
class BeforeAnswerError extends Error {
  /**
   * @param cause the failure
   * @param closed whether the connection or stream was closed under it (not a timeout or cancel)
   */
  constructor(override readonly cause: unknown, readonly closed = true) {
    super("no answer");
  }
}

/** Numbers each secure context (a connection is only shared by requests with the same one). */
function contextKeys(): (context: tls.SecureContext | undefined) => string {
  const ids = new WeakMap<tls.SecureContext, number>();
  let next = 0;
  return (context) => {
    if (context === undefined) return "-";
    let id = ids.get(context);
    if (id === undefined) ids.set(context, id = ++next);
    return String(id);
  };
}

/** A connection being made or made. */
interface Session {
  key: string;
  /** The session, or undefined when the server chose HTTP/1.1. */
  ready: Promise<http2.ClientHttp2Session | undefined>;
  /** Whether a request has gone over it. */
  used: boolean;
  /** Whether it can take no new stream (GOAWAY, closed, failed). */
  readonly closed: boolean;
  /** Sends one request; rejects with a {@link BeforeAnswerError} before the answer. */
  request(request: H2Request): Promise<Answer>;
  /** Lets the open streams finish and takes no new one. */
  retire(): void;
}

/**
 * Makes a connection: TLS with ALPN `h2, http/1.1`, then an HTTP/2 session over it when the server
 * chose `h2`. It holds the process only while a stream is open.
 */
function openSession(request: H2Request, key: string, options: H2TransportOptions): Session {
  const { onConnect, idleMs = IDLE_SESSION_MS, pingTimeoutMs = PING_TIMEOUT_MS, onPing } = options;
  let closed = false;
  let open = 0;
  const ready = connectTls(request).then(async (socket) => {
    if (socket.alpnProtocol !== "h2") {
      socket.destroy();
      return undefined;
    }
    const { connect } = await import("node:http2");
    const session = connect(request.url.origin, {
      createConnection: () => socket,
      // As client-go: a 4 MiB window per stream, so a large list is not paced by window
      // updates, and more session memory than Node's 10 MB default for several at once.
      settings: { initialWindowSize: STREAM_WINDOW_BYTES },
      maxSessionMemory: 64,
    });
    session.once("connect", () => session.setLocalWindowSize(SESSION_WINDOW_BYTES));
    const retired = () => closed = true;
    session.on("goaway", retired);
    session.on("close", retired);
    // A failed connection fails its open streams; with no listener it would end the process.
    session.on("error", retired);
    const onSilence = () => {
      if (open === 0) session.close();
      else checkAlive();
    };
    // The session's timer fires once per silence: an answered PING sets it again.
    const checkAlive = livenessCheck(session, pingTimeoutMs, {
      onAlive: (ms) => {
        onPing?.(ms);
        session.setTimeout(idleMs, onSilence);
      },
      onDead: retired,
    });
    session.setTimeout(idleMs, onSilence);
    session.unref();
    onConnect?.({ server: request.url.origin, protocol: "h2" });
    return session;
  });
  const made: Session = {
    key,
    ready,
    used: false,
    get closed() {
      return closed;
    },
    async request(request) {
      const session = await abortable(ready, request.signal);
      if (!session) throw new BeforeAnswerError(new Error("the server chose HTTP/1.1"));
      if (open++ === 0) session.ref();
      const release = () => {
        if (--open === 0 && !session.destroyed) session.unref();
      };
      // A request left unanswered may mean a connection that died without a word (a host gone
      // from the network): later requests go over a new one.
      return await sendStream(session, request, { release, onSilence: () => made.retire() });
    },
    retire() {
      closed = true;
      ready.then((session) => session?.close(), () => {});
    },
  };
  return made;
}

/**
 * Asks a silent connection for a PING, at most one at a time: answered, `onAlive` is told the round
 * trip; unanswered within `timeoutMs`, or failed, the connection is destroyed (its open streams
 * fail) and `onDead` told.
 */
function livenessCheck(
  session: http2.ClientHttp2Session,
  timeoutMs: number,
  hooks: { onAlive: (ms: number) => void; onDead: () => void },
): () => void {
  let asking = false;
  const dead = (why: string) => {
    hooks.onDead();
    if (!session.destroyed) {
      session.destroy(new Error(`the connection to the API server is dead: ${why}`));
    }
  };
  return () => {
    if (asking || session.destroyed) return;
    asking = true;
    // Never what keeps the process: a stream still open does that.
    const timer = setTimeout(
      () => dead(`no answer to a PING within ${timeoutMs} ms`),
      timeoutMs,
    ).unref();
    const answered = (error: Error | null, ms: number) => {
      clearTimeout(timer);
      asking = false;
      if (session.destroyed) return;
      if (error) dead(`the PING failed (${error.message})`);
      else hooks.onAlive(ms);
    };
    try {
      session.ping(answered);
    } catch (error) {
      answered(error as Error, 0);
    }
  };
}

/** Opens the TLS connection, offering `h2` and `http/1.1`, within `timeoutMs` (0: no bound). */
function connectTls(request: H2Request): Promise<tls.TLSSocket> {
  const { url, timeoutMs } = request;
  const host = url.hostname.replace(/^\[(.*)\]$/, "$1");
  const port = Number(url.port || 443);
  // SNI as https.request sends it: the host name, never an address.
  const servername = request.tls.servername ?? (isIP(host) ? undefined : host);
  return import("node:tls").then((lib) =>
    new Promise((resolve, reject) => {
      const socket = lib.connect({
        ...request.tls,
        host,
        port,
        ...(servername ? { servername } : {}),
        ALPNProtocols: ["h2", "http/1.1"],
      });
      // The connection is shared: it is bounded by its own timeout, never cut by the signal of
      // the request that happened to open it.
      if (timeoutMs > 0) {
        socket.setTimeout(
          timeoutMs,
          () => socket.destroy(new Error(`timed out after ${timeoutMs} ms`)),
        );
      }
      socket.once("secureConnect", () => {
        socket.setTimeout(0);
        socket.removeListener("error", reject);
        resolve(socket);
      });
      socket.once("error", reject);
    })
  );
}

/** Waits for `promise`, or rejects with the signal's reason when it aborts first. */
function abortable<T>(promise: Promise<T>, signal: AbortSignal | undefined): Promise<T> {
  if (!signal) return promise;
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener("abort", onAbort, { once: true });
    promise.then(resolve, reject).finally(() => signal.removeEventListener("abort", onAbort));
  });
}

/**
 * Sends one request as a stream of the session; resolves when its headers arrive.
 *
 * @param hooks `release`, called once when the stream closes; `onSilence`, when no answer came
 *   within the request's silence bound
 */
function sendStream(
  session: http2.ClientHttp2Session,
  request: H2Request,
  hooks: { release: () => void; onSilence: () => void },
): Promise<Answer> {
  const headers: http2.OutgoingHttpHeaders = {
    ":method": request.method,
    ":path": request.url.pathname + request.url.search,
  };
  for (const [name, value] of Object.entries(request.headers)) {
    const lower = name.toLowerCase();
    if (!DROPPED_HEADERS.has(lower)) headers[lower] = value;
  }
  if (request.auth !== undefined && headers.authorization === undefined) {
    headers.authorization = `Basic ${Buffer.from(request.auth).toString("base64")}`;
  }
  return new Promise((resolve, reject) => {
    let answered = false;
    let cut = false;
    let stream: http2.ClientHttp2Stream;
    try {
      stream = session.request(headers, { endStream: request.body === undefined });
    } catch (error) {
      hooks.release();
      reject(new BeforeAnswerError(error));
      return;
    }
    const onAbort = () => {
      cut = true;
      stream.destroy(request.signal?.reason ?? new Error("aborted"));
    };
    if (request.signal?.aborted) onAbort();
    else request.signal?.addEventListener("abort", onAbort, { once: true });
    if (!request.stream && request.timeoutMs > 0) {
      const ms = request.timeoutMs;
      stream.setTimeout(ms, () => {
        cut = true;
        hooks.onSilence();
        stream.destroy(new Error(`timed out after ${ms} ms`));
      });
    }
    stream.once("response", (raw) => {
      answered = true;
      stream.setTimeout(0);
      const answerHeaders: http.IncomingHttpHeaders = {};
      for (const [name, value] of Object.entries(raw)) {
        if (!name.startsWith(":")) answerHeaders[name] = value as string | string[];
      }
      resolve({ statusCode: Number(raw[":status"] ?? 0), headers: answerHeaders, body: stream });
    });
    stream.once("error", (error) => {
      if (!answered) reject(new BeforeAnswerError(error, !cut));
    });
    stream.once("close", () => {
      request.signal?.removeEventListener("abort", onAbort);
      hooks.release();
      if (!answered) {
        reject(new BeforeAnswerError(new Error("the stream closed before an answer"), !cut));
      }
    });
    if (request.body !== undefined) stream.end(request.body);
  });
}
