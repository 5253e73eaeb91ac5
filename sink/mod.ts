/**
 * Where a snapshot goes, for both sides of Job mode: stdout, a file written atomically, or a
 * ConfigMap (server-side applied, or updated by UID when the controller created it). The agent
 * delivers what it collected; the controller delivers what it read back from the agent's
 * ConfigMap.
 *
 * ```ts ignore
 * const where = await deliverSnapshot({ stdout, now }, { target, encoded, format, snapshot, version });
 * ```
 *
 * @module
 */
export { deliverSnapshot, writeSnapshotConfigMap } from "./deliver.ts";
export type { SinkDeps } from "./deliver.ts";
