/**
 * The real readers of `aicr diff`'s sources (and `baseline set -f`): files and directories
 * through node:fs (synchronously, one after the other: a fleet folder is 10,000 small files),
 * the process's stdin, `http(s)://` URLs (TLS verified, size and time bounded, no redirect from
 * https down to http) and ConfigMaps through the Kubernetes client. What is read and how it
 * becomes snapshots is `snapshot/sources.ts`; this module is only the I/O it is handed.
 *
 * @module
 */
import { closeSync, fstatSync, openSync, readSync, statSync } from "node:fs";
import { readdir } from "node:fs/promises";
import process from "node:process";
import { Buffer } from "node:buffer";
import http from "node:http";
import https from "node:https";
import {
  NotFoundError,
  ToolError,
  UnavailableError,
  UrlSourceError,
  UsageError,
} from "../errors.ts";
import { concatBytes, writeFileAtomic } from "../io.ts";
import { redactUrl } from "../redact.ts";
import type { SnapshotSourceLoader } from "../snapshot/mod.ts";

/** The one call of the Kubernetes client the ConfigMap reader needs. */
export interface ConfigMapGetter {
  /** Gets an object; `undefined` when it does not exist. */
  get(
    kind: "ConfigMap",
    namespace: string,
    name: string,
  ): Promise<{ [field: string]: unknown } | undefined>;
}

/**
 * A ConfigMap reader over the Kubernetes client, connecting on first use (so a diff of
 * files never needs a kubeconfig).
 *
 * @param connect makes the client (may throw, e.g. when there is no kubeconfig)
 * @returns a `readConfigMap` for {@link createFsSourceLoader}
 */
export function createKubeConfigMapReader(
  connect: () => ConfigMapGetter,
): SnapshotSourceLoader["readConfigMap"] {
  let client: ConfigMapGetter | undefined;
  return async (namespace, name) => {
    client ??= connect();
    const object = await client.get("ConfigMap", namespace, name);
    if (!object) return undefined;
    const data: Record<string, string> = {};
    const raw = object.data;
    if (raw && typeof raw === "object") {
      for (const [key, value] of Object.entries(raw)) {
        if (typeof value === "string") data[key] = value;
      }
    }
    return data;
  };
}

/** Options for {@link createFsSourceLoader}. */
export interface FsSourceLoaderOptions {
  /** The ConfigMap reader (the Kubernetes client); without it `cm://` fails clearly. */
  readConfigMap?: SnapshotSourceLoader["readConfigMap"];
  /** The stream read for `-`. @default process.stdin */
  stdin?: AsyncIterable<Uint8Array | string> | Iterable<Uint8Array | string>;
  /** Trust anchors for `https://` sources (PEM) instead of the system's. @default system CAs */
  httpsCa?: string;
  /** The whole deadline of one URL read (connect, redirects, body). @default 30000 */
  urlTimeoutMs?: number;
  /** SIGINT/SIGTERM: ends a write into a pipe no one reads. */
  signal?: AbortSignal;
}

/**
 * The real loader: node:fs for files, the process's stdin, an injected ConfigMap reader.
 *
 * @param options the ConfigMap reader and stdin
 * @returns the loader
 */
export function createFsSourceLoader(options: FsSourceLoaderOptions = {}): SnapshotSourceLoader {
  const stdin = options.stdin ?? process.stdin;
  const scratch: ReadBuffer = { bytes: new Uint8Array(1 << 16) };
  return {
    // Files are read and described synchronously: a fleet directory is 10,000 small files read
    // one after the other, where each asynchronous call cost more than the read (a hop to the
    // runtime's thread pool and back per call, the process idle meanwhile).
    readFile: async (path, maxBytes) => {
      await Promise.resolve();
      return readBounded(path, maxBytes, scratch);
    },
    async stat(path) {
      await Promise.resolve();
      try {
        const info = statSync(path);
        return { isDirectory: info.isDirectory(), size: info.size };
      } catch (error) {
        if ((error as { code?: string }).code === "ENOENT") return undefined;
        throw error;
      }
    },
    readDirectory: (path) => readdir(path),
    async readStdin(maxBytes) {
      const chunks: Uint8Array[] = [];
      let total = 0;
      for await (const chunk of stdin) {
        const bytes = typeof chunk === "string" ? new TextEncoder().encode(chunk) : chunk;
        total += bytes.length;
        if (total > maxBytes) {
          throw new UsageError(
            `Cannot read snapshot '-': stdin exceeds the ${maxBytes}-byte cap`,
          );
        }
        chunks.push(bytes);
      }
      return new TextDecoder().decode(concatBytes(chunks, total));
    },
    readConfigMap: options.readConfigMap ?? (async (namespace, name) => {
      await Promise.resolve();
      throw new UnavailableError(
        `Cannot read snapshot 'cm://${namespace}/${name}': no Kubernetes client is wired into this build`,
      );
    }),
    // Named as `Cannot write '<path>': ...`; the folder must exist (no `mkdir -p` for a diff).
    writeFile: (path, text) =>
      writeFileAtomic(path, text, 0o644, {
        what: "",
        createFolders: false,
        ...(options.signal ? { signal: options.signal } : {}),
      }),
    readUrl: (url, maxBytes) =>
      readUrlBounded(url, maxBytes, {
        ...(options.httpsCa ? { ca: options.httpsCa } : {}),
        timeoutMs: options.urlTimeoutMs ?? URL_TIMEOUT_MS,
      }),
  };
}

/** How long one URL source may take in all. */
const URL_TIMEOUT_MS = 30_000;
/** Redirects followed (never from https down to http). */
const MAX_REDIRECTS = 3;

/**
 * GETs a URL with a bounded body and deadline; https verifies the certificate (the system's
 * CAs, or `ca`), and a redirect never leaves https for http.
 */
async function readUrlBounded(
  url: string,
  maxBytes: number,
  options: { ca?: string; timeoutMs: number },
): Promise<string> {
  const deadline = AbortSignal.timeout(options.timeoutMs);
  // Messages name the URL without its credentials or query values; the request uses it whole.
  const shown = redactUrl(url);
  let current: URL;
  try {
    current = new URL(url);
  } catch (error) {
    throw new UsageError(`Cannot read snapshot '${shown}': it is not a valid URL`, {
      cause: error,
    });
  }
  for (let redirects = 0;; redirects++) {
    const target = current;
    const answer = await getOnce(target, maxBytes, { ...options, signal: deadline }).catch(
      (error: unknown) => {
        if (error instanceof ToolError) throw error;
        throw urlSourceError(
          shown,
          target,
          deadline.aborted ? { timeoutMs: options.timeoutMs } : {
            error,
          },
        );
      },
    );
    if (answer.location && answer.status >= 300 && answer.status < 400) {
      const next = new URL(answer.location, current);
      if (redirects >= MAX_REDIRECTS) {
        throw new UrlSourceError(
          `Cannot read snapshot '${shown}': more than ${MAX_REDIRECTS} redirects`,
        );
      }
      if (current.protocol === "https:" && next.protocol !== "https:") {
        throw new UsageError(
          `Cannot read snapshot '${shown}': it redirects from https to '${next.protocol}', which is refused`,
        );
      }
      current = next;
      continue;
    }
    if (answer.status !== 200) throw urlSourceError(shown, target, { status: answer.status });
    return answer.body;
  }
}

/** What went wrong with one URL read: a socket error, the deadline, or the answer's status. */
export type UrlFailure = { error: unknown } | { timeoutMs: number } | { status: number };

/** Node's error codes of a name that did not resolve. */
const DNS_CODES = new Set(["ENOTFOUND", "EAI_AGAIN", "EAI_FAIL", "EAI_NONAME", "EAI_NODATA"]);
/** Node's error codes of a TCP connection that failed or was cut, said for `host:port`. */
const CONNECTION_FAILURES: Readonly<Record<string, (hostPort: string) => string>> = {
  ECONNREFUSED: (at) => `the connection to ${at} was refused (nothing listens there)`,
  ECONNRESET: (at) => `the connection to ${at} was cut before a complete answer`,
  EPIPE: (at) => `the connection to ${at} was cut before a complete answer`,
  EHOSTUNREACH: (at) => `${at} is unreachable (no route to the host)`,
  ENETUNREACH: (at) => `${at} is unreachable (no route to its network)`,
  ETIMEDOUT: (at) => `connecting to ${at} timed out`,
};
/** Node's error codes and code prefixes of a failed TLS handshake or an untrusted certificate. */
const TLS_CODE_REGEXP =
  /^(CERT_|UNABLE_TO_|DEPTH_ZERO_SELF_SIGNED_CERT|SELF_SIGNED_CERT_IN_CHAIN|ERR_TLS_|ERR_SSL_|EPROTO|HOSTNAME_MISMATCH)/;

/** The advice Node appends to a certificate error: a runtime flag the binary's user cannot pass. */
const NODE_CA_ADVICE_REGEXP = /;\s*if the root CA is installed locally.*$/s;

/**
 * The error for a URL source that could not be fetched: it names the URL (as shown, redacted)
 * and what failed (DNS, refused, cut, TLS, timeout, HTTP status), with the fix; a 404 is a
 * {@link NotFoundError} (exit 3), every other failure a {@link UrlSourceError} (exit 11), never
 * the Kubernetes API server's exit code.
 *
 * @param shown the URL as messages show it (see `redactUrl`)
 * @param url the URL requested (its host and port are named)
 * @param failure the socket's error, the deadline, or the status
 * @returns the error to throw
 */
export function urlSourceError(shown: string, url: URL, failure: UrlFailure): ToolError {
  const head = `Cannot read snapshot '${shown}'`;
  const host = url.hostname;
  const hostPort = `${host}:${url.port || (url.protocol === "https:" ? "443" : "80")}`;
  if ("status" in failure) {
    const status = `HTTP ${failure.status}${STATUS_TEXT[failure.status] ?? ""}`;
    if (failure.status === 404) return new NotFoundError(`${head}: the server answered ${status}`);
    return new UrlSourceError(`${head}: the server answered ${status}`, {
      details: ["  check the URL, and that the server serves it to this machine"],
    });
  }
  if ("timeoutMs" in failure) {
    return new UrlSourceError(
      `${head}: timeout: no complete answer from ${hostPort} within ${
        Math.round(failure.timeoutMs / 1000)
      }s`,
      { details: ["  check that the server answers (curl -sSfo /dev/null <URL>)"] },
    );
  }
  const { error } = failure;
  const code = String((error as { code?: unknown } | undefined)?.code ?? "");
  const detail = error instanceof Error ? error.message : String(error);
  if (DNS_CODES.has(code)) {
    return new UrlSourceError(`${head}: DNS: the host name '${host}' does not resolve (${code})`, {
      details: ["  check the URL's host name, and this machine's DNS"],
    });
  }
  if (TLS_CODE_REGEXP.test(code)) {
    // Node's own advice (a runtime flag) is no use to a user of the binary: the detail says the fix.
    const reason = detail.replace(NODE_CA_ADVICE_REGEXP, "");
    return new UrlSourceError(`${head}: TLS with ${hostPort} failed: ${reason} (${code})`, {
      cause: error,
      details: [
        "  the server's certificate is not trusted here: add its CA with NODE_EXTRA_CA_CERTS=<ca.pem>, or use the URL the certificate names",
      ],
    });
  }
  const connection = CONNECTION_FAILURES[code];
  return new UrlSourceError(
    `${head}: ${
      connection
        ? `${connection(hostPort)} (${code})`
        : `the request to ${hostPort} failed: ${detail}`
    }`,
    {
      ...(connection ? {} : { cause: error }),
      details: ["  check the URL's host and port, and that the server runs"],
    },
  );
}

/** Reason phrases of the statuses a file server commonly answers. */
const STATUS_TEXT: Readonly<Record<number, string>> = {
  400: " Bad Request",
  401: " Unauthorized",
  403: " Forbidden",
  404: " Not Found",
  410: " Gone",
  429: " Too Many Requests",
  500: " Internal Server Error",
  502: " Bad Gateway",
  503: " Service Unavailable",
  504: " Gateway Timeout",
};

function getOnce(
  url: URL,
  maxBytes: number,
  options: { ca?: string; signal: AbortSignal },
): Promise<{ status: number; location?: string; body: string }> {
  return new Promise((resolve, reject) => {
    const lib = url.protocol === "https:" ? https : url.protocol === "http:" ? http : undefined;
    if (!lib) {
      reject(
        new UsageError(
          `Cannot read snapshot '${redactUrl(url.href)}': only http:// and https:// are supported`,
        ),
      );
      return;
    }
    const req = lib.request(url, {
      method: "GET",
      headers: { accept: "application/yaml, application/json;q=0.9, */*;q=0.5" },
      agent: false,
      signal: options.signal,
      ...(url.protocol === "https:" && options.ca ? { ca: options.ca } : {}),
    }, (res) => {
      const status = res.statusCode ?? 0;
      const location = res.headers.location;
      if (status !== 200) {
        res.resume();
        resolve({ status, ...(location ? { location } : {}), body: "" });
        return;
      }
      const declared = Number(res.headers["content-length"] ?? "0");
      if (declared > maxBytes) {
        req.destroy();
        reject(
          new UsageError(
            `Cannot read snapshot '${
              redactUrl(url.href)
            }': it is ${declared} bytes, over the ${maxBytes}-byte cap`,
          ),
        );
        return;
      }
      const chunks: Buffer[] = [];
      let total = 0;
      res.on("data", (chunk: Buffer) => {
        total += chunk.length;
        if (total > maxBytes) {
          req.destroy();
          reject(
            new UsageError(
              `Cannot read snapshot '${redactUrl(url.href)}': it exceeds the ${maxBytes}-byte cap`,
            ),
          );
          return;
        }
        chunks.push(chunk);
      });
      res.on("error", reject);
      res.on("end", () => resolve({ status, body: Buffer.concat(chunks).toString("utf8") }));
    });
    req.on("error", reject);
    req.end();
  });
}

/** The read buffer, reused from file to file (grown to the largest file read). */
interface ReadBuffer {
  bytes: Uint8Array;
}

/** Reads a file, stopping one byte past `maxBytes` (`/dev/zero` reports size 0). */
function readBounded(path: string, maxBytes: number, scratch: ReadBuffer): string {
  const fd = openSync(path, "r");
  try {
    // A file of known size is read into the reused buffer in one call, plus the byte that
    // shows its end, then a small read finds the end (or that it grew); a device (size 0) goes
    // on in 1 MiB steps.
    const { size } = fstatSync(fd);
    let total = 0;
    for (;;) {
      const step = size === 0 ? 1 << 20 : total === 0 ? size + 1 : 1 << 12;
      const want = Math.min(step, maxBytes + 1 - total);
      if (scratch.bytes.length < total + want) {
        const grown = new Uint8Array(Math.max(total + want, scratch.bytes.length * 2));
        grown.set(scratch.bytes.subarray(0, total));
        scratch.bytes = grown;
      }
      const bytesRead = readSync(fd, scratch.bytes, total, want, null);
      if (bytesRead === 0) break;
      total += bytesRead;
      if (total > maxBytes) throw new Error(`it exceeds the ${maxBytes}-byte cap`);
    }
    const text = DECODER.decode(scratch.bytes.subarray(0, total));
    if (scratch.bytes.length > SCRATCH_KEEP_BYTES) scratch.bytes = new Uint8Array(1 << 16);
    return text;
  } finally {
    closeSync(fd);
  }
}

const DECODER = new TextDecoder();
/** A buffer grown past this by one large file is not kept for the next. */
const SCRATCH_KEEP_BYTES = 2 << 20;
