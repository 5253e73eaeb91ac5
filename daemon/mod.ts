/**
 * DaemonSet mode, node side: `createDaemon()` builds the snapshot cache, the metric set and the
 * Hono app (`createApp()`); `serve()` serves it over HTTPS with bounded requests and a graceful
 * shutdown. Authentication and authorization go through `TokenReview` and
 * `SubjectAccessReview` (`createKubeAuth()`), cached by `createCachingAuthorizer()`.
 *
 * ```ts ignore
 * const daemon = createDaemon({ collect, auth, clock: Date.now, log, build, nodeName });
 * const server = await serve(daemon.app.fetch, { port: 8443, tls: { cert, key }, signal });
 * daemon.start();
 * await server.finished;
 * await daemon.close();
 * ```
 *
 * @module
 */
export {
  createApp,
  negotiateFormat,
  requireAccess,
  resolveMeasurementType,
  SNAPSHOT_CONTENT_TYPES,
  statusBody,
} from "./app.ts";
export type { AppDeps, DaemonEnv } from "./app.ts";
export {
  bearerToken,
  createCachingAuthorizer,
  describeDenial,
  MAX_TOKEN_BYTES,
  metricsAttributes,
  SNAPSHOT_API_GROUP,
  SNAPSHOT_RESOURCE,
  snapshotAttributes,
  UnauthenticatedError,
} from "./auth.ts";
export type {
  AccessAttributes,
  AccessAuthorizer,
  CachingAuthorizerOptions,
  RequestAuthorizer,
  TokenAuthenticator,
  TokenReviewResult,
  UserInfo,
} from "./auth.ts";
export { CachedSnapshot, CollectionFailedError, RateLimitedError, SnapshotCache } from "./cache.ts";
export type {
  CollectFunction,
  CollectResult,
  EncodedSnapshot,
  GetSnapshotOptions,
  SnapshotCacheDeps,
  SnapshotCacheOptions,
} from "./cache.ts";
export { createDaemon } from "./daemon.ts";
export type { Daemon, DaemonDeps } from "./daemon.ts";
export { createKubeAuth } from "./kube_auth.ts";
export type { KubeAuthOptions } from "./kube_auth.ts";
export {
  Counter,
  createDaemonMetrics,
  Gauge,
  Histogram,
  HTTP_DURATION_BUCKETS,
  METRICS_CONTENT_TYPE,
  renderMetrics,
} from "./metrics.ts";
export type {
  CollectionOutcome,
  CollectorReport,
  DaemonMetrics,
  HistogramOptions,
  MetricFamily,
  MetricOptions,
} from "./metrics.ts";
export { serve, toWebRequest, validateTls, writeWebResponse } from "./serve.ts";
export type {
  FetchHandler,
  RunningServer,
  ServeLimits,
  ServeOptions,
  TlsMaterial,
} from "./serve.ts";
