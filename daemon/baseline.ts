/**
 * Drift as a metric: the daemon reads its cohort's baseline (a ConfigMap that
 * `aicr daemonset baseline set` wrote in the daemon's namespace) and exports how many readings
 * of its own snapshot differ from it, per measurement type
 * (`aicr_drift_readings{measurement,cohort}`).
 *
 * The cohort is computed from each new snapshot exactly as `aicr diff --fleet` assigns it, and
 * the baseline is read with one `get` by name (`<daemon>-baseline-<cohort key>`) every poll
 * interval and whenever the cohort changes; an unchanged `resourceVersion` is not parsed again.
 * A daemon that cannot read its baseline keeps serving: `aicr_baseline_info{state}` says why
 * (`missing`, `malformed`, `wrong-cohort`, `forbidden`, `unreachable`), failed reads count in
 * `aicr_baseline_read_errors_total{reason}`, the drift series are removed (no stale drift), and
 * the log gets one line per change of state, never one per poll.
 *
 * @module
 */
import { KubeApiError } from "../kube/mod.ts";
import type { KubeObject } from "../kube/mod.ts";
import type { Logger } from "../log.ts";
import {
  baselineCohortOf,
  baselineConfigMapName,
  baselinePlaceholderName,
  driftFromBaseline,
  isMeasurementType,
  parseSnapshot,
  readPath,
  snapshotCohort,
  snapshotFromConfigMapData,
} from "../snapshot/mod.ts";
import type { BaselineCohort, Snapshot } from "../snapshot/mod.ts";
import type { DaemonMetrics } from "./metrics.ts";

/** What the daemon knows of its cohort's baseline. */
export type BaselineState =
  | "ok"
  | "missing"
  | "malformed"
  | "wrong-cohort"
  | "forbidden"
  | "unreachable";

/** Reads one ConfigMap of the daemon's namespace; undefined when it does not exist. */
export type ConfigMapReader = (
  name: string,
  signal: AbortSignal,
) => Promise<KubeObject | undefined>;

/** Dependencies of {@link createBaselineTracker}. */
export interface BaselineTrackerDeps {
  /** Reads a ConfigMap of the daemon's namespace by name. */
  read: ConfigMapReader;
  /** The daemon's metrics (drift, baseline info, read errors). */
  metrics: Pick<DaemonMetrics, "driftReadings" | "baselineInfo" | "baselineReadErrors">;
  /** Logger: one line per change of state. */
  log: Logger;
  /** The daemon's name: the baseline ConfigMaps are `<name>-baseline-<cohort key>`. */
  daemonName: string;
  /** This node (the cohort reads its instance type and pool from the node's labels). */
  nodeName: string;
}

/** Options of {@link createBaselineTracker}. */
export interface BaselineTrackerOptions {
  /** How often the baseline is read again (0: only when the cohort changes). @default 60000 */
  intervalMs?: number;
}

/** The daemon's view of its baseline. */
export interface BaselineTracker {
  /** Takes a new snapshot of this node: recomputes the cohort and the drift. */
  observe(snapshot: Snapshot): Promise<void>;
  /** Reads the baseline now (also what the poll does). */
  refresh(): Promise<void>;
  /** The current state, undefined before the first snapshot. */
  state(): BaselineState | undefined;
  /** Starts polling. */
  start(): void;
  /** Stops polling and waits for a read in flight. */
  close(): Promise<void>;
}

interface ReadOutcome {
  state: BaselineState;
  reason?: string;
  baseline?: Snapshot;
}

/**
 * Makes the baseline tracker of one daemon.
 *
 * @param deps reader, metrics, logger, daemon and node name
 * @param options poll interval
 * @returns the tracker (not started)
 */
export function createBaselineTracker(
  deps: BaselineTrackerDeps,
  options: BaselineTrackerOptions = {},
): BaselineTracker {
  const { intervalMs = 60_000 } = options;
  const { metrics, log } = deps;
  const abort = new AbortController();
  let current: Snapshot | undefined;
  let cohort: BaselineCohort | undefined;
  let baseline: Snapshot | undefined;
  let seenVersion: string | undefined;
  let last:
    | { state: BaselineState; reason: string; configMap: string; version: string }
    | undefined;
  let timer: ReturnType<typeof setInterval> | undefined;
  let inFlight: Promise<void> | undefined;

  const publish = (outcome: ReadOutcome, configMap: string, version = "") => {
    if (!cohort) return;
    const reason = outcome.reason ?? "";
    if (outcome.state !== "ok" && outcome.state !== "missing") {
      metrics.baselineReadErrors.inc({ reason: outcome.state });
    }
    metrics.baselineInfo.reset();
    metrics.baselineInfo.set(1, {
      cohort: cohort.name,
      configmap: configMap,
      state: outcome.state,
    });
    baseline = outcome.state === "ok" ? outcome.baseline : undefined;
    updateDrift();
    // One line per change of state, or of the baseline read (a new resourceVersion when ok).
    const seen = outcome.state === "ok" ? version : "";
    if (
      last?.state === outcome.state && last.reason === reason && last.configMap === configMap &&
      last.version === seen
    ) return;
    last = { state: outcome.state, reason, configMap, version: seen };
    const fields = {
      cohort: cohort.name,
      configmap: configMap,
      ...(reason ? { reason } : {}),
      ...(seen ? { resourceVersion: seen } : {}),
    };
    if (outcome.state === "ok") log.info("baseline read", fields);
    else log.warn(`baseline ${outcome.state}: drift is not measured`, fields);
  };

  const updateDrift = () => {
    metrics.driftReadings.reset();
    if (!baseline || !current || !cohort) return;
    const drift = driftFromBaseline(baseline, current);
    for (const [measurement, count] of Object.entries(drift.byMeasurement)) {
      metrics.driftReadings.set(count, { measurement, cohort: cohort.name });
    }
  };

  const read = async (): Promise<void> => {
    if (!cohort) return;
    const own = cohort;
    const configMap = baselineConfigMapName(deps.daemonName, own.key);
    let object: KubeObject | undefined;
    try {
      object = await deps.read(configMap, abort.signal);
    } catch (error) {
      if (abort.signal.aborted) return;
      seenVersion = undefined;
      publish(await classifyReadError(error), configMap);
      return;
    }
    if (cohort !== own) return; // the cohort changed while reading: that read is under way
    if (!object) {
      seenVersion = undefined;
      publish({ state: "missing", reason: "no baseline was set for this cohort" }, configMap);
      return;
    }
    const version = object.metadata?.resourceVersion;
    if (version !== undefined && version === seenVersion && last?.configMap === configMap) {
      // Unchanged since the last read: same verdict, no parse (counters still count a failure).
      publish(
        { state: last.state, reason: last.reason, ...(baseline ? { baseline } : {}) },
        configMap,
        version,
      );
      return;
    }
    seenVersion = version;
    publish(judgeBaseline(object, own), configMap, version ?? "");
  };

  /**
   * The daemon may `get` only the baselines that exist (their names are in its Role), so a
   * refused read is what a cohort without a baseline looks like. One read of the placeholder
   * name, which the Role always lists, tells that apart from a broken grant: a 404 there means
   * the daemon's RBAC works and this cohort has no (granted) baseline.
   */
  const classifyReadError = async (error: unknown): Promise<ReadOutcome> => {
    const message = (e: unknown) => e instanceof Error ? e.message.split("\n")[0] ?? "" : String(e);
    const refused = (e: unknown) =>
      e instanceof KubeApiError && (e.status === 403 || e.status === 401);
    if (!refused(error)) return { state: "unreachable", reason: message(error) };
    try {
      await deps.read(baselinePlaceholderName(deps.daemonName), abort.signal);
    } catch (probe) {
      return refused(probe)
        ? { state: "forbidden", reason: message(error) }
        : { state: "unreachable", reason: message(probe) };
    }
    return {
      state: "missing",
      reason:
        "no baseline is granted for this cohort: none was set (aicr daemonset baseline set), or the daemon's Role does not list it",
    };
  };

  const refresh = (): Promise<void> => {
    if (!inFlight) {
      inFlight = read().finally(() => {
        inFlight = undefined;
      });
    }
    return inFlight;
  };

  return {
    async observe(snapshot) {
      current = snapshot;
      const next = snapshotCohort(snapshot, deps.nodeName);
      if (!cohort || next.key !== cohort.key || next.name !== cohort.name) {
        if (cohort) {
          log.info("cohort changed: reading its baseline", { from: cohort.name, to: next.name });
        }
        cohort = next;
        baseline = undefined;
        seenVersion = undefined;
        await inFlight;
        await refresh();
        return;
      }
      updateDrift();
    },
    refresh,
    state: () => last?.state,
    start() {
      if (intervalMs > 0 && !timer) timer = setInterval(() => void refresh(), intervalMs);
    },
    async close() {
      if (timer) clearInterval(timer);
      timer = undefined;
      abort.abort(new Error("daemon stopping"));
      await inFlight?.catch(() => {});
    },
  };
}

/**
 * Judges a baseline ConfigMap against the daemon's cohort: it must say it holds this cohort
 * (annotation and key label), hold a valid Snapshot, and that snapshot's own cohort readings
 * (GPU model and count) must be this cohort's.
 *
 * @param object the ConfigMap
 * @param own the daemon's cohort
 * @returns the state, the reason and the baseline when it is usable
 */
export function judgeBaseline(object: KubeObject, own: BaselineCohort): ReadOutcome {
  const metadata = (object.metadata ?? {}) as {
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
  };
  const said = baselineCohortOf(metadata);
  if (said && said.key !== own.key) {
    return {
      state: "wrong-cohort",
      reason:
        `the ConfigMap holds cohort '${said.name}' (key ${said.key}), this node is in '${own.name}' (key ${own.key})`,
    };
  }
  const text = snapshotFromConfigMapData((object as { data?: Record<string, string> }).data);
  if (text === undefined) {
    return { state: "malformed", reason: "the ConfigMap has no snapshot.yaml or snapshot.json" };
  }
  let snapshot: Snapshot;
  try {
    snapshot = parseSnapshot(text, { source: `ConfigMap ${object.metadata?.name ?? ""}` });
  } catch (error) {
    return {
      state: "malformed",
      reason: error instanceof Error ? error.message.split("\n")[0] ?? "" : String(error),
    };
  }
  if (!said) {
    return {
      state: "malformed",
      reason: "the ConfigMap does not say which cohort it holds (annotation aicr.run/cohort)",
    };
  }
  for (const [key, value] of Object.entries(own.values)) {
    if (!isMeasurementType(key.slice(0, key.indexOf(".")))) continue;
    const reading = readPath(snapshot, key);
    const theirs = reading === undefined || reading === null ? null : String(reading);
    if (theirs !== value) {
      return {
        state: "wrong-cohort",
        reason: `the baseline's ${key} is '${theirs ?? "(none)"}', this node's is '${
          value ?? "(none)"
        }'`,
      };
    }
  }
  return { state: "ok", baseline: snapshot };
}
