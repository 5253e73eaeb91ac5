/**
 * The node side of Job mode (and `aicr agent` on any host): collect every
 * measurement, build the snapshot, check `--require-gpu`, and deliver it.
 *
 * @module
 */
import { collectMeasurements } from "../collectors/mod.ts";
import type { CollectOptions, CollectorDeps, CollectorReport } from "../collectors/mod.ts";
import { InterruptedError, NotFoundError, ToolError } from "../errors.ts";
import type { KubeClient } from "../kube/mod.ts";
import type { Logger } from "../log.ts";
import {
  createSnapshot,
  encodeSnapshot,
  hasGpu,
  TOPOLOGY_SCOPE_METADATA,
} from "../snapshot/mod.ts";
import type { Snapshot, SnapshotFormat, SnapshotTarget } from "../snapshot/mod.ts";
import { deliverSnapshot } from "../sink/mod.ts";
import { writeFileSync } from "node:fs";
import { digestText, formatAgentReport } from "../manifests/mod.ts";
import type { AgentReport } from "../manifests/mod.ts";
import type { SinkDeps } from "../sink/mod.ts";

/** What an agent run needs. */
export interface AgentDeps {
  /** Readers the collectors use. */
  collectors: CollectorDeps;
  /** Streams and client for delivery. */
  sink: SinkDeps;
  /** Logger (stderr). */
  log: Logger;
  /** Clock. */
  now: () => Date;
  /** Version of this binary. */
  version: string;
}

/** Options of one agent run. */
export interface AgentOptions {
  /** Where the snapshot goes. */
  target: SnapshotTarget;
  /** Encoding. @default "yaml" */
  format?: SnapshotFormat;
  /** Fail unless a GPU was found. */
  requireGpu?: boolean;
  /** Node name for metadata and the K8s node lookup. */
  nodeName: string;
  /** Options passed to the collectors. */
  collect?: Omit<CollectOptions, "signal" | "nodeName">;
  /** Changes the collected snapshot before it is checked and written (e.g. merged projections). */
  transform?: (snapshot: Snapshot) => Snapshot;
  /** Cancels the run. */
  signal?: AbortSignal;
  /** The ConfigMap target's UID when the controller created it (see `DeliverOptions`). */
  configMapUid?: string;
  /**
   * Where to report what was written into a ConfigMap (`AICR_REPORT_PATH`, the container's
   * termination message file, see `manifests/agent_report.ts`), and this build's commit.
   */
  report?: { path: string; commit: string };
  /** A `cm://` target names a series that keeps its newest `keepLast` (scheduled snapshots). */
  keepLast?: number;
}

/** What an agent run produced. */
export interface AgentResult {
  /** The snapshot. */
  snapshot: Snapshot;
  /** Per-collector outcomes. */
  reports: CollectorReport[];
  /** Where it went. */
  destination: string;
  /** What the agent reported writing (a `cm://` target with a report path). */
  report?: AgentReport;
}

/** The message upstream prints when `--require-gpu` finds no GPU. */
export const REQUIRE_GPU_MESSAGE =
  "--require-gpu was set but no GPU was detected (nvidia-smi not found or returned 0 GPUs)";

/**
 * Collects a snapshot of this node.
 *
 * @param deps readers, clock, version and logger
 * @param options node name and collector options
 * @returns the snapshot and the collector reports
 */
export async function collectSnapshot(
  deps: Pick<AgentDeps, "collectors" | "log" | "now" | "version">,
  options: Pick<AgentOptions, "nodeName" | "collect" | "signal">,
): Promise<{ snapshot: Snapshot; reports: CollectorReport[] }> {
  const timestamp = deps.now();
  const { measurements, reports } = await collectMeasurements(deps.collectors, {
    ...options.collect,
    nodeName: options.nodeName,
    ...(options.signal ? { signal: options.signal } : {}),
  });
  for (const report of reports) {
    if (report.status !== "ok") {
      deps.log.warn(`failed to collect ${report.collector} - skipping`, {
        status: report.status,
        error: report.error,
      });
    } else {
      deps.log.debug("collected", { collector: report.collector, durationMs: report.durationMs });
    }
  }
  const snapshot = createSnapshot(measurements, {
    timestamp,
    version: deps.version,
    nodeName: options.nodeName,
  });
  // Said at the top of the document too: this NodeTopology is this node's, not the cluster's.
  if (options.collect?.topologyScope === "node") {
    snapshot.metadata[TOPOLOGY_SCOPE_METADATA] = "node";
  }
  return { snapshot, reports };
}

/**
 * Runs the agent: collect, check, encode, deliver.
 *
 * @param deps readers, sinks, clock, version and logger
 * @param options target, format and checks
 * @returns the snapshot, reports and destination
 * @throws {NotFoundError} when `requireGpu` is set and no GPU was found
 * @throws {InterruptedError} when the signal aborts (nothing is delivered)
 */
export async function runAgent(deps: AgentDeps, options: AgentOptions): Promise<AgentResult> {
  const format = options.format ?? "yaml";
  const collected = await collectSnapshot(deps, options);
  // A signal cancels the collectors (each says so); what they left is not this node's snapshot,
  // so none is delivered: exit 130, not a partial document with exit 0.
  if (options.signal?.aborted) {
    throw new InterruptedError(
      `Cannot finish the snapshot: interrupted (${String(options.signal.reason)})`,
    );
  }
  const { reports } = collected;
  const snapshot = options.transform ? options.transform(collected.snapshot) : collected.snapshot;
  if (options.requireGpu && !hasGpu(snapshot)) throw new NotFoundError(REQUIRE_GPU_MESSAGE);
  const encoded = encodeSnapshot(snapshot, format);
  const destination = await deliverSnapshot(deps.sink, {
    target: options.target,
    encoded,
    format,
    snapshot,
    version: deps.version,
    ...(options.signal ? { signal: options.signal } : {}),
    ...(options.configMapUid ? { configMapUid: options.configMapUid } : {}),
    ...(options.keepLast !== undefined ? { keepLast: options.keepLast } : {}),
  });
  let report: AgentReport | undefined;
  if (options.target.kind === "configmap") {
    if (options.report) {
      report = writeAgentReport(options.report, { encoded, version: deps.version });
    }
    deps.log.info("snapshot saved to ConfigMap", { uri: destination });
  } else if (options.target.kind === "file") {
    deps.log.info("snapshot saved to file", { path: destination });
  }
  return { snapshot, reports, destination, ...(report ? { report } : {}) };
}

/**
 * Reports what the agent wrote into its ConfigMap: digest, size, version and commit, as one line
 * of JSON into the container's termination message file, which only the kubelet reads back (into
 * the pod's status). Written in place: the file is the kubelet's, bound into the container.
 *
 * @param report where, and this build's commit
 * @param written the text stored in the ConfigMap and this build's version
 * @returns the report written
 * @throws {ToolError} naming the file when it cannot be written (the run must not pass unproved)
 */
export function writeAgentReport(
  report: { path: string; commit: string },
  written: { encoded: string; version: string },
): AgentReport {
  const { digest, bytes } = digestText(written.encoded);
  const made: AgentReport = { digest, bytes, version: written.version, commit: report.commit };
  try {
    writeFileSync(report.path, formatAgentReport(made));
  } catch (error) {
    throw new ToolError(
      `Cannot write the agent's report to '${report.path}': ${
        error instanceof Error ? error.message : error
      }`,
      "internal",
    );
  }
  return made;
}

/** What one collection of a long-lived server (the daemon) is made from. */
export interface NodeCollectOptions {
  /** Logger. */
  log: Logger;
  /** This node. */
  nodeName: string;
  /** A cluster client for the K8s and NodeTopology readings, when there is one. */
  kube?: KubeClient;
  /** Read host files under this directory. */
  hostRoot?: string;
  /** systemd units to read. */
  systemdUnits?: string[];
  /** Truncate NodeTopology node lists (0: no limit). */
  maxNodesPerEntry: number;
}

/**
 * Makes the collect function of a daemon: each call collects this node's snapshot, its
 * NodeTopology of its own Node only (one GET; the fleet fetch lists the cluster once per fetch).
 * The daemon takes it as an injected factory, so the node sides never import each other.
 *
 * @param deps the collectors' readers' factory, clock and version
 * @returns the factory of collect functions
 */
export function createNodeCollect(
  deps: Pick<AgentDeps, "now" | "version"> & {
    collectorDeps: (
      options: { kube?: KubeClient; log: Logger; hostRoot?: string },
    ) => CollectorDeps;
  },
): (options: NodeCollectOptions) => (signal: AbortSignal) => ReturnType<typeof collectSnapshot> {
  return (options) => {
    const collectors = deps.collectorDeps({
      log: options.log,
      ...(options.kube ? { kube: options.kube } : {}),
      ...(options.hostRoot ? { hostRoot: options.hostRoot } : {}),
    });
    return (signal) =>
      collectSnapshot({ collectors, log: options.log, now: deps.now, version: deps.version }, {
        nodeName: options.nodeName,
        collect: {
          maxNodesPerEntry: options.maxNodesPerEntry,
          topologyScope: "node",
          ...(options.systemdUnits?.length ? { systemdUnits: options.systemdUnits } : {}),
        },
        signal,
      });
  };
}
