import assert from "node:assert/strict";
import { UsageError } from "../errors.ts";
import { assignCohorts, readPath } from "./cohort.ts";
import { DEFAULT_IGNORE_PATTERNS } from "./diff.ts";
import { encodeDocument, fleetDocument, renderFleetTable } from "./diff_render.ts";
import { buildFleetReport } from "./fleet.ts";
import type { FleetOptions } from "./fleet.ts";
import { renderFleetHtml } from "./fleet_html.ts";
import type { Snapshot } from "./model.ts";
import { setReading } from "./testdata/generate.ts";
import { makeMixedFleet } from "./testdata/mixed_fleet.ts";

const H100 = "NVIDIA H100 80GB HBM3 ×8 · p5.48xlarge";
const GB200 = "NVIDIA GB200 192GB HBM3e ×8 · p6.48xlarge";
const CPU = "no GPU · m7i.4xlarge";

function members(snapshots: Snapshot[]) {
  return snapshots.map((snapshot) => ({ node: snapshot.metadata["source-node"], snapshot }));
}

function report(snapshots: Snapshot[], options: FleetOptions = {}) {
  return buildFleetReport(members(snapshots), { ignore: DEFAULT_IGNORE_PATTERNS, ...options });
}

/** 6 H100, 4 GB200 and 3 CPU system nodes from the real captures and node profiles. */
function mixed(): Snapshot[] {
  return makeMixedFleet({ "p5-h100": 6, "p6-gb200": 4, "system-m7i": 3 });
}

function node(snapshots: Snapshot[], name: string): Snapshot {
  const found = snapshots.find((s) => s.metadata["source-node"] === name);
  assert.ok(found, name);
  return found;
}

Deno.test("buildFleetReport() puts H100, GB200 and CPU nodes in cohorts of their own: model differences are never drift", () => {
  const r = report(mixed());
  assert.deepEqual(r.groupBy, ["GPU.smi.gpu.model", "GPU.smi.gpu-count", "instance-type"]);
  assert.deepEqual(r.cohorts.map((c) => [c.name, c.nodes.length, c.outliers]), [
    [H100, 6, 0],
    [GB200, 4, 0],
    [CPU, 3, 0],
  ]);
  assert.deepEqual(r.cohorts[1]?.key, {
    "GPU.smi.gpu.model": "NVIDIA GB200 192GB HBM3e",
    "GPU.smi.gpu-count": "8",
    "instance-type": "p6.48xlarge",
  });
  assert.deepEqual(r.outliers, []);
  assert.match(renderFleetTable(r), /NO DRIFT\n$/);
  // The same fleet as one cohort: every GB200 and CPU node is flagged against the H100s.
  const one = report(mixed(), { groupBy: ["none"] });
  assert.deepEqual(one.cohorts.map((c) => c.name), ["fleet"]);
  assert.equal(one.outliers.length, 7);
});

Deno.test("buildFleetReport() finds a planted driver change and a planted sysctl change inside their cohorts exactly", () => {
  const snapshots = mixed();
  setReading(node(snapshots, "p6-gb200-3"), "GPU.smi.driver", "580.95.05");
  setReading(node(snapshots, "p5-h100-4"), "OS.sysctl./proc/sys/vm/swappiness", "10");
  setReading(node(snapshots, "system-m7i-2"), "OS.sysctl./proc/sys/vm/max_map_count", "65530");
  const r = report(snapshots);
  assert.deepEqual(r.outliers, [
    {
      node: "p5-h100-4",
      cohort: H100,
      differences: [{
        path: "OS.sysctl./proc/sys/vm/swappiness",
        kind: "modified",
        value: "10",
        fleet: "60",
        fleetNodes: 5,
      }],
    },
    {
      node: "p6-gb200-3",
      cohort: GB200,
      differences: [{
        path: "GPU.smi.driver",
        kind: "modified",
        value: "580.95.05",
        fleet: "580.82.07",
        fleetNodes: 3,
      }],
    },
    {
      node: "system-m7i-2",
      cohort: CPU,
      differences: [{
        path: "OS.sysctl./proc/sys/vm/max_map_count",
        kind: "modified",
        value: "65530",
        fleet: "1048576",
        fleetNodes: 2,
      }],
    },
  ]);
  assert.deepEqual(r.summary, {
    nodes: 13,
    cohorts: 3,
    singletons: 0,
    outliers: 3,
    differences: 3,
    unreadable: 0,
  });
  assert.deepEqual(r.cohorts.map((c) => c.columns.map((col) => [col.path, col.fleet])), [
    [["OS.sysctl./proc/sys/vm/swappiness", "60"]],
    [["GPU.smi.driver", "580.82.07"]],
    [["OS.sysctl./proc/sys/vm/max_map_count", "1048576"]],
  ]);
  const text = renderFleetTable(r);
  assert.match(
    text,
    /^OUTLIERS in NVIDIA GB200 192GB HBM3e ×8 · p6\.48xlarge \(4 nodes\)\n {2}p6-gb200-3: GPU\.smi\.driver 580\.95\.05 \(cohort: 580\.82\.07 on 3 nodes\)$/m,
  );
});

Deno.test("renderFleetTable() shows a change that is the same on every GPU of a node once, as gpu-0..7", () => {
  const snapshots = mixed();
  const h = node(snapshots, "p5-h100-2");
  for (let i = 0; i < 8; i++) setReading(h, `GPU.gpu-${i}.power.limit.current`, "500.00 W");
  setReading(node(snapshots, "p5-h100-5"), "GPU.gpu-3.ecc.current", "Disabled");
  const r = report(snapshots);
  assert.equal(r.outliers[0]?.differences.length, 8, "the machine output keeps every reading");
  const text = renderFleetTable(r);
  assert.match(
    text,
    /^ {2}p5-h100-2: GPU\.gpu-0\.\.7\.power\.limit\.current 500\.00 W \(cohort: 700\.00 W on 5 nodes\)$/m,
  );
  assert.equal(text.match(/power\.limit\.current/g)?.length, 1);
  assert.match(
    text,
    /^ {2}p5-h100-5: GPU\.gpu-3\.ecc\.current Disabled \(cohort: Enabled on 5 nodes\)$/m,
  );
  // The HTML matrix: one column for the eight GPUs, one for the single GPU.
  const html = renderFleetHtml(r);
  assert.match(html, /<th scope="col"[^>]*data-path="GPU\.gpu-0\.\.7\.power\.limit\.current"/);
  assert.match(
    html,
    /<td class="outlier" data-path="GPU\.gpu-0\.\.7\.power\.limit\.current"[^>]*>500\.00 W<\/td>/,
  );
  assert.match(html, /data-path="GPU\.gpu-3\.ecc\.current"[^>]*>Disabled<\/td>/);
});

Deno.test("buildFleetReport() reports a cohort of one node as such, never as drift", () => {
  const snapshots = makeMixedFleet({ "p5-h100": 4, "system-m7i": 1 });
  const r = report(snapshots);
  assert.deepEqual(r.cohorts.map((c) => [c.name, c.nodes]), [
    [H100, ["p5-h100-1", "p5-h100-2", "p5-h100-3", "p5-h100-4"]],
    [CPU, ["system-m7i-1"]],
  ]);
  assert.equal(r.summary.singletons, 1);
  assert.deepEqual(r.outliers, []);
  const text = renderFleetTable(r);
  assert.match(text, /^no GPU · m7i\.4xlarge +1 {2}- \(one node: nothing to compare with\)$/m);
  assert.match(text, /NO DRIFT\n$/);
  const doc = JSON.parse(encodeDocument(fleetDocument(r), "json"));
  assert.equal(doc.cohorts[1].single, true);
  assert.equal(doc.cohorts[0].single, undefined);
  assert.match(renderFleetHtml(r), /one node: nothing to compare with/);
});

Deno.test("buildFleetReport() groups by a node label or a reading path given with groupBy", () => {
  const snapshots = makeMixedFleet({ "p5-h100": 4, "p6-gb200": 2, "system-m7i": 2 }, {
    labels: (n) => ({ "eks.amazonaws.com/nodegroup": /-[12]$/.test(n) ? "pool-a" : "pool-b" }),
  });
  // By default the node pool splits cohorts too.
  assert.deepEqual(report(snapshots).cohorts.map((c) => [c.name, c.nodes.length]), [
    [`${GB200} · pool pool-a`, 2],
    [`${H100} · pool pool-a`, 2],
    [`${H100} · pool pool-b`, 2],
    [`${CPU} · pool pool-a`, 2],
  ]);
  const byType = report(snapshots, { groupBy: ["node.kubernetes.io/instance-type"] });
  assert.deepEqual(byType.groupBy, ["node.kubernetes.io/instance-type"]);
  assert.deepEqual(byType.cohorts.map((c) => [c.name, c.nodes.length]), [
    ["node.kubernetes.io/instance-type=p5.48xlarge", 4],
    ["node.kubernetes.io/instance-type=m7i.4xlarge", 2],
    ["node.kubernetes.io/instance-type=p6.48xlarge", 2],
  ]);
  const byModel = report(snapshots, { groupBy: ["GPU.smi.gpu.model", "kubernetes.io/arch"] });
  assert.deepEqual(byModel.cohorts.map((c) => c.name), [
    "GPU.smi.gpu.model=NVIDIA H100 80GB HBM3, kubernetes.io/arch=amd64",
    "GPU.smi.gpu.model=(none), kubernetes.io/arch=amd64",
    "GPU.smi.gpu.model=NVIDIA GB200 192GB HBM3e, kubernetes.io/arch=arm64",
  ]);
  assert.deepEqual(byModel.cohorts[1]?.key, {
    "GPU.smi.gpu.model": null,
    "kubernetes.io/arch": "amd64",
  });
});

Deno.test("buildFleetReport() leaves a label out of the default cohort when its node lists were cut short", () => {
  // Lists cut to 3 names: the instance type of most nodes is unknown, so it must not split
  // a pool into "known" and "unknown" cohorts; GPU model and count still separate the kinds.
  const r = report(makeMixedFleet({ "p5-h100": 6, "system-m7i": 3 }, { maxNodesPerEntry: 3 }));
  assert.deepEqual(r.groupBy, ["GPU.smi.gpu.model", "GPU.smi.gpu-count"]);
  assert.deepEqual(r.cohorts.map((c) => [c.name, c.nodes.length]), [
    ["NVIDIA H100 80GB HBM3 ×8", 6],
    ["no GPU", 3],
  ]);
});

Deno.test("assignCohorts() refuses a groupBy key no snapshot has, naming it", () => {
  const m = members(makeMixedFleet({ "p5-h100": 2 }));
  for (const key of ["GPU.smi.gpu.modle", "example.com/rack"]) {
    assert.throws(
      () => assignCohorts(m, [key]),
      (e: unknown) =>
        e instanceof UsageError &&
        e.message.startsWith(`Cannot group by '${key}': no snapshot has`),
    );
  }
  assert.throws(() => assignCohorts(m, ["none", "GPU.smi.gpu.model"]), UsageError);
});

Deno.test("readPath() picks the longest subtype that fits a path", () => {
  const s = makeMixedFleet({ "p5-h100": 1 })[0] as Snapshot;
  assert.equal(readPath(s, "GPU.smi.gpu.model"), "NVIDIA H100 80GB HBM3");
  assert.equal(readPath(s, "GPU.gpu-7.power.limit.current"), "700.00 W");
  assert.equal(readPath(s, "SystemD.containerd.service.ActiveState"), "active");
  assert.equal(readPath(s, "GPU.smi.nothing"), undefined);
});

Deno.test("fleetDocument() and the html page name every cohort", () => {
  const snapshots = mixed();
  setReading(node(snapshots, "p6-gb200-3"), "GPU.smi.driver", "580.95.05");
  const r = report(snapshots);
  const doc = JSON.parse(encodeDocument(fleetDocument(r), "json"));
  assert.deepEqual(doc.summary, {
    nodes: 13,
    cohorts: 3,
    singletons: 0,
    outliers: 1,
    differences: 1,
    unreadable: 0,
  });
  assert.deepEqual(
    doc.cohorts.map((c: { name: string; size: number; outliers: number }) => [
      c.name,
      c.size,
      c.outliers,
    ]),
    [[H100, 6, 0], [GB200, 4, 1], [CPU, 3, 0]],
  );
  assert.equal(doc.outliers[0].cohort, GB200);
  const html = renderFleetHtml(r);
  for (const name of [H100, GB200, CPU]) assert.ok(html.includes(`data-cohort="${name}"`), name);
  assert.match(html, /<section class="cohort" id="cohort-2" data-cohort="NVIDIA GB200/);
});

Deno.test("buildFleetReport() takes cohort labels from each node's own topology (the daemons' scope node), whatever the node names", () => {
  // Names sharing a long suffix, as on EKS: nothing of one node's own entries may be taken for
  // another's, and nodes of equal label counts are not one cluster seen again.
  const snapshots = makeMixedFleet({ "p5-h100": 4, "p6-gb200": 2, "system-m7i": 2 }, {
    labels: (n) => ({ "eks.amazonaws.com/nodegroup": /-[12]$/.test(n) ? "pool-a" : "pool-b" }),
    ownTopology: true,
  });
  for (const s of snapshots) {
    const summary = s.measurements.find((m) => m.type === "NodeTopology")?.subtypes[0]?.data;
    assert.equal(summary?.scope, "node");
    assert.equal(summary?.["node-count"], 1);
  }
  const cluster = makeMixedFleet({ "p5-h100": 4, "p6-gb200": 2, "system-m7i": 2 }, {
    labels: (n) => ({ "eks.amazonaws.com/nodegroup": /-[12]$/.test(n) ? "pool-a" : "pool-b" }),
  });
  const cohorts = (r: ReturnType<typeof report>) =>
    r.cohorts.map((c) => [c.name, [...c.nodes].sort()]);
  assert.deepEqual(cohorts(report(snapshots)), cohorts(report(cluster)));
  assert.equal(report(snapshots).cohorts.length, 4);
  const renamed = snapshots.map((s) => {
    const copy = structuredClone(s);
    const name = `${s.metadata["source-node"]}.us-west-2.compute.internal`;
    copy.metadata["source-node"] = name;
    for (const sub of copy.measurements.find((m) => m.type === "NodeTopology")?.subtypes ?? []) {
      for (const [k, v] of Object.entries(sub.data)) {
        if (typeof v === "string") sub.data[k] = v.replace(/\|.*$/, `|${name}`);
      }
    }
    return copy;
  });
  const byType = report(renamed, { groupBy: ["node.kubernetes.io/instance-type"] });
  assert.deepEqual(byType.cohorts.map((c) => [c.name, c.nodes.length]), [
    ["node.kubernetes.io/instance-type=p5.48xlarge", 4],
    ["node.kubernetes.io/instance-type=m7i.4xlarge", 2],
    ["node.kubernetes.io/instance-type=p6.48xlarge", 2],
  ]);
});
