import assert from "node:assert/strict";
import { IncompleteError } from "../errors.ts";
import type { FleetResult } from "./fleet.ts";
import {
  buildReport,
  cleanupReportContent,
  fleetReportContent,
  formatReportJson,
  formatReportJunit,
  installReportContent,
} from "./report.ts";

const STARTED = new Date("2026-12-03T10:00:00Z");
const FINISHED = new Date("2026-12-03T10:00:02.5Z");

const FLEET: FleetResult = {
  transport: "direct",
  missingPods: 1,
  results: [
    { node: "gpu-1", pod: "aicr-daemon-a", status: "ok", transport: "direct", durationMs: 120 },
    {
      node: "gpu-2",
      pod: "aicr-daemon-b",
      status: "not-ready",
      error: "pod aicr-daemon-b is not Ready (ContainerCreating)",
      transport: "direct",
      durationMs: 0,
    },
    { node: "gpu-3", pod: "", status: "not-ready", error: "no daemon pod & <yet>", durationMs: 0 },
  ],
};

Deno.test("buildReport() gives one entry per node with its status, counts and the exit code", () => {
  const report = buildReport({
    kind: "DaemonSetFetchReport",
    namespace: "aicr-system",
    name: "aicr-daemon",
    startedAt: STARTED,
    finishedAt: FINISHED,
    content: fleetReportContent(FLEET),
    failure: new IncompleteError("Cannot fetch every node's snapshot: 2 of 3 nodes failed"),
  });
  assert.deepEqual(report.metadata, {
    namespace: "aicr-system",
    name: "aicr-daemon",
    startedAt: "2026-12-03T10:00:00.000Z",
    finishedAt: "2026-12-03T10:00:02.500Z",
    seconds: 2.5,
  });
  assert.deepEqual(report.result, {
    status: "failed",
    exitCode: 9,
    error: "Cannot fetch every node's snapshot: 2 of 3 nodes failed",
    counts: { "nodes.ok": 1, "nodes.not-ready": 2 },
  });
  assert.deepEqual(report.nodes.map((n) => [n.node, n.status, n.pod ?? ""]), [
    ["gpu-1", "ok", "aicr-daemon-a"],
    ["gpu-2", "not-ready", "aicr-daemon-b"],
    ["gpu-3", "not-ready", ""],
  ]);
  assert.equal(report.nodes[0]?.seconds, 0.12);
  assert.deepEqual(JSON.parse(formatReportJson(report)), report, "the JSON round-trips");
});

Deno.test("formatReportJunit() makes one test case per node, failing the ones not ok", () => {
  const report = buildReport({
    kind: "DaemonSetFetchReport",
    namespace: "aicr-system",
    startedAt: STARTED,
    finishedAt: FINISHED,
    content: fleetReportContent(FLEET),
  });
  const xml = formatReportJunit(report);
  assert.match(
    xml,
    /^<\?xml version="1.0" encoding="UTF-8"\?>\n<testsuites name="aicr" tests="3" failures="2"/,
  );
  assert.match(
    xml,
    /<testsuite name="aicr DaemonSetFetch" tests="3" failures="2" errors="0" time="2.5"/,
  );
  assert.match(xml, /<testcase classname="aicr-system" name="gpu-1" time="0.12"\/>/);
  assert.match(
    xml,
    /<testcase classname="aicr-system" name="gpu-3" time="0">\n {6}<failure type="not-ready" message="no daemon pod &amp; &lt;yet&gt;"\/>/,
  );
  assert.equal(xml.match(/<testcase /g)?.length, 3);
});

Deno.test("formatReportJunit() fails one case named after the verb when it reached no node", () => {
  const report = buildReport({
    kind: "DaemonSetFetchReport",
    namespace: "aicr-system",
    startedAt: STARTED,
    finishedAt: FINISHED,
    content: { nodes: [], objects: [] },
    failure: new Error("Cannot mint a token"),
  });
  assert.equal(report.result.exitCode, 8);
  const xml = formatReportJunit(report);
  assert.match(xml, /<failure type="exit-8" message="Cannot mint a token"\/>/);
});

Deno.test("installReportContent() and cleanupReportContent() list objects with UIDs and nodes", () => {
  const install = installReportContent({
    runId: "20261203-100000-0123456789abcdef",
    created: [{
      kind: "DaemonSet",
      namespace: "aicr-system",
      name: "aicr-daemon",
      uid: "u1",
      state: "confirmed",
    }],
    desired: 2,
    ready: false,
    pods: [
      { node: "gpu-1", pod: "p1", ready: true },
      { node: "gpu-2", pod: "p2", ready: false, detail: "Pending", unschedulable: "0/3 nodes" },
    ],
  });
  assert.deepEqual(install.objects, [
    {
      kind: "DaemonSet",
      namespace: "aicr-system",
      name: "aicr-daemon",
      uid: "u1",
      status: "created",
    },
  ]);
  assert.deepEqual(install.nodes, [
    { node: "gpu-1", status: "ready", pod: "p1" },
    { node: "gpu-2", status: "not-ready", pod: "p2", detail: "0/3 nodes" },
  ]);
  const cleanup = cleanupReportContent([
    { kind: "Job", namespace: "ns", name: "aicr-x", uid: "u2", result: "deleted" },
    {
      kind: "ClusterRole",
      name: "aicr-node-reader-x",
      uid: "u3",
      result: "kept",
      detail: "labels",
    },
  ], "20261203-100000-0123456789abcdef");
  const report = buildReport({
    kind: "CleanupReport",
    namespace: "ns",
    startedAt: STARTED,
    finishedAt: FINISHED,
    content: cleanup,
  });
  assert.equal(report.metadata.runId, "20261203-100000-0123456789abcdef");
  assert.deepEqual(report.result.counts, { "objects.deleted": 1, "objects.kept": 1 });
  assert.deepEqual(report.objects[1], {
    kind: "ClusterRole",
    name: "aicr-node-reader-x",
    uid: "u3",
    status: "kept",
    detail: "labels",
  });
});

Deno.test("fleetReportContent() carries the cluster's NodeTopology as one object, ok or why not", () => {
  const document = {
    kind: "Snapshot" as const,
    apiVersion: "aicr.run/v1",
    metadata: { "source-node": "", timestamp: "2026-12-03T10:00:00Z", version: "0.1.0" },
    measurements: [],
  };
  const listed = fleetReportContent({
    ...FLEET,
    topology: { document, status: "ok", nodes: 3, as: "reader" },
  });
  assert.deepEqual(listed.objects, [{
    kind: "NodeTopology",
    name: "cluster",
    status: "ok",
    detail: "3 nodes, listed as the reader",
  }]);
  const denied = fleetReportContent({
    ...FLEET,
    topology: { document, status: "denied", nodes: 0, as: "caller", message: "forbidden" },
  });
  assert.deepEqual(denied.objects.map((o) => [o.status, o.detail]), [["denied", "forbidden"]]);
  assert.deepEqual(fleetReportContent(FLEET).objects, [], "--no-topology: none");
});
