import assert from "node:assert/strict";
import {
  ConflictError,
  exitCodeOf,
  NotFoundError,
  PermissionError,
  UsageError,
} from "../errors.ts";
import { KubeApiError } from "../kube/mod.ts";
import type { KindName, KubeObject } from "../kube/mod.ts";
import { Buffer } from "node:buffer";
import { createLogger } from "../log.ts";
import { generateDaemonCa } from "../x509.ts";
import { parseSnapshot, snapshotCohort } from "../snapshot/mod.ts";
import type { Snapshot } from "../snapshot/mod.ts";
import { setReading } from "../snapshot/testdata/generate.ts";
import { createFakeKube } from "../tests/fakes/kube.ts";
import { sampleSnapshot } from "../tests/fakes/snapshot.ts";
import {
  deleteBaselines,
  FOREIGN_BASELINE_WARNING,
  formatBaselineTable,
  getBaseline,
  listBaselines,
  setBaseline,
} from "./baseline.ts";

const NS = "aicr-system";

/** The install's CA, as its signer Secret holds it. */
const CA = generateDaemonCa({ now: new Date("2026-12-01T00:00:00Z") });

function putCa(fake: ReturnType<typeof createFakeKube>, ca = CA): void {
  fake.put("Secret", {
    metadata: { name: "aicr-daemon-signer", namespace: NS },
    data: {
      "tls.crt": Buffer.from(ca.caCert).toString("base64"),
      "tls.key": Buffer.from(ca.caKey).toString("base64"),
    },
  } as never);
}

function cluster(options: { denied?: string[]; noCa?: boolean } = {}) {
  const fake = createFakeKube();
  if (!options.noCa) putCa(fake);
  const lines: string[] = [];
  fake.client.selfAccessReview = (a) =>
    Promise.resolve({ allowed: !options.denied?.includes(`${a.verb} ${a.resource}`) });
  fake.client.updateConfigMapIfUid = (namespace, name, uid, content) => {
    const key = `ConfigMap/${namespace}/${name}`;
    const found = fake.objects.get(key);
    if (!found || found.metadata?.uid !== uid) return Promise.reject(new Error("replaced"));
    const next = {
      ...found,
      metadata: {
        ...found.metadata,
        labels: { ...content.labels, ...found.metadata?.labels },
        annotations: { ...found.metadata?.annotations, ...content.annotations },
      },
      data: content.data,
    } as KubeObject;
    fake.objects.set(key, next);
    return Promise.resolve(structuredClone(next));
  };
  const deps = {
    kube: fake.client,
    log: createLogger({ write: (l: string) => void lines.push(l) }),
    now: () => new Date("2026-12-03T12:00:00Z"),
  };
  return { fake, deps, lines };
}

function gb200(): Snapshot {
  const s = sampleSnapshot();
  s.metadata["source-node"] = "gb-1";
  setReading(s, "GPU.smi.gpu.model", "NVIDIA GB200 192GB HBM3e");
  return s;
}

const writes = (fake: ReturnType<typeof createFakeKube>) =>
  fake.calls.filter((c) => c.method === "create" || c.method === "delete").length;

Deno.test("setBaseline() files a snapshot under its cohort's ConfigMap, replaces aicr's own by UID, and list/get/delete find it", async () => {
  const { fake, deps } = cluster();
  const h100 = sampleSnapshot();
  const cohort = snapshotCohort(h100);
  const first = await setBaseline(deps, {
    namespace: NS,
    load: () => Promise.resolve(h100),
    source: "node node-1",
  });
  assert.equal(first.configMap, `aicr-daemon-baseline-${cohort.key}`);
  assert.equal(first.cohort.name, cohort.name);
  const stored = fake.objects.get(`ConfigMap/${NS}/${first.configMap}`) as KubeObject & {
    data: Record<string, string>;
  };
  assert.equal(stored.metadata?.labels?.["app.kubernetes.io/component"], "baseline");
  assert.equal(stored.metadata?.annotations?.["aicr.run/cohort"], cohort.name);
  assert.ok(
    !parseSnapshot(stored.data["snapshot.yaml"] ?? "").measurements.some((m) =>
      m.type === "NodeTopology"
    ),
  );
  const changed = sampleSnapshot();
  setReading(changed, "GPU.smi.driver", "580.95.05");
  await setBaseline(deps, {
    namespace: NS,
    load: () => Promise.resolve(changed),
    source: "file new.yaml",
    cohort: cohort.key,
  });
  await setBaseline(deps, { namespace: NS, load: () => Promise.resolve(gb200()), source: "f" });
  const listed = await listBaselines(deps, { namespace: NS });
  assert.deepEqual(listed.map((r) => [r.cohort.name, r.source]), [
    ["NVIDIA GB200 192GB HBM3e ×8", "f"],
    [cohort.name, "file new.yaml"],
  ]);
  assert.match(formatBaselineTable(listed), /^KEY\s+COHORT\s+NODE\s+SOURCE\s+UPDATED\s+TRUST\n/);
  assert.deepEqual(listed.map((r) => r.trust.state), ["signed", "signed"]);
  const got = await getBaseline(deps, { namespace: NS, cohort: cohort.name });
  assert.equal(parseSnapshot(got.text).measurements[0]?.subtypes[0]?.data.driver, "580.95.05");
  await assert.rejects(getBaseline(deps, { namespace: NS }), UsageError, "two cohorts: name one");
  await assert.rejects(getBaseline(deps, { namespace: NS, cohort: "nope" }), NotFoundError);
  const deleted = await deleteBaselines(deps, { namespace: NS, cohort: cohort.key });
  assert.deepEqual(deleted.map((r) => r.configMap), [first.configMap]);
  assert.equal((await listBaselines(deps, { namespace: NS })).length, 1);
  await deleteBaselines(deps, { namespace: NS, all: true });
  assert.deepEqual(await listBaselines(deps, { namespace: NS }), []);
});

Deno.test("setBaseline() refuses a snapshot of another cohort than the one named, before anything is written", async () => {
  const { fake, deps } = cluster();
  const h100 = snapshotCohort(sampleSnapshot());
  const error = await setBaseline(deps, {
    namespace: NS,
    load: () => Promise.resolve(gb200()),
    source: "node gb-1",
    cohort: h100.name,
  }).catch((e) => e);
  assert.ok(error instanceof UsageError, String(error));
  assert.equal(exitCodeOf(error), 2);
  assert.match(error.message, /belongs to cohort 'NVIDIA GB200 192GB HBM3e ×8'/);
  assert.equal(writes(fake), 0);
});

Deno.test("setBaseline() leaves a foreign ConfigMap at the name untouched: WARN and exit 2", async () => {
  const { fake, deps, lines } = cluster();
  const cohort = snapshotCohort(sampleSnapshot());
  fake.put("ConfigMap", {
    metadata: { name: `aicr-daemon-baseline-${cohort.key}`, namespace: NS, labels: { a: "b" } },
  });
  const before = structuredClone(
    fake.objects.get(`ConfigMap/${NS}/aicr-daemon-baseline-${cohort.key}`),
  );
  const error = await setBaseline(deps, {
    namespace: NS,
    load: () => Promise.resolve(sampleSnapshot()),
    source: "x",
  }).catch((e) => e);
  assert.ok(error instanceof ConflictError, String(error));
  assert.equal(exitCodeOf(error), 2);
  assert.ok(lines.some((l) => l.includes(FOREIGN_BASELINE_WARNING)));
  assert.deepEqual(fake.objects.get(`ConfigMap/${NS}/aicr-daemon-baseline-${cohort.key}`), before);
  assert.equal(writes(fake), 0);
});

Deno.test("setBaseline() runs the gate first: every missing permission, nothing loaded or written", async () => {
  const { fake, deps } = cluster({ denied: ["create configmaps", "update configmaps"] });
  let loaded = false;
  const error = await setBaseline(deps, {
    namespace: NS,
    load: () => {
      loaded = true;
      return Promise.resolve(sampleSnapshot());
    },
    source: "x",
  }).catch((e) => e);
  assert.ok(error instanceof PermissionError, String(error));
  assert.match(error.message, /cannot "create" configmaps/);
  assert.match(error.message, /cannot "update" configmaps/);
  assert.equal(loaded, false);
  assert.equal(writes(fake), 0);
});

Deno.test("setBaseline() and deleteBaselines() keep the daemon's Role listing exactly the baselines that exist", async () => {
  const { fake, deps, lines } = cluster();
  const daemonLabels = {
    "app.kubernetes.io/name": "aicr",
    "app.kubernetes.io/managed-by": "aicr",
    "app.kubernetes.io/component": "daemon",
    "app.kubernetes.io/instance": "aicr-daemon",
  };
  fake.put("Role", {
    metadata: { name: "aicr-daemon", namespace: NS, labels: daemonLabels },
    rules: [{
      apiGroups: [""],
      resources: ["configmaps"],
      verbs: ["get"],
      resourceNames: ["aicr-daemon-baseline-none"],
    }],
  } as never);
  const puts: string[] = [];
  fake.client.rest.json = <T>(request: { method: string; path: string; body?: unknown }) => {
    puts.push(`${request.method} ${request.path}`);
    const body = request.body as KubeObject;
    fake.objects.set(`Role/${NS}/${body.metadata?.name}`, structuredClone(body));
    return Promise.resolve(body as T);
  };
  const names = () =>
    (fake.objects.get(`Role/${NS}/aicr-daemon`) as unknown as {
      rules: { resourceNames: string[] }[];
    }).rules[0]?.resourceNames;
  const record = await setBaseline(deps, {
    namespace: NS,
    load: () => Promise.resolve(sampleSnapshot()),
    source: "x",
  });
  assert.deepEqual(names(), [record.configMap, "aicr-daemon-baseline-none"]);
  await setBaseline(deps, {
    namespace: NS,
    load: () => Promise.resolve(sampleSnapshot()),
    source: "y",
  });
  assert.equal(puts.length, 1, "a replaced baseline needs no new grant");
  assert.deepEqual(puts, [
    `PUT /apis/rbac.authorization.k8s.io/v1/namespaces/${NS}/roles/aicr-daemon`,
  ]);
  await deleteBaselines(deps, { namespace: NS, all: true });
  assert.deepEqual(names(), ["aicr-daemon-baseline-none"], "never empty: empty means every name");
  // The chart's Role (Helm writes managed-by=Helm and owns its rules): the grant goes into a Role
  // and RoleBinding of its own, and the chart's Role is not written.
  const role = fake.objects.get(`Role/${NS}/aicr-daemon`) as unknown as {
    metadata: { labels: Record<string, string> };
  };
  role.metadata.labels["app.kubernetes.io/managed-by"] = "Helm";
  const before = puts.length;
  const charted = await setBaseline(deps, {
    namespace: NS,
    load: () => Promise.resolve(sampleSnapshot()),
    source: "helm",
  });
  assert.equal(puts.length, before, "the chart's Role is left to Helm");
  assert.deepEqual(names(), ["aicr-daemon-baseline-none"]);
  const grant = fake.objects.get(`Role/${NS}/aicr-daemon-baselines`) as unknown as {
    rules: { resourceNames: string[] }[];
    metadata: { labels: Record<string, string> };
  };
  assert.deepEqual(grant.rules[0]?.resourceNames, [charted.configMap]);
  assert.equal(grant.metadata.labels["app.kubernetes.io/component"], "baseline");
  const binding = fake.objects.get(`RoleBinding/${NS}/aicr-daemon-baselines`) as unknown as {
    subjects: { name: string }[];
    roleRef: { name: string };
  };
  assert.deepEqual(binding.subjects.map((x) => x.name), ["aicr-daemon"]);
  assert.equal(binding.roleRef.name, "aicr-daemon-baselines");
  await deleteBaselines(deps, { namespace: NS, all: true });
  assert.deepEqual(puts.slice(before).filter((p) => p.startsWith("DELETE")), [
    `DELETE /apis/rbac.authorization.k8s.io/v1/namespaces/${NS}/rolebindings/aicr-daemon-baselines`,
    `DELETE /apis/rbac.authorization.k8s.io/v1/namespaces/${NS}/roles/aicr-daemon-baselines`,
  ], "the last baseline takes its grant along");
  // A Role of that name that aicr did not make is left alone.
  fake.put("Role", { metadata: { name: "aicr-daemon", namespace: NS }, rules: [] } as never);
  await setBaseline(deps, {
    namespace: NS,
    load: () => Promise.resolve(sampleSnapshot()),
    source: "z",
  });
  assert.equal(puts.filter((p) => p.startsWith("PUT")).length, 2, "set and delete-all only");
  assert.ok(lines.some((l) => l.includes("is not aicr's, or has no baseline rule")));
});

Deno.test("setBaseline() signs with the install's CA; list and get say an edited, planted or foreign-signed baseline is untrusted", async () => {
  const { fake, deps, lines } = cluster();
  const record = await setBaseline(deps, {
    namespace: NS,
    load: () => Promise.resolve(sampleSnapshot()),
    source: "node node-1",
  });
  assert.equal(record.trust.state, "signed");
  const key = `ConfigMap/${NS}/${record.configMap}`;
  const stored = fake.objects.get(key) as KubeObject & { data: Record<string, string> };
  assert.ok(stored.data.signature, "the envelope is stored beside the snapshot");

  // Edited in place (what `kubectl edit` does): untrusted, said, still listed.
  stored.data["snapshot.yaml"] += "# edited\n";
  let listed = await listBaselines(deps, { namespace: NS });
  assert.deepEqual(listed.map((r) => r.trust.state), ["edited"]);
  assert.match(formatBaselineTable(listed), /\sedited\n$/);
  assert.ok(lines.some((l) => l.startsWith("WARN baseline untrusted") && l.includes("edited")));

  // Planted with the right labels and annotations, never signed.
  const gb = snapshotCohort(gb200());
  fake.put("ConfigMap", {
    metadata: {
      name: `aicr-daemon-baseline-${gb.key}`,
      namespace: NS,
      labels: { ...stored.metadata?.labels, "aicr.run/cohort-key": gb.key },
      annotations: {
        "aicr.run/cohort": gb.name,
        "aicr.run/cohort-values": JSON.stringify(gb.values),
      },
    },
    data: { "snapshot.yaml": "x", format: "yaml" },
  } as never);
  listed = await listBaselines(deps, { namespace: NS });
  assert.deepEqual(listed.map((r) => r.trust.state), ["unsigned", "edited"]);

  // Another install's CA signed it: untrusted too.
  putCa(fake, generateDaemonCa({ now: new Date("2026-12-01T00:00:00Z") }));
  const got = await getBaseline(deps, { namespace: NS, cohort: gb.key });
  assert.equal(got.record.trust.state, "unsigned");
  await setBaseline(deps, { namespace: NS, load: () => Promise.resolve(gb200()), source: "f" });
  putCa(fake);
  listed = await listBaselines(deps, { namespace: NS });
  assert.deepEqual(listed.map((r) => r.trust.state), ["other-ca", "edited"]);

  // A caller who may not read the CA sees every baseline unverified, and why.
  const get = fake.client.get.bind(fake.client);
  fake.client.get =
    ((kind: KindName, namespace: string, name: string) =>
      kind === "Secret"
        ? Promise.reject(new KubeApiError("secrets is forbidden", 403, "Forbidden"))
        : get(kind, namespace, name)) as typeof fake.client.get;
  lines.length = 0;
  listed = await listBaselines(deps, { namespace: NS });
  assert.deepEqual(listed.map((r) => r.trust.state), ["unverified", "unverified"]);
  assert.ok(
    lines.some((l) =>
      l.startsWith("WARN baselines not verified") && l.includes("may not read Secret")
    ),
    lines.join(""),
  );
});

Deno.test("setBaseline() without the install's CA writes nothing: the daemon must be installed first (exit 3)", async () => {
  const { fake, deps } = cluster({ noCa: true });
  const error = await setBaseline(deps, {
    namespace: NS,
    load: () => Promise.resolve(sampleSnapshot()),
    source: "x",
  }).catch((e) => e);
  assert.ok(error instanceof NotFoundError, String(error));
  assert.equal(exitCodeOf(error), 3);
  assert.match(
    error.message,
    /^Cannot sign the baseline: Secret 'aicr-system\/aicr-daemon-signer' does not exist/,
  );
  assert.equal(writes(fake), 0);
});

Deno.test("setBaseline() asks the gate for the CA Secret: without it, nothing is loaded or written", async () => {
  const { fake, deps } = cluster({ denied: ["get secrets"] });
  const error = await setBaseline(deps, {
    namespace: NS,
    load: () => Promise.reject(new Error("not loaded")),
    source: "x",
  }).catch((e) => e);
  assert.ok(error instanceof PermissionError, String(error));
  assert.match(error.message, /cannot "get" secrets/);
  assert.equal(writes(fake), 0);
});
