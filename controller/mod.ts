/**
 * The controller side of both modes: what acts on the user's cluster, from typed, already-checked
 * options. Job mode (`deploy.ts`: gate → create → wait → read → deliver → cleanup, `wait.ts`),
 * the sweep after a killed run (`sweep.ts`), and DaemonSet mode (`install.ts`: install,
 * uninstall and render; `signer.ts`: the daemons' certificates; `fleet.ts`: fetch every
 * node's snapshot, `fleet_writer.ts`: write each as it arrives).
 *
 * ```ts ignore
 * const result = await deploySnapshot(deps, options);
 * const fleet = await fetchFleet(deps, { namespace: "aicr-system", output });
 * ```
 *
 * @module
 */
export * from "./deploy.ts";
export * from "./wait.ts";
export * from "./sweep.ts";
export { installDaemonSet, makeDaemonCa, renderDaemonSet, uninstallDaemonSet } from "./install.ts";
export type {
  DaemonSetOptions,
  InstallDeps,
  InstallOptions,
  InstallResult,
  RenderedDaemonSet,
  RenderOptions,
  UninstallOptions,
  UninstallResult,
} from "./install.ts";
export {
  AnswerTooLargeError,
  DEFAULT_MAX_ANSWER_BYTES,
  fetchFleet,
  FLEET_TRANSPORTS,
  fleetError,
  formatFleetTable,
} from "./fleet.ts";
export { createFleetWriter, DEFAULT_REORDER_BYTES, writeFleet } from "./fleet_writer.ts";
export type { FleetOutput, FleetWriter, FleetWriterOptions } from "./fleet_writer.ts";
export type {
  FleetDeps,
  FleetOptions,
  FleetResult,
  FleetTransport,
  NodeResult,
  NodeStatus,
} from "./fleet.ts";
export * from "./report.ts";
export { DaemonImagePullError } from "./install.ts";
export {
  baselineSetChecks,
  deleteBaselines,
  FOREIGN_BASELINE_WARNING,
  formatBaselineTable,
  getBaseline,
  listBaselines,
  setBaseline,
} from "./baseline.ts";
export type { BaselineDeps, BaselineRecord, SetBaselineOptions } from "./baseline.ts";
