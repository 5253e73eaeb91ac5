import assert from "node:assert/strict";
import { DEFAULT_IGNORE_PATTERNS } from "./diff.ts";
import { renderFleetTable } from "./diff_render.ts";
import { buildFleetReport, compareNodeNames } from "./fleet.ts";
import type { FleetMember } from "./fleet.ts";
import { makeNodeSnapshot, setReading } from "./testdata/generate.ts";

const H100_COHORT = "NVIDIA H100 80GB HBM3 ×8 · p5.48xlarge";
const NODES = Array.from({ length: 42 }, (_, i) => `gpu-node-${i + 1}`);

/** 42 H100 nodes on driver 570.124.06, each booted differently, with four planted outliers. */
function plantedFleet(): FleetMember[] {
  return NODES.map((node, i) => {
    const snapshot = makeNodeSnapshot(node, { clusterNodes: NODES, boot: i + 3 });
    setReading(snapshot, "GPU.smi.driver", "570.124.06");
    if (node === "gpu-node-17") setReading(snapshot, "GPU.smi.driver", "570.86.15");
    if (node === "gpu-node-5") setReading(snapshot, "OS.sysctl./proc/sys/vm/swappiness", "10");
    if (node === "gpu-node-23") {
      setReading(snapshot, "OS.kmod.nvidia_peermem", undefined);
      setReading(snapshot, "OS.kmod.nouveau", true);
    }
    if (node === "gpu-node-40") {
      setReading(snapshot, "SystemD.containerd.service.ActiveState", "failed");
      setReading(snapshot, "K8s.node.container-runtime-version", "1.7.27");
    }
    return { node, snapshot };
  });
}

Deno.test("buildFleetReport() finds exactly the planted outliers and their readings", () => {
  const report = buildFleetReport(plantedFleet(), { ignore: DEFAULT_IGNORE_PATTERNS });
  assert.ok(report.outliers.every((o) => o.cohort === H100_COHORT));
  assert.deepEqual(report.outliers.map(({ cohort: _, ...o }) => o), [
    {
      node: "gpu-node-5",
      differences: [{
        path: "OS.sysctl./proc/sys/vm/swappiness",
        kind: "modified",
        value: "10",
        fleet: "60",
        fleetNodes: 41,
      }],
    },
    {
      node: "gpu-node-17",
      differences: [{
        path: "GPU.smi.driver",
        kind: "modified",
        value: "570.86.15",
        fleet: "570.124.06",
        fleetNodes: 41,
      }],
    },
    {
      node: "gpu-node-23",
      differences: [
        { path: "OS.kmod.nouveau", kind: "added", value: true, fleetNodes: 41 },
        { path: "OS.kmod.nvidia_peermem", kind: "removed", fleet: true, fleetNodes: 41 },
      ],
    },
    {
      node: "gpu-node-40",
      differences: [
        {
          path: "K8s.node.container-runtime-version",
          kind: "modified",
          value: "1.7.27",
          fleet: "2.0.3",
          fleetNodes: 41,
        },
        {
          path: "SystemD.containerd.service.ActiveState",
          kind: "modified",
          value: "failed",
          fleet: "active",
          fleetNodes: 41,
        },
      ],
    },
  ]);
  assert.deepEqual(report.summary, {
    nodes: 42,
    cohorts: 1,
    singletons: 0,
    outliers: 4,
    differences: 6,
  });
  const gpu = report.cohorts[0]!.measurements.find((m) => m.type === "GPU");
  assert.deepEqual(gpu?.groups.map((g) => [g.majority, g.nodes.length]), [[true, 41], [false, 1]]);
  assert.deepEqual(gpu?.groups[1]?.nodes, ["gpu-node-17"]);
  assert.deepEqual(report.cohorts[0]!.columns.map((c) => c.path), [
    "GPU.smi.driver",
    "K8s.node.container-runtime-version",
    "OS.kmod.nouveau",
    "OS.kmod.nvidia_peermem",
    "OS.sysctl./proc/sys/vm/swappiness",
    "SystemD.containerd.service.ActiveState",
  ]);
});

Deno.test("renderFleetTable() names each outlier reading against the fleet value", () => {
  const text = renderFleetTable(
    buildFleetReport(plantedFleet(), { ignore: DEFAULT_IGNORE_PATTERNS }),
  );
  assert.match(text, /^FLEET \(42 nodes in 1 cohort, 4 outliers, 6 differences\)$/m);
  assert.match(
    text,
    /^ {2}gpu-node-17: GPU\.smi\.driver 570\.86\.15 \(cohort: 570\.124\.06 on 41 nodes\)$/m,
  );
  assert.match(
    text,
    /^ {2}gpu-node-23: OS\.kmod\.nvidia_peermem \(absent\) \(cohort: true on 41 nodes\)$/m,
  );
  assert.match(
    text,
    /^ {2}gpu-node-23: OS\.kmod\.nouveau true \(cohort: \(absent\) on 41 nodes\)$/m,
  );
  assert.match(text, /DRIFT DETECTED\n$/);
});

Deno.test("buildFleetReport() sees no outlier in a fleet that differs only in volatile and identity readings", () => {
  const members = NODES.slice(0, 12).map((node, i) => ({
    node,
    snapshot: makeNodeSnapshot(node, { clusterNodes: NODES.slice(0, 12), boot: i * 5 + 1 }),
  }));
  const report = buildFleetReport(members, { ignore: DEFAULT_IGNORE_PATTERNS });
  assert.deepEqual(report.outliers, []);
  assert.ok(report.cohorts[0]!.measurements.every((m) => m.groups.length === 1));
  assert.match(renderFleetTable(report), /NO DRIFT\n$/);
  // Without the volatile ignores every node is different.
  assert.equal(buildFleetReport(members).outliers.length, 11);
});

Deno.test("buildFleetReport() names a subtype a node lacks entirely, and the table says it once", () => {
  const members = plantedFleet();
  const os = members[29]!.snapshot.measurements.find((m) => m.type === "OS");
  os!.subtypes = os!.subtypes.filter((s) => s.subtype !== "sysctl");
  const report = buildFleetReport(members, { ignore: DEFAULT_IGNORE_PATTERNS });
  const node30 = report.outliers.find((o) => o.node === "gpu-node-30");
  assert.deepEqual(node30?.absentSubtypes, [{
    subtype: "OS.sysctl",
    readings: 22,
    fleetNodes: 41,
  }]);
  assert.equal(node30?.differences.length, 22);
  assert.ok(node30?.differences.every((d) => d.kind === "removed"));
  // A node missing one kernel module does not lack the kmod subtype.
  assert.equal(report.outliers.find((o) => o.node === "gpu-node-23")?.absentSubtypes, undefined);
  const text = renderFleetTable(report);
  assert.match(
    text,
    /^ {2}gpu-node-30: OS\.sysctl\.\* \(absent: 22 readings\) \(cohort: present on 41 nodes\)$/m,
  );
  assert.ok(!/gpu-node-30: OS\.sysctl\.\/proc/.test(text));
});

Deno.test("buildFleetReport() with one cohort lists every reading of a measurement a node lacks", () => {
  const members = NODES.slice(0, 5).map((node) => ({ node, snapshot: makeNodeSnapshot(node) }));
  const lacking = members[2]!.snapshot;
  lacking.measurements = lacking.measurements.filter((m) => m.type !== "GPU");
  // By default a node without GPU readings is a cohort of its own: nothing to compare with.
  const byDefault = buildFleetReport(members, { ignore: DEFAULT_IGNORE_PATTERNS });
  assert.deepEqual(
    byDefault.cohorts.map((c) => [c.name, c.nodes.length]),
    [["NVIDIA H100 80GB HBM3 ×8 · p5.48xlarge", 4], ["no GPU · p5.48xlarge", 1]],
  );
  assert.equal(byDefault.summary.singletons, 1);
  const report = buildFleetReport(members, { ignore: DEFAULT_IGNORE_PATTERNS, groupBy: ["none"] });
  // NodeTopology differs per node here (each saw only itself), so look at GPU only.
  const gpu = report.outliers.find((o) => o.node === "gpu-node-3")?.differences
    .filter((d) => d.path.startsWith("GPU."));
  assert.equal(gpu?.length, 11);
  assert.ok(gpu?.every((d) => d.kind === "removed" && d.fleetNodes === 4));
});

Deno.test("buildFleetReport() breaks a tie toward the group of the first node by name", () => {
  const members = ["n-b", "n-a", "n-d", "n-c"].map((node) => ({
    node,
    snapshot: setReading(
      makeNodeSnapshot(node, { clusterNodes: ["n-a", "n-b", "n-c", "n-d"] }),
      "GPU.smi.driver",
      node === "n-a" || node === "n-c" ? "570.86.15" : "570.124.06",
    ),
  }));
  const report = buildFleetReport(members, { ignore: DEFAULT_IGNORE_PATTERNS });
  assert.deepEqual(report.outliers.map((o) => o.node), ["n-b", "n-d"]);
  assert.equal(report.outliers[0]?.differences[0]?.fleet, "570.86.15");
});

Deno.test("buildFleetReport() keeps duplicate node names apart and orders names naturally", () => {
  const snap = makeNodeSnapshot("x");
  const report = buildFleetReport([
    { node: "gpu-10", snapshot: snap },
    { node: "gpu-2", snapshot: snap },
    { node: "gpu-2", snapshot: snap },
    { node: "", snapshot: snap },
  ]);
  assert.deepEqual(report.nodes, ["gpu-2", "gpu-2#2", "gpu-10", "snapshot-4"]);
  assert.ok(compareNodeNames("gpu-node-9", "gpu-node-10") < 0);
});
