/**
 * Per-cohort baselines in the cluster (`aicr daemonset baseline set|get|list|delete`): one
 * ConfigMap per cohort in the daemon's namespace, `<daemon>-baseline-<cohort key>`, which each
 * daemon of that cohort reads to export `aicr_drift_readings` (see `daemon/baseline.ts`).
 *
 * Every verb runs the pre-flight gate first (the caller's ConfigMap permissions, plus what the
 * fetch of `--from-node` needs). `set` proves its input before anything is written: a document
 * that is not a Snapshot, or one whose cohort is not the cohort the user named, is refused with
 * the reason (exit 2). It writes only into an object aicr created: a ConfigMap at the name
 * without the baseline's labels is somebody else's, left untouched with a WARN and exit 2, as
 * the staging ConfigMap of `aicr snapshot`. Updates and deletes are pinned to the UID just read.
 *
 * @module
 */
import { ConflictError, NotFoundError, ToolError, UsageError } from "../errors.ts";
import { createAccessReviewer, runGate } from "../rbac/mod.ts";
import type { AccessAttributes } from "../rbac/mod.ts";
import { KubeApiError } from "../kube/mod.ts";
import type { KubeClient, KubeObject, NewObject } from "../kube/mod.ts";
import type { Logger } from "../log.ts";
import { fetchFleet, fleetError } from "./fleet.ts";
import {
  baselineLabels,
  daemonReaderName,
  DEFAULT_DAEMON_NAME,
  formatLabelSelector,
  HELM_MANAGER,
  isDaemonObject,
  LABEL_MANAGED_BY,
  matchesLabels,
} from "../manifests/mod.ts";
import {
  alignColumns,
  assertFitsConfigMap,
  BASELINE_COHORT_ANNOTATION,
  BASELINE_COHORT_KEY_LABEL,
  BASELINE_SIGNATURE_KEY,
  BASELINE_VALUES_ANNOTATION,
  baselineCohortOf,
  baselineConfigMapName,
  baselineSnapshot,
  checkBaselineCohort,
  cohortMatches,
  encodeSnapshot,
  signBaseline,
  snapshotConfigMapData,
  snapshotFromConfigMapData,
} from "../snapshot/mod.ts";
import type { BaselineCohort, Snapshot } from "../snapshot/mod.ts";
import {
  caSecretCheck,
  judgeTrust,
  readCaForSigning,
  readTrustAnchor,
  warnUntrusted,
} from "./baseline_trust.ts";
import type { BaselineTrustView, TrustAnchor } from "./baseline_trust.ts";

/** What the baseline verbs need. */
export interface BaselineDeps {
  /** The client (the caller's kubeconfig identity). */
  kube: KubeClient;
  /** Logger (stderr). */
  log: Logger;
  /** Clock. */
  now: () => Date;
}

/** Which daemon's baselines. */
export interface BaselineScope {
  /** The daemon's namespace. */
  namespace: string;
  /** The daemon's name. @default "aicr-daemon" */
  name?: string;
}

/** One stored baseline, as `list` shows it. */
export interface BaselineRecord {
  /** Its cohort. */
  cohort: BaselineCohort;
  /** The ConfigMap. */
  configMap: string;
  /** The ConfigMap's UID. */
  uid: string;
  /** Where it came from (`node <name>`, `file <path>`). */
  source: string;
  /** The node whose snapshot it is. */
  node: string;
  /** When it was written (RFC3339). */
  updated: string;
  /** Whether the install's CA signed it as it is (only a signed baseline is used for drift). */
  trust: BaselineTrustView;
}

/** Data key saying where a baseline came from. */
const SOURCE_KEY = "source";

/** The WARN for an object at a baseline's name that aicr did not create. */
export const FOREIGN_BASELINE_WARNING =
  "the baseline ConfigMap's name is taken by an object aicr did not create; it is left untouched (not written into, not adopted, not deleted)";

function configMapChecks(namespace: string, verbs: readonly string[]): AccessAttributes[] {
  return verbs.map((verb) => ({ verb, group: "", resource: "configmaps", namespace }));
}

/** The daemon's Role lists the baselines it may read: set and delete keep it in step. */
function roleChecks(namespace: string): AccessAttributes[] {
  return ["get", "update"].map((verb) => ({
    verb,
    group: RBAC_GROUP,
    resource: "roles",
    namespace,
  }));
}

const RBAC_GROUP = "rbac.authorization.k8s.io";

interface RoleObject extends KubeObject {
  rules?: {
    apiGroups?: string[];
    resources?: string[];
    verbs?: string[];
    resourceNames?: string[];
  }[];
}

/**
 * Adds a baseline's name to the daemon's Role (or removes it), so the daemon may `get` exactly
 * the baselines that exist. No Role (the daemon is not installed): nothing to do, the install
 * grants the baselines it finds. A Role without aicr's daemon labels is not touched. The update
 * is pinned to the UID and resourceVersion read, and retried on a conflict.
 */
async function syncDaemonGrant(
  deps: Pick<BaselineDeps, "kube" | "log">,
  options: { namespace: string; name: string; configMap: string; grant: boolean },
): Promise<void> {
  const { kube, log } = deps;
  const { namespace, name, configMap, grant } = options;
  for (let attempt = 0; attempt < 3; attempt++) {
    const role = await kube.get<RoleObject>("Role", namespace, name, { timeoutMs: 10_000 });
    if (!role) {
      // A chart's daemon uninstalled with Helm leaves the baselines' own grant: withdrawn here.
      if (!grant) await syncChartGrant(deps, options);
      if (grant) {
        log.info("no daemon installed here yet: its install lets it read this baseline", {
          role: `${namespace}/${name}`,
        });
      }
      return;
    }
    const rule = role.rules?.find((r) =>
      r.resources?.includes("configmaps") && r.verbs?.includes("get") &&
      (r.resourceNames?.length ?? 0) > 0
    );
    // aicr's Role, from install or render, or the chart's (Helm writes managed-by=Helm).
    if (
      isDaemonObject(role.metadata?.labels, name) && rule &&
      role.metadata?.labels?.[LABEL_MANAGED_BY] === HELM_MANAGER
    ) {
      await syncChartGrant(deps, options);
      return;
    }
    if (!isDaemonObject(role.metadata?.labels, name) || !rule) {
      log.warn("the daemon's Role is not aicr's, or has no baseline rule: left as it is", {
        role: `${namespace}/${name}`,
        remedy:
          `aicr daemonset uninstall -n ${namespace} && aicr daemonset install -n ${namespace}`,
      });
      return;
    }
    const names = new Set(rule.resourceNames);
    if (names.has(configMap) === grant) return;
    if (grant) names.add(configMap);
    else names.delete(configMap);
    rule.resourceNames = [...names].sort();
    try {
      await kube.rest.json({
        method: "PUT",
        path: `/apis/${RBAC_GROUP}/v1/namespaces/${encodeURIComponent(namespace)}/roles/${
          encodeURIComponent(name)
        }`,
        body: role,
      });
      log.info(grant ? "the daemons may read this baseline" : "the daemons' grant withdrawn", {
        role: `${namespace}/${name}`,
        configmap: configMap,
      });
      return;
    } catch (error) {
      if (!(error instanceof KubeApiError && error.status === 409) || attempt === 2) throw error;
    }
  }
}

/**
 * The grant of a chart's daemon: Helm owns the daemon's Role (server-side apply, field manager
 * helm), and an update of its rules by aicr would make the next `helm upgrade` fail on the
 * conflict (and be undone by it). The baselines' names go into a Role and RoleBinding of their
 * own, `<name>-baselines`, labelled as the baselines (kept with them by `helm uninstall`, removed
 * with the last baseline). Both are created on the first grant; the Role is updated pinned to
 * the version read.
 */
async function syncChartGrant(
  deps: Pick<BaselineDeps, "kube" | "log">,
  options: { namespace: string; name: string; configMap: string; grant: boolean },
): Promise<void> {
  const { kube, log } = deps;
  const { namespace, name, configMap, grant } = options;
  const grantName = `${name}-baselines`;
  const labels = baselineLabels(name);
  const path = (kind: string, object = "") =>
    `/apis/${RBAC_GROUP}/v1/namespaces/${encodeURIComponent(namespace)}/${kind}${
      object ? `/${encodeURIComponent(object)}` : ""
    }`;
  const role = await kube.get<RoleObject>("Role", namespace, grantName, { timeoutMs: 10_000 });
  if (role && !matchesLabels(role.metadata?.labels, labels)) {
    log.warn("the chart daemon's baseline Role is not aicr's: left as it is", {
      role: `${namespace}/${grantName}`,
    });
    return;
  }
  const names = new Set(role?.rules?.[0]?.resourceNames ?? []);
  if (names.has(configMap) === grant) return;
  if (grant) names.add(configMap);
  else names.delete(configMap);
  const rules = [{
    apiGroups: [""],
    resources: ["configmaps"],
    verbs: ["get"],
    resourceNames: [...names].sort(),
  }];
  if (names.size === 0 && role) {
    // Empty resourceNames would mean every ConfigMap: the last baseline takes its grant along.
    const binding = await kube.get("RoleBinding", namespace, grantName, { timeoutMs: 10_000 });
    const pinned: [string, KubeObject | undefined][] = [["rolebindings", binding], ["roles", role]];
    for (const [kind, object] of pinned) {
      if (!object || !matchesLabels(object.metadata?.labels, labels)) continue;
      await kube.rest.json({
        method: "DELETE",
        path: path(kind, grantName),
        body: {
          apiVersion: "v1",
          kind: "DeleteOptions",
          preconditions: { uid: object.metadata?.uid },
        },
        idempotent: true,
      }).catch((error) => {
        if (!(error instanceof KubeApiError && (error.isNotFound || error.status === 409))) {
          throw error;
        }
      });
    }
    return;
  }
  const metadata = { name: grantName, namespace, labels };
  if (role) {
    await kube.rest.json({
      method: "PUT",
      path: path("roles", grantName),
      body: { ...role, rules },
    });
  } else {
    await kube.create("Role", { metadata, rules } as NewObject);
    await kube.create("RoleBinding", {
      metadata,
      roleRef: { apiGroup: RBAC_GROUP, kind: "Role", name: grantName },
      subjects: [{ kind: "ServiceAccount", name, namespace }],
    } as NewObject).catch((error) => {
      if (!(error instanceof KubeApiError && error.isAlreadyExists)) throw error;
    });
  }
  log.info(grant ? "the daemons may read this baseline" : "the daemons' grant withdrawn", {
    role: `${namespace}/${grantName}`,
    configmap: configMap,
  });
}

async function gate(deps: BaselineDeps, namespace: string, questions: AccessAttributes[]) {
  await runGate(createAccessReviewer(deps.kube), {
    namespace,
    mode: "prefix",
    serviceAccount: "",
    ownsOutput: false,
    caller: questions,
    log: deps.log,
  });
}

/**
 * The questions of `baseline set`: read, create and update ConfigMaps, read the install's CA
 * Secret (its key signs the baseline); with `--from-node`, also what the fetch needs (the daemon
 * pods, the CA ConfigMap, the reader's token).
 *
 * @param scope namespace and daemon name
 * @param fromNode whether a node's snapshot is fetched
 * @returns the questions
 */
export function baselineSetChecks(scope: BaselineScope, fromNode: boolean): AccessAttributes[] {
  const { namespace, name = DEFAULT_DAEMON_NAME } = scope;
  return [
    ...configMapChecks(namespace, ["get", "create", "update"]),
    ...roleChecks(namespace),
    caSecretCheck(namespace, name),
    ...(fromNode
      ? [
        { verb: "list", group: "", resource: "pods", namespace },
        {
          verb: "create",
          group: "",
          resource: "serviceaccounts",
          subresource: "token",
          namespace,
          name: daemonReaderName(name),
        },
      ]
      : []),
  ];
}

function recordOf(object: KubeObject, anchor: TrustAnchor): BaselineRecord | undefined {
  const metadata = object.metadata ?? {};
  const cohort = baselineCohortOf(
    metadata as { labels?: Record<string, string>; annotations?: Record<string, string> },
  );
  if (!cohort || !metadata.name || !metadata.uid) return undefined;
  const data = (object as { data?: Record<string, string> }).data ?? {};
  const text = snapshotFromConfigMapData(data) ?? "";
  const node = /^\s*source-node:\s*"?([^"\n]*)"?\s*$/m.exec(text)?.[1] ?? "";
  return {
    cohort,
    configMap: metadata.name,
    uid: metadata.uid,
    source: data[SOURCE_KEY] ?? "",
    node,
    updated: data.timestamp ?? "",
    trust: judgeTrust(object as Parameters<typeof judgeTrust>[0], anchor),
  };
}

/** Options of {@link setBaseline}. */
export interface SetBaselineOptions extends BaselineScope {
  /** Fetches the snapshot (a file read, or a node's daemon); runs after the gate. */
  load: () => Promise<Snapshot>;
  /** Where it came from, for `list` (`node gpu-1`, `file base.yaml`). */
  source: string;
  /** The cohort the user named (`--cohort`), by name or key; the snapshot must be of it. */
  cohort?: string;
  /** Whether `load` fetches from a node (the gate then asks what the fetch needs). */
  fromNode?: boolean;
}

/**
 * Stores a snapshot as its cohort's baseline: gate, load, prove (a Snapshot, of the cohort
 * named, fitting a ConfigMap), sign with the install's CA, then create the ConfigMap or update
 * aicr's own one by UID, and check the stored object verifies.
 *
 * @param deps client, logger, clock
 * @param options scope, the snapshot's loader and source, the cohort named
 * @returns the stored baseline
 * @throws {PermissionError} when the gate finds missing permissions (nothing written)
 * @throws {NotFoundError} when the daemon is not installed: no CA to sign with (nothing written)
 * @throws {UsageError} for a snapshot of another cohort, or one too large (nothing written)
 * @throws {ConflictError} when an object aicr did not create holds the name (left untouched)
 */
export async function setBaseline(
  deps: BaselineDeps,
  options: SetBaselineOptions,
): Promise<BaselineRecord> {
  const { kube, log } = deps;
  const { namespace, name = DEFAULT_DAEMON_NAME } = options;
  await gate(deps, namespace, baselineSetChecks(options, options.fromNode ?? false));
  const snapshot = await options.load();
  const cohort = checkBaselineCohort(snapshot, options.cohort);
  const configMap = baselineConfigMapName(name, cohort.key);
  const stored = baselineSnapshot(snapshot);
  const encoded = encodeSnapshot(stored, "yaml");
  assertFitsConfigMap(stored, encoded, `the baseline ConfigMap '${namespace}/${configMap}'`);
  const ca = await readCaForSigning(kube, { namespace, name });
  const labels = { ...baselineLabels(name), [BASELINE_COHORT_KEY_LABEL]: cohort.key };
  const annotations = {
    [BASELINE_COHORT_ANNOTATION]: cohort.name,
    [BASELINE_VALUES_ANNOTATION]: JSON.stringify(cohort.values),
  };
  const data: Record<string, string> = {
    ...snapshotConfigMapData(encoded, "yaml", deps.now()),
    [SOURCE_KEY]: options.source,
  };
  // Signed as written: namespace, name, cohort (label and annotations) and every data entry.
  data[BASELINE_SIGNATURE_KEY] = signBaseline(
    { metadata: { name: configMap, namespace, labels, annotations }, data },
    ca.caKey,
  );
  const existing = await kube.get("ConfigMap", namespace, configMap, { timeoutMs: 10_000 });
  let written: KubeObject;
  if (existing) {
    const uid = existing.metadata?.uid ?? "";
    if (
      !matchesLabels(existing.metadata?.labels, labels) ||
      !baselineCohortOf(existing.metadata ?? {})
    ) {
      throw foreignBaseline(log, { namespace, configMap, cohort });
    }
    written = await kube.updateConfigMapIfUid(
      namespace,
      configMap,
      uid,
      { labels, annotations, data },
      { timeoutMs: 10_000 },
    );
  } else {
    const object: NewObject & { data: Record<string, string> } = {
      metadata: {
        name: configMap,
        namespace,
        labels,
        annotations,
      },
      data,
    };
    written = await kube.create("ConfigMap", object, { timeoutMs: 10_000 });
  }
  const record = recordOf(written, { caCert: ca.caCert });
  if (!record) {
    throw new ToolError(`Cannot read back the baseline ConfigMap '${namespace}/${configMap}'`);
  }
  if (record.trust.state !== "signed") {
    // Something between us and etcd changed what was signed (a mutating webhook, a stale label).
    throw new ToolError(
      `Cannot set the baseline in '${namespace}/${configMap}': the stored object does not verify (${record.trust.reason})`,
    );
  }
  await syncDaemonGrant(deps, { namespace, name, configMap, grant: true });
  log.info(existing ? "baseline replaced" : "baseline set", {
    cohort: cohort.name,
    key: cohort.key,
    configmap: `${namespace}/${configMap}`,
    source: options.source,
    bytes: encoded.length,
  });
  return record;
}

function foreignBaseline(
  log: Logger,
  where: { namespace: string; configMap: string; cohort: BaselineCohort },
): ConflictError {
  log.warn(FOREIGN_BASELINE_WARNING, {
    name: `${where.namespace}/${where.configMap}`,
    cohort: where.cohort.name,
  });
  return new ConflictError(
    `Cannot store the baseline of cohort '${where.cohort.name}' in '${where.namespace}/${where.configMap}': a ConfigMap aicr did not create already has that name`,
    {
      details: [
        `  it is not aicr's: rename or remove it yourself (kubectl get configmap ${where.configMap} -n ${where.namespace} -o yaml)`,
      ],
    },
  );
}

/**
 * Every baseline of a daemon, sorted by cohort name (`baseline list`).
 *
 * @param deps client, logger
 * @param scope namespace and daemon name
 * @returns the baselines
 * @throws {PermissionError} when the caller cannot list ConfigMaps
 */
export async function listBaselines(
  deps: Pick<BaselineDeps, "kube" | "log">,
  scope: BaselineScope,
): Promise<BaselineRecord[]> {
  await gate(deps as BaselineDeps, scope.namespace, configMapChecks(scope.namespace, ["list"]));
  const records = await readBaselines(deps.kube, scope);
  sayTrust(deps.log, records, scope.namespace);
  return records;
}

/** Says what `list` and `get` could not verify, and each untrusted baseline. */
function sayTrust(log: Logger, records: readonly BaselineRecord[], namespace: string): void {
  const unverified = records.find((r) => r.trust.state === "unverified");
  if (unverified && "reason" in unverified.trust) {
    log.warn("baselines not verified: the install's CA cannot be read", {
      reason: unverified.trust.reason,
    });
  }
  warnUntrusted(
    log,
    records.map((r) => ({ cohortKey: r.cohort.key, configMap: r.configMap, trust: r.trust })),
    namespace,
  );
}

async function readBaselines(kube: KubeClient, scope: BaselineScope): Promise<BaselineRecord[]> {
  return (await readBaselinesAndAnchor(kube, scope)).records;
}

async function readBaselinesAndAnchor(
  kube: KubeClient,
  scope: BaselineScope,
): Promise<{ records: BaselineRecord[]; anchor: TrustAnchor }> {
  const { namespace, name = DEFAULT_DAEMON_NAME } = scope;
  const [items, anchor] = await Promise.all([
    kube.listAll("ConfigMap", namespace, {
      labelSelector: formatLabelSelector(baselineLabels(name)),
      timeoutMs: 30_000,
    }),
    readTrustAnchor(kube, { namespace, name }),
  ]);
  const records = items.flatMap((o) => recordOf(o, anchor) ?? [])
    .sort((a, b) => a.cohort.name.localeCompare(b.cohort.name));
  return { records, anchor };
}

function pick(records: readonly BaselineRecord[], cohort: string | undefined, verb: string) {
  if (cohort === undefined) {
    if (records.length === 1) return records[0] as BaselineRecord;
    throw new UsageError(
      records.length === 0
        ? `Cannot ${verb} a baseline: none is set (aicr daemonset baseline set)`
        : (option) =>
          `Cannot ${verb} a baseline as '${
            option("cohort")
          }' is not set and ${records.length} cohorts have one`,
      { details: records.map((r) => `  ${r.cohort.key}  ${r.cohort.name}`) },
    );
  }
  const found = records.find((r) => cohortMatches(r.cohort, cohort));
  if (!found) {
    throw new NotFoundError(`Cannot ${verb} the baseline of cohort '${cohort}': none is set`, {
      details: records.length
        ? [
          "  cohorts with a baseline:",
          ...records.map((r) => `  ${r.cohort.key}  ${r.cohort.name}`),
        ]
        : ["  no cohort has a baseline yet (aicr daemonset baseline set)"],
    });
  }
  return found;
}

/**
 * One cohort's baseline (`baseline get`): the record and the stored snapshot's text.
 *
 * @param deps client, logger
 * @param options scope and the cohort (by name or key; may be left out when only one is set)
 * @returns the record and the snapshot YAML
 * @throws {NotFoundError} when that cohort has no baseline
 * @throws {UsageError} when no cohort is named and several have one
 */
export async function getBaseline(
  deps: Pick<BaselineDeps, "kube" | "log">,
  options: BaselineScope & { cohort?: string },
): Promise<{ record: BaselineRecord; text: string }> {
  const { namespace } = options;
  await gate(deps as BaselineDeps, namespace, configMapChecks(namespace, ["list", "get"]));
  const { records, anchor } = await readBaselinesAndAnchor(deps.kube, options);
  const listed = pick(records, options.cohort, "get");
  const object = await deps.kube.get("ConfigMap", namespace, listed.configMap, {
    timeoutMs: 10_000,
  });
  const text = snapshotFromConfigMapData(
    (object as { data?: Record<string, string> } | undefined)?.data,
  );
  if (text === undefined) {
    throw new NotFoundError(
      `Cannot get the baseline of cohort '${listed.cohort.name}': its ConfigMap is gone or empty`,
    );
  }
  // The text printed is judged, not the one listed a moment before.
  const record = {
    ...listed,
    trust: judgeTrust(object as Parameters<typeof judgeTrust>[0], anchor),
  };
  sayTrust(deps.log, [record], namespace);
  return { record, text };
}

/**
 * Deletes baselines (`baseline delete --cohort C` or `--all`), each pinned to the UID just read.
 *
 * @param deps client, logger
 * @param options scope, the cohort or all
 * @returns the records deleted
 * @throws {NotFoundError} when the cohort named has no baseline
 */
export async function deleteBaselines(
  deps: Pick<BaselineDeps, "kube" | "log">,
  options: BaselineScope & { cohort?: string; all?: boolean },
): Promise<BaselineRecord[]> {
  const { namespace } = options;
  if (!options.all && options.cohort === undefined) {
    throw new UsageError((option) =>
      `Cannot delete a baseline as neither '${option("cohort")}' nor '${option("all")}' is set`
    );
  }
  await gate(deps as BaselineDeps, namespace, [
    ...configMapChecks(namespace, ["list", "delete"]),
    ...roleChecks(namespace),
  ]);
  const records = await readBaselines(deps.kube, options);
  const doomed = options.all ? records : [pick(records, options.cohort, "delete")];
  for (const record of doomed) {
    const result = await deps.kube.deleteIfUid(
      "ConfigMap",
      namespace,
      record.configMap,
      record.uid,
      {
        timeoutMs: 10_000,
      },
    );
    deps.log.info(result === "deleted" ? "baseline deleted" : "baseline already gone", {
      cohort: record.cohort.name,
      configmap: `${namespace}/${record.configMap}`,
    });
    await syncDaemonGrant(deps, {
      namespace,
      name: options.name ?? DEFAULT_DAEMON_NAME,
      configMap: record.configMap,
      grant: false,
    });
  }
  return doomed;
}

/**
 * The `baseline list` table: key, cohort, node, source, updated, and trust: `signed` (by the
 * install's CA: the daemons use it), `unsigned`, `edited`, `other-ca` (not used for drift), or
 * `unverified` (the caller may not read the CA).
 *
 * @param records the baselines
 * @returns the table text
 */
export function formatBaselineTable(records: readonly BaselineRecord[]): string {
  const rows = [
    ["KEY", "COHORT", "NODE", "SOURCE", "UPDATED", "TRUST"],
    ...records.map((r) => [
      r.cohort.key,
      r.cohort.name,
      r.node,
      r.source,
      r.updated,
      r.trust.state,
    ]),
  ];
  return alignColumns(rows);
}

/**
 * Fetches one node's snapshot from its daemon (`baseline set --from-node`): the fleet fetch of
 * that node alone, without the cluster's topology.
 *
 * @param deps the caller's client and logger
 * @param options the daemon's namespace and name, the node, and the run's signal
 * @returns the node's snapshot
 * @throws {NotFoundError} when no daemon pod runs on the node
 * @throws {ToolError} the fleet's error when the node did not answer with its snapshot
 */
export async function fetchNodeSnapshot(
  deps: { kube: KubeClient; log: Logger },
  options: { namespace: string; name: string; node: string; signal?: AbortSignal },
): Promise<Snapshot> {
  const { namespace, name, node } = options;
  const fleet = await fetchFleet(deps, {
    namespace,
    name,
    nodes: [node],
    concurrency: 1,
    // One node's snapshot: the cluster's topology is not wanted (nor listed).
    topology: false,
    ...(options.signal ? { signal: options.signal } : {}),
  });
  const result = fleet.results.find((r) => r.node === node);
  if (!result) {
    throw new NotFoundError(
      `Cannot fetch the snapshot of node '${node}': no daemon pod of '${namespace}/${name}' runs there`,
    );
  }
  if (result.status !== "ok" || !result.snapshot) {
    throw fleetError(fleet) ??
      new NotFoundError(`Cannot fetch the snapshot of node '${node}': ${result.status}`);
  }
  return result.snapshot;
}
