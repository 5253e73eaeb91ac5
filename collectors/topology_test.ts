import assert from "node:assert/strict";
import { PermissionError } from "../errors.ts";
import { collectOwnTopology, collectTopology, foldTopology, formatNodes } from "./topology.ts";
import { createFakeCluster, createRecordedCluster, loadRecorded } from "./testdata/fake_cluster.ts";
import type { KubeNode } from "./types.ts";

Deno.test("formatNodes() sorts, deduplicates and truncates to N plus a count", () => {
  assert.equal(formatNodes(["b", "a", "c", "a"]), "a,b,c");
  assert.equal(formatNodes(["b", "a", "c"], 2), "a,b (+1 more)");
  assert.equal(formatNodes(["b", "a"], 2), "a,b");
});

Deno.test("foldTopology() encodes taints and labels from recorded nodes, disambiguating by effect and value", async () => {
  const nodes = (await loadRecorded<{ items: KubeNode[] }>("nodes.json")).items;
  const { summary, taint, label } = foldTopology(nodes);
  assert.deepEqual(taint, {
    "nvidia.com/gpu": "NoSchedule||arm-node-1,gpu-node-1,gpu-node-2",
    // dedicated has NoSchedule with two values (upstream's collision) and NoExecute with one.
    "dedicated.NoExecute": "inference|gpu-node-1",
    "dedicated.NoSchedule.inference": "inference|gpu-node-1",
    "dedicated.NoSchedule.training": "training|gpu-node-2",
    spot: "PreferNoSchedule|true|arm-node-1",
  });
  assert.deepEqual(label, {
    "kubernetes.io/arch.amd64": "amd64|cpu-node-1,gpu-node-1,gpu-node-2",
    "kubernetes.io/arch.arm64": "arm64|arm-node-1",
    "node.kubernetes.io/instance-type.m7i.2xlarge": "m7i.2xlarge|cpu-node-1",
    "node.kubernetes.io/instance-type.p5.48xlarge": "p5.48xlarge|gpu-node-1,gpu-node-2",
    "node.kubernetes.io/instance-type.p6-gb200.48xlarge": "p6-gb200.48xlarge|arm-node-1",
    "nvidia.com/gpu.present": "true|arm-node-1,gpu-node-1,gpu-node-2",
  });
  assert.deepEqual(summary, { "node-count": 4, "taint-count": 5, "label-count": 6 });
});

Deno.test("foldTopology() is stable whatever the node and taint order", async () => {
  const nodes = (await loadRecorded<{ items: KubeNode[] }>("nodes.json")).items;
  const shuffled = [...nodes].reverse().map((n) => ({
    ...n,
    spec: { ...n.spec, taints: [...(n.spec?.taints ?? [])].reverse() },
  }));
  assert.deepEqual(foldTopology(shuffled), foldTopology(nodes));
});

Deno.test("foldTopology() truncates node lists with maxNodesPerEntry", async () => {
  const nodes = (await loadRecorded<{ items: KubeNode[] }>("nodes.json")).items;
  const { taint } = foldTopology(nodes, { maxNodesPerEntry: 1 });
  assert.equal(taint["nvidia.com/gpu"], "NoSchedule||arm-node-1 (+2 more)");
});

Deno.test("collectTopology() lists nodes in pages of 500 and follows continue tokens", async () => {
  const cluster = await createRecordedCluster({ maxPageSize: 3 });
  const m = await collectTopology({ cluster });
  assert.deepEqual(m.subtypes.map((s) => s.subtype), ["summary", "taint", "label"]);
  assert.equal(m.subtypes[0]?.data["node-count"], 4);
  assert.deepEqual(cluster.calls.map((c) => c.args), [
    { limit: 500, continue: undefined },
    { limit: 500, continue: "page-3" },
  ]);
  assert.deepEqual(m.subtypes[0]?.context, { status: "ok", source: "LIST /api/v1/nodes" });
});

Deno.test("collectTopology() without a client gives zero counts, and a denied list says denied", async () => {
  const none = await collectTopology({});
  assert.deepEqual(none.subtypes[0]?.data, { "node-count": 0, "taint-count": 0, "label-count": 0 });
  assert.equal(none.subtypes[0]?.context?.status, "absent");
  const denied = await collectTopology({
    cluster: createFakeCluster({
      errors: { listNodes: new PermissionError("Cannot list nodes: forbidden") },
    }),
  });
  assert.equal(denied.subtypes.length, 3);
  for (const s of denied.subtypes) {
    assert.deepEqual(s.data, {});
    assert.equal(s.context?.status, "denied");
  }
});

Deno.test("collectOwnTopology() reads its own Node by GET (never a LIST) and folds it alone, scope node", async () => {
  const cluster = await createRecordedCluster();
  const m = await collectOwnTopology({ cluster }, { nodeName: "gpu-node-1" });
  assert.deepEqual(cluster.calls.map((c) => [c.method, c.args]), [
    ["getNode", { name: "gpu-node-1" }],
  ]);
  const [summary, taint, label] = m.subtypes;
  assert.deepEqual(summary?.data, {
    "node-count": 1,
    "taint-count": 3,
    "label-count": 3,
    scope: "node",
  });
  assert.deepEqual(summary?.context, { status: "ok", source: "GET /api/v1/nodes/gpu-node-1" });
  // The same encoding as the cluster's, every list naming this node alone.
  assert.deepEqual(taint?.data, {
    "nvidia.com/gpu": "NoSchedule||gpu-node-1",
    "dedicated.NoExecute": "inference|gpu-node-1",
    "dedicated.NoSchedule": "inference|gpu-node-1",
  });
  assert.equal(label?.data["node.kubernetes.io/instance-type"], "p5.48xlarge|gpu-node-1");
  // What the cohorts read: the entries of the cluster's fold that name this node.
  const cluster4 = foldTopology((await loadRecorded<{ items: KubeNode[] }>("nodes.json")).items);
  for (const [key, value] of Object.entries(label?.data ?? {})) {
    const [v] = String(value).split("|");
    const whole = cluster4.label[key] ?? cluster4.label[`${key}.${v}`];
    assert.ok(String(whole).includes("gpu-node-1"), key);
  }
});

Deno.test("collectOwnTopology() says why when it cannot read its Node, and keeps scope node", async () => {
  const denied = await collectOwnTopology({
    cluster: createFakeCluster({
      errors: { getNode: new PermissionError("Cannot get nodes: forbidden") },
    }),
  }, { nodeName: "n1" });
  assert.deepEqual(denied.subtypes.map((s) => s.context?.status), ["denied", "denied", "denied"]);
  assert.deepEqual(denied.subtypes[0]?.data, { scope: "node" });
  const none = await collectOwnTopology({}, { nodeName: "n1" });
  assert.equal(none.subtypes[0]?.context?.status, "absent");
  const unnamed = await collectOwnTopology({ cluster: createFakeCluster() }, { nodeName: "" });
  assert.match(unnamed.subtypes[0]?.context?.message ?? "", /NODE_NAME/);
});
