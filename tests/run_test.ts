import assert from "node:assert/strict";
import { dirname } from "node:path";
import { fileURLToPath } from "node:url";
import { discoverTests, listRepositoryFiles } from "./runner/discover.ts";
import { LANES, NOT_RUN } from "./run.ts";

const ROOT = dirname(dirname(fileURLToPath(import.meta.url)));

Deno.test("tests/run.ts: every test file of the repository is in one lane or listed as not run, and none looks mis-named", async () => {
  const files = await listRepositoryFiles(ROOT);
  const found = discoverTests(ROOT, files, { lanes: LANES, notRun: NOT_RUN });
  assert.deepEqual(found.problems, []);
  const placed = [...found.lanes.values()].flat().concat(found.notRun.map((n) => n.path));
  const tests = files.filter((f) => /(^|[_.])test\.(ts|tsx|mts|js|mjs|jsx)$/.test(f));
  assert.deepEqual(placed.sort(), tests.sort());
  assert.ok(found.lanes.get("unit")!.includes("tests/run_test.ts"));
  assert.ok(found.lanes.get("e2e")!.includes("tests/reliability/zz_summary_test.ts"));
});

Deno.test("tests/run.ts refuses to start with UPDATE_GOLDEN set, before any gate runs", async () => {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", "tests/run.ts"],
    cwd: ROOT,
    env: { UPDATE_GOLDEN: "1" },
    stdout: "piped",
    stderr: "piped",
  }).output();
  assert.equal(out.code, 2);
  assert.match(new TextDecoder().decode(out.stderr), /UPDATE_GOLDEN is set/);
  assert.equal(new TextDecoder().decode(out.stdout), "");
});
