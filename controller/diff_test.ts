import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { exitCodeOf, InterruptedError } from "../errors.ts";
import { encodeSnapshot } from "../snapshot/mod.ts";
import { makeNodeSnapshot } from "../snapshot/testdata/generate.ts";
import { runDiff } from "./diff.ts";
import { createFsSourceLoader } from "./sources.ts";

Deno.test("runDiff() --fleet: a signal (delivered as a timer, as a process's signal is) stops a long read between files, exit 130, nothing written", async () => {
  const dir = mkdtempSync(join(tmpdir(), "aicr-fleet-sig-"));
  try {
    const nodes = Array.from({ length: 400 }, (_, i) => `gpu-node-${i + 1}`);
    const text = encodeSnapshot(makeNodeSnapshot("gpu-node-1", { clusterNodes: nodes }));
    for (const node of nodes) writeFileSync(join(dir, `${node}.yaml`), text);
    const interrupt = new AbortController();
    // Each file's read is slowed (as a large fleet's is) without giving the event loop a turn.
    const real = createFsSourceLoader();
    let reads = 0;
    const loader = {
      ...real,
      readFile: async (path: string, maxBytes: number) => {
        reads++;
        const until = Date.now() + 2;
        while (Date.now() < until) { /* busy, as parsing a large file is */ }
        return await real.readFile(path, maxBytes);
      },
    };
    setTimeout(() => interrupt.abort(new Error("received SIGTERM")), 100);
    let out = "";
    const error = await runDiff({
      loader,
      stdout: { write: (t) => void (out += t) },
      cwd: dir,
      now: () => new Date("2026-12-05T00:00:00Z"),
      signal: interrupt.signal,
    }, {
      fleet: [dir],
      failOnDrift: false,
      format: "json",
      ignore: [],
      allReadings: false,
      groupBy: [],
      color: false,
    }).catch((e) => e);
    assert.ok(error instanceof InterruptedError, String(error));
    assert.equal(exitCodeOf(error), 130);
    assert.equal(error.message, "Cannot read the fleet: interrupted (Error: received SIGTERM)");
    assert.ok(reads < nodes.length, `the read stopped early: ${reads} of ${nodes.length} files`);
    assert.equal(out, "", "no report was written");
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

Deno.test("runDiff() --redact: a pair's drift and a fleet's outlier are reported without a node name", async () => {
  const { createRedactor } = await import("../snapshot/mod.ts");
  const redactor = createRedactor("sixteen bytes or more of key");
  const dir = mkdtempSync(join(tmpdir(), "aicr-diff-redact-"));
  try {
    const nodes = ["gpu-node-a1", "gpu-node-a2", "gpu-node-a3"];
    for (const node of nodes) {
      const snapshot = makeNodeSnapshot(node, { clusterNodes: nodes });
      if (node === "gpu-node-a3") {
        const smi = snapshot.measurements.find((m) => m.type === "GPU")?.subtypes[0];
        if (smi) smi.data.driver = "999.1.2";
      }
      writeFileSync(join(dir, `${node}.yaml`), encodeSnapshot(snapshot));
    }
    const run = async (
      options: { pair?: { baseline: string; target: string }; fleet: string[] },
    ) => {
      let out = "";
      await runDiff({
        loader: createFsSourceLoader(),
        stdout: { write: (t) => void (out += t) },
        cwd: dir,
        now: () => new Date("2026-12-05T00:00:00Z"),
      }, {
        ...options,
        failOnDrift: false,
        format: "json",
        ignore: [],
        allReadings: false,
        groupBy: [],
        color: false,
        redactor,
      });
      return out;
    };
    const pair = await run({
      pair: { baseline: "gpu-node-a1.yaml", target: "gpu-node-a3.yaml" },
      fleet: [],
    });
    assert.match(pair, /999\.1\.2/, "the drift is still found");
    const fleet = await run({ fleet: [dir] });
    assert.match(fleet, new RegExp(redactor.token("gpu-node-a3")), "the outlier, by its token");
    // The sources too (`gpu-node-a1.yaml`): a file named by its node says the node's name.
    assert.match(pair, new RegExp(`${redactor.token("gpu-node-a1")}\\.yaml`));
    // A corrupt member is an unreadable node named by its file: by token, in the report and
    // in the error (exit 9).
    writeFileSync(join(dir, "gpu-node-a4.yaml"), "{ not: [a snapshot");
    const broken = await run({ fleet: [dir] }).then(() => undefined, (e: Error) => e);
    assert.ok(broken, "an unreadable member is an error after the report");
    assert.equal(exitCodeOf(broken), 9);
    const said = [broken.message, ...((broken as { details?: string[] }).details ?? [])].join("\n");
    assert.match(said, new RegExp(redactor.token("gpu-node-a4")));
    for (const node of [...nodes, "gpu-node-a4"]) {
      assert.ok(!pair.includes(node), `${node} survived in the pair report`);
      assert.ok(!fleet.includes(node), `${node} survived in the fleet report`);
      assert.ok(!said.includes(node), `${node} survived in the error`);
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
