/**
 * Acting on the daemons' certificate requests through the API, for every signer of them (the
 * in-cluster signer and the CLI): list this signer's requests (a field selector, so requests of
 * other signers are never read), read what the decision needs (the DaemonSet, its pods, the
 * nodes the tokens name), decide each ({@link decideCsr}), then approve and sign, or deny (or
 * fail) with a reason condition. Requests of this signer sent by another identity are left
 * alone (another install's, or nobody's).
 *
 * Two signers may act at once (the signer's old and new leader, or the signer and a fetch):
 * every write carries the `resourceVersion` read, so the second gets 409 and moves on; an
 * approved request whose certificate never came (its signer died between the two writes) is
 * signed by the next one, after the same checks.
 *
 * @module
 */
import { Buffer } from "node:buffer";
import { PermissionError } from "../errors.ts";
import { mapConcurrent } from "../io.ts";
import { KubeApiError } from "../kube/mod.ts";
import type { AccessAttributes, KubeClient, KubeObject } from "../kube/mod.ts";
import type { Logger } from "../log.ts";
import {
  DAEMON_CSR_SIGNER,
  daemonSelectorLabels,
  daemonSignerSecretName,
  DEFAULT_DAEMON_NAME,
  formatLabelSelector,
  serviceAccountUser,
} from "../manifests/mod.ts";
import { issueServingCertificate } from "../x509.ts";
import type { DaemonCa } from "../x509.ts";
import {
  APPROVED_REASON,
  decideCsr,
  EXTRA_NODE_NAME,
  EXTRA_POD_NAME,
  EXTRA_POD_UID,
  extraValue,
  isDecided,
} from "./decide.ts";
import type {
  CsrCondition,
  CsrObject,
  DenyReason,
  SignContext,
  SignDecision,
  SignerPod,
} from "./decide.ts";

/** The collection path of CertificateSigningRequests. */
export const CSR_PATH = "/apis/certificates.k8s.io/v1/certificatesigningrequests";

/** Requests decided at once. */
const SIGN_CONCURRENCY = 8;

/** A call's bounds. */
function call(signal: AbortSignal | undefined): { timeoutMs: number; signal?: AbortSignal } {
  return { timeoutMs: 10_000, ...(signal ? { signal } : {}) };
}

/**
 * The signer's requests (cluster-scoped; a field selector on `spec.signerName`, so requests of
 * other signers are never read), with the list's resourceVersion (to watch from).
 *
 * @param kube the client
 * @param signal aborts the call
 * @returns the requests and the list's resourceVersion
 */
export async function listSignerCsrsWithVersion(
  kube: KubeClient,
  signal?: AbortSignal,
): Promise<{ items: CsrObject[]; resourceVersion: string }> {
  const selector = encodeURIComponent(`spec.signerName=${DAEMON_CSR_SIGNER}`);
  const list = await kube.rest.json<
    { items?: CsrObject[]; metadata?: { resourceVersion?: string } }
  >({
    method: "GET",
    path: `${CSR_PATH}?fieldSelector=${selector}`,
    idempotent: true,
    ...call(signal),
  });
  return {
    // The server filters; this keeps the promise even against one that would not.
    items: (list.items ?? []).filter((csr) => csr.spec?.signerName === DAEMON_CSR_SIGNER),
    resourceVersion: list.metadata?.resourceVersion ?? "",
  };
}

/**
 * The signer's requests (see {@link listSignerCsrsWithVersion}).
 *
 * @param kube the client
 * @param signal aborts the call
 * @returns the requests
 */
export async function listSignerCsrs(kube: KubeClient, signal?: AbortSignal): Promise<CsrObject[]> {
  return (await listSignerCsrsWithVersion(kube, signal)).items;
}

/**
 * What a caller must be able to do to sign the daemons' requests (asked by the install gate).
 *
 * @returns the questions
 */
export function signerCallerChecks(): AccessAttributes[] {
  const group = "certificates.k8s.io";
  return [
    { verb: "list", group, resource: "certificatesigningrequests" },
    { verb: "delete", group, resource: "certificatesigningrequests" },
    { verb: "update", group, resource: "certificatesigningrequests", subresource: "approval" },
    { verb: "update", group, resource: "certificatesigningrequests", subresource: "status" },
    { verb: "approve", group, resource: "signers", name: DAEMON_CSR_SIGNER },
    { verb: "sign", group, resource: "signers", name: DAEMON_CSR_SIGNER },
    { verb: "get", group: "", resource: "nodes" },
  ];
}

/** What {@link signPendingCsrs} did. */
export interface SignOutcome {
  /** Nodes whose request was signed now. */
  signed: string[];
  /** Requests denied (or failed, when approved already) now, with the reason. */
  denied: { csr: string; reason: DenyReason; message: string }[];
  /** Requests another signer wrote first (409): left to it. */
  conflicts: string[];
  /** Pod UIDs of this install holding an issued certificate (signed now or before). */
  issuedPods: Set<string>;
  /** This install's requests, as listed before acting. */
  requests: CsrObject[];
}

/** Options of {@link signPendingCsrs}. */
export interface SignOptions {
  /** The daemon's namespace. */
  namespace: string;
  /** The daemon's name (DaemonSet and ServiceAccount). @default "aicr-daemon" */
  name?: string;
  /** The CA; read from the signer Secret when absent and something is to be signed. */
  ca?: DaemonCa;
  /** Aborts the calls. */
  signal?: AbortSignal;
  /** Whether to go on; checked before each write (a signer that lost its Lease stops). */
  mayWrite?: () => boolean;
}

/** What {@link signPendingCsrs} works with. */
export interface SignDeps {
  /** The client. */
  kube: KubeClient;
  /** The logger. */
  log: Logger;
  /** The clock (the certificates' validity). */
  now: () => Date;
}

/**
 * Lists the signer's pending requests, decides each ({@link decideCsr}) against the
 * DaemonSet's live pods and the nodes their tokens name, then approves and signs, or denies
 * with a reason condition. Requests this install's daemons did not send are left untouched.
 *
 * @param deps client, logger, clock
 * @param options namespace, name, CA, signal
 * @returns what was signed and denied, and which pods hold a certificate
 * @throws {PermissionError} when the CA Secret cannot be read
 */
export async function signPendingCsrs(deps: SignDeps, options: SignOptions): Promise<SignOutcome> {
  const { kube } = deps;
  const { namespace, name = DEFAULT_DAEMON_NAME, signal } = options;
  const username = serviceAccountUser(namespace, name);
  const ours = (await listSignerCsrs(kube, signal)).filter((c) => c.spec?.username === username);
  const issuedPods = new Set(
    ours.filter((c) => c.status?.certificate).map((c) => extraValue(c.spec?.extra, EXTRA_POD_UID))
      .filter((uid): uid is string => uid !== undefined),
  );
  const pending = ours.filter((c) => !isDecided(c));
  const outcome: SignOutcome = {
    signed: [],
    denied: [],
    conflicts: [],
    issuedPods,
    requests: ours,
  };
  if (pending.length === 0) return outcome;
  const context = await readSignContext(kube, { namespace, name, username, signal, pending });
  const ca = lazyCa(kube, { namespace, name, ...(options.ca ? { ca: options.ca } : {}) });
  await mapConcurrent(pending, SIGN_CONCURRENCY, async (csr) => {
    if (signal?.aborted || (options.mayWrite && !options.mayWrite())) return;
    try {
      await actOn(deps, { csr, context, ca, signal, outcome });
    } catch (error) {
      if (!(error instanceof KubeApiError && (error.status === 409 || error.isNotFound))) {
        throw error;
      }
      // Another signer wrote it first, or it was deleted: nothing is lost, it decides.
      outcome.conflicts.push(csr.metadata?.name ?? "");
    }
  });
  return outcome;
}

/** Reads the CA once, when the first request is to be signed. */
function lazyCa(
  kube: KubeClient,
  options: { namespace: string; name: string; ca?: DaemonCa },
): () => Promise<DaemonCa> {
  let ca: Promise<DaemonCa> | undefined = options.ca ? Promise.resolve(options.ca) : undefined;
  return () => ca ??= readSignerCa(kube, options);
}

/** Decides one request and writes the decision. */
async function actOn(
  deps: SignDeps,
  work: {
    csr: CsrObject;
    context: SignContext;
    ca: () => Promise<DaemonCa>;
    signal: AbortSignal | undefined;
    outcome: SignOutcome;
  },
): Promise<void> {
  const { kube, log } = deps;
  const { csr, context, signal, outcome } = work;
  const decision = decideCsr(csr, context);
  const csrName = csr.metadata?.name ?? "";
  if (decision.action === "skip") return;
  if (decision.action === "deny" || decision.action === "fail") {
    const condition = {
      type: decision.action === "deny" ? "Denied" : "Failed",
      reason: decision.reason,
      message: decision.message,
    };
    if (decision.action === "deny") await writeApproval(kube, csr, condition, signal);
    else await writeStatus(kube, csr, { condition }, signal);
    log.warn("daemon certificate request refused", {
      csr: csrName,
      condition: condition.type,
      reason: decision.reason,
      detail: decision.message,
    });
    outcome.denied.push({ csr: csrName, reason: decision.reason, message: decision.message });
    return;
  }
  await sign(deps, { csr, decision, ca: await work.ca(), signal });
  outcome.signed.push(decision.node);
  outcome.issuedPods.add(decision.podUid);
}

/** Approves (unless approved already) and writes the certificate. */
async function sign(
  deps: SignDeps,
  work: { csr: CsrObject; decision: SignDecision; ca: DaemonCa; signal: AbortSignal | undefined },
): Promise<void> {
  const { kube, log } = deps;
  const { decision, signal } = work;
  const certificate = issueServingCertificate({
    ca: work.ca,
    publicKey: decision.publicKey,
    node: decision.node,
    ipAddresses: decision.ipAddresses,
    now: deps.now(),
    lifetimeSeconds: decision.lifetimeSeconds,
  });
  const approved = decision.approved ? work.csr : await writeApproval(kube, work.csr, {
    type: "Approved",
    reason: APPROVED_REASON,
    message: `pod ${
      extraValue(work.csr.spec?.extra, EXTRA_POD_NAME)
    } of this DaemonSet runs on node ${decision.node}`,
  }, signal);
  // The chain: the leaf, then the CA that signed it. The daemon serves both, and verifies its
  // cohort's baseline with that CA (only a signer of its certificates can write this field).
  const chain = `${certificate.trimEnd()}\n${work.ca.caCert.trim()}\n`;
  await writeStatus(kube, approved, {
    certificate: Buffer.from(chain, "utf8").toString("base64"),
  }, signal);
  log.info("daemon certificate signed", {
    node: decision.node,
    csr: work.csr.metadata?.name ?? "",
  });
}

function withCondition(
  csr: CsrObject,
  condition: Omit<CsrCondition, "status" | "lastUpdateTime">,
): CsrObject["status"] {
  return {
    ...csr.status,
    conditions: [
      ...(csr.status?.conditions ?? []),
      { ...condition, status: "True", lastUpdateTime: new Date().toISOString() },
    ],
  };
}

/** Writes an `Approved` or `Denied` condition (the approval subresource), pinned to the version read. */
async function writeApproval(
  kube: KubeClient,
  csr: CsrObject,
  condition: Omit<CsrCondition, "status" | "lastUpdateTime">,
  signal: AbortSignal | undefined,
): Promise<CsrObject> {
  return await kube.rest.json<CsrObject>({
    method: "PUT",
    path: `${CSR_PATH}/${csr.metadata?.name ?? ""}/approval`,
    body: { ...csr, status: withCondition(csr, condition) },
    // resourceVersion pins it: a request changed since it was read is not decided blind.
    idempotent: false,
    ...call(signal),
  });
}

/** Writes the certificate, or a `Failed` condition (the status subresource), pinned to the version read. */
async function writeStatus(
  kube: KubeClient,
  csr: CsrObject,
  write: { certificate?: string; condition?: Omit<CsrCondition, "status" | "lastUpdateTime"> },
  signal: AbortSignal | undefined,
): Promise<CsrObject> {
  const status = write.condition ? withCondition(csr, write.condition) : { ...csr.status };
  return await kube.rest.json<CsrObject>({
    method: "PUT",
    path: `${CSR_PATH}/${csr.metadata?.name ?? ""}/status`,
    body: {
      ...csr,
      status: { ...status, ...(write.certificate ? { certificate: write.certificate } : {}) },
    },
    idempotent: false,
    ...call(signal),
  });
}

/**
 * Reads the DaemonSet and its pods (by the selector labels), at once.
 *
 * @param kube the client
 * @param options namespace, name, signal
 * @returns the DaemonSet (undefined when absent) and its pods
 */
export async function readDaemonSetAndPods(
  kube: KubeClient,
  options: { namespace: string; name: string; signal?: AbortSignal | undefined },
): Promise<{ ds: KubeObject | undefined; pods: KubeObject[] }> {
  const { namespace, name } = options;
  const [ds, pods] = await Promise.all([
    kube.get("DaemonSet", namespace, name, call(options.signal)),
    kube.listAll("Pod", namespace, {
      labelSelector: formatLabelSelector(daemonSelectorLabels(name)),
      ...call(options.signal),
    }),
  ]);
  return { ds, pods };
}

function signerPod(pod: KubeObject): SignerPod | undefined {
  const uid = pod.metadata?.uid;
  if (!uid) return undefined;
  const owner = pod.metadata?.ownerReferences?.find((o) => o.controller);
  const ip = (pod.status as { podIP?: string } | undefined)?.podIP;
  return {
    name: pod.metadata?.name ?? "",
    uid,
    node: (pod.spec as { nodeName?: string } | undefined)?.nodeName ?? "",
    ...(ip ? { ip } : {}),
    ...(owner ? { ownerUid: owner.uid } : {}),
    deleting: Boolean(pod.metadata?.deletionTimestamp),
  };
}

/** The DaemonSet, its pods and the nodes the pending requests' tokens name. */
async function readSignContext(
  kube: KubeClient,
  options: {
    namespace: string;
    name: string;
    username: string;
    signal: AbortSignal | undefined;
    pending: readonly CsrObject[];
  },
): Promise<SignContext> {
  const { ds, pods } = await readDaemonSetAndPods(kube, options);
  const byUid = new Map<string, SignerPod>();
  for (const pod of pods) {
    const parsed = signerPod(pod);
    if (parsed) byUid.set(parsed.uid, parsed);
  }
  const names = [
    ...new Set(
      options.pending.map((c) => extraValue(c.spec?.extra, EXTRA_NODE_NAME)).filter((n) =>
        n !== undefined
      ),
    ),
  ] as string[];
  const nodes = new Map<string, string | undefined>();
  await mapConcurrent(names, SIGN_CONCURRENCY, async (node) => {
    const found = await kube.get("Node", undefined, node, call(options.signal));
    nodes.set(node, found?.metadata?.uid);
  });
  // No DaemonSet: no pod can match (every request of this identity is then denied).
  return {
    username: options.username,
    daemonSetUid: ds?.metadata?.uid ?? "\u0000",
    pods: byUid,
    nodes,
  };
}

/**
 * Reads the install's CA (the signer Secret).
 *
 * @param kube the client
 * @param options namespace and daemon name
 * @returns the CA pair
 * @throws {PermissionError} when the caller may not read it, or it is gone
 */
export async function readSignerCa(
  kube: KubeClient,
  options: { namespace: string; name: string },
): Promise<DaemonCa> {
  const secretName = daemonSignerSecretName(options.name);
  const secret = await kube.get<KubeObject & { data?: Record<string, string> }>(
    "Secret",
    options.namespace,
    secretName,
    { timeoutMs: 10_000 },
  ).catch((error) => {
    if (error instanceof KubeApiError && (error.status === 401 || error.status === 403)) {
      throw new PermissionError(
        `Cannot sign the daemons' certificates: the caller may not read Secret '${options.namespace}/${secretName}' (the install's CA key)`,
        { cause: error },
      );
    }
    throw error;
  });
  const decode = (key: string) => Buffer.from(secret?.data?.[key] ?? "", "base64").toString();
  const caCert = decode("tls.crt");
  const caKey = decode("tls.key");
  if (!caCert || !caKey) {
    throw new PermissionError(
      `Cannot sign the daemons' certificates: Secret '${options.namespace}/${secretName}' holds no CA (reinstall the daemon)`,
    );
  }
  return { caCert, caKey };
}

/**
 * Deletes this install's requests: the signer's, sent by this install's daemon ServiceAccount,
 * each pinned to the UID just read. Nothing else is touched.
 *
 * @param deps client and logger
 * @param options namespace and daemon name, dry run
 * @returns the names deleted (or that would be)
 */
export async function deleteDaemonCsrs(
  deps: { kube: KubeClient; log: Logger },
  options: { namespace: string; name?: string; dryRun?: boolean },
): Promise<string[]> {
  const { kube } = deps;
  const { namespace, name = DEFAULT_DAEMON_NAME } = options;
  const username = serviceAccountUser(namespace, name);
  const ours = (await listSignerCsrs(kube)).filter((c) => c.spec?.username === username);
  const names: string[] = [];
  for (const csr of ours) {
    const csrName = csr.metadata?.name ?? "";
    names.push(csrName);
    if (options.dryRun) continue;
    try {
      await kube.rest.json({
        method: "DELETE",
        path: `${CSR_PATH}/${csrName}`,
        body: {
          apiVersion: "v1",
          kind: "DeleteOptions",
          preconditions: { uid: csr.metadata?.uid },
        },
        idempotent: true,
        timeoutMs: 10_000,
      });
    } catch (error) {
      if (!(error instanceof KubeApiError && (error.isNotFound || error.status === 409))) {
        throw error;
      }
    }
  }
  return names;
}
