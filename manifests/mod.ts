/**
 * Pure builders of the Kubernetes objects aicr creates, and the one source of their
 * names and labels. Nothing here does I/O: configuration in, plain objects out.
 *
 * ```ts
 * import { newRunId, runLabels, serviceAccountRunName } from "./mod.ts";
 * const runId = newRunId(new Date(0), () => "0123456789abcdef");
 * const name = serviceAccountRunName("aicr", runId); // "aicr-19700101-000000-0123456789abcdef"
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
 * Only what callers outside the folder use is exported here (named); each file's other exports
 * serve its siblings and its tests.
 *
 * @module
 */
export { GPU_PRESENT_LABEL, isNodeOs, NODE_OS_FAMILIES, requiredNodeAffinity } from "./_pod.ts";
export type { PodOptions } from "./_pod.ts";
export { buildDaemonSet, DEFAULT_DAEMON_PORT } from "./daemonset.ts";
export type { DaemonSetConfig } from "./daemonset.ts";
export {
  AGENT_REPORT_ENV,
  AGENT_REPORT_NONCE_ENV,
  AgentReportError,
  agentReportOfLine,
  digestText,
  formatAgentReport,
  formatAgentReportLine,
  parseAgentReport,
} from "./agent_report.ts";
export type { AgentReport } from "./agent_report.ts";
export { autoTargetingAllowed, buildAgentJob } from "./job.ts";
export { buildSignerDeployment, buildSignerLease, DEFAULT_SIGNER_REPLICAS } from "./signer.ts";
export type { AgentJobConfig } from "./job.ts";
export {
  APP_NAME,
  baselineLabels,
  DAEMON_CSR_SIGNER,
  daemonCaConfigMapName,
  daemonClusterRoleName,
  daemonLabels,
  daemonNodeAudience,
  daemonReaderClusterRoleName,
  daemonReaderName,
  daemonSelectorLabels,
  daemonSignerSecretName,
  DEFAULT_DAEMON_NAME,
  DEFAULT_JOB_NAME_PREFIX,
  DEFAULT_SERVICE_ACCOUNT_PREFIX,
  exactStagingConfigMapName,
  formatLabelSelector,
  HELM_MANAGER,
  installSweepSelector,
  isDaemonObject,
  isDns1123Subdomain,
  isLabelKey,
  isLabelValue,
  isRunId,
  LABEL_INVOCATION_ID,
  LABEL_MANAGED_BY,
  LABEL_NAME,
  LABEL_RUN_ID,
  matchesLabels,
  newInvocationId,
  newRunId,
  nodeReaderName,
  rbacDirectoryName,
  renderedClusterRoleName,
  renderedLabels,
  renderedRoleName,
  runLabels,
  runSelector,
  serviceAccountGroups,
  serviceAccountRunName,
  serviceAccountUser,
  signerClusterRoleName,
  signerLabels,
  signerName,
  signerSelectorLabels,
  snapshotConfigMapLabels,
  stagingConfigMapName,
  validateDaemonName,
  validateNamespace,
  validateServiceAccountName,
} from "./names.ts";
export type { Labels, RunIdentity } from "./names.ts";
export { isQuantity } from "./quantity.ts";
export type {
  Affinity,
  JobManifest,
  NodeSelectorRequirement,
  ObjectMeta,
  PodSpec,
  ResourceList,
  Toleration,
} from "./types.ts";
export { formatManifest } from "./yaml.ts";
export {
  buildSnapshotCronJob,
  scheduledLabels,
  SERIES_LABEL,
  seriesConfigMapLabels,
  seriesConfigMapName,
  validateSeriesName,
} from "./cronjob.ts";
export type { SnapshotCronJobConfig } from "./cronjob.ts";
export { checkTimeout, DEFAULT_TIMEOUT_MS, MAX_WAIT_MS } from "./timeout.ts";
