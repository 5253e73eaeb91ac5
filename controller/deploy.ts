/**
 * The controller side of Job mode (`aicr snapshot`): gate → RBAC → Job → wait → read →
 * deliver → cleanup. Every object the run creates goes through one {@link Ledger}, so
 * cleanup deletes exactly those, pinned to their UIDs, on every path out (success,
 * failure, timeout, SIGINT/SIGTERM).
 *
 * @module
 */
import {
  ConflictError,
  InterruptedError,
  NotFoundError,
  ToolError,
  UsageError,
} from "../errors.ts";
import {
  checkNamespace,
  CREATE_NAMESPACE_CHECK,
  createNamespaceIfAbsent,
  KubeApiError,
  Ledger,
  UNTRUSTED_CERTIFICATE_REASON,
} from "../kube/mod.ts";
import type { KubeClient, KubeObject, LedgerEntry, NewObject } from "../kube/mod.ts";
import type { Logger, TextWriter } from "../log.ts";
import {
  buildAgentJob,
  exactStagingConfigMapName,
  GPU_PRESENT_LABEL,
  LABEL_INVOCATION_ID,
  LABEL_RUN_ID,
  newInvocationId,
  newRunId,
  runLabels,
  runSelector,
  serviceAccountRunName,
  stagingConfigMapName,
} from "../manifests/mod.ts";
import type { AgentJobConfig, JobManifest } from "../manifests/mod.ts";
import { createAccessReviewer, runGate, runRbacObjects } from "../rbac/mod.ts";
import type { GateReport, RunRbac, ServiceAccountMode } from "../rbac/mod.ts";
import { formatConfigMapUri, parseSnapshot, snapshotFromConfigMapData } from "../snapshot/mod.ts";
import type { ConfigMapRef, Snapshot } from "../snapshot/mod.ts";
import { waitForAgentJob } from "./wait.ts";
import { checkArchitectures } from "./architectures.ts";
import { agentBuildOf, checkAgentBuild } from "./agent_identity.ts";
import { readAgentTermination, verifyAgentSnapshot } from "./agent_proof.ts";
import { buildInfo } from "../version.ts";
import { deliverRunSnapshot } from "./deliver.ts";
import type { SnapshotDelivery } from "./deliver.ts";
import type { BuildInfo } from "../version.ts";
import { allSettledOrThrow, sleep } from "../io.ts";

/** What a deployment needs. */
export interface DeployDeps {
  /** The client (the caller's kubeconfig identity). */
  kube: KubeClient;
  /**
   * The same identity with every request ending on SIGINT/SIGTERM, for the pre-flight reads and
   * the gate (nothing is written yet, so a signal there leaves nothing to clean up). @default kube
   */
  preflightKube?: KubeClient;
  /** Logger (stderr); the agent's streamed log is relayed through it. */
  log: Logger;
  /** Standard output: a delivery to stdout writes here (required for one). */
  stdout?: TextWriter;
  /** Clock. */
  now: () => Date;
  /** 16 random hex digits per call (run and invocation IDs). */
  randomHex: () => string;
}

/** The parts of the agent Job the user chooses; the run fills in the rest. */
export type AgentJobKnobs = Omit<
  AgentJobConfig,
  | "runId"
  | "invocationId"
  | "namespace"
  | "serviceAccountName"
  | "output"
  | "autoTargetGpu"
  | "timeoutMs"
>;

/** Options of one `aicr snapshot` run. */
export interface DeployOptions {
  /** `--namespace`. */
  namespace: string;
  /** The Job spec knobs (image, privileged, selectors, tolerations, resources, ...). */
  job: AgentJobKnobs;
  /** `--service-account-name`, when the user set it (exact-if-exists). */
  serviceAccountName?: string;
  /** The prefix when no existing ServiceAccount is used. */
  serviceAccountPrefix: string;
  /**
   * The user's `cm://` output, parsed and in {@link namespace} (the agent writes there
   * directly); absent for stdout and files (the agent stages the snapshot in a run-scoped
   * ConfigMap).
   */
  output?: ConfigMapRef;
  /** `--discover-network`. */
  discoverNetwork: boolean;
  /** `--timeout` in milliseconds. */
  timeoutMs: number;
  /** `--no-cleanup`: keep everything for debugging. */
  noCleanup: boolean;
  /** Whether auto-targeting may inject the GPU selector (none of the three flags set). */
  autoTarget: boolean;
  /** Reuse this run ID instead of generating one (pinned CI runs). */
  runId?: string;
  /** `--create-namespace`: create the namespace when it is absent (kept after the run). */
  createNamespace?: boolean;
  /** SIGINT/SIGTERM. */
  signal?: AbortSignal;
  /** The build the agent must be (`version.ts` `buildInfo`). @default this one */
  build?: BuildInfo;
  /**
   * Where the snapshot goes, delivered as soon as it is read, before cleanup starts; cleanup
   * still runs (and is verified) before {@link deploySnapshot} returns. A failed delivery is the
   * run's error, cleaned up like any other. Absent: the run only reads the snapshot.
   */
  delivery?: SnapshotDelivery;
}

/**
 * The read stage: the agent's report (its pod's termination message) and the snapshot, side by
 * side; before anything is delivered, the agent that ran must be this build, and what was read
 * must be what it reported writing, on its own node.
 */
async function readProvenSnapshot(
  deps: DeployDeps,
  options: DeployOptions,
  from: { output: ConfigMapRef; pod: Parameters<typeof readAgentTermination>[1] },
): Promise<Snapshot> {
  const { kube, log } = deps;
  const { output } = from;
  const [{ pod, message }, { snapshot, text }] = await Promise.all([
    readAgentTermination(kube, from.pod, options.signal),
    readSnapshot(kube, output, options.signal),
  ]);
  throwIfInterrupted(options.signal);
  log.debug("snapshot read", { configMap: formatConfigMapUri(output) });
  const build = options.build ?? buildInfo();
  checkAgentBuild(agentBuildOf(snapshot, message), build, options.job.image);
  verifyAgentSnapshot(
    { text, snapshot, uri: formatConfigMapUri(output), pod, message },
    { build, image: options.job.image },
  );
  return snapshot;
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

/** What a deployment returns. */
export interface DeployResult {
  /** The run ID. */
  runId: string;
  /** The snapshot the agent wrote. */
  snapshot: Snapshot;
  /** Where the agent wrote it. */
  configMap: ConfigMapRef;
  /** The node it ran on. */
  nodeName: string | undefined;
  /** The selector auto-targeting injected, if any. */
  injectedSelector?: string;
  /** How many of the run's objects cleanup removed (0 with `noCleanup`). */
  cleaned: number;
  /** The bytes delivered, when the run delivered. */
  bytes?: number;
}

const CLEANUP_TIMEOUT_MS = 30_000;

/**
 * How long cleanup keeps looking for a pod of a Job whose pod the run never saw (a signal right
 * after the Job's create): a pod the Job controller was creating while the Job was deleted lands
 * within this (its owner gone, only the garbage collector would remove it, later). A run that saw
 * its pod never waits for it: the Job makes one pod only (backoffLimit 0).
 */
const POD_SETTLE_MS = 1_500;
/** Between two looks for such a pod: a short poll, so a pod that lands is deleted at once. */
const POD_SETTLE_POLL_MS = 100;

/** Access reviews of the gate in flight at once. */
const GATE_CONCURRENCY = 6;

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
  // Nothing is created before the plan is complete, so an interrupt here has nothing to clean.
  const plan = await planRun(deps, options, { runId, invocationId }).catch((error) => {
    // A review or read the signal cut short fails as the library says (a gate error, say):
    // with nothing written, the signal is the whole story.
    if (!(error instanceof InterruptedError)) throwIfInterrupted(options.signal);
    throw error;
  });
  return await executeRun(deps, options, plan);
}

/** Everything a run decided and built before its first write. */
interface RunPlan {
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
async function planRun(
  deps: DeployDeps,
  options: DeployOptions,
  identity: { runId: string; invocationId: string },
  planMode: PlanMode = { gate: true, offline: false },
): Promise<RunPlan> {
  const { log } = deps;
  const { namespace } = options;
  const { runId, invocationId } = identity;
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
  };
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
    });
    // A finished Job had its one pod, and makes no other.
    sawPod = true;
    const { nodeName } = waited;
    log.debug("agent finished; reading its snapshot", { node: nodeName });
    const snapshot = await readProvenSnapshot(deps, options, { output, pod: waited.pod });
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
    if (options.noCleanup) {
      log.warn((option) => `${option("noCleanup")}: leaving the run's objects in the cluster`, {
        runID: runId,
        selector: runSelector(runId),
      });
    } else {
      const cleanup = await cleanupRun({ kube, log }, {
        ledger,
        namespace,
        runId,
        // An API server that is restarting (or whose etcd is) is waited for, within --timeout.
        retryForMs: Math.min(options.timeoutMs, CLEANUP_TIMEOUT_MS),
        jobName: name,
        ...(jobUid ? { jobUid } : {}),
        sawPod,
      });
      // The returned object is the one `done` holds: its count is filled in here, after cleanup.
      if (done) done.cleaned = cleanup.cleaned;
    }
  }
}

/**
 * Creates the run's RBAC: the ServiceAccount and both roles at once, then both bindings (each
 * after its role). A create in flight is not aborted (that would only make its outcome unknown),
 * and every create of a step settles before the run goes on or fails, so cleanup sees all of
 * them; a signal stops the next step.
 */
async function createRunRbac(
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
async function createAgentJob(
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

/** An error thrown while a signal aborted the run, as the interrupt it is (exit 130). */
function interrupted(error: unknown, signal: AbortSignal | undefined): unknown {
  return signal?.aborted && !(error instanceof ToolError)
    ? new InterruptedError(
      `Cannot finish the snapshot run: interrupted (${String(signal.reason)})`,
    )
    : error;
}

/** The staging ConfigMap aicr creates for the agent to write into: empty, with the run's labels. */
function stagingConfigMap(
  ref: ConfigMapRef,
  labels: Record<string, string>,
): NewObject & { data: Record<string, string> } {
  return {
    metadata: { name: ref.name, namespace: ref.namespace, labels: { ...labels } },
    data: {},
  };
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
function alreadyExists(error: KubeApiError, namespace: string, runId: string): ConflictError {
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

function throwIfInterrupted(signal: AbortSignal | undefined): void {
  if (signal?.aborted) {
    throw new InterruptedError(
      `Cannot finish the snapshot run: interrupted (${String(signal.reason)})`,
    );
  }
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

/**
 * Reads and validates the snapshot the agent staged in a ConfigMap.
 *
 * @param kube the client
 * @param ref where
 * @param signal cancels the read (SIGINT/SIGTERM)
 * @returns the snapshot, and its text exactly as read (the agent's report digests it)
 * @throws {NotFoundError} when the ConfigMap or its snapshot key is missing
 * @throws {UsageError} when the document is invalid (e.g. an older agent's apiVersion)
 */
export async function readSnapshot(
  kube: KubeClient,
  ref: ConfigMapRef,
  signal?: AbortSignal,
): Promise<{ snapshot: Snapshot; text: string }> {
  const uri = formatConfigMapUri(ref);
  const cm = await kube.get<KubeObject & { data?: Record<string, string> }>(
    "ConfigMap",
    ref.namespace,
    ref.name,
    signal ? { signal } : {},
  );
  if (!cm) {
    throw new NotFoundError(
      `Cannot read the snapshot from '${uri}': the agent finished but wrote no ConfigMap`,
      {
        details: [
          (option) =>
            `read the agent's log above; rerun with ${option("noCleanup")} to inspect the Job`,
        ],
      },
    );
  }
  const text = snapshotFromConfigMapData(cm.data);
  if (text === undefined) {
    throw new NotFoundError(
      `Cannot read the snapshot from '${uri}': ConfigMap has no snapshot data`,
    );
  }
  return { snapshot: parseSnapshot(text, { source: uri }), text };
}

/**
 * Waits (bounded) until no pod of the run's Job (by the Job's UID) is left, deleting each pinned
 * to its UID instead of waiting for the garbage collector's next pass.
 *
 * @returns the pods still terminating at the deadline
 */
async function awaitJobPodsGone(
  deps: { kube: KubeClient; log: Logger; clock?: () => number },
  options: { namespace: string; runId: string; jobUid: string; sawPod: boolean },
): Promise<string[]> {
  const { kube, log } = deps;
  const clock = deps.clock ?? Date.now;
  const { namespace } = options;
  const timeout = () => ({ timeoutMs: CLEANUP_TIMEOUT_MS });
  const remaining: string[] = [];
  const deadline = clock() + CLEANUP_TIMEOUT_MS;
  let seenPod = options.sawPod;
  let settleUntil: number | undefined;
  while (clock() < deadline) {
    const pods = await kube.list<KubeObject>("Pod", namespace, {
      labelSelector: runSelector(options.runId),
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
    // for the garbage collector's next pass.
    const deleted = await Promise.all(
      ours.filter((p) => !p.metadata?.deletionTimestamp && p.metadata?.uid).map((p) =>
        kube.deleteIfUid(
          "Pod",
          namespace,
          p.metadata?.name ?? "",
          p.metadata?.uid ?? "",
          timeout(),
        )
          .catch(() => undefined)
      ),
    );
    // A finished pod is removed by its delete at once: look again without pausing.
    if (deleted.some((d) => d !== undefined)) continue;
    if (clock() + 500 >= deadline) {
      for (const p of ours) remaining.push(`Pod/${p.metadata?.name}`);
      log.warn("cleanup: the agent's pods are still terminating", {
        pods: ours.map((p) => p.metadata?.name).join(","),
      });
      break;
    }
    await sleep(250);
  }
  return remaining;
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
