import assert from "node:assert/strict";
import { Buffer } from "node:buffer";
import { generateKeyPairSync, X509Certificate } from "node:crypto";
import type { RestRequest } from "../kube/mod.ts";
import { NOOP_LOGGER } from "../log.ts";
import { generateDaemonCa, issueServingCertificate, parseCsr } from "../x509.ts";
import { createServingIdentity, csrName } from "./identity.ts";

const CA = generateDaemonCa({ now: new Date() });
const OPTIONS = {
  signerName: "aicr.run/daemon-serving",
  nodeName: "gpu-1",
  podName: "aicr-daemon-x1",
  podUid: "0f1e2d3c-aaaa-bbbb-cccc-000000000001",
  podIp: "10.0.0.7",
};

/** A key the daemon does not hold. */
const OTHER_KEY = generateKeyPairSync("ec", { namedCurve: "P-256" }).publicKey;

/**
 * A fake CSR API: records creates, answers reads from a script of outcomes per request
 * (`pending`, `denied`, `issue` for the requested key and the given names).
 */
function fakeApi(
  script: ("pending" | "denied" | { node: string; ip: string; otherKey?: true })[][],
) {
  const created: { name: string; body: Record<string, unknown> }[] = [];
  const reads = new Map<string, number>();
  const rest = {
    json<T>(request: RestRequest): Promise<T> {
      if (request.method === "POST") {
        const body = request.body as { metadata: { name: string } };
        created.push({ name: body.metadata.name, body: body as Record<string, unknown> });
        return Promise.resolve({} as T);
      }
      const name = request.path.split("/").pop() ?? "";
      const index = created.findIndex((c) => c.name === name);
      const steps = script[index] ?? [];
      const n = reads.get(name) ?? 0;
      reads.set(name, n + 1);
      const step = steps[Math.min(n, steps.length - 1)];
      if (step === "denied") {
        return Promise.resolve({
          status: { conditions: [{ type: "Denied", reason: "WrongNames", message: "no" }] },
        } as T);
      }
      if (step === undefined || step === "pending") return Promise.resolve({ status: {} } as T);
      const spec = (created[index]?.body as { spec: { request: string } }).spec;
      const parsed = parseCsr(Buffer.from(spec.request, "base64").toString());
      const cert = issueServingCertificate({
        ca: CA,
        publicKey: step.otherKey ? OTHER_KEY : parsed.publicKey,
        node: step.node,
        ipAddresses: [step.ip],
        now: new Date(),
        lifetimeSeconds: 3600,
      });
      return Promise.resolve({
        status: { certificate: Buffer.from(cert).toString("base64") },
      } as T);
    },
  };
  return { created, kube: { rest } as never };
}

/** Runs the request loop until it hands a certificate to the server; returns what it handed. */
async function firstInstalled(identity: ReturnType<typeof createServingIdentity>) {
  const stop = new AbortController();
  const installed: string[] = [];
  await identity.run((pair) => {
    installed.push(pair.cert);
    stop.abort();
  }, stop.signal);
  return installed;
}

Deno.test("identity: asks with its pod's names, serves the placeholder until the certificate comes", async () => {
  const api = fakeApi([["pending", "pending", { node: "gpu-1", ip: "10.0.0.7" }]]);
  const sleeps: number[] = [];
  const identity = createServingIdentity({
    kube: api.kube,
    log: NOOP_LOGGER,
    now: () => new Date(),
    sleep: (ms) => {
      sleeps.push(ms);
      return Promise.resolve();
    },
  }, OPTIONS);
  const placeholder = new X509Certificate(identity.placeholder.cert);
  assert.equal(placeholder.verify(new X509Certificate(CA.caCert).publicKey), false);
  assert.match(String(identity.awaiting()), /awaiting its serving certificate/);
  const installed = await firstInstalled(identity);
  assert.equal(installed.length, 1);
  const cert = new X509Certificate(installed[0] ?? "");
  assert.equal(cert.checkHost("gpu-1"), "gpu-1");
  assert.equal(identity.awaiting(), undefined);
  // The request: exactly this node and IP, serving usages, the signer; the name from node, pod
  // and key.
  const body = api.created[0]?.body as {
    metadata: { name: string };
    spec: { signerName: string; usages: string[]; request: string };
  };
  assert.equal(body.spec.signerName, "aicr.run/daemon-serving");
  assert.deepEqual(body.spec.usages, ["digital signature", "key encipherment", "server auth"]);
  const parsed = parseCsr(Buffer.from(body.spec.request, "base64").toString());
  assert.deepEqual([parsed.commonName, parsed.dnsNames, parsed.ipAddresses], [
    "gpu-1",
    ["gpu-1"],
    ["10.0.0.7"],
  ]);
  assert.ok(parsed.signatureValid);
  assert.equal(body.metadata.name, csrName(OPTIONS, parsed.publicKey));
  assert.match(body.metadata.name, /^aicr-daemon\.gpu-1\.0f1e2d3c\.[0-9a-f]{10}$/);
  // Backed-off polls: 500, 1000, 2000 ms, then the renewal wait.
  assert.deepEqual(sleeps.slice(0, 3), [500, 1000, 2000]);
});

Deno.test("identity: a denied request or a certificate for another node is never served; it asks again", async () => {
  const api = fakeApi([
    ["denied"],
    [{ node: "gpu-2", ip: "10.0.0.7" }],
    [{ node: "gpu-1", ip: "10.0.0.7" }],
  ]);
  const reasons: (string | undefined)[] = [];
  const identity = createServingIdentity({
    kube: api.kube,
    log: NOOP_LOGGER,
    now: () => new Date(),
    sleep: () => {
      reasons.push(identity.awaiting());
      return Promise.resolve();
    },
  }, OPTIONS);
  const installed = await firstInstalled(identity);
  assert.equal(api.created.length, 3, "a new request (new key) after each refusal");
  assert.equal(new Set(api.created.map((c) => c.name)).size, 3);
  assert.ok(reasons.some((r) => /was denied: WrongNames no/.test(String(r))));
  assert.equal(installed.length, 1);
  assert.equal(new X509Certificate(installed[0] ?? "").checkHost("gpu-1"), "gpu-1");
});

Deno.test("identity: polls at most 4 s apart for two minutes after asking, then back off to 30 s", async () => {
  const pending = Array.from({ length: 60 }, () => "pending" as const);
  const api = fakeApi([[...pending, { node: "gpu-1", ip: "10.0.0.7" }]]);
  let now = 0;
  const sleeps: number[] = [];
  const identity = createServingIdentity({
    kube: api.kube,
    log: NOOP_LOGGER,
    now: () => new Date(Date.UTC(2026, 11, 5) + now),
    sleep: (ms) => {
      sleeps.push(ms);
      now += ms;
      return Promise.resolve();
    },
  }, OPTIONS);
  await firstInstalled(identity);
  const polls = sleeps.slice(0, 61);
  let elapsed = 0;
  for (const ms of polls) {
    // Within the fast window (the delay was chosen before it ended) no wait is over 4 s.
    if (elapsed < 120_000) assert.ok(ms <= 4_000, `${ms} ms at ${elapsed}`);
    elapsed += ms;
  }
  assert.deepEqual(polls.slice(0, 5), [500, 1000, 2000, 4000, 4000]);
  assert.ok(polls.includes(30_000), "backs off to 30 s once the window has passed");
});

Deno.test("identity: a certificate for another key, or for another pod IP, is never served; it asks again", async () => {
  for (
    const wrong of [
      { node: "gpu-1", ip: "10.0.0.7", otherKey: true as const },
      { node: "gpu-1", ip: "10.0.0.8" },
    ]
  ) {
    const api = fakeApi([[wrong], [{ node: "gpu-1", ip: "10.0.0.7" }]]);
    const identity = createServingIdentity({
      kube: api.kube,
      log: NOOP_LOGGER,
      now: () => new Date(),
      sleep: () => Promise.resolve(),
    }, OPTIONS);
    const installed = await firstInstalled(identity);
    assert.equal(api.created.length, 2, `asked again after ${JSON.stringify(wrong)}`);
    assert.equal(installed.length, 1, "only the right certificate was served");
    const served = new X509Certificate(installed[0] ?? "");
    assert.equal(served.checkIP("10.0.0.7"), "10.0.0.7");
    const asked = (api.created[1]?.body as { spec: { request: string } }).spec.request;
    const key = parseCsr(Buffer.from(asked, "base64").toString()).publicKey;
    assert.ok(served.publicKey.equals(key), "for the key of the request it answers");
  }
});
