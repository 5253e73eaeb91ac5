import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { sampleSnapshot } from "../tests/fakes/snapshot.ts";
import {
  encodeSnapshot,
  encodeYamlWithLibrary,
  parseSnapshot,
  plainSnapshotDocument,
} from "./codec.ts";
import { normalizeSnapshot } from "./model.ts";
import type { Reading, Snapshot } from "./model.ts";
import { writeSnapshotYaml } from "./yaml_writer.ts";
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

Deno.test("yaml writer: tabbed strings and plain lines are written directly, as the library writes them", () => {
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
  ];
  for (const value of readings) {
    const snapshot = sampleSnapshot({ nodeName: "n1" });
    (snapshot.measurements[0]!.subtypes[0]!.data as Record<string, Reading>).v = value;
    snapshot.metadata.version = value;
    assert.equal(encodeSnapshot(snapshot), library(snapshot), JSON.stringify(value));
  }
});
