/**
 * Drift against a stored baseline: one reference snapshot per cohort (the nodes that should be
 * alike, `cohort.ts`), which each daemon compares its own snapshot with, so drift is a metric
 * (`aicr_drift_readings{measurement,cohort}`) rather than something seen only when someone runs
 * `aicr diff`.
 *
 * One source of truth with `aicr diff --fleet`: the cohort is the fleet report's default cohort
 * of the node, and readings compare with {@link diffSnapshots} under the fleet's ignore rules
 * (the default volatile readings, the per-node identity readings, and no cluster-scoped
 * NodeTopology), since a baseline usually comes from another node of the cohort.
 *
 * @module
 */
import process from "node:process";
import { UsageError } from "../errors.ts";
import { createCohortReader, INSTANCE_TYPE_LABELS, NODE_POOL_LABELS } from "./cohort.ts";
import { DEFAULT_IGNORE_PATTERNS, diffSnapshots } from "./diff.ts";
import type { Change } from "./diff.ts";
import { FLEET_CLUSTER_SCOPED_TYPES, FLEET_IDENTITY_IGNORE_PATTERNS } from "./fleet.ts";
import { MEASUREMENT_TYPES } from "./model.ts";
import type { MeasurementType, Snapshot } from "./model.ts";

/** A node's cohort, as a baseline is filed under it. */
export interface BaselineCohort {
  /** Display name, as `aicr diff --fleet` shows it (`NVIDIA H100 80GB HBM3 ×8 · p5.48xlarge`). */
  name: string;
  /** 16 hex digits of SHA-256 over the key values: label-safe, the ConfigMap name's suffix. */
  key: string;
  /** The cohort keys' values (`null` when the node has none). */
  values: Record<string, string | null>;
}

/** Readings a baseline comparison leaves out: volatile, per-node identity, cluster-scoped. */
export const BASELINE_IGNORE_PATTERNS: readonly string[] = [
  ...DEFAULT_IGNORE_PATTERNS,
  ...FLEET_IDENTITY_IGNORE_PATTERNS,
  ...FLEET_CLUSTER_SCOPED_TYPES.map((type) => `${type}.*`),
];

/** Measurement types drift is counted for (every type but the cluster-scoped ones). */
export const DRIFT_MEASUREMENT_TYPES: readonly MeasurementType[] = MEASUREMENT_TYPES.filter((t) =>
  !FLEET_CLUSTER_SCOPED_TYPES.includes(t)
);

/**
 * The label-safe key of a cohort: 16 hex digits of SHA-256 over its key values.
 *
 * @param values the cohort keys' values
 * @returns the key
 */
export function cohortKey(values: Record<string, string | null>): string {
  const sorted = Object.keys(values).sort().map((k) => [k, values[k] ?? null]);
  // Loaded on first use: `node:crypto` costs about 8 ms of CPU to load, which every command
  // paid at start (this module is evaluated with the snapshot folder) and few need.
  const { createHash } = process.getBuiltinModule("node:crypto");
  return createHash("sha256").update(JSON.stringify(sorted)).digest("hex").slice(0, 16);
}

/**
 * The default cohort of one node's snapshot: GPU model and count, instance type and node pool
 * when its NodeTopology readings name them, exactly as `aicr diff --fleet` assigns it.
 *
 * @param snapshot the node's snapshot
 * @param node the node name @default the snapshot's `metadata.source-node`
 * @returns the cohort
 */
export function snapshotCohort(snapshot: Snapshot, node?: string): BaselineCohort {
  const reader = createCohortReader([]);
  reader.observe(snapshot);
  const assignment = reader.assign([node ?? snapshot.metadata["source-node"] ?? ""]);
  const name = assignment.cohortOf[0] ?? "";
  const values = assignment.values.get(name) ?? {};
  return { name, key: cohortKey(values), values };
}

/**
 * Whether a cohort is the one a user named, by display name or by key.
 *
 * @param cohort the cohort
 * @param wanted what the user typed (`--cohort`)
 * @returns whether it names this cohort
 */
export function cohortMatches(cohort: BaselineCohort, wanted: string): boolean {
  return wanted === cohort.name || wanted.toLowerCase() === cohort.key;
}

/**
 * The snapshot a baseline stores: the node's readings, with the cluster-scoped NodeTopology
 * (every node's labels; it grows with the cluster and is never compared) cut down to this
 * node's own cohort labels (instance type, node pool), so the stored document fits a ConfigMap
 * at any cluster size and still names its cohort when it is read back (`baseline get`, edited,
 * `baseline set -f`).
 *
 * @param snapshot the node's snapshot
 * @param node the node @default the snapshot's `metadata.source-node`
 * @returns a copy with the trimmed topology
 */
export function baselineSnapshot(snapshot: Snapshot, node?: string): Snapshot {
  const self = node ?? snapshot.metadata["source-node"] ?? "";
  const wanted = new Set([...INSTANCE_TYPE_LABELS, ...NODE_POOL_LABELS]);
  const measurements = snapshot.measurements.flatMap((m) => {
    if (!FLEET_CLUSTER_SCOPED_TYPES.includes(m.type)) return [m];
    const label = m.subtypes.find((s) => s.subtype === "label");
    if (m.type !== "NodeTopology" || !label) return [];
    const data: Record<string, string> = {};
    for (const [key, raw] of Object.entries(label.data)) {
      if (typeof raw !== "string") continue;
      const bar = raw.indexOf("|");
      const value = raw.slice(0, bar);
      const name = wanted.has(key) ? key : key.slice(0, key.length - value.length - 1);
      if (bar < 0 || !wanted.has(name)) continue;
      const nodes = raw.slice(bar + 1).replace(/ \(\+\d+ more\)$/, "").split(",");
      if (nodes.includes(self)) data[key] = `${value}|${self}`;
    }
    return Object.keys(data).length === 0
      ? []
      : [{ type: m.type, subtypes: [{ subtype: "label", data }] }];
  });
  return { ...snapshot, metadata: { ...snapshot.metadata }, measurements };
}

/**
 * Checks that a snapshot may be the baseline of a cohort: when the user named a cohort, the
 * snapshot's own cohort must be it.
 *
 * @param snapshot the candidate baseline (already parsed and validated as a Snapshot)
 * @param wanted the cohort the user named (`--cohort`), by name or key
 * @returns the snapshot's cohort
 * @throws {UsageError} naming both cohorts when they differ
 */
export function checkBaselineCohort(snapshot: Snapshot, wanted?: string): BaselineCohort {
  const cohort = snapshotCohort(snapshot);
  if (wanted !== undefined && !cohortMatches(cohort, wanted)) {
    throw new UsageError(
      `Cannot use the snapshot of node '${
        snapshot.metadata["source-node"] || "(unnamed)"
      }' as the baseline of cohort '${wanted}': it belongs to cohort '${cohort.name}' (key ${cohort.key})`,
      {
        details: [
          "  a baseline is compared only with nodes of its own cohort (GPU model and count, instance type, node pool)",
          (option) =>
            `  take it from a node of that cohort (${option("fromNode")}), or leave out ${
              option("cohort")
            } to file it under its own`,
        ],
      },
    );
  }
  return cohort;
}

/** A node's drift from its cohort's baseline. */
export interface BaselineDrift {
  /** Differing readings per measurement type (every type of {@link DRIFT_MEASUREMENT_TYPES}). */
  byMeasurement: Record<string, number>;
  /** Every differing reading, sorted by path. */
  changes: Change[];
}

/**
 * Compares a node's snapshot with its cohort's baseline, with the fleet's ignore rules.
 *
 * @param baseline the cohort's baseline
 * @param current the node's snapshot
 * @param ignore paths left out @default BASELINE_IGNORE_PATTERNS
 * @returns the count per measurement type and the changes
 */
export function driftFromBaseline(
  baseline: Snapshot,
  current: Snapshot,
  ignore: readonly string[] = BASELINE_IGNORE_PATTERNS,
): BaselineDrift {
  const result = diffSnapshots(baseline, current, { ignore });
  const byMeasurement: Record<string, number> = Object.fromEntries(
    DRIFT_MEASUREMENT_TYPES.map((t) => [t, 0]),
  );
  for (const change of result.changes) {
    const type = change.path.slice(0, change.path.indexOf("."));
    byMeasurement[type] = (byMeasurement[type] ?? 0) + 1;
  }
  return { byMeasurement, changes: result.changes };
}

/** Annotation holding the cohort's display name on a baseline ConfigMap. */
export const BASELINE_COHORT_ANNOTATION = "aicr.run/cohort";
/** Annotation holding the cohort keys' values (JSON) on a baseline ConfigMap. */
export const BASELINE_VALUES_ANNOTATION = "aicr.run/cohort-values";
/** Annotation saying where a baseline came from (`node <name>`, `file <path>`). */
export const BASELINE_SOURCE_ANNOTATION = "aicr.run/baseline-source";
/** Label holding the cohort's key on a baseline ConfigMap (label-safe, selectable). */
export const BASELINE_COHORT_KEY_LABEL = "aicr.run/cohort-key";

const BASELINE_NAME_INFIX = "-baseline-";

/**
 * The ConfigMap a cohort's baseline lives in: `<daemon>-baseline-<key>`, the daemon's name cut
 * so the whole stays a 63-character DNS label.
 *
 * @param daemonName the daemon's name (its instance)
 * @param key the cohort's key ({@link cohortKey})
 * @returns the ConfigMap name
 */
export function baselineConfigMapName(daemonName: string, key: string): string {
  const room = 63 - BASELINE_NAME_INFIX.length - key.length;
  return `${daemonName.slice(0, room).replace(/-+$/, "")}${BASELINE_NAME_INFIX}${key}`;
}

/**
 * The name the daemon's Role always lists among its baseline ConfigMaps, which no baseline has
 * (its key is not hex): `resourceNames` must never be empty, since empty means every name.
 *
 * @param daemonName the daemon's name
 * @returns the placeholder name
 */
export function baselinePlaceholderName(daemonName: string): string {
  return baselineConfigMapName(daemonName, "none");
}

/**
 * Reads the cohort a baseline ConfigMap says it holds, from its annotations and label.
 *
 * @param metadata the ConfigMap's labels and annotations
 * @returns the cohort, or undefined when the annotations are missing or unreadable
 */
export function baselineCohortOf(
  metadata: { labels?: Record<string, string>; annotations?: Record<string, string> },
): BaselineCohort | undefined {
  const name = metadata.annotations?.[BASELINE_COHORT_ANNOTATION];
  const key = metadata.labels?.[BASELINE_COHORT_KEY_LABEL];
  const raw = metadata.annotations?.[BASELINE_VALUES_ANNOTATION];
  if (name === undefined || key === undefined || raw === undefined) return undefined;
  try {
    const values = JSON.parse(raw) as unknown;
    if (typeof values !== "object" || values === null || Array.isArray(values)) return undefined;
    return { name, key, values: values as Record<string, string | null> };
  } catch {
    return undefined;
  }
}
