/**
 * What changed on this node and when, answered by the daemon itself: each collection is
 * compared with the one before (volatile readings ignored, as `aicr diff` does by default),
 * and every collection that changed something is kept in a bounded ring, newest last, with
 * the readings that changed. The first collection is the starting point (`initial`).
 *
 * Also the node's facts as one info metric's labels (`aicr_node_info`), read from a snapshot.
 *
 * @module
 */
import {
  DEFAULT_IGNORE_PATTERNS,
  diffSnapshots,
  formatTimestamp,
  readPath,
} from "../snapshot/mod.ts";
import type { ChangeKind, Reading, Snapshot } from "../snapshot/mod.ts";

/** One reading that changed between two collections. */
export interface HistoryChange {
  /** `<Type>.<subtype>.<key>`. */
  path: string;
  /** `added`, `removed` or `modified`. */
  kind: ChangeKind;
  /** The reading before (absent for `added`). */
  before?: Reading;
  /** The reading after (absent for `removed`). */
  after?: Reading;
}

/** One collection that changed something. */
export interface HistoryEntry {
  /** When the collection ended, RFC3339 UTC. */
  at: string;
  /** The same instant in ms since the epoch. */
  atMs: number;
  /** True for the first collection of this daemon (its starting point, no changes). */
  initial: boolean;
  /** Changed readings, sorted by path (at most `maxChangesPerEntry`). */
  changes: HistoryChange[];
  /** Changed readings in all (more than `changes` holds when cut). */
  total: number;
}

/** Options of {@link createSnapshotHistory}. */
export interface HistoryOptions {
  /** Entries kept (the oldest go first). @default 100 */
  capacity?: number;
  /** Changes kept per entry. @default 200 */
  maxChangesPerEntry?: number;
  /** Paths left out of the comparison. @default DEFAULT_IGNORE_PATTERNS */
  ignore?: readonly string[];
}

/** The bounded history of a daemon's own snapshot changes. */
export interface SnapshotHistory {
  /**
   * Compares a collected snapshot with the last one and keeps an entry when something changed.
   *
   * @param snapshot the new snapshot
   * @param atMs when its collection ended
   * @returns the entry kept, or undefined when nothing changed
   */
  record(snapshot: Snapshot, atMs: number): HistoryEntry | undefined;
  /** The entries, oldest first. */
  entries(): HistoryEntry[];
  /** When the snapshot last changed (the first collection counts), or undefined before it. */
  lastChangeMs(): number | undefined;
  /** How many entries were dropped for the bound. */
  dropped(): number;
}

/**
 * Makes a snapshot history.
 *
 * @param options capacity, changes per entry, ignore patterns
 * @returns the history
 */
export function createSnapshotHistory(options: HistoryOptions = {}): SnapshotHistory {
  const { capacity = 100, maxChangesPerEntry = 200, ignore = DEFAULT_IGNORE_PATTERNS } = options;
  const ring: HistoryEntry[] = [];
  let last: Snapshot | undefined;
  let lastChange: number | undefined;
  let droppedCount = 0;
  const keep = (entry: HistoryEntry) => {
    ring.push(entry);
    while (ring.length > capacity) {
      ring.shift();
      droppedCount++;
    }
    lastChange = entry.atMs;
    return entry;
  };
  return {
    record(snapshot, atMs) {
      const previous = last;
      last = snapshot;
      const at = formatTimestamp(new Date(atMs));
      if (!previous) return keep({ at, atMs, initial: true, changes: [], total: 0 });
      const result = diffSnapshots(previous, snapshot, { ignore });
      if (result.summary.total === 0) return undefined;
      const changes = result.changes.slice(0, maxChangesPerEntry).map((c) => {
        const change: HistoryChange = { path: c.path, kind: c.kind };
        if (c.baseline !== undefined) change.before = c.baseline;
        if (c.target !== undefined) change.after = c.target;
        return change;
      });
      return keep({ at, atMs, initial: false, changes, total: result.summary.total });
    },
    entries: () => [...ring],
    lastChangeMs: () => lastChange,
    dropped: () => droppedCount,
  };
}

/**
 * The node's facts for `aicr_node_info`: GPU driver, CUDA, GPU model and count, kernel,
 * OS release, kubelet and container runtime; a fact the snapshot lacks is `""`.
 *
 * @param snapshot the node's snapshot
 * @param node the node name
 * @returns one value per label of `aicr_node_info`
 */
export function nodeInfoLabels(snapshot: Snapshot, node: string): Record<string, string> {
  const text = (...paths: string[]) => {
    for (const path of paths) {
      const value = readPath(snapshot, path);
      if (value !== undefined && value !== null && value !== "") return String(value);
    }
    return "";
  };
  return {
    node,
    driver_version: text("GPU.smi.driver"),
    cuda_version: text("GPU.smi.cuda-version"),
    gpu_model: text("GPU.smi.gpu.model"),
    gpu_count: text("GPU.smi.gpu-count") || "0",
    kernel: text("K8s.node.kernel-version", "OS.sysctl./proc/sys/kernel/osrelease"),
    os_release: text("OS.release.PRETTY_NAME", "K8s.node.os-image"),
    kubelet_version: text("K8s.node.kubelet-version"),
    container_runtime: text("K8s.node.container-runtime-id"),
  };
}
