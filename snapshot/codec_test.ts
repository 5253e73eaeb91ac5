import assert from "node:assert/strict";
import { UsageError } from "../errors.ts";
import {
  assertFitsConfigMap,
  CONFIGMAP_SNAPSHOT_BUDGET,
  encodeSnapshot,
  MAX_DOCUMENT_BYTES,
  parseSnapshot,
  parseSnapshotStream,
} from "./codec.ts";
import { createSnapshot, LEGACY_API_VERSION } from "./model.ts";
import type { Measurement } from "./model.ts";

const MEASUREMENTS: Measurement[] = [
  { type: "SystemD", subtypes: [] },
  {
    type: "OS",
    subtypes: [{
      subtype: "sysctl",
      data: {
        "/proc/sys/vm/swappiness": "60",
        "/proc/sys/kernel/printk": "4\t4\t1\t7",
        "/proc/sys/kernel/pid_max": "4194304",
      },
      context: { status: "ok", source: "/proc/sys" },
    }, { subtype: "kmod", data: { nvidia: true, overlay: true } }],
  },
  {
    type: "GPU",
    subtypes: [{
      subtype: "smi",
      data: { "gpu-count": 8, driver: "570.86.15", "cuda-version": "12.8" },
    }],
  },
  { type: "K8s", subtypes: [{ subtype: "server", data: { version: null } }] },
];

function snapshot(timestamp = new Date("2026-03-21T10:30:00.123Z")) {
  return createSnapshot(MEASUREMENTS, { timestamp, version: "0.1.0", nodeName: "gpu-node-1" });
}

Deno.test("encodeSnapshot() writes measurements in canonical order with sorted keys", () => {
  const yaml = encodeSnapshot(snapshot());
  const types = [...yaml.matchAll(/^ {2}- type: (\w+)$/gm)].map((m) => m[1]);
  assert.deepEqual(types, ["K8s", "GPU", "OS", "SystemD"]);
  assert.ok(yaml.startsWith("kind: Snapshot\napiVersion: aicr.run/v1\nmetadata:\n"));
  assert.ok(yaml.includes('timestamp: "2026-03-21T10:30:00Z"'));
  const keys = [...yaml.matchAll(/^ {10}(\/proc\/sys\/[^:]+):/gm)].map((m) => m[1]);
  assert.deepEqual(keys, [
    "/proc/sys/kernel/pid_max",
    "/proc/sys/kernel/printk",
    "/proc/sys/vm/swappiness",
  ]);
  // A measurement without subtypes is written as just its type.
  assert.match(yaml, /- type: SystemD\n$/);
});

Deno.test("encodeSnapshot() quotes strings that look like numbers and keeps ints unquoted", () => {
  const yaml = encodeSnapshot(snapshot());
  assert.ok(yaml.includes('cuda-version: "12.8"'));
  assert.ok(yaml.includes("gpu-count: 8\n"));
  assert.ok(yaml.includes("driver: 570.86.15\n"));
  assert.ok(
    yaml.includes('"/proc/sys/vm/swappiness": "60"') ||
      yaml.includes('/proc/sys/vm/swappiness: "60"'),
  );
});

Deno.test("two snapshots of unchanged content differ only in timestamp", () => {
  const a = encodeSnapshot(snapshot(new Date("2026-01-01T00:00:00Z")));
  const b = encodeSnapshot(
    createSnapshot([...MEASUREMENTS].reverse(), {
      timestamp: new Date("2026-01-02T00:00:00Z"),
      version: "0.1.0",
      nodeName: "gpu-node-1",
    }),
  );
  const diff = a.split("\n").filter((line, i) => line !== b.split("\n")[i]);
  assert.deepEqual(diff, ['  timestamp: "2026-01-01T00:00:00Z"']);
});

Deno.test("parseSnapshot() round-trips YAML and JSON with stable typing", () => {
  const original = snapshot();
  for (const format of ["yaml", "json"] as const) {
    const parsed = parseSnapshot(encodeSnapshot(original, format));
    assert.deepEqual(parsed, original, format);
    assert.equal(encodeSnapshot(parsed, format), encodeSnapshot(original, format));
  }
});

Deno.test("parseSnapshot() keeps uint64 readings exact as bigint", () => {
  const snap = createSnapshot([{
    type: "SystemD",
    subtypes: [{ subtype: "containerd.service", data: { MemoryMax: 18446744073709551615n } }],
  }], { timestamp: new Date(0), version: "dev", nodeName: "n" });
  for (const format of ["yaml", "json"] as const) {
    const text = encodeSnapshot(snap, format);
    assert.ok(text.includes("18446744073709551615"), format);
    const parsed = parseSnapshot(text);
    assert.equal(parsed.measurements[0]?.subtypes[0]?.data.MemoryMax, 18446744073709551615n);
  }
});

Deno.test("parseSnapshot() accepts the legacy apiVersion", () => {
  const text = encodeSnapshot(snapshot()).replace("aicr.run/v1", LEGACY_API_VERSION);
  assert.equal(parseSnapshot(text).apiVersion, LEGACY_API_VERSION);
});

const INVALID: { name: string; input: string; message: RegExp }[] = [
  {
    name: "a wrong apiVersion, naming the field and its line",
    input: "kind: Snapshot\napiVersion: v9\nmeasurements: []\n",
    message: /'f\.yaml': field 'apiVersion' \(line 2\) must be one of 'aicr\.run\/v1'/,
  },
  {
    name: "a wrong kind",
    input: "kind: Recipe\napiVersion: aicr.run/v1\n",
    message: /field 'kind' \(line 1\) must be 'Snapshot': current value is 'Recipe'/,
  },
  {
    name: "an unknown measurement type",
    input: "kind: Snapshot\napiVersion: aicr.run/v1\nmeasurements:\n  - type: Network\n",
    message:
      /field 'measurements\[0\]\.type' \(line 4\) must be one of K8s, GPU, OS, SystemD, NodeTopology/,
  },
  {
    name: "a non-scalar reading",
    input:
      "kind: Snapshot\napiVersion: aicr.run/v1\nmeasurements:\n  - type: OS\n    subtypes:\n      - subtype: grub\n        data:\n          ro: [1, 2]\n",
    message:
      /field 'measurements\[0\]\.subtypes\[0\]\.data\.ro' \(line 8\) must be a scalar reading/,
  },
  {
    name: "malformed YAML, with line and column",
    input: "kind: Snapshot\napiVersion: [\n",
    message: /Cannot parse snapshot 'f\.yaml' at line \d+, column \d+/,
  },
  {
    name: "malformed JSON",
    input: '{"kind": "Snapshot", "apiVersion": }',
    message: /Cannot parse snapshot 'f\.yaml'/,
  },
  {
    name: "a YAML alias bomb",
    input: [
      "a: &a [x, x, x, x, x, x, x, x, x, x]",
      "b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]",
      "c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]",
      "d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]",
      "e: [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]",
    ].join("\n"),
    message: /Cannot parse snapshot 'f\.yaml': .*alias/i,
  },
  {
    name: "duplicate keys",
    input: "kind: Snapshot\nkind: Snapshot\napiVersion: aicr.run/v1\n",
    message: /Cannot parse snapshot 'f\.yaml' at line 2/,
  },
];

for (const { name, input, message } of INVALID) {
  Deno.test(`parseSnapshot() rejects ${name}`, () => {
    assert.throws(() => parseSnapshot(input, { source: "f.yaml" }), (error: unknown) => {
      assert.ok(error instanceof UsageError, String(error));
      assert.equal(error.exitCode, 2);
      assert.match(error.message, message);
      return true;
    });
  });
}

Deno.test("parseSnapshot() rejects a document over the size cap without parsing it", () => {
  const big = "kind: Snapshot\n#" + "x".repeat(MAX_DOCUMENT_BYTES) + "\n";
  assert.throws(() => parseSnapshot(big, { source: "big.yaml" }), /over the \d+-byte cap/);
});

Deno.test("parseSnapshotStream() reads every document of a multi-node stream", () => {
  const a = encodeSnapshot(snapshot());
  const b = a.replace("source-node: gpu-node-1", "source-node: gpu-node-2");
  const docs = parseSnapshotStream(`${a}---\n${b}`);
  assert.deepEqual(docs.map((d) => d.metadata["source-node"]), ["gpu-node-1", "gpu-node-2"]);
});

Deno.test("assertFitsConfigMap() names the largest readings when a snapshot is too big", () => {
  const data: Record<string, string> = {};
  for (let i = 0; i < 2000; i++) data[`/proc/sys/fake/key${i}`] = "v".repeat(600);
  const big = createSnapshot([{ type: "OS", subtypes: [{ subtype: "sysctl", data }] }], {
    timestamp: new Date(0),
    version: "dev",
    nodeName: "n",
  });
  const encoded = encodeSnapshot(big);
  assert.ok(encoded.length > CONFIGMAP_SNAPSHOT_BUDGET);
  assert.throws(() => assertFitsConfigMap(big, encoded, "cm://ns/x"), (error: unknown) => {
    assert.ok(error instanceof UsageError);
    assert.match(error.message, /Cannot write snapshot to 'cm:\/\/ns\/x': it is \d+ bytes/);
    assert.ok(error.details.some((d) => d.includes("OS.sysctl")));
    return true;
  });
  assert.doesNotThrow(() =>
    assertFitsConfigMap(snapshot(), encodeSnapshot(snapshot()), "cm://ns/x")
  );
});

Deno.test("parseSnapshot() refuses a document nested thousands of levels deep, naming it", async (t) => {
  const head =
    "kind: Snapshot\napiVersion: aicr.run/v1\nmeasurements:\n- type: OS\n  subtypes:\n  - subtype: s\n    data:\n";
  let block = "";
  for (let i = 0; i < 5000; i++) block += " ".repeat(6 + i) + "k:\n";
  const cases = {
    "YAML flow": head + "      x: " + "[".repeat(50_000) + "]".repeat(50_000) + "\n",
    "YAML block": head + block,
    "JSON":
      `{"kind":"Snapshot","apiVersion":"aicr.run/v1","measurements":[{"type":"OS","subtypes":[{"subtype":"s","data":{"x":${
        "[".repeat(100_000)
      }${"]".repeat(100_000)}}}]}]}`,
  };
  for (const [name, text] of Object.entries(cases)) {
    await t.step(name, () => {
      for (const parse of [parseSnapshot, parseSnapshotStream]) {
        assert.throws(
          () => parse(text, { source: "deep.yaml" }),
          (e) =>
            e instanceof UsageError &&
            /^Cannot parse snapshot 'deep.yaml': it nests too deeply/.test(e.message),
        );
      }
    });
  }
});

Deno.test("encodeSnapshot() double-quotes strings holding a tab, so YAML 1.1 readers accept them", () => {
  const text = encodeSnapshot(snapshot());
  assert.match(text, /\/proc\/sys\/kernel\/printk: "4\\t4\\t1\\t7"$/m);
  assert.doesNotMatch(text, /\t/, "no raw tab anywhere");
  const back = parseSnapshot(text);
  const sysctl = back.measurements.find((m) => m.type === "OS")?.subtypes[0]?.data;
  assert.equal(sysctl?.["/proc/sys/kernel/printk"], "4\t4\t1\t7");
});

Deno.test("a reading keyed __proto__ survives parsing and is compared, under Node's __proto__ setter too", async () => {
  // Deno has no `Object.prototype.__proto__` setter, Node (the binary's backend) has: the
  // probe runs with the setter enabled, as the built binary does.
  const probe = new URL("./testdata/proto_probe.ts", import.meta.url);
  const run = await new Deno.Command(Deno.execPath(), {
    args: ["run", "--unstable-unsafe-proto", "-A", probe.pathname],
    cwd: new URL("..", import.meta.url).pathname,
    stdout: "piped",
    stderr: "piped",
  }).output();
  const stderr = new TextDecoder().decode(run.stderr);
  assert.equal(run.code, 0, stderr);
  const result = JSON.parse(new TextDecoder().decode(run.stdout));
  assert.equal(result.setterPresent, true, "the probe ran with Node's __proto__ setter");
  for (const format of ["yaml", "json"]) {
    assert.deepEqual(result[format].keys, ["__proto__", "a"], format);
    assert.deepEqual(result[format].changes, ["modified OS.sysctl.__proto__"], format);
  }
  assert.deepEqual(result.roundTrip, ["__proto__", "a"], "encode then parse keeps it");
});
