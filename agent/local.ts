/**
 * `aicr agent`'s run (and the agent pod's, `AICR_AGENT_MODE=true`): collect this host or node,
 * merge the projections, deliver the document (or a table of it) where the options say, and in
 * the pod report what was written into the ConfigMap.
 *
 * @module
 */
import { mergeProjections } from "../collectors/mod.ts";
import type { CollectorDeps } from "../collectors/mod.ts";
import { UsageError } from "../errors.ts";
import type { KubeClient } from "../kube/mod.ts";
import type { Logger, TextWriter } from "../log.ts";
import { formatAgentReportLine } from "../manifests/mod.ts";
import { deliverSnapshot } from "../sink/mod.ts";
import { formatSnapshotTable, redactSnapshot } from "../snapshot/mod.ts";
import type { Redactor } from "../snapshot/mod.ts";
import type { Snapshot, SnapshotFormat, SnapshotTarget, Subtype } from "../snapshot/mod.ts";
import { buildInfo } from "../version.ts";
import { runAgent } from "./run.ts";
import type { AgentResult } from "./run.ts";

/** What a local collection needs. */
export interface LocalAgentDeps {
  /** Connects to the cluster when a kubeconfig exists, else undefined. */
  connect: () => KubeClient | undefined;
  /** Builds the collectors' readers (host files, processes, systemd, the cluster). */
  collectorDeps: (options: { kube?: KubeClient; log: Logger; hostRoot?: string }) => CollectorDeps;
  /** Standard output. */
  stdout: TextWriter;
  /**
   * Standard error, where the logger writes: the report's log line goes after the log's own
   * lines. Without it, no line (the termination message still carries the report).
   */
  stderr?: TextWriter;
  /** Clock. */
  now: () => Date;
  /** Logger. */
  log: Logger;
  /** Aborted on SIGINT/SIGTERM. */
  signal: AbortSignal;
}

/** A local collection's options, parsed and checked (`aicr agent`'s flags). */
export interface LocalAgentOptions {
  /** Where the snapshot goes, parsed. */
  target: SnapshotTarget;
  /** The output as the user named it (for messages). */
  output: string | undefined;
  /** The document's format (yaml when rendering a table). */
  format: SnapshotFormat;
  /** Render the snapshot as a table. */
  table: boolean;
  /** Fail unless a GPU was found. */
  requireGpu: boolean;
  /** Truncate NodeTopology node lists (0: no limit). */
  maxNodesPerEntry: number;
  /** systemd units to read. */
  systemdUnits: readonly string[];
  /** Read host files under this directory. */
  hostRoot?: string;
  /** The controller-side projection files, read. */
  projections: Subtype[];
  /**
   * `AICR_CONFIGMAP_UID` (set by `aicr snapshot` on its agent Job): the staging ConfigMap
   * the controller created; the snapshot goes into that object only.
   */
  configMapUid?: string;
  /**
   * `AICR_REPORT_PATH` (set on the agent Job): where the agent reports what it wrote into its
   * ConfigMap (the container's termination message file).
   */
  reportPath?: string;
  /**
   * `AICR_REPORT_NONCE` (set on the agent Job): the run's nonce; the report also goes to the log
   * as `aicr-agent-report <nonce> <json>`, which the CLI reads as soon as it is written.
   */
  reportNonce?: string;
  /** This node (metadata and the K8s node lookup). */
  nodeName: string;
  /** `--redact`: names, addresses and registry hosts replaced by keyed tokens. */
  redactor?: Redactor;
  /** The `cm://` output names a series keeping its newest `keepLast` (scheduled snapshots). */
  keepLast?: number;
}

/**
 * Collects and delivers a snapshot of this host.
 *
 * @param deps the cluster (when there is one), the collectors' readers, streams, clock, signal
 * @param options the checked local-collection options
 * @returns the agent result
 * @throws {UsageError} when a `cm://` output has no Kubernetes client
 */
export async function runLocalAgent(
  deps: LocalAgentDeps,
  options: LocalAgentOptions,
): Promise<AgentResult> {
  const { log } = deps;
  const { target, projections } = options;
  const kube = deps.connect();
  if (target.kind === "configmap" && !kube) {
    throw new UsageError((option) =>
      `Cannot write to '${
        option("output")
      }' value '${options.output}': no Kubernetes client (pass ${
        option("kubeconfig")
      } or run in a pod)`
    );
  }
  const agentDeps = {
    collectors: deps.collectorDeps({
      log,
      ...(kube ? { kube } : {}),
      ...(options.hostRoot ? { hostRoot: options.hostRoot } : {}),
    }),
    // `-t table`: the document goes nowhere; the table of what it holds is delivered below.
    sink: {
      stdout: options.table ? { write: () => {} } : deps.stdout,
      now: deps.now,
      ...(kube ? { kube: () => kube } : {}),
    },
    log,
    now: deps.now,
    version: buildInfo().version,
  };
  const result = await runAgent(agentDeps, {
    target: options.table ? { kind: "stdout" } : target,
    format: options.format,
    requireGpu: options.requireGpu,
    nodeName: options.nodeName,
    collect: {
      maxNodesPerEntry: options.maxNodesPerEntry,
      ...(options.systemdUnits.length ? { systemdUnits: [...options.systemdUnits] } : {}),
    },
    signal: deps.signal,
    ...(options.configMapUid ? { configMapUid: options.configMapUid } : {}),
    ...(options.keepLast !== undefined ? { keepLast: options.keepLast } : {}),
    ...(options.reportPath
      ? { report: { path: options.reportPath, commit: buildInfo().commit } }
      : {}),
    ...(projections.length > 0 || options.redactor
      ? { transform: (snapshot: Snapshot) => finish(snapshot, projections, options.redactor) }
      : {}),
  });
  if (result.report && options.reportNonce && deps.stderr) {
    deps.stderr.write(`${formatAgentReportLine(options.reportNonce, result.report)}\n`);
  }
  if (!options.table) return result;
  const destination = await deliverSnapshot({ stdout: deps.stdout, now: deps.now }, {
    target,
    encoded: formatSnapshotTable(result.snapshot),
    format: options.format,
    snapshot: result.snapshot,
    version: buildInfo().version,
    signal: deps.signal,
  });
  if (target.kind === "file") log.info("snapshot table saved to file", { path: destination });
  return { ...result, destination };
}

/** The projections merged, then, with `--redact`, the whole snapshot redacted. */
function finish(snapshot: Snapshot, projections: Subtype[], redactor?: Redactor): Snapshot {
  const merged = projections.length > 0 ? mergeProjections(snapshot, projections) : snapshot;
  return redactor ? redactSnapshot(merged, redactor) : merged;
}
