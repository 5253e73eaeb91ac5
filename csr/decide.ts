/**
 * The one decision over a daemon's CertificateSigningRequest, pure, shared by every signer of
 * the daemons' certificates: the in-cluster signer (`signer/`) and the CLI's install and fetch
 * (`controller/`).
 *
 * Each daemon makes its own P-256 key in memory and sends a request under
 * {@link DAEMON_CSR_SIGNER} with its pod-bound ServiceAccount token. The API server records who
 * sent it (`spec.username`, and in `spec.extra` the pod name, pod UID, node name and node UID
 * of the bound token): that record, not the request's content, is the proof. A request is
 * signed only when that record names this install's daemon ServiceAccount, a live pod of this
 * DaemonSet, on the node the token names, that node still exists (with the token's node UID),
 * and the request asks for exactly that node's name and the pod's IP, with a P-256 key it
 * proves it holds, for serving only. Everything else of this requester is refused with a
 * reason; requests of other signers or other requesters are never decided here.
 *
 * @module
 */
import { Buffer } from "node:buffer";
import type { KeyObject } from "node:crypto";
import type { KubeObject } from "../kube/mod.ts";
import { DAEMON_CSR_SIGNER } from "../manifests/mod.ts";
import { canonicalIp, parseCsr } from "../x509.ts";

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
/** See {@link EXTRA_POD_NAME} (1.30+, with the node name). */
export const EXTRA_NODE_UID = "authentication.kubernetes.io/node-uid";

/** The reason of the `Approved` condition aicr writes. */
export const APPROVED_REASON = "AicrDaemonPodMatched";

/** Usages a daemon may ask for; `server auth` is required. */
const ALLOWED_USAGES = new Set(["digital signature", "key encipherment", "server auth"]);

/** One condition of a request's status. */
export interface CsrCondition {
  /** `Approved`, `Denied` or `Failed`. */
  type: string;
  /** `True` unless said otherwise. */
  status?: string;
  /** Why, in one word. */
  reason?: string;
  /** Why, in a sentence. */
  message?: string;
  /** When it was last written. */
  lastUpdateTime?: string;
}

/** A CertificateSigningRequest as the API returns it (the fields read here). */
export interface CsrObject extends KubeObject {
  /** The request and its requester, as the API server recorded them. */
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
  /** Conditions and the issued certificate. */
  status?: {
    conditions?: CsrCondition[];
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
  /**
   * The nodes the pending requests' tokens name, by name: their UID, or undefined when the
   * node does not exist. A node absent from the map was not looked up: not signed.
   */
  nodes: ReadonlyMap<string, string | undefined>;
}

/** Why a request is refused: the reason of its `Denied` (or `Failed`) condition. */
export type DenyReason =
  | "NotPodBound"
  | "UnknownPod"
  | "PodMismatch"
  | "WrongNode"
  | "UnknownNode"
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
  | "pod-ip-unknown"
  | "node-unknown";

/** What to sign. */
export interface SignDecision {
  /** Sign. */
  action: "sign";
  /** The request was approved already (by an earlier attempt): only the certificate is due. */
  approved: boolean;
  /** The node the certificate names. */
  node: string;
  /** The pod's UID. */
  podUid: string;
  /** The pod's IP, the certificate's IP SAN. */
  ipAddresses: string[];
  /** The request's key. */
  publicKey: KeyObject;
  /** The certificate's lifetime. */
  lifetimeSeconds: number;
}

/**
 * The decision over one request: leave it, deny it (a pending one), fail it (one approved
 * already, by an earlier attempt or by hand, that the checks refuse: `Denied` cannot follow
 * `Approved`), or sign it.
 */
export type CsrDecision =
  | { action: "skip"; reason: SkipReason }
  | { action: "deny"; reason: DenyReason; message: string }
  | { action: "fail"; reason: DenyReason; message: string }
  | SignDecision;

/**
 * The one value of a `spec.extra` key, or undefined when it has none or several.
 *
 * @param extra the request's `spec.extra`
 * @param key the key
 * @returns the value
 */
export function extraValue(
  extra: Record<string, string[]> | undefined,
  key: string,
): string | undefined {
  const values = extra?.[key];
  return values && values.length === 1 ? values[0] : undefined;
}

function sameSet(a: readonly string[], b: readonly string[]): boolean {
  return a.length === b.length && [...a].sort().join("\n") === [...b].sort().join("\n");
}

function hasCondition(csr: CsrObject, type: string): boolean {
  return (csr.status?.conditions ?? []).some((c) => c.type === type && c.status !== "False");
}

/**
 * Whether a CSR has been decided for good: denied, failed or issued. An approved request
 * without its certificate is not: its signer died between the two writes, and another signs it.
 *
 * @param csr the request
 * @returns true when nobody should act on it again
 */
export function isDecided(csr: CsrObject): boolean {
  return Boolean(csr.status?.certificate) || hasCondition(csr, "Denied") ||
    hasCondition(csr, "Failed");
}

/**
 * Whether a request is approved and still waits for its certificate.
 *
 * @param csr the request
 * @returns true when approved, not issued, not failed
 */
export function isApprovedUnissued(csr: CsrObject): boolean {
  return !isDecided(csr) && hasCondition(csr, "Approved");
}

type Refusal = { reason: DenyReason; message: string };

/** The requester's side: a live pod of this DaemonSet on the live node its token names. */
function checkRequester(
  csr: CsrObject,
  context: SignContext,
): Refusal | { skip: SkipReason } | { pod: SignerPod } {
  const extra = csr.spec?.extra;
  const podName = extraValue(extra, EXTRA_POD_NAME);
  const podUid = extraValue(extra, EXTRA_POD_UID);
  const tokenNode = extraValue(extra, EXTRA_NODE_NAME);
  // guard: signer-pod-bound: a request without a pod-bound token is denied
  if (!podName || !podUid) {
    return {
      reason: "NotPodBound",
      message: "the request was not sent with a pod-bound ServiceAccount token",
    };
  }
  const pod = context.pods.get(podUid);
  // guard: signer-live-pod: only a live pod of this DaemonSet gets a certificate
  if (!pod || pod.deleting || pod.ownerUid !== context.daemonSetUid) {
    return {
      reason: "UnknownPod",
      message: `pod ${podName} (UID ${podUid}) is not a live pod of this DaemonSet`,
    };
  }
  // guard: signer-pod-name: the token's pod name must be its UID's
  if (pod.name !== podName) {
    return {
      reason: "PodMismatch",
      message: `the token names pod ${podName}, UID ${podUid} is ${pod.name}`,
    };
  }
  // guard: signer-node: the token's node must be the pod's
  if (!tokenNode || tokenNode !== pod.node) {
    return {
      reason: "WrongNode",
      message: `the token names node ${tokenNode ?? "(none)"}, the pod runs on ${
        pod.node || "(none)"
      }`,
    };
  }
  if (!context.nodes.has(tokenNode)) return { skip: "node-unknown" };
  const nodeUid = context.nodes.get(tokenNode);
  const tokenNodeUid = extraValue(extra, EXTRA_NODE_UID);
  // guard: signer-node-uid: the node must still be the one the token was issued on
  if (nodeUid === undefined || (tokenNodeUid !== undefined && tokenNodeUid !== nodeUid)) {
    return {
      reason: "UnknownNode",
      message: nodeUid === undefined
        ? `node ${tokenNode} does not exist`
        : `node ${tokenNode} was replaced since the token was issued (UID ${tokenNodeUid}, now ${nodeUid})`,
    };
  }
  return { pod };
}

/** The request's side: a P-256 key it holds, exactly the pod's node and IP, serving only. */
function checkRequest(
  csr: CsrObject,
  pod: SignerPod & { ip: string },
): Refusal | { publicKey: KeyObject } {
  let parsed: ReturnType<typeof parseCsr>;
  try {
    parsed = parseCsr(Buffer.from(csr.spec?.request ?? "", "base64").toString("utf8"));
  } catch (error) {
    return {
      reason: "BadRequest",
      message: `the request cannot be read: ${(error as Error).message}`,
    };
  }
  // guard: signer-key-type: only P-256 keys are signed
  if (!parsed.isP256) {
    return { reason: "UnsupportedKey", message: "only P-256 ECDSA keys are signed" };
  }
  // guard: signer-proof: the request's signature must verify with its key
  if (!parsed.signatureValid) {
    return {
      reason: "NoProofOfPossession",
      message: "the request's signature does not verify with its key",
    };
  }
  const ip = canonicalIp(pod.ip);
  // guard: signer-names: only the pod's node name and IP are signed
  if (
    !sameSet(parsed.dnsNames, [pod.node]) || !sameSet(parsed.ipAddresses, [ip]) ||
    parsed.otherNames.length > 0 || (parsed.commonName !== "" && parsed.commonName !== pod.node)
  ) {
    const names = [
      parsed.commonName,
      ...parsed.dnsNames,
      ...parsed.ipAddresses,
      ...parsed.otherNames,
    ]
      .filter((n) => n !== "").join(",");
    return {
      reason: "WrongNames",
      message: `the request names ${names}; only ${pod.node} and ${pod.ip} are signed for this pod`,
    };
  }
  const usages = csr.spec?.usages ?? [];
  // guard: signer-usages: only server-auth usages are signed
  if (!usages.includes("server auth") || usages.some((u) => !ALLOWED_USAGES.has(u))) {
    return {
      reason: "WrongUsages",
      message: `usages ${usages.join(",") || "(none)"}: only ${
        [...ALLOWED_USAGES].join(",")
      } are signed`,
    };
  }
  return { publicKey: parsed.publicKey };
}

/**
 * Decides one request, pure (see the module's summary for the checks).
 *
 * @param csr the request as the API returned it
 * @param context this install's ServiceAccount user, DaemonSet UID, pods and nodes
 * @returns sign (with what to write), deny or fail (with the reason condition), or skip (not
 *   ours to decide, or not yet)
 */
export function decideCsr(csr: CsrObject, context: SignContext): CsrDecision {
  const spec = csr.spec ?? {};
  if (spec.signerName !== DAEMON_CSR_SIGNER) return { action: "skip", reason: "other-signer" };
  if (isDecided(csr)) return { action: "skip", reason: "decided" };
  // guard: signer-requester: only this install's ServiceAccount's requests are decided
  if (spec.username !== context.username) return { action: "skip", reason: "other-requester" };
  const approved = hasCondition(csr, "Approved");
  const refuse = (refusal: Refusal): CsrDecision =>
    approved ? { action: "fail", ...refusal } : { action: "deny", ...refusal };
  const requester = checkRequester(csr, context);
  if ("skip" in requester) return { action: "skip", reason: requester.skip };
  if ("reason" in requester) return refuse(requester);
  const { pod } = requester;
  if (!pod.ip) {
    // The key and names are checked once the IP is known; a bad key is refused at once.
    const early = checkRequest(csr, { ...pod, ip: "0.0.0.0" });
    return "reason" in early && early.reason !== "WrongNames"
      ? refuse(early)
      : { action: "skip", reason: "pod-ip-unknown" };
  }
  const request = checkRequest(csr, { ...pod, ip: pod.ip });
  if ("reason" in request) return refuse(request);
  const asked = spec.expirationSeconds;
  return {
    action: "sign",
    approved,
    node: pod.node,
    podUid: pod.uid,
    ipAddresses: [pod.ip],
    publicKey: request.publicKey,
    lifetimeSeconds: asked !== undefined && asked >= MIN_CERT_SECONDS
      ? Math.min(asked, DAEMON_CERT_SECONDS)
      : DAEMON_CERT_SECONDS,
  };
}
