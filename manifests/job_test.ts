import assert from "node:assert/strict";
import { UsageError } from "../errors.ts";
import {
  agentArgs,
  autoTargetingAllowed,
  buildAgentJob,
  jobDeadlines,
  resolveAgentOutput,
} from "./job.ts";
import type { AgentJobConfig } from "./job.ts";
import { formatManifest } from "./yaml.ts";
import { assertGolden as assertGoldenFile } from "../tests/_golden.ts";
import { parseSnapshotTarget } from "../snapshot/mod.ts";
import type { ConfigMapRef } from "../snapshot/mod.ts";

/** The user's cm:// as the CLI hands it on: `-o` parsed once, only a ConfigMap kept. */
function userConfigMap(output: string | undefined): ConfigMapRef | undefined {
  const target = parseSnapshotTarget(output);
  return target.kind === "configmap" ? target.ref : undefined;
}

const RUN_ID = "20260103-103000-0123456789abcdef";
const INVOCATION_ID = "fedcba9876543210";

const BASE: AgentJobConfig = {
  namespace: "gpu-operator",
  runId: RUN_ID,
  invocationId: INVOCATION_ID,
  serviceAccountName: `aicr-${RUN_ID}`,
  image: "ghcr.io/nvidia/aicr:v0.1.0",
};

/** Compares with `testdata/<name>` (see tests/_golden.ts for rewriting it). */
function assertGolden(name: string, actual: string): void {
  assertGoldenFile(new URL(`./testdata/${name}`, import.meta.url), actual);
}

Deno.test("job: the default privileged Job matches its golden", () => {
  assertGolden("job-privileged.yaml", formatManifest(buildAgentJob(BASE)));
});

Deno.test("job: the restricted Job matches its golden", () => {
  assertGolden(
    "job-restricted.yaml",
    formatManifest(buildAgentJob({ ...BASE, privileged: false })),
  );
});

Deno.test("job: the --require-gpu Job matches its golden", () => {
  assertGolden(
    "job-require-gpu.yaml",
    formatManifest(buildAgentJob({ ...BASE, requireGpu: true })),
  );
});

Deno.test("job: the --runtime-class Job matches its golden", () => {
  const job = buildAgentJob({
    ...BASE,
    runtimeClass: "nvidia",
    nodeSelector: { "nvidia.com/gpu.present": "true" },
  });
  assertGolden("job-runtime-class.yaml", formatManifest(job));
});

Deno.test("job: the custom-toleration Job matches its golden", () => {
  const job = buildAgentJob({
    ...BASE,
    tolerations: [
      { key: "nvidia.com/gpu", operator: "Equal", value: "present", effect: "NoSchedule" },
      { key: "dedicated", operator: "Exists", effect: "NoSchedule" },
    ],
  });
  assertGolden("job-tolerations.yaml", formatManifest(job));
});

Deno.test("job: the node-selector Job with a user cm:// and pull secrets matches its golden", () => {
  const job = buildAgentJob({
    ...BASE,
    jobNamePrefix: "nightly-audit",
    nodeSelector: { accelerator: "nvidia-h100", nodeGroup: "gpu-nodes" },
    output: { namespace: "gpu-operator", name: "aicr-snapshot" },
    format: "json",
    imagePullSecrets: ["regcred", "mirror-pull"],
    maxNodesPerEntry: 5,
    timeoutMs: 600_000,
    debug: true,
  });
  assertGolden("job-node-selector.yaml", formatManifest(job));
});

Deno.test("job: the five labels are on the Job and on its pod template", () => {
  const job = buildAgentJob(BASE);
  const want = {
    "app.kubernetes.io/name": "aicr",
    "app.kubernetes.io/managed-by": "aicr",
    "app.kubernetes.io/component": "snapshot-agent",
    "aicr.run/run-id": RUN_ID,
    "aicr.run/invocation-id": INVOCATION_ID,
  };
  assert.deepEqual(job.metadata.labels, want);
  assert.deepEqual(job.spec.template.metadata.labels, want);
  assert.equal(job.metadata.name, `aicr-${RUN_ID}`);
  assert.equal(job.spec.backoffLimit, 0);
});

Deno.test("job: deadlines are strictly longer than the CLI wait, with a TTL of an hour or more", () => {
  assert.deepEqual(jobDeadlines(), { activeDeadlineSeconds: 600, ttlSecondsAfterFinished: 3600 });
  assert.deepEqual(jobDeadlines(90_500), {
    activeDeadlineSeconds: 391,
    ttlSecondsAfterFinished: 3600,
  });
  const long = jobDeadlines(2 * 3_600_000);
  assert.deepEqual(long, { activeDeadlineSeconds: 7500, ttlSecondsAfterFinished: 7500 });
  for (const ms of [1, 1000, 300_000, 3_600_000, 86_400_000]) {
    const d = jobDeadlines(ms);
    assert.ok(d.activeDeadlineSeconds * 1000 > ms && d.ttlSecondsAfterFinished * 1000 > ms);
  }
  assert.throws(() => jobDeadlines(-1), UsageError);
});

Deno.test("job: without a cm:// the agent stages into the run's ConfigMap, which aicr owns", () => {
  for (const output of [undefined, "", "-", "snapshot.yaml"]) {
    assert.deepEqual(resolveAgentOutput(userConfigMap(output), "ns", RUN_ID), {
      ref: { namespace: "ns", name: `aicr-agent-snapshot-${RUN_ID}` },
      uri: `cm://ns/aicr-agent-snapshot-${RUN_ID}`,
      ownsOutput: true,
    });
  }
  assert.deepEqual(resolveAgentOutput(userConfigMap("cm:// ns / snap "), "ns", RUN_ID), {
    ref: { namespace: "ns", name: "snap" },
    uri: "cm://ns/snap",
    ownsOutput: false,
  });
});

Deno.test("job: in-pod flags follow the config", () => {
  const output = resolveAgentOutput(undefined, "ns", RUN_ID);
  assert.deepEqual(agentArgs(BASE, output), ["agent", "-o", output.uri]);
  assert.deepEqual(
    agentArgs({
      ...BASE,
      debug: true,
      logJson: true,
      os: "talos",
      requireGpu: true,
      format: "json",
    }, output),
    // --os shapes the pod's volumes only: the agent reads the node the same way on every family.
    ["--debug", "--log-json", "agent", "-o", output.uri, "--format", "json", "--require-gpu"],
  );
});

Deno.test("job: --require-gpu adds no GPU limit in restricted mode", () => {
  const job = buildAgentJob({ ...BASE, privileged: false, requireGpu: true });
  const container = job.spec.template.spec.containers[0];
  assert.equal(container?.resources.limits["nvidia.com/gpu"], undefined);
  assert.ok(container?.args.includes("--require-gpu"));
});

Deno.test("job: NVIDIA_VISIBLE_DEVICES appears only with a runtime class, independent of --require-gpu", () => {
  const env = (config: AgentJobConfig) =>
    buildAgentJob(config).spec.template.spec.containers[0]?.env.map((e) => e.name);
  assert.ok(!env(BASE)?.includes("NVIDIA_VISIBLE_DEVICES"));
  assert.ok(!env({ ...BASE, requireGpu: true })?.includes("NVIDIA_VISIBLE_DEVICES"));
  assert.ok(env({ ...BASE, runtimeClass: "nvidia" })?.includes("NVIDIA_VISIBLE_DEVICES"));
  const both = buildAgentJob({ ...BASE, runtimeClass: "nvidia", requireGpu: true });
  assert.equal(both.spec.template.spec.runtimeClassName, "nvidia");
  assert.equal(both.spec.template.spec.containers[0]?.resources.limits["nvidia.com/gpu"], "1");
});

Deno.test("job: GPU auto-targeting injects the gpu.present selector, and only when allowed", () => {
  assert.ok(autoTargetingAllowed({}));
  assert.ok(!autoTargetingAllowed({ nodeSelector: { a: "b" } }));
  assert.ok(!autoTargetingAllowed({ requireGpu: true }));
  assert.ok(!autoTargetingAllowed({ runtimeClass: "nvidia" }));
  assert.ok(autoTargetingAllowed({ nodeSelector: {} }));
  const job = buildAgentJob({ ...BASE, autoTargetGpu: true });
  assert.deepEqual(job.spec.template.spec.nodeSelector, { "nvidia.com/gpu.present": "true" });
});

Deno.test("job: --requests and --limits override the defaults name by name", () => {
  const job = buildAgentJob({
    ...BASE,
    requests: { cpu: "500m", "hugepages-2Mi": "1Gi" },
    limits: { memory: "16Gi", "hugepages-2Mi": "1Gi" },
  });
  assert.deepEqual(job.spec.template.spec.containers[0]?.resources, {
    requests: { cpu: "500m", memory: "4Gi", "ephemeral-storage": "2Gi", "hugepages-2Mi": "1Gi" },
    limits: { cpu: "2", memory: "16Gi", "ephemeral-storage": "4Gi", "hugepages-2Mi": "1Gi" },
  });
});

Deno.test("job: a request above its limit is refused before the API server sees it", () => {
  assert.throws(
    () => buildAgentJob({ ...BASE, requests: { cpu: "4" } }),
    (e: unknown) =>
      e instanceof UsageError &&
      e.message ===
        "Cannot use 'requests' as the cpu request must not exceed its limit 2 (raise it with 'limits'): current value is 'cpu=4'",
  );
  assert.doesNotThrow(() =>
    buildAgentJob({ ...BASE, requests: { cpu: "4" }, limits: { cpu: "4000m" } })
  );
});

Deno.test("job: talos drops the systemd mount and cos adds its NVIDIA userland", () => {
  const names = (config: AgentJobConfig) =>
    buildAgentJob(config).spec.template.spec.volumes.map((v) => v.name);
  assert.deepEqual(names(BASE), ["tmp", "run-systemd", "host-os-release"]);
  for (const os of ["ubuntu", "rhel", "ol", "amazonlinux"] as const) {
    assert.deepEqual(names({ ...BASE, os }), ["tmp", "run-systemd", "host-os-release"], os);
  }
  assert.deepEqual(names({ ...BASE, os: "talos" }), ["tmp", "host-os-release"]);
  const cos = buildAgentJob({ ...BASE, os: "cos" }).spec.template.spec;
  assert.deepEqual(cos.volumes.at(-1), {
    name: "cos-nvidia",
    hostPath: { path: "/home/kubernetes/bin/nvidia", type: "DirectoryOrCreate" },
  });
  assert.deepEqual(cos.containers[0]?.volumeMounts.at(-1), {
    name: "cos-nvidia",
    mountPath: "/usr/local/nvidia",
    readOnly: true,
  });
  // Restricted mode never mounts the host, whatever the OS.
  assert.deepEqual(names({ ...BASE, os: "cos", privileged: false }), ["tmp"]);
});

Deno.test("job: bad names are refused by option", () => {
  assert.throws(() => buildAgentJob({ ...BASE, jobNamePrefix: "Nightly" }), /'jobName'/);
  assert.throws(() => buildAgentJob({ ...BASE, image: "" }), /'image'/);
  assert.throws(
    () => buildAgentJob({ ...BASE, imagePullSecrets: ["Reg Cred"] }),
    /'imagePullSecret'/,
  );
  assert.throws(() => buildAgentJob({ ...BASE, runtimeClass: "NVIDIA" }), /'runtimeClass'/);
  assert.throws(() => buildAgentJob({ ...BASE, maxNodesPerEntry: -1 }), /'maxNodesPerEntry'/);
  assert.throws(() => buildAgentJob({ ...BASE, maxNodesPerEntry: 1.5 }), UsageError);
});
