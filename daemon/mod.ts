/**
 * DaemonSet mode, node side: `runDaemon()` is the daemon's whole lifecycle from typed options
 * (`aicr daemon` makes this one call); `createDaemon()` builds the snapshot cache, the metric set
 * and the app (`createApp()`); `serve()` serves it over HTTPS with bounded requests and a
 * graceful shutdown. Authentication and authorization go through `TokenReview` and
 * `SubjectAccessReview` (`createKubeAuth()`), cached by `createCachingAuthorizer()`.
 *
 * ```ts ignore
 * await runDaemon({ connect, makeCollect, log, now, signal, cwd }, options);
 * // or, piece by piece (tests, benchmarks):
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
export { createDaemon } from "./daemon.ts";
export { createKubeAuth } from "./kube_auth.ts";
export { serve } from "./serve.ts";
export { runDaemon } from "./run.ts";
export { useLightWebClasses } from "./web.ts";
export type { DaemonOptions, DaemonRunDeps, MakeAuth } from "./run.ts";
