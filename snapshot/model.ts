/**
 * The Snapshot model: what one node runs, as measurements of typed readings.
 *
 * @module
 */

/** The apiVersion aicr writes. */
export const API_VERSION = "aicr.run/v1";
/** The apiVersion upstream v0.x wrote; readers still accept it. */
export const LEGACY_API_VERSION = "aicr.nvidia.com/v1alpha1";
/** Every apiVersion a reader accepts. */
export const ACCEPTED_API_VERSIONS: readonly string[] = [API_VERSION, LEGACY_API_VERSION];
/** The kind of a snapshot document. */
export const SNAPSHOT_KIND = "Snapshot";

/** The closed set of measurement types, in the order they are written. */
export const MEASUREMENT_TYPES = ["K8s", "GPU", "OS", "SystemD", "NodeTopology"] as const;

/** One measurement type. */
export type MeasurementType = typeof MEASUREMENT_TYPES[number];

/**
 * A reading: a bare scalar. Integers beyond 2^53 are kept exact as `bigint`
 * (systemd's `uint64` properties such as `MemoryMax: 18446744073709551615`).
 */
export type Reading = string | number | boolean | bigint | null;

/** Readings of one subtype, by key. */
export type ReadingMap = Record<string, Reading>;

/**
 * Whether a subtype's source could be asked. Carried in `context.status`, so
 * "no GPU" (`absent`) is never confused with "could not ask" (`denied`, `failed`).
 */
export const SOURCE_STATUSES = ["ok", "absent", "denied", "failed", "timeout"] as const;

/** One source status. */
export type SourceStatus = typeof SOURCE_STATUSES[number];

/** One subtype: readings plus context (string map). */
export interface Subtype {
  /** Subtype name, e.g. `smi`, `sysctl`, `containerd.service`. */
  subtype: string;
  /** The readings. Always present, possibly empty. */
  data: ReadingMap;
  /** Context such as status and source. Omitted when empty. */
  context?: Record<string, string>;
}

/** One measurement: a type and its subtypes. */
export interface Measurement {
  /** The measurement type. */
  type: MeasurementType;
  /** Subtypes in collector order; omitted on output when empty. */
  subtypes: Subtype[];
}

/** Snapshot metadata keys. */
export interface SnapshotMetadata {
  /** RFC3339 UTC timestamp, seconds precision, taken when collection starts. */
  timestamp: string;
  /** Version of the binary that collected. */
  version: string;
  /** Node name (NODE_NAME → KUBERNETES_NODE_NAME → HOSTNAME), possibly empty. */
  "source-node": string;
  /** Further metadata keys read from other writers. */
  [key: string]: string;
}

/**
 * The metadata key saying what a document's NodeTopology covers: `node` in a daemon's snapshot
 * (its own Node alone), `cluster` in the fleet fetch's topology document (every node, listed
 * once per fetch). Absent: the cluster, as the Job's agent and upstream collect it.
 */
export const TOPOLOGY_SCOPE_METADATA = "topology-scope";

/** The NodeTopology `summary` reading that says `node` in a daemon's own-node topology. */
export const NODE_SCOPE_READING = "scope";

/**
 * Where `aicr daemonset fetch -o dir/` writes the cluster's NodeTopology, beside the
 * `<node>.yaml` files: no node can have this name (`_` is not allowed in a node name), and
 * `aicr diff --fleet` skips it by name.
 */
export const FLEET_TOPOLOGY_FILE = "_cluster-topology.yaml";

/**
 * Whether a document is the fleet fetch's cluster topology (`topology-scope: cluster`), not a
 * node's snapshot: `aicr diff --fleet` skips it in a stream.
 *
 * @param snapshot a parsed document
 * @returns whether it is the topology document
 */
export function isClusterTopologyDocument(snapshot: Snapshot): boolean {
  return snapshot.metadata[TOPOLOGY_SCOPE_METADATA] === "cluster";
}

/** A snapshot document. */
export interface Snapshot {
  /** Always {@link SNAPSHOT_KIND}. */
  kind: typeof SNAPSHOT_KIND;
  /** {@link API_VERSION} when written by aicr; the legacy one is accepted on read. */
  apiVersion: string;
  /** Metadata. */
  metadata: SnapshotMetadata;
  /** Measurements, in {@link MEASUREMENT_TYPES} order after normalisation. */
  measurements: Measurement[];
}

/**
 * Checks that a string is a measurement type.
 *
 * @param value any string
 * @returns whether it is one of {@link MEASUREMENT_TYPES}
 */
export function isMeasurementType(value: unknown): value is MeasurementType {
  return typeof value === "string" && (MEASUREMENT_TYPES as readonly string[]).includes(value);
}

/**
 * Formats a date as RFC3339 UTC with seconds precision (`2026-03-21T10:30:00Z`).
 *
 * @param date the instant
 * @returns the timestamp string
 */
export function formatTimestamp(date: Date): string {
  // From the UTC fields rather than `toISOString()`, whose first call in a process has V8 look up
  // the host's time zone (reading /etc/localtime through ICU, 0.2-0.3 ms of the agent's start),
  // which a UTC timestamp never needs.
  const year = date.getUTCFullYear();
  // An invalid date (toISOString throws its RangeError) or a year outside 0-9999 (its +/- form).
  if (!(year >= 0 && year <= 9999)) return date.toISOString().replace(/\.\d{3}Z$/, "Z");
  const two = (n: number) => (n < 10 ? `0${n}` : `${n}`);
  const day = `${String(year).padStart(4, "0")}-${two(date.getUTCMonth() + 1)}-${
    two(date.getUTCDate())
  }`;
  return `${day}T${two(date.getUTCHours())}:${two(date.getUTCMinutes())}:${
    two(date.getUTCSeconds())
  }Z`;
}

/**
 * Resolves the node name as upstream does: `NODE_NAME`, then `KUBERNETES_NODE_NAME`,
 * then `HOSTNAME`, else the empty string.
 *
 * @param env environment lookup
 * @returns the node name, possibly empty
 */
export function resolveNodeName(env: (name: string) => string | undefined): string {
  for (const name of ["NODE_NAME", "KUBERNETES_NODE_NAME", "HOSTNAME"]) {
    const value = env(name);
    if (value) return value;
  }
  return "";
}

/** Options for {@link createSnapshot}. */
export interface CreateSnapshotOptions {
  /** Collection start. */
  timestamp: Date;
  /** Version of this binary. */
  version: string;
  /** Node name. */
  nodeName: string;
}

/**
 * Builds a normalised snapshot from measurements.
 *
 * @param measurements measurements in any order
 * @param options metadata values
 * @returns a snapshot with measurements in canonical order and sorted keys
 */
export function createSnapshot(
  measurements: readonly Measurement[],
  options: CreateSnapshotOptions,
): Snapshot {
  return normalizeSnapshot({
    kind: SNAPSHOT_KIND,
    apiVersion: API_VERSION,
    metadata: {
      "source-node": options.nodeName,
      timestamp: formatTimestamp(options.timestamp),
      version: options.version,
    },
    measurements: [...measurements],
  });
}

/**
 * Returns a copy with measurements in {@link MEASUREMENT_TYPES} order (stable for equal
 * types), and data, context and metadata keys sorted, so equal content encodes equally.
 *
 * @param snapshot any snapshot
 * @returns the normalised copy
 */
export function normalizeSnapshot(snapshot: Snapshot): Snapshot {
  const order = (type: MeasurementType) => MEASUREMENT_TYPES.indexOf(type);
  const measurements = snapshot.measurements
    .map((m, index) => ({ m, index }))
    .sort((a, b) => order(a.m.type) - order(b.m.type) || a.index - b.index)
    .map(({ m }) => ({
      type: m.type,
      subtypes: m.subtypes.map((s) => {
        const out: Subtype = { subtype: s.subtype, data: sortKeys(s.data) };
        if (s.context && Object.keys(s.context).length > 0) out.context = sortKeys(s.context);
        return out;
      }),
    }));
  return {
    kind: SNAPSHOT_KIND,
    apiVersion: snapshot.apiVersion,
    metadata: sortKeys(snapshot.metadata) as SnapshotMetadata,
    measurements,
  };
}

/**
 * Whether a snapshot already is what {@link normalizeSnapshot} makes of it: its kind, its
 * measurements in order, every record's keys in order and no empty context. Encoding such a
 * snapshot (the agent's, made by {@link createSnapshot}) needs no normalised copy.
 *
 * @param snapshot any snapshot
 * @returns true when normalising it would change nothing the encoders read
 */
export function isNormalized(snapshot: Snapshot): boolean {
  if (snapshot.kind !== SNAPSHOT_KIND || !keysInOrder(snapshot.metadata)) return false;
  let previous = -1;
  for (const m of snapshot.measurements) {
    const order = MEASUREMENT_TYPES.indexOf(m.type);
    if (order < previous) return false;
    previous = order;
    for (const s of m.subtypes) {
      if (!keysInOrder(s.data)) return false;
      if (s.context !== undefined) {
        if (!s.context || Object.keys(s.context).length === 0 || !keysInOrder(s.context)) {
          return false;
        }
      }
    }
  }
  return true;
}

/**
 * Whether a record's keys come as sortKeys leaves them: array-index keys (`0`, `5002`) come first
 * in any record, in numeric order, whatever order they were set in; the others in
 * {@link compareKeys} order.
 */
function keysInOrder(record: object): boolean {
  const keys = Object.keys(record);
  let first = 0;
  while (first < keys.length && isArrayIndex(keys[first] as string)) first++;
  for (let i = first + 1; i < keys.length; i++) {
    if (!((keys[i - 1] as string) < (keys[i] as string))) return false;
  }
  return true;
}

function isArrayIndex(key: string): boolean {
  return /^(?:0|[1-9][0-9]*)$/.test(key) && Number(key) < 4294967295;
}

/**
 * Byte-order key comparison (Go's sort order for the ASCII keys snapshots use).
 *
 * @param a first key
 * @param b second key
 * @returns negative, zero or positive
 */
export function compareKeys(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

function sortKeys<T>(record: Record<string, T>): Record<string, T> {
  const out: Record<string, T> = {};
  // The default order of `sort()` is `compareKeys`' (UTF-16 code units), without a callback.
  // Indexed: see `child()` in collectors/xml.ts.
  const keys = Object.keys(record).sort();
  for (let i = 0; i < keys.length; i++) {
    const key = keys[i] as string;
    setOwn(out, key, record[key] as T);
  }
  return out;
}

/**
 * Sets a key as an own, enumerable property, whatever its name. A plain assignment of
 * `__proto__` calls Node's prototype setter instead (the key silently vanishes, so a
 * reading named `__proto__` would never be compared); Deno has no such setter, so both
 * runtimes give the same record.
 *
 * @param record the record to write
 * @param key any key, `__proto__` included
 * @param value the value
 */
export function setOwn<T>(record: Record<string, T>, key: string, value: NoInfer<T>): void {
  if (key === "__proto__") {
    Object.defineProperty(record, key, {
      value,
      enumerable: true,
      writable: true,
      configurable: true,
    });
  } else {
    record[key] = value;
  }
}

/**
 * Finds a measurement by type.
 *
 * @param snapshot the snapshot
 * @param type the measurement type
 * @returns the first measurement of that type, if any
 */
export function findMeasurement(
  snapshot: Snapshot,
  type: MeasurementType,
): Measurement | undefined {
  return snapshot.measurements.find((m) => m.type === type);
}

/**
 * Finds a subtype of a measurement.
 *
 * @param snapshot the snapshot
 * @param type the measurement type
 * @param subtype the subtype name
 * @returns the subtype, if present
 */
export function findSubtype(
  snapshot: Snapshot,
  type: MeasurementType,
  subtype: string,
): Subtype | undefined {
  return findMeasurement(snapshot, type)?.subtypes.find((s) => s.subtype === subtype);
}

/**
 * Builds the context map for a subtype.
 *
 * @param status the source status
 * @param source where the data came from
 * @param message why the status is not ok
 * @returns the context record
 */
export function sourceContext(
  status: SourceStatus,
  source: string,
  message?: string,
): Record<string, string> {
  const context: Record<string, string> = { status, source };
  if (message) context.message = message;
  return context;
}

/**
 * Whether a snapshot found at least one GPU (`gpu-count` > 0 in a GPU subtype).
 *
 * @param snapshot the snapshot
 * @returns true when a GPU was seen
 */
export function hasGpu(snapshot: Snapshot): boolean {
  const gpu = findMeasurement(snapshot, "GPU");
  return gpu?.subtypes.some((s) => {
    const count = s.data["gpu-count"];
    return typeof count === "number" && count > 0;
  }) ?? false;
}
