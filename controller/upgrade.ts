/**
 * `aicr daemonset upgrade`: the install brought to this build (or `--image`) in place. Every
 * object is re-rendered from the same flags as install and server-side applied under one field
 * manager (`aicr`, the manager install creates with), so what a newer build no longer sets is
 * removed; the CA (Secret `<name>-signer`) and the signer's Lease are kept as they are, and the
 * daemons keep reading the baselines their CA verifies. The rolling update of the DaemonSet and
 * of the signer's Deployment is waited on; when it fails (an image that cannot be pulled, a pod
 * not Ready by the deadline, a signal) every object is put back as it was read before the upgrade
 * (objects it created are deleted by UID) and the error says why and to which image it rolled
 * back.
 *
 * @module
 */
import { Buffer } from "node:buffer";
import {
  ConflictError,
  type ErrorText,
  InterruptedError,
  NotFoundError,
  ToolError,
} from "../errors.ts";
import type { ExitCodeName } from "../errors.ts";
import { sleep as sleepFor } from "../io.ts";
import type { KindName, KubeClient, KubeObject } from "../kube/mod.ts";
import { KubeApiError, RESOURCES } from "../kube/mod.ts";
import {
  daemonCaConfigMapName,
  daemonSignerSecretName,
  DEFAULT_DAEMON_NAME,
  formatLabelSelector,
  isDaemonObject,
  LABEL_MANAGED_BY,
  newInvocationId,
  newRunId,
  signerName,
  signerSelectorLabels,
} from "../manifests/mod.ts";
import { createAccessReviewer, runGate } from "../rbac/mod.ts";
import { signPendingCsrs } from "../csr/mod.ts";
import type { DaemonCa } from "../x509.ts";
import {
  bindsTokensToNodes,
  daemonPods,
  hasServiceMonitorCrd,
  installCallerChecks,
  keptBaselines,
  resourceOf,
} from "./install.ts";
import type { DaemonPodState, InstallDeps } from "./install.ts";
import { renderDaemonSet } from "./render.ts";
import type { DaemonSetOptions, RenderedObject } from "./render.ts";
import type { RenderCa } from "./render_ca.ts";
import { createImagePullCheck, explainPullFailure } from "./wait.ts";
import { resolveInstallSettings } from "./install_settings.ts";
import type { UpgradeSettings } from "./install_settings.ts";

/** Options of {@link upgradeDaemonSet}: what the daemon is (install's flags) and the wait. */
export interface UpgradeOptions extends DaemonSetOptions {
  /**
   * The command line's settings, merged over those the install recorded on its DaemonSet
   * (`aicr.run/install-settings`): each one not given is the install's. Without them, or on an
   * install that recorded none, the daemon is these options alone.
   */
  settings?: UpgradeSettings<DaemonSetOptions>;
  /** How long the rolling update may take before it is rolled back. @default 300000 */
  timeoutMs?: number;
  /** Poll interval while waiting. @default 1000 */
  pollMs?: number;
  /** SIGINT/SIGTERM: the upgrade is rolled back, then this ends. */
  signal?: AbortSignal;
}

/** What an upgrade changed. */
export interface UpgradeResult {
  /** The upgrade's run ID (labels). */
  runId: string;
  /** The daemon's image before. */
  fromImage: string;
  /** The daemon's image now. */
  toImage: string;
  /** Each object applied: created by this upgrade, or updated. */
  applied: { kind: KindName; name: string; change: "created" | "updated" }[];
  /** The daemons after the rollout. */
  pods: DaemonPodState[];
}

/** A rollout that failed and was rolled back: exit 8 for an image, 5 for a deadline. */
export class DaemonUpgradeError extends ToolError {
  /**
   * @param message what failed, and that it was rolled back
   * @param code the exit code's name
   * @param details the pull error, the fix, what the rollback did
   */
  constructor(message: ErrorText, code: ExitCodeName, details: readonly ErrorText[]) {
    super(message, code, code === "timeout" ? 504 : 500, { details });
    this.name = "DaemonUpgradeError";
  }
}

/** Why a rollout ended without success. */
/** A pod that cannot pull its image: a daemon's, or the signer's. */
type PulledPod = { node: string; pod: string; detail?: string; waitingMessage?: string };

type RolloutFailure =
  | { kind: "pull"; pod: DaemonPodState | PulledPod }
  | { kind: "timeout"; waiting: string[] }
  | { kind: "interrupted" };

/** An object as it can be applied back: its intent, without what the server keeps. */
export function restorable(object: KubeObject): KubeObject {
  const { metadata, status: _status, ...rest } = object;
  return {
    ...rest,
    metadata: {
      ...(metadata?.name ? { name: metadata.name } : {}),
      ...(metadata?.namespace ? { namespace: metadata.namespace } : {}),
      ...(metadata?.labels ? { labels: metadata.labels } : {}),
      ...(metadata?.annotations ? { annotations: metadata.annotations } : {}),
    },
  };
}

function firstImage(object: KubeObject | undefined): string {
  const spec = object?.spec as
    | { template?: { spec?: { containers?: { image?: string }[] } } }
    | undefined;
  return spec?.template?.spec?.containers?.[0]?.image ?? "";
}

function decode(value: string | undefined): string {
  return value === undefined ? "" : Buffer.from(value, "base64").toString("utf8");
}

/**
 * The install's CA: the pair from Secret `<name>-signer` when the caller may read it, else the
 * certificate from ConfigMap `<name>-ca` (the key kept elsewhere; then only a signer signs).
 */
async function readInstallCa(
  kube: KubeClient,
  scope: { namespace: string; name: string },
): Promise<RenderCa> {
  const secret = await kube.get<KubeObject & { data?: Record<string, string> }>(
    "Secret",
    scope.namespace,
    daemonSignerSecretName(scope.name),
    { timeoutMs: 10_000 },
  ).catch((error) => {
    if (error instanceof KubeApiError && (error.status === 401 || error.status === 403)) {
      return undefined;
    }
    throw error;
  });
  const caCert = decode(secret?.data?.["tls.crt"]);
  const caKey = decode(secret?.data?.["tls.key"]);
  if (caCert && caKey) return { caCert, caKey };
  const cm = await kube.get<KubeObject & { data?: Record<string, string> }>(
    "ConfigMap",
    scope.namespace,
    daemonCaConfigMapName(scope.name),
    { timeoutMs: 10_000 },
  );
  const cert = cm?.data?.["ca.crt"];
  if (!cert) {
    throw new NotFoundError(
      `Cannot upgrade the daemon '${scope.namespace}/${scope.name}': neither Secret '${
        daemonSignerSecretName(scope.name)
      }' nor ConfigMap '${daemonCaConfigMapName(scope.name)}' holds its CA`,
      { details: [`  reinstall it: aicr daemonset uninstall, then install -n ${scope.namespace}`] },
    );
  }
  return { caCert: cert };
}

/** Where each rendered object lives. */
function namespaceOf(object: RenderedObject, namespace: string): string | undefined {
  return RESOURCES[object.kind].namespaced ? namespace : undefined;
}

/**
 * Upgrades the daemon in place (see the module's doc).
 *
 * @param deps client, logger, clock, randomness, sleep
 * @param options what the daemon is, the wait's bounds, a signal
 * @returns what changed and the daemons after the rollout
 * @throws {NotFoundError} when the daemon is not installed
 * @throws {ConflictError} when the DaemonSet is not aicr's (a Helm release: use helm upgrade)
 * @throws {PermissionError} when the gate finds missing permissions (nothing written)
 * @throws {DaemonUpgradeError} when the rollout failed (rolled back)
 * @throws {InterruptedError} on SIGINT/SIGTERM (rolled back)
 */
export async function upgradeDaemonSet(
  deps: InstallDeps,
  options: UpgradeOptions,
): Promise<UpgradeResult> {
  const { kube, log } = deps;
  const { name = DEFAULT_DAEMON_NAME, namespace, signal } = options;
  const read = await readBeforeUpgrade(deps, options, name);
  const { existing, runId, ca, objects, before } = read;
  options = read.options;
  const fromImage = firstImage(existing);
  const toImage = options.image;
  log.info(`daemon upgrade: runID=${runId}`, { namespace, name, from: fromImage, to: toImage });
  const applied: UpgradeResult["applied"] = [];
  const appliedIndexes: number[] = [];
  let failure: RolloutFailure | undefined;
  let cause: unknown;
  try {
    for (const [i, object] of objects.entries()) {
      if (signal?.aborted) throw new InterruptedError("Upgrade interrupted");
      const previous = before[i];
      // The Lease's record is its holder's: created when absent, never rewritten.
      if (object.kind === "Lease" && previous) continue;
      if (previous) {
        await kube.adoptFields(
          object.kind,
          namespaceOf(object, namespace),
          previous.metadata?.name ?? "",
        );
      }
      appliedIndexes.push(i);
      await kube.apply(object.kind, object.manifest);
      applied.push({
        kind: object.kind,
        name: object.manifest.metadata.name,
        change: previous ? "updated" : "created",
      });
    }
    log.info("daemon upgrade applied; waiting for the rolling update", {
      objects: applied.length,
      timeout: `${Math.round((options.timeoutMs ?? 300_000) / 1000)}s`,
    });
    const rollout = await waitForRollout(deps, { ...options, name, image: toImage, ca });
    if ("failure" in rollout) failure = rollout.failure;
    else {
      log.info("daemon upgraded", {
        namespace,
        image: toImage,
        nodes: rollout.pods.length,
        runID: runId,
      });
      return { runId, fromImage, toImage, applied, pods: rollout.pods };
    }
  } catch (error) {
    cause = error;
    failure = signal?.aborted ? { kind: "interrupted" } : undefined;
  }
  throw await rollBackAndExplain(deps, options, {
    name,
    ca,
    fromImage,
    toImage,
    failure,
    cause,
    restore: { namespace, objects, before, appliedIndexes },
  });
}

/**
 * What the upgrade reads and checks before it writes, on the interruptible client when there is
 * one: a signal here ends the upgrade at once (exit 130), nothing changed, nothing to roll back.
 */
async function readBeforeUpgrade(
  deps: InstallDeps,
  options: UpgradeOptions,
  name: string,
): Promise<{
  existing: KubeObject;
  options: UpgradeOptions;
  runId: string;
  ca: RenderCa;
  objects: RenderedObject[];
  before: (KubeObject | undefined)[];
}> {
  const pre: InstallDeps = deps.preflightKube ? { ...deps, kube: deps.preflightKube } : deps;
  const { namespace, signal } = options;
  try {
    const existing = await readUpgradable(pre.kube, namespace, name);
    const { settings, ...given } = options;
    const resolved = settings
      ? resolveInstallSettings(existing, settings, { namespace, name })
      : undefined;
    const effective: UpgradeOptions = resolved
      ? { ...given, ...resolved.options, namespace, installSettings: resolved.settings }
      : given;
    const { runId, ca, objects } = await renderUpgrade(pre, effective, name);
    sayPlacementChanges(deps, existing, objects, resolved?.recorded ?? false);
    const before = await Promise.all(
      objects.map((o) =>
        pre.kube.get<KubeObject>(o.kind, namespaceOf(o, namespace), o.manifest.metadata.name, {
          timeoutMs: 10_000,
        })
      ),
    );
    if (signal?.aborted) throw signal.reason;
    return { existing, options: effective, runId, ca, objects, before };
  } catch (error) {
    // A request the signal cut short is the interrupt it is: nothing was changed.
    if (signal?.aborted) {
      throw new InterruptedError(
        `Cannot upgrade the daemon '${namespace}/${name}': interrupted (${String(signal.reason)})`,
      );
    }
    throw error;
  }
}

/** The install rendered anew from `options` with the CA kept, once the gate allows patching it. */
async function renderUpgrade(
  deps: InstallDeps,
  options: UpgradeOptions,
  name: string,
): Promise<{ runId: string; ca: RenderCa; objects: RenderedObject[] }> {
  const { kube, log } = deps;
  const { namespace } = options;
  const runId = newRunId(deps.now(), deps.randomHex);
  const invocationId = newInvocationId(deps.randomHex);
  const { timeoutMs: _t, pollMs: _p, signal: _s, settings: _settings, ...daemonOptions } = options;
  const ca = await readInstallCa(kube, { namespace, name });
  const serviceMonitor = daemonOptions.service !== false &&
    (daemonOptions.serviceMonitor ?? await hasServiceMonitorCrd(kube).catch(() => false));
  const rendered = renderDaemonSet({
    ...daemonOptions,
    baselineConfigMaps: await keptBaselines(deps, { namespace, name, caCert: ca.caCert }),
    serviceMonitor,
    nodeBoundTokens: await bindsTokensToNodes(deps),
    ca,
    runId,
    invocationId,
  });
  // The CA Secret is kept as it is: its key is never rewritten (it is already what was read).
  const objects = rendered.objects.filter((o) => o.kind !== "Secret");
  await runGate(createAccessReviewer(kube), {
    namespace,
    mode: "prefix",
    serviceAccount: "",
    ownsOutput: false,
    caller: [
      ...installCallerChecks(rendered, namespace),
      ...objects.map((o) => ({ verb: "patch", ...resourceOf(o.kind, namespace) })),
    ],
    log,
    concurrency: 64,
  });
  return { runId, ca, objects };
}

/** The installed DaemonSet, refused when absent or when aicr did not install it. */
async function readUpgradable(
  kube: InstallDeps["kube"],
  namespace: string,
  name: string,
): Promise<KubeObject> {
  const existing = await kube.get<KubeObject>("DaemonSet", namespace, name, { timeoutMs: 10_000 });
  if (!existing) {
    throw new NotFoundError(
      `Cannot upgrade the daemon '${namespace}/${name}': it is not installed`,
      { details: [`  install it: aicr daemonset install -n ${namespace}`] },
    );
  }
  const labels = existing.metadata?.labels;
  if (!isDaemonObject(labels, name) || labels?.[LABEL_MANAGED_BY] !== "aicr") {
    throw new ConflictError(
      `Cannot upgrade the daemon '${namespace}/${name}': its DaemonSet is managed by '${
        labels?.[LABEL_MANAGED_BY] ?? "(nobody)"
      }', not by aicr`,
      { details: ["  a Helm release upgrades with: helm upgrade <release> charts/aicr"] },
    );
  }
  return existing;
}

/** Rolls a failed upgrade back and returns the error that says what failed and what is left. */
async function rollBackAndExplain(
  deps: InstallDeps,
  options: UpgradeOptions,
  state: {
    name: string;
    ca: RenderCa;
    fromImage: string;
    toImage: string;
    failure: RolloutFailure | undefined;
    cause: unknown;
    restore: Parameters<typeof rollBack>[1];
  },
): Promise<Error> {
  const { name, ca, fromImage, toImage, failure, cause } = state;
  const { namespace } = options;
  const restored = await rollBack(deps, state.restore);
  const back = restored.left.length === 0
    ? await waitForRollout(deps, {
      ...options,
      name,
      image: fromImage,
      ca,
      timeoutMs: Math.min(options.timeoutMs ?? 300_000, 120_000),
      signal: undefined,
    })
    : undefined;
  const rolledBack = restored.left.length === 0
    ? `  rolled back to ${fromImage}: ${restored.count} object(s) restored${
      back && "pods" in back
        ? `, ${back.pods.length} daemon(s) Ready`
        : ", its daemons not yet all Ready (aicr daemonset status)"
    }`
    : `  the rollback left ${
      restored.left.join(", ")
    }; check with: aicr daemonset status -n ${namespace}`;
  if (failure?.kind === "interrupted") {
    return new InterruptedError("Upgrade interrupted; rolled back", { details: [rolledBack] });
  }
  if (!failure) {
    const message = cause instanceof Error ? cause.message.split("\n")[0] ?? "" : String(cause);
    return new DaemonUpgradeError(
      `Cannot upgrade the daemon '${namespace}/${name}': ${message}`,
      cause instanceof ToolError ? cause.code : "internal",
      [rolledBack],
    );
  }
  if (failure.kind === "pull") {
    const pod = failure.pod;
    const meaning = explainPullFailure(pod.waitingMessage, options.imagePullSecrets ?? []);
    return new DaemonUpgradeError(
      `Cannot upgrade the daemon '${namespace}/${name}' to ${toImage}: its image could not be pulled on node '${pod.node}' (${
        pod.detail ?? "ErrImagePull"
      })`,
      "internal",
      [
        ...(pod.waitingMessage ? [`  ${pod.waitingMessage}`] : []),
        ...(meaning ? [meaning] : []),
        rolledBack,
      ],
    );
  }
  return new DaemonUpgradeError(
    `Cannot upgrade the daemon '${namespace}/${name}' to ${toImage}: the rolling update did not finish within ${
      Math.round((options.timeoutMs ?? 300_000) / 1000)
    }s`,
    "timeout",
    [...failure.waiting.map((w) => `  ${w}`), rolledBack],
  );
}

/**
 * Says when the upgrade moves the daemons elsewhere than the install did: with the install's
 * settings recorded, only a flag given can (the rest are the install's); without them (an older
 * build's install) the flags or their defaults may.
 */
function sayPlacementChanges(
  deps: InstallDeps,
  existing: KubeObject,
  objects: readonly RenderedObject[],
  recorded: boolean,
): void {
  const rendered = objects.find((o) => o.kind === "DaemonSet")?.manifest as KubeObject | undefined;
  const pick = (o: KubeObject | undefined) => {
    const spec = (o?.spec as { template?: { spec?: Record<string, unknown> } } | undefined)
      ?.template?.spec;
    return {
      nodeSelector: JSON.stringify(spec?.nodeSelector ?? {}),
      tolerations: JSON.stringify(spec?.tolerations ?? []),
      port: JSON.stringify(
        ((spec?.containers as { ports?: unknown }[] | undefined)?.[0])?.ports ?? [],
      ),
    };
  };
  const was = pick(existing);
  const now = pick(rendered);
  for (const key of Object.keys(was) as (keyof typeof was)[]) {
    if (was[key] !== now[key]) {
      deps.log.warn("the upgrade changes where or how the daemons run", {
        field: key,
        from: was[key],
        to: now[key],
        remedy: recorded
          ? "a flag given overrides the install's setting; omit it to keep the install's"
          : "this install recorded no settings: pass the flags the install was given",
      });
    }
  }
}

/** Puts every applied object back as it was read; deletes those the upgrade created. */
async function rollBack(
  deps: InstallDeps,
  options: {
    namespace: string;
    objects: readonly RenderedObject[];
    before: readonly (KubeObject | undefined)[];
    appliedIndexes: readonly number[];
  },
): Promise<{ count: number; left: string[] }> {
  const { kube, log } = deps;
  const left: string[] = [];
  let count = 0;
  log.warn("rolling the upgrade back", { objects: options.appliedIndexes.length });
  for (const i of [...options.appliedIndexes].reverse()) {
    const object = options.objects[i]!;
    const previous = options.before[i];
    const where = namespaceOf(object, options.namespace);
    const id = `${object.kind}/${object.manifest.metadata.name}`;
    try {
      if (previous) {
        await kube.apply(object.kind, restorable(previous), { timeoutMs: 10_000 });
      } else {
        const created = await kube.get<KubeObject>(
          object.kind,
          where,
          object.manifest.metadata.name,
        );
        if (created?.metadata?.uid) {
          await kube.deleteIfUid(
            object.kind,
            where,
            object.manifest.metadata.name,
            created.metadata.uid,
          );
        }
      }
      count++;
    } catch (error) {
      log.warn("could not restore an object", {
        object: id,
        error: error instanceof Error ? error.message.split("\n")[0] : String(error),
      });
      left.push(id);
    }
  }
  return { count, left };
}

interface Workload {
  metadata?: { generation?: number };
  spec?: { replicas?: number };
  status?: {
    observedGeneration?: number;
    desiredNumberScheduled?: number;
    updatedNumberScheduled?: number;
    numberAvailable?: number;
    numberUnavailable?: number;
    replicas?: number;
    updatedReplicas?: number;
    availableReplicas?: number;
  };
}

/** Whether the DaemonSet's rolling update is done: every targeted node runs the new template, available. */
export function daemonSetRolledOut(ds: Workload | undefined): boolean {
  const s = ds?.status;
  if (!ds || !s || (s.observedGeneration ?? -1) < (ds.metadata?.generation ?? 0)) return false;
  const desired = s.desiredNumberScheduled ?? 0;
  return (s.updatedNumberScheduled ?? 0) >= desired && (s.numberAvailable ?? 0) >= desired &&
    (s.numberUnavailable ?? 0) === 0;
}

/** Whether a Deployment's rolling update is done: every replica new and available, no old one left. */
export function deploymentRolledOut(deployment: Workload | undefined): boolean {
  const s = deployment?.status;
  if (!deployment || !s) return false;
  if ((s.observedGeneration ?? -1) < (deployment.metadata?.generation ?? 0)) return false;
  const want = deployment.spec?.replicas ?? 1;
  return (s.updatedReplicas ?? 0) >= want && (s.availableReplicas ?? 0) >= want &&
    (s.replicas ?? 0) === want;
}

interface PodLike {
  metadata?: { name?: string; deletionTimestamp?: string };
  spec?: { nodeName?: string; containers?: { image?: string }[] };
  status?: {
    containerStatuses?: { state?: { waiting?: { reason?: string; message?: string } } }[];
  };
}

/**
 * Waits for the DaemonSet (and the signer's Deployment, when installed) to roll out `image`,
 * signing the new daemons' requests meanwhile when the CA key is at hand; ends early when a pod
 * of that image cannot pull it.
 */
async function waitForRollout(
  deps: InstallDeps,
  options: {
    namespace: string;
    name: string;
    image: string;
    ca: RenderCa;
    timeoutMs?: number;
    pollMs?: number;
    signal?: AbortSignal | undefined;
  },
): Promise<{ pods: DaemonPodState[] } | { failure: RolloutFailure }> {
  const { kube, log, now } = deps;
  const { namespace, name, image, timeoutMs = 300_000, pollMs = 1000, signal } = options;
  const sleep = deps.sleep ?? sleepFor;
  const deadline = now().getTime() + timeoutMs;
  const pullFailed = createImagePullCheck();
  let last = "";
  for (;;) {
    if (signal?.aborted) return { failure: { kind: "interrupted" } };
    const call = { timeoutMs: 10_000, ...(signal ? { signal } : {}) };
    const [ds, deployment, listed, signerPods] = await Promise.all([
      kube.get<KubeObject & Workload>("DaemonSet", namespace, name, call),
      kube.get<KubeObject & Workload>("Deployment", namespace, signerName(name), call),
      daemonPods(kube, { namespace, name, ...(signal ? { signal } : {}) }),
      kube.listAll<KubeObject & PodLike>("Pod", namespace, {
        labelSelector: formatLabelSelector(signerSelectorLabels(name)),
        ...call,
      }),
    ]).catch((error) => {
      if (signal?.aborted) throw error;
      log.debug("could not read the rollout", { error: String(error) });
      return [undefined, undefined, { pods: [] as DaemonPodState[] }, [] as PodLike[]] as const;
    });
    if (options.ca.caKey !== undefined) {
      await signPendingCsrs(deps, {
        namespace,
        name,
        ca: options.ca as DaemonCa,
        ...(signal ? { signal } : {}),
      }).catch(() => undefined);
    }
    const at = now().getTime();
    const badDaemon = listed.pods.find((p) => p.image === image && pullFailed(p.pod, p.detail, at));
    if (badDaemon) return { failure: { kind: "pull", pod: badDaemon } };
    const badSigner = signerPullFailure(
      signerPods,
      image,
      (p, reason) => pullFailed(p, reason, at),
    );
    if (badSigner) return { failure: { kind: "pull", pod: badSigner } };
    const daemonsDone = daemonSetRolledOut(ds) &&
      listed.pods.every((p) => p.image === image && p.ready);
    const signerDone = deployment === undefined || deploymentRolledOut(deployment);
    if (daemonsDone && signerDone) return { pods: listed.pods };
    const waiting = rolloutWaiting(listed.pods, image, signerDone ? undefined : deployment);
    const line = `${listed.pods.filter((p) => p.image === image && p.ready).length}/${
      ds?.status?.desiredNumberScheduled ?? 0
    }`;
    if (line !== last) {
      log.info("waiting for the rolling update", { image, ready: line });
      last = line;
    }
    if (at >= deadline) return { failure: { kind: "timeout", waiting } };
    await sleep(pollMs, signal);
  }
}

/** The signer pod that cannot pull `image`, as a daemon pod's state, if one. */
function signerPullFailure(
  pods: readonly PodLike[],
  image: string,
  pullFailed: (pod: string, reason: string | undefined) => boolean,
): PulledPod | undefined {
  const bad = pods.find((p) => {
    const waiting = p.status?.containerStatuses?.[0]?.state?.waiting;
    return p.spec?.containers?.[0]?.image === image && !p.metadata?.deletionTimestamp &&
      pullFailed(p.metadata?.name ?? "", waiting?.reason);
  });
  if (!bad) return undefined;
  const waiting = bad.status?.containerStatuses?.[0]?.state?.waiting;
  return {
    node: bad.spec?.nodeName ?? "",
    pod: bad.metadata?.name ?? "",
    ...(waiting?.reason ? { detail: waiting.reason } : {}),
    ...(waiting?.message ? { waitingMessage: waiting.message } : {}),
  };
}

/** What the rollout still waits for: daemons not on `image` or not Ready, the signer when not done. */
function rolloutWaiting(
  pods: readonly DaemonPodState[],
  image: string,
  signer: Workload | undefined,
): string[] {
  return [
    ...pods.filter((p) => p.image !== image || !p.ready).map((p) =>
      `${p.node}: ${p.pod} ${
        p.image !== image ? `still ${p.image ?? "?"}` : p.detail ?? "not Ready"
      }`
    ),
    ...(signer === undefined ? [] : [
      `signer: ${signer.status?.updatedReplicas ?? 0}/${signer.spec?.replicas ?? 0} updated, ${
        signer.status?.availableReplicas ?? 0
      } available`,
    ]),
  ];
}
