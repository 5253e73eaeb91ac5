import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { parseSnapshot } from "./codec.ts";
import {
  canonicalReading,
  compileIgnore,
  DEFAULT_IGNORE_PATTERNS,
  diffSnapshots,
  readingSchema,
} from "./diff.ts";
import type { Snapshot } from "./model.ts";
import { H100_SMI, makeNodeSnapshot, setReading } from "./testdata/generate.ts";

const FIXTURE = new URL("./testdata/h100-gpu-node-1.yaml", import.meta.url);
const SMI_XML = new URL("../tests/fixtures/nvidia-smi-q-x.h100.xml", import.meta.url);

function baseline(): Snapshot {
  return parseSnapshot(readFileSync(FIXTURE, "utf8"), { source: "h100-gpu-node-1.yaml" });
}

/** The same node re-snapshotted after a reboot: new timestamp, boot id, counters, PIDs. */
function resnapshot(): Snapshot {
  return makeNodeSnapshot("gpu-node-1", {
    clusterNodes: ["gpu-node-1", "gpu-node-2", "gpu-node-3"],
    timestamp: new Date("2026-04-02T08:00:00Z"),
    boot: 7,
  });
}

function diff(a: Snapshot, b: Snapshot, ignore = DEFAULT_IGNORE_PATTERNS) {
  return diffSnapshots(a, b, { baselineSource: "a.yaml", targetSource: "b.yaml", ignore });
}

Deno.test("diff fixture: the GPU readings are those of the real nvidia-smi H100 output", () => {
  const xml = readFileSync(SMI_XML, "utf8");
  const smi = baseline().measurements.find((m) => m.type === "GPU")?.subtypes[0]?.data;
  assert.equal(smi?.driver, /<driver_version>([^<]+)</.exec(xml)?.[1]);
  assert.equal(smi?.["cuda-version"], /<cuda_version>([^<]+)</.exec(xml)?.[1]);
  assert.equal(smi?.["gpu.model"], /<product_name>([^<]+)</.exec(xml)?.[1]);
  assert.equal(smi?.["gpu.vbios-version"], /<vbios_version>([^<]+)</.exec(xml)?.[1]);
  assert.equal(smi?.["gpu-count"], xml.match(/<gpu id=/g)?.length);
  assert.deepEqual(smi, H100_SMI);
});

Deno.test("diffSnapshots() finds no drift between an unchanged node's two snapshots", () => {
  const result = diff(baseline(), resnapshot());
  assert.deepEqual(result.changes, []);
  assert.deepEqual(result.summary, { added: 0, removed: 0, modified: 0, total: 0 });
  assert.deepEqual(result.statusChanges, []);
});

Deno.test("diffSnapshots() reports volatile readings once the default ignores are off", () => {
  const paths = diff(baseline(), resnapshot(), []).changes.map((c) => c.path);
  for (
    const path of [
      "OS.sysctl./proc/sys/kernel/random/boot_id",
      "OS.sysctl./proc/sys/fs/file-nr",
      "OS.sysctl./proc/sys/kernel/ns_last_pid",
      "SystemD.kubelet.service.MainPID",
      "SystemD.containerd.service.ActiveEnterTimestamp",
    ]
  ) assert.ok(paths.includes(path), path);
  assert.ok(paths.every((p) => compileIgnore(DEFAULT_IGNORE_PATTERNS)(p)), paths.join(", "));
});

Deno.test("diffSnapshots() ignores metadata: timestamp, version and source node", () => {
  const b = baseline();
  const t = baseline();
  t.metadata = { timestamp: "2030-01-01T00:00:00Z", version: "9.9.9", "source-node": "x" };
  assert.equal(diff(b, t).summary.total, 0);
});

Deno.test("diffSnapshots() reports a driver upgrade with both values typed", () => {
  const t = setReading(resnapshot(), "GPU.smi.driver", "570.124.06");
  setReading(t, "GPU.smi.gpu.gsp-firmware-version", "570.124.06");
  setReading(t, "K8s.policy.driver.version", "570.124.06");
  const result = diff(baseline(), t);
  assert.deepEqual(result.changes, [
    {
      kind: "modified",
      severity: "info",
      path: "GPU.smi.driver",
      baseline: "570.86.15",
      target: "570.124.06",
    },
    {
      kind: "modified",
      severity: "info",
      path: "GPU.smi.gpu.gsp-firmware-version",
      baseline: "570.86.15",
      target: "570.124.06",
    },
    {
      kind: "modified",
      severity: "info",
      path: "K8s.policy.driver.version",
      baseline: "570.86.15",
      target: "570.124.06",
    },
  ]);
  assert.deepEqual(result.summary, { added: 0, removed: 0, modified: 3, total: 3 });
});

Deno.test("diffSnapshots() reports a kernel parameter change in sysctl and on the command line", () => {
  const t = setReading(resnapshot(), "OS.sysctl./proc/sys/vm/swappiness", "10");
  setReading(t, "OS.grub.numa_balancing", undefined);
  setReading(t, "OS.grub.intel_iommu", "on");
  assert.deepEqual(diff(baseline(), t).changes, [
    { kind: "added", severity: "info", path: "OS.grub.intel_iommu", target: "on" },
    { kind: "removed", severity: "info", path: "OS.grub.numa_balancing", baseline: "disable" },
    {
      kind: "modified",
      severity: "info",
      path: "OS.sysctl./proc/sys/vm/swappiness",
      baseline: "60",
      target: "10",
    },
  ]);
});

Deno.test("diffSnapshots() reports a loaded kernel module as added with its bool value", () => {
  const t = setReading(resnapshot(), "OS.kmod.nvidia_fs", true);
  const result = diff(baseline(), t);
  assert.deepEqual(result.changes, [
    { kind: "added", severity: "info", path: "OS.kmod.nvidia_fs", target: true },
  ]);
  assert.deepEqual(result.summary, { added: 1, removed: 0, modified: 0, total: 1 });
});

Deno.test("diffSnapshots() reports a taint moved between nodes with the nodes that moved", () => {
  const path = "NodeTopology.taint.nvidia.com/gpu";
  const b = setReading(baseline(), path, "NoSchedule||gpu-node-1,gpu-node-2");
  const t = setReading(resnapshot(), path, "NoSchedule||gpu-node-2,gpu-node-3");
  assert.deepEqual(diff(b, t).changes, [{
    kind: "modified",
    severity: "info",
    path,
    baseline: "NoSchedule||gpu-node-1,gpu-node-2",
    target: "NoSchedule||gpu-node-2,gpu-node-3",
    nodes: { added: ["gpu-node-3"], removed: ["gpu-node-1"] },
  }]);
});

Deno.test("diffSnapshots() does not count a reordered NodeTopology node list as drift", () => {
  const t = setReading(
    resnapshot(),
    "NodeTopology.taint.nvidia.com/gpu",
    "NoSchedule||gpu-node-3,gpu-node-1,gpu-node-2",
  );
  setReading(t, "NodeTopology.label.kubernetes.io/arch", "amd64|gpu-node-2,gpu-node-3,gpu-node-1");
  assert.equal(diff(baseline(), t).summary.total, 0);
  // A changed effect or value is still drift even with the same nodes.
  setReading(t, "NodeTopology.taint.nvidia.com/gpu", "NoExecute||gpu-node-1,gpu-node-2,gpu-node-3");
  assert.equal(diff(baseline(), t).summary.modified, 1);
});

Deno.test('diffSnapshots() equates 5128 and "5128" only where the schema types the reading', () => {
  const b = baseline();
  // grub values are strings by schema: a writer that unquoted it did not change it.
  const t = setReading(resnapshot(), "OS.grub.hugepages", 5128);
  // gpu-count is an int by schema; kmod values are bools.
  setReading(t, "GPU.smi.gpu-count", "8");
  setReading(t, "OS.kmod.nvidia", "true");
  assert.equal(diff(b, t).summary.total, 0);
  // SystemD readings carry their D-Bus type, so a string "0" and an int 0 differ.
  setReading(t, "SystemD.kubelet.service.NRestarts", 0);
  assert.deepEqual(diff(b, t).changes, [{
    kind: "modified",
    severity: "info",
    path: "SystemD.kubelet.service.NRestarts",
    baseline: "0",
    target: 0,
  }]);
});

Deno.test("readingSchema() and canonicalReading() follow the schema of each collector", () => {
  assert.equal(readingSchema("OS", "sysctl", "/proc/sys/vm/swappiness"), "string");
  assert.equal(readingSchema("GPU", "smi", "gpu-count"), "int");
  assert.equal(readingSchema("GPU", "smi", "driver"), "string");
  assert.equal(readingSchema("OS", "kmod", "nvidia"), "bool");
  assert.equal(readingSchema("NodeTopology", "summary", "node-count"), "int");
  assert.equal(readingSchema("SystemD", "kubelet.service", "MainPID"), "typed");
  assert.equal(canonicalReading(18446744073709551615n, "typed"), "n:18446744073709551615");
  assert.equal(canonicalReading(5, "typed"), canonicalReading(5n, "typed"));
  assert.notEqual(canonicalReading(null, "string"), canonicalReading("null", "string"));
  assert.equal(
    canonicalReading("NoSchedule||b,a (+3 more)", "string", true),
    canonicalReading("NoSchedule||a,b (+3 more)", "string", true),
  );
});

Deno.test("diffSnapshots() turns every key of a measurement present on one side into added or removed", () => {
  const t = resnapshot();
  t.measurements = t.measurements.filter((m) => m.type !== "GPU");
  const result = diff(baseline(), t);
  assert.equal(result.summary.removed, Object.keys(H100_SMI).length);
  assert.ok(result.changes.every((c) => c.kind === "removed" && c.path.startsWith("GPU.smi.")));
  const back = diff(t, baseline());
  assert.equal(back.summary.added, Object.keys(H100_SMI).length);
});

Deno.test("diffSnapshots() reports a collector status change apart from the drift count", () => {
  const t = resnapshot();
  const smi = t.measurements.find((m) => m.type === "GPU")?.subtypes[0];
  assert.ok(smi);
  smi.data = { "gpu-count": 0 };
  smi.context = { status: "absent", source: "nvidia-smi", message: "nvidia-smi not found" };
  const result = diff(baseline(), t);
  assert.deepEqual(result.statusChanges, [{ path: "GPU.smi", baseline: "ok", target: "absent" }]);
  assert.equal(result.summary.total, Object.keys(H100_SMI).length);
  // A context change alone (source text, message) is not drift.
  const u = resnapshot();
  const grub = u.measurements.find((m) => m.type === "OS")?.subtypes[0];
  assert.ok(grub);
  grub.context = { status: "ok", source: "/host/proc/cmdline" };
  assert.equal(diff(baseline(), u).summary.total, 0);
  assert.deepEqual(diff(baseline(), u).statusChanges, []);
});

Deno.test("diffSnapshots() leaves out paths matching --ignore patterns", () => {
  const t = setReading(resnapshot(), "OS.sysctl./proc/sys/vm/swappiness", "10");
  setReading(t, "K8s.image.aicr", "v1.0.1");
  const result = diff(baseline(), t, [...DEFAULT_IGNORE_PATTERNS, "K8s.image.*"]);
  assert.deepEqual(result.changes.map((c) => c.path), ["OS.sysctl./proc/sys/vm/swappiness"]);
  const one = compileIgnore(["OS.sysctl./proc/sys/kernel/random/*", "GPU.smi.gpu.?odel"]);
  assert.ok(one("OS.sysctl./proc/sys/kernel/random/boot_id"));
  assert.ok(one("GPU.smi.gpu.model"));
  assert.ok(!one("OS.sysctl./proc/sys/kernel/randomize_va_space"));
  assert.ok(!one("GPU.smi.gpu.model.x"));
});

Deno.test("diffSnapshots() sorts changes by path", () => {
  const t = setReading(resnapshot(), "OS.kmod.zfs", true);
  setReading(t, "GPU.smi.driver", "575.51.03");
  setReading(t, "K8s.server.version", "v1.34.1-eks-1");
  const paths = diff(baseline(), t).changes.map((c) => c.path);
  assert.deepEqual(paths, [...paths].sort());
  assert.equal(paths.length, 3);
});
