/**
 * The node collectors: GPU (nvidia-smi), OS (/proc, os-release), SystemD (D-Bus), K8s
 * and NodeTopology (Kubernetes API), run concurrently with per-collector timeouts.
 * Every subtype carries `context.status` (ok, absent, denied, failed, timeout) and
 * `context.source`, so "no GPU" is never confused with "could not ask".
 *
 * ```ts ignore
 * import { collectMeasurements, createCommandRunner, createHostReader, createSystemdBus } from "./mod.ts";
 * import { NOOP_LOGGER } from "../log.ts";
 * const { measurements, reports } = await collectMeasurements({
 *   host: createHostReader({ root: "/" }),
 *   exec: createCommandRunner(),
 *   systemd: () => createSystemdBus(),
 *   env: (name) => process.env[name],
 *   log: NOOP_LOGGER,
 * });
 * ```
 *
 * @module
 */
export * from "./types.ts";
export { collectMeasurements } from "./collect.ts";
export {
  createCommandRunner,
  createHostReader,
  FileTooLargeError,
  findExecutable,
} from "./host.ts";
export { createSystemdBus, SYSTEM_BUS_SOCKET, SYSTEMD_PRIVATE_SOCKET } from "./dbus.ts";
export { collectGpu, gpuUnavailable, parseNvidiaSmi } from "./gpu.ts";
export {
  collectOs,
  parseCmdline,
  parseModules,
  parseOsRelease,
  parseSysctlFile,
  readSysctl,
} from "./os.ts";
export {
  collectSystemd,
  DEFAULT_SYSTEMD_UNITS,
  goFormat,
  SYSTEMD_STATUS_SUBTYPE,
  toReading,
  unitReadings,
} from "./systemd.ts";
export {
  collectK8s,
  flattenSpec,
  imageReadings,
  nodeReadings,
  providerOf,
  shortImage,
} from "./k8s.ts";
export { collectTopology, foldTopology, formatNodes } from "./topology.ts";
export { parseXml, XmlError } from "./xml.ts";
export type { XmlElement, XmlLimits } from "./xml.ts";
export type { SysctlResult } from "./os.ts";
export { createClusterReader } from "./kube_reader.ts";
export {
  ABSENT,
  MAX_PROJECTION_BYTES,
  mergeProjections,
  MIXED,
  OKE_NVIDIA_GPU_PLUGIN,
  projectAksGpuPools,
  projectGkeGpuPools,
  PROJECTIONS,
  projectOkeAddons,
} from "./projections.ts";
export type { ProjectionSpec } from "./projections.ts";
