import assert from "node:assert/strict";
import { setReading } from "../snapshot/testdata/generate.ts";
import { makeMixedFleet } from "../snapshot/testdata/mixed_fleet.ts";
import type { Snapshot } from "../snapshot/mod.ts";
import { createSnapshotHistory, nodeInfoLabels } from "./history.ts";

function h100(boot = 1): Snapshot {
  return makeMixedFleet({ "p5-h100": 1 }, { boot: () => boot })[0] as Snapshot;
}

Deno.test("createSnapshotHistory() keeps the first collection and each one that changed a reading, not volatile ones", () => {
  const history = createSnapshotHistory();
  const t0 = Date.parse("2026-03-21T10:00:00Z");
  assert.equal(history.record(h100(1), t0)?.initial, true);
  // A new boot changes only volatile readings (boot id, counters, PIDs): no entry.
  assert.equal(history.record(h100(2), t0 + 60_000), undefined);
  const changed = setReading(h100(3), "GPU.smi.driver", "570.124.06");
  setReading(changed, "OS.sysctl./proc/sys/vm/swappiness", "10");
  const entry = history.record(changed, t0 + 120_000);
  assert.deepEqual(entry, {
    at: "2026-03-21T10:02:00Z",
    atMs: t0 + 120_000,
    initial: false,
    total: 2,
    changes: [
      { path: "GPU.smi.driver", kind: "modified", before: "570.86.15", after: "570.124.06" },
      { path: "OS.sysctl./proc/sys/vm/swappiness", kind: "modified", before: "60", after: "10" },
    ],
  });
  assert.equal(history.lastChangeMs(), t0 + 120_000);
  assert.equal(history.entries().length, 2);
});

Deno.test("createSnapshotHistory() is bounded: the oldest entries go first, and it counts them", () => {
  const history = createSnapshotHistory({ capacity: 3, maxChangesPerEntry: 1 });
  for (let i = 0; i < 6; i++) {
    const s = setReading(h100(), "OS.sysctl./proc/sys/vm/swappiness", String(10 + i));
    setReading(s, "OS.sysctl./proc/sys/vm/dirty_ratio", String(30 + i));
    history.record(s, i * 1000);
  }
  const entries = history.entries();
  assert.deepEqual(entries.map((e) => e.atMs), [3000, 4000, 5000]);
  assert.deepEqual(entries.map((e) => [e.changes.length, e.total]), [[1, 2], [1, 2], [1, 2]]);
  assert.equal(history.dropped(), 3);
});

Deno.test("nodeInfoLabels() reads the node's facts from the real H100 capture; a CPU node has gpu_count 0", () => {
  assert.deepEqual(nodeInfoLabels(h100(), "p5-h100-1"), {
    node: "p5-h100-1",
    driver_version: "570.86.15",
    cuda_version: "12.8",
    gpu_model: "NVIDIA H100 80GB HBM3",
    gpu_count: "8",
    kernel: "6.8.0-1028-aws",
    os_release: "Ubuntu 24.04.1 LTS",
    kubelet_version: "v1.33.5-eks-3025e55",
    container_runtime: "containerd://2.0.3",
  });
  const cpu = makeMixedFleet({ "system-m7i": 1 })[0] as Snapshot;
  const labels = nodeInfoLabels(cpu, "system-m7i-1");
  assert.equal(labels.gpu_count, "0");
  assert.equal(labels.driver_version, "");
});
