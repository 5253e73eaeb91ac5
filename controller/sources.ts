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
import { NotFoundError, TimeoutError, ToolError, UnavailableError, UsageError } from "../errors.ts";
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
    const answer = await getOnce(current, maxBytes, { ...options, signal: deadline }).catch(
      (error: unknown) => {
        if (deadline.aborted) {
          throw new TimeoutError(
            `Cannot read snapshot '${shown}': no complete answer within ${
              Math.round(options.timeoutMs / 1000)
            }s`,
          );
        }
        if (error instanceof ToolError) throw error;
        throw new UnavailableError(
          `Cannot read snapshot '${shown}': ${error instanceof Error ? error.message : error}`,
          { cause: error },
        );
      },
    );
    if (answer.location && answer.status >= 300 && answer.status < 400) {
      const next = new URL(answer.location, current);
      if (redirects >= MAX_REDIRECTS) {
        throw new UnavailableError(
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
    if (answer.status === 404) {
      throw new NotFoundError(`Cannot read snapshot '${shown}': HTTP 404`);
    }
    if (answer.status !== 200) {
      throw new UnavailableError(`Cannot read snapshot '${shown}': HTTP ${answer.status}`);
    }
    return answer.body;
  }
}

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
