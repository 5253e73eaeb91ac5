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
  /** Cancels a ConfigMap write. */
  signal?: AbortSignal;
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
      await writeFileAtomic(target.path, encoded.endsWith("\n") ? encoded : encoded + "\n");
      return target.path;
    case "configmap": {
      const uri = formatConfigMapUri(target.ref);
      assertFitsConfigMap(options.snapshot, encoded, uri);
      if (!deps.kube) {
        throw new ToolError(`Cannot write snapshot to '${uri}': no Kubernetes client`, "internal");
      }
      await writeSnapshotConfigMap(deps.kube(), target.ref, {
        encoded,
        format,
        version: options.version,
        writtenAt: deps.now(),
        ...(options.signal ? { signal: options.signal } : {}),
      });
      return uri;
    }
  }
}

/**
 * Server-side applies a snapshot ConfigMap (create or update in one call).
 *
 * @param kube the client
 * @param ref where
 * @param content the encoded snapshot, format, agent version and write time
 * @returns the applied object
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
  },
): Promise<unknown> {
  return await kube.applyConfigMap(ref.namespace, ref.name, {
    labels: snapshotConfigMapLabels(content.version),
    data: snapshotConfigMapData(content.encoded, content.format, content.writtenAt),
  }, { timeoutMs: 30_000, ...(content.signal ? { signal: content.signal } : {}) });
}
