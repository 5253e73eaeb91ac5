import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { sampleSnapshot } from "../tests/fakes/snapshot.ts";
import {
  encodeSnapshot,
  encodeYamlWithLibrary,
  parseSnapshot,
  plainSnapshotDocument,
} from "./codec.ts";
import { isNormalized, normalizeSnapshot } from "./model.ts";
import type { Reading, Snapshot } from "./model.ts";
import { writeSnapshotYaml, YAML11_TAG_TEST } from "./yaml_writer.ts";
import { Document } from "yaml";
import { makeLargeSnapshot } from "./testdata/generate.ts";
import { makeMixedFleet } from "./testdata/mixed_fleet.ts";
import { randomSnapshot, READINGS, tricky } from "./testdata/yaml_cases.ts";

/** What the library writes for the same snapshot. */
function library(snapshot: Snapshot): string {
  return encodeYamlWithLibrary(plainSnapshotDocument(snapshot));
}

Deno.test("yaml writer: every snapshot shape and scalar is written as the yaml library writes it", () => {
  const fixture = parseSnapshot(
    readFileSync(new URL("./testdata/h100-gpu-node-1.yaml", import.meta.url), "utf8"),
  );
  const cases: [string, Snapshot][] = [
    ["sample", sampleSnapshot({ nodeName: "n1" })],
    ["fixture", fixture],
    ["large", makeLargeSnapshot("gpu-node-1", 256 * 1024)],
    ...makeMixedFleet({ "p5-h100": 2, "p6-gb200": 2, "system-m7i": 2 }).map((
      s,
    ): [string, Snapshot] => [s.metadata["source-node"], s]),
  ];
  // Each one-value document too, so a difference names its value.
  for (const [i, value] of READINGS.entries()) {
    const one = tricky();
    (one.measurements[0] as { subtypes: { data: Record<string, Reading> }[] }).subtypes[0]!.data = {
      v: value,
    };
    assert.equal(
      encodeSnapshot(one),
      library(one),
      `reading ${i}: ${JSON.stringify(String(value))}`,
    );
  }
  for (const [name, snapshot] of [...cases, ["tricky single-line", tricky({ singleLine: true })]]) {
    assert.ok(writeSnapshotYaml(normalizeSnapshot(snapshot as Snapshot)), `${name}: the fast path`);
  }
  cases.push(["tricky", tricky()], ["tricky single-line", tricky({ singleLine: true })]);
  for (const [name, snapshot] of cases) {
    assert.equal(encodeSnapshot(snapshot), library(snapshot), name);
    // And it reads back to the same snapshot.
    assert.deepEqual(parseSnapshot(encodeSnapshot(snapshot)), parseSnapshot(library(snapshot)));
  }
});

Deno.test("yaml writer: a multi-line string falls back to the library's block scalar", () => {
  const snapshot = sampleSnapshot({ nodeName: "n1" });
  (snapshot.measurements[0]!.subtypes[0]!.data as Record<string, Reading>).motd =
    "line 1\nline 2\n";
  const text = encodeSnapshot(snapshot);
  assert.equal(text, library(snapshot));
  assert.match(text, /motd: \|/);
});

Deno.test("yaml writer: a multi-line reading or a long key is written in place, the rest directly", () => {
  // Only the pair that needs the library goes through it, nested as deep as it sits.
  const snapshot = normalizeSnapshot(tricky());
  const fast = writeSnapshotYaml(snapshot);
  assert.ok(fast, "no whole-document fallback for multi-line readings");
  assert.equal(fast, library(snapshot));
});

Deno.test("yaml writer: 300 random snapshots of tricky keys and readings, as the library writes them", () => {
  for (let seed = 1; seed <= 300; seed++) {
    const snapshot = randomSnapshot(seed);
    assert.equal(encodeSnapshot(snapshot), library(snapshot), `seed ${seed}`);
  }
});

Deno.test("yaml writer: tabbed strings, plain lines and paths are written directly, as the library writes them", () => {
  const readings = [
    "\tlead tab",
    "trail tab\t",
    'tab\t"quoted"\tand\\back',
    "tab\t# x: y",
    "file\npipe\nsocket",
    "a b\nc d\n- e\n: f",
    "a\n---\n...\n%x",
    "#x\n|\n>",
    "yes\nno",
    // Beyond plain lines: left to the library.
    "a\n\nb",
    "a\n b",
    "a \nb",
    "a\tb\nc",
    // Paths and names starting with `/` or `_`, as values and keys.
    "/",
    "_",
    "/-",
    "_.",
    "/proc/sys/kernel/core_pattern",
    "_x.y-z/0",
    "/a:b",
    "/a b",
    "_ #x",
  ];
  for (const value of readings) {
    const snapshot = sampleSnapshot({ nodeName: "n1" });
    (snapshot.measurements[0]!.subtypes[0]!.data as Record<string, Reading>).v = value;
    (snapshot.measurements[0]!.subtypes[0]!.data as Record<string, Reading>)[value] = 1;
    snapshot.metadata.version = value;
    assert.equal(encodeSnapshot(snapshot), library(snapshot), JSON.stringify(value));
  }
});

Deno.test("encodeSnapshot() writes an already normalised snapshot as it is, anything else normalised first", () => {
  const snapshots = [
    sampleSnapshot({ nodeName: "n1" }),
    tricky(),
    ...Array.from({ length: 40 }, (_, i) => randomSnapshot(i + 1)),
  ];
  // Array-index keys (`tricky`'s `1`, `10`, `2`) come first in any record, in numeric order.
  assert.ok(isNormalized(normalizeSnapshot(snapshots[0]!)));
  assert.ok(isNormalized(normalizeSnapshot(snapshots[1]!)));
  const indexed = normalizeSnapshot(sampleSnapshot({ nodeName: "n1" }));
  indexed.measurements[0]!.subtypes[0]!.data = { "10": 1, "9": 2, a: 3, b: 4 };
  assert.ok(isNormalized(indexed));
  assert.equal(encodeSnapshot(indexed), library(indexed));
  for (const snapshot of snapshots) {
    const normalized = normalizeSnapshot(snapshot);
    for (const format of ["yaml", "json"] as const) {
      assert.equal(encodeSnapshot(normalized, format), encodeSnapshot(snapshot, format));
    }
  }
  // What normalising changes is never taken as normalised.
  const base = normalizeSnapshot(sampleSnapshot({ nodeName: "n1" }));
  const measurements = base.measurements;
  const first = measurements[0]!;
  const unsorted = { ...first.subtypes[0]!, data: { b: 1, a: 2 } };
  const changed: Snapshot[] = [
    { ...base, kind: "Other" } as unknown as Snapshot,
    { ...base, measurements: [...measurements].reverse() },
    { ...base, metadata: { version: "1", "source-node": "n1", timestamp: "t" } },
    { ...base, measurements: [{ ...first, subtypes: [unsorted] }] },
    { ...base, measurements: [{ ...first, subtypes: [{ ...unsorted, data: {}, context: {} }] }] },
    {
      ...base,
      measurements: [{ ...first, subtypes: [{ ...unsorted, data: { "9": 1, b: 2, a: 3 } }] }],
    },
  ];
  for (const [i, snapshot] of changed.entries()) {
    assert.equal(isNormalized(snapshot), false, `change ${i}`);
    assert.equal(encodeSnapshot(snapshot), library(snapshot), `change ${i}`);
  }
});

Deno.test("yaml writer: its YAML 1.1 tag test is the library's tests, as they are", () => {
  const schema = new Document(null, { version: "1.1" }).schema;
  const tags = [...schema.tags, ...(schema.compat ?? [])] as {
    default?: boolean | string;
    tag?: string;
    test?: RegExp;
  }[];
  const tests = tags
    .filter((t) => t.default && t.tag !== "tag:yaml.org,2002:str" && t.test)
    .map((t) => t.test as RegExp);
  assert.ok(tests.length > 10 && tests.every((t) => t.flags === ""));
  assert.equal(YAML11_TAG_TEST.flags, "");
  assert.equal(YAML11_TAG_TEST.source, tests.map((t) => `(?:${t.source})`).join("|"));
});
