import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { parseDocument } from "yaml";
import { sampleSnapshot } from "../tests/fakes/snapshot.ts";
import { encodeJson, encodeSnapshot, parseSnapshot } from "./codec.ts";
import type { Snapshot } from "./model.ts";
import { readSnapshotYaml } from "./yaml_reader.ts";
import { makeLargeSnapshot } from "./testdata/generate.ts";
import { makeMixedFleet } from "./testdata/mixed_fleet.ts";
import { randomSnapshot, TRICKY, tricky } from "./testdata/yaml_cases.ts";

/** What the library reads from the same text (as `parseSnapshot` asks it). */
function library(text: string): unknown {
  return parseDocument(text, { intAsBigInt: true, uniqueKeys: false }).toJS();
}

function snapshots(): [string, Snapshot][] {
  const fixture = parseSnapshot(
    readFileSync(new URL("./testdata/h100-gpu-node-1.yaml", import.meta.url), "utf8"),
  );
  return [
    ["sample", sampleSnapshot({ nodeName: "n1" })],
    ["fixture", fixture],
    ["large", makeLargeSnapshot("gpu-node-1", 256 * 1024)],
    ["tricky single-line", tricky({ singleLine: true })],
    ...makeMixedFleet({ "p5-h100": 2, "p6-gb200": 2, "system-m7i": 2 }).map((
      s,
    ): [string, Snapshot] => [s.metadata["source-node"], s]),
  ];
}

Deno.test("yaml reader: the writer's layout is read without the library's tree, as the library reads it", () => {
  for (const [name, snapshot] of snapshots()) {
    const text = encodeSnapshot(snapshot);
    const fast = readSnapshotYaml(text);
    assert.ok(fast !== undefined, `${name}: the fast path`);
    assert.deepEqual(fast, library(text), name);
  }
});

Deno.test("yaml reader: 300 random snapshots of tricky keys and readings read as the library reads them (or left to it)", () => {
  let fast = 0;
  for (let seed = 1; seed <= 300; seed++) {
    const text = encodeSnapshot(randomSnapshot(seed));
    const read = readSnapshotYaml(text);
    if (read === undefined) continue;
    fast++;
    assert.deepEqual(read, library(text), `seed ${seed}`);
  }
  // Most of them carry a multi-line reading (a block scalar) somewhere, which the library reads.
  assert.ok(
    fast >= 30,
    `random snapshots without a block scalar take the fast path (${fast} of 300)`,
  );
});

Deno.test("yaml reader: anything beyond the writer's layout is left to the library", () => {
  const text = encodeSnapshot(sampleSnapshot({ nodeName: "n1" }));
  const departures: [string, string][] = [
    ["a comment line", text.replace("measurements:\n", "measurements:\n# note\n")],
    ["a blank line", text.replace("measurements:\n", "measurements:\n\n")],
    ["CRLF", text.replaceAll("\n", "\r\n")],
    ["a document marker", "---\n" + text],
    ["a repeated key", text.replace("  driver: ", "  gpu-count: 1\n          driver: ")],
    ["a flow map reading", text.replace(/driver: .*\n/, "driver: {a: 1}\n")],
    ["an alias", text.replace(/driver: (.*)\n/, "driver: &d $1\n          alias: *d\n")],
    ["a continued plain scalar", text.replace(/driver: (.*)\n/, "driver: $1\n            more\n")],
    ["a block scalar", text.replace(/driver: (.*)\n/, "driver: |-\n            $1\n")],
    [
      "another key order",
      text.replace(/^kind: (.*)\napiVersion: (.*)\n/, "apiVersion: $2\nkind: $1\n"),
    ],
    ["a nested map", text.replace(/driver: (.*)\n/, "driver:\n            x: 1\n")],
    ["an unknown tag", text.replace(/driver: (.*)\n/, "driver: !thing $1\n")],
  ];
  for (const [what, changed] of departures) {
    assert.notEqual(changed, text, `${what}: the case changes the text`);
    const read = readSnapshotYaml(changed);
    if (read !== undefined) assert.deepEqual(read, library(changed), what);
    else assert.equal(read, undefined, what);
  }
  for (
    const what of ["a comment line", "CRLF", "a repeated key", "a flow map reading", "an alias"]
  ) {
    const changed = departures.find(([w]) => w === what)?.[1] as string;
    assert.equal(readSnapshotYaml(changed), undefined, `${what}: left to the library`);
  }
  // The library still names a repeated key with its line.
  assert.throws(
    () => parseSnapshot(departures[4]?.[1] as string, { source: "n1.yaml" }),
    /Cannot parse snapshot 'n1\.yaml' at line \d+: map keys must be unique: 'gpu-count' repeats/,
  );
  // And an invalid document read fast is read again by the library, for the located error.
  assert.throws(
    () => parseSnapshot(text.replace(/^kind: .*\n/, "kind: Other\n"), { source: "n1.yaml" }),
    /'n1\.yaml': field 'kind' \(line 1\) must be 'Snapshot'/,
  );
});

Deno.test("yaml reader: scalars written by hand read as the library reads them (or left to it)", () => {
  const text = encodeSnapshot(sampleSnapshot({ nodeName: "n1" }));
  const scalars = [
    ...TRICKY.filter((t) => !t.includes("\n")),
    ...["12", "-5", "+7", "-0", "007", "1.5", "-1.5e3", "1E+2", ".5", "5.", "+.5", "1e", "1.2.3"],
    ...["9223372036854775807", "123456789012345678901234567890", "0o17", "0x1f", "0b1", "1_0"],
    ...["a:b", "a: b", "x #y", "x#y", "a,b", "(x)", "/proc/sys", "-x", "+x", "-", "--x", "a'b"],
    ...['a"b', "trail ", "colon:", ".inf", ".NaN", "~", "NULL", "TRUE", "True", "yes", "on"],
    ...['"plain"', '"tab\\there"', '"q\\"x"', '"back\\\\"', '"nl\\n"', '"u\\u00e9"', '"x\\ty" #c'],
    ...['"unterminated', '"a"b"', "'single'", "'it''s'", '"é"', "é", "a\tb", "[x]", "{x}"],
  ];
  let fast = 0;
  for (const scalar of scalars) {
    // A flow collection as a key is read (with a warning) as its text: not a case here.
    const asKey = /^[[{?]/.test(scalar) ? [] : [`          ${scalar}: 1\n`];
    for (const line of [`          driver: ${scalar}\n`, ...asKey]) {
      const changed = text.replace(/ {10}driver: .*\n/, line);
      const read = readSnapshotYaml(changed);
      let expected: unknown;
      try {
        expected = library(changed);
      } catch {
        expected = undefined;
      }
      if (read === undefined) continue;
      fast++;
      assert.deepEqual(read, expected, JSON.stringify(line));
    }
  }
  assert.ok(fast > 60, `most hand-written scalars take the fast path (${fast})`);
});

Deno.test("yaml reader: a document read fast is the snapshot the library's reading validates to", () => {
  const withComment = (t: string) => t.replace("measurements:\n", "measurements:\n# note\n");
  const cases: [string, string][] = [
    ...snapshots().map(([name, s]): [string, string] => [name, encodeSnapshot(s)]),
    ...Array.from({ length: 100 }, (_, i): [string, string] => [
      `seed ${i + 1}`,
      encodeSnapshot(randomSnapshot(i + 1)),
    ]),
  ];
  const base = encodeSnapshot(sampleSnapshot({ nodeName: "n1" }));
  cases.push(
    ["keys out of order", base.replace(/( {10}driver: .*\n)( {10}[^\n]*\n)/, "$2$1")],
    ["integer keys", base.replace(/ {10}driver: .*\n/, "          10: a\n          9: b\n")],
    ["a number as context", base.replace(/( {10})status: ok\n/, "$1status: 200\n")],
    ["an empty context", base.replace(/( {8})context:\n( {10}.*\n)+/, "$1context: {}\n")],
    ["no metadata version", base.replace(/ {2}version: .*\n/, "")],
    [
      "a big integer",
      base.replace(/ {10}driver: .*\n/, "          driver: 123456789012345678901\n"),
    ],
    ["a safe integer", base.replace(/ {10}driver: .*\n/, "          driver: 570\n")],
    [
      "types out of order",
      base.replace(/^( {2}- type: )K8s/m, "$1OS").replace(/( {2}- type: )OS/m, "$1K8s"),
    ],
  );
  for (const [name, text] of cases) {
    let expected: unknown;
    try {
      expected = parseSnapshot(withComment(text));
    } catch (error) {
      expected = error instanceof Error ? error.message.replace(/ \(line \d+\)/, "") : error;
    }
    let actual: unknown;
    try {
      actual = parseSnapshot(text);
    } catch (error) {
      actual = error instanceof Error ? error.message.replace(/ \(line \d+\)/, "") : error;
    }
    assert.deepEqual(actual, expected, name);
    // Same enumeration order too (deepEqual ignores key order).
    assert.equal(encodeJson(actual), encodeJson(expected), `${name}: key order`);
  }
});

Deno.test("yaml reader: each file compared with the previous one's lines reads as the library, whatever changed between them", () => {
  const base = encodeSnapshot(makeLargeSnapshot("gpu-node-1", 64 * 1024));
  const lines = base.split("\n");
  const at = lines.findIndex((l) => l.startsWith("          ")) + 40;
  const edit = (f: (ls: string[]) => void) => {
    const copy = [...lines];
    f(copy);
    return copy.join("\n");
  };
  const line = (i: number) => lines[i] as string;
  const sequence: [string, string][] = [
    ["the base", base],
    ["the same again", base],
    ["a value changed", edit((ls) => ls[at] = line(at).replace(/: .*/, ": changed"))],
    ["a line added", edit((ls) => ls.splice(at, 0, "          added-key: 1"))],
    ["a line removed", edit((ls) => ls.splice(at, 1))],
    ["many lines removed", edit((ls) => ls.splice(at, 30))],
    ["two lines swapped", edit((ls) => ls.splice(at, 2, line(at + 1), line(at)))],
    ["a line repeated", edit((ls) => ls.splice(at, 0, line(at)))],
    ["a key repeated with another value", edit((ls) => ls.splice(at + 5, 0, line(at) + "x"))],
    ["the base once more", base],
    ["no final newline", base.replace(/\n$/, "")],
    ["the base after it", base],
    ["a line added at a map's end", edit((ls) => ls.splice(ls.length - 1, 0, "          zz: 1"))],
    ["the last line removed", edit((ls) => ls.splice(ls.length - 2, 1))],
    [
      "a value changed in every map",
      lines.map((l) => l.replace(/^( {10}[^ :]+): .*$/, "$1: x")).join("\n"),
    ],
    ["the base at last", base],
  ];
  let fast = 0;
  for (const [what, text] of sequence) {
    const read = readSnapshotYaml(text);
    if (read === undefined) {
      assert.ok(what.includes("repeated"), `${what}: read fast`);
      continue;
    }
    fast++;
    assert.deepEqual(read, library(text), what);
  }
  assert.equal(fast, sequence.length - 2);
});

Deno.test("yaml reader: files whose maps are named differently each time read as the library", () => {
  const base = encodeSnapshot(sampleSnapshot({ nodeName: "n1" }));
  for (let i = 0; i < 50; i++) {
    const text = base.replace(/^( {6}- subtype: )(.*)$/gm, `$1$2-${i}`);
    assert.notEqual(text, base);
    assert.deepEqual(readSnapshotYaml(text), library(text), `file ${i}`);
  }
});
