/**
 * The daemon's HTTP API, a Hono app: snapshots (whole or one measurement, YAML or JSON), health,
 * readiness and Prometheus metrics, with Kubernetes authentication and authorization in front of
 * everything but health. Named middleware observe every request (metrics and a debug line) and
 * check access per route; `app.onError` is the only place errors become HTTP responses, and
 * `app.notFound` answers 405 on a known path and 404 elsewhere.
 *
 * `serve.ts` serves `app.fetch` over node:https; under Node the daemon's process answers with the
 * small web classes of `web.ts` instead of Node's own (about 8 MiB of RSS).
 *
 * @module
 */
import { Hono } from "hono";
import type { Context, MiddlewareHandler } from "hono";
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
import type { ConnectionInfo } from "./serve.ts";
import type { SnapshotHistory } from "./history.ts";

/** What the daemon's handlers share per request: the caller, once authenticated. */
export interface DaemonEnv {
  /** What the server knows of the connection (`serve()` hands it as the app's env). */
  Bindings: ConnectionInfo;
  /** Per-request values. */
  Variables: {
    /** The authenticated caller (unset on open routes and without auth). */
    user: UserInfo;
  };
}

/** The daemon's app. */
export type DaemonApp = Hono<DaemonEnv>;

/** Dependencies of {@link createApp}. */
export interface AppDeps {
  /** The snapshot cache. */
  cache: SnapshotCache;
  /** The metric set, rendered on `/metrics` and fed by every request. */
  metrics: DaemonMetrics;
  /**
   * Authenticates and authorizes callers. Undefined turns authentication off: only for
   * `insecureNoAuth` on a trusted loopback, never in a cluster.
   */
  auth: RequestAuthorizer | undefined;
  /**
   * Authorizes `/metrics` when it should differ from `auth` (tokens of the API server's
   * default audience, as a stock Prometheus sends). @default auth
   */
  metricsAuth?: RequestAuthorizer | undefined;
  /** This node's snapshot changes, served on `GET /v1/history`. @default none */
  history?: SnapshotHistory;
  /** Logger (access lines at debug). */
  log: Logger;
  /** This daemon's node: the name authorized against, and the `X-Aicr-Node` header. */
  nodeName: string;
  /**
   * This daemon's build, sent with every snapshot as `X-Aicr-Version` and `X-Aicr-Commit`: what
   * `aicr daemonset fetch` checks the daemon against. @default not sent
   */
  build?: { version: string; commit: string };
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

/** The status body of an error, with its headers. */
function errorBody(
  c: Context,
  code: number,
  message: string,
  headers: Record<string, string> = {},
): Response {
  return c.body(statusBody(code, message), code as 400, {
    "content-type": "application/json; charset=utf-8",
    ...headers,
  });
}

/**
 * Middleware that counts and times every request per route (a closed set of labels) and logs it
 * at debug, with its caller once known.
 *
 * @param metrics the metric set
 * @param log the logger
 * @returns the middleware
 */
export function observeRequests(
  metrics: DaemonMetrics,
  log: Logger,
): MiddlewareHandler<DaemonEnv> {
  return async function observeRequest(c, next) {
    const start = performance.now();
    await next();
    const route = routeOf(c.req.path);
    const seconds = (performance.now() - start) / 1000;
    const code = String(c.res.status);
    metrics.httpRequests.inc({ route, code });
    metrics.httpDuration.observe(seconds, { route });
    log.debug("request", {
      method: c.req.method,
      path: c.req.path,
      code,
      ms: Math.round(seconds * 1000),
      user: c.get("user")?.username,
    });
  };
}

/**
 * Middleware that lets through only a caller whose bearer token names a user who may do
 * `attributes` (everyone without an authorizer), and records the user.
 *
 * @param auth the authorizer, or undefined (no authentication)
 * @param attributes what the route needs
 * @returns the middleware
 * @throws {UnauthenticatedError} without a valid token
 * @throws {PermissionError} when the user may not
 */
export function requireAccess(
  auth: RequestAuthorizer | undefined,
  attributes: AccessAttributes,
): MiddlewareHandler<DaemonEnv> {
  return async function checkAccess(c, next) {
    if (auth) {
      const signal = c.req.raw.signal;
      const user = await auth.authenticate(bearerToken(c.req.raw.headers), {
        signal,
        // The peer's address, as serve() hands it to the app (absent in tests' direct calls).
        source: (c.env as ConnectionInfo | undefined)?.remoteAddress ?? "",
      });
      // guard: app-unauthenticated: no valid token, no answer
      if (!user) {
        throw new UnauthenticatedError("Cannot authenticate: the bearer token is not valid");
      }
      // guard: app-denied: a denied review, no answer
      if (!(await auth.authorize(user, attributes, signal))) {
        throw new PermissionError(describeDenial(user, attributes));
      }
      c.set("user", user);
    }
    await next();
  };
}

/**
 * Returns the handler of `GET /v1/snapshot[/{measurement}]`: format negotiation, `?fresh`,
 * conditional requests on the ETag.
 */
function createSnapshotHandler(
  cache: SnapshotCache,
  nodeName: string,
  build?: { version: string; commit: string },
): (c: Context<DaemonEnv>, typeName?: string) => Promise<Response> {
  // Response headers of each encoding, built once (the encodings live as long as their entry).
  const responseHeaders = new WeakMap<EncodedSnapshot, Record<string, string>>();
  return async function serveSnapshot(c, typeName) {
    const format = negotiateFormat(c.req.query("format"), c.req.header("accept"));
    const fresh = parseFresh(c.req.query("fresh"));
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
    const entry = await cache.get({ fresh, signal: c.req.raw.signal });
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
        ...(build ? { "x-aicr-version": build.version, "x-aicr-commit": build.commit } : {}),
      };
      responseHeaders.set(encoded, headers);
    }
    if (etagMatches(c.req.header("if-none-match"), encoded.etag)) {
      return c.body(null, 304, headers);
    }
    return c.body(encoded.bytes as Uint8Array<ArrayBuffer>, 200, headers);
  };
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

/**
 * The error handler: a ToolError's status and message (with `WWW-Authenticate` on 401 and
 * `Retry-After` when it says when); anything else is logged and hidden behind a 500.
 */
function errorHandler(log: Logger): (error: Error, c: Context<DaemonEnv>) => Response {
  return function answerError(error, c) {
    const path = c.req.path;
    if (!(error instanceof ToolError)) {
      log.error("request failed", { path, error: error.message });
      return errorBody(c, 500, "Internal error: see the daemon's log");
    }
    const headers: Record<string, string> = {};
    if (error.httpStatus === 401) headers["www-authenticate"] = 'Bearer realm="aicr"';
    const retryAfter = (error as { retryAfterSeconds?: unknown }).retryAfterSeconds;
    if (typeof retryAfter === "number") headers["retry-after"] = String(retryAfter);
    if (error.httpStatus >= 500) log.warn("request failed", { path, error: error.message });
    return errorBody(c, error.httpStatus, error.message, headers);
  };
}

/** The answer when no route matches: 405 on a known path (another method), else 404. */
function notFound(c: Context<DaemonEnv>): Response {
  const path = c.req.path;
  if (KNOWN_PATH_REGEXP.test(path)) {
    return errorBody(c, 405, `Cannot ${c.req.method} '${path}': only GET is served`, {
      allow: "GET, HEAD",
    });
  }
  return errorBody(c, 404, `Cannot find '${path}'`);
}

/**
 * Builds the daemon's app.
 *
 * Routes: `GET /healthz` (open), `GET /readyz` (open; 503 until the first successful
 * collection), `GET /metrics` (`get nodes/metrics`), `GET /v1/snapshot` and
 * `GET /v1/snapshot/{measurement}` (`get snapshots.aicr.run`, named after the node), with
 * `?format=yaml|json` (else `Accept`) and `?fresh=true`; `GET /v1/history` (same access): the
 * bounded list of this node's snapshot changes, when and which readings. `HEAD` answers as `GET`
 * without a body.
 *
 * @param deps cache, metrics, authorizer, logger and node name
 * @returns the app (serve `app.fetch` with `serve()` from `serve.ts`; `app.request()` in tests)
 */
export function createApp(deps: AppDeps): DaemonApp {
  const { cache, metrics, auth, nodeName, history, log } = deps;
  const metricsAuth = "metricsAuth" in deps ? deps.metricsAuth : auth;
  const awaiting = deps.awaitingCertificate ?? (() => undefined);
  const serveSnapshot = createSnapshotHandler(cache, nodeName, deps.build);
  const snapshotAccess = requireAccess(auth, snapshotAttributes(nodeName));
  const noStore = { "cache-control": "no-store" };

  const app = new Hono<DaemonEnv>();
  app.use(observeRequests(metrics, log));
  app.get("/healthz", (c) => {
    const waiting = awaiting();
    return c.text(waiting ? `ok: ${waiting}\n` : "ok\n", 200, noStore);
  });
  app.get("/readyz", (c) => {
    const waiting = awaiting();
    if (waiting) return c.text(`not ready: ${waiting}\n`, 503, noStore);
    return cache.ready
      ? c.text("ok\n", 200, noStore)
      : c.text("not ready: no successful collection yet\n", 503, noStore);
  });
  app.get(
    "/metrics",
    requireAccess(metricsAuth, metricsAttributes(nodeName)),
    (c) => c.body(metrics.render(), 200, { "content-type": METRICS_CONTENT_TYPE }),
  );
  app.get("/v1/snapshot", snapshotAccess, (c) => serveSnapshot(c));
  // What changed on this node and when: the same access as the snapshot itself.
  if (history) {
    app.get(
      "/v1/history",
      snapshotAccess,
      (c) =>
        c.body(JSON.stringify(historyBody(history, nodeName)), 200, {
          "content-type": "application/json",
          ...noStore,
        }),
    );
  }
  app.get(
    "/v1/snapshot/:measurement",
    snapshotAccess,
    (c) => serveSnapshot(c, c.req.param("measurement")),
  );
  app.notFound(notFound);
  app.onError(errorHandler(log));
  return app;
}
