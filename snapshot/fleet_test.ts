import assert from "node:assert/strict";
import { DEFAULT_IGNORE_PATTERNS } from "./diff.ts";
import { renderFleetTable } from "./diff_render.ts";
import { renderFleetHtml } from "./fleet_html.ts";
import { encodeJson, encodeSnapshot, parseSnapshot } from "./codec.ts";
import { buildFleetReport, compareNodeNames, createFleetBuilder } from "./fleet.ts";
import type { FleetMember, FleetOptions } from "./fleet.ts";
import type { Snapshot } from "./model.ts";
import { makeNodeSnapshot, setReading } from "./testdata/generate.ts";
import { makeMixedFleet } from "./testdata/mixed_fleet.ts";
import { randomSnapshot, tricky } from "./testdata/yaml_cases.ts";

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
    unreadable: 0,
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

/**
 * The same files read twice: each parsed and added (`add`), and each handed to `addYaml` (the
 * fetched-directory path), parsed and added only when it declines. Returns both reports (or
 * both errors) and how many files `addYaml` took.
 */
function readBothWays(texts: readonly string[], options: FleetOptions) {
  const name = (i: number) => (sourceNode: string) => sourceNode || `file-${i + 1}`;
  const run = (fast: boolean) => {
    const builder = createFleetBuilder(options);
    let taken = 0;
    try {
      texts.forEach((text, i) => {
        if (fast && builder.addYaml(text, name(i))) taken++;
        else {
          const snapshot = parseSnapshot(text, { source: `file-${i + 1}` });
          builder.add({ node: name(i)(snapshot.metadata["source-node"]), snapshot });
        }
      });
      return { report: encodeJson(builder.finish()), taken };
    } catch (error) {
      return { report: error instanceof Error ? error.message : String(error), taken };
    }
  };
  return { parsed: run(false), fast: run(true) };
}

Deno.test("FleetBuilder.addYaml() reads a file as add() reads its parsed snapshot: the same report, whatever the fleet", () => {
  const mixed = makeMixedFleet({ "p5-h100": 12, "p6-gb200": 6, "system-m7i": 3 });
  setReading(mixed[4] as Snapshot, "OS.sysctl./proc/sys/vm/swappiness", "10");
  setReading(mixed[7] as Snapshot, "OS.kmod.nvidia_peermem", undefined);
  setReading(mixed[15] as Snapshot, "GPU.smi.driver", "570.86.15");
  const own = makeMixedFleet({ "p5-h100": 6, "p6-gb200": 4 }, {
    ownTopology: true,
    labels: (node) => ({ "karpenter.sh/nodepool": node.endsWith("1") ? "pool-a" : "pool-b" }),
  });
  const random = Array.from({ length: 60 }, (_, i) => randomSnapshot(i + 1));
  const base = encodeSnapshot(mixed[0] as Snapshot);
  const edited = [
    // Keys out of order, types out of order, metadata not all strings: parsed instead.
    base.replace(/( {10}driver: .*\n)( {10}[^\n]*\n)/, "$2$1"),
    base.replace(/^( {2}- type: )K8s/m, "$1X").replace(/^( {2}- type: )OS/m, "$1K8s")
      .replace(/^( {2}- type: )X/m, "$1OS"),
    base.replace(/( {2}source-node: ).*\n/, "$1 42\n"),
    // No source-node: named after its file; integer keys, a big integer, a path read twice.
    base.replace(/ {2}source-node: .*\n/, ""),
    base.replace(/ {10}driver: .*\n/, "          10: a\n          9: 123456789012345678901\n"),
    base.replace(
      /( {6}- subtype: smi\n {8}data:\n)/,
      "      - subtype: smi.gpu\n        data:\n          model: other\n$1",
    ),
  ];
  for (const text of edited) assert.notEqual(text, base);
  const trickyFleet = Array.from({ length: 6 }, (_, i) => {
    const snapshot = tricky({ singleLine: true });
    snapshot.metadata["source-node"] = `t-${i}`;
    if (i === 2) setReading(snapshot, "OS.sysctl.k1", "other");
    return encodeSnapshot(snapshot);
  });
  const cases: [string, string[], FleetOptions, number][] = [
    ["mixed, default cohorts", mixed.map((s) => encodeSnapshot(s)), {
      ignore: DEFAULT_IGNORE_PATTERNS,
    }, mixed.length],
    ["own topology, node pools, all readings", own.map((s) => encodeSnapshot(s)), {
      allReadings: true,
    }, own.length],
    ["own topology, by label and path", own.map((s) => encodeSnapshot(s)), {
      groupBy: ["karpenter.sh/nodepool", "GPU.smi.gpu.model"],
    }, own.length],
    [
      "random tricky readings (most in block scalars), one cohort",
      random.map((s) => encodeSnapshot(s)),
      { groupBy: ["none"] },
      1,
    ],
    ["tricky single-line readings and keys", trickyFleet, { groupBy: ["none"] }, 6],
    // Keys out of order are read straight (their order does not matter to the builder).
    ["edited files", [...mixed.slice(0, 5).map((s) => encodeSnapshot(s)), ...edited], {
      ignore: DEFAULT_IGNORE_PATTERNS,
    }, 9],
    ["JSON files", mixed.slice(0, 3).map((s) => encodeSnapshot(s, "json")), {}, 0],
  ];
  for (const [what, texts, options, taken] of cases) {
    const { parsed, fast } = readBothWays(texts, options);
    assert.equal(fast.report, parsed.report, what);
    assert.equal(fast.taken, taken, `${what}: files read straight`);
  }
  // A repeated key or an invalid document: declined, and parsing gives the error.
  for (
    const broken of [
      base.replace(/( {10}driver: .*\n)/, "$1$1"),
      base.replace(/^kind: .*\n/, "kind: Other\n"),
    ]
  ) {
    const { parsed, fast } = readBothWays([base, broken], {});
    assert.equal(fast.taken, 1);
    assert.match(fast.report, /Cannot (parse|read) snapshot 'file-2'/);
    assert.equal(fast.report, parsed.report);
  }
});

Deno.test("FleetBuilder reports a member it cannot compare and compares the rest as if it were not there", () => {
  const members = plantedFleet();
  const clean = buildFleetReport(members);
  const builder = createFleetBuilder();
  // Its OS readings are placed, then a measurement that is not one fails the comparison part
  // way: nothing of it may stay (the next member gets the same index).
  const broken = makeNodeSnapshot("gpu-node-broken");
  const os = broken.measurements.find((m) => m.type === "OS")!;
  for (const m of members.slice(0, 20)) builder.add(m);
  builder.add({
    node: "gpu-node-broken",
    snapshot: { ...broken, measurements: [os, { type: "GPU", subtypes: null }] } as never,
  });
  builder.unreadable({ node: "gpu-node-9999", source: "dir/gpu-node-9999.yaml", reason: "bad" });
  for (const m of members.slice(20)) builder.add(m);
  const report = builder.finish();
  assert.deepEqual(report.unreadable.map((u) => u.node), ["gpu-node-9999", "gpu-node-broken"]);
  assert.equal(report.summary.unreadable, 2);
  assert.deepEqual(report.outliers, clean.outliers);
  assert.deepEqual(report.cohorts, clean.cohorts);
  assert.deepEqual({ ...report.summary, unreadable: 0 }, clean.summary);
  const table = renderFleetTable(report);
  assert.match(table, /^FLEET \(42 nodes .*, 2 unreadable\)$/m);
  assert.match(table, /^ {2}gpu-node-9999 \(dir\/gpu-node-9999\.yaml\): bad$/m);
  assert.match(table, /^INCOMPLETE: 2 snapshot\(s\) could not be compared$/m);
  const html = renderFleetHtml(report);
  assert.match(html, /<h2>Unreadable<\/h2>/);
  assert.match(html, /<td>gpu-node-broken<\/td>/);
});

Deno.test("buildFleetReport() takes an outlier differing in 200,000 readings (no argument spread, no recursion)", () => {
  const make = (node: string, changed: number) => {
    const s = makeNodeSnapshot(node);
    const sysctl = s.measurements.find((m) => m.type === "OS")!.subtypes
      .find((x) => x.subtype === "sysctl")!;
    for (let i = 0; i < 200_000; i++) sysctl.data[`/p/${i}`] = i < changed ? "x" : "y";
    return { node, snapshot: s };
  };
  const report = buildFleetReport([make("a", 0), make("b", 0), make("c", 200_000)]);
  assert.equal(report.outliers[0]?.node, "c");
  assert.equal(report.outliers[0]?.differences.length, 200_000);
  const table = renderFleetTable(report);
  assert.ok(table.includes("DRIFT DETECTED"));
});
