/**
 * The HTTPS transport to the Kubernetes API: credentials from a kubeconfig (through
 * `@kubernetes/client-node`'s KubeConfig, so exec plugins, token files and client
 * certificates all work), JSON in and out, Status bodies parsed into
 * {@link KubeApiError}, bounded retries with backoff for idempotent requests, and
 * line-delimited streams for watches and logs.
 *
 * @module
 */
import type http from "node:http";
import type https from "node:https";
import { Buffer } from "node:buffer";
import type { KubeConfig } from "./_client_node.ts";
import { existsSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";
import { NotFoundError, UsageError } from "../errors.ts";
import { credentialsRejectedHints, KubeApiError, UNREACHABLE_HINTS } from "./errors.ts";
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
  /** More request headers (e.g. a credential for a proxied pod); never overrides the kubeconfig's. */
  headers?: Record<string, string>;
  /** Cancels the request. */
  signal?: AbortSignal;
  /** Per-attempt timeout. @default 30000 */
  timeoutMs?: number;
  /**
   * Stop reading the answer past this many bytes and fail with a
   * {@link ResponseTooLargeError} (a daemon answering through the pod proxy). @default unbounded
   */
  maxResponseBytes?: number;
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

/** Where a kubeconfig comes from. */
export interface KubeConfigSource {
  /** Explicit kubeconfig path (`--kubeconfig`). */
  kubeconfig?: string;
  /** Context name (`--context`). */
  context?: string;
  /** Use the in-cluster ServiceAccount (agent pods). */
  inCluster?: boolean;
}

/**
 * Whether `~/.kube/config` exists. A process may have no home at all (an arbitrary uid
 * without a passwd entry and no HOME, as OpenShift runs pods): that is "no file".
 */
function hasDefaultKubeconfig(env: (name: string) => string | undefined): boolean {
  let home = env("HOME");
  if (!home) {
    try {
      home = homedir();
    } catch {
      return false;
    }
  }
  return existsSync(join(home, ".kube", "config"));
}

/** No kubeconfig was given or found, and this is not a pod. */
export class NoKubeconfigError extends NotFoundError {
  constructor() {
    super(
      "Cannot find a kubeconfig: --kubeconfig is not set, KUBECONFIG is empty, ~/.kube/config does not exist and this is not a pod",
      { details: ["pass --kubeconfig <file> or set KUBECONFIG"] },
    );
    this.name = "NoKubeconfigError";
  }
}

/** Which kubeconfig a source names, decided without loading it. */
export type KubeConfigPlan = "in-cluster" | "file" | "default";

/**
 * Decides where the kubeconfig comes from: an explicit file, else `KUBECONFIG` or
 * `~/.kube/config`, else the in-cluster ServiceAccount.
 *
 * @param source explicit path or in-cluster
 * @param env environment lookup
 * @returns the plan
 * @throws {NoKubeconfigError} when there is none at all (client-node would silently fall
 *   back to http://localhost:8080)
 */
export function planKubeConfig(
  source: KubeConfigSource,
  env: (name: string) => string | undefined,
): KubeConfigPlan {
  if (source.inCluster) return "in-cluster";
  if (source.kubeconfig) return "file";
  if (env("KUBECONFIG") || hasDefaultKubeconfig(env)) return "default";
  if (env("KUBERNETES_SERVICE_HOST")) return "in-cluster";
  throw new NoKubeconfigError();
}

/**
 * Loads a kubeconfig: an explicit file, else `KUBECONFIG`/`~/.kube/config`, else the
 * in-cluster ServiceAccount.
 * @throws {NoKubeconfigError} when there is none at all
 *
 * @param source explicit path, context, or in-cluster
 * @param env environment lookup
 * @returns the loaded KubeConfig
 * @throws {UsageError} naming the file or context and the fix
 */
export async function loadKubeConfig(
  source: KubeConfigSource,
  env: (name: string) => string | undefined,
): Promise<KubeConfig> {
  const plan = planKubeConfig(source, env);
  // Loaded on first use: evaluating @kubernetes/client-node costs every start of the
  // binary tens of milliseconds, and most commands never talk to a cluster.
  const { KubeConfig } = await import("./_client_node.ts");
  const kc = new KubeConfig();
  try {
    if (plan === "in-cluster") kc.loadFromCluster();
    else if (plan === "file") kc.loadFromFile(source.kubeconfig as string);
    else kc.loadFromDefault();
  } catch (error) {
    const file = source.kubeconfig ?? env("KUBECONFIG") ?? "~/.kube/config";
    throw new UsageError(
      `Cannot load kubeconfig '${file}': ${error instanceof Error ? error.message : error}`,
      { cause: error, details: ["pass --kubeconfig with a valid kubeconfig file"] },
    );
  }
  if (source.context) {
    if (!kc.getContextObject(source.context)) {
      throw new UsageError(
        `Cannot use context '${source.context}': it is not in the kubeconfig (contexts: ${
          kc.getContexts().map((c) => c.name).join(", ") || "none"
        })`,
      );
    }
    kc.setCurrentContext(source.context);
  }
  const cluster = kc.getCurrentCluster();
  if (!cluster || !cluster.server) {
    throw new UsageError(
      "Cannot find a Kubernetes API server: the kubeconfig has no current cluster",
      { details: ["pass --kubeconfig, set KUBECONFIG, or run inside a cluster"] },
    );
  }
  return kc;
}

/**
 * The kubeconfig's current context (after `--context`) and the namespace it names, read from the
 * file without contacting the cluster: the namespace a verb uses when `-n` is not given.
 *
 * @param source explicit path and context
 * @param env environment lookup
 * @returns the context's name and namespace (undefined when it names none)
 * @throws {NoKubeconfigError} when there is no kubeconfig
 * @throws {UsageError} when it cannot be loaded or the context is not in it
 */
export async function readContextNamespace(
  source: KubeConfigSource,
  env: (name: string) => string | undefined,
): Promise<{ context: string; namespace: string | undefined }> {
  const kc = await loadKubeConfig(source, env);
  const context = kc.getCurrentContext();
  return { context, namespace: kc.getContextObject(context)?.namespace || undefined };
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
  load: () => Promise<KubeConfig>,
  options: RestClientOptions = {},
): RestClient {
  let ready: Promise<RestClient> | undefined;
  let loaded: RestClient | undefined;
  const client = (): Promise<RestClient> => {
    ready ??= load().then((kc) => (loaded = createRestClient(kc, options)));
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
 * Creates the transport for a kubeconfig.
 *
 * @param kc the loaded kubeconfig
 * @param options retry policy
 * @returns the REST client
 */
export function createRestClient(kc: KubeConfig, options: RestClientOptions = {}): RestClient {
  const { retries = 4, backoffMs = 200, sleep = abortableSleep, onWarning } = options;
  const cluster = kc.getCurrentCluster();
  if (!cluster) throw new UsageError("Cannot find a Kubernetes API server: no current cluster");
  const server = cluster.server.replace(/\/+$/, "");
  const base = new URL(server);
  const contextName = kc.getCurrentContext();
  const defaultNamespace = kc.getContextObject(contextName)?.namespace;
  const identity: CallerIdentity = {
    context: contextName,
    user: kc.getCurrentUser()?.name ?? "",
    server,
  };

  const send = (request: RestRequest, stream: boolean) =>
    sendRequest({ kc, base, server }, request, stream);

  async function attempt(request: RestRequest): Promise<string> {
    const res = await send(request, false);
    // A connection cut mid-body is a connection failure too (retryable when idempotent),
    // not a bare "aborted".
    const text = await readAll(res, request.maxResponseBytes).catch((error) => {
      if (error instanceof ResponseTooLargeError) throw error;
      throw connectionError(request, server, error);
    });
    const status = res.statusCode ?? 0;
    if (onWarning) {
      for (const warning of parseWarningHeaders(res.headers.warning)) {
        onWarning(warning, writtenObject(request));
      }
    }
    if (status >= 200 && status < 300) return text;
    throw statusError(request, status, text, { retryAfter: res.headers["retry-after"], identity });
  }

  async function withRetries(request: RestRequest): Promise<string> {
    const idempotent = request.idempotent ?? request.method === "GET";
    for (let n = 0;; n++) {
      try {
        return await attempt(request);
      } catch (error) {
        const retryable = error instanceof KubeApiError && error.isRetryable && idempotent &&
          !request.signal?.aborted;
        if (!retryable || n >= retries) throw error;
        const wait = error.retryAfterSeconds !== undefined
          ? Math.min(error.retryAfterSeconds * 1000, 30_000)
          : backoffMs * 2 ** n * (0.75 + Math.random() / 2);
        await sleep(wait, request.signal);
      }
    }
  }

  return {
    server,
    defaultNamespace,
    async json<T>(request: RestRequest): Promise<T> {
      const text = await withRetries(request);
      return (text === "" ? {} : JSON.parse(text)) as T;
    },
    text(request: RestRequest): Promise<string> {
      return withRetries(request);
    },
    async lines(request): Promise<LineStream> {
      const full: RestRequest = { ...request, method: "GET" };
      const res = await send(full, true);
      const status = res.statusCode ?? 0;
      if (status < 200 || status >= 300) {
        throw statusError(full, status, await readAll(res), {
          retryAfter: res.headers["retry-after"],
          identity,
        });
      }
      return lineStream(res);
    },
  };
}

/**
 * Sends one request with the kubeconfig's credentials; resolves with the response once its
 * headers arrive (a connection failure rejects as a {@link KubeApiError} of status 0).
 */
async function sendRequest(
  target: { kc: KubeConfig; base: URL; server: string },
  request: RestRequest,
  stream: boolean,
): Promise<http.IncomingMessage> {
  const { kc, base, server } = target;
  const opts: https.RequestOptions = {};
  await kc.applyToHTTPSOptions(opts);
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
    Accept: "application/json",
    "User-Agent": "aicr",
  };
  if (body !== undefined) {
    headers["Content-Type"] = request.contentType ?? "application/json";
    headers["Content-Length"] = String(Buffer.byteLength(body));
  }
  // Loaded on the first request: node:https (and TLS under it) costs every start of the binary
  // about 20 ms of CPU and 8 MiB, and a local agent or `aicr version` never sends one.
  const lib = url.protocol === "http:" ? await import("node:http") : await import("node:https");
  return await new Promise((resolve, reject) => {
    const req = lib.request(url, { ...opts, method: request.method, headers }, (res) => {
      if (!stream) req.setTimeout(0);
      resolve(res);
    });
    const timeoutMs = request.timeoutMs ?? 30_000;
    if (!stream) {
      req.setTimeout(timeoutMs, () => req.destroy(new Error(`timed out after ${timeoutMs} ms`)));
    }
    const onAbort = () => req.destroy(request.signal?.reason ?? new Error("aborted"));
    if (request.signal) {
      if (request.signal.aborted) onAbort();
      else request.signal.addEventListener("abort", onAbort, { once: true });
    }
    req.on("error", (error) => reject(connectionError(request, server, error)));
    req.on("close", () => request.signal?.removeEventListener("abort", onAbort));
    if (body !== undefined) req.write(body);
    req.end();
  });
}

function lineStream(res: http.IncomingMessage): LineStream {
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

async function readAll(res: http.IncomingMessage, maxBytes = Infinity): Promise<string> {
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

function connectionError(request: RestRequest, server: string, error: unknown): unknown {
  if (request.signal?.aborted) return request.signal.reason ?? error;
  const detail = error instanceof Error ? error.message : String(error);
  return new KubeApiError(
    `Cannot reach Kubernetes API server '${server}' for ${describeRequest(request)}: ${detail}`,
    0,
    "ConnectionFailure",
    { cause: error, details: UNREACHABLE_HINTS },
  );
}

/**
 * Sleeps, waking early with the signal's reason when it aborts.
 *
 * @param ms milliseconds
 * @param signal cancels the sleep
 * @returns resolves after the delay
 */
export function abortableSleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}
