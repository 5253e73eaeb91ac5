import assert from "node:assert/strict";
import { chmod, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { NOOP_LOGGER } from "../log.ts";
import { collectMeasurements } from "../collectors/collect.ts";
import { createCommandRunner, createHostReader } from "../collectors/host.ts";
import { createRecordedCluster } from "../collectors/testdata/fake_cluster.ts";
import { encodeSnapshot, parseSnapshot } from "./codec.ts";
import { createSnapshot } from "./model.ts";
import type { Snapshot } from "./model.ts";
import { createRedactor, REDACTED_METADATA, redactSnapshot } from "./redact.ts";

const KEY = "a test key of at least sixteen bytes";
const H100_XML = fileURLToPath(
  new URL("../tests/fixtures/nvidia-smi-q-x.h100.xml", import.meta.url),
);
const HOST = fileURLToPath(new URL("../collectors/testdata/host", import.meta.url));
const NODES = fileURLToPath(new URL("../collectors/testdata/k8s/nodes.json", import.meta.url));

/** The fake 8x H100 node, collected by the real collectors, with addresses and images added. */
async function h100Snapshot(): Promise<Snapshot> {
  const dir = await mkdtemp(path.join(tmpdir(), "aicr-redact-"));
  try {
    await writeFile(path.join(dir, "nvidia-smi"), `#!/bin/sh\ncat '${H100_XML}'\n`);
    await chmod(path.join(dir, "nvidia-smi"), 0o755);
    const { measurements } = await collectMeasurements({
      host: createHostReader({ root: HOST }),
      exec: createCommandRunner({ path: dir }),
      env: (name) => (name === "NODE_NAME" ? "gpu-node-1" : undefined),
      log: NOOP_LOGGER,
      cluster: await createRecordedCluster(),
    });
    const snapshot = createSnapshot(measurements, {
      nodeName: "gpu-node-1",
      version: "1.0.0",
      timestamp: new Date("2026-12-05T13:00:00Z"),
    });
    // What real nodes add: addresses and image references of private registries.
    snapshot.measurements[0]?.subtypes.push({
      subtype: "extra",
      data: {
        "internal-ip": "10.0.12.34",
        "ipv6": "fd00:10:244::1a",
        "driver-image": "nvcr.io/nvidia/driver:570.86.15-ubuntu24.04",
        "mirror-image": "registry.corp.example:5000/gpu/dcgm-exporter@sha256:" + "a".repeat(64),
        "listen": "http://10.0.12.34:9400/metrics",
      },
      context: { source: "GET node/gpu-node-1", status: "ok" },
    });
    return snapshot;
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** Every value redaction must remove, read from the inputs themselves, not from the output. */
async function originals(): Promise<string[]> {
  const nodes = JSON.parse(await readFile(NODES, "utf8")) as {
    items: { metadata: { name: string } }[];
  };
  return [
    ...nodes.items.map((n) => n.metadata.name),
    "gpu-node-1",
    "10.0.12.34",
    "fd00:10:244::1a",
    "nvcr.io",
    "registry.corp.example",
  ];
}

Deno.test("redactSnapshot() leaves no node name, address or registry host of the fake 8x H100 node anywhere", async () => {
  const snapshot = await h100Snapshot();
  const before = encodeSnapshot(snapshot, "yaml");
  const secrets = await originals();
  for (const value of secrets) assert.ok(before.includes(value), `the input carries ${value}`);
  const redacted = redactSnapshot(snapshot, createRedactor(KEY));
  for (const format of ["yaml", "json"] as const) {
    const text = encodeSnapshot(redacted, format);
    for (const value of secrets) assert.ok(!text.includes(value), `${value} survived in ${format}`);
    // Still a valid snapshot, of the same shape.
    const back = parseSnapshot(text);
    assert.equal(back.measurements.length, snapshot.measurements.length);
  }
  assert.equal(
    redacted.metadata[REDACTED_METADATA],
    "hostnames,node-names,ip-addresses,registry-hosts",
  );
  // What is not identifying stays: the GPU model, the driver, the label keys, the image path.
  const text = encodeSnapshot(redacted, "yaml");
  assert.match(text, /NVIDIA H100 80GB HBM3/);
  assert.match(text, /nvidia\.com\/gpu\.present/);
  assert.match(text, /redacted-[0-9a-f]{12}\/nvidia\/driver:570\.86\.15-ubuntu24\.04/);
});

Deno.test("redactSnapshot() gives one token per value and key, across snapshots", async () => {
  const snapshot = await h100Snapshot();
  const a = encodeSnapshot(redactSnapshot(snapshot, createRedactor(KEY)), "yaml");
  const b = encodeSnapshot(redactSnapshot(structuredClone(snapshot), createRedactor(KEY)), "yaml");
  assert.equal(a, b, "same input, same key: same document (diffs and cohorts still work)");
  const other = encodeSnapshot(
    redactSnapshot(snapshot, createRedactor("another key, sixteen bytes+")),
    "yaml",
  );
  const token = createRedactor(KEY).token("gpu-node-1");
  assert.ok(a.includes(token));
  assert.ok(!other.includes(token), "another key gives other tokens");
  assert.throws(() => createRedactor("short"), RangeError);
});

Deno.test("redactor.text() leaves versions, times and label keys alone", () => {
  const r = createRedactor(KEY);
  for (
    const kept of [
      "570.86.15",
      "v1.33.5-eks-3025e55",
      "2026-03-21T10:30:00Z",
      "nvidia.com/gpu.present",
      "containerd://2.0.3",
      "12:34:56",
    ]
  ) assert.equal(r.text(kept), kept);
  assert.equal(r.text("ip 192.168.1.20 up"), `ip ${r.token("192.168.1.20")} up`);
  // After a dot too: a label key and its value (`<key>.<value>`, NodeTopology's readings).
  assert.equal(
    r.text("example.com/node-ip.10.0.0.7"),
    `example.com/node-ip.${r.token("10.0.0.7")}`,
  );
  assert.equal(r.text("1.2.3.4.5"), "1.2.3.4.5");
});

Deno.test("redactor.text() replaces a learnt name only whole, between dots too, longest first", () => {
  const r = createRedactor(KEY);
  r.learn(["node-1", "node-1.corp.example", "true", "8", "a sentence, not a name"]);
  const t = (v: string) => r.token(v);
  assert.equal(r.text("kubernetes.io/hostname.node-1"), `kubernetes.io/hostname.${t("node-1")}`);
  assert.equal(r.text("GET /api/v1/nodes/node-1"), `GET /api/v1/nodes/${t("node-1")}`);
  assert.equal(r.text("node-1.corp.example:10250"), `${t("node-1.corp.example")}:10250`);
  assert.equal(r.text("node-1.other.example"), `${t("node-1")}.other.example`);
  for (const kept of ["node-12", "my-node-1", "node-1x.example", "node_1", "true", "8 GPUs"]) {
    assert.equal(r.text(kept), kept);
  }
});

Deno.test("redactSnapshot() hides a label key's node (kubernetes.io/hostname.<node>) and names learnt earlier", () => {
  const r = createRedactor(KEY);
  const node = (name: string, other: string): Snapshot =>
    createSnapshot([{
      type: "NodeTopology",
      subtypes: [{
        subtype: "label",
        data: {
          [`kubernetes.io/hostname.${name}`]: `${name}|${name}`,
          "note": `paired with ${other}`,
        },
      }],
    }], { nodeName: name, version: "1.0.0", timestamp: new Date("2026-12-05T13:00:00Z") });
  // The first names the second only in free text: hidden once the second taught its name.
  r.learn(["gpu-b7"]);
  const text = encodeSnapshot(redactSnapshot(node("gpu-a3", "gpu-b7"), r), "yaml");
  for (const name of ["gpu-a3", "gpu-b7"]) assert.ok(!text.includes(name), `${name} in\n${text}`);
  assert.ok(text.includes(`kubernetes.io/hostname.${r.token("gpu-a3")}`));
});
