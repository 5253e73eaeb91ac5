/**
 * DaemonSet mode, controller side: {@link installDaemonSet} runs the same pre-flight gate as
 * `aicr snapshot` (questions derived from what it creates; every missing permission in one
 * error, nothing written), creates what `render.ts` renders through a {@link Ledger} (UID-pinned
 * cleanup of what it made on any failure or signal), and waits, bounded and with progress, for
 * the pods of the targeted nodes to be Ready and to hold their own certificate, signing their
 * requests meanwhile (`csr/`).
 *
 * Each daemon proves which node it is: it makes its own key and asks for a certificate through
 * the CSR API under aicr's signer; the install (and every fetch) signs only what it can match
 * to a live pod of this DaemonSet on the node the request names (daemon/README.md, "Per-node
 * identity").
 *
 * @module
 */
import {
  ConflictError,
  type ErrorText,
  InterruptedError,
  ToolError,
  UsageError,
} from "../errors.ts";
import { sleep as sleepFor } from "../io.ts";
import {
  checkNamespace,
  CREATE_NAMESPACE_CHECK,
  createNamespaceIfAbsent,
  KubeApiError,
  Ledger,
  RESOURCES,
} from "../kube/mod.ts";
import type { KindName, KubeClient, KubeObject, LedgerEntry } from "../kube/mod.ts";
import type { Logger } from "../log.ts";
import {
  baselineLabels,
  DEFAULT_DAEMON_NAME,
  DEFAULT_DAEMON_PORT,
  formatLabelSelector,
  LABEL_INVOCATION_ID,
  LABEL_RUN_ID,
  newInvocationId,
  newRunId,
  signerLabels,
  signerName,
} from "../manifests/mod.ts";
import type { Toleration } from "../manifests/mod.ts";
import { createAccessReviewer, creatorChecks, runGate } from "../rbac/mod.ts";
import type { AccessAttributes } from "../rbac/mod.ts";
import { checkArchitectures } from "./architectures.ts";
import { grantableBaselines } from "./baseline_trust.ts";
import {
  createImagePullCheck,
  explainPullFailure,
  HEARTBEAT_MS,
  unschedulableReason,
} from "./wait.ts";
import type { PodObject } from "./wait.ts";
import type { DaemonCa } from "../x509.ts";
import { readDaemonSetAndPods, signerCallerChecks, signPendingCsrs } from "../csr/mod.ts";
import type { SignOutcome } from "../csr/mod.ts";
import { makeDaemonCa, renderDaemonSet } from "./render.ts";
import { AGENT_IDENTITY_FIX, foreignDaemonMessage, isForeignDaemonExit } from "./agent_identity.ts";
import { readSignerState } from "./signer_state.ts";
import type { SignerState } from "./signer_state.ts";
import type { DaemonSetOptions, RenderedDaemonSet } from "./render.ts";

/**
 * Whether the API server binds ServiceAccount tokens to Nodes (`ServiceAccountTokenNodeBinding`,
 * on by default from 1.31): asked from `/version`; when it cannot be read, assumed (the
 * supported range's newer releases all do).
 *
 * @param deps client and logger
 * @returns whether tokens are bound to Nodes
 */
export async function bindsTokensToNodes(deps: InstallDeps): Promise<boolean> {
  const version = await deps.kube.rest.json<{ major?: string; minor?: string }>({
    method: "GET",
    path: "/version",
    idempotent: true,
    timeoutMs: 10_000,
  }).catch(() => undefined);
  const major = Number.parseInt(version?.major ?? "", 10);
  const minor = Number.parseInt(version?.minor ?? "", 10);
  if (!Number.isFinite(major) || !Number.isFinite(minor)) return true;
  if (major === 1 && minor < 31) {
    deps.log.warn(
      "the API server cannot bind tokens to a Node (before 1.31): the daemons accept reader tokens by their node's audience alone",
    );
    return false;
  }
  return true;
}

/** The API group of prometheus-operator's ServiceMonitor. */
export const SERVICE_MONITOR_GROUP = "monitoring.coreos.com";

/**
 * Whether the cluster serves `monitoring.coreos.com/v1` ServiceMonitors (discovery).
 *
 * @param kube the client
 * @returns whether the CRD is installed and served
 */
export async function hasServiceMonitorCrd(kube: KubeClient): Promise<boolean> {
  const resources = await kube.discoverResources({ timeoutMs: 10_000 });
  return resources.some((r) =>
    r.group === SERVICE_MONITOR_GROUP && r.version === "v1" && r.plural === "servicemonitors"
  );
}

export function resourceOf(kind: KindName, namespace: string): {
  group: string;
  resource: string;
  namespace?: string;
} {
  const type = RESOURCES[kind];
  return {
    group: type.group,
    resource: type.plural,
    ...(type.namespaced ? { namespace } : {}),
  };
}

/**
 * What the caller must be able to do to install: create, get, list and delete every kind the
 * install creates, hold every rule it grants, and read the DaemonSet's pods while it waits.
 *
 * @param rendered the rendered install
 * @param namespace `--namespace`
 * @returns the questions
 */
export function installCallerChecks(
  rendered: RenderedDaemonSet,
  namespace: string,
): AccessAttributes[] {
  return creatorChecks({
    creates: rendered.objects.map((o) => resourceOf(o.kind, namespace)),
    grants: rendered.grants,
    namespace,
    extra: [{ verb: "list", group: "", resource: "pods", namespace }, ...signerCallerChecks()],
  });
}

/** What an install needs. */
export interface InstallDeps {
  /** The client (the caller's kubeconfig identity). */
  kube: KubeClient;
  /**
   * The same identity with every request ending on SIGINT/SIGTERM, for the reads and the gate
   * before anything is written (a signal then leaves nothing to clean up). @default kube
   */
  preflightKube?: KubeClient;
  /** Logger (stderr). */
  log: Logger;
  /** Clock. */
  now: () => Date;
  /** 16 random hex digits per call (run and invocation IDs). */
  randomHex: () => string;
  /** Sleep between polls. @default setTimeout */
  sleep?: (ms: number, signal?: AbortSignal) => Promise<void>;
}

/** Options of {@link installDaemonSet}. */
export interface InstallOptions extends DaemonSetOptions {
  /** How long to wait for the pods to be Ready. @default 120000 */
  timeoutMs?: number;
  /** Do not wait for the pods. @default false */
  noWait?: boolean;
  /** Poll interval while waiting. @default 1000 */
  pollMs?: number;
  /** SIGINT/SIGTERM: stops creating, cleans up what was created. */
  signal?: AbortSignal;
  /** `--create-namespace`: create the namespace when it is absent (kept after uninstall). */
  createNamespace?: boolean;
}

/** One targeted node's pod, as the wait saw it last. */
export interface DaemonPodState {
  /** The node. */
  node: string;
  /** The pod. */
  pod: string;
  /** The pod's UID (reader tokens are bound to it). */
  uid?: string;
  /** Whether its Ready condition is True. */
  ready: boolean;
  /** Why not, when it is not (phase, container waiting reason). */
  detail?: string;
  /** The container's waiting message (e.g. the image pull error), when it has one. */
  waitingMessage?: string;
  /** The scheduler's reason, while the pod cannot be scheduled. */
  unschedulable?: string;
  /** The pod's IP, once it has one. */
  ip?: string;
  /**
   * How its container last ended, when it did: exit code and the line it left that names a
   * foreign program (else its last line).
   */
  exited?: { code: number; line?: string };
  /** The daemon's container port. */
  port?: number;
  /** When the kubelet started the pod (`status.startTime`). */
  startedAt?: string;
  /** The image its (first) container runs. */
  image?: string;
}

/** What an install returns. */
export interface InstallResult {
  /** The install's run ID (on every object's labels). */
  runId: string;
  /** What was created, with UIDs. */
  created: readonly LedgerEntry[];
  /** How many nodes the DaemonSet targets (its `desiredNumberScheduled`). */
  desired: number;
  /** The targeted nodes' pods. */
  pods: DaemonPodState[];
  /** Whether every targeted node's pod became Ready in time (true with `noWait`: not checked). */
  ready: boolean;
  /** The in-cluster signer once the wait ended (absent with `noWait` or without the signer). */
  signer?: SignerState;
}

function interrupted(signal: AbortSignal | undefined): void {
  if (signal?.aborted) {
    throw new InterruptedError(`Cannot finish the install: interrupted (${String(signal.reason)})`);
  }
}

/** A Pod's Ready condition and what keeps it from being Ready. */
function podState(pod: KubeObject): DaemonPodState {
  const status = pod.status as {
    podIP?: string;
    phase?: string;
    startTime?: string;
    conditions?: { type: string; status: string; reason?: string; message?: string }[];
    containerStatuses?: {
      state?: { waiting?: { reason?: string; message?: string }; terminated?: Terminated };
      lastState?: { terminated?: Terminated };
    }[];
  } | undefined;
  const spec = pod.spec as
    | {
      nodeName?: string;
      containers?: { image?: string; ports?: { containerPort?: number }[] }[];
    }
    | undefined;
  const port = spec?.containers?.[0]?.ports?.[0]?.containerPort;
  const ready = status?.conditions?.some((c) => c.type === "Ready" && c.status === "True") ??
    false;
  const waitingState = status?.containerStatuses?.find((c) => c.state?.waiting?.reason)?.state
    ?.waiting;
  const waiting = waitingState?.reason;
  const unschedulable = unschedulableReason(pod as PodObject);
  const container = status?.containerStatuses?.[0];
  const terminated = container?.state?.terminated ?? container?.lastState?.terminated;
  // The line that says what ran: the program's own refusal of the `daemon` verb wherever it is
  // in the log's tail (its stdout and stderr interleave in any order), else the last line.
  const lines = terminated?.message?.split("\n").map((l) => l.trim()).filter((l) => l) ?? [];
  const line = lines.findLast((l) => isForeignDaemonExit(l)) ?? lines.at(-1);
  return {
    node: spec?.nodeName ?? "",
    pod: pod.metadata?.name ?? "",
    ...(pod.metadata?.uid ? { uid: pod.metadata.uid } : {}),
    ready,
    ...(ready ? {} : { detail: waiting ?? status?.phase ?? "Pending" }),
    ...(waitingState?.message ? { waitingMessage: waitingState.message } : {}),
    ...(unschedulable !== undefined ? { unschedulable } : {}),
    ...(status?.podIP ? { ip: status.podIP } : {}),
    ...(port !== undefined ? { port } : {}),
    ...(terminated?.exitCode !== undefined
      ? { exited: { code: terminated.exitCode, ...(line ? { line } : {}) } }
      : {}),
    ...(status?.startTime ? { startedAt: status.startTime } : {}),
    ...(spec?.containers?.[0]?.image ? { image: spec.containers[0].image } : {}),
  };
}

/** A container's terminated state. */
interface Terminated {
  exitCode?: number;
  message?: string;
}

/** Where the DaemonSet's pods go, as its pod template says. */
export interface DaemonPlacement {
  /** The node selector. */
  nodeSelector: Record<string, string>;
  /** The tolerations. */
  tolerations: Toleration[];
}

/**
 * Reads the DaemonSet's pods, how many nodes it targets and its placement.
 *
 * @param kube the client
 * @param options namespace and name
 * @returns the desired count (undefined until the controller has counted) and the pods
 */
export async function daemonPods(
  kube: KubeClient,
  options: { namespace: string; name?: string; signal?: AbortSignal },
): Promise<{ desired: number | undefined; pods: DaemonPodState[]; placement?: DaemonPlacement }> {
  const { namespace, name = DEFAULT_DAEMON_NAME } = options;
  const { ds, pods } = await readDaemonSetAndPods(kube, { ...options, namespace, name });
  const status = ds?.status as
    | { desiredNumberScheduled?: number; observedGeneration?: number }
    | undefined;
  const generation = (ds?.metadata as { generation?: number } | undefined)?.generation ?? 0;
  const counted = ds !== undefined && status?.observedGeneration !== undefined &&
    status.observedGeneration >= generation;
  const template = (ds?.spec as { template?: { spec?: Partial<DaemonPlacement> } } | undefined)
    ?.template?.spec;
  return {
    ...(template
      ? {
        placement: {
          nodeSelector: template.nodeSelector ?? {},
          tolerations: template.tolerations ?? [],
        },
      }
      : {}),
    desired: counted ? status?.desiredNumberScheduled ?? 0 : undefined,
    pods: pods.filter((p) => !p.metadata?.deletionTimestamp).map(podState).sort((a, b) =>
      a.node.localeCompare(b.node)
    ),
  };
}

/**
 * Installs the daemon: pre-flight reads and gate (cluster untouched on failure), creates in
 * order through a ledger (cleaned up by UID on any failure or signal), then waits for the pods.
 *
 * @param deps client, logger, clock, randomness
 * @param options placement, pod knobs, wait bounds, signal
 * @returns what was created and the pods' readiness
 * @throws {PermissionError} when the gate finds missing permissions (nothing created)
 * @throws {ConflictError} when the daemon is already installed
 * @throws {InterruptedError} on SIGINT/SIGTERM (after cleanup)
 */
export async function installDaemonSet(
  deps: InstallDeps,
  options: InstallOptions,
): Promise<InstallResult> {
  const { kube, log } = deps;
  const { name = DEFAULT_DAEMON_NAME } = options;
  const { namespace } = options;
  const runId = newRunId(deps.now(), deps.randomHex);
  const invocationId = newInvocationId(deps.randomHex);
  const {
    timeoutMs: _timeout,
    noWait: _noWait,
    pollMs: _poll,
    signal: _signal,
    createNamespace: _createNamespace,
    ...daemonOptions
  } = options;
  const { rendered, namespaceState, serviceMonitor, ca } = await preflight(deps, options, {
    daemonOptions,
    runId,
    invocationId,
  });
  // Logged once the inputs are proved and the install is about to write (not for bad input).
  log.info(`daemon install: runID=${runId}`, { namespace, name });
  if (namespaceState === "absent") await createNamespaceIfAbsent({ kube, log }, namespace);
  const ledger = new Ledger(kube, {
    // What the daemon's and the signer's objects share (all but the component) proves them ours.
    labels: installProofLabels(rendered, { name, runId, invocationId }),
    runIdLabel: LABEL_RUN_ID,
    invocationIdLabel: LABEL_INVOCATION_ID,
  });
  await createInOrder(deps, ledger, rendered, options);
  log.info("daemon installed", { namespace, name, objects: ledger.entries.length });
  if (daemonOptions.service !== false) {
    log.info(
      serviceMonitor
        ? "scrape: ServiceMonitor created for the headless Service (monitoring.coreos.com/v1 is served)"
        : "scrape: no ServiceMonitor CRD (monitoring.coreos.com/v1); the headless Service carries prometheus.io/scrape annotations instead",
      { service: `${namespace}/${name}`, port: options.port ?? DEFAULT_DAEMON_PORT },
    );
  }
  if (options.noWait) {
    return { runId, created: ledger.entries, desired: 0, pods: [], ready: true };
  }
  return { runId, created: ledger.entries, ...await waitForInstall(deps, ledger, options, ca) };
}

/**
 * The install's reads, render and checks before anything is written, on the interruptible client
 * when there is one: a signal here ends the install at once (exit 130), nothing to clean up.
 */
async function preflight(
  deps: InstallDeps,
  options: InstallOptions,
  ids: { daemonOptions: DaemonSetOptions; runId: string; invocationId: string },
): Promise<{
  rendered: RenderedDaemonSet;
  namespaceState: Awaited<ReturnType<typeof checkNamespace>>;
  serviceMonitor: boolean;
  ca: DaemonCa;
}> {
  const pre: InstallDeps = deps.preflightKube ? { ...deps, kube: deps.preflightKube } : deps;
  const { kube, log } = pre;
  const { name = DEFAULT_DAEMON_NAME, namespace, signal } = options;
  const { daemonOptions, runId, invocationId } = ids;
  try {
    const serviceMonitor = daemonOptions.service !== false &&
      (daemonOptions.serviceMonitor ?? await hasServiceMonitorCrd(kube).catch((error) => {
        interrupted(signal);
        log.warn("could not ask the API server for the ServiceMonitor CRD; none is created", {
          error: error instanceof Error ? error.message.split("\n")[0] : String(error),
        });
        return false;
      }));
    const ca = makeDaemonCa({ now: deps.now() });
    const baselineConfigMaps = await keptBaselines(pre, { namespace, name, caCert: ca.caCert });
    const rendered = renderDaemonSet({
      ...daemonOptions,
      baselineConfigMaps,
      serviceMonitor,
      nodeBoundTokens: await bindsTokensToNodes(pre),
      ca,
      runId,
      invocationId,
    });
    const namespaceState = await checkBeforeInstall(pre, options, rendered);
    if (daemonOptions.architectures) {
      await checkDaemonArchitectures(pre, options, rendered, daemonOptions.architectures);
    }
    interrupted(signal);
    return { rendered, namespaceState, serviceMonitor, ca };
  } catch (error) {
    // A request the signal cut short (or a check it failed) is the interrupt it is.
    interrupted(signal);
    throw error;
  }
}

/**
 * Waits for the daemons (rolling the install back when their image cannot run) and then, within
 * the same deadline, for a signer replica.
 */
async function waitForInstall(
  deps: InstallDeps,
  ledger: Ledger,
  options: InstallOptions,
  ca: DaemonCa,
): Promise<Omit<InstallResult, "runId" | "created">> {
  const { name = DEFAULT_DAEMON_NAME, timeoutMs = 120_000, pollMs = 1000, signal } = options;
  const { namespace } = options;
  const started = deps.now().getTime();
  const wait = await waitForPods(deps, { namespace, name, timeoutMs, pollMs, signal, ca });
  if (wait.pullFailed) {
    throw await rollBackPullFailure(deps, ledger, options, wait.pullFailed);
  }
  if (wait.foreign) {
    throw await rollBackPullFailure(deps, ledger, options, wait.foreign, {
      why: "the daemon's image runs another program; removing what the install created",
      message: `Cannot install the daemon '${namespace}/${name}': ${
        foreignDaemonMessage(wait.foreign, options.image)
      }`,
      fix: AGENT_IDENTITY_FIX,
    });
  }
  const { pullFailed: _pull, foreign: _foreign, ...result } = wait;
  if (options.signer === false) return result;
  const signer = await waitForSigner(deps, {
    namespace,
    name,
    until: started + timeoutMs,
    pollMs,
    signal,
  });
  return { ...result, ready: wait.ready && signer.available > 0, signer };
}

/** The labels every object of this install carries, the daemon's and the signer's alike. */
function installProofLabels(
  rendered: RenderedDaemonSet,
  identity: { name: string; runId: string; invocationId: string },
): Record<string, string> {
  const signerSide = signerLabels(identity);
  return Object.fromEntries(
    Object.entries(rendered.labels).filter(([key, value]) => signerSide[key] === value),
  );
}

/**
 * Waits, within the install's deadline, for one signer replica to be available (a candidate for
 * its Lease): a node that joins later is then signed in with no CLI. Says once when it is not.
 */
async function waitForSigner(
  deps: InstallDeps,
  options: {
    namespace: string;
    name: string;
    until: number;
    pollMs: number;
    signal: AbortSignal | undefined;
  },
): Promise<SignerState> {
  const sleep = deps.sleep ?? sleepFor;
  for (;;) {
    const state: SignerState = await readSignerState(deps.kube, {
      namespace: options.namespace,
      name: options.name,
      ...(options.signal ? { signal: options.signal } : {}),
    }).catch((error) => ({
      installed: true,
      desired: 0,
      ready: 0,
      available: 0,
      unknown: error instanceof Error ? error.message.split("\n")[0] ?? "" : String(error),
    }));
    if (state.available > 0) {
      deps.log.info("signer available", {
        replicas: `${state.available}/${state.desired}`,
        leader: state.leader?.pod ?? "(electing)",
      });
      return state;
    }
    if (deps.now().getTime() >= options.until || options.signal?.aborted) {
      deps.log.warn(
        "the in-cluster signer has no available replica; nodes that join later wait for 'aicr daemonset fetch'",
        {
          replicas: `${state.ready}/${state.desired}`,
          ...(state.unknown ? { error: state.unknown } : {}),
          remedy: `kubectl -n ${options.namespace} describe deployment ${signerName(options.name)}`,
        },
      );
      return state;
    }
    await sleep(options.pollMs, options.signal);
  }
}

/**
 * Baselines outlive an uninstall: a re-install (or an upgrade) lets the daemons read those that
 * exist and that its CA verifies (one planted with the right labels, edited, or signed by another
 * install's CA is not granted: said with the remedy).
 *
 * @param deps client and logger
 * @param options the daemon and its CA's certificate
 * @returns the names of the baseline ConfigMaps its daemons may read
 */
export async function keptBaselines(
  deps: InstallDeps,
  options: { namespace: string; name: string; caCert: string },
): Promise<string[]> {
  const { namespace, name, caCert } = options;
  const found = await deps.kube.listAll("ConfigMap", namespace, {
    labelSelector: formatLabelSelector(baselineLabels(name)),
    timeoutMs: 10_000,
  }).catch(() => []);
  return grantableBaselines(deps.log, found, { caCert, namespace });
}

/**
 * The install's pre-flight, before anything is written: the daemon is not installed yet, the
 * namespace is usable, and the gate passes.
 *
 * @returns whether the namespace exists or must be created
 * @throws {ConflictError} when the daemon is already installed
 * @throws {PermissionError} when the gate finds missing permissions
 */
async function checkBeforeInstall(
  deps: InstallDeps,
  options: InstallOptions,
  rendered: RenderedDaemonSet,
): Promise<Awaited<ReturnType<typeof checkNamespace>>> {
  const { kube, log } = deps;
  const { name = DEFAULT_DAEMON_NAME, namespace, signal } = options;
  const [existing, namespaceState] = await Promise.all([
    kube.get("DaemonSet", namespace, name, { timeoutMs: 10_000 }).catch((error) => {
      if (error instanceof KubeApiError && (error.status === 401 || error.status === 403)) {
        return undefined; // the gate reports the missing 'get daemonsets.apps'
      }
      throw error;
    }),
    checkNamespace(kube, namespace, {
      ...(signal ? { signal } : {}),
      createIfAbsent: options.createNamespace ?? false,
    }),
  ]);
  if (existing) throw alreadyInstalled(namespace, name);
  await runGate(createAccessReviewer(kube), {
    namespace,
    mode: "prefix",
    serviceAccount: "",
    ownsOutput: false,
    caller: installCallerChecks(rendered, namespace),
    ...(namespaceState === "absent" ? { extraCaller: [CREATE_NAMESPACE_CHECK] } : {}),
    log,
    concurrency: 64,
  });
  return namespaceState;
}

/**
 * Names the nodes of the DaemonSet's node selector that its arch affinity leaves out (a usage
 * error when it leaves out every one), before anything is written. A node list the API refuses or
 * does not answer is no reason to stop: the install goes on without the note.
 */
async function checkDaemonArchitectures(
  deps: InstallDeps,
  options: InstallOptions,
  rendered: RenderedDaemonSet,
  architectures: readonly string[],
): Promise<void> {
  const daemonSet = rendered.objects.find((o) => o.kind === "DaemonSet")?.manifest as
    | { spec?: { template?: { spec?: { nodeSelector?: Record<string, string> } } } }
    | undefined;
  const selector = formatLabelSelector(daemonSet?.spec?.template?.spec?.nodeSelector ?? {});
  try {
    await checkArchitectures(deps.kube, deps.log, {
      selector,
      architectures,
      image: options.image,
      who: "the daemon",
      nodes: "node it targets",
      leftOut: "the daemon leaves out the nodes of an architecture the image lacks",
      ...(options.signal ? { signal: options.signal } : {}),
    });
  } catch (error) {
    if (error instanceof UsageError) throw error;
    interrupted(options.signal);
    deps.log.debug("could not list the nodes by architecture", {
      error: error instanceof Error ? error.message.split("\n")[0] : String(error),
    });
  }
}

/** Creates the rendered objects in order; on any failure or signal, removes what was created. */
async function createInOrder(
  deps: InstallDeps,
  ledger: Ledger,
  rendered: RenderedDaemonSet,
  options: InstallOptions,
): Promise<void> {
  const { log } = deps;
  const { name = DEFAULT_DAEMON_NAME, namespace, signal } = options;
  try {
    for (const object of rendered.objects) {
      interrupted(signal);
      // A create in flight is not aborted (its outcome would be unknown); the next one is not sent.
      await ledger.create(object.kind, object.manifest);
    }
    interrupted(signal);
  } catch (error) {
    log.warn("install failed; removing what it created", {
      error: error instanceof Error ? error.message.split("\n")[0] : String(error),
    });
    const outcomes = await ledger.cleanup({ log });
    const left = outcomes.filter((o) => o.result === "kept" || o.result === "failed");
    if (left.length > 0) {
      log.warn("install cleanup left objects behind", {
        objects: left.map((o) => `${o.entry.kind}/${o.entry.name}`).join(","),
        remedy: `aicr daemonset uninstall -n ${namespace}`,
      });
    }
    if (error instanceof KubeApiError && error.isAlreadyExists) {
      throw alreadyInstalled(namespace, name, error);
    }
    throw error;
  }
}

/**
 * The image will not come without a human: waiting out --timeout helps nobody, and a failed
 * install cleans up after itself like any other failure path.
 *
 * @returns the error to throw, saying what the rollback did
 */
async function rollBackPullFailure(
  deps: InstallDeps,
  ledger: Ledger,
  options: InstallOptions,
  failed: DaemonPodState,
  instead?: { why: string; message: string; fix: readonly ErrorText[] },
): Promise<DaemonImagePullError> {
  const { log } = deps;
  const { name = DEFAULT_DAEMON_NAME, namespace } = options;
  log.warn(
    instead?.why ?? "the daemon's image cannot be pulled; removing what the install created",
    {
      node: failed.node,
      reason: failed.detail ?? "",
    },
  );
  const outcomes = await ledger.cleanup({ log });
  const left = outcomes.filter((o) => o.result === "kept" || o.result === "failed");
  return new DaemonImagePullError(
    instead?.message ??
      `Cannot install the daemon '${namespace}/${name}': its image could not be pulled on node '${failed.node}' (${failed.detail})`,
    [
      ...(instead ? instead.fix : []),
      ...(!instead && failed.waitingMessage ? [`  ${failed.waitingMessage}`] : []),
      ...(instead ? [] : pullMeaning(failed.waitingMessage, options.imagePullSecrets ?? [])),
      ...(instead
        ? []
        : [(option: (o: string) => string) =>
          `  check ${option("image")} and ${
            option("imagePullSecret")
          }, or mirror the image for air-gapped clusters`]),
      left.length === 0
        ? `  the install was rolled back: ${outcomes.length} object(s) removed`
        : `  the rollback left ${left.length} object(s); remove them with: aicr daemonset uninstall -n ${namespace}`,
    ],
  );
}

function pullMeaning(message: string | undefined, secrets: readonly string[]): ErrorText[] {
  const meaning = explainPullFailure(message, secrets);
  return meaning ? [meaning] : [];
}

/** The daemon's image cannot be pulled: the install ended early and was rolled back (exit 8). */
export class DaemonImagePullError extends ToolError {
  /**
   * @param message which node and why
   * @param details the pull error, the fix, what the rollback did
   */
  constructor(message: string, details: readonly ErrorText[]) {
    super(message, "internal", 500, { details });
    this.name = "DaemonImagePullError";
  }
}

function alreadyInstalled(namespace: string, name: string, cause?: unknown): ConflictError {
  return new ConflictError(
    `Cannot install the daemon '${namespace}/${name}': it is already installed (or an object of its name exists)`,
    {
      ...(cause ? { cause } : {}),
      details: [
        `  upgrade it in place: aicr daemonset upgrade -n ${namespace} (its settings kept; flags given change them)`,
        `  or remove it first: aicr daemonset uninstall -n ${namespace}`,
      ],
    },
  );
}

async function waitForPods(
  deps: InstallDeps,
  options: {
    namespace: string;
    name: string;
    timeoutMs: number;
    pollMs: number;
    signal: AbortSignal | undefined;
    ca: DaemonCa;
  },
): Promise<
  {
    desired: number;
    pods: DaemonPodState[];
    ready: boolean;
    pullFailed?: DaemonPodState;
    /** A pod whose program exited on aicr's `daemon` verb: the image is not aicr's. */
    foreign?: DaemonPodState;
  }
> {
  const { kube, log, now } = deps;
  const sleep = deps.sleep ?? sleepFor;
  const started = now().getTime();
  const deadline = started + options.timeoutMs;
  const imagePullFailed = createImagePullCheck();
  const signFailuresSaid = new Set<string>();
  const progress = createWaitProgress(log, started, options.timeoutMs);
  const unschedulableSaid = new Map<string, string>();
  let seen: { desired: number; pods: DaemonPodState[] } = { desired: 0, pods: [] };
  for (;;) {
    interruptedWait(options.signal);
    const { desired, pods } = await daemonPods(kube, {
      namespace: options.namespace,
      name: options.name,
      ...(options.signal ? { signal: options.signal } : {}),
    }).catch((error) => {
      log.debug("could not read the daemon's pods", { error: String(error) });
      return { desired: undefined, pods: seen.pods };
    });
    if (desired !== undefined) {
      seen = { desired, pods };
      requireCertificates(pods, await signWhileWaiting(deps, options, signFailuresSaid));
      const ready = pods.filter((p) => p.ready).length;
      const at = now().getTime();
      progress(ready, desired, at);
      sayUnschedulable(log, pods, unschedulableSaid);
      const pullFailed = pods.find((p) => imagePullFailed(p.pod, p.detail, at));
      if (pullFailed) return { ...seen, ready: false, pullFailed };
      const foreign = pods.find((p) => p.exited && isForeignDaemonExit(p.exited.line));
      if (foreign) return { ...seen, ready: false, foreign };
      if (desired === 0) {
        log.warn("no node matches the daemon's node selector and tolerations", {
          remedy: (option) => `pass ${option("allNodes")} or ${option("nodeSelector")}`,
        });
        return { ...seen, ready: true };
      }
      if (ready >= desired && pods.length >= desired) return { ...seen, ready: true };
    }
    if (now().getTime() >= deadline) {
      const notReady = seen.pods.filter((p) => !p.ready);
      log.warn("some of the daemon's pods are not Ready", {
        pods: notReady.map((p) => `${p.node}:${p.detail ?? ""}`).join(","),
        missing: Math.max(0, seen.desired - seen.pods.length),
      });
      return { ...seen, ready: false };
    }
    await sleep(options.pollMs, options.signal);
  }
}

/**
 * Ready, and serving its own certificate: a real kubelet's probe on /readyz says both; the
 * certificate is checked here too, from the signed request of that pod.
 */
function requireCertificates(pods: DaemonPodState[], issued: Set<string>): void {
  for (const pod of pods) {
    if (pod.ready && !(pod.uid && issued.has(pod.uid))) {
      pod.ready = false;
      pod.detail = "awaiting its serving certificate";
    }
  }
}

/** The wait's progress: a line on every change, and a heartbeat while nothing changes. */
function createWaitProgress(
  log: Logger,
  started: number,
  timeoutMs: number,
): (ready: number, desired: number, at: number) => void {
  let last = "";
  let lastAt = started;
  return (ready, desired, at) => {
    const line = `${ready}/${desired}`;
    if (line === last && at - lastAt < HEARTBEAT_MS) return;
    log.info("waiting for the daemon's pods", {
      ready,
      desired,
      elapsed: `${Math.round((at - started) / 1000)}s`,
      timeout: `${Math.round(timeoutMs / 1000)}s`,
    });
    last = line;
    lastAt = at;
  };
}

/** Says why a daemon pod cannot be scheduled, once per pod and reason. */
function sayUnschedulable(
  log: Logger,
  pods: readonly DaemonPodState[],
  said: Map<string, string>,
): void {
  for (const pod of pods) {
    if (pod.unschedulable === undefined || said.get(pod.pod) === pod.unschedulable) continue;
    log.warn("a daemon pod cannot be scheduled", {
      pod: pod.pod,
      reason: pod.unschedulable,
      remedy: (option) =>
        `check ${option("nodeSelector")}, ${option("allNodes")} and ${
          option("toleration")
        } against the nodes`,
    });
    said.set(pod.pod, pod.unschedulable);
  }
}

/**
 * Signs the daemons' pending requests during the wait; a failure is said (once per message) and
 * the wait goes on: a pod without a certificate stays not Ready and is named at the end.
 *
 * @returns the UIDs of the pods holding a certificate
 */
async function signWhileWaiting(
  deps: InstallDeps,
  options: { namespace: string; name: string; signal: AbortSignal | undefined; ca: DaemonCa },
  said: Set<string>,
): Promise<Set<string>> {
  const { namespace, name, signal, ca } = options;
  try {
    const outcome: SignOutcome = await signPendingCsrs(deps, {
      namespace,
      name,
      ca,
      ...(signal ? { signal } : {}),
    });
    return outcome.issuedPods;
  } catch (error) {
    const message = error instanceof Error ? error.message.split("\n")[0] ?? "" : String(error);
    if (!said.has(message)) {
      said.add(message);
      deps.log.warn("cannot sign the daemons' certificate requests yet", { error: message });
    }
    return new Set();
  }
}

function interruptedWait(signal: AbortSignal | undefined): void {
  if (signal?.aborted) {
    throw new InterruptedError(
      `Cannot finish waiting for the daemon's pods: interrupted (${
        String(signal.reason)
      }); the daemon stays installed`,
    );
  }
}
