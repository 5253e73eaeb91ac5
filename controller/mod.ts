/**
 * The controller side of both modes: what acts on the user's cluster, from typed, already-checked
 * options. Job mode (`deploy.ts`: gate → create → wait → read → deliver → cleanup, `wait.ts`),
 * the sweep after a killed run (`sweep.ts`), and DaemonSet mode (`install.ts`: install,
 * uninstall and render with the daemon's certificate from `_x509.ts`; `fleet.ts`: fetch every
 * node's snapshot).
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
export {
  daemonPods,
  installCallerChecks,
  installDaemonSet,
  makeDaemonTls,
  renderDaemonSet,
  uninstallCallerChecks,
  uninstallDaemonSet,
} from "./install.ts";
export type {
  DaemonPlacement,
  DaemonPodState,
  DaemonSetOptions,
  InstallDeps,
  InstallOptions,
  InstallResult,
  RenderedDaemonSet,
  RenderedObject,
  RenderOptions,
  UninstallOptions,
  UninstallResult,
} from "./install.ts";
export {
  fetchFleet,
  FLEET_TRANSPORTS,
  fleetError,
  fleetStream,
  formatFleetTable,
  mintReaderToken,
  nodeDirectGet,
  readDaemonCa,
  writeFleet,
} from "./fleet.ts";
export type {
  DirectGet,
  DirectRequest,
  FleetDeps,
  FleetOptions,
  FleetOutput,
  FleetResult,
  FleetTransport,
  HttpAnswer,
  NodeResult,
  NodeStatus,
} from "./fleet.ts";
export * from "./report.ts";
export { DaemonImagePullError } from "./install.ts";
