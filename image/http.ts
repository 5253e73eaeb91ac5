/**
 * The HTTP client of the registry code: `node:http`/`node:https` with kept-alive connections,
 * TLS verified against the system's roots (plus an operator's CA file), request bodies streamed
 * with a running byte count, answers capped in size, and cancellation by an `AbortSignal`.
 *
 * @module
 */
import http from "node:http";
import https from "node:https";
import { readFileSync } from "node:fs";
import tls from "node:tls";

/** A request. */
export interface HttpRequest {
  method: string;
  url: string;
  headers?: Record<string, string>;
  /** The body: bytes, or chunks read on demand (then `contentLength` is required). */
  body?: Uint8Array | (() => AsyncIterable<Uint8Array>);
  contentLength?: number;
  /** Called with the bytes of the body sent so far. */
  onSent?: (bytes: number) => void;
  signal?: AbortSignal;
}

/** An answer, its body read whole (up to the cap). */
export interface HttpResponse {
  status: number;
  headers: Record<string, string | undefined>;
  body: Uint8Array;
}

/** Sends requests. */
export interface HttpClient {
  request(req: HttpRequest): Promise<HttpResponse>;
  /** Closes the kept-alive connections. */
  close(): void;
}

/** Options of {@link createHttpClient}. */
export interface HttpClientOptions {
  /** PEM text of extra CAs trusted besides the system's. */
  extraCa?: string;
  /** Longest silence on a connection before it is given up. @default 60000 */
  idleTimeoutMs?: number;
  /** Largest answer body read. @default 4 MiB */
  maxBody?: number;
}

const PEM_REGEXP = /-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g;

/**
 * The CAs this machine trusts: the operating system's store (Node's `system` set, else the
 * Debian/RHEL bundle files), `NODE_EXTRA_CA_CERTS`, and Node's bundled roots when no system store
 * can be read.
 *
 * @returns PEM certificates
 */
export function systemRoots(): string[] {
  const get = (tls as { getCACertificates?: (type: string) => string[] }).getCACertificates;
  const roots: string[] = [];
  try {
    roots.push(...(get?.("system") ?? []));
  } catch {
    // an older runtime
  }
  if (roots.length === 0) {
    for (const file of ["/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt"]) {
      try {
        roots.push(...(readFileSync(file, "utf8").match(PEM_REGEXP) ?? []));
        break;
      } catch {
        // not this distribution's
      }
    }
  }
  try {
    roots.push(...(get?.("extra") ?? []));
  } catch {
    // none
  }
  return roots.length ? roots : [...tls.rootCertificates];
}

/**
 * Makes a client.
 *
 * @param options extra CAs, timeouts
 * @returns the client
 */
export function createHttpClient(options: HttpClientOptions = {}): HttpClient {
  const { idleTimeoutMs = 60_000, maxBody = 4 << 20 } = options;
  const ca = [...systemRoots(), ...(options.extraCa ? [options.extraCa] : [])];
  const agents = {
    "http:": new http.Agent({ keepAlive: true, maxSockets: 4 }),
    "https:": new https.Agent({ keepAlive: true, maxSockets: 4, ca }),
  };
  return {
    request: (req) => send(req, agents, { idleTimeoutMs, maxBody }),
    close() {
      agents["http:"].destroy();
      agents["https:"].destroy();
    },
  };
}

function send(
  req: HttpRequest,
  agents: { "http:": http.Agent; "https:": https.Agent },
  limits: { idleTimeoutMs: number; maxBody: number },
): Promise<HttpResponse> {
  const url = new URL(req.url);
  const lib = url.protocol === "http:" ? http : https;
  const agent = url.protocol === "http:" ? agents["http:"] : agents["https:"];
  const length = req.body instanceof Uint8Array ? req.body.length : req.contentLength;
  return new Promise<HttpResponse>((resolve, reject) => {
    if (req.signal?.aborted) return reject(req.signal.reason);
    const outgoing = lib.request(url, {
      method: req.method,
      agent,
      headers: {
        "user-agent": "aicr",
        ...(length !== undefined ? { "content-length": String(length) } : {}),
        ...req.headers,
      },
      ...(req.signal ? { signal: req.signal } : {}),
    }, (res) => {
      const chunks: Uint8Array[] = [];
      let size = 0;
      res.on("data", (chunk: Uint8Array) => {
        size += chunk.length;
        if (size <= limits.maxBody) chunks.push(chunk);
      });
      res.on("error", reject);
      res.on("end", () => {
        const body = new Uint8Array(Math.min(size, limits.maxBody));
        let at = 0;
        for (const chunk of chunks) {
          body.set(chunk.subarray(0, body.length - at), at);
          at += chunk.length;
        }
        const headers: Record<string, string | undefined> = {};
        for (const [key, value] of Object.entries(res.headers)) {
          headers[key] = Array.isArray(value) ? value.join(", ") : value;
        }
        resolve({ status: res.statusCode ?? 0, headers, body });
      });
    });
    outgoing.setTimeout(limits.idleTimeoutMs, () => {
      outgoing.destroy(
        Object.assign(new Error(`no answer for ${limits.idleTimeoutMs / 1000} s`), {
          code: "ETIMEDOUT",
        }),
      );
    });
    outgoing.on("error", (error) => reject(req.signal?.aborted ? req.signal.reason : error));
    writeBody(outgoing, req).catch((error) => outgoing.destroy(error as Error));
  });
}

async function writeBody(outgoing: http.ClientRequest, req: HttpRequest): Promise<void> {
  const { body } = req;
  if (body === undefined) {
    outgoing.end();
    return;
  }
  if (body instanceof Uint8Array) {
    outgoing.end(body);
    req.onSent?.(body.length);
    return;
  }
  let sent = 0;
  for await (const chunk of body()) {
    if (outgoing.destroyed) return;
    const flushed = outgoing.write(chunk);
    sent += chunk.length;
    req.onSent?.(sent);
    if (!flushed) {
      await new Promise<void>((resume) => {
        const done = () => {
          outgoing.off("drain", done);
          outgoing.off("close", done);
          resume();
        };
        outgoing.once("drain", done);
        outgoing.once("close", done);
      });
    }
  }
  outgoing.end();
}
