/**
 * DaemonSet mode, controller side: {@link uninstallDaemonSet} finds the daemon's objects by
 * labels and deletes each by the UID it read (the shared sweep of `aicr cleanup`), deletes the
 * daemons' certificate requests, then checks that nothing is left. The cohort baselines are the
 * operator's data and stay.
 *
 * @module
 */
import { sleep as sleepFor } from "../io.ts";
import { DELETE_ORDER, RESOURCES, sweepObjects } from "../kube/mod.ts";
import type { KindName, KubeObject, SweptObject } from "../kube/mod.ts";
import {
  baselineLabels,
  daemonClusterRoleName,
  daemonReaderClusterRoleName,
  DEFAULT_DAEMON_NAME,
  formatLabelSelector,
  installSweepSelector,
  signerClusterRoleName,
} from "../manifests/mod.ts";
import { createAccessReviewer, creatorChecks, runGate } from "../rbac/mod.ts";
import type { AccessAttributes } from "../rbac/mod.ts";
import { deleteDaemonCsrs } from "../csr/mod.ts";
import { hasServiceMonitorCrd, resourceOf } from "./install.ts";
import type { InstallDeps } from "./install.ts";

/**
 * Kinds an uninstall sweeps, in the ledger's deletion order (the DaemonSet first: its pods
 * follow; bindings before roles). Role and RoleBinding are swept too: a daemon that publishes a
 * ConfigMap has them.
 */
const UNINSTALL_KINDS: readonly KindName[] = DELETE_ORDER.filter((kind) =>
  kind !== "Job" && kind !== "Pod" && kind !== "ServiceMonitor"
);

/** The kinds an uninstall sweeps: ServiceMonitors too where their CRD is served. */
function uninstallKinds(withServiceMonitor: boolean): KindName[] {
  return withServiceMonitor ? ["ServiceMonitor", ...UNINSTALL_KINDS] : [...UNINSTALL_KINDS];
}

/**
 * What the caller must be able to do to uninstall: list and delete every kind the sweep
 * visits, and list the pods it waits for.
 *
 * @param namespace `--namespace`
 * @param kinds the kinds swept @default every kind but ServiceMonitor
 * @returns the questions
 */
export function uninstallCallerChecks(
  namespace: string,
  kinds: readonly KindName[] = UNINSTALL_KINDS,
): AccessAttributes[] {
  return creatorChecks({
    creates: [
      ...kinds.map((kind) => resourceOf(kind, namespace)),
      { group: "certificates.k8s.io", resource: "certificatesigningrequests" },
    ],
    namespace,
    verbs: ["list", "delete"],
    extra: [{ verb: "list", group: "", resource: "pods", namespace }],
  });
}

/** Options of {@link uninstallDaemonSet}. */
export interface UninstallOptions {
  /** `--namespace`. */
  namespace: string;
  /** The daemon's name. @default "aicr-daemon" */
  name?: string;
  /** How long to wait until nothing is left (pods terminating). @default 60000 */
  timeoutMs?: number;
  /** Only list what would be deleted. */
  dryRun?: boolean;
  /** Poll interval. @default 500 */
  pollMs?: number;
}

/** What an uninstall did. */
export interface UninstallResult {
  /** Every object found, with what happened to it. */
  swept: SweptObject[];
  /** The daemons' certificate requests deleted (or found, in a dry run). */
  csrs: string[];
  /** `Kind/name` of whatever is still there at the end (empty when clean). */
  remaining: string[];
}

/**
 * Uninstalls the daemon: the gate (list and delete), then the shared label sweep with
 * UID-pinned deletes (cluster-scoped objects only when their name is this namespace's), then a
 * bounded wait until no labelled object, pod included, is left.
 *
 * @param deps client, logger, clock
 * @param options namespace, name, timeout, dry run
 * @returns what was swept and what remains
 * @throws {PermissionError} when the caller cannot list or delete what the sweep visits
 */
export async function uninstallDaemonSet(
  deps: Pick<InstallDeps, "kube" | "log" | "now" | "sleep">,
  options: UninstallOptions,
): Promise<UninstallResult> {
  const { kube, log } = deps;
  const { name = DEFAULT_DAEMON_NAME, timeoutMs = 60_000, dryRun = false, pollMs = 500 } = options;
  const { namespace } = options;
  const sleep = deps.sleep ?? sleepFor;
  const kinds = uninstallKinds(await hasServiceMonitorCrd(kube).catch(() => false));
  await runGate(createAccessReviewer(kube), {
    namespace,
    mode: "prefix",
    serviceAccount: "",
    ownsOutput: false,
    caller: uninstallCallerChecks(namespace, kinds),
    log,
    concurrency: 64,
  });
  const ours = new Set([
    daemonClusterRoleName(namespace, name),
    daemonReaderClusterRoleName(namespace, name),
    signerClusterRoleName(namespace, name),
  ]);
  const sweep = {
    // The daemon's objects and the signer's (component daemon or signer), never the baselines.
    selector: installSweepSelector(name),
    namespace,
    // Two namespaces' daemons carry the same labels; cluster-scoped names tell them apart.
    accept: (kind: KindName, object: KubeObject) =>
      RESOURCES[kind].namespaced || ours.has(object.metadata?.name ?? ""),
  };
  const swept = await sweepObjects(deps, { ...sweep, kinds, dryRun });
  await sayBaselinesKept(deps, namespace, name);
  // The daemons' certificate requests: this signer's, sent by this install's ServiceAccount.
  const csrs = await deleteDaemonCsrs(deps, { namespace, name, dryRun });
  if (dryRun) return { swept, csrs, remaining: [] };
  const deadline = deps.now().getTime() + timeoutMs;
  for (;;) {
    const left = await sweepObjects(deps, {
      ...sweep,
      kinds: [...kinds, "Pod"],
      dryRun: true,
    });
    const csrsLeft = await deleteDaemonCsrs(deps, { namespace, name, dryRun: true });
    const remaining = [
      ...left.map((o) => `${o.kind}/${o.name}`),
      ...csrsLeft.map((csr) => `CertificateSigningRequest/${csr}`),
    ];
    if (remaining.length === 0) return { swept, csrs, remaining };
    if (deps.now().getTime() >= deadline) {
      log.warn("uninstall: objects are still there", { objects: remaining.join(",") });
      return { swept, csrs, remaining };
    }
    // A pod still terminating is expected; anything else was created since (or failed): sweep again.
    if (left.some((o) => o.kind !== "Pod")) {
      await sweepObjects(deps, { ...sweep, kinds });
    }
    // A pod still terminating may have asked once more.
    if (csrsLeft.length > 0) await deleteDaemonCsrs(deps, { namespace, name });
    await sleep(pollMs);
  }
}

/** Baselines are the operator's data, kept by an uninstall: say so, and how to remove them. */
async function sayBaselinesKept(
  deps: Pick<InstallDeps, "kube" | "log">,
  namespace: string,
  name: string,
): Promise<void> {
  const kept = await deps.kube.listAll("ConfigMap", namespace, {
    labelSelector: formatLabelSelector(baselineLabels(name)),
    timeoutMs: 10_000,
  }).catch(() => []);
  if (kept.length === 0) return;
  deps.log.info("uninstall keeps the cohort baselines", {
    baselines: kept.length,
    remedy: `aicr daemonset baseline delete --all -n ${namespace}`,
  });
}
