import assert from "node:assert/strict";
import { Buffer } from "node:buffer";
import { X509Certificate } from "node:crypto";
import { KubeApiError } from "../kube/mod.ts";
import type { RestRequest } from "../kube/mod.ts";
import { createLogger } from "../log.ts";
import { DAEMON_CSR_SIGNER } from "../manifests/mod.ts";
import { createFakeKube } from "../tests/fakes/kube.ts";
import { daemonPod } from "../tests/fakes/daemon_pod.ts";
import { buildCsr, chainIssuer, generateDaemonCa, generateServingKey } from "../x509.ts";
import { EXTRA_NODE_NAME, EXTRA_NODE_UID, EXTRA_POD_NAME, EXTRA_POD_UID } from "./decide.ts";
import type { CsrObject } from "./decide.ts";
import { signerCallerChecks, signPendingCsrs } from "./sign.ts";

const NOW = new Date("2026-12-05T10:00:00Z");
const CA = generateDaemonCa({ now: NOW });
const USER = "system:serviceaccount:aicr-system:aicr-daemon";

/** A fake cluster with the DaemonSet, one pod per node and those nodes, and CSRs served by `rest`. */
function world(nodes: string[]) {
  const fake = createFakeKube();
  const ds = fake.put("DaemonSet", { metadata: { name: "aicr-daemon", namespace: "aicr-system" } });
  const pods = nodes.map((node, i) => {
    fake.put("Node", { metadata: { name: node } });
    return fake.put(
      "Pod",
      daemonPod({ dsUid: ds.metadata?.uid ?? "", index: i, node, ip: `10.0.0.${i + 1}` }) as never,
    );
  });
  const csrs = new Map<string, CsrObject>();
  const writes: string[] = [];
  let conflictOn: string | undefined;
  fake.client.rest.json = <T>(request: RestRequest): Promise<T> => {
    if (request.method === "GET") return Promise.resolve({ items: [...csrs.values()] } as T);
    const [, name, sub] = /certificatesigningrequests\/([^/]+)\/(\w+)$/.exec(request.path) ?? [];
    writes.push(`${sub} ${name}`);
    if (name === conflictOn) {
      return Promise.reject(new KubeApiError("Cannot update: 409 Conflict", 409, "Conflict"));
    }
    csrs.set(name ?? "", request.body as CsrObject);
    return Promise.resolve(request.body as T);
  };
  function request(node: string, status: CsrObject["status"] = {}): CsrObject {
    const i = nodes.indexOf(node);
    const pod = pods[i];
    const name = `aicr-daemon.${node}`;
    const csr: CsrObject = {
      metadata: { name },
      spec: {
        signerName: DAEMON_CSR_SIGNER,
        username: USER,
        usages: ["digital signature", "key encipherment", "server auth"],
        request: Buffer.from(
          buildCsr({
            commonName: node,
            dnsNames: [node],
            ipAddresses: [`10.0.0.${i + 1}`],
            ...generateServingKey(),
          }),
        ).toString("base64"),
        extra: {
          [EXTRA_POD_NAME]: [pod?.metadata?.name ?? ""],
          [EXTRA_POD_UID]: [pod?.metadata?.uid ?? ""],
          [EXTRA_NODE_NAME]: [node],
          [EXTRA_NODE_UID]: [fake.objects.get(`Node//${node}`)?.metadata?.uid ?? ""],
        },
      },
      status,
    };
    csrs.set(name, csr);
    return csr;
  }
  return {
    fake,
    csrs,
    writes,
    request,
    conflict: (name: string) => void (conflictOn = name),
    deps: { kube: fake.client, log: createLogger({ write: () => {} }), now: () => NOW },
  };
}

Deno.test("signPendingCsrs() approves then writes a certificate for each live pod's request", async () => {
  const w = world(["gpu-1", "gpu-2"]);
  w.request("gpu-1");
  w.request("gpu-2");
  const outcome = await signPendingCsrs(w.deps, { namespace: "aicr-system", ca: CA });
  assert.deepEqual(outcome.signed.sort(), ["gpu-1", "gpu-2"]);
  assert.deepEqual(w.writes.sort(), [
    "approval aicr-daemon.gpu-1",
    "approval aicr-daemon.gpu-2",
    "status aicr-daemon.gpu-1",
    "status aicr-daemon.gpu-2",
  ]);
  const issued = w.csrs.get("aicr-daemon.gpu-1")?.status?.certificate ?? "";
  const cert = new X509Certificate(Buffer.from(issued, "base64").toString());
  assert.ok(cert.checkHost("gpu-1"));
  assert.ok(cert.checkIssued(new X509Certificate(CA.caCert)));
  // The CA follows the leaf: the daemon verifies its cohort's baseline with it.
  const issuer = chainIssuer(Buffer.from(issued, "base64").toString());
  assert.equal(issuer?.fingerprint256, new X509Certificate(CA.caCert).fingerprint256);
});

Deno.test("signPendingCsrs() signs an approved request whose certificate never came, without approving again", async () => {
  const w = world(["gpu-1"]);
  w.request("gpu-1", {
    conditions: [{ type: "Approved", status: "True", reason: "AicrDaemonPodMatched" }],
  });
  const outcome = await signPendingCsrs(w.deps, { namespace: "aicr-system", ca: CA });
  assert.deepEqual(outcome.signed, ["gpu-1"]);
  assert.deepEqual(w.writes, ["status aicr-daemon.gpu-1"]);
});

Deno.test("signPendingCsrs() refuses a request for a node that is gone, and one approved by hand for it fails", async () => {
  const w = world(["gpu-1", "gpu-2"]);
  w.request("gpu-1");
  w.request("gpu-2", { conditions: [{ type: "Approved", status: "True", reason: "ByHand" }] });
  w.fake.objects.delete("Node//gpu-1");
  w.fake.objects.delete("Node//gpu-2");
  const outcome = await signPendingCsrs(w.deps, { namespace: "aicr-system", ca: CA });
  assert.deepEqual(outcome.signed, []);
  assert.deepEqual(outcome.denied.map((d) => d.reason), ["UnknownNode", "UnknownNode"]);
  assert.deepEqual(w.writes.sort(), ["approval aicr-daemon.gpu-1", "status aicr-daemon.gpu-2"]);
  const conditions = (name: string) =>
    w.csrs.get(name)?.status?.conditions?.map((c) => `${c.type}:${c.reason}`);
  assert.deepEqual(conditions("aicr-daemon.gpu-1"), ["Denied:UnknownNode"]);
  assert.deepEqual(conditions("aicr-daemon.gpu-2"), ["Approved:ByHand", "Failed:UnknownNode"]);
});

Deno.test("signPendingCsrs() leaves a request another signer wrote first (409) and goes on", async () => {
  const w = world(["gpu-1", "gpu-2"]);
  w.request("gpu-1");
  w.request("gpu-2");
  w.conflict("aicr-daemon.gpu-1");
  const outcome = await signPendingCsrs(w.deps, { namespace: "aicr-system", ca: CA });
  assert.deepEqual(outcome.signed, ["gpu-2"]);
  assert.deepEqual(outcome.conflicts, ["aicr-daemon.gpu-1"]);
});

Deno.test("signPendingCsrs() writes nothing once it may not (a signer that lost its Lease)", async () => {
  const w = world(["gpu-1"]);
  w.request("gpu-1");
  const outcome = await signPendingCsrs(w.deps, {
    namespace: "aicr-system",
    ca: CA,
    mayWrite: () => false,
  });
  assert.deepEqual(outcome.signed, []);
  assert.deepEqual(w.writes, []);
});

Deno.test("signerCallerChecks() asks approve and sign on this signer only, the subresources and nodes", () => {
  const checks = signerCallerChecks();
  assert.deepEqual(
    checks.filter((c) => c.resource === "signers").map((c) => `${c.verb} ${c.name}`),
    [`approve ${DAEMON_CSR_SIGNER}`, `sign ${DAEMON_CSR_SIGNER}`],
  );
  assert.deepEqual(
    checks.filter((c) => c.subresource).map((c) => `${c.verb} ${c.subresource}`),
    ["update approval", "update status"],
  );
  assert.ok(checks.some((c) => c.verb === "get" && c.resource === "nodes"));
});
