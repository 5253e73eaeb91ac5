import assert from "node:assert/strict";
import { Buffer } from "node:buffer";
import { generateKeyPairSync } from "node:crypto";
import { DAEMON_CSR_SIGNER } from "../manifests/mod.ts";
import { buildCsr, generateServingKey } from "../x509.ts";
import {
  DAEMON_CERT_SECONDS,
  decideCsr,
  EXTRA_NODE_NAME,
  EXTRA_NODE_UID,
  EXTRA_POD_NAME,
  EXTRA_POD_UID,
  isApprovedUnissued,
  isDecided,
} from "./decide.ts";
import type { CsrObject, SignContext, SignerPod } from "./decide.ts";

const USER = "system:serviceaccount:aicr-system:aicr-daemon";
const POD: SignerPod = {
  name: "aicr-daemon-abcde",
  uid: "pod-uid-1",
  node: "gpu-1",
  ip: "10.0.0.7",
  ownerUid: "ds-uid",
  deleting: false,
};
const CONTEXT: SignContext = {
  username: USER,
  daemonSetUid: "ds-uid",
  pods: new Map([[POD.uid, POD]]),
  nodes: new Map([["gpu-1", "node-uid-1"]]),
};

function request(names: { cn?: string; dns?: string[]; ips?: string[] } = {}): string {
  const pem = buildCsr({
    commonName: names.cn ?? "gpu-1",
    dnsNames: names.dns ?? ["gpu-1"],
    ipAddresses: names.ips ?? ["10.0.0.7"],
    ...generateServingKey(),
  });
  return Buffer.from(pem).toString("base64");
}

function csr(overrides: Partial<NonNullable<CsrObject["spec"]>> = {}, status = {}): CsrObject {
  return {
    metadata: { name: "aicr-daemon.gpu-1.x", uid: "csr-uid" },
    spec: {
      request: request(),
      signerName: DAEMON_CSR_SIGNER,
      username: USER,
      usages: ["digital signature", "key encipherment", "server auth"],
      extra: {
        [EXTRA_POD_NAME]: [POD.name],
        [EXTRA_POD_UID]: [POD.uid],
        [EXTRA_NODE_NAME]: ["gpu-1"],
        [EXTRA_NODE_UID]: ["node-uid-1"],
      },
      ...overrides,
    },
    status,
  };
}

Deno.test("decideCsr(): a request from this DaemonSet's pod for its own node and IP is signed, 30 days", () => {
  const decision = decideCsr(csr(), CONTEXT);
  assert.equal(decision.action, "sign");
  if (decision.action !== "sign") return;
  assert.equal(decision.node, "gpu-1");
  assert.deepEqual(decision.ipAddresses, ["10.0.0.7"]);
  assert.equal(decision.lifetimeSeconds, DAEMON_CERT_SECONDS);
  const shorter = decideCsr(csr({ expirationSeconds: 3600 }), CONTEXT);
  assert.equal(shorter.action === "sign" && shorter.lifetimeSeconds, 3600);
  const longer = decideCsr(csr({ expirationSeconds: 10 * DAEMON_CERT_SECONDS }), CONTEXT);
  assert.equal(longer.action === "sign" && longer.lifetimeSeconds, DAEMON_CERT_SECONDS);
});

Deno.test("decideCsr(): requests not ours to decide are left alone", () => {
  const skip = (c: CsrObject) => {
    const d = decideCsr(c, CONTEXT);
    return d.action === "skip" ? d.reason : d.action;
  };
  assert.equal(skip(csr({ signerName: "kubernetes.io/kubelet-serving" })), "other-signer");
  assert.equal(
    skip(csr({ username: "system:serviceaccount:other:aicr-daemon" })),
    "other-requester",
  );
  assert.equal(skip(csr({ username: "alice" })), "other-requester");
  assert.equal(skip(csr({}, { certificate: "eA==" })), "decided");
  assert.equal(skip(csr({}, { conditions: [{ type: "Denied", status: "True" }] })), "decided");
  assert.equal(skip(csr({}, { conditions: [{ type: "Failed", status: "True" }] })), "decided");
  const { ip: _ip, ...withoutIp } = POD;
  const noIp: SignContext = { ...CONTEXT, pods: new Map([[POD.uid, withoutIp]]) };
  assert.equal(decideCsr(csr(), noIp).action, "skip", "decided once the pod's IP is known");
});

Deno.test("decideCsr(): every refusal has its reason", () => {
  const reason = (c: CsrObject, context = CONTEXT) => {
    const d = decideCsr(c, context);
    return d.action === "deny" ? d.reason : `${d.action}`;
  };
  const extra = (changes: Record<string, string[] | undefined>) => {
    const base: Record<string, string[] | undefined> = {
      [EXTRA_POD_NAME]: [POD.name],
      [EXTRA_POD_UID]: [POD.uid],
      [EXTRA_NODE_NAME]: ["gpu-1"],
      [EXTRA_NODE_UID]: ["node-uid-1"],
      ...changes,
    };
    return Object.fromEntries(Object.entries(base).filter(([, v]) => v)) as Record<
      string,
      string[]
    >;
  };
  // A token not bound to a pod (e.g. a TokenRequest without boundObjectRef).
  assert.equal(reason(csr({ extra: {} })), "NotPodBound");
  assert.equal(reason(csr({ extra: extra({ [EXTRA_POD_UID]: undefined }) })), "NotPodBound");
  // A pod that is gone, is being deleted, or is not controlled by this DaemonSet.
  assert.equal(reason(csr({ extra: extra({ [EXTRA_POD_UID]: ["other"] }) })), "UnknownPod");
  const deleting = { ...CONTEXT, pods: new Map([[POD.uid, { ...POD, deleting: true }]]) };
  assert.equal(reason(csr(), deleting), "UnknownPod");
  const foreign = { ...CONTEXT, pods: new Map([[POD.uid, { ...POD, ownerUid: "another" }]]) };
  assert.equal(reason(csr(), foreign), "UnknownPod");
  assert.equal(reason(csr(), { ...CONTEXT, daemonSetUid: "reinstalled" }), "UnknownPod");
  assert.equal(reason(csr({ extra: extra({ [EXTRA_POD_NAME]: ["x"] }) })), "PodMismatch");
  // The token's node is not where the pod runs, or is missing.
  assert.equal(reason(csr({ extra: extra({ [EXTRA_NODE_NAME]: ["gpu-2"] }) })), "WrongNode");
  assert.equal(reason(csr({ extra: extra({ [EXTRA_NODE_NAME]: undefined }) })), "WrongNode");
  // The node the token names is gone, or was replaced (same name, another UID).
  const noNode = { ...CONTEXT, nodes: new Map([["gpu-1", undefined]]) };
  assert.equal(reason(csr(), noNode), "UnknownNode");
  const replaced = { ...CONTEXT, nodes: new Map([["gpu-1", "node-uid-2"]]) };
  assert.equal(reason(csr(), replaced), "UnknownNode");
  // The request itself.
  assert.equal(reason(csr({ request: Buffer.from("junk").toString("base64") })), "BadRequest");
  const rsa = generateKeyPairSync("rsa", { modulusLength: 1024 });
  const rsaRequest = Buffer.from(
    buildCsr({ commonName: "gpu-1", dnsNames: ["gpu-1"], ipAddresses: ["10.0.0.7"], ...rsa }),
  ).toString("base64");
  assert.equal(reason(csr({ request: rsaRequest })), "UnsupportedKey");
  const p384 = generateKeyPairSync("ec", { namedCurve: "P-384" });
  const p384Request = Buffer.from(
    buildCsr({ commonName: "gpu-1", dnsNames: ["gpu-1"], ipAddresses: ["10.0.0.7"], ...p384 }),
  ).toString("base64");
  assert.equal(reason(csr({ request: p384Request })), "UnsupportedKey");
  const signedByOther = (() => {
    const key = generateServingKey();
    const other = generateServingKey();
    return Buffer.from(buildCsr({
      commonName: "gpu-1",
      dnsNames: ["gpu-1"],
      ipAddresses: ["10.0.0.7"],
      publicKey: key.publicKey,
      privateKey: other.privateKey,
    })).toString("base64");
  })();
  assert.equal(reason(csr({ request: signedByOther })), "NoProofOfPossession");
  // Names: another node, an extra name, another IP, no IP, a foreign common name.
  assert.equal(reason(csr({ request: request({ dns: ["gpu-2"] }) })), "WrongNames");
  assert.equal(reason(csr({ request: request({ dns: ["gpu-1", "gpu-2"] }) })), "WrongNames");
  assert.equal(reason(csr({ request: request({ ips: ["10.0.0.8"] }) })), "WrongNames");
  assert.equal(reason(csr({ request: request({ ips: [] }) })), "WrongNames");
  assert.equal(reason(csr({ request: request({ cn: "gpu-2" }) })), "WrongNames");
  // Usages: client auth, or no server auth.
  assert.equal(reason(csr({ usages: ["server auth", "client auth"] })), "WrongUsages");
  assert.equal(reason(csr({ usages: ["digital signature"] })), "WrongUsages");
  assert.equal(reason(csr({ usages: [] })), "WrongUsages");
});

Deno.test("decideCsr(): a node not looked up is left for later, never signed blind", () => {
  const decision = decideCsr(csr(), { ...CONTEXT, nodes: new Map() });
  assert.deepEqual(decision, { action: "skip", reason: "node-unknown" });
});

Deno.test("decideCsr(): an approved request without its certificate is signed after the same checks, or failed", () => {
  const approved = {
    conditions: [{ type: "Approved", status: "True", reason: "AicrDaemonPodMatched" }],
  };
  assert.equal(isDecided(csr({}, approved)), false);
  assert.equal(isApprovedUnissued(csr({}, approved)), true);
  const decision = decideCsr(csr({}, approved), CONTEXT);
  assert.equal(decision.action, "sign");
  assert.equal(decision.action === "sign" && decision.approved, true);
  // Approved by hand for a pod that is gone: the checks still hold, and Denied cannot follow
  // Approved, so it fails with the reason.
  const gone = decideCsr(csr({}, approved), { ...CONTEXT, pods: new Map() });
  assert.equal(gone.action, "fail");
  assert.equal(gone.action === "fail" && gone.reason, "UnknownPod");
  assert.equal(isDecided(csr({}, { ...approved, certificate: "eA==" })), true);
});
