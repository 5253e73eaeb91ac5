/**
 * Delivering a snapshot: stdout, a file written atomically (a failed run never leaves
 * an empty or partial file), or a ConfigMap by server-side apply.
 *
 * @module
 */
import { ToolError } from "../errors.ts";
import { writeFileAtomic } from "../io.ts";
import type { KubeClient } from "../kube/mod.ts";
import type { TextWriter } from "../log.ts";
import { snapshotConfigMapLabels } from "../manifests/mod.ts";
import { assertFitsConfigMap, formatConfigMapUri, snapshotConfigMapData } from "../snapshot/mod.ts";
import { writeSnapshotSeries } from "./series.ts";
import type { ConfigMapRef, Snapshot, SnapshotFormat, SnapshotTarget } from "../snapshot/mod.ts";

/** What delivery needs. */
export interface SinkDeps {
  /** Standard output. */
  stdout: TextWriter;
  /** The Kubernetes client, needed only for ConfigMap targets. */
  kube?: () => KubeClient;
  /** Clock for the ConfigMap timestamp. */
  now: () => Date;
}

/** Options for {@link deliverSnapshot}. */
export interface DeliverOptions {
  /** Where to. */
  target: SnapshotTarget;
  /** The encoded snapshot. */
  encoded: string;
  /** Its format. */
  format: SnapshotFormat;
  /** The snapshot itself (for the size report). */
  snapshot: Snapshot;
  /** The version label value on a ConfigMap. */
  version: string;
  /** Cancels a ConfigMap write, and a file write into a pipe no one reads. */
  signal?: AbortSignal;
  /**
   * The UID of the ConfigMap target when the controller created it (the staging ConfigMap,
   * `AICR_CONFIGMAP_UID`): the write goes into that object only, never creating one.
   */
  configMapUid?: string;
  /**
   * A `cm://` target names a series (scheduled snapshots): the snapshot goes into a new
   * ConfigMap `<name>-<time>` and the series keeps its newest `keepLast` (`series.ts`).
   */
  keepLast?: number;
}

/**
 * Delivers an encoded snapshot to its target.
 *
 * @param deps streams, client and clock
 * @param options the target and content
 * @returns a one-line description of where it went
 * @throws {UsageError} when it is too large for a ConfigMap
 * @throws {KubeApiError} when the ConfigMap write fails
 */
export async function deliverSnapshot(deps: SinkDeps, options: DeliverOptions): Promise<string> {
  const { target, encoded, format } = options;
  switch (target.kind) {
    case "stdout":
      deps.stdout.write(encoded.endsWith("\n") ? encoded : encoded + "\n");
      return "stdout";
    case "file":
      await writeFileAtomic(
        target.path,
        encoded.endsWith("\n") ? encoded : encoded + "\n",
        0o644,
        options.signal ? { signal: options.signal } : {},
      );
      return target.path;
    case "configmap": {
      const uri = formatConfigMapUri(target.ref);
      assertFitsConfigMap(options.snapshot, encoded, uri);
      if (!deps.kube) {
        throw new ToolError(`Cannot write snapshot to '${uri}': no Kubernetes client`, "internal");
      }
      if (options.keepLast !== undefined) {
        const written = await writeSnapshotSeries(deps.kube(), {
          series: target.ref,
          keepLast: options.keepLast,
          encoded,
          format,
          version: options.version,
          at: deps.now(),
          ...(options.signal ? { signal: options.signal } : {}),
        });
        return written.uri;
      }
      await writeSnapshotConfigMap(deps.kube(), target.ref, {
        encoded,
        format,
        version: options.version,
        writtenAt: deps.now(),
        ...(options.signal ? { signal: options.signal } : {}),
        ...(options.configMapUid ? { uid: options.configMapUid } : {}),
      });
      return uri;
    }
  }
}

/**
 * Writes a snapshot ConfigMap: server-side applied (create or update in one call), or,
 * with `uid`, an update of exactly that object (the staging ConfigMap the controller
 * created), which refuses a missing or replaced object instead of creating one.
 *
 * @param kube the client
 * @param ref where
 * @param content the encoded snapshot, format, agent version, write time and pinned UID
 * @returns the written object
 * @throws {NotFoundError} / {ConflictError} when the pinned object is gone or replaced
 */
export async function writeSnapshotConfigMap(
  kube: KubeClient,
  ref: ConfigMapRef,
  content: {
    encoded: string;
    format: SnapshotFormat;
    version: string;
    writtenAt: Date;
    signal?: AbortSignal;
    uid?: string;
  },
): Promise<unknown> {
  const body = {
    labels: snapshotConfigMapLabels(content.version),
    data: snapshotConfigMapData(content.encoded, content.format, content.writtenAt),
  };
  const call = { timeoutMs: 30_000, ...(content.signal ? { signal: content.signal } : {}) };
  if (content.uid !== undefined) {
    return await kube.updateConfigMapIfUid(ref.namespace, ref.name, content.uid, body, call);
  }
  return await kube.applyConfigMap(ref.namespace, ref.name, body, call);
}
