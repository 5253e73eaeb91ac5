/**
 * Issue #28 item 4, through the built binary: one node cannot stop the fleet report. A node
 * whose snapshot differs from its cohort in 150,000 readings (under the 16 MiB cap; the old
 * code spread such lists into `push(...)` and `Math.min(...)` and exited 8 with "Maximum
 * call stack size exceeded") is reported in every format; a corrupt, an invalid and an
 * oversized file beside good ones are unreadable nodes of the report (exit 9, documented)
 * while the rest is compared, in a directory and in a stream. No cluster is touched; the file
 * runs with the suite.
 */
import assert from "node:assert/strict";
import { mkdtemp, readFile, rm, truncate, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { encodeSnapshot, MAX_DOCUMENT_BYTES } from "../../snapshot/mod.ts";
import { makeNodeSnapshot } from "../../snapshot/testdata/generate.ts";
import { aicr } from "../e2e/_aicr.ts";
import { record } from "./_report.ts";
import { ENABLED } from "./_env.ts";

/** A node's snapshot with `readings` sysctl readings, the first `changed` of them set apart. */
function nodeText(node: string, readings: number, changed: number): string {
  const snapshot = makeNodeSnapshot(node);
  const sysctl = snapshot.measurements.find((m) => m.type === "OS")?.subtypes
    .find((s) => s.subtype === "sysctl");
  if (!sysctl) throw new Error("fixture lacks OS.sysctl");
  for (let i = 0; i < readings; i++) sysctl.data[`/p/${i}`] = i < changed ? `x${i % 10}` : "1";
  return encodeSnapshot(snapshot, "yaml");
}

Deno.test({
  name: "reliability: one node cannot stop the fleet report",
  ignore: !ENABLED,
  async fn(t) {
    const dir = await mkdtemp(join(tmpdir(), "aicr-fleet-edges-"));
    let tried = 0;
    let handled = 0;
    try {
      await t.step(
        "3 nodes x 400,000 readings, one differing in 150,000: every format",
        async () => {
          tried++;
          const fleet = join(dir, "huge");
          await Deno.mkdir(fleet);
          for (const [node, changed] of [["gpu-a", 0], ["gpu-b", 0], ["gpu-c", 150_000]] as const) {
            const text = nodeText(node, 400_000, changed);
            assert.ok(text.length < MAX_DOCUMENT_BYTES, `${node}: ${text.length} bytes`);
            await writeFile(join(fleet, `${node}.yaml`), text);
          }
          for (const format of ["json", "html"]) {
            const out = join(dir, `report.${format}`);
            const run = await aicr(["diff", "--fleet", fleet, "-t", format, "-o", out], {
              deadlineMs: 600_000,
            });
            assert.equal(run.code, 0, `${format}: ${run.stderr}`);
            assert.doesNotMatch(run.stderr, /Maximum call stack/);
            const text = await readFile(out, "utf8");
            if (format === "json") {
              const doc = JSON.parse(text);
              assert.deepEqual(doc.outliers.map((o: { node: string }) => o.node), ["gpu-c"]);
              assert.equal(doc.outliers[0].differences.length, 150_000);
              assert.equal(doc.summary.unreadable, 0);
            } else assert.match(text, /gpu-c/);
            await rm(out);
          }
          await rm(fleet, { recursive: true });
          handled++;
        },
      );

      await t.step(
        "corrupt, invalid and oversized files: unreadable nodes, exit 9, the rest compared",
        async () => {
          tried++;
          const fleet = join(dir, "mixed");
          await Deno.mkdir(fleet);
          for (const node of ["gpu-1", "gpu-2", "gpu-3"]) {
            await writeFile(
              join(fleet, `${node}.yaml`),
              nodeText(node, 10, node === "gpu-3" ? 1 : 0),
            );
          }
          await writeFile(join(fleet, "gpu-4.yaml"), "kind: Snapshot\nmeasurements: [\n");
          await writeFile(join(fleet, "gpu-5.yaml"), "kind: Nope\napiVersion: aicr.run/v1\n");
          await writeFile(join(fleet, "gpu-6.yaml"), "");
          await truncate(join(fleet, "gpu-6.yaml"), MAX_DOCUMENT_BYTES + 1);
          const run = await aicr(["diff", "--fleet", fleet, "-t", "json", "--fail-on-drift"]);
          assert.equal(run.code, 9, run.stderr);
          assert.match(run.stderr, /^error: Cannot compare every snapshot of the fleet: 3 of 6/m);
          for (const node of ["gpu-4", "gpu-5", "gpu-6"]) {
            assert.match(run.stderr, new RegExp(`${node}\\.yaml: `));
          }
          const doc = JSON.parse(run.stdout);
          assert.equal(doc.summary.nodes, 3);
          assert.equal(doc.summary.unreadable, 3);
          assert.deepEqual(doc.unreadable.map((u: { node: string }) => u.node), [
            "gpu-4",
            "gpu-5",
            "gpu-6",
          ]);
          assert.match(doc.unreadable[2].reason, /over the \d+-byte cap/);
          assert.deepEqual(doc.outliers.map((o: { node: string }) => o.node), ["gpu-3"]);

          // The same fleet as one stream: the bad document is skipped, the others compared.
          const stream = join(dir, "stream.yaml");
          await writeFile(
            stream,
            [nodeText("s-1", 10, 0), "kind: Nope\n", nodeText("s-2", 10, 0)].join("---\n"),
          );
          const streamed = await aicr(["diff", "--fleet", stream, "-t", "json"]);
          assert.equal(streamed.code, 9, streamed.stderr);
          const sdoc = JSON.parse(streamed.stdout);
          assert.equal(sdoc.summary.nodes, 2);
          assert.deepEqual(sdoc.unreadable.map((u: { node: string }) => u.node), [`${stream}#2`]);
          await rm(fleet, { recursive: true });
          handled++;
        },
      );
    } finally {
      await rm(dir, { recursive: true, force: true });
      record("bad input: the fleet report", { badInputs: tried, badInputsRefused: handled });
    }
  },
});
