/**
 * The daemon's HTTP API: snapshots (whole or one measurement, YAML or JSON), health, readiness
 * and Prometheus metrics, with Kubernetes authentication and authorization in front of everything
 * but health. This is the only place errors become HTTP responses.
 *
 * It routes {@link ServedRequest}s itself (five routes, as Hono routed them before: the same path
 * and query decoding, from `hono/utils/url`), so `serve()` answers the daemon's requests without
 * web `Request`/`Response` objects: Node's implementation of those (its bundled undici) is about
 * 10 MiB of RSS once loaded. `fetch` and `request` answer web requests the same way (tests, a
 * fetch-handler server).
 *
 * @module
 */
import { getPath, getQueryParam, mergePath, tryDecodeURIComponent } from "hono/utils/url";
import { NotFoundError, PermissionError, ToolError, UsageError } from "../errors.ts";
import type { Logger } from "../log.ts";
import { MEASUREMENT_TYPES } from "../snapshot/mod.ts";
import type { MeasurementType, SnapshotFormat } from "../snapshot/mod.ts";
import {
  bearerToken,
  describeDenial,
  metricsAttributes,
  snapshotAttributes,
  UnauthenticatedError,
} from "./auth.ts";
import type { AccessAttributes, RequestAuthorizer, UserInfo } from "./auth.ts";
import type { EncodedSnapshot, SnapshotCache } from "./cache.ts";
import { METRICS_CONTENT_TYPE } from "./metrics.ts";
import type { DaemonMetrics } from "./metrics.ts";
import type { SnapshotHistory } from "./history.ts";
import type { ServedHandler, ServedRequest, ServedResponse } from "./serve.ts";

/** The daemon's app: routes served requests, and web requests through the same routes. */
export interface DaemonApp extends ServedHandler {
  /** Answers a web `Request` (a fetch handler: `serve(app.fetch)`, Deno, tests). */
  readonly fetch: (request: Request) => Promise<Response>;
  /**
   * Answers a path (`/v1/snapshot`, on `http://localhost`), a URL or a `Request`, as Hono's
   * `app.request` does.
   */
  readonly request: (input: string | URL | Request, init?: RequestInit) => Promise<Response>;
}

/** One request being answered: the request, its decoded path and the caller once known. */
interface RouteContext {
  request: ServedRequest;
  path: string;
  user: UserInfo | undefined;
}

/** Dependencies of {@link createApp}. */
export interface AppDeps {
  /** The snapshot cache. */
  cache: SnapshotCache;
  /** The metric set, rendered on `/metrics` and fed by every request. */
  metrics: DaemonMetrics;
  /**
   * Authenticates and authorizes callers. Undefined turns authentication off: only for
   * `--insecure-no-auth` on a trusted loopback, never in a cluster.
   */
  auth: RequestAuthorizer | undefined;
  /**
   * Authorizes `/metrics` when it should differ from `auth` (tokens of the API server's
   * default audience, as a stock Prometheus sends). @default auth
   */
  metricsAuth?: RequestAuthorizer | undefined;
  /** This node's snapshot changes, served on `GET /v1/history`. @default none (404) */
  history?: SnapshotHistory;
  /** Logger (access lines at debug). */
  log: Logger;
  /** This daemon's node: the name authorized against, and the `X-Aicr-Node` header. */
  nodeName: string;
  /**
   * Why the daemon does not serve its own certificate yet (its CSR not signed), or undefined
   * once it does: `/readyz` is 503 meanwhile and `/healthz` says so. @default always serving
   */
  awaitingCertificate?: () => string | undefined;
}

/** Content types of the snapshot formats. */
export const SNAPSHOT_CONTENT_TYPES: Readonly<Record<SnapshotFormat, string>> = {
  yaml: "application/yaml; charset=utf-8",
  json: "application/json; charset=utf-8",
};

const MEDIA_FORMATS: Readonly<Record<string, SnapshotFormat>> = {
  "application/json": "json",
  "application/yaml": "yaml",
  "application/x-yaml": "yaml",
  "text/yaml": "yaml",
  "text/x-yaml": "yaml",
};

/**
 * Picks the snapshot format: `?format=` wins, then the `Accept` media type of highest
 * quality that names JSON or YAML; anything else (none, `*\/*`, `text/html`) gets YAML.
 *
 * @param query the `format` query value
 * @param accept the `Accept` header
 * @returns the format
 * @throws {UsageError} when `format` is neither `yaml` nor `json`
 */
export function negotiateFormat(
  query: string | undefined,
  accept: string | undefined,
): SnapshotFormat {
  if (query !== undefined) {
    if (query === "yaml" || query === "json") return query;
    throw new UsageError(
      `Cannot encode snapshot as 'format' must be 'yaml' or 'json': current value is '${query}'`,
    );
  }
  if (!accept) return "yaml";
  let best: { format: SnapshotFormat; q: number } | undefined;
  for (const range of accept.split(",")) {
    const [type = "", ...params] = range.split(";").map((part) => part.trim().toLowerCase());
    const format = MEDIA_FORMATS[type];
    if (!format) continue;
    let q = 1;
    for (const param of params) {
      if (param.startsWith("q=")) q = Number(param.slice(2));
    }
    if (!(q > 0)) continue;
    if (!best || q > best.q) best = { format, q };
  }
  return best?.format ?? "yaml";
}

/**
 * Resolves a measurement type from a path segment: exact, else case-insensitive.
 *
 * @param name the segment, e.g. `GPU` or `gpu`
 * @returns the type, or undefined when it names none
 */
export function resolveMeasurementType(name: string): MeasurementType | undefined {
  const exact = MEASUREMENT_TYPES.find((type) => type === name);
  if (exact) return exact;
  const lower = name.toLowerCase();
  return MEASUREMENT_TYPES.find((type) => type.toLowerCase() === lower);
}

function parseFresh(value: string | undefined): boolean {
  if (value === undefined || value === "false" || value === "0") return false;
  if (value === "true" || value === "1" || value === "") return true;
  throw new UsageError(
    `Cannot read 'fresh' as it must be 'true' or 'false': current value is '${value}'`,
  );
}

/** Route labels for metrics: a closed set, so a scan of random paths cannot grow series. */
function routeOf(path: string): string {
  switch (path) {
    case "/healthz":
    case "/readyz":
    case "/metrics":
    case "/v1/snapshot":
    case "/v1/history":
      return path;
  }
  return path.startsWith("/v1/snapshot/") ? "/v1/snapshot/{measurement}" : "other";
}

const KNOWN_PATH_REGEXP = /^\/(healthz|readyz|metrics|v1\/history|v1\/snapshot(\/[^/]+)?)$/;

const REASONS: Readonly<Record<number, string>> = {
  400: "BadRequest",
  401: "Unauthorized",
  403: "Forbidden",
  404: "NotFound",
  405: "MethodNotAllowed",
  429: "TooManyRequests",
  500: "InternalError",
  503: "ServiceUnavailable",
  504: "Timeout",
};

/**
 * An error body in the shape of a Kubernetes `Status`, so clients parse daemon and apiserver
 * failures alike.
 *
 * @param code HTTP status
 * @param message the message
 * @returns the JSON text
 */
export function statusBody(code: number, message: string): string {
  return JSON.stringify({
    kind: "Status",
    apiVersion: "v1",
    status: "Failure",
    message,
    reason: REASONS[code] ?? "Unknown",
    code,
  }) + "\n";
}

function errorResponse(
  code: number,
  message: string,
  headers: Record<string, string> = {},
): ServedResponse {
  return {
    status: code,
    headers: { "content-type": "application/json; charset=utf-8", ...headers },
    body: statusBody(code, message),
  };
}

/** Hono's `c.text` content type. */
const TEXT_PLAIN = "text/plain; charset=UTF-8";

function text(body: string, status: number, headers: Record<string, string>): ServedResponse {
  return { status, headers: { "content-type": TEXT_PLAIN, ...headers }, body };
}

/**
 * Checks that the request's bearer token names a user who may do `attributes` (nothing without
 * auth), and records the user.
 *
 * @param context the request
 * @param options the authorizer and the attributes to check
 * @throws {UnauthenticatedError} without a valid token
 * @throws {PermissionError} when the user may not
 */
async function requireAccess(
  context: RouteContext,
  options: { auth: RequestAuthorizer | undefined; attributes: AccessAttributes },
): Promise<void> {
  const { auth, attributes } = options;
  if (!auth) return;
  const { request } = context;
  const signal = request.signal;
  const user = await auth.authenticate(
    bearerToken({ get: (name) => request.header(name) ?? null }),
    signal,
  );
  if (!user) {
    throw new UnauthenticatedError("Cannot authenticate: the bearer token is not valid");
  }
  if (!(await auth.authorize(user, attributes, signal))) {
    throw new PermissionError(describeDenial(user, attributes));
  }
  context.user = user;
}

function httpDate(ms: number): string {
  return new Date(ms).toUTCString();
}

function etagMatches(header: string | undefined, etag: string): boolean {
  if (!header) return false;
  return header.split(",").some((tag) => {
    const t = tag.trim();
    return t === "*" || t === etag || t === `W/${etag}`;
  });
}

/** After each request: request count and duration per route, and a debug line. */
function observeRequest(
  metrics: DaemonMetrics,
  log: Logger,
  context: RouteContext,
  answer: { status: number; start: number },
): void {
  const route = routeOf(context.path);
  const seconds = (performance.now() - answer.start) / 1000;
  const code = String(answer.status);
  metrics.httpRequests.inc({ route, code });
  metrics.httpDuration.observe(seconds, { route });
  log.debug("request", {
    method: context.request.method,
    path: context.path,
    code,
    ms: Math.round(seconds * 1000),
    user: context.user?.username,
  });
}

/**
 * Returns the handler of `GET /v1/snapshot[/{measurement}]`: format negotiation, `?fresh`,
 * conditional requests on the ETag.
 */
function createSnapshotHandler(
  cache: SnapshotCache,
  nodeName: string,
): (request: ServedRequest, typeName?: string) => Promise<ServedResponse> {
  // Response headers of each encoding, built once (the encodings live as long as their entry).
  const responseHeaders = new WeakMap<EncodedSnapshot, Record<string, string>>();
  async function serveSnapshot(
    request: ServedRequest,
    typeName?: string,
  ): Promise<ServedResponse> {
    const format = negotiateFormat(
      getQueryParam(request.url, "format") as string | undefined,
      request.header("accept"),
    );
    const fresh = parseFresh(getQueryParam(request.url, "fresh") as string | undefined);
    let type: MeasurementType | undefined;
    if (typeName !== undefined) {
      type = resolveMeasurementType(typeName);
      if (!type) {
        throw new NotFoundError(
          `Cannot find measurement type '${typeName}': known types are ${
            MEASUREMENT_TYPES.join(", ")
          }`,
        );
      }
    }
    const entry = await cache.get({ fresh, signal: request.signal });
    const encoded = entry.encode(format, type);
    if (!encoded) {
      throw new NotFoundError(
        `Cannot find measurement '${type}' in the snapshot of node "${nodeName}": it was not collected`,
      );
    }
    let headers = responseHeaders.get(encoded);
    if (!headers) {
      headers = {
        "content-type": SNAPSHOT_CONTENT_TYPES[format],
        "cache-control": "no-store",
        "etag": encoded.etag,
        "last-modified": httpDate(entry.collectedAt),
        "vary": "Accept",
        "x-aicr-collected-at": new Date(entry.collectedAt).toISOString(),
        "x-aicr-node": nodeName,
      };
      responseHeaders.set(encoded, headers);
    }
    if (etagMatches(request.header("if-none-match"), encoded.etag)) {
      return { status: 304, headers, body: null };
    }
    return { status: 200, headers, body: encoded.bytes };
  }
  return serveSnapshot;
}

/** The body of `GET /v1/history` (bigint readings as strings). */
function historyBody(history: SnapshotHistory, nodeName: string) {
  return {
    node: nodeName,
    capacity: "bounded",
    dropped: history.dropped(),
    entries: history.entries().map((e) => ({
      at: e.at,
      initial: e.initial,
      total: e.total,
      changes: e.changes.map((change) => ({
        ...change,
        ...(typeof change.before === "bigint" ? { before: String(change.before) } : {}),
        ...(typeof change.after === "bigint" ? { after: String(change.after) } : {}),
      })),
    })),
  };
}

/** Errors to responses: a ToolError's status and message; anything else is logged, 500. */
function errorResponseOf(log: Logger, error: unknown, path: string): ServedResponse {
  if (!(error instanceof ToolError)) {
    log.error("request failed", {
      path,
      error: error instanceof Error ? error.message : String(error),
    });
    return errorResponse(500, "Internal error: see the daemon's log");
  }
  const headers: Record<string, string> = {};
  if (error.httpStatus === 401) headers["www-authenticate"] = 'Bearer realm="aicr"';
  const retryAfter = (error as { retryAfterSeconds?: unknown }).retryAfterSeconds;
  if (typeof retryAfter === "number") headers["retry-after"] = String(retryAfter);
  if (error.httpStatus >= 500) {
    log.warn("request failed", { path, error: error.message });
  }
  return errorResponse(error.httpStatus, error.message, headers);
}

/** A web request as a served one. */
function servedRequestOf(request: Request): ServedRequest {
  return {
    method: request.method,
    url: request.url,
    header: (name) => request.headers.get(name) ?? undefined,
    signal: request.signal,
  };
}

/** A served response as a web one. */
function webResponseOf(response: ServedResponse): Response {
  const body = typeof response.body === "string" || response.body === null
    ? response.body
    : new Uint8Array(response.body);
  return new Response(body, { status: response.status, headers: { ...response.headers } });
}

const MEASUREMENT_PATH_REGEXP = /^\/v1\/snapshot\/([^/]+)$/;

/**
 * The GET routes of {@link createApp}.
 *
 * @param deps what the routes serve from
 * @returns the router: the answer of the route a request names, or undefined when none does
 */
function createRoutes(
  deps: AppDeps,
): (context: RouteContext) => Promise<ServedResponse | undefined> {
  const { cache, metrics, auth, nodeName, history } = deps;
  const metricsAuth = "metricsAuth" in deps ? deps.metricsAuth : auth;
  const awaiting = deps.awaitingCertificate ?? (() => undefined);
  const serveSnapshot = createSnapshotHandler(cache, nodeName);
  const snapshotAccess = { auth, attributes: snapshotAttributes(nodeName) };
  const metricsAccess = { auth: metricsAuth, attributes: metricsAttributes(nodeName) };
  const noStore = { "cache-control": "no-store" };

  return async function route(context: RouteContext): Promise<ServedResponse | undefined> {
    const { request, path } = context;
    switch (path) {
      case "/healthz": {
        const waiting = awaiting();
        return text(waiting ? `ok: ${waiting}\n` : "ok\n", 200, noStore);
      }
      case "/readyz": {
        const waiting = awaiting();
        if (waiting) return text(`not ready: ${waiting}\n`, 503, noStore);
        return cache.ready
          ? text("ok\n", 200, noStore)
          : text("not ready: no successful collection yet\n", 503, noStore);
      }
      case "/metrics":
        await requireAccess(context, metricsAccess);
        return {
          status: 200,
          headers: { "content-type": METRICS_CONTENT_TYPE },
          body: metrics.render(),
        };
      case "/v1/snapshot":
        await requireAccess(context, snapshotAccess);
        return serveSnapshot(request);
      case "/v1/history":
        // What changed on this node and when: the same access as the snapshot itself.
        if (!history) return undefined;
        await requireAccess(context, snapshotAccess);
        return {
          status: 200,
          headers: { "content-type": "application/json", ...noStore },
          body: JSON.stringify(historyBody(history, nodeName)),
        };
    }
    const measurement = MEASUREMENT_PATH_REGEXP.exec(path)?.[1];
    if (measurement === undefined) return undefined;
    await requireAccess(context, snapshotAccess);
    return serveSnapshot(request, tryDecodeURIComponent(measurement));
  };
}

/** The answer when no route matches: 405 on a known path (another method), else 404. */
function notFound(context: RouteContext): ServedResponse {
  const { path } = context;
  if (KNOWN_PATH_REGEXP.test(path)) {
    return errorResponse(
      405,
      `Cannot ${context.request.method} '${path}': only GET is served`,
      { allow: "GET, HEAD" },
    );
  }
  return errorResponse(404, `Cannot find '${path}'`);
}

/**
 * Builds the daemon's app.
 *
 * Routes: `GET /healthz` (open), `GET /readyz` (open; 503 until the first successful
 * collection), `GET /metrics` (`get nodes/metrics`), `GET /v1/snapshot` and
 * `GET /v1/snapshot/{measurement}` (`get snapshots.aicr.run`, named after the node), with
 * `?format=yaml|json` (else `Accept`) and `?fresh=true`; `GET /v1/history` (same access): the
 * bounded list of this node's snapshot changes, when and which readings.
 *
 * @param deps cache, metrics, authorizer, logger and node name
 * @returns the app (serve it with `serve()` from `serve.ts`, or call `app.request()` in tests)
 */
export function createApp(deps: AppDeps): DaemonApp {
  const { metrics, log } = deps;
  const route = createRoutes(deps);

  async function handle(request: ServedRequest): Promise<ServedResponse> {
    const start = performance.now();
    const method = request.method;
    // Hono's getPath reads nothing but the URL.
    const path = getPath({ url: request.url } as Request);
    const context: RouteContext = { request, path, user: undefined };
    let response: ServedResponse;
    try {
      const found = method === "GET" || method === "HEAD" ? await route(context) : undefined;
      response = found ?? notFound(context);
    } catch (error) {
      response = errorResponseOf(log, error, context.path);
    }
    observeRequest(metrics, log, context, { status: response.status, start });
    return method === "HEAD" ? { ...response, body: null } : response;
  }

  const fetch = async (request: Request) => webResponseOf(await handle(servedRequestOf(request)));
  return {
    handle,
    fetch,
    request: (input, init) => {
      if (input instanceof Request) return fetch(init ? new Request(input, init) : input);
      const target = input.toString();
      return fetch(
        new Request(
          /^https?:\/\//.test(target) ? target : `http://localhost${mergePath("/", target)}`,
          init,
        ),
      );
    },
  };
}
