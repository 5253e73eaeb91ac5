/**
 * The writing stage of a Job-mode run: the run's RBAC, the staging ConfigMap the agent writes
 * into and the agent Job, each created through the run's {@link Ledger} so cleanup deletes
 * exactly those; and the conflict a create meets when another invocation holds the run's name.
 *
 * @module
 */
import { ConflictError, ToolError } from "../errors.ts";
import { KubeApiError, Ledger } from "../kube/mod.ts";
import type { KubeClient } from "../kube/mod.ts";
import type { Logger } from "../log.ts";
import { LABEL_RUN_ID } from "../manifests/mod.ts";
import { formatConfigMapUri } from "../snapshot/mod.ts";
import type { ConfigMapRef } from "../snapshot/mod.ts";
import { throwIfInterrupted } from "./deploy_options.ts";
import type { DeployOptions } from "./deploy_options.ts";
import { stagingConfigMap } from "./deploy_plan.ts";
import type { RunPlan } from "./deploy_plan.ts";

/**
 * Creates the run's RBAC: the ServiceAccount and both roles at once, then both bindings (each
 * after its role). A create in flight is not aborted (that would only make its outcome unknown),
 * and every create of a step settles before the run goes on or fails, so cleanup sees all of
 * them; a signal stops the next step.
 */
export async function createRunRbac(
  deps: { ledger: Ledger; log: Logger },
  rbac: NonNullable<RunPlan["rbac"]>,
  signal: AbortSignal | undefined,
): Promise<void> {
  const { ledger, log } = deps;
  for (
    const step of [
      [
        ["ServiceAccount", rbac.serviceAccount],
        ["Role", rbac.role],
        ["ClusterRole", rbac.clusterRole],
      ],
      [
        ["RoleBinding", rbac.roleBinding],
        ["ClusterRoleBinding", rbac.clusterRoleBinding],
      ],
    ] as const
  ) {
    const outcomes = await Promise.allSettled(
      step.map(([kind, object]) => ledger.create(kind, object)),
    );
    for (const outcome of outcomes) if (outcome.status === "rejected") throw outcome.reason;
    throwIfInterrupted(signal);
  }
  log.debug("run RBAC created", { serviceAccount: rbac.serviceAccount.metadata.name });
}

/**
 * Creates the agent Job (after the staging ConfigMap it writes into, when aicr owns the output).
 *
 * @returns the Job's UID
 */
export async function createAgentJob(
  deps: { kube: KubeClient; ledger: Ledger; log: Logger },
  options: DeployOptions,
  plan: RunPlan,
): Promise<string> {
  const { kube, ledger, log } = deps;
  const { namespace } = options;
  const { runId, output } = plan;
  const name = plan.job.metadata.name;
  let job = plan.job;
  if (plan.ownsOutput) {
    // The staging ConfigMap is created here, carrying this invocation's labels, so the
    // agent writes into it only by its UID and cleanup deletes it by that UID. An object
    // already at the name (another run's, or anyone's) is never written into or deleted.
    const staged = await createStagingConfigMap({ kube, ledger, log }, {
      ref: output,
      labels: plan.labels,
      runId,
      mode: plan.mode,
    });
    job = plan.jobWithOutputUid(staged);
    throwIfInterrupted(options.signal);
  }
  const created = await ledger.create("Job", job);
  const jobUid = created.metadata?.uid;
  if (!jobUid) throw new ToolError(`Cannot follow Job '${namespace}/${name}': no UID returned`);
  log.debug("agent Job created", { job: name, uid: jobUid });
  return jobUid;
}

/** The WARN for an object at the staging name this invocation did not create. */
export const FOREIGN_STAGING_WARNING =
  "the staging ConfigMap's name is taken by an object this invocation did not create; it is left untouched (not written into, not adopted, not deleted)";

/**
 * Creates the run's staging ConfigMap (empty, with the invocation's labels) through the
 * ledger and returns its UID. An object already at the name stops the run before the Job
 * with the documented WARN and a conflict naming it and its labels; nothing is written
 * into it and cleanup never deletes it.
 */
async function createStagingConfigMap(
  { kube, ledger, log }: { kube: KubeClient; ledger: Ledger; log: Logger },
  options: { ref: ConfigMapRef; labels: Record<string, string>; runId: string; mode: string },
): Promise<string> {
  const { ref } = options;
  try {
    const created = await ledger.create("ConfigMap", stagingConfigMap(ref, options.labels));
    const uid = created.metadata?.uid;
    if (!uid) {
      throw new ToolError(
        `Cannot stage the snapshot in '${formatConfigMapUri(ref)}': no UID returned`,
      );
    }
    return uid;
  } catch (error) {
    if (!(error instanceof KubeApiError && error.isAlreadyExists)) throw error;
    const objectRunId = await kube.get("ConfigMap", ref.namespace, ref.name).then(
      (cm) => cm?.metadata?.labels?.[LABEL_RUN_ID],
      () => undefined,
    );
    log.warn(FOREIGN_STAGING_WARNING, {
      name: ref.name,
      runID: options.runId,
      objectRunID: objectRunId ?? "",
    });
    throw new ConflictError(
      `Cannot stage the snapshot in '${
        formatConfigMapUri(ref)
      }': a ConfigMap this invocation did not create already has that name`,
      {
        cause: error,
        details: [
          options.mode === "exact"
            ? "  another run as this ServiceAccount is using it; wait for it, or pass -o cm://<namespace>/<name>"
            : (option) =>
              `  another invocation is using this run ID; omit ${
                option("runId")
              } or pass a new one`,
          objectRunId
            ? `  if it is a killed run's leftover: aicr cleanup --run-id ${objectRunId} -n ${ref.namespace}`
            : `  it is not aicr's: rename or remove it yourself (kubectl get configmap ${ref.name} -n ${ref.namespace} -o yaml)`,
        ],
      },
    );
  }
}

/** A create met an object of the run's name: another invocation holds this run ID. */
export function alreadyExists(
  error: KubeApiError,
  namespace: string,
  runId: string,
): ConflictError {
  return new ConflictError(
    `Cannot create the run's objects: run ID ${runId} is already in use in namespace '${namespace}'`,
    {
      cause: error,
      details: [
        (option) =>
          `  another invocation is using this run ID; omit ${option("runId")} or pass a new one`,
        `  if that run was killed, remove its objects first: aicr cleanup --run-id ${runId} -n ${namespace}`,
      ],
    },
  );
}
