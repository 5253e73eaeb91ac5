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
export { createCachingAuthorizer } from "./auth.ts";
export type {
  AccessAuthorizer,
  CachingAuthorizerOptions,
  RequestAuthorizer,
  TokenAuthenticator,
} from "./auth.ts";
export type { CollectFunction, SnapshotCacheOptions } from "./cache.ts";
export { createDaemon } from "./daemon.ts";
export type { Daemon, DaemonDeps } from "./daemon.ts";
export { boundToNode, createKubeAuth } from "./kube_auth.ts";
export { createServingIdentity, csrName } from "./identity.ts";
export type { IdentityOptions, ServingIdentity, ServingPair } from "./identity.ts";
export type { KubeAuthOptions } from "./kube_auth.ts";
export { serve, validateTls } from "./serve.ts";
export type { FetchHandler, RunningServer, ServeOptions, TlsMaterial } from "./serve.ts";
export { createBaselineTracker, judgeBaseline } from "./baseline.ts";
export type { BaselineState, BaselineTracker, ConfigMapReader } from "./baseline.ts";
