/**
 * The agent Job of `aicr snapshot`: a one-pod, no-retry Job that runs
 * `aicr agent -o cm://<ns>/<name>` on a node (with `AICR_AGENT_MODE=true`, as upstream's pod
 * has it), so the in-pod binary collects locally and writes the snapshot into a ConfigMap.
 *
 * Deadlines. The CLI waits `--timeout` (default 5m). The Job's
 * `activeDeadlineSeconds` is that wait plus {@link JOB_DEADLINE_MARGIN_SECONDS}, so
 * the CLI always gives up (and captures logs and events) before Kubernetes kills the
 * pod, and a Job orphaned by a hard-killed CLI still stops minutes later instead of
 * the upstream 5 hours. `ttlSecondsAfterFinished` is at least one hour and never
 * shorter than the deadline, so a finished Job stays around for `kubectl logs`.
 *
 * @module
 */
import { checkTimeout } from "./timeout.ts";
import { DEFAULT_JOB_NAME_PREFIX, jobName, runLabels, stagingConfigMapName } from "./names.ts";
import type { RunIdentity } from "./names.ts";
import { formatConfigMapUri } from "../snapshot/mod.ts";
import type { ConfigMapRef } from "../snapshot/mod.ts";
import { agentPodParts } from "./_pod.ts";
import { AGENT_REPORT_ENV, AGENT_REPORT_NONCE_ENV, AGENT_REPORT_PATH } from "./agent_report.ts";
import type { PodOptions } from "./_pod.ts";
import type { JobManifest, ResourceRequirements } from "./types.ts";

/** How much longer than the CLI's wait the Job may run. */
const JOB_DEADLINE_MARGIN_SECONDS = 300;
/** The shortest time a finished Job is kept. */
const JOB_MIN_TTL_SECONDS = 3600;

/** Privileged-mode resources (upstream §3.1). */
const PRIVILEGED_RESOURCES: ResourceRequirements = {
  requests: { cpu: "1", memory: "4Gi", "ephemeral-storage": "2Gi" },
  limits: { cpu: "2", memory: "8Gi", "ephemeral-storage": "4Gi" },
};

/** Restricted-mode resources (upstream §3.1). */
const RESTRICTED_RESOURCES: ResourceRequirements = {
  requests: { cpu: "100m", memory: "256Mi", "ephemeral-storage": "256Mi" },
  limits: { cpu: "500m", memory: "512Mi", "ephemeral-storage": "512Mi" },
};

/** Where the agent writes, and whether cleanup owns it. */
export interface AgentOutput {
  /** The ConfigMap. */
  ref: ConfigMapRef;
  /** `cm://<ns>/<name>`, the agent's `-o`. */
  uri: string;
  /** True for the run-scoped staging ConfigMap (cleanup deletes it), false for a user `cm://`. */
  ownsOutput: boolean;
}

/**
 * Where the agent writes: the user's ConfigMap as given, otherwise the run-scoped
 * staging ConfigMap `aicr-agent-snapshot-<runID>` in the run's namespace.
 *
 * @param userConfigMap the user's `cm://` output, already parsed and checked to be in
 *   `namespace` (the agent's Role grants ConfigMaps only there); undefined for any other output
 * @param namespace the run's namespace
 * @param runId the run ID
 * @returns the target and whether aicr owns it
 */
export function resolveAgentOutput(
  userConfigMap: ConfigMapRef | undefined,
  namespace: string,
  runId: string,
): AgentOutput {
  if (userConfigMap !== undefined) {
    const ref = { namespace: userConfigMap.namespace, name: userConfigMap.name };
    return { ref, uri: formatConfigMapUri(ref), ownsOutput: false };
  }
  const ref = { namespace, name: stagingConfigMapName(runId) };
  return { ref, uri: formatConfigMapUri(ref), ownsOutput: true };
}

/** The Job's deadlines for a CLI wait. */
export interface JobDeadlines {
  /** `activeDeadlineSeconds`. */
  activeDeadlineSeconds: number;
  /** `ttlSecondsAfterFinished`. */
  ttlSecondsAfterFinished: number;
}

/**
 * The Job's deadlines: the wait plus a margin, and a TTL of at least an hour, both
 * strictly longer than the wait.
 *
 * @param timeoutMs the run's timeout in ms, held to the one contract (`timeout.ts`; 0 or absent
 *   means the default)
 * @returns the deadlines
 * @throws {UsageError} when the timeout breaks the contract
 */
export function jobDeadlines(timeoutMs = 0): JobDeadlines {
  const wait = Math.ceil(checkTimeout(timeoutMs) / 1000);
  const activeDeadlineSeconds = wait + JOB_DEADLINE_MARGIN_SECONDS;
  return {
    activeDeadlineSeconds,
    ttlSecondsAfterFinished: Math.max(JOB_MIN_TTL_SECONDS, activeDeadlineSeconds),
  };
}

/** The agent Job's configuration, already parsed from flags. */
export interface AgentJobConfig extends RunIdentity, PodOptions {
  /** The namespace (a checked DNS-1123 label). */
  namespace: string;
  /** `--job-name` prefix. @default "aicr" */
  jobNamePrefix?: string;
  /** The ServiceAccount the pod runs as (exact, or the run-scoped `<prefix>-<runID>`). */
  serviceAccountName: string;
  /** The user's `cm://` output (parsed, in {@link namespace}); otherwise the staging ConfigMap. */
  output?: ConfigMapRef;
  /**
   * The UID of the staging ConfigMap the controller created: the agent writes into that
   * object only (`AICR_CONFIGMAP_UID`), never creating one.
   */
  outputUid?: string;
  /**
   * The run's nonce for the report's log line (`AICR_REPORT_NONCE`, `agent_report.ts`): the CLI
   * takes the agent's report from its log only with this value.
   */
  reportNonce?: string;
  /** `--format`; `json` is passed to the agent, which then writes `snapshot.json`. */
  format?: "yaml" | "json";
  /** `--require-gpu`: a GPU limit in privileged mode, and the in-pod GPU check. */
  requireGpu?: boolean;
  /** `--timeout` in milliseconds (0 means 5m). */
  timeoutMs?: number;
  /** `--debug` for the agent. */
  debug?: boolean;
  /** `--log-json` for the agent. */
  logJson?: boolean;
}

/**
 * Whether GPU auto-targeting may apply: `--node-selector`, `--require-gpu` and
 * `--runtime-class` are all unset. The caller then checks for a node labelled
 * `nvidia.com/gpu.present=true` and sets `autoTargetGpu`.
 *
 * @param config the three flags
 * @returns whether auto-targeting is allowed
 */
export function autoTargetingAllowed(
  config: Pick<AgentJobConfig, "nodeSelector" | "requireGpu" | "runtimeClass">,
): boolean {
  return Object.keys(config.nodeSelector ?? {}).length === 0 && !config.requireGpu &&
    config.runtimeClass === undefined;
}

/**
 * The agent container's arguments: global log flags, then `agent -o <cm://…>` and the in-pod
 * flags that change collection. The pod runs the `agent` verb, not `snapshot` in agent mode: the
 * binary then starts its agent's own bundle (`scripts/build.ts` `mainAssetsFor`): 70.7 -> 52.5 ms
 * and 59.5 -> 50.6 MiB per node (bench/README.md). NVIDIA's Go aicr has no such verb: its failure
 * line names it (`wait.ts`).
 *
 * @param config the Job config
 * @param output where the agent writes
 * @returns the args
 */
export function agentArgs(config: AgentJobConfig, output: AgentOutput): string[] {
  return [
    ...(config.debug ? ["--debug"] : []),
    ...(config.logJson ? ["--log-json"] : []),
    "agent",
    "-o",
    output.uri,
    ...(config.format === "json" ? ["--format", "json"] : []),
    ...(config.requireGpu ? ["--require-gpu"] : []),
  ];
}

/**
 * Builds the agent Job: run-scoped name, the five run labels on the Job and on its
 * pod template, one pod that never restarts, privileged or restricted per
 * `--privileged`, placed by selectors and tolerations.
 *
 * @param config the parsed configuration
 * @returns the Job manifest
 * @throws {UsageError} when a value cannot go into a Job (names, image, resources)
 */
export function buildAgentJob(config: AgentJobConfig): JobManifest {
  const {
    namespace,
    jobNamePrefix = DEFAULT_JOB_NAME_PREFIX,
    privileged = true,
    requireGpu = false,
  } = config;
  const labels = runLabels(config);
  const output = resolveAgentOutput(config.output, namespace, config.runId);
  const pod = agentPodParts(config, {
    defaults: privileged ? PRIVILEGED_RESOURCES : RESTRICTED_RESOURCES,
    gpu: privileged && requireGpu,
    logPrefix: "agent",
  });
  return {
    apiVersion: "batch/v1",
    kind: "Job",
    metadata: { name: jobName(jobNamePrefix, config.runId), namespace, labels },
    spec: {
      completions: 1,
      parallelism: 1,
      completionMode: "NonIndexed",
      backoffLimit: 0,
      ...jobDeadlines(config.timeoutMs),
      template: {
        metadata: { labels: { ...labels } },
        spec: {
          serviceAccountName: config.serviceAccountName,
          restartPolicy: "Never",
          ...pod.host,
          ...pod.placement,
          securityContext: pod.podSecurityContext,
          containers: [{
            name: "aicr",
            image: pod.container.image,
            command: ["aicr"],
            args: agentArgs(config, output),
            env: [
              { name: "AICR_AGENT_MODE", value: "true" },
              ...(config.outputUid
                ? [{ name: "AICR_CONFIGMAP_UID", value: config.outputUid }]
                : []),
              // Where the agent reports what it wrote (agent_report.ts): read by the kubelet only.
              { name: AGENT_REPORT_ENV, value: AGENT_REPORT_PATH },
              ...(config.reportNonce
                ? [{ name: AGENT_REPORT_NONCE_ENV, value: config.reportNonce }]
                : []),
              ...pod.env,
            ],
            resources: pod.container.resources,
            securityContext: pod.container.securityContext,
            volumeMounts: pod.container.volumeMounts,
            terminationMessagePath: AGENT_REPORT_PATH,
            terminationMessagePolicy: "File",
          }],
          volumes: pod.volumes,
        },
      },
    },
  };
}
