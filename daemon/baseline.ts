/**
 * Drift as a metric: the daemon reads its cohort's baseline (a ConfigMap that
 * `aicr daemonset baseline set` wrote in the daemon's namespace) and exports how many readings
 * of its own snapshot differ from it, per measurement type
 * (`aicr_drift_readings{measurement,cohort}`).
 *
 * The cohort is computed from each new snapshot exactly as `aicr diff --fleet` assigns it, and
 * the baseline is read with one `get` by name (`<daemon>-baseline-<cohort key>`) every poll
 * interval and whenever the cohort changes; an unchanged `resourceVersion` is not parsed again.
 * Only a baseline signed by the install's CA is used (`snapshot/baseline_signature.ts`): the CA
 * is the one that issued this daemon's own serving certificate (its signer writes it after the
 * leaf), so whoever may merely write ConfigMaps in the namespace cannot edit or plant one; an
 * unsigned, edited or foreign-signed baseline is `untrusted`, and so is every baseline before the
 * daemon holds its certificate.
 *
 * A daemon that cannot read its baseline keeps serving: `aicr_baseline_info{state}` says why
 * (`missing`, `malformed`, `wrong-cohort`, `untrusted`, `forbidden`, `unreachable`), failed reads count in
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
  verifyBaseline,
} from "../snapshot/mod.ts";
import type { BaselineCohort, BaselineObject, Snapshot } from "../snapshot/mod.ts";
import type { KeyObject } from "node:crypto";
import type { DaemonMetrics } from "./metrics.ts";

/** What the daemon knows of its cohort's baseline. */
export type BaselineState =
  | "ok"
  | "missing"
  | "malformed"
  | "wrong-cohort"
  | "untrusted"
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
  /**
   * The install's CA, which signs baselines: the issuer of this daemon's serving certificate;
   * undefined until the daemon holds one (every baseline is untrusted until then).
   */
  trust?: () => KeyObject | undefined;
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

/** What was last published: the log says each change of it once. */
interface Published {
  state: BaselineState;
  reason: string;
  configMap: string;
  /** The baseline's resourceVersion when `ok`, else `""`. */
  version: string;
}

const MISSING_UNGRANTED =
  "no baseline is granted for this cohort: none was set (aicr daemonset baseline set), or the daemon's Role does not list it";

function firstLine(error: unknown): string {
  return error instanceof Error ? error.message.split("\n")[0] ?? "" : String(error);
}

function refused(error: unknown): boolean {
  return error instanceof KubeApiError && (error.status === 403 || error.status === 401);
}

/** {@link BaselineTracker}: the cohort, the cached baseline and the metrics it feeds. */
class CohortBaselineTracker implements BaselineTracker {
  readonly #deps: BaselineTrackerDeps;
  readonly #intervalMs: number;
  readonly #abort = new AbortController();
  #current: Snapshot | undefined;
  #cohort: BaselineCohort | undefined;
  #baseline: Snapshot | undefined;
  #seenVersion: string | undefined;
  /** The CA the last verdict was made under. */
  #seenTrust: KeyObject | undefined;
  #last: Published | undefined;
  #timer: ReturnType<typeof setInterval> | undefined;
  #inFlight: Promise<void> | undefined;

  constructor(deps: BaselineTrackerDeps, intervalMs: number) {
    this.#deps = deps;
    this.#intervalMs = intervalMs;
  }

  async observe(snapshot: Snapshot): Promise<void> {
    this.#current = snapshot;
    const next = snapshotCohort(snapshot, this.#deps.nodeName);
    const cohort = this.#cohort;
    if (cohort && next.key === cohort.key && next.name === cohort.name) {
      this.#updateDrift();
      return;
    }
    if (cohort) {
      this.#deps.log.info("cohort changed: reading its baseline", {
        from: cohort.name,
        to: next.name,
      });
    }
    this.#cohort = next;
    this.#baseline = undefined;
    this.#seenVersion = undefined;
    await this.#inFlight;
    await this.refresh();
  }

  refresh(): Promise<void> {
    if (!this.#inFlight) {
      this.#inFlight = this.#read().finally(() => {
        this.#inFlight = undefined;
      });
    }
    return this.#inFlight;
  }

  state(): BaselineState | undefined {
    return this.#last?.state;
  }

  start(): void {
    if (this.#intervalMs > 0 && !this.#timer) {
      this.#timer = setInterval(() => void this.refresh(), this.#intervalMs);
    }
  }

  async close(): Promise<void> {
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = undefined;
    this.#abort.abort(new Error("daemon stopping"));
    await this.#inFlight?.catch(() => {});
  }

  async #read(): Promise<void> {
    const own = this.#cohort;
    if (!own) return;
    const configMap = baselineConfigMapName(this.#deps.daemonName, own.key);
    let object: KubeObject | undefined;
    try {
      object = await this.#deps.read(configMap, this.#abort.signal);
    } catch (error) {
      if (this.#abort.signal.aborted) return;
      this.#seenVersion = undefined;
      this.#publish(await this.#classifyReadError(error), configMap);
      return;
    }
    if (this.#cohort !== own) return; // the cohort changed while reading: that read is under way
    if (!object) {
      this.#seenVersion = undefined;
      this.#publish({ state: "missing", reason: "no baseline was set for this cohort" }, configMap);
      return;
    }
    const version = object.metadata?.resourceVersion;
    const last = this.#last;
    const trust = this.#deps.trust?.();
    if (
      version !== undefined && version === this.#seenVersion && last?.configMap === configMap &&
      trust === this.#seenTrust
    ) {
      // Unchanged since the last read: same verdict, no parse (counters still count a failure).
      const baseline = this.#baseline;
      this.#publish(
        { state: last.state, reason: last.reason, ...(baseline ? { baseline } : {}) },
        configMap,
        version,
      );
      return;
    }
    this.#seenVersion = version;
    this.#seenTrust = trust;
    this.#publish(judgeBaseline(object, own, trust), configMap, version ?? "");
  }

  /**
   * The daemon may `get` only the baselines that exist (their names are in its Role), so a
   * refused read is what a cohort without a baseline looks like. One read of the placeholder
   * name, which the Role always lists, tells that apart from a broken grant: a 404 there means
   * the daemon's RBAC works and this cohort has no (granted) baseline.
   */
  async #classifyReadError(error: unknown): Promise<ReadOutcome> {
    if (!refused(error)) return { state: "unreachable", reason: firstLine(error) };
    try {
      await this.#deps.read(baselinePlaceholderName(this.#deps.daemonName), this.#abort.signal);
    } catch (probe) {
      return refused(probe)
        ? { state: "forbidden", reason: firstLine(error) }
        : { state: "unreachable", reason: firstLine(probe) };
    }
    return { state: "missing", reason: MISSING_UNGRANTED };
  }

  #publish(outcome: ReadOutcome, configMap: string, version = ""): void {
    const cohort = this.#cohort;
    if (!cohort) return;
    const { metrics } = this.#deps;
    if (outcome.state !== "ok" && outcome.state !== "missing") {
      metrics.baselineReadErrors.inc({ reason: outcome.state });
    }
    metrics.baselineInfo.reset();
    metrics.baselineInfo.set(1, {
      cohort: cohort.name,
      configmap: configMap,
      state: outcome.state,
    });
    this.#baseline = outcome.state === "ok" ? outcome.baseline : undefined;
    this.#updateDrift();
    this.#logChange({
      state: outcome.state,
      reason: outcome.reason ?? "",
      configMap,
      version: outcome.state === "ok" ? version : "",
    }, cohort);
  }

  /** One line per change of state, or of the baseline read (a new resourceVersion when ok). */
  #logChange(now: Published, cohort: BaselineCohort): void {
    const last = this.#last;
    if (
      last?.state === now.state && last.reason === now.reason &&
      last.configMap === now.configMap && last.version === now.version
    ) return;
    this.#last = now;
    const fields = {
      cohort: cohort.name,
      configmap: now.configMap,
      ...(now.reason ? { reason: now.reason } : {}),
      ...(now.version ? { resourceVersion: now.version } : {}),
    };
    if (now.state === "ok") this.#deps.log.info("baseline read", fields);
    else this.#deps.log.warn(`baseline ${now.state}: drift is not measured`, fields);
  }

  #updateDrift(): void {
    const { driftReadings } = this.#deps.metrics;
    driftReadings.reset();
    const baseline = this.#baseline;
    const current = this.#current;
    const cohort = this.#cohort;
    if (!baseline || !current || !cohort) return;
    const drift = driftFromBaseline(baseline, current);
    for (const [measurement, count] of Object.entries(drift.byMeasurement)) {
      driftReadings.set(count, { measurement, cohort: cohort.name });
    }
  }
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
  return new CohortBaselineTracker(deps, options.intervalMs ?? 60_000);
}

/**
 * Judges a baseline ConfigMap against the daemon's cohort: it must be signed by the install's
 * CA as it is, say it holds this cohort (annotation and key label), hold a valid Snapshot, and
 * that snapshot's own cohort readings (GPU model and count) must be this cohort's.
 *
 * @param object the ConfigMap
 * @param own the daemon's cohort
 * @param trust the install's CA (undefined: none known yet, nothing is trusted)
 * @returns the state, the reason and the baseline when it is usable
 */
export function judgeBaseline(
  object: KubeObject,
  own: BaselineCohort,
  trust: KeyObject | undefined,
): ReadOutcome {
  // guard: baseline-trust: only a baseline the install's CA signed as it is decides drift
  if (!trust) {
    return {
      state: "untrusted",
      reason:
        "the install's CA is not known yet (it comes with this daemon's serving certificate): no baseline is trusted",
    };
  }
  const verdict = verifyBaseline(object as BaselineObject, trust);
  if (verdict.state !== "signed") return { state: "untrusted", reason: verdict.reason };
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
