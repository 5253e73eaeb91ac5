/**
 * The daemon assembled: cache, metrics and app from one deps object, with the background
 * first collection and an orderly stop. `cli/daemon.ts` serves `daemon.app` with `serve()`.
 *
 * @module
 */
import type { Hono } from "hono";
import type { Logger } from "../log.ts";
import { createApp } from "./app.ts";
import type { DaemonEnv } from "./app.ts";
import { SnapshotCache } from "./cache.ts";
import type { CollectFunction, SnapshotCacheOptions } from "./cache.ts";
import { createDaemonMetrics } from "./metrics.ts";
import type { DaemonMetrics } from "./metrics.ts";
import type { RequestAuthorizer } from "./auth.ts";

/** Dependencies of {@link createDaemon}. */
export interface DaemonDeps {
  /** Collects one snapshot of this node. */
  collect: CollectFunction;
  /** Authorizes callers; undefined only with `--insecure-no-auth`. */
  auth: RequestAuthorizer | undefined;
  /** Clock in milliseconds since the epoch. */
  clock: () => number;
  /** Logger. */
  log: Logger;
  /** Build information for `aicr_build_info`. */
  build: { version: string; commit: string; backend?: string };
  /** This daemon's node. */
  nodeName: string;
}

/** A daemon: the app and what it stands on. */
export interface Daemon {
  /** The Hono app. */
  app: Hono<DaemonEnv>;
  /** The snapshot cache. */
  cache: SnapshotCache;
  /** The metric set. */
  metrics: DaemonMetrics;
  /** Starts the first collection (retried until it succeeds) and periodic refresh. */
  start(): void;
  /** Stops background work and waits for a running collection to end. */
  close(): Promise<void>;
}

/**
 * Assembles a daemon.
 *
 * @param deps collect, auth, clock, logger, build info and node name
 * @param options cache ages, intervals and timeouts
 * @returns the daemon (not started)
 */
export function createDaemon(deps: DaemonDeps, options: SnapshotCacheOptions = {}): Daemon {
  const metrics = createDaemonMetrics(deps.build);
  const cache = new SnapshotCache({
    collect: deps.collect,
    clock: deps.clock,
    log: deps.log,
    onCollection: (outcome) => metrics.recordCollection(outcome),
  }, options);
  const app = createApp({
    cache,
    metrics,
    auth: deps.auth,
    log: deps.log,
    nodeName: deps.nodeName,
  });
  return { app, cache, metrics, start: () => cache.start(), close: () => cache.close() };
}
