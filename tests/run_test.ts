import assert from "node:assert/strict";
import { dirname } from "node:path";
import { fileURLToPath } from "node:url";
import { discoverTests, listRepositoryFiles } from "./runner/discover.ts";
import { GATES, LANES, NOT_RUN, parseArgs } from "./run.ts";

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

Deno.test("tests/run.ts assigns lanes by folder: everything under tests/realnode/ runs on real kubelets, never in the unit lane", async () => {
  const laneOf = (path: string) => LANES.find((l) => l.match(path))?.name;
  const files = await listRepositoryFiles(ROOT);
  const realnode = files.filter((f) => f.startsWith("tests/realnode/") && f.endsWith("_test.ts"));
  assert.ok(realnode.includes("tests/realnode/realnode_test.ts"));
  for (const f of realnode) assert.equal(laneOf(f), "realnode", f);
  // A second real-kubelet file goes there too, by its folder alone.
  assert.equal(laneOf("tests/realnode/daemonset_test.ts"), "realnode");
  assert.equal(laneOf("tests/e2e/new_test.ts"), "e2e");
  assert.equal(laneOf("controller/cluster_test.ts"), "e2e");
  assert.equal(laneOf("controller/new_test.ts"), "unit");
  // `deno task test:unit` is the runner's unit lane, not a second list of folders.
  const config = JSON.parse(await Deno.readTextFile(`${ROOT}/deno.json`)) as {
    tasks: Record<string, string>;
  };
  assert.match(config.tasks["test:unit"]!, /deno run -A tests\/run\.ts --lane unit$/);
});

Deno.test("tests/run.ts builds the binary and the control plane only for the lanes that need them", () => {
  const lanesOf = (name: string) => GATES.find((g) => g.name.startsWith(name))?.lanes;
  assert.deepEqual(lanesOf("build the control plane"), ["e2e", "realnode"]);
  assert.deepEqual(lanesOf("build dist/aicr"), ["e2e", "realnode"]);
  assert.deepEqual(lanesOf("build the linux/arm64"), ["e2e", "realnode"]);
  assert.equal(lanesOf("type check"), undefined, "every run");
  assert.deepEqual(lanesOf("mutation check"), ["unit"]);
  assert.deepEqual(parseArgs(["--lane", "unit,e2e", "--lane=realnode"]), {
    onlyLanes: ["unit", "e2e", "realnode"],
  });
  assert.deepEqual(parseArgs([]), {});
  assert.deepEqual(parseArgs(["--lanes"]), {
    error: "unknown argument '--lanes' (the only one is --lane <name>)",
  });
  assert.deepEqual(parseArgs(["--lane"]), { error: "--lane needs a lane name" });
});

Deno.test("tests/run.ts refuses a filter under CI=true, before any gate runs", async () => {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", "tests/run.ts"],
    cwd: ROOT,
    // Only these: a runner running this test passes its own AICR_* on.
    env: { CI: "true", AICR_TEST_FILTER: "x", PATH: Deno.env.get("PATH") ?? "" },
    clearEnv: true,
    stdout: "piped",
    stderr: "piped",
  }).output();
  assert.equal(out.code, 2);
  assert.match(
    new TextDecoder().decode(out.stderr),
    /^error: AICR_TEST_FILTER="x" would leave tests out, and CI=true runs every test/m,
  );
  assert.equal(new TextDecoder().decode(out.stdout), "");
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

Deno.test(".ci/run clears every AICR_* variable of its caller, naming each", async () => {
  // The lines themselves, cut from .ci/run (from the loop to its `done`), run by bash.
  const script = await Deno.readTextFile(`${ROOT}/.ci/run`);
  const start = script.indexOf("for name in $(compgen -e | grep '^AICR_'");
  assert.ok(start >= 0, ".ci/run has the clearing loop");
  const end = script.indexOf("\ndone\n", start) + "\ndone\n".length;
  const out = await new Deno.Command("bash", {
    args: ["-c", `set -euo pipefail\n${script.slice(start, end)}env | grep -c '^AICR_' || true`],
    env: {
      AICR_TEST_FILTER: "x",
      AICR_SKIP_LANES: "e2e",
      AICR_CLUSTER_DIR: "/tmp/elsewhere",
      PATH: Deno.env.get("PATH") ?? "",
    },
    clearEnv: true,
    stdout: "piped",
  }).output();
  assert.equal(out.code, 0);
  assert.deepEqual(new TextDecoder().decode(out.stdout).trim().split("\n"), [
    "== CI clears AICR_CLUSTER_DIR",
    "== CI clears AICR_SKIP_LANES",
    "== CI clears AICR_TEST_FILTER",
    "0",
  ]);
});
