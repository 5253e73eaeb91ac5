/**
 * The deliver stage of a Job-mode run: the snapshot read back from the agent's ConfigMap, with
 * the controller-side projections merged in, checked for where it ran (no GPU data while the
 * cluster has GPU nodes is said), encoded (a document, or a table), and delivered as soon as it
 * is read, while cleanup runs: to stdout or a file through `sink/`, or into the user's `cm://`
 * output, which the agent wrote itself and which is rewritten only when projections were merged.
 * A taken snapshot whose output fails is kept (a file in the temporary folder, else stdout).
 *
 * @module
 */
import { join } from "node:path";
import { tmpdir } from "node:os";
import { mergeProjections } from "../collectors/mod.ts";
import { InterruptedError, ToolError } from "../errors.ts";
import { writeFileAtomic } from "../io.ts";
import type { KubeClient } from "../kube/mod.ts";
import type { Logger, TextWriter } from "../log.ts";
import { deliverSnapshot, writeSnapshotConfigMap } from "../sink/mod.ts";
import {
  assertFitsConfigMap,
  encodeSnapshot,
  findMeasurement,
  formatConfigMapUri,
  formatSnapshotTable,
  hasGpu,
  redactSnapshot,
} from "../snapshot/mod.ts";
import type {
  ConfigMapRef,
  Redactor,
  Snapshot,
  SnapshotFormat,
  SnapshotTarget,
  Subtype,
} from "../snapshot/mod.ts";
import { buildInfo } from "../version.ts";

/** Where a run's snapshot goes, how it is written, and what is merged into it. */
export interface SnapshotDelivery {
  /** The output: stdout, a file, or the user's ConfigMap (which the agent writes). */
  target: SnapshotTarget;
  /** The output as the user named it (for messages). */
  output?: string;
  /** The document's format (yaml when a table is rendered). */
  format: SnapshotFormat;
  /** Render the snapshot as a table instead of the document. */
  table: boolean;
  /** The controller-side projections, read, merged before delivery. */
  projections: readonly Subtype[];
  /** `--redact`: applied here, on this side, so the key never enters the cluster. */
  redactor?: Redactor;
}

/** What delivery needs. */
export interface DeliverDeps {
  /** The caller's client (the `cm://` rewrite). */
  kube: KubeClient;
  /** Logger. */
  log: Logger;
  /** Standard output. */
  stdout: TextWriter;
  /** Clock. */
  now: () => Date;
}

/**
 * Delivers a run's snapshot: merged, checked, encoded and written where the run was told.
 *
 * @param deps client, logger, stdout, clock
 * @param options the delivery, the run's ID (the fallback file's name) and its signal
 * @param snapshot the snapshot read from the agent's ConfigMap
 * @returns the bytes delivered
 * @throws {InterruptedError} when the run was interrupted (nothing is delivered)
 * @throws the output's error, once the snapshot is kept elsewhere
 */
export async function deliverRunSnapshot(
  deps: DeliverDeps,
  options: { delivery: SnapshotDelivery; runId: string; signal?: AbortSignal },
  snapshot: Snapshot,
): Promise<{ bytes: number }> {
  const { log } = deps;
  const { delivery, signal } = options;
  const { target, format, projections } = delivery;
  const projected = mergeProjections(snapshot, [...projections]);
  const merged = delivery.redactor ? redactSnapshot(projected, delivery.redactor) : projected;
  if (signal?.aborted) {
    // An interrupted run delivers nothing (no partial file); cleanup still runs.
    throw new InterruptedError(
      `Cannot deliver the snapshot: interrupted (${String(signal.reason)})`,
    );
  }
  warnPlacementMismatch(merged, log);
  const version = buildInfo().version;
  const encoded = delivery.table ? formatSnapshotTable(merged) : encodeSnapshot(merged, format);
  const bytes = new TextEncoder().encode(encoded).length;
  const call = signal ? { signal } : {};
  if (target.kind === "configmap") {
    // The agent wrote its document (in the format) itself; only projections need a rewrite.
    // So does a redacted one: the agent's own, unredacted, is replaced before anyone reads it.
    if (projections.length > 0 || delivery.redactor) {
      await writeProjectedConfigMap(deps, {
        ref: target.ref,
        snapshot: merged,
        encoded,
        format,
        version,
        projections,
        ...call,
      });
    }
    log.info("snapshot saved to ConfigMap", { uri: delivery.output });
    return { bytes };
  }
  const where = await deliverSnapshot({ stdout: deps.stdout, now: deps.now }, {
    target,
    encoded,
    format,
    snapshot: merged,
    version,
    ...call,
  }).catch(async (error) => {
    // The snapshot is taken: it is not lost with the output that failed (an interrupted run
    // delivers nothing).
    if (target.kind === "file" && !(error instanceof InterruptedError)) {
      await keepSnapshot(deps, { runId: options.runId, encoded, format, error });
    }
    throw error;
  });
  if (target.kind === "file") log.info("snapshot saved to file", { path: where });
  return { bytes };
}

/**
 * Keeps a taken snapshot whose output failed: a file in the temporary folder named after the run
 * (`aicr-snapshot-<runID>.<format>`), else stdout, and says where with a WARN.
 */
async function keepSnapshot(
  deps: Pick<DeliverDeps, "log" | "stdout">,
  kept: { runId: string; encoded: string; format: string; error: unknown },
): Promise<void> {
  const reason = kept.error instanceof Error ? kept.error.message : String(kept.error);
  const fallback = join(tmpdir(), `aicr-snapshot-${kept.runId}.${kept.format}`);
  try {
    await writeFileAtomic(fallback, kept.encoded);
    deps.log.warn("the output could not be written; the snapshot was saved here instead", {
      path: fallback,
      error: reason,
    });
  } catch {
    deps.stdout.write(kept.encoded.endsWith("\n") ? kept.encoded : kept.encoded + "\n");
    deps.log.warn("the output could not be written; the snapshot was written to stdout instead", {
      error: reason,
    });
  }
}

/**
 * Warns when a snapshot has no GPU data while the cluster has GPU-labelled nodes (the agent
 * probably landed on a CPU node).
 *
 * @param snapshot the snapshot
 * @param log the logger
 */
export function warnPlacementMismatch(snapshot: Snapshot, log: Logger): void {
  if (hasGpu(snapshot)) return;
  const labels = findMeasurement(snapshot, "NodeTopology")?.subtypes.find((s) =>
    s.subtype === "label"
  );
  const gpuLabels = Object.keys(labels?.data ?? {}).some((key) =>
    key.startsWith("nvidia.com/gpu.")
  );
  if (!gpuLabels) return;
  log.warn("snapshot has no GPU data but cluster topology shows GPU-capable nodes", {
    fix1: (option) => `${option("nodeSelector")} nvidia.com/gpu.present=true`,
    fix2: (option) => `${option("requireGpu")} (needs the device plugin)`,
    fix3: (option) => `${option("runtimeClass")} nvidia`,
  });
}

/** What {@link writeProjectedConfigMap} needs. */
export interface ProjectedConfigMapDeps {
  /** The caller's client. */
  kube: KubeClient;
  /** Where the merged document goes when the ConfigMap cannot take it. */
  stdout: TextWriter;
  /** Clock for the ConfigMap's `timestamp`. */
  now: () => Date;
}

/** Options of {@link writeProjectedConfigMap}. */
export interface ProjectedConfigMapOptions {
  /** The user's `cm://` output, which the agent already wrote. */
  ref: ConfigMapRef;
  /** The merged snapshot. */
  snapshot: Snapshot;
  /** It, encoded in `format`. */
  encoded: string;
  /** `--format`. */
  format: SnapshotFormat;
  /** The version label value. */
  version: string;
  /** The projections merged (named in the error). */
  projections: readonly Subtype[];
  /** Cancels the write. */
  signal?: AbortSignal;
}

/**
 * Rewrites the user's `cm://` output with the merged snapshot (the agent wrote it
 * without the projections, which never enter the pod). When that fails the merged
 * document is not lost: it is written to stdout before the error is thrown.
 *
 * @param deps client, stdout and clock
 * @param options where, what and which projections
 * @throws {ToolError} naming the ConfigMap, with the write's exit code (e.g. 4 for a
 *   403) and its error as `cause`
 */
export async function writeProjectedConfigMap(
  deps: ProjectedConfigMapDeps,
  options: ProjectedConfigMapOptions,
): Promise<void> {
  const { encoded, format } = options;
  const uri = formatConfigMapUri(options.ref);
  try {
    assertFitsConfigMap(options.snapshot, encoded, uri);
    await writeSnapshotConfigMap(deps.kube, options.ref, {
      encoded,
      format,
      version: options.version,
      writtenAt: deps.now(),
      ...(options.signal ? { signal: options.signal } : {}),
    });
  } catch (error) {
    deps.stdout.write(encoded.endsWith("\n") ? encoded : encoded + "\n");
    const names = options.projections.map((p) => `K8s.${p.subtype}`).join(", ");
    throw new ToolError(
      `Cannot write the snapshot with its projections to '${uri}': ${
        error instanceof Error ? error.message.split("\n")[0] : String(error)
      }`,
      error instanceof ToolError ? error.code : "internal",
      error instanceof ToolError ? error.httpStatus : 500,
      {
        cause: error,
        details: [
          `the ConfigMap keeps the agent's snapshot without ${names}; the merged snapshot was written to stdout`,
        ],
      },
    );
  }
}
