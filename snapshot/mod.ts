/**
 * The Snapshot model and its codec: the shared language of every aicr role.
 *
 * ```ts
 * import { createSnapshot, encodeSnapshot, parseSnapshot } from "./mod.ts";
 * const snap = createSnapshot([], { timestamp: new Date(0), version: "dev", nodeName: "n1" });
 * const again = parseSnapshot(encodeSnapshot(snap));
 * ```
 *
 * Only what callers outside the folder use is exported here (named); each file's other exports
 * serve its siblings and its tests.
 *
 * @module
 */
export {
  BASELINE_COHORT_ANNOTATION,
  BASELINE_COHORT_KEY_LABEL,
  BASELINE_VALUES_ANNOTATION,
  baselineCohortOf,
  baselineConfigMapName,
  baselinePlaceholderName,
  baselineSnapshot,
  checkBaselineCohort,
  cohortMatches,
  driftFromBaseline,
  snapshotCohort,
} from "./baseline.ts";
export type { BaselineCohort } from "./baseline.ts";
export { BASELINE_SIGNATURE_KEY, signBaseline, verifyBaseline } from "./baseline_signature.ts";
export type { BaselineObject, BaselineTrust } from "./baseline_signature.ts";
export {
  assertFitsConfigMap,
  encodeSnapshot,
  encodeYamlWithLibrary,
  isSnapshotFormat,
  MAX_DOCUMENT_BYTES,
  parseSnapshot,
  parseSnapshotStream,
  plainSnapshotDocument,
} from "./codec.ts";
export type { SnapshotFormat } from "./codec.ts";
export { YamlWriteCaches } from "./yaml_writer.ts";
export { loadFleet, loadSnapshot, readFleet } from "./sources.ts";
export type { FleetSink, SnapshotSourceLoader } from "./sources.ts";
export {
  GPU_MODEL_PATH,
  GROUP_BY_NONE,
  INSTANCE_TYPE_LABELS,
  NODE_POOL_LABELS,
  readPath,
} from "./cohort.ts";
export { DEFAULT_IGNORE_PATTERNS, diffSnapshots } from "./diff.ts";
export type { ChangeKind } from "./diff.ts";
export { renderDiffHtml } from "./diff_html.ts";
export {
  encodeDocument,
  FLEET_FORMATS,
  fleetDocument,
  renderDiff,
  renderFleetTable,
} from "./diff_render.ts";
export { buildFleetReport, createFleetBuilder, FLEET_IDENTITY_IGNORE_PATTERNS } from "./fleet.ts";
export { renderFleetHtml } from "./fleet_html.ts";
export {
  API_VERSION,
  createSnapshot,
  findMeasurement,
  findSubtype,
  FLEET_TOPOLOGY_FILE,
  formatTimestamp,
  hasGpu,
  isClusterTopologyDocument,
  isMeasurementType,
  LEGACY_API_VERSION,
  MEASUREMENT_TYPES,
  NODE_SCOPE_READING,
  normalizeSnapshot,
  resolveNodeName,
  setOwn,
  SOURCE_STATUSES,
  sourceContext,
  TOPOLOGY_SCOPE_METADATA,
} from "./model.ts";
export type {
  Measurement,
  MeasurementType,
  Reading,
  ReadingMap,
  Snapshot,
  SourceStatus,
  Subtype,
} from "./model.ts";
export { parseFleetText } from "./stream.ts";
export { alignColumns, formatSnapshotTable } from "./table.ts";
export {
  formatConfigMapUri,
  parseSnapshotTarget,
  snapshotConfigMapData,
  snapshotFromConfigMapData,
} from "./target.ts";
export type { ConfigMapRef, SnapshotTarget } from "./target.ts";
export { createRedactor, redactSnapshot } from "./redact.ts";
export type { Redactor } from "./redact.ts";
