import assert from "node:assert/strict";
import { parseFleetText, splitYamlStream } from "./stream.ts";
import { encodeSnapshot } from "./codec.ts";
import { makeNodeSnapshot } from "./testdata/generate.ts";

Deno.test("splitYamlStream() splits at column-0 document markers only", () => {
  const text = [
    "# fleet fetch",
    "---",
    "kind: Snapshot",
    "note: |",
    "  ---",
    "  not a marker",
    "--- # second",
    "kind: Snapshot",
    "---",
    "# only a comment",
    "--- {kind: Snapshot}",
    "",
  ].join("\n");
  assert.deepEqual(splitYamlStream(text), [
    "kind: Snapshot\nnote: |\n  ---\n  not a marker\n",
    "# second\nkind: Snapshot\n",
    "{kind: Snapshot}\n",
  ]);
  assert.deepEqual(splitYamlStream("%YAML 1.2\n---\na: 1\n"), ["%YAML 1.2\n---\na: 1\n"]);
});

Deno.test("parseFleetText() reads YAML documents, a JSON array and JSON lines alike", () => {
  const a = makeNodeSnapshot("gpu-node-1");
  const b = makeNodeSnapshot("gpu-node-2");
  const yaml = `---\n${encodeSnapshot(a)}---\n${encodeSnapshot(b)}`;
  const jsonLines = [a, b].map((s) => encodeSnapshot(s, "json").replace(/\n\s*/g, "")).join("\n");
  const jsonArray = `[${[a, b].map((s) => encodeSnapshot(s, "json")).join(",")}]`;
  for (const text of [yaml, jsonLines, jsonArray]) {
    const nodes = parseFleetText(text, "fleet").map((s) => s.metadata?.["source-node"]);
    assert.deepEqual(nodes, ["gpu-node-1", "gpu-node-2"]);
  }
  assert.throws(() => parseFleetText("---\nkind: Snapshot\n---\n: [\n", "fleet"), /fleet/);
});
