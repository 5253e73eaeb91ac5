/**
 * The sweep after a killed run (`aicr cleanup --run-id`): a SIGKILLed `aicr snapshot`
 * never reaches its own cleanup, so its objects stay. They are found again by the
 * run's labels (`aicr.run/run-id`, `app.kubernetes.io/name=aicr` and
 * `app.kubernetes.io/managed-by=aicr`, all three), and each is deleted pinned to the
 * UID just read, so an object that replaced it in between is never touched. The
 * staging ConfigMap is one of them (aicr creates it with the run's labels); an object at
 * the run's staging name without those labels is not aicr's and is kept with the
 * documented WARN.
 *
 * @module
 */
import { DELETE_ORDER, sweepObjects } from "../kube/mod.ts";
import type { KindName, KubeClient, SweptObject } from "../kube/mod.ts";
import type { Logger } from "../log.ts";
import { ToolError } from "../errors.ts";
import type { ClusterRunDeps } from "./daemonset.ts";
import { cleanupReportContent } from "./report.ts";
import { runReported } from "./reported.ts";
import type { ReportTargets } from "./reported.ts";
import {
  APP_NAME,
  formatLabelSelector,
  LABEL_MANAGED_BY,
  LABEL_NAME,
  LABEL_RUN_ID,
  stagingConfigMapName,
} from "../manifests/mod.ts";

/** The WARN for an object at the run's staging name that lacks the run's labels. */
export const STAGING_CONFIGMAP_WARNING =
  "cleanup left behind the ConfigMap at this run's staging name: it does not carry the run's labels, so aicr did not create it";

/** The kinds a run creates (and its Job's pods). */
const RUN_KINDS: ReadonlySet<KindName> = new Set([
  "Job",
  "Pod",
  "ConfigMap",
  "RoleBinding",
  "ClusterRoleBinding",
  "Role",
  "ClusterRole",
  "ServiceAccount",
]);

/** The kinds a sweep visits, in the one deletion order (`DELETE_ORDER`). */
export const SWEPT_KINDS: readonly KindName[] = DELETE_ORDER.filter((kind) => RUN_KINDS.has(kind));

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
  const staging = await sweepStaging(kube, log, { runId, namespace, timeoutMs });
  if (staging) out.push(staging);
  return out;
}

async function sweepStaging(
  kube: KubeClient,
  log: Logger,
  options: { runId: string; namespace: string; timeoutMs: number },
): Promise<SweptObject | undefined> {
  const { namespace, timeoutMs } = options;
  const name = stagingConfigMapName(options.runId);
  const cm = await kube.get("ConfigMap", namespace, name, { timeoutMs });
  const uid = cm?.metadata?.uid;
  if (!uid) return undefined;
  // One carrying the run's labels was swept (or listed) above with the rest.
  const labels = cm.metadata?.labels ?? {};
  const ours = labels[LABEL_RUN_ID] === options.runId && labels[LABEL_NAME] === APP_NAME &&
    labels[LABEL_MANAGED_BY] === APP_NAME;
  if (ours) return undefined;
  log.warn(STAGING_CONFIGMAP_WARNING, {
    name,
    objectRunID: labels[LABEL_RUN_ID] ?? "",
  });
  return {
    kind: "ConfigMap",
    namespace,
    name,
    uid,
    result: "kept",
    detail: "not labelled with this run's ID, app.kubernetes.io/name=aicr and managed-by=aicr",
  };
}

/**
 * `aicr cleanup`'s run: sweeps what a killed run left behind, logs each object, writes the
 * reports, and fails when something stays.
 *
 * @param deps the cluster (connected on first use), logger, stdout, clock and option namer
 * @param options the run ID, its namespace, dry run and where the reports go
 * @returns when nothing of the run is left (or, in a dry run, when it was listed)
 * @throws {ToolError} when objects were kept or could not be deleted
 */
export async function runCleanup(
  deps: Pick<ClusterRunDeps, "connect" | "log" | "stdout" | "now" | "signal" | "nameOption">,
  options: { runId: string; namespace: string; dryRun: boolean; reports: ReportTargets },
): Promise<void> {
  const { log } = deps;
  const { runId, namespace, dryRun, reports } = options;
  const verb = { kind: "CleanupReport" as const, namespace };
  await runReported(deps, { targets: reports, verb }, async () => {
    const swept = await sweepRun({ kube: deps.connect(), log }, { runId, namespace, dryRun });
    for (const o of swept) {
      log.info(o.result === "found" ? "would delete" : o.result, {
        kind: o.kind,
        name: o.namespace ? `${o.namespace}/${o.name}` : o.name,
        uid: o.uid,
        ...(o.detail ? { detail: o.detail } : {}),
      });
    }
    const content = cleanupReportContent(swept, runId);
    const left = swept.filter((o) => o.result === "kept" || o.result === "failed");
    if (left.length > 0) {
      return {
        content,
        failure: new ToolError(
          `Cannot finish the cleanup of run ${runId}: ${left.length} object(s) left behind (see the WARN lines above)`,
          "internal",
        ),
      };
    }
    log.info(swept.length === 0 ? "cleanup: nothing of the run was found" : "cleanup: done", {
      runID: runId,
      namespace,
      deleted: swept.filter((o) => o.result === "deleted").length,
      ...(dryRun ? { dryRun: "true" } : {}),
    });
    return { content };
  });
}
