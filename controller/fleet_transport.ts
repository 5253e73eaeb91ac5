/**
 * How the fleet fetch reaches one daemon directly: the install's CA read as the only trust
 * anchor, and the real HTTPS GET that requires the daemon's certificate to name the node asked,
 * bounded in connect time and answer size; and the daemon's build read from its answer's
 * headers (which the API server's pod proxy passes on too).
 *
 * @module
 */
import { Buffer } from "node:buffer";
import { request as httpsRequest } from "node:https";
import { checkServerIdentity } from "node:tls";
import type { PeerCertificate } from "node:tls";
import { NotFoundError } from "../errors.ts";
import type { KubeClient, KubeObject } from "../kube/mod.ts";
import { daemonCaConfigMapName } from "../manifests/mod.ts";

/** The largest answer one daemon may send by default: one snapshot document's cap (16 MiB). */
export const DEFAULT_MAX_ANSWER_BYTES = 16 * 1024 * 1024;

/** A daemon's answer grew past the bound: the node's own failure (`too-large`). */
export class AnswerTooLargeError extends Error {
  /** @param maxBytes the bound */
  constructor(maxBytes: number) {
    super(`the answer exceeds the ${maxBytes}-byte bound (--max-answer-bytes); reading stopped`);
    this.name = "AnswerTooLargeError";
  }
}

/** One HTTP answer. */
export interface HttpAnswer {
  /** Status code. */
  status: number;
  /** `Retry-After` seconds, when given. */
  retryAfterSeconds?: number;
  /** The body. */
  body: string;
  /** The daemon's build, from its `X-Aicr-Version` and `X-Aicr-Commit` headers. */
  build?: { version?: string; commit?: string };
}

/** Options of one direct request. */
export interface DirectRequest {
  /** `https://<ip>:<port>/v1/snapshot`. */
  url: string;
  /** The CA to trust (PEM). */
  ca: string;
  /** The node: the name the certificate must carry (and the TLS server name). */
  servername: string;
  /** The bearer token. */
  token: string;
  /** Give up connecting after this long. */
  connectTimeoutMs: number;
  /** Aborts the request (the per-node deadline). */
  signal: AbortSignal;
  /** Stop reading (and fail with {@link AnswerTooLargeError}) past this many bytes. @default 16 MiB */
  maxBytes?: number;
}

/** A direct HTTPS GET; rejects with a `code`-carrying error when no answer came. */
export type DirectGet = (request: DirectRequest) => Promise<HttpAnswer>;

/**
 * Reads the CA certificate the installer published.
 *
 * @param kube the client
 * @param options namespace and daemon name
 * @returns the PEM
 * @throws {NotFoundError} when the ConfigMap or its key is missing
 */
export async function readDaemonCa(
  kube: KubeClient,
  options: { namespace: string; name: string },
): Promise<string> {
  const cmName = daemonCaConfigMapName(options.name);
  const cm = await kube.get<KubeObject & { data?: Record<string, string> }>(
    "ConfigMap",
    options.namespace,
    cmName,
    { timeoutMs: 10_000 },
  );
  const ca = cm?.data?.["ca.crt"];
  if (!ca) {
    throw new NotFoundError(
      `Cannot verify the daemons as ConfigMap '${options.namespace}/${cmName}' holds no 'ca.crt': is the daemon installed?`,
      { details: [`  install it: aicr daemonset install -n ${options.namespace}`] },
    );
  }
  return ca;
}

/**
 * The real direct transport: node:https, the install's CA as the only trust anchor, and the
 * certificate must name the node asked (its DNS SAN), whatever IP answered.
 *
 * @param req URL, CA, server name, token, timeouts
 * @returns the answer
 */
export function nodeDirectGet(req: DirectRequest): Promise<HttpAnswer> {
  const maxBytes = req.maxBytes ?? DEFAULT_MAX_ANSWER_BYTES;
  return new Promise((resolve, reject) => {
    const r = httpsRequest(req.url, {
      method: "GET",
      ca: req.ca,
      servername: req.servername,
      checkServerIdentity: (_host: string, cert: PeerCertificate) =>
        checkServerIdentity(req.servername, cert),
      // JSON, not YAML: a 33 KB snapshot parses in under 1 ms as JSON and in ~25 ms as YAML.
      headers: { authorization: `Bearer ${req.token}`, accept: "application/json" },
      agent: false,
      signal: req.signal,
    }, (res) => {
      clearTimeout(connectTimer);
      const chunks: Buffer[] = [];
      let size = 0;
      const declared = Number(res.headers["content-length"] ?? 0);
      // guard: fleet-declared-size: an answer declaring more than the bound is refused unread
      if (declared > maxBytes) {
        r.destroy();
        reject(new AnswerTooLargeError(maxBytes));
        return;
      }
      res.on("data", (chunk: Buffer) => {
        size += chunk.length;
        // guard: fleet-streamed-size: an answer streaming past the bound is cut
        if (size > maxBytes) {
          // Streamed and cut: one huge answer costs at most the bound, never the whole fetch.
          r.destroy();
          reject(new AnswerTooLargeError(maxBytes));
          return;
        }
        chunks.push(chunk);
      });
      res.on("error", reject);
      res.on("end", () => {
        const header = res.headers["retry-after"];
        const seconds = typeof header === "string" && /^\d+$/.test(header)
          ? Number(header)
          : undefined;
        resolve({
          status: res.statusCode ?? 0,
          body: Buffer.concat(chunks).toString("utf8"),
          ...daemonBuildOf(res.headers),
          ...(seconds !== undefined ? { retryAfterSeconds: seconds } : {}),
        });
      });
    });
    const connectTimer = setTimeout(() => {
      r.destroy(Object.assign(new Error(`connect timed out after ${req.connectTimeoutMs} ms`), {
        code: "ECONNECTTIMEOUT",
      }));
    }, req.connectTimeoutMs);
    // Only connecting is bounded here: a daemon may take long to answer (a cold collection),
    // which the per-node deadline (the signal) bounds.
    r.on("socket", (socket) => {
      if (!socket.connecting) clearTimeout(connectTimer);
      else socket.once("connect", () => clearTimeout(connectTimer));
    });
    r.on("error", (error) => {
      clearTimeout(connectTimer);
      reject(error);
    });
    r.end();
  });
}

/**
 * The daemon's build from its answer's `X-Aicr-Version` and `X-Aicr-Commit` headers, sent
 * directly or through the API server's pod proxy (which passes them on).
 */
export function daemonBuildOf(
  headers: Record<string, string | string[] | undefined>,
): Pick<HttpAnswer, "build"> {
  const version = headers["x-aicr-version"];
  const commit = headers["x-aicr-commit"];
  if (typeof version !== "string" && typeof commit !== "string") return {};
  return {
    build: {
      ...(typeof version === "string" ? { version } : {}),
      ...(typeof commit === "string" ? { commit } : {}),
    },
  };
}
