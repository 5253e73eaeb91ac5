import assert from "node:assert/strict";
import { sampleSnapshot } from "../tests/fakes/snapshot.ts";
import { formatSnapshotTable } from "./table.ts";

Deno.test("formatSnapshotTable() gives one aligned row per reading under a metadata line", () => {
  const snapshot = sampleSnapshot({ nodeName: "gpu-1" });
  const text = formatSnapshotTable(snapshot);
  const lines = text.trimEnd().split("\n");
  assert.match(lines[0] ?? "", /^SNAPSHOT .*source-node=gpu-1/);
  assert.match(lines[2] ?? "", /^TYPE\s+SUBTYPE\s+KEY\s+VALUE$/);
  const readings = snapshot.measurements.flatMap((m) =>
    m.subtypes.flatMap((s) => Math.max(1, Object.keys(s.data).length))
  ).reduce((a, b) => a + b, 0);
  assert.equal(lines.length - 3, readings);
  const valueColumn = (lines[2] ?? "").indexOf("VALUE");
  for (const line of lines.slice(3)) {
    assert.ok(line.length >= valueColumn, line);
    assert.notEqual(line[valueColumn - 1], undefined);
  }
});
