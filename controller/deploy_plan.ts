/**
 * The pre-flight half of a Job-mode run, and the dry run built from it: every read at once (the
 * ServiceAccount, auto-targeting, the namespace, the RuntimeClass), every name and manifest built
 * (and so validated), then the permission gate. Nothing is written here.
 *
 * @module
 */
import { NotFoundError, ToolError, UsageError } from "../errors.ts";
import {
  checkNamespace,
  CREATE_NAMESPACE_CHECK,
  KubeApiError,
  UNTRUSTED_CERTIFICATE_REASON,
} from "../kube/mod.ts";
import type { KubeClient, NewObject } from "../kube/mod.ts";
import type { Logger } from "../log.ts";
import {
  buildAgentJob,
  exactStagingConfigMapName,
  GPU_PRESENT_LABEL,
  newInvocationId,
  newRunId,
  runLabels,
  serviceAccountRunName,
  stagingConfigMapName,
} from "../manifests/mod.ts";
import type { JobManifest } from "../manifests/mod.ts";
import { createAccessReviewer, runGate, runRbacObjects } from "../rbac/mod.ts";
import type { GateReport, RunRbac, ServiceAccountMode } from "../rbac/mod.ts";
import type { ConfigMapRef } from "../snapshot/mod.ts";
import { checkArchitectures } from "./architectures.ts";
import { throwIfInterrupted } from "./deploy_options.ts";
import type { DeployDeps, DeployOptions } from "./deploy_options.ts";
import { allSettledOrThrow } from "../io.ts";

/** Access reviews of the gate in flight at once. */
const GATE_CONCURRENCY = 6;

/** Everything a run decided and built before its first write. */
export interface RunPlan {
  /** The run ID. */
  runId: string;
  /** The labels every object of the run carries. */
  labels: Record<string, string>;
  /** Where the agent writes. */
  output: ConfigMapRef;
  /** Whether cleanup owns (deletes) the output ConfigMap. */
  ownsOutput: boolean;
  /** The Job, built (without the staging ConfigMap's UID, which its create returns). */
  job: JobManifest;
  /** Builds the Job with the staging ConfigMap's UID. */
  jobWithOutputUid: (uid: string) => JobManifest;
  /** How the run got its ServiceAccount. */
  mode: ServiceAccountMode;
  /** The run-scoped RBAC, in prefix mode. */
  rbac: RunRbac | undefined;
  /** Whether auto-targeting injected the GPU selector. */
  injectedSelector: boolean;
  /** Whether the run creates the namespace first (`--create-namespace`, found absent). */
  createNamespace: boolean;
  /** The run's nonce for the agent report's log line (a run has one, a preview none). */
  reportNonce?: string;
}

/** How a plan is made: for a run, or for a preview (`--dry-run`). */
interface PlanMode {
  /** Ask the permission gate (a run does; a preview does not). */
  gate: boolean;
  /** Make no cluster contact at all: assume what the reads would tell (`--offline`). */
  offline: boolean;
}

/** One object a run would create, in creation order. */
export interface PlannedObject {
  /** Its kind. */
  kind: string;
  /** The manifest, exactly as a run would send it. */
  manifest: { apiVersion: string; kind: string; metadata: { name: string } };
}

/** What {@link previewSnapshotRun} gives. */
export interface SnapshotPreview {
  /** The run ID the objects are named with (a real run generates its own). */
  runId: string;
  /** Every object a run would create, in creation order. */
  objects: PlannedObject[];
  /** The read-only lookups made, or the assumptions in their place (offline). */
  lookups: string[];
}

/**
 * What `aicr snapshot` would create, built by the same planning code as a run (names, labels,
 * RBAC, Job), without the gate and without writing: the cluster is contacted only for the
 * run's read-only lookups, which are listed, and not at all with `offline`.
 *
 * @param deps client (unused offline), logger, clock, randomness
 * @param options the run's options
 * @param preview whether to stay offline
 * @returns the objects in creation order and the lookups made
 * @throws {NotFoundError} when a lookup fails the run (absent namespace or RuntimeClass)
 */
export async function previewSnapshotRun(
  deps: DeployDeps,
  options: DeployOptions,
  preview: { offline: boolean },
): Promise<SnapshotPreview> {
  const runId = options.runId ?? newRunId(deps.now(), deps.randomHex);
  const invocationId = newInvocationId(deps.randomHex);
  const lookups = snapshotLookups(options, preview.offline);
  const plan = await planRun(deps, options, {
    runId,
    invocationId,
  }, { gate: false, offline: preview.offline });
  const as = (m: unknown) => m as PlannedObject["manifest"];
  const objects: PlannedObject[] = [
    ...(plan.createNamespace
      ? [{
        kind: "Namespace",
        manifest: as({
          apiVersion: "v1",
          kind: "Namespace",
          metadata: {
            name: options.namespace,
            labels: { "app.kubernetes.io/managed-by": "aicr" },
          },
        }),
      }]
      : []),
    ...(plan.rbac
      ? [
        { kind: "ServiceAccount", manifest: as(plan.rbac.serviceAccount) },
        { kind: "Role", manifest: as(plan.rbac.role) },
        { kind: "RoleBinding", manifest: as(plan.rbac.roleBinding) },
        { kind: "ClusterRole", manifest: as(plan.rbac.clusterRole) },
        { kind: "ClusterRoleBinding", manifest: as(plan.rbac.clusterRoleBinding) },
      ]
      : []),
    // The staging ConfigMap a run creates before the Job (none when the user names a cm://);
    // the Job a run sends also carries that ConfigMap's UID, which only its create returns.
    ...(plan.ownsOutput
      ? [{
        kind: "ConfigMap",
        manifest: as({
          apiVersion: "v1",
          kind: "ConfigMap",
          ...stagingConfigMap(plan.output, plan.labels),
        }),
      }]
      : []),
    { kind: "Job", manifest: as(plan.job) },
  ];
  return { runId, objects, lookups };
}
/** The read-only lookups a run's plan makes, or (offline) what is assumed instead. */
function snapshotLookups(options: DeployOptions, offline: boolean): string[] {
  const { namespace } = options;
  if (offline) {
    return [
      `assumed (offline): namespace '${namespace}' exists`,
      ...(options.serviceAccountName !== undefined
        ? [
          `assumed (offline): no ServiceAccount '${namespace}/${options.serviceAccountName}' exists (prefix mode: the run creates its own)`,
        ]
        : []),
      ...(options.autoTarget
        ? ["assumed (offline): no node is labelled nvidia.com/gpu.present=true (no auto-targeting)"]
        : []),
      ...(options.job.runtimeClass
        ? [`assumed (offline): RuntimeClass '${options.job.runtimeClass}' exists`]
        : []),
    ];
  }
  return [
    `get namespace ${namespace}`,
    ...(options.serviceAccountName !== undefined
      ? [`get serviceaccount ${namespace}/${options.serviceAccountName}`]
      : []),
    ...(options.autoTarget
      ? options.job.architectures
        ? [
          `list nodes -l '${GPU_PRESENT_LABEL}=true,kubernetes.io/arch in (${options.job.architectures})' --limit 1`,
          `list nodes -l '${GPU_PRESENT_LABEL}=true,kubernetes.io/arch notin (${options.job.architectures})' --limit 20`,
        ]
        : [`list nodes -l ${GPU_PRESENT_LABEL}=true --limit 1`]
      : []),
    ...(options.job.runtimeClass ? [`get runtimeclass ${options.job.runtimeClass}`] : []),
  ];
}

/** Where a run's agent writes, and how the gate and RBAC name that ConfigMap. */
interface OutputNaming {
  /** Whether aicr creates (and deletes) the output: a staging ConfigMap. */
  ownsOutput: boolean;
  /** The output for a ServiceAccount mode and account. */
  outputFor(mode: ServiceAccountMode, serviceAccount: string): ConfigMapRef;
  /** The ConfigMap grant for an output. */
  configMapsFor(ref: ConfigMapRef): { staging: string } | { target: string };
}

/**
 * The agent writes the user's cm:// output, or a staging ConfigMap aicr creates for it: per run,
 * or, as an existing ServiceAccount, one per account (so a rendered grant can name it).
 */
function outputNaming(options: DeployOptions, runId: string): OutputNaming {
  const ownsOutput = options.output === undefined;
  return {
    ownsOutput,
    outputFor: (mode, serviceAccount) =>
      options.output ?? {
        namespace: options.namespace,
        name: mode === "exact"
          ? exactStagingConfigMapName(serviceAccount)
          : stagingConfigMapName(runId),
      },
    configMapsFor: (ref) => ownsOutput ? { staging: ref.name } : { target: ref.name },
  };
}

/** The run's permission gate, for a ServiceAccount mode and account. */
function createRunGate(
  deps: DeployDeps,
  options: DeployOptions,
  naming: OutputNaming,
): (
  mode: ServiceAccountMode,
  serviceAccount: string,
  createNamespace: boolean,
) => Promise<GateReport> {
  return (mode, serviceAccount, createNamespace) =>
    runGate(createAccessReviewer(deps.kube), {
      namespace: options.namespace,
      mode,
      serviceAccount,
      ownsOutput: naming.ownsOutput,
      // Projections are merged into the user's ConfigMap by this process, not the agent.
      rewritesOutput: options.delivery?.target.kind === "configmap" &&
        options.delivery.projections.length > 0,
      discoverNetwork: options.discoverNetwork,
      configMaps: naming.configMapsFor(naming.outputFor(mode, serviceAccount)),
      ...(createNamespace ? { extraCaller: [CREATE_NAMESPACE_CHECK] } : {}),
      log: deps.log,
      // Reviews persist nothing and are cheap: a few at a time over kept-alive connections beat
      // one TLS handshake each (measured: the gate of a run, 6 connections vs 32).
      concurrency: GATE_CONCURRENCY,
    });
}

/**
 * The pre-flight reads, all at once: the ServiceAccount, auto-targeting, the namespace, the
 * RuntimeClass. Every read settles before a failure is thrown: none logs after the run's error
 * line.
 */
function readCluster(deps: DeployDeps, options: DeployOptions) {
  const { kube, log } = deps;
  return allSettledOrThrow([
    resolveServiceAccount(kube, options),
    options.autoTarget
      ? autoTarget(kube, log, options.job.architectures, options.job.image, options.signal)
      : Promise.resolve(false),
    checkNamespace(kube, options.namespace, {
      ...(options.signal ? { signal: options.signal } : {}),
      createIfAbsent: options.createNamespace ?? false,
    }),
    options.job.runtimeClass
      ? checkRuntimeClass(kube, options.job.runtimeClass)
      : Promise.resolve(),
  ]);
}

/**
 * The pre-flight half of a run: every read at once, every name and manifest built (and so
 * validated), then the permission gate. Nothing is written.
 */
export async function planRun(
  deps: DeployDeps,
  options: DeployOptions,
  identity: { runId: string; invocationId: string; reportNonce?: string },
  planMode: PlanMode = { gate: true, offline: false },
): Promise<RunPlan> {
  const { log } = deps;
  const { namespace } = options;
  const { runId, invocationId, reportNonce } = identity;
  const naming = outputNaming(options, runId);
  const { ownsOutput, outputFor, configMapsFor } = naming;
  // Reads and reviews only: a signal ends their requests at once.
  const pre: DeployDeps = deps.preflightKube ? { ...deps, kube: deps.preflightKube } : deps;
  const gate = createRunGate(pre, options, naming);
  // Without --service-account-name (and --create-namespace) the gate's questions are known
  // before any read, so its reviews run beside the pre-flight reads. Its verdict still comes
  // second: a read's or a manifest's error is reported before a permission error, as when they
  // ran one after the other.
  const early = planMode.gate && !planMode.offline && options.serviceAccountName === undefined &&
      !options.createNamespace
    ? settle(gate("prefix", "", false))
    : undefined;
  const [{ mode, serviceAccount }, injectedSelector, namespaceState] = planMode.offline
    ? [{ mode: "prefix" as const, serviceAccount: "" }, false, "exists" as const]
    : await afterSettled(early, () => readCluster(pre, options));
  const createNamespace = namespaceState === "absent";
  const output = outputFor(mode, serviceAccount);
  // Built again with the staging ConfigMap's UID once aicr created it (the agent writes into
  // that object only).
  const agentJob = (outputUid?: string) =>
    buildAgentJob({
      ...options.job,
      // A staging ConfigMap is aicr's own, read back by this process and deleted: the agent writes
      // it as JSON, which parses in well under a millisecond where YAML takes tens (the user's
      // --format applies to what is delivered). The user's cm:// output keeps the user's format.
      ...(ownsOutput ? { format: "json" as const } : {}),
      runId,
      invocationId,
      namespace,
      serviceAccountName: mode === "prefix"
        ? serviceAccountRunName(options.serviceAccountPrefix, runId)
        : serviceAccount,
      output,
      ...(outputUid ? { outputUid } : {}),
      ...(reportNonce ? { reportNonce } : {}),
      autoTargetGpu: injectedSelector === true,
      timeoutMs: options.timeoutMs,
    });
  const { job, rbac } = await afterSettled(early, () => ({
    job: agentJob(),
    rbac: mode === "prefix"
      ? runRbacObjects({
        namespace,
        runId,
        invocationId,
        serviceAccountPrefix: options.serviceAccountPrefix,
        discoverNetwork: options.discoverNetwork,
        configMaps: configMapsFor(output),
      })
      : undefined,
  }));
  if (planMode.gate) {
    if (early) unsettle(await early);
    else await gate(mode, serviceAccount, createNamespace);
    log.debug("gate passed", { mode });
  }
  return {
    runId,
    labels: runLabels(identity),
    output,
    ownsOutput,
    job,
    jobWithOutputUid: (uid) => agentJob(uid),
    mode,
    rbac,
    injectedSelector: injectedSelector === true,
    createNamespace,
    ...(reportNonce ? { reportNonce } : {}),
  };
}

/** A promise's outcome, held without rejecting (so an early gate is never an unhandled rejection). */
function settle<T>(promise: Promise<T>): Promise<PromiseSettledResult<T>> {
  return promise.then(
    (value) => ({ status: "fulfilled", value }),
    (reason: unknown) => ({ status: "rejected", reason }),
  );
}

/**
 * Runs a step (sync or async); when it fails, waits for the early gate to settle first, so no
 * review is still in flight (or logs) after the run's error.
 */
async function afterSettled<T>(
  early: Promise<unknown> | undefined,
  step: () => T | Promise<T>,
): Promise<T> {
  try {
    return await step();
  } catch (error) {
    await early;
    throw error;
  }
}

/** The value of a settled outcome, or its error thrown. */
function unsettle<T>(outcome: PromiseSettledResult<T>): T {
  if (outcome.status === "rejected") throw outcome.reason;
  return outcome.value;
}

async function resolveServiceAccount(
  kube: KubeClient,
  options: DeployOptions,
): Promise<{ mode: ServiceAccountMode; serviceAccount: string }> {
  const explicit = options.serviceAccountName;
  if (explicit === undefined) {
    // An unset flag is never probed, so a stray ServiceAccount named like the prefix
    // cannot capture a run.
    return { mode: "prefix", serviceAccount: "" };
  }
  try {
    const sa = await kube.get("ServiceAccount", options.namespace, explicit);
    if (sa) return { mode: "exact", serviceAccount: explicit };
    return { mode: "prefix", serviceAccount: "" };
  } catch (error) {
    if (error instanceof KubeApiError && (error.status === 403 || error.status === 401)) {
      // The gate reports the missing 'get serviceaccounts' with everything else.
      return { mode: "exact", serviceAccount: explicit };
    }
    throw error;
  }
}

async function checkRuntimeClass(kube: KubeClient, name: string): Promise<void> {
  const found = await kube.get("RuntimeClass", undefined, name, { timeoutMs: 5000 }).catch(
    (error) => {
      if (error instanceof KubeApiError && error.status === 403) return "unknown";
      throw error;
    },
  );
  if (!found) {
    throw new NotFoundError(
      `RuntimeClass "${name}" not found in cluster; the GPU Operator may not be installed yet.`,
      {
        details: [
          (option) =>
            `omit ${option("runtimeClass")} and target GPU nodes with ${
              option("nodeSelector")
            } instead`,
        ],
      },
    );
  }
}

/**
 * Whether the run targets GPU nodes: yes when one exists of an architecture the image has. GPU
 * nodes of another architecture are named (the Job's arch affinity keeps the pod off them); when
 * every GPU node is of another, the run stops here, before anything is created.
 */
async function autoTarget(
  kube: KubeClient,
  log: Logger,
  architectures: readonly string[] | undefined,
  image: string,
  signal?: AbortSignal,
): Promise<boolean> {
  const gpu = `${GPU_PRESENT_LABEL}=true`;
  try {
    if (!architectures) {
      const nodes = await kube.list("Node", undefined, {
        labelSelector: gpu,
        limit: 1,
        timeoutMs: 5000,
        signal: signal
          ? AbortSignal.any([signal, AbortSignal.timeout(5000)])
          : AbortSignal.timeout(5000),
      });
      if (nodes.items.length === 0) return false;
      log.info("auto-targeting GPU nodes", { nodeSelector: gpu });
      return true;
    }
    const split = await checkArchitectures(kube, log, {
      selector: gpu,
      architectures,
      image,
      who: "the agent",
      nodes: "GPU node",
      leftOut: "auto-targeting left out GPU nodes of an architecture the image lacks",
      ...(signal ? { signal } : {}),
    });
    if (!split.usable) return false;
    log.info("auto-targeting GPU nodes", {
      nodeSelector: gpu,
      architectures: architectures.join(","),
    });
    return true;
  } catch (error) {
    // Fail open on what the API answered (or did not); a broken kubeconfig is the run's
    // error, and a signal ends the run.
    // A server that cannot be trusted, or credentials that cannot be had (a missing exec
    // plugin), fail every later call too: said once, as the run's error.
    if (error instanceof UsageError) throw error;
    if (
      error instanceof KubeApiError
        ? error.reason === UNTRUSTED_CERTIFICATE_REASON
        : error instanceof ToolError
    ) throw error;
    throwIfInterrupted(signal);
    log.warn("could not look for GPU nodes; running without a node selector", {
      error: error instanceof Error ? error.message.split("\n")[0] : String(error),
    });
    return false;
  }
}

/** The staging ConfigMap aicr creates for the agent to write into: empty, with the run's labels. */
export function stagingConfigMap(
  ref: ConfigMapRef,
  labels: Record<string, string>,
): NewObject & { data: Record<string, string> } {
  return {
    metadata: { name: ref.name, namespace: ref.namespace, labels: { ...labels } },
    data: {},
  };
}
