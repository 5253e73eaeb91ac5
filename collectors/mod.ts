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
 * Only what callers outside the folder use is exported here (named); each file's other exports
 * serve its siblings and its tests.
 *
 * @module
 */
export type { CollectOptions, CollectorDeps, CollectorReport, KubeNode } from "./types.ts";
export { collectMeasurements } from "./collect.ts";
export { createCommandRunner, createHostReader } from "./host.ts";
export { createSystemdBus, SYSTEM_BUS_SOCKET, SYSTEMD_PRIVATE_SOCKET } from "./dbus.ts";
export { gpuUnavailable, parseNvidiaSmi } from "./gpu.ts";
export { collectTopology, foldOwnTopology, foldTopology } from "./topology.ts";
export { createClusterReader } from "./kube_reader.ts";
export { mergeProjections } from "./projections.ts";
export { createProjectionFileReader, readProjections } from "./projection_files.ts";
export type { ProjectionFiles } from "./projection_files.ts";
