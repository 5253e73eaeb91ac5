/**
 * A series of snapshots in ConfigMaps (scheduled snapshots): each run creates
 * `<series>-<UTC yyyymmdd-hhmmss>` labelled `aicr.run/series=<series>`, then deletes the oldest of
 * the series beyond the newest `keepLast`, each delete pinned to the UID it listed. It never
 * updates a ConfigMap, and never deletes the one it just wrote or one without the series' labels.
 *
 * @module
 */
import type { KubeClient, KubeObject } from "../kube/mod.ts";
import {
  formatLabelSelector,
  LABEL_NAME,
  SERIES_LABEL,
  seriesConfigMapLabels,
  seriesConfigMapName,
} from "../manifests/mod.ts";
import { formatConfigMapUri, snapshotConfigMapData } from "../snapshot/mod.ts";
import type { ConfigMapRef, SnapshotFormat } from "../snapshot/mod.ts";

/** What {@link writeSnapshotSeries} writes. */
export interface SeriesWrite {
  /** The series: the namespace, and its name (`cm://<ns>/<series>`). */
  series: ConfigMapRef;
  /** How many of the series to keep, this one included (at least 1). */
  keepLast: number;
  /** The encoded snapshot. */
  encoded: string;
  /** Its format. */
  format: SnapshotFormat;
  /** The agent's version (a label). */
  version: string;
  /** The run's time: the name's stamp and the ConfigMap's timestamp. */
  at: Date;
  /** Cancels the calls. */
  signal?: AbortSignal;
}

/** What a series write did. */
export interface SeriesResult {
  /** `cm://<ns>/<series>-<stamp>`, the ConfigMap written. */
  uri: string;
  /** The ConfigMaps deleted, oldest first. */
  pruned: string[];
}

/**
 * Writes one snapshot of a series and prunes the series.
 *
 * @param kube the client
 * @param write the series, the document and how many to keep
 * @returns the ConfigMap written and those pruned
 * @throws {KubeApiError} when the create, the list or a delete fails (a name taken: conflict)
 */
export async function writeSnapshotSeries(
  kube: KubeClient,
  write: SeriesWrite,
): Promise<SeriesResult> {
  const { namespace } = write.series;
  const call = { timeoutMs: 30_000, ...(write.signal ? { signal: write.signal } : {}) };
  const name = seriesConfigMapName(write.series.name, write.at);
  const labels = seriesConfigMapLabels(write.series.name, write.version);
  const created = await kube.create("ConfigMap", {
    apiVersion: "v1",
    kind: "ConfigMap",
    metadata: { name, namespace, labels },
    data: snapshotConfigMapData(write.encoded, write.format, write.at),
  } as KubeObject, call);
  if (!created.metadata?.uid) {
    throw new Error(`Cannot prune the series: the create of '${name}' returned no UID`);
  }
  const members = await kube.listAll("ConfigMap", namespace, {
    ...call,
    labelSelector: formatLabelSelector({
      [LABEL_NAME]: labels[LABEL_NAME]!,
      [SERIES_LABEL]: write.series.name,
    }),
  });
  const pruned: string[] = [];
  for (const old of olderThanKept(members, Math.max(1, write.keepLast), name)) {
    const oldName = old.metadata?.name ?? "";
    const result = await kube.deleteIfUid(
      "ConfigMap",
      namespace,
      oldName,
      old.metadata?.uid ?? "",
      call,
    );
    if (result === "deleted") pruned.push(oldName);
  }
  return { uri: formatConfigMapUri({ namespace, name }), pruned };
}

/**
 * The members beyond the newest `keep` (by creation time, then name), never the one just written.
 *
 * @param members the series' ConfigMaps as listed
 * @param keep how many to keep
 * @param own the name of the one just written
 * @returns the ones to delete, oldest first
 */
export function olderThanKept(
  members: readonly KubeObject[],
  keep: number,
  own: string,
): KubeObject[] {
  const key = (o: KubeObject) => `${o.metadata?.creationTimestamp ?? ""} ${o.metadata?.name ?? ""}`;
  const newestFirst = [...members].sort((a, b) => key(b).localeCompare(key(a)));
  const others = newestFirst.filter((o) => o.metadata?.name !== own);
  return others.slice(Math.max(0, keep - 1)).reverse();
}
