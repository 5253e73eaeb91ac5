import assert from "node:assert/strict";
import { Buffer } from "node:buffer";
import { createPrivateKey, X509Certificate } from "node:crypto";
import { exitCodeOf, formatError, InterruptedError, PermissionError } from "../errors.ts";
import { KubeApiError } from "../kube/mod.ts";
import type { KubeObject, RestRequest } from "../kube/mod.ts";
import { createLogger } from "../log.ts";
import { createFakeKube } from "../tests/fakes/kube.ts";
import { installCallerChecks, installDaemonSet } from "./install.ts";
import { makeDaemonCa, renderDaemonSet } from "./render.ts";
import { uninstallDaemonSet } from "./uninstall.ts";
import { runUninstall } from "./daemonset.ts";
import { grantableBaselines } from "./baseline_trust.ts";
import { signBaseline } from "../snapshot/mod.ts";
import { generateDaemonCa } from "../x509.ts";

const NOW = new Date("2026-12-02T18:00:00Z");
const quiet = () => createLogger({ write: () => {} });

function render(extra: Partial<Parameters<typeof renderDaemonSet>[0]> = {}) {
  return renderDaemonSet({
    namespace: "aicr-system",
    image: "ghcr.io/nvidia/aicr:v0.1.0",
    ca: makeDaemonCa({ now: NOW }),
    runId: "20261202-180000-0123456789abcdef",
    invocationId: "fedcba9876543210",
    ...extra,
  });
}

Deno.test("install: without the signer, render gives the twelve objects in creation order, all with the daemon's labels", () => {
  const { objects, labels } = render({ signer: false });
  assert.deepEqual(objects.map((o) => `${o.kind}/${o.manifest.metadata.name}`), [
    "ServiceAccount/aicr-daemon",
    "ClusterRole/aicr-daemon-aicr-system.aicr-daemon",
    "ClusterRoleBinding/aicr-daemon-aicr-system.aicr-daemon",
    "Role/aicr-daemon",
    "RoleBinding/aicr-daemon",
    "ServiceAccount/aicr-reader",
    "ClusterRole/aicr-snapshot-reader-aicr-system.aicr-daemon",
    "ClusterRoleBinding/aicr-snapshot-reader-aicr-system.aicr-daemon",
    "Secret/aicr-daemon-signer",
    "ConfigMap/aicr-daemon-ca",
    "DaemonSet/aicr-daemon",
    "Service/aicr-daemon",
  ]);
  for (const o of objects) assert.deepEqual(o.manifest.metadata.labels, labels);
  assert.equal(labels["aicr.run/invocation-id"], "fedcba9876543210");
  assert.equal(labels["app.kubernetes.io/component"], "daemon");
});

Deno.test("install: by default render adds the signer's grants, its empty Lease and its Deployment, labelled signer", () => {
  const { objects, grants } = render();
  assert.equal(objects.length, 19);
  const signerObjects = objects.filter((o) =>
    o.manifest.metadata.labels?.["app.kubernetes.io/component"] === "signer"
  );
  assert.deepEqual(signerObjects.map((o) => `${o.kind}/${o.manifest.metadata.name}`), [
    "ServiceAccount/aicr-daemon-signer",
    "ClusterRole/aicr-csr-signer-aicr-system.aicr-daemon",
    "ClusterRoleBinding/aicr-csr-signer-aicr-system.aicr-daemon",
    "Role/aicr-daemon-signer",
    "RoleBinding/aicr-daemon-signer",
    "Lease/aicr-daemon-signer",
    "Deployment/aicr-daemon-signer",
  ]);
  const deployment = objects.find((o) => o.kind === "Deployment")?.manifest as unknown as {
    spec: { template: { spec: { containers: { image: string }[] } } };
  };
  assert.equal(deployment.spec.template.spec.containers[0]?.image, "ghcr.io/nvidia/aicr:v0.1.0");
  assert.equal(grants.length, 3);
  assert.ok(
    grants[2]?.cluster.some((r) => r.resources.includes("signers") && r.verbs.includes("sign")),
  );
  // The caller must hold what it grants the signer, and be able to create a Lease and a Deployment.
  const checks = installCallerChecks(render(), "aicr-system");
  for (const want of ["leases", "deployments", "signers"]) {
    assert.ok(checks.some((c) => c.resource === want), want);
  }
  assert.equal(render({ signer: false }).objects.some((o) => o.kind === "Deployment"), false);
});

Deno.test("install: the daemon may review tokens and access and get (not list) nodes, the reader may get snapshots and list nodes", () => {
  const { objects } = render();
  const rules = (name: string) =>
    (objects.find((o) => o.manifest.metadata.name === name)?.manifest as unknown as {
      rules: unknown[];
    })
      .rules;
  assert.deepEqual(rules("aicr-snapshot-reader-aicr-system.aicr-daemon"), [
    { apiGroups: ["aicr.run"], resources: ["snapshots"], verbs: ["get"] },
    { apiGroups: [""], resources: ["nodes"], verbs: ["list"] },
  ]);
  const daemonRules = JSON.stringify(rules("aicr-daemon-aicr-system.aicr-daemon"));
  assert.match(daemonRules, /\{"apiGroups":\[""\],"resources":\["nodes"\],"verbs":\["get"\]\}/);
  assert.match(daemonRules, /tokenreviews/);
  assert.match(daemonRules, /subjectaccessreviews/);
  assert.doesNotMatch(daemonRules, /"create".*configmaps|"delete"/);
  const binding = objects.find((o) =>
    o.kind === "ClusterRoleBinding" && o.manifest.metadata.name.startsWith("aicr-snapshot-reader")
  )?.manifest as unknown as { subjects: unknown[] };
  assert.deepEqual(binding.subjects, [
    { kind: "ServiceAccount", name: "aicr-reader", namespace: "aicr-system" },
  ]);
});

Deno.test("install: the signer Secret holds the CA pair (mounted nowhere), the ConfigMap its certificate", () => {
  const { objects } = render();
  const secret = objects.find((o) => o.kind === "Secret")?.manifest as unknown as {
    type: string;
    data: Record<string, string>;
  };
  assert.equal(secret.type, "kubernetes.io/tls");
  const pem = (key: string) => Buffer.from(secret.data[key] ?? "", "base64").toString("utf8");
  const ca = new X509Certificate(pem("tls.crt"));
  assert.equal(ca.ca, true);
  assert.ok(ca.checkPrivateKey(createPrivateKey(pem("tls.key"))));
  const cm = objects.find((o) => o.kind === "ConfigMap")?.manifest as unknown as {
    data: Record<string, string>;
  };
  assert.equal(cm.data["ca.crt"], pem("tls.crt"));
  assert.equal(JSON.stringify(cm).includes("PRIVATE KEY"), false, "the key stays in the Secret");
  const ds = JSON.stringify(objects.find((o) => o.kind === "DaemonSet")?.manifest);
  assert.equal(ds.includes("aicr-daemon-signer"), false, "no pod mounts the CA key");
  assert.equal(ds.includes("secretName"), false, "no pod mounts any Secret");
});

Deno.test("install: GPU nodes by default, every node with allNodes, the selector given otherwise", () => {
  const spec = (extra: Parameters<typeof render>[0]) =>
    (render(extra).objects.find((o) => o.kind === "DaemonSet")?.manifest as unknown as {
      spec: {
        template: {
          spec: { nodeSelector?: Record<string, string>; containers: { args: string[] }[] };
        };
      };
    }).spec.template.spec;
  assert.deepEqual(spec({}).nodeSelector, { "nvidia.com/gpu.present": "true" });
  assert.equal(spec({ allNodes: true }).nodeSelector, undefined);
  assert.deepEqual(spec({ nodeSelector: { pool: "a" } }).nodeSelector, { pool: "a" });
  const args = spec({}).containers[0]?.args ?? [];
  assert.equal(args[args.indexOf("--token-audience") + 1], "aicr-daemon:$(NODE_NAME)");
  assert.equal(args[args.indexOf("--csr-signer") + 1], "aicr.run/daemon-serving");
  assert.equal(args[args.indexOf("--pod-uid") + 1], "$(POD_UID)");
  assert.ok(args.includes("--require-node-bound-token"));
  assert.equal(args[args.indexOf("--listen") + 1], "$(POD_IP)");
  assert.equal(args[args.indexOf("--baseline-namespace") + 1], "aicr-system");
  assert.equal(args[args.indexOf("--baseline-name") + 1], "aicr-daemon");
});

Deno.test("install: the daemon's Role may only get the baseline ConfigMaps that exist, never every ConfigMap", () => {
  const role = (extra: Parameters<typeof render>[0]) =>
    render(extra).objects.find((o) => o.kind === "Role")?.manifest as unknown as {
      metadata: { namespace: string };
      rules: unknown[];
    };
  assert.equal(role({}).metadata.namespace, "aicr-system");
  // No baseline yet: only the placeholder, so resourceNames is never empty (empty = every name).
  assert.deepEqual(role({}).rules, [{
    apiGroups: [""],
    resources: ["configmaps"],
    verbs: ["get"],
    resourceNames: ["aicr-daemon-baseline-none"],
  }]);
  assert.deepEqual(
    (role({ baselineConfigMaps: ["aicr-daemon-baseline-0123456789abcdef"] }).rules[0] as {
      resourceNames: string[];
    }).resourceNames,
    ["aicr-daemon-baseline-0123456789abcdef", "aicr-daemon-baseline-none"],
  );
});

Deno.test("install: a headless Service on the https port, scrape annotations without a ServiceMonitor, none with one", () => {
  type Service = {
    metadata: { annotations?: Record<string, string> };
    spec: {
      clusterIP: string;
      selector: Record<string, string>;
      ports: { name: string; port: number }[];
    };
  };
  const plain = render({ port: 9443 }).objects;
  const service = plain.find((o) => o.kind === "Service")?.manifest as unknown as Service;
  assert.equal(service.spec.clusterIP, "None");
  assert.deepEqual(service.spec.ports.map((p) => [p.name, p.port]), [["https", 9443]]);
  assert.deepEqual(service.spec.selector, {
    "app.kubernetes.io/name": "aicr",
    "app.kubernetes.io/component": "daemon",
    "app.kubernetes.io/instance": "aicr-daemon",
  });
  assert.deepEqual(service.metadata.annotations, {
    "prometheus.io/scrape": "true",
    "prometheus.io/scheme": "https",
    "prometheus.io/port": "9443",
    "prometheus.io/path": "/metrics",
  });
  assert.ok(!plain.some((o) => o.kind === "ServiceMonitor"));
  const monitored = render({ serviceMonitor: true }).objects;
  const withMonitor = monitored.find((o) => o.kind === "Service")?.manifest as unknown as Service;
  assert.equal(withMonitor.metadata.annotations, undefined, "no double scrape");
  const monitor = monitored.find((o) => o.kind === "ServiceMonitor")?.manifest as unknown as {
    spec: { endpoints: { port: string; tlsConfig: { serverName?: string } }[] };
  };
  assert.equal(monitor.spec.endpoints[0]?.port, "https");
  // Each daemon's certificate names its pod IP, which Prometheus scrapes: no fixed server name.
  assert.equal(monitor.spec.endpoints[0]?.tlsConfig.serverName, undefined);
  const none = render({ service: false, serviceMonitor: true }).objects;
  assert.ok(!none.some((o) => o.kind === "Service" || o.kind === "ServiceMonitor"));
});

Deno.test("install: the caller matrix covers every created kind and every granted rule", () => {
  const checks = installCallerChecks(render(), "aicr-system");
  const keys = checks.map((q) => `${q.verb} ${q.group}/${q.resource} ${q.namespace ?? "*"}`);
  for (
    const want of [
      "create apps/daemonsets aicr-system",
      "delete /secrets aicr-system",
      "list /configmaps aicr-system",
      "create rbac.authorization.k8s.io/clusterrolebindings *",
      "create authentication.k8s.io/tokenreviews *",
      "get aicr.run/snapshots *",
      "list /nodes *",
      "list /pods aicr-system",
      "approve certificates.k8s.io/signers *",
      "sign certificates.k8s.io/signers *",
      "list certificates.k8s.io/certificatesigningrequests *",
      "create certificates.k8s.io/certificatesigningrequests *",
    ]
  ) assert.ok(keys.includes(want), `missing ${want}`);
  const full = checks.map((q) =>
    `${q.verb} ${q.group}/${q.resource}/${q.subresource ?? ""} ${q.name ?? ""} ${
      q.namespace ?? "*"
    }`
  );
  assert.ok(full.includes("update certificates.k8s.io/certificatesigningrequests/approval  *"));
  assert.ok(full.includes("approve certificates.k8s.io/signers/ aicr.run/daemon-serving *"));
  assert.equal(new Set(full).size, full.length, "no question twice");
});

function fakeCluster(options: { denied?: string[]; serviceMonitorCrd?: boolean } = {}) {
  const fake = createFakeKube();
  fake.put("Namespace", { metadata: { name: "aicr-system" } });
  fake.client.discoverResources = () =>
    Promise.resolve(
      options.serviceMonitorCrd
        ? [{
          group: "monitoring.coreos.com",
          version: "v1",
          plural: "servicemonitors",
          kind: "ServiceMonitor",
          namespaced: true,
          verbs: ["create", "delete", "get", "list"],
        }]
        : [],
    );
  // The signer's list of certificate requests: none unless a test says otherwise.
  fake.client.rest.json = <T>(request: RestRequest) =>
    Promise.resolve((request.method === "GET" ? { items: [] } : {}) as T);
  fake.client.selfAccessReview = (attributes) =>
    Promise.resolve({
      allowed: !options.denied?.includes(`${attributes.verb} ${attributes.resource}`),
    });
  return fake;
}

function deps(fake: ReturnType<typeof createFakeKube>) {
  let n = 0;
  return {
    kube: fake.client,
    log: quiet(),
    now: () => NOW,
    randomHex: () => (++n).toString(16).padStart(16, "0"),
  };
}

const OPTIONS = { namespace: "aicr-system", image: "aicr:dev", noWait: true };

/** The labels of the daemon's pods, as the install's wait selects them. */
const DAEMON_POD_LABELS = {
  "app.kubernetes.io/name": "aicr",
  "app.kubernetes.io/component": "daemon",
  "app.kubernetes.io/instance": "aicr-daemon",
};

Deno.test("install: a denied gate lists every missing permission and creates nothing", async () => {
  const fake = fakeCluster({ denied: ["create daemonsets", "create clusterroles"] });
  const error = await installDaemonSet(deps(fake), OPTIONS).catch((e) => e);
  assert.ok(error instanceof PermissionError, String(error));
  assert.match(error.message, /cannot "create" daemonsets\.apps \(namespace "aicr-system"\)/);
  assert.match(error.message, /cannot "create" clusterroles\.rbac\.authorization\.k8s\.io/);
  assert.equal(fake.calls.filter((c) => c.method === "create").length, 0);
});

Deno.test("install: a failure midway deletes what was created, by UID, and rethrows", async () => {
  const fake = fakeCluster();
  const create = fake.client.create.bind(fake.client);
  fake.client.create = (kind, object, options) =>
    kind === "DaemonSet"
      ? Promise.reject(new KubeApiError("Cannot create: 422 Invalid: bad", 422, "Invalid"))
      : create(kind, object, options);
  const error = await installDaemonSet(deps(fake), OPTIONS).catch((e) => e);
  assert.ok(error instanceof KubeApiError);
  assert.deepEqual(
    [...fake.objects.keys()].filter((k) => !k.startsWith("Namespace/")),
    [],
    "every created object is gone",
  );
  // Everything created before the DaemonSet: the daemon's, the reader's and the signer's grants,
  // the CA Secret and ConfigMap.
  assert.equal(fake.calls.filter((c) => c.method === "delete").length, 15);
});

Deno.test("install: an existing DaemonSet is a conflict before anything is created", async () => {
  const fake = fakeCluster();
  fake.put("DaemonSet", { metadata: { name: "aicr-daemon", namespace: "aicr-system" } });
  const error = await installDaemonSet(deps(fake), OPTIONS).catch((e) => e);
  assert.match(String(error), /already installed/);
  // The way on names upgrade first, then uninstall.
  assert.match(
    (error as { details?: unknown[] }).details?.join("\n") ?? "",
    /aicr daemonset upgrade -n aicr-system.*\n.*aicr daemonset uninstall -n aicr-system/,
  );
  assert.equal(fake.calls.filter((c) => c.method === "create").length, 0);
});

/**
 * The clock and sleep of an install's wait: each sleep advances the clock, has the DaemonSet
 * controller count `desired` nodes, and puts the pods once.
 */
function waitWorld(
  clock: { ms: number },
  fake: ReturnType<typeof createFakeKube>,
  desired: number,
  pods: () => KubeObject[],
) {
  return {
    now: () => new Date(clock.ms),
    sleep: (ms: number) => {
      clock.ms += ms;
      const ds = [...fake.objects.entries()].find(([k]) => k.startsWith("DaemonSet/"))?.[1];
      if (ds) {
        ds.metadata = { ...ds.metadata, generation: 1 } as NonNullable<KubeObject["metadata"]>;
        ds.status = { observedGeneration: 1, desiredNumberScheduled: desired };
      }
      if (!fake.objects.has("Pod/aicr-system/a")) {
        for (const pod of pods()) fake.put("Pod", pod as never);
      }
      return Promise.resolve();
    },
  };
}

Deno.test("install: the wait reports the pods that are not Ready when time runs out", async () => {
  const fake = fakeCluster();
  const clock = { ms: NOW.getTime() };
  const pod = (name: string, node: string, ready: boolean): KubeObject => ({
    metadata: { name, namespace: "aicr-system", labels: DAEMON_POD_LABELS },
    spec: { nodeName: node },
    status: {
      phase: "Running",
      podIP: "10.0.0.1",
      conditions: [{ type: "Ready", status: ready ? "True" : "False" }],
      containerStatuses: ready ? [] : [{ state: { waiting: { reason: "CrashLoopBackOff" } } }],
    },
  });
  const result = await installDaemonSet({
    ...deps(fake),
    ...waitWorld(clock, fake, 2, () => [
      pod("a", "gpu-1", true),
      pod("b", "gpu-2", false),
    ]),
  }, { namespace: "aicr-system", image: "aicr:dev", timeoutMs: 5000, pollMs: 1000 });
  assert.equal(result.ready, false);
  assert.equal(result.desired, 2);
  // Ready by its condition, but no certificate was ever issued to it: not ready.
  assert.deepEqual(result.pods.map((p) => [p.node, p.ready, p.detail ?? ""]), [
    ["gpu-1", false, "awaiting its serving certificate"],
    ["gpu-2", false, "CrashLoopBackOff"],
  ]);
});

Deno.test("install: a Ready pod counts once its certificate request was signed", async () => {
  const fake = fakeCluster();
  const clock = { ms: NOW.getTime() };
  fake.client.rest.json = <T>(request: RestRequest) => {
    const uid = fake.objects.get("Pod/aicr-system/a")?.metadata?.uid;
    const items = uid
      ? [{
        metadata: { name: "aicr-daemon.gpu-1.x" },
        spec: {
          signerName: "aicr.run/daemon-serving",
          username: "system:serviceaccount:aicr-system:aicr-daemon",
          extra: { "authentication.kubernetes.io/pod-uid": [uid] },
        },
        status: { certificate: "eA==" },
      }]
      : [];
    return Promise.resolve((request.method === "GET" ? { items } : {}) as T);
  };
  const result = await installDaemonSet({
    ...deps(fake),
    ...waitWorld(clock, fake, 1, () => [
      {
        metadata: { name: "a", namespace: "aicr-system", labels: DAEMON_POD_LABELS },
        spec: { nodeName: "gpu-1" },
        status: {
          phase: "Running",
          podIP: "10.0.0.1",
          conditions: [{ type: "Ready", status: "True" }],
        },
      },
    ]),
  }, { namespace: "aicr-system", image: "aicr:dev", timeoutMs: 5000, pollMs: 1000, signer: false });
  assert.equal(result.ready, true);
  assert.deepEqual(result.pods.map((p) => [p.node, p.ready]), [["gpu-1", true]]);
});

Deno.test("install: a pull that fails ends the wait early and rolls the install back", async () => {
  const fake = fakeCluster();
  const clock = { ms: NOW.getTime() };
  const lines: string[] = [];
  const error = await installDaemonSet({
    ...deps(fake),
    log: createLogger({ write: (t) => void lines.push(t) }),
    ...waitWorld(clock, fake, 2, () => [
      {
        metadata: { name: "a", namespace: "aicr-system", labels: DAEMON_POD_LABELS },
        spec: { nodeName: "gpu-1" },
        status: {
          phase: "Pending",
          containerStatuses: [{
            state: {
              waiting: {
                reason: "ImagePullBackOff",
                message: 'Back-off pulling image "aicr:nope"',
              },
            },
          }],
        },
      },
      {
        metadata: { name: "b", namespace: "aicr-system", labels: DAEMON_POD_LABELS },
        status: {
          phase: "Pending",
          conditions: [{
            type: "PodScheduled",
            status: "False",
            reason: "Unschedulable",
            message: "0/3 nodes are available: 1 Too many pods.",
          }],
        },
      },
    ]),
  }, { namespace: "aicr-system", image: "aicr:nope", timeoutMs: 120_000, pollMs: 1000 }).then(
    () => undefined,
    (e: unknown) => e,
  );
  assert.equal(exitCodeOf(error), 8);
  const text = formatError(error);
  assert.match(text, /its image could not be pulled on node 'gpu-1' \(ImagePullBackOff\)/);
  assert.match(text, /Back-off pulling image "aicr:nope"/);
  assert.match(text, /the install was rolled back: 19 object\(s\) removed/);
  assert.ok(clock.ms - NOW.getTime() < 120_000, "ended before its timeout");
  assert.deepEqual(
    [...fake.objects.keys()].filter((k) => !k.startsWith("Namespace/") && !k.startsWith("Pod/")),
    [],
    "every created object is gone",
  );
  const unschedulable = lines.filter((l) => l.includes("a daemon pod cannot be scheduled"));
  assert.equal(unschedulable.length, 1);
  assert.match(
    unschedulable[0] ?? "",
    /pod=b reason="0\/3 nodes are available: 1 Too many pods\."/,
  );
});

Deno.test("install: another program's exit on the daemon verb ends the wait, wherever its line is in the log", async () => {
  const fake = fakeCluster();
  const clock = { ms: NOW.getTime() };
  // Its stderr's refusal first, then its stdout's usage: the two pipes interleave as they will.
  const message = [
    "Incorrect Usage: flag provided but not defined: -port",
    "NAME:",
    "   aicr - AICR CLI",
    "USAGE:",
    "   aicr [global options] [command [command options]]",
  ].join("\n");
  const error = await installDaemonSet({
    ...deps(fake),
    log: createLogger({ write: () => {} }),
    ...waitWorld(clock, fake, 1, () => [{
      metadata: { name: "a", namespace: "aicr-system", labels: DAEMON_POD_LABELS },
      spec: { nodeName: "gpu-1" },
      status: {
        phase: "Running",
        containerStatuses: [{
          state: { waiting: { reason: "CrashLoopBackOff" } },
          lastState: { terminated: { exitCode: 1, message } },
        }],
      },
    }]),
  }, {
    namespace: "aicr-system",
    image: "ghcr.io/nvidia/aicr:v0.11.1",
    timeoutMs: 120_000,
    pollMs: 1000,
  })
    .then(() => undefined, (e: unknown) => e);
  assert.equal(exitCodeOf(error), 8, String(error));
  assert.match(
    formatError(error),
    /the daemon that ran on node 'gpu-1' is NVIDIA's Go aicr: it exited 1 on the 'daemon' verb \('Incorrect Usage: flag provided but not defined: -port'\)/,
  );
  assert.ok(clock.ms - NOW.getTime() < 120_000, "ended before its timeout");
});

Deno.test("install: uninstall deletes this namespace's objects only, then finds nothing left", async () => {
  const fake = fakeCluster();
  await installDaemonSet(deps(fake), OPTIONS);
  // Another namespace's daemon: same labels, its own cluster-scoped names.
  fake.put("Namespace", { metadata: { name: "other" } });
  await installDaemonSet(deps(fake), { ...OPTIONS, namespace: "other" });
  const result = await uninstallDaemonSet(deps(fake), { namespace: "aicr-system" });
  assert.equal(result.swept.length, 19);
  assert.ok(result.swept.every((o) => o.result === "deleted"));
  assert.ok(result.swept.some((o) => o.kind === "Deployment" && o.name === "aicr-daemon-signer"));
  assert.ok(result.swept.some((o) => o.kind === "Lease" && o.name === "aicr-daemon-signer"));
  assert.deepEqual(result.remaining, []);
  const left = [...fake.objects.keys()].filter((k) => !k.startsWith("Namespace/"));
  assert.equal(left.length, 19, "the other namespace's install is untouched");
  assert.ok(left.every((k) => k.includes("other")), left.join(", "));
});

Deno.test("install: a ServiceMonitor only where discovery shows its CRD; uninstall removes it", async () => {
  const without = fakeCluster();
  await installDaemonSet(deps(without), OPTIONS);
  assert.ok(![...without.objects.keys()].some((k) => k.startsWith("ServiceMonitor/")));
  const fake = fakeCluster({ serviceMonitorCrd: true });
  await installDaemonSet(deps(fake), OPTIONS);
  assert.ok(fake.objects.has("ServiceMonitor/aicr-system/aicr-daemon"));
  assert.ok(fake.objects.has("Service/aicr-system/aicr-daemon"));
  const result = await uninstallDaemonSet(deps(fake), { namespace: "aicr-system" });
  assert.ok(result.swept.some((o) => o.kind === "ServiceMonitor" && o.result === "deleted"));
  assert.deepEqual([...fake.objects.keys()].filter((k) => !k.startsWith("Namespace/")), []);
  const opted = fakeCluster({ serviceMonitorCrd: true });
  await installDaemonSet(deps(opted), { ...OPTIONS, serviceMonitor: false });
  assert.ok(![...opted.objects.keys()].some((k) => k.startsWith("ServiceMonitor/")));
});

Deno.test("install: a signal midway stops the creates and deletes what was created", async () => {
  const fake = fakeCluster();
  const controller = new AbortController();
  const create = fake.client.create.bind(fake.client);
  let creates = 0;
  fake.client.create = async (kind, object, options) => {
    const created = await create(kind, object, options);
    if (++creates === 3) controller.abort(new Error("SIGTERM"));
    return created;
  };
  const error = await installDaemonSet(deps(fake), { ...OPTIONS, signal: controller.signal })
    .catch((e) => e);
  assert.ok(error instanceof InterruptedError, String(error));
  assert.equal(creates, 3, "no create after the signal");
  assert.deepEqual([...fake.objects.keys()].filter((k) => !k.startsWith("Namespace/")), []);
});

Deno.test("install: uninstall keeps the cohort baselines (the operator's data) and says how to remove them", async () => {
  const fake = fakeCluster();
  await installDaemonSet(deps(fake), OPTIONS);
  fake.put("ConfigMap", {
    metadata: {
      name: "aicr-daemon-baseline-0123456789abcdef",
      namespace: "aicr-system",
      labels: {
        "app.kubernetes.io/name": "aicr",
        "app.kubernetes.io/managed-by": "aicr",
        "app.kubernetes.io/component": "baseline",
        "app.kubernetes.io/instance": "aicr-daemon",
      },
    },
  });
  const lines: string[] = [];
  const result = await uninstallDaemonSet(
    { ...deps(fake), log: createLogger({ write: (t) => void lines.push(t) }) },
    { namespace: "aicr-system" },
  );
  assert.deepEqual(result.remaining, []);
  assert.ok(fake.objects.has("ConfigMap/aicr-system/aicr-daemon-baseline-0123456789abcdef"));
  assert.ok(
    lines.some((l) =>
      l.includes("uninstall keeps the cohort baselines") && l.includes("baseline delete --all")
    ),
    lines.join(""),
  );
  // A re-install grants only the baselines its CA verifies: this one, planted with the right
  // labels and never signed, is not granted, and said with the remedy.
  lines.length = 0;
  await installDaemonSet(
    { ...deps(fake), log: createLogger({ write: (t) => void lines.push(t) }) },
    OPTIONS,
  );
  const role = fake.objects.get("Role/aicr-system/aicr-daemon") as unknown as {
    rules: { resourceNames: string[] }[];
  };
  assert.deepEqual(role.rules[0]?.resourceNames, ["aicr-daemon-baseline-none"]);
  assert.ok(
    lines.some((l) =>
      l.startsWith("WARN baseline untrusted") && l.includes("trust=unsigned") &&
      l.includes("baseline set -f")
    ),
    lines.join(""),
  );
});

Deno.test("install: grantableBaselines() keeps only what the install's CA signed as it is", () => {
  const ca = generateDaemonCa({ now: new Date("2026-01-01T00:00:00Z") });
  const other = generateDaemonCa({ now: new Date("2026-01-01T00:00:00Z") });
  const object = (key: string, signer?: string) => {
    const o = {
      metadata: {
        name: `aicr-daemon-baseline-${key}`,
        namespace: "aicr-system",
        labels: { "aicr.run/cohort-key": key },
        annotations: { "aicr.run/cohort": "c", "aicr.run/cohort-values": "{}" },
      },
      data: { "snapshot.yaml": "x" } as Record<string, string>,
    };
    if (signer) o.data.signature = signBaseline(o, signer);
    return o;
  };
  const edited = object("3333333333333333", ca.caKey);
  edited.data["snapshot.yaml"] = "y";
  const lines: string[] = [];
  const granted = grantableBaselines(createLogger({ write: (t) => void lines.push(t) }), [
    object("1111111111111111", ca.caKey),
    object("2222222222222222", other.caKey),
    edited,
    object("4444444444444444"),
  ], { caCert: ca.caCert, namespace: "aicr-system" });
  assert.deepEqual(granted, ["aicr-daemon-baseline-1111111111111111"]);
  assert.deepEqual(
    lines.map((l) => /trust=(\S+)/.exec(l)?.[1]),
    ["other-ca", "edited", "unsigned"],
  );
});

Deno.test("install: before 1.31 (no Node-bound tokens) the daemons take reader tokens by audience alone", async () => {
  const args = async (minor: string) => {
    const fake = fakeCluster();
    fake.client.rest.json = <T>(request: RestRequest) =>
      Promise.resolve(
        (request.path === "/version"
          ? { major: "1", minor }
          : request.method === "GET"
          ? { items: [] }
          : {}) as T,
      );
    await installDaemonSet(deps(fake), OPTIONS);
    const ds = [...fake.objects.entries()].find(([k]) => k.startsWith("DaemonSet/"))?.[1] as {
      spec: { template: { spec: { containers: { args: string[] }[] } } };
    };
    return ds.spec.template.spec.containers[0]?.args ?? [];
  };
  assert.ok((await args("37")).includes("--require-node-bound-token"));
  assert.ok((await args("31")).includes("--require-node-bound-token"));
  const old = await args("30+");
  assert.equal(old.includes("--require-node-bound-token"), false);
  assert.ok(old.includes("aicr-daemon:$(NODE_NAME)"), "the per-node audience stays");
});

Deno.test("install: waits for a signer replica to be available, and says when none is by the deadline", async () => {
  for (const available of [1, 0]) {
    const fake = fakeCluster();
    const clock = { ms: NOW.getTime() };
    const lines: string[] = [];
    const world = waitWorld(clock, fake, 0, () => []);
    const result = await installDaemonSet({
      ...deps(fake),
      log: createLogger({ write: (t) => void lines.push(t) }),
      now: world.now,
      sleep: (ms: number) => {
        const deployment = fake.objects.get("Deployment/aicr-system/aicr-daemon-signer");
        if (deployment) {
          deployment.status = { readyReplicas: available, availableReplicas: available };
        }
        const lease = fake.objects.get("Lease/aicr-system/aicr-daemon-signer");
        if (lease && available) {
          lease.spec = { holderIdentity: "aicr-daemon-signer-5d8-x7k2p_0a1b2c3d" };
        }
        return world.sleep(ms);
      },
    }, { namespace: "aicr-system", image: "aicr:dev", timeoutMs: 5000, pollMs: 1000 });
    assert.equal(result.ready, available > 0);
    assert.equal(result.signer?.available, available);
    if (available) {
      assert.equal(result.signer?.leader?.pod, "aicr-daemon-signer-5d8-x7k2p");
    } else {
      assert.ok(
        lines.some((l) => l.includes("the in-cluster signer has no available replica")),
        lines.join(""),
      );
    }
  }
});

/** A logger whose lines the test reads. */
function recorded() {
  const lines: string[] = [];
  return { lines, log: createLogger({ write: (t) => void lines.push(t) }) };
}

Deno.test("install: a failed install whose cleanup cannot remove everything says what is left and how to remove it", async () => {
  const fake = fakeCluster();
  const create = fake.client.create.bind(fake.client);
  fake.client.create = (kind, object, options) =>
    kind === "DaemonSet"
      ? Promise.reject(new KubeApiError("Cannot create: 422 Invalid: bad", 422, "Invalid"))
      : create(kind, object, options);
  const remove = fake.client.deleteIfUid.bind(fake.client);
  fake.client.deleteIfUid = (kind, namespace, name, uid, options) =>
    kind === "ClusterRole"
      ? Promise.reject(new KubeApiError("Cannot delete: 403 Forbidden: no", 403, "Forbidden"))
      : remove(kind, namespace, name, uid, options);
  const { lines, log } = recorded();
  const error = await installDaemonSet({ ...deps(fake), log }, OPTIONS).catch((e) => e);
  assert.ok(error instanceof KubeApiError && error.status === 422, "the install's own error");
  const warning = lines.find((l) => l.includes("install cleanup left objects behind"));
  assert.ok(warning, lines.join(""));
  const left = [...fake.objects.keys()].filter((k) => !k.startsWith("Namespace/"));
  assert.ok(left.length > 0 && left.every((k) => k.startsWith("ClusterRole/")), left.join(","));
  for (const key of left) {
    assert.ok(warning.includes(`ClusterRole/${key.split("/").at(-1)}`), `${key} is named`);
  }
  assert.match(warning, /remedy="aicr daemonset uninstall -n aicr-system"/);
});

Deno.test("install: when no node matches the selector and tolerations, the wait says so and how to widen it", async () => {
  const fake = fakeCluster();
  const clock = { ms: NOW.getTime() };
  const { lines, log } = recorded();
  const result = await installDaemonSet({
    ...deps(fake),
    log,
    ...waitWorld(clock, fake, 0, () => []),
    // Without the in-cluster signer: the wait for its replica is another test's.
  }, {
    namespace: "aicr-system",
    image: "aicr:dev",
    timeoutMs: 60_000,
    pollMs: 1000,
    signer: false,
  });
  assert.deepEqual([result.desired, result.pods.length], [0, 0]);
  const warning = lines.find((l) =>
    l.includes("no node matches the daemon's node selector and tolerations")
  );
  assert.ok(warning, lines.join(""));
  // The CLI's logger names the flags (--all-nodes, --node-selector); this one the options.
  assert.match(warning, /remedy="pass allNodes or nodeSelector"/);
  assert.ok(clock.ms - NOW.getTime() < 60_000, "it did not wait out the timeout");
});

Deno.test("install: a signal during the wait ends it as an interrupt and leaves the daemon installed", async () => {
  const fake = fakeCluster();
  const clock = { ms: NOW.getTime() };
  const controller = new AbortController();
  const world = waitWorld(clock, fake, 2, () => []);
  let sleeps = 0;
  const error = await installDaemonSet({
    ...deps(fake),
    now: world.now,
    sleep: async (ms: number) => {
      await world.sleep(ms);
      if (++sleeps === 2) controller.abort(new Error("SIGINT"));
    },
  }, {
    namespace: "aicr-system",
    image: "aicr:dev",
    timeoutMs: 60_000,
    pollMs: 1000,
    signal: controller.signal,
  }).catch((e) => e);
  assert.ok(error instanceof InterruptedError, String(error));
  assert.equal(exitCodeOf(error), 130);
  assert.match(
    error.message,
    /^Cannot finish waiting for the daemon's pods: interrupted \(Error: SIGINT\); the daemon stays installed$/,
  );
  assert.ok(fake.objects.has("DaemonSet/aicr-system/aicr-daemon"), "nothing was removed");
  assert.equal(fake.calls.filter((c) => c.method === "delete").length, 0);
});

Deno.test("uninstall: gives up at its deadline, naming what is still there", async () => {
  const fake = fakeCluster();
  await installDaemonSet(deps(fake), OPTIONS);
  // A pod that never goes (its node is gone, say): still listed at every look.
  fake.put("Pod", {
    metadata: {
      name: "aicr-daemon-x",
      namespace: "aicr-system",
      labels: {
        "app.kubernetes.io/name": "aicr",
        "app.kubernetes.io/component": "daemon",
        "app.kubernetes.io/instance": "aicr-daemon",
        "app.kubernetes.io/managed-by": "aicr",
      },
      deletionTimestamp: NOW.toISOString(),
    },
  });
  const remove = fake.client.deleteIfUid.bind(fake.client);
  fake.client.deleteIfUid = (kind, namespace, name, uid, options) =>
    kind === "Pod" ? Promise.resolve("deleted") : remove(kind, namespace, name, uid, options);
  const clock = { ms: NOW.getTime() };
  const slept: number[] = [];
  const { lines, log } = recorded();
  const result = await uninstallDaemonSet({
    ...deps(fake),
    log,
    now: () => new Date(clock.ms),
    sleep: (ms: number) => {
      slept.push(ms);
      clock.ms += ms;
      return Promise.resolve();
    },
  }, { namespace: "aicr-system", timeoutMs: 10_000, pollMs: 1000 });
  assert.deepEqual(result.remaining, ["Pod/aicr-daemon-x"]);
  assert.equal(slept.reduce((a, b) => a + b, 0), 10_000, "polled until the deadline, no longer");
  const warning = lines.find((l) => l.includes("uninstall: objects are still there"));
  assert.ok(warning?.includes("Pod/aicr-daemon-x"), lines.join(""));
});

Deno.test("install: names the targeted nodes the image's architectures leave out; none left is exit 2, nothing created", async () => {
  const node = (name: string, arch: string, gpu = true) => ({
    metadata: {
      name,
      labels: { ...(gpu ? { "nvidia.com/gpu.present": "true" } : {}), "kubernetes.io/arch": arch },
    },
  });
  const fake = fakeCluster();
  fake.put("Node", node("gpu-1", "amd64"));
  fake.put("Node", node("gb200-1", "arm64"));
  fake.put("Node", node("cpu-1", "arm64", false));
  const lines: string[] = [];
  const log = createLogger({ write: (t) => void lines.push(t) });
  await installDaemonSet({ ...deps(fake), log }, { ...OPTIONS, architectures: ["amd64"] });
  const said = lines.filter((l) => l.includes("leaves out"));
  assert.equal(said.length, 1, lines.join(""));
  assert.match(
    said[0] ?? "",
    /WARN the daemon leaves out the nodes of an architecture the image lacks nodes="gb200-1 \(arm64\)" image=aicr:dev architectures=amd64/,
  );
  // Every node (--all-nodes): the CPU node is named too.
  const all = fakeCluster();
  for (
    const n of [node("gpu-1", "amd64"), node("gb200-1", "arm64"), node("cpu-1", "arm64", false)]
  ) {
    all.put("Node", n);
  }
  lines.length = 0;
  await installDaemonSet({ ...deps(all), log }, {
    ...OPTIONS,
    allNodes: true,
    architectures: ["amd64"],
  });
  assert.match(
    lines.join(""),
    /nodes="(cpu-1 \(arm64\), gb200-1|gb200-1 \(arm64\), cpu-1) \(arm64\)"/,
  );
  // Only arm64 GPU nodes: a usage error before anything is written.
  const arm = fakeCluster();
  arm.put("Node", node("gb200-1", "arm64"));
  const error = await installDaemonSet(deps(arm), { ...OPTIONS, architectures: ["amd64"] }).catch(
    (e) => e,
  );
  assert.equal(exitCodeOf(error), 2, String(error));
  assert.match(
    formatError(error),
    /Cannot run the daemon on a node it targets as every node it targets is of an architecture the image 'aicr:dev' lacks \(it has amd64\): gb200-1 \(arm64\)/,
  );
  assert.match(formatError(error), /say so with imagePlatforms/);
  assert.equal(arm.calls.filter((c) => c.method === "create").length, 0);
});

Deno.test("runUninstall() --dry-run says 'would delete' for each object, ends with a dry-run summary, deletes nothing", async () => {
  const fake = fakeCluster();
  await installDaemonSet(deps(fake), OPTIONS);
  const before = [...fake.objects.keys()].sort();
  const lines: string[] = [];
  const uninstall = (dryRun: boolean) =>
    runUninstall({
      connect: () => fake.client,
      log: createLogger({ write: (t) => void lines.push(...t.split("\n").filter(Boolean)) }),
      stdout: { write: () => {} },
      stderr: { write: () => {} },
      now: () => NOW,
      randomHex: () => "0".repeat(16),
      signal: new AbortController().signal,
    }, { namespace: "aicr-system", name: "aicr-daemon", timeoutMs: 1000, dryRun, reports: {} });
  await uninstall(true);
  assert.deepEqual([...fake.objects.keys()].sort(), before, "nothing was deleted");
  assert.equal(fake.calls.filter((c) => c.method === "deleteIfUid").length, 0);
  const wouldDelete = lines.filter((l) => l.startsWith("would delete "));
  assert.equal(wouldDelete.length, 19, lines.join("\n"));
  assert.ok(wouldDelete.some((l) => l.includes("kind=DaemonSet") && l.includes("aicr-daemon")));
  assert.match(
    lines.at(-1) ?? "",
    /dry run: the uninstall would delete these objects; nothing was deleted .*objects=19/,
  );
  assert.ok(!lines.some((l) => /uninstalled|deleted=/.test(l)), lines.join("\n"));

  // The real one deletes them all and says so; a dry run after it finds nothing.
  lines.length = 0;
  await uninstall(false);
  assert.match(lines.at(-1) ?? "", /uninstalled .*deleted=19/);
  lines.length = 0;
  await uninstall(true);
  assert.deepEqual(lines.filter((l) => l.startsWith("would delete ")), []);
  assert.match(lines.at(-1) ?? "", /dry run: nothing is installed, nothing would be deleted/);
});
