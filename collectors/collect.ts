/**
 * Runs the collectors concurrently, each under its own deadline, and never lets one
 * failing or hanging collector fail or delay the others beyond its own deadline.
 *
 * @module
 */
import process from "node:process";
import { resolveNodeName } from "../snapshot/mod.ts";
import type { Measurement, SourceStatus } from "../snapshot/mod.ts";
import { collectGpu, gpuUnavailable } from "./gpu.ts";
import { collectK8s, k8sUnavailable } from "./k8s.ts";
import { collectOs, osUnavailable } from "./os.ts";
import { messageOf } from "./status.ts";
import { collectSystemd, systemdUnavailable } from "./systemd.ts";
import { collectOwnTopology, collectTopology, topologyUnavailable } from "./topology.ts";
import {
  type ClusterReader,
  type CollectOptions,
  COLLECTOR_NAMES,
  COLLECTOR_TYPES,
  type CollectorDeps,
  type CollectorName,
  type CollectorReport,
  type CollectResult,
  DEFAULT_TIMEOUTS_MS,
  type KubeNode,
} from "./types.ts";

type Runner = (
  deps: CollectorDeps,
  signal: AbortSignal,
  timeoutMs: number,
  options: CollectOptions,
) => Promise<Measurement>;

const RUNNERS: Readonly<Record<CollectorName, Runner>> = {
  k8s: (deps, signal, _timeoutMs, options) =>
    collectK8s(deps, { signal, nodeName: options.nodeName ?? resolveNodeName(deps.env) }),
  gpu: (deps, signal, timeoutMs) => collectGpu(deps, { signal, timeoutMs }),
  os: (deps, signal) => collectOs(deps, { signal }),
  systemd: (deps, signal, _timeoutMs, options) =>
    collectSystemd(
      deps,
      options.systemdUnits === undefined ? { signal } : { signal, units: options.systemdUnits },
    ),
  topology: (deps, signal, _timeoutMs, options) =>
    options.topologyScope === "node"
      ? collectOwnTopology(deps, {
        signal,
        nodeName: options.nodeName ?? resolveNodeName(deps.env),
      })
      : collectTopology(
        deps,
        options.maxNodesPerEntry === undefined
          ? { signal }
          : { signal, maxNodesPerEntry: options.maxNodesPerEntry },
      ),
};

const FALLBACKS: Readonly<
  Record<CollectorName, (status: SourceStatus, message: string) => Measurement>
> = {
  k8s: k8sUnavailable,
  gpu: gpuUnavailable,
  os: osUnavailable,
  systemd: systemdUnavailable,
  topology: topologyUnavailable,
};

/**
 * Milliseconds of a monotonic clock, as `performance.now()` counts them but without it: Node
 * loads `perf_hooks` on the first use of the `performance` global (about 1 ms of a short run).
 */
function monotonicMillis(): number {
  return Number(process.hrtime.bigint()) / 1e6;
}

/**
 * Runs the collectors and gathers their measurements.
 *
 * Every collector runs concurrently with its own timeout ({@link DEFAULT_TIMEOUTS_MS}
 * unless overridden). A collector that throws or times out still yields its
 * measurement, with every subtype empty and its context saying `failed` or `timeout`;
 * its report says the same. Results come in canonical order (K8s, GPU, OS, SystemD,
 * NodeTopology), whatever order they finished in.
 *
 * @param deps readers, logger and clock
 * @param options units, truncation, timeouts, signal and a subset of collectors
 * @returns measurements and one report per collector run
 */
export async function collectMeasurements(
  deps: CollectorDeps,
  options: CollectOptions = {},
): Promise<CollectResult> {
  const now = deps.now ?? monotonicMillis;
  // Node scope: the K8s and NodeTopology collectors read the same Node, once.
  if (deps.cluster && options.topologyScope === "node") {
    deps = { ...deps, cluster: shareNodeReads(deps.cluster, options.signal) };
  }
  const selected = COLLECTOR_NAMES.filter((name) =>
    options.only === undefined || options.only.includes(name)
  );
  const results = await Promise.all(selected.map((name) => runOne(name, deps, options, now)));
  return {
    measurements: results.map((r) => r.measurement),
    reports: results.map((r) => r.report),
  };
}

/** The reader with `getNode` asked once per name for one collection. */
function shareNodeReads(cluster: ClusterReader, signal: AbortSignal | undefined): ClusterReader {
  const reads = new Map<string, Promise<KubeNode>>();
  const shared: ClusterReader = Object.create(cluster);
  shared.getNode = (name) => {
    let read = reads.get(name);
    if (!read) reads.set(name, read = cluster.getNode(name, signal));
    return read;
  };
  return shared;
}

async function runOne(
  name: CollectorName,
  deps: CollectorDeps,
  options: CollectOptions,
  now: () => number,
): Promise<{ measurement: Measurement; report: CollectorReport }> {
  const timeoutMs = options.timeoutsMs?.[name] ?? DEFAULT_TIMEOUTS_MS[name];
  const controller = new AbortController();
  const started = now();
  let timer: ReturnType<typeof setTimeout> | undefined;
  let onParentAbort: (() => void) | undefined;
  const deadline = new Promise<{ status: "timeout"; message: string }>((resolve) => {
    timer = setTimeout(() => {
      const message = `Cannot collect ${
        COLLECTOR_TYPES[name]
      }: it did not finish within ${timeoutMs} ms`;
      controller.abort();
      resolve({ status: "timeout", message });
    }, timeoutMs);
    onParentAbort = () => {
      controller.abort();
      resolve({
        status: "timeout",
        message: `Cannot collect ${COLLECTOR_TYPES[name]}: the collection was cancelled`,
      });
    };
    if (options.signal?.aborted) onParentAbort();
    else options.signal?.addEventListener("abort", onParentAbort, { once: true });
  });
  const work = (async () => {
    try {
      return {
        status: "ok" as const,
        measurement: await RUNNERS[name](deps, controller.signal, timeoutMs, options),
      };
    } catch (error) {
      return { status: "failed" as const, message: messageOf(error) };
    }
  })();
  try {
    const outcome = await Promise.race([work, deadline]);
    const durationMs = now() - started;
    if (outcome.status === "ok") {
      return {
        measurement: outcome.measurement,
        report: { collector: name, type: COLLECTOR_TYPES[name], status: "ok", durationMs },
      };
    }
    deps.log.debug(`collector ${name} degraded`, {
      status: outcome.status,
      error: outcome.message,
    });
    return {
      measurement: FALLBACKS[name](
        outcome.status === "timeout" ? "timeout" : "failed",
        outcome.message,
      ),
      report: {
        collector: name,
        type: COLLECTOR_TYPES[name],
        status: outcome.status,
        durationMs,
        error: outcome.message,
      },
    };
  } finally {
    clearTimeout(timer);
    if (onParentAbort) options.signal?.removeEventListener("abort", onParentAbort);
  }
}
