/**
 * DaemonSet mode, node side: `createDaemon()` builds the snapshot cache, the metric set and the
 * app (`createApp()`); `serve()` serves it over HTTPS with bounded requests and a graceful
 * shutdown. Authentication and authorization go through `TokenReview` and
 * `SubjectAccessReview` (`createKubeAuth()`), cached by `createCachingAuthorizer()`.
 *
 * ```ts ignore
 * const daemon = createDaemon({ collect, auth, clock: Date.now, log, build, nodeName });
 * const server = await serve(daemon.app, { port: 8443, tls: { cert, key }, signal });
 * daemon.start();
 * await server.finished;
 * await daemon.close();
 * ```
 *
 * @module
 */
export { createCachingAuthorizer } from "./auth.ts";
export type { AccessAuthorizer, RequestAuthorizer, TokenAuthenticator } from "./auth.ts";
export type { CollectFunction, SnapshotCacheOptions } from "./cache.ts";
export { createDaemon } from "./daemon.ts";
export { createKubeAuth } from "./kube_auth.ts";
export { createServingIdentity } from "./identity.ts";
export { serve, validateTls } from "./serve.ts";
export type { RunningServer } from "./serve.ts";
