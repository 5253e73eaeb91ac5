/**
 * Pure builders of the Kubernetes objects aicr creates, and the one source of their
 * names and labels. Nothing here does I/O: configuration in, plain objects out.
 *
 * ```ts
 * import { jobName, newRunId, runLabels } from "./mod.ts";
 * const runId = newRunId(new Date(0), () => "0123456789abcdef");
 * const name = jobName("aicr", runId); // "aicr-19700101-000000-0123456789abcdef"
 * const labels = runLabels({ runId, invocationId: "fedcba9876543210" });
 *
 * import { buildAgentJob, formatManifest } from "./mod.ts";
 * const job = buildAgentJob({
 *   namespace: "gpu-operator",
 *   runId,
 *   invocationId: "fedcba9876543210",
 *   serviceAccountName: `aicr-${runId}`,
 *   image: "ghcr.io/nvidia/aicr:v1.0.0",
 *   tolerations: [{ key: "nvidia.com/gpu", operator: "Exists", effect: "NoSchedule" }],
 * });
 * const yaml = formatManifest(job); // what `kubectl apply -f -` would take
 * ```
 *
 * @module
 */
export * from "./names.ts";
export type * from "./types.ts";
export { isQuantity, quantityValue } from "./quantity.ts";
export * from "./job.ts";
export * from "./yaml.ts";
export {
  GPU_PRESENT_LABEL,
  GPU_RESOURCE,
  isNodeOs,
  NODE_OS_FAMILIES,
  osProfile,
  TOLERATE_ALL,
} from "./_pod.ts";
export type { NodeOs, OsProfile, PlacementOptions, PodOptions } from "./_pod.ts";
export * from "./daemonset.ts";
