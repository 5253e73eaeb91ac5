/**
 * A small Prometheus registry and text exposition (format 0.0.4), written here rather than
 * pulled from npm: counters, gauges and histograms with labels, and the daemon's own metric
 * set built on them.
 *
 * @module
 */

import type { Snapshot } from "../snapshot/mod.ts";

/** Labels of `aicr_node_info`, in output order. */
export const NODE_INFO_LABEL_NAMES = [
  "node",
  "driver_version",
  "cuda_version",
  "gpu_model",
  "gpu_count",
  "kernel",
  "os_release",
  "kubelet_version",
  "container_runtime",
] as const;

/** Label names and values of one series. */
export type Labels = Record<string, string>;

/** Content type of the Prometheus text exposition format. */
export const METRICS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8";

/** Default histogram buckets for HTTP latencies, in seconds (1 ms to 10 s). */
export const HTTP_DURATION_BUCKETS: readonly number[] = [
  0.001,
  0.0025,
  0.005,
  0.01,
  0.025,
  0.05,
  0.1,
  0.25,
  0.5,
  1,
  2.5,
  5,
  10,
];

const METRIC_NAME_REGEXP = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL_NAME_REGEXP = /^[a-zA-Z_][a-zA-Z0-9_]*$/;

/**
 * Escapes a label value for the text format (backslash, double quote, newline).
 *
 * @param value the raw value
 * @returns the escaped value, without quotes
 */
export function escapeLabelValue(value: string): string {
  return value.replace(/\\/g, "\\\\").replace(/"/g, '\\"').replace(/\n/g, "\\n");
}

/**
 * Formats a sample value: integers plainly, `+Inf`/`-Inf`/`NaN` by name.
 *
 * @param value the number
 * @returns its text form
 */
export function formatSampleValue(value: number): string {
  if (Number.isNaN(value)) return "NaN";
  if (value === Infinity) return "+Inf";
  if (value === -Infinity) return "-Inf";
  return String(value);
}

function labelKey(names: readonly string[], labels: Labels): string {
  return names.map((name) => labels[name] ?? "").join("\u0000");
}

function formatLabels(names: readonly string[], values: readonly string[], extra = ""): string {
  const parts = names.map((name, i) => `${name}="${escapeLabelValue(values[i] ?? "")}"`);
  if (extra) parts.push(extra);
  return parts.length === 0 ? "" : `{${parts.join(",")}}`;
}

function checkNames(name: string, labelNames: readonly string[]): void {
  if (!METRIC_NAME_REGEXP.test(name)) throw new TypeError(`Cannot register metric '${name}'`);
  for (const label of labelNames) {
    if (!LABEL_NAME_REGEXP.test(label) || label === "le") {
      throw new TypeError(`Cannot register metric '${name}' as label '${label}' is invalid`);
    }
  }
}

/** One metric family that can render itself. */
export interface MetricFamily {
  /** The metric name. */
  readonly name: string;
  /** Renders `# HELP`, `# TYPE` and every sample line, each ending in a newline. */
  render(): string;
}

/** Definition shared by every metric kind. */
export interface MetricOptions {
  /** Metric name, e.g. `aicr_collections_total`. */
  name: string;
  /** One-line help text. */
  help: string;
  /** Label names, in output order. @default [] */
  labelNames?: readonly string[];
}

/** A counter or gauge: one number per label set. */
class ScalarMetric implements MetricFamily {
  readonly name: string;
  readonly #help: string;
  readonly #type: "counter" | "gauge";
  readonly #labelNames: readonly string[];
  readonly #values = new Map<string, { labels: string[]; value: number }>();

  constructor(type: "counter" | "gauge", options: MetricOptions) {
    const { name, help, labelNames = [] } = options;
    checkNames(name, labelNames);
    this.name = name;
    this.#help = help;
    this.#type = type;
    this.#labelNames = labelNames;
  }

  #entry(labels: Labels): { labels: string[]; value: number } {
    const key = labelKey(this.#labelNames, labels);
    let entry = this.#values.get(key);
    if (!entry) {
      entry = { labels: this.#labelNames.map((n) => labels[n] ?? ""), value: 0 };
      this.#values.set(key, entry);
    }
    return entry;
  }

  add(amount: number, labels: Labels): void {
    if (this.#type === "counter" && !(amount >= 0)) {
      throw new RangeError(`Cannot add to counter '${this.name}': current amount is ${amount}`);
    }
    this.#entry(labels).value += amount;
  }

  set(value: number, labels: Labels): void {
    this.#entry(labels).value = value;
  }

  get(labels: Labels): number | undefined {
    return this.#values.get(labelKey(this.#labelNames, labels))?.value;
  }

  clear(): void {
    this.#values.clear();
  }

  render(): string {
    let out = `# HELP ${this.name} ${this.#help}\n# TYPE ${this.name} ${this.#type}\n`;
    for (const { labels, value } of this.#values.values()) {
      out += `${this.name}${formatLabels(this.#labelNames, labels)} ${formatSampleValue(value)}\n`;
    }
    return out;
  }
}

/** A counter: only goes up. */
export class Counter implements MetricFamily {
  readonly #metric: ScalarMetric;
  /** @param options name, help, label names */
  constructor(options: MetricOptions) {
    this.#metric = new ScalarMetric("counter", options);
  }
  /** The metric name. */
  get name(): string {
    return this.#metric.name;
  }
  /**
   * Adds to a series.
   *
   * @param labels the series' labels
   * @param amount a non-negative amount
   * @throws {RangeError} when the amount is negative
   */
  inc(labels: Labels = {}, amount = 1): void {
    this.#metric.add(amount, labels);
  }
  /**
   * Reads a series.
   *
   * @param labels the series' labels
   * @returns its value, or undefined when never touched
   */
  get(labels: Labels = {}): number | undefined {
    return this.#metric.get(labels);
  }
  /** @returns the text exposition */
  render(): string {
    return this.#metric.render();
  }
}

/** A gauge: set to any value. */
export class Gauge implements MetricFamily {
  readonly #metric: ScalarMetric;
  /** @param options name, help, label names */
  constructor(options: MetricOptions) {
    this.#metric = new ScalarMetric("gauge", options);
  }
  /** The metric name. */
  get name(): string {
    return this.#metric.name;
  }
  /**
   * Sets a series.
   *
   * @param value the value
   * @param labels the series' labels
   */
  set(value: number, labels: Labels = {}): void {
    this.#metric.set(value, labels);
  }
  /**
   * Reads a series.
   *
   * @param labels the series' labels
   * @returns its value, or undefined when never set
   */
  get(labels: Labels = {}): number | undefined {
    return this.#metric.get(labels);
  }
  /** Removes every series (an info metric whose labels changed). */
  reset(): void {
    this.#metric.clear();
  }
  /** @returns the text exposition */
  render(): string {
    return this.#metric.render();
  }
}

/** Options of a {@link Histogram}. */
export interface HistogramOptions extends MetricOptions {
  /** Upper bounds, ascending, without `+Inf`. @default HTTP_DURATION_BUCKETS */
  buckets?: readonly number[];
}

interface HistogramSeries {
  labels: string[];
  counts: number[];
  sum: number;
  count: number;
}

/** A histogram with fixed buckets. */
export class Histogram implements MetricFamily {
  /** The metric name. */
  readonly name: string;
  readonly #help: string;
  readonly #labelNames: readonly string[];
  readonly #buckets: readonly number[];
  readonly #series = new Map<string, HistogramSeries>();

  /**
   * @param options name, help, label names and buckets
   * @throws {TypeError} when names are invalid or buckets are not ascending
   */
  constructor(options: HistogramOptions) {
    const { name, help, labelNames = [], buckets = HTTP_DURATION_BUCKETS } = options;
    checkNames(name, labelNames);
    for (let i = 1; i < buckets.length; i++) {
      if (!((buckets[i] ?? 0) > (buckets[i - 1] ?? 0))) {
        throw new TypeError(`Cannot register histogram '${name}' as buckets must ascend`);
      }
    }
    this.name = name;
    this.#help = help;
    this.#labelNames = labelNames;
    this.#buckets = buckets;
  }

  /**
   * Records one observation.
   *
   * @param value the observed value (seconds for durations)
   * @param labels the series' labels
   */
  observe(value: number, labels: Labels = {}): void {
    const key = labelKey(this.#labelNames, labels);
    let series = this.#series.get(key);
    if (!series) {
      series = {
        labels: this.#labelNames.map((n) => labels[n] ?? ""),
        counts: this.#buckets.map(() => 0),
        sum: 0,
        count: 0,
      };
      this.#series.set(key, series);
    }
    // Counts per bucket are kept non-cumulative (one increment per observation) and summed up
    // when rendered; a value above every bound lands only in +Inf (the count).
    const buckets = this.#buckets;
    let i = 0;
    while (i < buckets.length && value > (buckets[i] as number)) i++;
    if (i < buckets.length) series.counts[i] = (series.counts[i] ?? 0) + 1;
    series.sum += value;
    series.count += 1;
  }

  /**
   * The number of observations of a series.
   *
   * @param labels the series' labels
   * @returns the count, 0 when never observed
   */
  count(labels: Labels = {}): number {
    return this.#series.get(labelKey(this.#labelNames, labels))?.count ?? 0;
  }

  /** @returns the text exposition (cumulative buckets, `+Inf`, `_sum`, `_count`) */
  render(): string {
    let out = `# HELP ${this.name} ${this.#help}\n# TYPE ${this.name} histogram\n`;
    for (const series of this.#series.values()) {
      let cumulative = 0;
      this.#buckets.forEach((bound, i) => {
        cumulative += series.counts[i] ?? 0;
        const le = `le="${formatSampleValue(bound)}"`;
        out += `${this.name}_bucket${
          formatLabels(this.#labelNames, series.labels, le)
        } ${cumulative}\n`;
      });
      const inf = formatLabels(this.#labelNames, series.labels, 'le="+Inf"');
      const plain = formatLabels(this.#labelNames, series.labels);
      out += `${this.name}_bucket${inf} ${series.count}\n`;
      out += `${this.name}_sum${plain} ${formatSampleValue(series.sum)}\n`;
      out += `${this.name}_count${plain} ${series.count}\n`;
    }
    return out;
  }
}

/**
 * Renders metric families in order, as one exposition document.
 *
 * @param families the families
 * @returns the document text
 */
export function renderMetrics(families: readonly MetricFamily[]): string {
  return families.map((family) => family.render()).join("");
}

/** One collector's result, as `collectors/` reports it. */
export interface CollectorReport {
  /** Collector name, e.g. `gpu`. */
  collector: string;
  /** Measurement type it produced. */
  type: string;
  /** How it ended. */
  status: "ok" | "failed" | "timeout";
  /** How long it ran. */
  durationMs: number;
  /** Why it failed. */
  error?: string;
}

/** What the process uses, read when `/metrics` is rendered. */
export interface ProcessStats {
  /** User plus system CPU time, in seconds. */
  cpuSeconds: number;
  /** Resident set size, in bytes. */
  residentBytes: number;
  /** Open file descriptors (undefined where the platform cannot tell). */
  openFds?: number;
  /** Maximum open file descriptors (undefined where unknown). */
  maxFds?: number;
  /** Process start, in seconds since the epoch. */
  startTimeSeconds: number;
}

/**
 * The standard `process_*` metrics (as the Prometheus client libraries name them), read from a
 * stats function at each render.
 */
class ProcessFamily implements MetricFamily {
  readonly name = "process";
  readonly #stats: () => ProcessStats;
  constructor(stats: () => ProcessStats) {
    this.#stats = stats;
  }
  render(): string {
    const s = this.#stats();
    const one = (name: string, type: string, help: string, value: number | undefined) =>
      value === undefined
        ? ""
        : `# HELP ${name} ${help}\n# TYPE ${name} ${type}\n${name} ${formatSampleValue(value)}\n`;
    return one(
      "process_cpu_seconds_total",
      "counter",
      "Total user and system CPU time spent in seconds.",
      s.cpuSeconds,
    ) +
      one(
        "process_resident_memory_bytes",
        "gauge",
        "Resident memory size in bytes.",
        s.residentBytes,
      ) +
      one("process_open_fds", "gauge", "Number of open file descriptors.", s.openFds) +
      one("process_max_fds", "gauge", "Maximum number of open file descriptors.", s.maxFds) +
      one(
        "process_start_time_seconds",
        "gauge",
        "Start time of the process since unix epoch in seconds.",
        s.startTimeSeconds,
      );
  }
}

/** The daemon's metric set. */
export interface DaemonMetrics {
  /** `aicr_build_info{version,commit,backend}` 1. */
  buildInfo: Gauge;
  /** `aicr_collector_duration_seconds{collector}`: the last run of each collector. */
  collectorDuration: Gauge;
  /** `aicr_collector_errors_total{collector}`: failed or timed-out collector runs. */
  collectorErrors: Counter;
  /** `aicr_collection_duration_seconds`: the last whole collection. */
  collectionDuration: Gauge;
  /** `aicr_collections_total{result}`: collections by `success` or `failure`. */
  collections: Counter;
  /** `aicr_snapshot_last_success_timestamp_seconds`. */
  lastSuccess: Gauge;
  /** `aicr_http_requests_total{route,code}`. */
  httpRequests: Counter;
  /** `aicr_http_request_duration_seconds{route}`. */
  httpDuration: Histogram;
  /** `aicr_node_info{node,driver_version,cuda_version,gpu_model,gpu_count,kernel,...}` 1. */
  nodeInfo: Gauge;
  /** `aicr_snapshot_last_change_timestamp_seconds`: when a reading last changed. */
  lastChange: Gauge;
  /** `aicr_snapshot_changes_total`: collections that changed some reading. */
  changes: Counter;
  /** `aicr_drift_readings{measurement,cohort}`: readings differing from the cohort's baseline. */
  driftReadings: Gauge;
  /** `aicr_baseline_info{cohort,configmap,state}` 1: whether the cohort's baseline was read. */
  baselineInfo: Gauge;
  /** `aicr_baseline_read_errors_total{reason}`: baseline reads that failed, by reason. */
  baselineReadErrors: Counter;
  /** Records one finished collection. */
  recordCollection(outcome: CollectionOutcome): void;
  /** Renders the exposition document. */
  render(): string;
}

/** What a collection did, for {@link DaemonMetrics.recordCollection}. */
export interface CollectionOutcome {
  /** Whether a snapshot came out. */
  ok: boolean;
  /** Wall time of the whole collection. */
  durationMs: number;
  /** When it ended (ms since the epoch). */
  endedAt: number;
  /** Per-collector reports (empty when the collection threw). */
  reports: readonly CollectorReport[];
  /** The snapshot, when one came out. */
  snapshot?: Snapshot;
}

/** The collection families: per collector and whole-snapshot duration, results, last success. */
function createCollectionMetrics() {
  const collectorDuration = new Gauge({
    name: "aicr_collector_duration_seconds",
    help: "Duration of the last run of each collector.",
    labelNames: ["collector"],
  });
  const collectorErrors = new Counter({
    name: "aicr_collector_errors_total",
    help: "Collector runs that failed or timed out.",
    labelNames: ["collector"],
  });
  const collectionDuration = new Gauge({
    name: "aicr_collection_duration_seconds",
    help: "Duration of the last whole snapshot collection.",
  });
  const collections = new Counter({
    name: "aicr_collections_total",
    help: "Snapshot collections by result (success or failure).",
    labelNames: ["result"],
  });
  const lastSuccess = new Gauge({
    name: "aicr_snapshot_last_success_timestamp_seconds",
    help: "Unix time the last successful collection ended (0 before the first).",
  });
  lastSuccess.set(0);
  return { collectorDuration, collectorErrors, collectionDuration, collections, lastSuccess };
}

/** The HTTP families: requests by route and code, latency by route. */
function createHttpMetrics() {
  const httpRequests = new Counter({
    name: "aicr_http_requests_total",
    help: "HTTP requests by route and status code.",
    labelNames: ["route", "code"],
  });
  const httpDuration = new Histogram({
    name: "aicr_http_request_duration_seconds",
    help: "HTTP request latency by route.",
    labelNames: ["route"],
  });
  return { httpRequests, httpDuration };
}

/** The node's facts and its snapshot's changes. */
function createChangeMetrics() {
  const nodeInfo = new Gauge({
    name: "aicr_node_info",
    help: "Facts of this node from its last snapshot (always 1).",
    labelNames: [...NODE_INFO_LABEL_NAMES],
  });
  const lastChange = new Gauge({
    name: "aicr_snapshot_last_change_timestamp_seconds",
    help:
      "Unix time of the last collection whose readings differed from the one before (the first collection counts; volatile readings ignored).",
  });
  const changes = new Counter({
    name: "aicr_snapshot_changes_total",
    help: "Collections whose readings differed from the one before.",
  });
  changes.inc({}, 0);
  return { nodeInfo, lastChange, changes };
}

/** Drift from the cohort's baseline, and whether the baseline could be read. */
function createBaselineMetrics() {
  const driftReadings = new Gauge({
    name: "aicr_drift_readings",
    help:
      "Readings of this node that differ from its cohort's baseline, per measurement type (volatile, identity and cluster-scoped readings ignored, as aicr diff --fleet).",
    labelNames: ["measurement", "cohort"],
  });
  const baselineInfo = new Gauge({
    name: "aicr_baseline_info",
    help:
      "The cohort's baseline as this daemon last read it (always 1): state ok, missing, malformed, wrong-cohort, untrusted, forbidden or unreachable.",
    labelNames: ["cohort", "configmap", "state"],
  });
  const baselineReadErrors = new Counter({
    name: "aicr_baseline_read_errors_total",
    help:
      "Reads of the cohort's baseline that failed, by reason (malformed, wrong-cohort, untrusted, forbidden, unreachable).",
    labelNames: ["reason"],
  });
  return { driftReadings, baselineInfo, baselineReadErrors };
}

/**
 * Creates the daemon's metric set.
 *
 * @param build version and commit for `aicr_build_info`
 * @param options where the `process_*` metrics come from (left out without it)
 * @returns the metrics
 */
export function createDaemonMetrics(
  build: { version: string; commit: string; backend?: string },
  options: { processStats?: () => ProcessStats } = {},
): DaemonMetrics {
  const buildInfo = new Gauge({
    name: "aicr_build_info",
    help: "Build information of the running aicr binary (always 1).",
    labelNames: ["version", "commit", "backend"],
  });
  buildInfo.set(1, {
    version: build.version,
    commit: build.commit,
    backend: build.backend ?? "unknown",
  });
  const { collectorDuration, collectorErrors, collectionDuration, collections, lastSuccess } =
    createCollectionMetrics();
  const { httpRequests, httpDuration } = createHttpMetrics();
  const { nodeInfo, lastChange, changes } = createChangeMetrics();
  const { driftReadings, baselineInfo, baselineReadErrors } = createBaselineMetrics();
  const families: MetricFamily[] = [
    buildInfo,
    nodeInfo,
    lastChange,
    changes,
    driftReadings,
    baselineInfo,
    baselineReadErrors,
    collections,
    collectionDuration,
    collectorDuration,
    collectorErrors,
    lastSuccess,
    httpRequests,
    httpDuration,
    ...(options.processStats ? [new ProcessFamily(options.processStats)] : []),
  ];
  return {
    nodeInfo,
    lastChange,
    changes,
    driftReadings,
    baselineInfo,
    baselineReadErrors,
    buildInfo,
    collectorDuration,
    collectorErrors,
    collectionDuration,
    collections,
    lastSuccess,
    httpRequests,
    httpDuration,
    recordCollection(outcome) {
      collections.inc({ result: outcome.ok ? "success" : "failure" });
      collectionDuration.set(outcome.durationMs / 1000);
      if (outcome.ok) lastSuccess.set(outcome.endedAt / 1000);
      for (const report of outcome.reports) {
        collectorDuration.set(report.durationMs / 1000, { collector: report.collector });
        // A zero series from the first report on, so rate() sees the first error.
        collectorErrors.inc({ collector: report.collector }, report.status === "ok" ? 0 : 1);
      }
    },
    render: () => renderMetrics(families),
  };
}
