/**
 * The cleanup stage of a Job-mode run: every object of the run's ledger deleted by its UID (the
 * Job first), the Job's pods waited for (bounded) and deleted pinned to their UIDs, and what
 * remains reported.
 *
 * @module
 */
import type { KubeClient, KubeObject, Ledger, LedgerEntry } from "../kube/mod.ts";
import type { Logger } from "../log.ts";
import { runSelector } from "../manifests/mod.ts";
import { sleep } from "../io.ts";

/** The longest cleanup waits for the Job's pods, and retries a delete the API server does not answer. */
export const CLEANUP_TIMEOUT_MS = 30_000;

/**
 * How long cleanup keeps looking for a pod of a Job whose pod the run never saw (a signal right
 * after the Job's create): a pod the Job controller was creating while the Job was deleted lands
 * within this (its owner gone, only the garbage collector would remove it, later). A run that saw
 * its pod never waits for it: the Job makes one pod only (backoffLimit 0).
 */
const POD_SETTLE_MS = 1_500;
/** Between two looks for such a pod: a short poll, so a pod that lands is deleted at once. */
const POD_SETTLE_POLL_MS = 100;
/**
 * Longest one watch for a change of the run's terminating pods lasts before cleanup lists them
 * again (a pod leaves when the Job controller drops its tracking finalizer, at no fixed time).
 */
const POD_CHANGE_WAIT_MS = 2_000;
/** Between two lists of terminating pods when they cannot be watched. */
const POD_POLL_MS = 250;

/**
 * Waits (bounded) until no pod of the run's Job (by the Job's UID) is left, deleting each pinned
 * to its UID instead of waiting for the garbage collector's next pass.
 *
 * @returns the pods still terminating at the deadline
 */
async function awaitJobPodsGone(
  deps: { kube: KubeClient; log: Logger; clock?: () => number },
  options: {
    namespace: string;
    runId: string;
    jobUid: string;
    sawPod: boolean;
    agentDone?: boolean;
  },
): Promise<string[]> {
  const { kube, log } = deps;
  const clock = deps.clock ?? Date.now;
  const { namespace } = options;
  const labelSelector = runSelector(options.runId);
  const timeout = () => ({ timeoutMs: CLEANUP_TIMEOUT_MS });
  const remaining: string[] = [];
  const deadline = clock() + CLEANUP_TIMEOUT_MS;
  let seenPod = options.sawPod;
  let settleUntil: number | undefined;
  let forced = false;
  while (clock() < deadline) {
    const pods = await kube.list<KubeObject>("Pod", namespace, {
      labelSelector,
      ...timeout(),
    }).catch(() => undefined);
    const ours = pods?.items.filter((p) =>
      p.metadata?.ownerReferences?.some((o) =>
        o.uid === options.jobUid
      )
    ) ?? [];
    if (pods && ours.length === 0) {
      // The pod the run saw is gone: done, without a wait.
      if (seenPod) break;
      // No pod of the Job ever seen (a run ended early, e.g. a signal right after the Job's
      // create): the Job controller may still be creating one it decided on before the Job's
      // delete reached it. Look again in short polls until it has had time to land.
      settleUntil ??= Math.min(deadline, clock() + POD_SETTLE_MS);
      if (clock() >= settleUntil) break;
      await sleep(POD_SETTLE_POLL_MS);
      continue;
    }
    if (pods) seenPod = true;
    // The pods are the Job's (proved by its UID): delete them now instead of waiting
    // for the garbage collector's next pass; a done agent's at once, terminating or not (a
    // shorter grace period applies to a pod already terminating), once.
    const force: boolean = options.agentDone === true && !forced;
    forced ||= force;
    const deleted = await Promise.all(
      ours.filter((p) => (force || !p.metadata?.deletionTimestamp) && p.metadata?.uid).map((p) =>
        kube.deleteIfUid(
          "Pod",
          namespace,
          p.metadata?.name ?? "",
          p.metadata?.uid ?? "",
          { ...timeout(), ...(force ? { gracePeriodSeconds: 0 } : {}) },
        )
          .catch(() => undefined)
      ),
    );
    // A finished pod is removed by its delete at once: look again without pausing.
    if (deleted.some((d) => d !== undefined)) continue;
    const at = clock();
    if (at + 500 >= deadline) {
      for (const p of ours) remaining.push(`Pod/${p.metadata?.name}`);
      log.warn("cleanup: the agent's pods are still terminating", {
        pods: ours.map((p) => p.metadata?.name).join(","),
      });
      break;
    }
    // Terminating (finalizers not yet dropped): list again as soon as they change, not after
    // a fixed pause (which made a run's end bimodal: the pods' end rarely waits for a poll).
    // The deadline is over 500 ms away here, so the wait is never empty.
    await podsChanged(kube, namespace, {
      labelSelector,
      resourceVersion: pods?.resourceVersion,
      waitMs: Math.min(POD_CHANGE_WAIT_MS, deadline - at),
    });
  }
  return remaining;
}

/**
 * Waits until the run's pods change after a list (a watch from the list's resource version, so
 * a change between the two is not missed), at most `waitMs` (positive); without a watch (no
 * permission, an error, or no resource version), a short poll's pause instead.
 */
async function podsChanged(
  kube: KubeClient,
  namespace: string,
  options: { labelSelector: string; resourceVersion: string | undefined; waitMs: number },
): Promise<void> {
  const { labelSelector, resourceVersion, waitMs } = options;
  if (!resourceVersion) return await sleep(POD_POLL_MS);
  const stop = AbortSignal.timeout(waitMs);
  let refused = false;
  try {
    const watch = await kube.watch<KubeObject>("Pod", namespace, {
      labelSelector,
      resourceVersion,
      timeoutSeconds: Math.ceil(waitMs / 1000),
      signal: stop,
    });
    try {
      for await (const event of watch) {
        if (event.type === "BOOKMARK") continue;
        refused = event.type === "ERROR";
        break;
      }
    } finally {
      watch.close();
    }
  } catch {
    // Not watchable (its end at `waitMs` aside): the pause below.
    refused = !stop.aborted;
  }
  // An error event or a watch that would not open: pause as a poll would, so a watch the server
  // keeps refusing never turns the wait into a busy loop of lists.
  if (refused) await sleep(POD_POLL_MS);
}

/** Options for {@link cleanupRun}. */
export interface CleanupRunOptions {
  /** The run's ledger. */
  ledger: Ledger;
  /** Namespace. */
  namespace: string;
  /** Run ID. */
  runId: string;
  /** The Job's name. */
  jobName: string;
  /** The Job's UID, when its create answered. */
  jobUid?: string;
  /**
   * Whether the run saw its Job's pod (while waiting): its absence at cleanup then means it is
   * gone, and cleanup does not look again for a pod still being created. @default false
   */
  sawPod?: boolean;
  /**
   * The agent reported its snapshot (its log's report line) and has nothing left to do but exit:
   * its pod is deleted at once (grace period 0), not left terminating until the kubelet has
   * noticed the exit and torn it down (about a second on a real kubelet). @default false
   */
  agentDone?: boolean;
  /** How long a delete is tried again while the API server does not answer (default 0). */
  retryForMs?: number;
}

/**
 * Cleans up one run: deletes every ledger entry by UID (the staging ConfigMap is one: aicr
 * created it), waits for the Job's pods to go, and reports what remains.
 *
 * @param deps client, logger and the millisecond clock the wait for the pods is measured on
 * @param options the ledger and the run's names
 * @returns the names of objects that remain (empty when clean) and how many were removed
 */
export async function cleanupRun(
  deps: { kube: KubeClient; log: Logger; clock?: () => number },
  options: CleanupRunOptions,
): Promise<{ remaining: string[]; cleaned: number }> {
  const { log } = deps;
  const { namespace, ledger } = options;
  // The Job first (its pods stop before their permissions go); then the rest of the run's
  // objects and the wait for the Job's pods, side by side.
  const isJob = (entry: LedgerEntry) => entry.kind === "Job";
  // One budget for both steps: the rest gets what the Job's deletes left of it, and no
  // request's own retries run past it.
  const budget = options.retryForMs ? { until: Date.now() + options.retryForMs } : {};
  const first = await ledger.cleanup({ log, ...budget, only: isJob });
  const [rest, podsLeft] = await Promise.all([
    ledger.cleanup({ log, ...budget, only: (entry) => !isJob(entry) }),
    // Pods go with their Job through the garbage collector; wait (bounded) for them.
    options.jobUid
      ? awaitJobPodsGone(deps, {
        ...options,
        jobUid: options.jobUid,
        sawPod: options.sawPod ?? false,
        agentDone: options.agentDone ?? false,
      })
      : Promise.resolve([]),
  ]);
  const outcomes = [...first, ...rest];
  log.debug("cleanup: run objects deleted", { count: outcomes.length });
  const remaining: string[] = [];
  for (const outcome of outcomes) {
    if (outcome.result === "kept" || outcome.result === "failed") {
      remaining.push(`${outcome.entry.kind}/${outcome.entry.name}`);
    }
  }
  remaining.push(...podsLeft);
  const cleaned = outcomes.filter((o) => o.result === "deleted" || o.result === "gone").length;
  if (outcomes.some((o) => o.result === "failed")) {
    // The objects still carry the run's labels: the sweep can finish the job later.
    log.warn(
      "cleanup could not delete every object this run created; remove the rest once the API server answers",
      {
        runID: options.runId,
        remedy: `aicr cleanup --run-id ${options.runId} -n ${namespace}`,
      },
    );
  }
  log.debug("cleanup: done", { remaining: remaining.length });
  return { remaining, cleaned };
}
