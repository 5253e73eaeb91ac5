/**
 * DaemonSet mode, per-node identity: aicr signs the daemons' serving certificates, and only
 * those it can match to a live pod of this install's DaemonSet on the node the request names.
 *
 * Each daemon makes its own P-256 key in memory and sends a `certificates.k8s.io/v1`
 * CertificateSigningRequest (signer {@link DAEMON_CSR_SIGNER}) with its pod-bound
 * ServiceAccount token. The API server records who sent it (`spec.username`, and in
 * `spec.extra` the pod name, pod UID and node name of the bound token): that record, not the
 * request's content, is the proof. {@link decideCsr} is the pure decision over it;
 * {@link signPendingCsrs} lists the signer's pending requests, decides, and approves + signs
 * or denies (with a reason condition). Requests of other signers are never read; requests of
 * this signer sent by another identity are left alone (another install's, or nobody's).
 *
 * @module
 */
import { Buffer } from "node:buffer";
import type { KeyObject } from "node:crypto";
import { PermissionError } from "../errors.ts";
import { KubeApiError } from "../kube/mod.ts";
import type { KubeClient, KubeObject } from "../kube/mod.ts";
import type { Logger } from "../log.ts";
import {
  DAEMON_CSR_SIGNER,
  daemonSelectorLabels,
  daemonSignerSecretName,
  DEFAULT_DAEMON_NAME,
  formatLabelSelector,
  serviceAccountUser,
} from "../manifests/mod.ts";
import type { AccessAttributes } from "../rbac/mod.ts";
import { canonicalIp, issueServingCertificate, parseCsr } from "../x509.ts";
import type { DaemonCa } from "../x509.ts";

/** How long a daemon's serving certificate lives unless its request asks for less: 30 days. */
export const DAEMON_CERT_SECONDS = 30 * 86_400;
/** The shortest lifetime honoured from `spec.expirationSeconds` (the API's own floor). */
const MIN_CERT_SECONDS = 600;

/** The `spec.extra` keys the API server records from a pod-bound ServiceAccount token. */
export const EXTRA_POD_NAME = "authentication.kubernetes.io/pod-name";
/** See {@link EXTRA_POD_NAME}. */
export const EXTRA_POD_UID = "authentication.kubernetes.io/pod-uid";
/** See {@link EXTRA_POD_NAME}. */
export const EXTRA_NODE_NAME = "authentication.kubernetes.io/node-name";

/** Usages a daemon may ask for; `server auth` is required. */
const ALLOWED_USAGES = new Set(["digital signature", "key encipherment", "server auth"]);

/** A CertificateSigningRequest as the API returns it (the fields read here). */
export interface CsrObject extends KubeObject {
  spec?: {
    request?: string;
    signerName?: string;
    username?: string;
    uid?: string;
    groups?: string[];
    extra?: Record<string, string[]>;
    usages?: string[];
    expirationSeconds?: number;
  };
  status?: {
    conditions?: { type: string; status?: string; reason?: string; message?: string }[];
    certificate?: string;
  };
}

/** A pod of the DaemonSet, as the decision needs it. */
export interface SignerPod {
  /** Pod name. */
  name: string;
  /** Pod UID. */
  uid: string;
  /** `spec.nodeName`. */
  node: string;
  /** `status.podIP`, once known. */
  ip?: string;
  /** UID of the controlling owner (the DaemonSet). */
  ownerUid?: string;
  /** Being deleted. */
  deleting: boolean;
}

/** What one install signs for. */
export interface SignContext {
  /** `system:serviceaccount:<ns>:<daemon ServiceAccount>`. */
  username: string;
  /** The DaemonSet's UID: a pod must be controlled by it. */
  daemonSetUid: string;
  /** The DaemonSet's pods by UID. */
  pods: ReadonlyMap<string, SignerPod>;
}

/** Why a request is refused: the reason of its `Denied` condition. */
export type DenyReason =
  | "NotPodBound"
  | "UnknownPod"
  | "PodMismatch"
  | "WrongNode"
  | "BadRequest"
  | "NoProofOfPossession"
  | "UnsupportedKey"
  | "WrongNames"
  | "WrongUsages";

/** Why a request is left as it is. */
export type SkipReason =
  | "other-signer"
  | "decided"
  | "other-requester"
  | "pod-ip-unknown";

/** The decision over one request. */
export type CsrDecision =
  | { action: "skip"; reason: SkipReason }
  | { action: "deny"; reason: DenyReason; message: string }
  | {
    action: "sign";
    node: string;
    podUid: string;
    ipAddresses: string[];
    publicKey: KeyObject;
    lifetimeSeconds: number;
  };

function first(extra: Record<string, string[]> | undefined, key: string): string | undefined {
  const values = extra?.[key];
  return values && values.length === 1 ? values[0] : undefined;
}

function sameSet(a: readonly string[], b: readonly string[]): boolean {
  return a.length === b.length && [...a].sort().join("\n") === [...b].sort().join("\n");
}

/**
 * Whether a CSR has been decided (approved, denied or failed) or issued.
 *
 * @param csr the request
 * @returns true when nobody should act on it again
 */
export function isDecided(csr: CsrObject): boolean {
  return Boolean(csr.status?.certificate) ||
    (csr.status?.conditions ?? []).some((c) =>
      (c.type === "Approved" || c.type === "Denied" || c.type === "Failed") &&
      c.status !== "False"
    );
}

/**
 * Decides one request, pure: sign only when the API server's record of the requester is this
 * install's daemon ServiceAccount with a token bound to a live pod of this DaemonSet, that pod
 * runs on the node the token names, and the request asks for exactly that node's name and the
 * pod's IP, with a P-256 key it proves it holds, for serving only.
 *
 * @param csr the request as the API returned it
 * @param context this install's ServiceAccount user, DaemonSet UID and pods
 * @returns sign (with what to write), deny (with the reason condition), or skip (not ours to decide)
 */
export function decideCsr(csr: CsrObject, context: SignContext): CsrDecision {
  const spec = csr.spec ?? {};
  if (spec.signerName !== DAEMON_CSR_SIGNER) return { action: "skip", reason: "other-signer" };
  if (isDecided(csr)) return { action: "skip", reason: "decided" };
  if (spec.username !== context.username) return { action: "skip", reason: "other-requester" };
  const deny = (reason: DenyReason, message: string): CsrDecision => ({
    action: "deny",
    reason,
    message,
  });
  const podName = first(spec.extra, EXTRA_POD_NAME);
  const podUid = first(spec.extra, EXTRA_POD_UID);
  const tokenNode = first(spec.extra, EXTRA_NODE_NAME);
  if (!podName || !podUid) {
    return deny("NotPodBound", "the request was not sent with a pod-bound ServiceAccount token");
  }
  const pod = context.pods.get(podUid);
  if (!pod || pod.deleting || pod.ownerUid !== context.daemonSetUid) {
    return deny("UnknownPod", `pod UID ${podUid} is not a live pod of this DaemonSet`);
  }
  if (pod.name !== podName) {
    return deny("PodMismatch", `the token names pod ${podName}, UID ${podUid} is ${pod.name}`);
  }
  if (!tokenNode || tokenNode !== pod.node) {
    return deny(
      "WrongNode",
      `the token names node ${tokenNode ?? "(none)"}, the pod runs on ${pod.node || "(none)"}`,
    );
  }
  let parsed: ReturnType<typeof parseCsr>;
  try {
    parsed = parseCsr(Buffer.from(spec.request ?? "", "base64").toString("utf8"));
  } catch (error) {
    return deny("BadRequest", `the request cannot be read: ${(error as Error).message}`);
  }
  if (!parsed.isP256) return deny("UnsupportedKey", "only P-256 ECDSA keys are signed");
  if (!parsed.signatureValid) {
    return deny("NoProofOfPossession", "the request's signature does not verify with its key");
  }
  if (!pod.ip) return { action: "skip", reason: "pod-ip-unknown" };
  const ip = canonicalIp(pod.ip);
  if (
    !sameSet(parsed.dnsNames, [pod.node]) || !sameSet(parsed.ipAddresses, [ip]) ||
    parsed.otherNames.length > 0 || (parsed.commonName !== "" && parsed.commonName !== pod.node)
  ) {
    return deny(
      "WrongNames",
      `the request names ${
        [parsed.commonName, ...parsed.dnsNames, ...parsed.ipAddresses, ...parsed.otherNames]
          .filter((n) => n !== "").join(",")
      }; only ${pod.node} and ${pod.ip} are signed for this pod`,
    );
  }
  const usages = spec.usages ?? [];
  if (!usages.includes("server auth") || usages.some((u) => !ALLOWED_USAGES.has(u))) {
    return deny(
      "WrongUsages",
      `usages ${usages.join(",") || "(none)"}: only ${[...ALLOWED_USAGES].join(",")} are signed`,
    );
  }
  const asked = spec.expirationSeconds;
  const lifetimeSeconds = asked !== undefined && asked >= MIN_CERT_SECONDS
    ? Math.min(asked, DAEMON_CERT_SECONDS)
    : DAEMON_CERT_SECONDS;
  return {
    action: "sign",
    node: pod.node,
    podUid,
    ipAddresses: [pod.ip],
    publicKey: parsed.publicKey,
    lifetimeSeconds,
  };
}

const CSR_PATH = "/apis/certificates.k8s.io/v1/certificatesigningrequests";

/**
 * The signer's requests (cluster-scoped; a field selector on `spec.signerName`, so requests of
 * other signers are never read).
 *
 * @param kube the client
 * @param signal aborts the call
 * @returns the requests
 */
export async function listSignerCsrs(kube: KubeClient, signal?: AbortSignal): Promise<CsrObject[]> {
  const selector = encodeURIComponent(`spec.signerName=${DAEMON_CSR_SIGNER}`);
  const list = await kube.rest.json<{ items?: CsrObject[] }>({
    method: "GET",
    path: `${CSR_PATH}?fieldSelector=${selector}`,
    idempotent: true,
    timeoutMs: 10_000,
    ...(signal ? { signal } : {}),
  });
  // The server filters; this keeps the promise even against one that would not.
  return (list.items ?? []).filter((csr) => csr.spec?.signerName === DAEMON_CSR_SIGNER);
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
  ];
}

/** What {@link signPendingCsrs} did. */
export interface SignOutcome {
  /** Nodes whose request was signed now. */
  signed: string[];
  /** Requests denied now, with the reason. */
  denied: { csr: string; reason: DenyReason; message: string }[];
  /** Pod UIDs of this install holding an issued certificate (signed now or before). */
  issuedPods: Set<string>;
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
}

/**
 * Lists the signer's pending requests, decides each ({@link decideCsr}) against the
 * DaemonSet's live pods, then approves and signs, or denies with a reason condition. Requests
 * this install's daemons did not send are left untouched.
 *
 * @param deps client, logger, clock
 * @param options namespace, name, CA
 * @returns what was signed and denied, and which pods hold a certificate
 * @throws {PermissionError} when the CA Secret cannot be read
 */
export async function signPendingCsrs(
  deps: { kube: KubeClient; log: Logger; now: () => Date },
  options: SignOptions,
): Promise<SignOutcome> {
  const { kube, log } = deps;
  const { namespace, name = DEFAULT_DAEMON_NAME, signal } = options;
  const username = serviceAccountUser(namespace, name);
  const ours = (await listSignerCsrs(kube, signal)).filter((c) => c.spec?.username === username);
  const issuedPods = new Set(
    ours.filter((c) => c.status?.certificate).map((c) => first(c.spec?.extra, EXTRA_POD_UID))
      .filter((uid): uid is string => uid !== undefined),
  );
  const pending = ours.filter((c) => !isDecided(c));
  const outcome: SignOutcome = { signed: [], denied: [], issuedPods };
  if (pending.length === 0) return outcome;
  const context = await signContext(kube, { namespace, name, username, signal });
  let ca = options.ca;
  for (const csr of pending) {
    const decision = decideCsr(csr, context);
    const csrName = csr.metadata?.name ?? "";
    if (decision.action === "skip") continue;
    if (decision.action === "deny") {
      await setApproval(kube, csr, {
        type: "Denied",
        reason: decision.reason,
        message: decision.message,
      }, signal);
      log.warn("daemon certificate request denied", {
        csr: csrName,
        reason: decision.reason,
        detail: decision.message,
      });
      outcome.denied.push({ csr: csrName, reason: decision.reason, message: decision.message });
      continue;
    }
    ca ??= await readSignerCa(kube, { namespace, name });
    const certificate = issueServingCertificate({
      ca,
      publicKey: decision.publicKey,
      node: decision.node,
      ipAddresses: decision.ipAddresses,
      now: deps.now(),
      lifetimeSeconds: decision.lifetimeSeconds,
    });
    const approved = await setApproval(kube, csr, {
      type: "Approved",
      reason: "AicrDaemonPodMatched",
      message: `pod ${
        first(csr.spec?.extra, EXTRA_POD_NAME)
      } of this DaemonSet runs on node ${decision.node}`,
    }, signal);
    await kube.rest.json({
      method: "PUT",
      path: `${CSR_PATH}/${csrName}/status`,
      body: {
        ...approved,
        status: {
          ...approved.status,
          certificate: Buffer.from(certificate, "utf8").toString("base64"),
        },
      },
      idempotent: false,
      timeoutMs: 10_000,
      ...(signal ? { signal } : {}),
    });
    log.info("daemon certificate signed", { node: decision.node, csr: csrName });
    outcome.signed.push(decision.node);
    issuedPods.add(decision.podUid);
  }
  return outcome;
}

async function setApproval(
  kube: KubeClient,
  csr: CsrObject,
  condition: { type: "Approved" | "Denied"; reason: string; message: string },
  signal: AbortSignal | undefined,
): Promise<CsrObject> {
  const name = csr.metadata?.name ?? "";
  return await kube.rest.json<CsrObject>({
    method: "PUT",
    path: `${CSR_PATH}/${name}/approval`,
    body: {
      ...csr,
      status: {
        ...csr.status,
        conditions: [
          ...(csr.status?.conditions ?? []),
          { ...condition, status: "True", lastUpdateTime: new Date().toISOString() },
        ],
      },
    },
    // resourceVersion pins it: a request changed since it was read is not decided blind.
    idempotent: false,
    timeoutMs: 10_000,
    ...(signal ? { signal } : {}),
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
  const call = { timeoutMs: 10_000, ...(options.signal ? { signal: options.signal } : {}) };
  const [ds, pods] = await Promise.all([
    kube.get("DaemonSet", namespace, name, call),
    kube.listAll("Pod", namespace, {
      labelSelector: formatLabelSelector(daemonSelectorLabels(name)),
      ...call,
    }),
  ]);
  return { ds, pods };
}

async function signContext(
  kube: KubeClient,
  options: { namespace: string; name: string; username: string; signal?: AbortSignal | undefined },
): Promise<SignContext> {
  const { ds, pods } = await readDaemonSetAndPods(kube, options);
  const byUid = new Map<string, SignerPod>();
  for (const pod of pods) {
    const uid = pod.metadata?.uid;
    if (!uid) continue;
    const owner = (pod.metadata as { ownerReferences?: { uid: string; controller?: boolean }[] })
      .ownerReferences?.find((o) => o.controller);
    const ip = (pod.status as { podIP?: string } | undefined)?.podIP;
    byUid.set(uid, {
      name: pod.metadata?.name ?? "",
      uid,
      node: (pod.spec as { nodeName?: string } | undefined)?.nodeName ?? "",
      ...(ip ? { ip } : {}),
      ...(owner ? { ownerUid: owner.uid } : {}),
      deleting: Boolean(pod.metadata?.deletionTimestamp),
    });
  }
  // No DaemonSet: no pod can match (every request of this identity is then denied).
  return { username: options.username, daemonSetUid: ds?.metadata?.uid ?? "\u0000", pods: byUid };
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
