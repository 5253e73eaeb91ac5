import assert from "node:assert/strict";
import { parse } from "yaml";
import { DEFAULT_IGNORE_PATTERNS, diffSnapshots } from "./diff.ts";
import { diffDocument, formatReading, renderDiff, renderDiffTable } from "./diff_render.ts";
import { makeNodeSnapshot, setReading } from "./testdata/generate.ts";

function driftResult() {
  const b = makeNodeSnapshot("gpu-node-1", { clusterNodes: ["gpu-node-1", "gpu-node-2"] });
  const t = makeNodeSnapshot("gpu-node-1", { clusterNodes: ["gpu-node-1", "gpu-node-2"], boot: 4 });
  setReading(t, "GPU.smi.driver", "570.124.06");
  setReading(t, "OS.kmod.nvidia_fs", true);
  setReading(t, "OS.grub.quiet", undefined);
  setReading(t, "SystemD.kubelet.service.MemoryMax", 17179869184);
  setReading(t, "NodeTopology.taint.nvidia.com/gpu", "NoSchedule||gpu-node-2");
  return diffSnapshots(b, t, {
    baselineSource: "before.yaml",
    targetSource: "cm://gpu-operator/aicr-snapshot",
    ignore: DEFAULT_IGNORE_PATTERNS,
  });
}

Deno.test("renderDiffTable() groups changes by measurement with values side by side", () => {
  const text = renderDiffTable(driftResult());
  assert.equal(
    text,
    [
      "BASELINE before.yaml",
      "TARGET   cm://gpu-operator/aicr-snapshot",
      "",
      "CHANGES (1 added, 1 removed, 3 modified)",
      "",
      "GPU",
      "  KIND      PATH                               BASELINE                           TARGET",
      "  MODIFIED  GPU.smi.driver                     570.86.15                          570.124.06",
      "",
      "NodeTopology",
      "  KIND      PATH                               BASELINE                           TARGET",
      "  MODIFIED  NodeTopology.taint.nvidia.com/gpu  NoSchedule||gpu-node-1,gpu-node-2  NoSchedule||gpu-node-2",
      "            nodes: -gpu-node-1",
      "",
      "OS",
      "  KIND      PATH                               BASELINE                           TARGET",
      '  REMOVED   OS.grub.quiet                      ""                                 -',
      "  ADDED     OS.kmod.nvidia_fs                  -                                  true",
      "",
      "SystemD",
      "  KIND      PATH                               BASELINE                           TARGET",
      "  MODIFIED  SystemD.kubelet.service.MemoryMax  18446744073709551615               17179869184",
      "",
      "DRIFT DETECTED",
      "",
    ].join("\n"),
  );
});

Deno.test("renderDiffTable() says NO CHANGES and NO DRIFT for identical snapshots", () => {
  const s = makeNodeSnapshot("gpu-node-1");
  const text = renderDiffTable(diffSnapshots(s, s));
  assert.match(text, /\nNO CHANGES\n\nNO DRIFT\n$/);
});

Deno.test("renderDiffTable() colours kinds and the verdict only when asked", () => {
  const plain = renderDiffTable(driftResult());
  const coloured = renderDiffTable(driftResult(), { color: true });
  assert.ok(!plain.includes("\x1b["));
  assert.ok(coloured.includes("\x1b[33mMODIFIED"));
  assert.ok(coloured.includes("\x1b[31mDRIFT DETECTED\x1b[0m"));
  // deno-lint-ignore no-control-regex -- stripping the ANSI escapes
  assert.equal(coloured.replace(/\x1b\[\d+m/g, ""), plain);
});

Deno.test("renderDiff() json keeps reading types, bigints exact, and the upstream field order", () => {
  const json = renderDiff(driftResult(), "json");
  assert.ok(json.includes('"baseline": 18446744073709551615'));
  const doc = JSON.parse(json);
  assert.deepEqual(Object.keys(doc), [
    "baselineSource",
    "targetSource",
    "changes",
    "summary",
    "statusChanges",
  ]);
  assert.deepEqual(doc.summary, { added: 1, removed: 1, modified: 3, total: 5 });
  assert.deepEqual(doc.changes[0], {
    kind: "modified",
    severity: "info",
    path: "GPU.smi.driver",
    baseline: "570.86.15",
    target: "570.124.06",
  });
  assert.deepEqual(doc.changes.find((c: { kind: string }) => c.kind === "added"), {
    kind: "added",
    severity: "info",
    path: "OS.kmod.nvidia_fs",
    target: true,
  });
});

Deno.test("renderDiff() yaml parses back to the same document and is stable", () => {
  const yaml = renderDiff(driftResult(), "yaml");
  assert.equal(yaml, renderDiff(driftResult(), "yaml"));
  const doc = parse(yaml, { intAsBigInt: true });
  assert.equal(doc.changes[4].baseline, 18446744073709551615n);
  assert.equal(doc.changes[0].path, "GPU.smi.driver");
  assert.deepEqual(doc.summary, { added: 1n, removed: 1n, modified: 3n, total: 5n });
  assert.equal(Object.keys(diffDocument(driftResult())).length, 5);
});

Deno.test("formatReading() keeps one reading on one line and shows absence as -", () => {
  assert.equal(formatReading(undefined), "-");
  assert.equal(formatReading(""), '""');
  assert.equal(formatReading("4\t4\t1\t7"), "4\\t4\\t1\\t7");
  assert.equal(formatReading("a\nb"), "a\\nb");
  assert.equal(formatReading(null), "null");
  assert.equal(formatReading("x".repeat(100), 10), "xxxxxxxxx…");
});

Deno.test("renderDiffTable() lists collector status changes apart from the drift verdict", () => {
  const b = makeNodeSnapshot("gpu-node-1");
  const t = makeNodeSnapshot("gpu-node-1");
  const sysctl = t.measurements.find((m) => m.type === "OS")?.subtypes.find((s) =>
    s.subtype === "sysctl"
  );
  assert.ok(sysctl);
  sysctl.context = { status: "denied", source: "/proc/sys", message: "EACCES" };
  const text = renderDiffTable(diffSnapshots(b, t));
  assert.match(
    text,
    /NO CHANGES\n\nSOURCE STATUS \(context, not counted as drift\)\n {2}OS\.sysctl: ok -> denied\n\nNO DRIFT\n$/,
  );
});
