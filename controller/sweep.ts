/**
 * The sweep after a killed run (`aicr cleanup --run-id`): a SIGKILLed `aicr snapshot`
 * never reaches its own cleanup, so its objects stay. They are found again by the
 * run's labels (`aicr.run/run-id`, `app.kubernetes.io/name=aicr` and
 * `app.kubernetes.io/managed-by=aicr`, all three), and each is deleted pinned to the
 * UID just read, so an object that replaced it in between is never touched. The
 * staging ConfigMap carries no run label (the agent writes it); it is swept by its
 * run-scoped name only once no Job of the run still stands and it carries
 * `app.kubernetes.io/name=aicr`, otherwise it is kept with the documented WARN.
 *
 * @module
 */
import { sweepObjects } from "../kube/mod.ts";
import type { KindName, KubeClient, KubeObject, SweptObject } from "../kube/mod.ts";
import type { Logger } from "../log.ts";
import {
  APP_NAME,
  formatLabelSelector,
  LABEL_MANAGED_BY,
  LABEL_NAME,
  LABEL_RUN_ID,
  stagingConfigMapName,
} from "../manifests/mod.ts";
import { STAGING_CONFIGMAP_WARNING } from "./deploy.ts";

/** Kinds a run creates, in deletion order: the Job first, bindings before roles. */
const SWEPT_KINDS: readonly KindName[] = [
  "Job",
  "Pod",
  "RoleBinding",
  "ClusterRoleBinding",
  "Role",
  "ClusterRole",
  "ServiceAccount",
];

/** Options of {@link sweepRun}. */
export interface SweepOptions {
  /** The run ID (validated by the caller). */
  runId: string;
  /** The namespace the run deployed into. */
  namespace: string;
  /** Only list what would be deleted. */
  dryRun?: boolean;
  /** Per-call timeout. @default 30000 */
  timeoutMs?: number;
}

/**
 * The label selector of a run's objects for the sweep: run ID, name and managed-by.
 *
 * @param runId the run ID
 * @returns the selector
 */
export function sweepSelector(runId: string): string {
  return formatLabelSelector({
    [LABEL_RUN_ID]: runId,
    [LABEL_NAME]: APP_NAME,
    [LABEL_MANAGED_BY]: APP_NAME,
  });
}

/**
 * Finds a run's leftovers by its labels and deletes each by the UID just read.
 *
 * @param deps client and logger
 * @param options run ID, namespace, dry run
 * @returns one entry per object found (empty when the run left nothing)
 */
export async function sweepRun(
  deps: { kube: KubeClient; log: Logger },
  options: SweepOptions,
): Promise<SweptObject[]> {
  const { kube, log } = deps;
  const { runId, namespace, dryRun = false, timeoutMs = 30_000 } = options;
  const out = await sweepObjects(deps, {
    selector: sweepSelector(runId),
    namespace,
    kinds: SWEPT_KINDS,
    dryRun,
    timeoutMs,
  });
  const staging = await sweepStaging(kube, log, { runId, namespace, dryRun, timeoutMs });
  if (staging) out.push(staging);
  return out;
}

async function sweepStaging(
  kube: KubeClient,
  log: Logger,
  options: { runId: string; namespace: string; dryRun: boolean; timeoutMs: number },
): Promise<SweptObject | undefined> {
  const { namespace, timeoutMs } = options;
  const name = stagingConfigMapName(options.runId);
  const cm = await kube.get("ConfigMap", namespace, name, { timeoutMs });
  const uid = cm?.metadata?.uid;
  if (!uid) return undefined;
  const base = { kind: "ConfigMap" as const, namespace, name, uid };
  // A Job of the run that still stands (one this sweep did not just delete, or one that
  // reappeared) may still have an agent that writes here: keep the ConfigMap then.
  const jobs = await kube.list<KubeObject>("Job", namespace, {
    labelSelector: sweepSelector(options.runId),
    timeoutMs,
  });
  const standing = jobs.items.filter((j) => !j.metadata?.deletionTimestamp || options.dryRun);
  const isArtifact = cm.metadata?.labels?.[LABEL_NAME] === APP_NAME;
  if ((standing.length > 0 && !options.dryRun) || !isArtifact) {
    const live = standing[0];
    log.warn(STAGING_CONFIGMAP_WARNING, {
      name,
      jobName: live?.metadata?.name ?? "",
      jobUID: "",
      liveJobUID: live?.metadata?.uid ?? "",
    });
    return {
      ...base,
      result: "kept",
      detail: isArtifact
        ? "a Job of the run still stands"
        : "not labelled app.kubernetes.io/name=aicr",
    };
  }
  if (options.dryRun) return { ...base, result: "found" };
  const result = await kube.deleteIfUid("ConfigMap", namespace, name, uid, { timeoutMs });
  return { ...base, result: result === "deleted" ? "deleted" : "gone" };
}
