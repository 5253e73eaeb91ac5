/**
 * The controller side of both modes: what acts on the user's cluster, from typed, already-checked
 * options. Job mode (`deploy.ts`: gate → create → wait → read → deliver → cleanup, `wait.ts`),
 * the sweep after a killed run (`sweep.ts`), and DaemonSet mode (`render.ts`, `install.ts`,
 * `uninstall.ts`, signing the daemons' certificates through `csr/` as the in-cluster signer
 * does; `fleet.ts`: fetch every node's snapshot, `fleet_writer.ts`: write each as it arrives).
 *
 * ```ts ignore
 * const result = await deploySnapshot(deps, options);
 * const fleet = await fetchFleet(deps, { namespace: "aicr-system", output });
 * ```
 *
 * Only what callers outside the folder use is exported here (named); each file's other exports
 * serve its siblings and its tests.
 *
 * @module
 */
export { deploySnapshot } from "./deploy.ts";
export type { AgentJobKnobs } from "./deploy.ts";
export { runCleanup } from "./sweep.ts";
export { runLeftoverListing } from "./leftovers.ts";
export type { LeftoverRun } from "./leftovers.ts";
export { makeDaemonCa, renderDaemonSet } from "./render.ts";
export type { DaemonSetOptions } from "./render.ts";
export { pickSettings } from "./install_settings.ts";
export type { InstallSettings, SettingKind, UpgradeSettings } from "./install_settings.ts";
export { DEFAULT_MAX_ANSWER_BYTES, fetchFleet, FLEET_TRANSPORTS } from "./fleet.ts";
export type { FleetTransport } from "./fleet.ts";
export { resolveFleetOutput, writeFleet } from "./fleet_writer.ts";
export type { FleetOutput } from "./fleet_writer.ts";
export {
  runBaselineDelete,
  runBaselineGet,
  runBaselineList,
  runBaselineSet,
} from "./baseline_run.ts";
export type { BaselineRunDeps, BaselineRunScope } from "./baseline_run.ts";
export { runDiff } from "./diff.ts";
export type { DiffFormat, DiffOptions } from "./diff.ts";
export { createFsSourceLoader, createKubeConfigMapReader } from "./sources.ts";
export { runFleetFetch, runInstall, runUninstall, runUpgrade, writeRender } from "./daemonset.ts";
export { runStatus } from "./status.ts";
export type { ClusterRunDeps, FleetFetchOptions } from "./daemonset.ts";
export { checkReportTargets } from "./reported.ts";
export { renderRolesForServiceAccount } from "./roles.ts";
export { previewSnapshot, runSnapshot } from "./snapshot.ts";
export { renderScheduledSnapshot } from "./schedule.ts";
export type { ScheduledSnapshotOptions } from "./schedule.ts";
export type { SnapshotRunOptions } from "./snapshot.ts";
export { writeProjectedConfigMap } from "./deliver.ts";
