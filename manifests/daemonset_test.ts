import assert from "node:assert/strict";
import { UsageError } from "../errors.ts";
import { buildDaemonSet, daemonArgs } from "./daemonset.ts";
import type { DaemonSetConfig } from "./daemonset.ts";
import { formatManifest } from "./yaml.ts";
import { assertGolden as assertGoldenFile } from "../tests/_golden.ts";

const BASE: DaemonSetConfig = {
  namespace: "aicr-system",
  image: "ghcr.io/nvidia/aicr:v0.1.0",
  tls: { secretName: "aicr-daemon-tls" },
};

/** Compares with `testdata/<name>` (see tests/_golden.ts for rewriting it). */
function assertGolden(name: string, actual: string): void {
  assertGoldenFile(new URL(`./testdata/${name}`, import.meta.url), actual);
}

Deno.test("daemonset: the default DaemonSet matches its golden", () => {
  assertGolden("daemonset.yaml", formatManifest(buildDaemonSet(BASE)));
});

Deno.test("daemonset: the selector is a stable subset of the template labels", () => {
  const ds = buildDaemonSet({
    ...BASE,
    runId: "20260103-103000-0123456789abcdef",
    invocationId: "fedcba9876543210",
  });
  const selector = ds.spec.selector.matchLabels;
  assert.deepEqual(selector, {
    "app.kubernetes.io/name": "aicr",
    "app.kubernetes.io/component": "daemon",
    "app.kubernetes.io/instance": "aicr-daemon",
  });
  for (const [k, v] of Object.entries(selector)) {
    assert.equal(ds.spec.template.metadata.labels[k], v);
  }
  assert.equal(ds.metadata.labels?.["aicr.run/run-id"], "20260103-103000-0123456789abcdef");
  assert.equal(ds.spec.template.metadata.labels["aicr.run/invocation-id"], "fedcba9876543210");
});

Deno.test("daemonset: restricted mode has no host namespaces, no hostPath and the PSS contexts", () => {
  const spec = buildDaemonSet({ ...BASE, privileged: false }).spec.template.spec;
  assert.equal(spec.hostNetwork, undefined);
  assert.equal(spec.hostPID, undefined);
  assert.equal(spec.dnsPolicy, undefined);
  assert.ok(spec.volumes.every((v) => v.hostPath === undefined));
  assert.deepEqual(spec.volumes.map((v) => v.name), ["tmp", "tls"]);
  assert.equal(spec.securityContext.runAsUser, 65534);
  assert.deepEqual(spec.containers[0]?.securityContext.capabilities, { drop: ["ALL"] });
});

Deno.test("daemonset: host networking can be turned off in privileged mode", () => {
  const spec = buildDaemonSet({ ...BASE, hostNetwork: false }).spec.template.spec;
  assert.equal(spec.hostNetwork, false);
  assert.equal(spec.hostPID, true);
  assert.equal(spec.dnsPolicy, undefined);
});

Deno.test("daemonset: plain HTTP for local tests drops the Secret and probes over HTTP", () => {
  const ds = buildDaemonSet({ ...BASE, tls: { insecureHttp: true }, port: 9000 });
  const container = ds.spec.template.spec.containers[0];
  assert.deepEqual(container?.args, [
    "daemon",
    "--port",
    "9000",
    "--insecure-http",
    "--listen",
    "$(POD_IP)",
  ]);
  assert.deepEqual(container?.readinessProbe?.httpGet, {
    path: "/readyz",
    port: 9000,
    scheme: "HTTP",
  });
  assert.deepEqual(container?.ports, [{ name: "http", containerPort: 9000, protocol: "TCP" }]);
  assert.ok(!ds.spec.template.spec.volumes.some((v) => v.name === "tls"));
});

Deno.test("daemonset: placement follows the Job's rules and never asks for a GPU", () => {
  const ds = buildDaemonSet({
    ...BASE,
    autoTargetGpu: true,
    runtimeClass: "nvidia",
    tolerations: [{ key: "nvidia.com/gpu", operator: "Exists", effect: "NoSchedule" }],
    maxNodesPerEntry: 3,
  });
  const spec = ds.spec.template.spec;
  assert.deepEqual(spec.nodeSelector, { "nvidia.com/gpu.present": "true" });
  assert.deepEqual(spec.tolerations, [{
    key: "nvidia.com/gpu",
    operator: "Exists",
    effect: "NoSchedule",
  }]);
  assert.equal(spec.runtimeClassName, "nvidia");
  assert.equal(spec.containers[0]?.resources.limits["nvidia.com/gpu"], undefined);
  assert.deepEqual(spec.containers[0]?.env.map((e) => e.name), [
    "POD_IP",
    "AICR_LOG_PREFIX",
    "NODE_NAME",
    "AICR_MAX_NODES_PER_ENTRY",
    "NVIDIA_VISIBLE_DEVICES",
  ]);
});

Deno.test("daemonset: extra daemon flags follow the TLS flags", () => {
  assert.deepEqual(daemonArgs(8443, { secretName: "s" }, ["--refresh-interval", "10m"]), [
    "daemon",
    "--port",
    "8443",
    "--tls-cert-file",
    "/etc/aicr/tls/tls.crt",
    "--tls-key-file",
    "/etc/aicr/tls/tls.key",
    "--refresh-interval",
    "10m",
  ]);
});

Deno.test("daemonset: bad values are refused", () => {
  assert.throws(() => buildDaemonSet({ ...BASE, port: 0 }), /'port'/);
  assert.throws(() => buildDaemonSet({ ...BASE, port: 70000 }), UsageError);
  assert.throws(() => buildDaemonSet({ ...BASE, name: "Daemon" }), /name the daemon/);
});

Deno.test("daemonset: each daemon binds its pod IP and requires the token audience it is given", () => {
  const container = buildDaemonSet({ ...BASE, tokenAudience: "aicr-daemon" }).spec.template.spec
    .containers[0];
  assert.deepEqual(container?.env[0], {
    name: "POD_IP",
    valueFrom: { fieldRef: { fieldPath: "status.podIP" } },
  });
  const args = container?.args ?? [];
  assert.equal(args[args.indexOf("--listen") + 1], "$(POD_IP)");
  assert.equal(args[args.indexOf("--token-audience") + 1], "aicr-daemon");
  const off = buildDaemonSet({ ...BASE, listenOnPodIp: false }).spec.template.spec.containers[0];
  assert.equal(off?.args.includes("--listen"), false);
  assert.equal(off?.env.some((e) => e.name === "POD_IP"), false);
});

Deno.test("daemonset: a priority class and a whole affinity go into the pod; the class is checked", () => {
  const affinity = {
    nodeAffinity: {
      requiredDuringSchedulingIgnoredDuringExecution: {
        nodeSelectorTerms: [{
          matchExpressions: [{ key: "pool", operator: "In" as const, values: ["gpu"] }],
        }],
      },
    },
  };
  const ds = buildDaemonSet({
    ...BASE,
    architectures: ["amd64"],
    affinity,
    priorityClassName: "gpu-infra",
  });
  const spec = ds.spec.template.spec;
  assert.equal(spec.priorityClassName, "gpu-infra");
  // Given whole: it replaces the architectures' affinity.
  assert.deepEqual(spec.affinity, affinity);
  const plain = buildDaemonSet({ ...BASE }).spec.template.spec;
  assert.equal(plain.priorityClassName, undefined);
  assert.throws(() => buildDaemonSet({ ...BASE, priorityClassName: "Not_A_Name" }), UsageError);
});
