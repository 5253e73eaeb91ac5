import assert from "node:assert/strict";
import { UsageError } from "../errors.ts";
import {
  baselineSnapshot,
  checkBaselineCohort,
  cohortKey,
  cohortMatches,
  driftFromBaseline,
  snapshotCohort,
} from "./baseline.ts";
import { encodeSnapshot } from "./codec.ts";
import type { Snapshot } from "./model.ts";
import { setReading } from "./testdata/generate.ts";
import { makeMixedFleet } from "./testdata/mixed_fleet.ts";

const H100 = "NVIDIA H100 80GB HBM3 ×8 · p5.48xlarge";
const GB200 = "NVIDIA GB200 192GB HBM3e ×8 · p6.48xlarge";

function fleet(): Snapshot[] {
  return makeMixedFleet({ "p5-h100": 2, "p6-gb200": 1, "system-m7i": 1 });
}

function node(snapshots: Snapshot[], name: string): Snapshot {
  const found = snapshots.find((s) => s.metadata["source-node"] === name);
  assert.ok(found, name);
  return found;
}

Deno.test("snapshotCohort() is the default cohort aicr diff --fleet gives the node, with a stable label-safe key", () => {
  const snapshots = fleet();
  const a = snapshotCohort(node(snapshots, "p5-h100-1"));
  const b = snapshotCohort(node(snapshots, "p5-h100-2"));
  const g = snapshotCohort(node(snapshots, "p6-gb200-1"));
  assert.equal(a.name, H100);
  assert.equal(g.name, GB200);
  assert.deepEqual(a, b, "two nodes of one pool share the cohort and its key");
  assert.notEqual(a.key, g.key);
  assert.match(a.key, /^[0-9a-f]{16}$/);
  assert.equal(a.key, cohortKey({ ...a.values }), "the key depends on the values only");
  assert.ok(
    cohortMatches(a, H100) && cohortMatches(a, a.key) && cohortMatches(a, a.key.toUpperCase()),
  );
  assert.ok(!cohortMatches(a, GB200));
});

Deno.test("checkBaselineCohort() refuses a snapshot of another cohort than the one named, saying both", () => {
  const gb200 = node(fleet(), "p6-gb200-1");
  assert.equal(checkBaselineCohort(gb200).name, GB200);
  assert.equal(checkBaselineCohort(gb200, GB200).name, GB200);
  assert.throws(
    () => checkBaselineCohort(gb200, H100),
    (e: unknown) =>
      e instanceof UsageError &&
      e.message.includes(`baseline of cohort '${H100}'`) &&
      e.message.includes(`belongs to cohort '${GB200}'`),
  );
});

Deno.test("driftFromBaseline() is zero against another node of the cohort and counts a planted change per measurement", () => {
  const snapshots = fleet();
  const full = node(snapshots, "p5-h100-1");
  const baseline = baselineSnapshot(full);
  const topology = baseline.measurements.find((m) => m.type === "NodeTopology");
  assert.deepEqual(topology?.subtypes, [{
    subtype: "label",
    data: { "node.kubernetes.io/instance-type.p5.48xlarge": "p5.48xlarge|p5-h100-1" },
  }], "only the node's own cohort labels are kept");
  assert.deepEqual(
    snapshotCohort(baseline),
    snapshotCohort(full),
    "the stored baseline names its cohort",
  );
  assert.ok(encodeSnapshot(baseline).length < encodeSnapshot(full).length);
  const other = node(snapshots, "p5-h100-2");
  const clean = driftFromBaseline(baseline, other);
  assert.deepEqual(clean.changes, [], "identity, volatile and topology readings are not drift");
  assert.deepEqual(clean.byMeasurement, { K8s: 0, GPU: 0, OS: 0, SystemD: 0 });
  setReading(other, "GPU.smi.driver", "580.95.05");
  setReading(other, "OS.sysctl./proc/sys/vm/swappiness", "10");
  const drift = driftFromBaseline(baseline, other);
  assert.deepEqual(drift.byMeasurement, { K8s: 0, GPU: 1, OS: 1, SystemD: 0 });
  assert.deepEqual(drift.changes.map((c) => c.path), [
    "GPU.smi.driver",
    "OS.sysctl./proc/sys/vm/swappiness",
  ]);
});
