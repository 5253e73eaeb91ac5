/**
 * The controller side of Job mode (`aicr snapshot`): gate → RBAC → Job → wait → read →
 * deliver → cleanup. Every object the run creates goes through one {@link Ledger}, so
 * cleanup deletes exactly those, pinned to their UIDs, on every path out (success,
 * failure, timeout, SIGINT/SIGTERM). This module runs the stages in order; each lives in its own:
 * the plan and gate (`deploy_plan.ts`), the creates (`deploy_create.ts`), the wait (`wait.ts`),
 * the read (`deploy_read.ts`), the delivery (`deliver.ts`) and the cleanup (`deploy_cleanup.ts`);
 * the run's options and result are in `deploy_options.ts`.
 *
 * @module
 */
import { InterruptedError, ToolError } from "../errors.ts";
import { createNamespaceIfAbsent, KubeApiError, Ledger } from "../kube/mod.ts";
import type { TextWriter } from "../log.ts";
import {
  GPU_PRESENT_LABEL,
  LABEL_INVOCATION_ID,
  LABEL_RUN_ID,
  newInvocationId,
  newRunId,
  runSelector,
} from "../manifests/mod.ts";
import { waitForAgentJob } from "./wait.ts";
import { deliverRunSnapshot } from "./deliver.ts";
import type { SnapshotDelivery } from "./deliver.ts";
import { CLEANUP_TIMEOUT_MS, cleanupRun } from "./deploy_cleanup.ts";
import type { CleanupRunOptions } from "./deploy_cleanup.ts";
import { alreadyExists, createAgentJob, createRunRbac } from "./deploy_create.ts";
import { throwIfInterrupted } from "./deploy_options.ts";
import type { DeployDeps, DeployOptions, DeployResult } from "./deploy_options.ts";
import { planRun } from "./deploy_plan.ts";
import type { RunPlan } from "./deploy_plan.ts";
import { readProvenSnapshot } from "./deploy_read.ts";

export type { AgentJobKnobs, DeployDeps, DeployOptions, DeployResult } from "./deploy_options.ts";
export { previewSnapshotRun } from "./deploy_plan.ts";
export type { PlannedObject, SnapshotPreview } from "./deploy_plan.ts";
export { FOREIGN_STAGING_WARNING } from "./deploy_create.ts";
export { readSnapshot } from "./deploy_read.ts";
export { cleanupRun } from "./deploy_cleanup.ts";
export type { CleanupRunOptions } from "./deploy_cleanup.ts";

/**
 * Runs the agent Job end to end and returns its snapshot. Cleanup always runs unless
 * `noCleanup`; its problems are logged as WARN lines and never hide the run's error.
 *
 * @param deps client, logger, clock, randomness
 * @param options the run's flags
 * @returns the snapshot and where it came from
 * @throws {PermissionError} when the gate finds missing permissions (cluster untouched)
 * @throws {AgentJobError} / {TimeoutError} when the agent fails or does not finish
 * @throws {InterruptedError} on SIGINT/SIGTERM (after cleanup)
 */
export async function deploySnapshot(
  deps: DeployDeps,
  options: DeployOptions,
): Promise<DeployResult> {
  const runId = options.runId ?? newRunId(deps.now(), deps.randomHex);
  const invocationId = newInvocationId(deps.randomHex);
  // The agent's report comes through its log with this run's own value (`agent_report.ts`).
  const reportNonce = deps.randomHex() + deps.randomHex();
  // Nothing is created before the plan is complete, so an interrupt here has nothing to clean.
  const identity = { runId, invocationId, reportNonce };
  const plan = await planRun(deps, options, identity).catch((error) => {
    // A review or read the signal cut short fails as the library says (a gate error, say):
    // with nothing written, the signal is the whole story.
    if (!(error instanceof InterruptedError)) throwIfInterrupted(options.signal);
    throw error;
  });
  return await executeRun(deps, options, plan);
}

/**
 * The writing half of a run: RBAC and Job through the ledger, wait, read; cleanup on every path
 * out unless `noCleanup`.
 */
async function executeRun(
  deps: DeployDeps,
  options: DeployOptions,
  plan: RunPlan,
): Promise<DeployResult> {
  const { kube, log } = deps;
  const { namespace } = options;
  const { runId, output, rbac } = plan;
  const selector = plan.injectedSelector ? { injectedSelector: `${GPU_PRESENT_LABEL}=true` } : {};
  const ledger = new Ledger(kube, {
    labels: plan.labels,
    runIdLabel: LABEL_RUN_ID,
    invocationIdLabel: LABEL_INVOCATION_ID,
  });
  const name = plan.job.metadata.name;
  let jobUid: string | undefined;
  let sawPod = false;
  let agentDone = false;
  let done: DeployResult | undefined;
  // Logged once the inputs are proved (pre-flight reads, manifests, gate) and the run is about
  // to write: the ID is what `aicr cleanup --run-id` needs, and a configuration error has none.
  log.info(`snapshot agent run: runID=${runId}`, { namespace });
  try {
    throwIfInterrupted(options.signal);
    if (plan.createNamespace) await createNamespaceIfAbsent({ kube, log }, namespace);
    if (rbac) await createRunRbac({ ledger, log }, rbac, options.signal);
    jobUid = await createAgentJob({ kube, ledger, log }, options, plan);
    const waited = await waitForAgentJob({ kube, log }, {
      namespace,
      jobName: name,
      jobUid,
      runId,
      timeoutMs: options.timeoutMs,
      ...selector,
      ...(options.signal ? { signal: options.signal } : {}),
      onPod: () => (sawPod = true),
      ...(options.build ? { build: options.build } : {}),
      ...(plan.reportNonce ? { reportNonce: plan.reportNonce } : {}),
    });
    // A finished Job had its one pod, and makes no other.
    sawPod = true;
    // Its report came through its log: the agent has only its exit left.
    agentDone = waited.report !== undefined;
    const { nodeName } = waited;
    log.debug("agent finished; reading its snapshot", { node: nodeName });
    const snapshot = await readProvenSnapshot(deps, options, {
      output,
      pod: waited.pod,
      ...(waited.report ? { report: waited.report } : {}),
    });
    done = { runId, snapshot, configMap: output, nodeName, ...selector, cleaned: 0 };
    // The caller has its snapshot while the run's objects are deleted; cleanup is still awaited
    // (and its outcome checked) before this returns.
    if (options.delivery) {
      done.bytes = await deliver(deps, { ...options, delivery: options.delivery }, done);
    }
    return done;
  } catch (error) {
    const failure = interrupted(error, options.signal);
    throw failure instanceof KubeApiError && failure.isAlreadyExists
      ? alreadyExists(failure, namespace, runId)
      : failure;
  } finally {
    const cleaned = await endRun(deps, options, {
      ledger,
      runId,
      jobName: name,
      ...(jobUid ? { jobUid } : {}),
      sawPod,
      agentDone,
    });
    // The returned object is the one `done` holds: its count is filled in here, after cleanup.
    if (done && cleaned !== undefined) done.cleaned = cleaned;
  }
}

/**
 * The end of every run: its objects cleaned up (unless `noCleanup`, which says what it leaves).
 *
 * @returns how many objects cleanup removed (undefined with `noCleanup`)
 */
async function endRun(
  deps: DeployDeps,
  options: DeployOptions,
  run: Omit<CleanupRunOptions, "namespace" | "retryForMs"> & { runId: string },
): Promise<number | undefined> {
  const { kube, log } = deps;
  if (options.noCleanup) {
    log.warn((option) => `${option("noCleanup")}: leaving the run's objects in the cluster`, {
      runID: run.runId,
      selector: runSelector(run.runId),
    });
    return undefined;
  }
  const cleanup = await cleanupRun({ kube, log }, {
    ...run,
    namespace: options.namespace,
    // An API server that is restarting (or whose etcd is) is waited for, within --timeout.
    retryForMs: Math.min(options.timeoutMs, CLEANUP_TIMEOUT_MS),
  });
  return cleanup.cleaned;
}

/** The deliver stage: the read snapshot where the run was told (`deliver.ts`); its bytes. */
async function deliver(
  deps: DeployDeps,
  options: DeployOptions & { delivery: SnapshotDelivery },
  read: DeployResult,
): Promise<number> {
  const { bytes } = await deliverRunSnapshot({
    kube: deps.kube,
    log: deps.log,
    stdout: deps.stdout ?? noStdout(),
    now: deps.now,
  }, {
    delivery: options.delivery,
    runId: read.runId,
    ...(options.signal ? { signal: options.signal } : {}),
  }, read.snapshot);
  return bytes;
}

/** A stdout a run without one would write to: a delivery there is a programming error. */
function noStdout(): TextWriter {
  return {
    write: () => {
      throw new TypeError("Cannot deliver to stdout: the run was given no stdout");
    },
  };
}

/** An error thrown while a signal aborted the run, as the interrupt it is (exit 130). */
function interrupted(error: unknown, signal: AbortSignal | undefined): unknown {
  return signal?.aborted && !(error instanceof ToolError)
    ? new InterruptedError(
      `Cannot finish the snapshot run: interrupted (${String(signal.reason)})`,
    )
    : error;
}
