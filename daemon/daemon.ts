/**
 * The daemon assembled: cache, metrics and app from one deps object, with the background
 * first collection and an orderly stop. `run.ts` serves `daemon.app` with `serve()`.
 *
 * @module
 */
import type { KeyObject } from "node:crypto";
import type { Logger } from "../log.ts";
import { createApp } from "./app.ts";
import type { DaemonApp } from "./app.ts";
import { SnapshotCache } from "./cache.ts";
import type { CollectFunction, SnapshotCacheOptions } from "./cache.ts";
import { createSnapshotHistory, nodeInfoLabels } from "./history.ts";
import type { SnapshotHistory } from "./history.ts";
import { createDaemonMetrics } from "./metrics.ts";
import type { DaemonMetrics, ProcessStats } from "./metrics.ts";
import type { RequestAuthorizer } from "./auth.ts";
import { createBaselineTracker } from "./baseline.ts";
import type { BaselineTracker, ConfigMapReader } from "./baseline.ts";

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
  /**
   * Authorizes `/metrics` callers when it differs from `auth`: tokens of the API server's
   * default audience, as the kubelet accepts from Prometheus. @default auth
   */
  metricsAuth?: RequestAuthorizer | undefined;
  /** What the process uses, for the `process_*` metrics. @default none */
  processStats?: () => ProcessStats;
  /**
   * Where the cohort's baseline is read (`aicr_drift_readings`): a reader of the daemon's
   * namespace's ConfigMaps, the daemon's name, the poll interval, and the install's CA that
   * signs baselines (none: every baseline is untrusted). @default no baseline
   */
  baseline?: {
    read: ConfigMapReader;
    daemonName: string;
    intervalMs?: number;
    trust?: () => KeyObject | undefined;
  };
  /** Why the daemon does not serve its own certificate yet (see `AppDeps`). @default never */
  awaitingCertificate?: () => string | undefined;
}

/** A daemon: the app and what it stands on. */
export interface Daemon {
  /** The app: `serve(daemon.app)`, or `daemon.app.request()` in tests. */
  app: DaemonApp;
  /** The snapshot cache. */
  cache: SnapshotCache;
  /** The metric set. */
  metrics: DaemonMetrics;
  /** The bounded history of this node's snapshot changes (`GET /v1/history`). */
  history: SnapshotHistory;
  /** The cohort's baseline and the drift from it, when the daemon reads one. */
  baseline: BaselineTracker | undefined;
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
  const metrics = createDaemonMetrics(
    deps.build,
    deps.processStats ? { processStats: deps.processStats } : {},
  );
  const history = createSnapshotHistory();
  const baseline = deps.baseline
    ? createBaselineTracker({
      read: deps.baseline.read,
      metrics,
      log: deps.log,
      daemonName: deps.baseline.daemonName,
      nodeName: deps.nodeName,
      ...(deps.baseline.trust ? { trust: deps.baseline.trust } : {}),
    }, deps.baseline.intervalMs !== undefined ? { intervalMs: deps.baseline.intervalMs } : {})
    : undefined;
  const cache = new SnapshotCache({
    collect: deps.collect,
    clock: deps.clock,
    log: deps.log,
    onCollection: (outcome) => {
      metrics.recordCollection(outcome);
      if (!outcome.snapshot) return;
      metrics.nodeInfo.reset();
      metrics.nodeInfo.set(1, nodeInfoLabels(outcome.snapshot, deps.nodeName));
      baseline?.observe(outcome.snapshot).catch((error) => {
        deps.log.warn("baseline comparison failed", { error: String(error) });
      });
      const entry = history.record(outcome.snapshot, outcome.endedAt);
      if (entry) {
        metrics.lastChange.set(entry.atMs / 1000);
        if (!entry.initial) {
          metrics.changes.inc();
          deps.log.info("snapshot changed", {
            readings: entry.total,
            first: entry.changes.slice(0, 5).map((c) => c.path).join(","),
          });
        }
      }
    },
  }, options);
  const app = createApp({
    cache,
    metrics,
    history,
    auth: deps.auth,
    ...(deps.metricsAuth !== undefined ? { metricsAuth: deps.metricsAuth } : {}),
    log: deps.log,
    nodeName: deps.nodeName,
    build: { version: deps.build.version, commit: deps.build.commit },
    ...(deps.awaitingCertificate ? { awaitingCertificate: deps.awaitingCertificate } : {}),
  });
  return {
    app,
    cache,
    metrics,
    history,
    baseline,
    start: () => {
      cache.start();
      baseline?.start();
    },
    close: async () => {
      await baseline?.close();
      await cache.close();
    },
  };
}
