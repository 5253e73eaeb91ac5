/**
 * The user's `cm://` output rewritten with the projections merged (the agent wrote it without
 * them: they never enter the pod).
 *
 * @module
 */
import { writeSnapshotConfigMap } from "../agent/mod.ts";
import { ToolError } from "../errors.ts";
import type { KubeClient } from "../kube/mod.ts";
import type { TextWriter } from "../log.ts";
import { assertFitsConfigMap, formatConfigMapUri } from "../snapshot/mod.ts";
import type { ConfigMapRef, Snapshot, SnapshotFormat, Subtype } from "../snapshot/mod.ts";

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
