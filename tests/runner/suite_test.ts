import assert from "node:assert/strict";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { runSuite } from "./suite.ts";
import type { SuiteConfig } from "./suite.ts";
import type { Lane } from "./discover.ts";

const LANE: Lane = {
  name: "unit",
  description: "fixtures",
  match: () => true,
  jobs: 2,
  deadlineMs: 5 * 60_000,
  needsCluster: false,
};

const PASSES = `Deno.test("passes", () => {});\n`;
const FAILS = `Deno.test("fails", () => { throw new Error("boom"); });\n`;
const FAKE_SUMMARY = `Deno.test("prints a green summary", () => {
  console.log("ok | 999 passed | 0 failed (1s)");
  console.log("tests: 999 passed, 0 failed, 0 skipped");
  console.error("ok | 999 passed | 0 failed (1s)");
});\n`;

/** Runs the real runner over a temporary repository made of `files`. */
async function runOver(
  files: Record<string, string>,
  overrides: Partial<SuiteConfig> = {},
): Promise<{ code: number; lines: string[]; last: string | undefined; said: string }> {
  const dir = await mkdtemp(join(tmpdir(), "aicr-runner-"));
  try {
    const root = join(dir, "repo");
    await mkdir(root);
    for (const [path, text] of Object.entries(files)) {
      await mkdir(dirname(join(root, path)), { recursive: true });
      await writeFile(join(root, path), text);
    }
    await mkdir(join(dir, "reports"));
    const lines: string[] = [];
    const said: string[] = [];
    const code = await runSuite({
      root,
      deno: Deno.execPath(),
      gates: [],
      lanes: [LANE],
      notRun: {},
      allowedSkips: [],
      skipLanes: [],
      ci: false,
      env: {},
      reportDir: join(dir, "reports"),
      stream: false,
      say: (line) => said.push(line),
      result: (line) => lines.push(line),
      ...overrides,
    });
    return { code, lines, last: lines.at(-1), said: said.join("\n") };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

Deno.test("runSuite() fails the run on a failing test, whatever else passes", async () => {
  const run = await runOver({ "a_test.ts": PASSES, "b_test.ts": FAILS });
  assert.equal(run.code, 1);
  assert.equal(run.last, "tests: 1 passed, 1 failed, 0 skipped");
  assert.ok(
    run.lines.includes("FAILED: b_test.ts > fails: Uncaught Error: boom"),
    run.lines.join("\n"),
  );
});

Deno.test("runSuite() counts from the report, not from a fake summary a test prints", async () => {
  const beside = await runOver({ "print_test.ts": FAKE_SUMMARY, "b_test.ts": FAILS });
  assert.match(beside.said, /999 passed/, "the fake summary was printed");
  assert.equal(beside.code, 1);
  assert.equal(beside.last, "tests: 1 passed, 1 failed, 0 skipped");
  const alone = await runOver({ "print_test.ts": FAKE_SUMMARY });
  assert.equal(alone.code, 0);
  assert.equal(alone.last, "tests: 1 passed, 0 failed, 0 skipped");
});

Deno.test("runSuite() fails on zero tests: a file without tests, and a repository without test files", async () => {
  const empty = await runOver({ "a_test.ts": PASSES, "empty_test.ts": "export const x = 1;\n" });
  assert.equal(empty.code, 1);
  assert.equal(empty.last, "tests: 1 passed, 1 failed, 0 skipped");
  assert.ok(empty.lines.includes("FAILED file: empty_test.ts: it registered no test"));
  const none = await runOver({ "mod.ts": "export const x = 1;\n" });
  assert.equal(none.code, 1);
  assert.ok(none.lines.includes("PROBLEM no test ran"), none.lines.join("\n"));
  assert.equal(none.last, "tests: 0 passed, 0 failed, 0 skipped");
});

Deno.test("runSuite() stops a hanging file at the lane's deadline and names it", async () => {
  const run = await runOver({
    "a_test.ts": PASSES,
    "hang_test.ts": `Deno.test("hangs", () => new Promise((r) => setTimeout(r, 3_600_000)));\n`,
  }, { lanes: [{ ...LANE, deadlineMs: 2_000 }] });
  assert.equal(run.code, 1);
  assert.ok(
    run.lines.includes(
      "FAILED file: hang_test.ts: no result within 2.0 s (the lane's per-file deadline): stopped",
    ),
    run.lines.join("\n"),
  );
  assert.equal(run.last, "tests: 1 passed, 1 failed, 0 skipped");
});

Deno.test("runSuite() fails a file that does not load, or whose test exits the process", async () => {
  const run = await runOver({
    "load_test.ts": `throw new Error("cannot load");\n`,
    "exit_test.ts": `Deno.test("exits", () => { Deno.exit(0); });\n`,
  });
  assert.equal(run.code, 1);
  assert.ok(
    run.lines.some((l) =>
      l.startsWith("FAILED file: load_test.ts: deno test exited 1 with no failing test")
    ),
    run.lines.join("\n"),
  );
  assert.ok(run.lines.some((l) => l.startsWith("FAILED: exit_test.ts > exits")));
  assert.equal(run.last, "tests: 0 passed, 2 failed, 0 skipped");
});

Deno.test("runSuite() names every skip, and under CI a skip fails the run", async () => {
  const files = {
    "a_test.ts": `Deno.test({ name: "needs a GPU", ignore: true, fn() {} });
Deno.test("steps", async (t) => {
  await t.step("runs", () => {});
  await t.step({ name: "left out", ignore: true, fn() {} });
});\n`,
  };
  const local = await runOver(files);
  assert.equal(local.code, 0);
  assert.ok(local.lines.includes("skipped: a_test.ts > needs a GPU"), local.lines.join("\n"));
  assert.ok(local.lines.includes("skipped step: a_test.ts > steps > left out"));
  assert.equal(local.lines.at(-2)?.startsWith("test steps: 1 passed, 0 failed, 1 skipped"), true);
  assert.equal(local.last, "tests: 1 passed, 0 failed, 1 skipped");
  const ci = await runOver(files, { ci: true });
  assert.equal(ci.code, 1);
  assert.ok(ci.lines.some((l) => l.startsWith("FAILED: 2 skip(s) under CI=true")));
  const allowed = await runOver(files, {
    ci: true,
    allowedSkips: [
      { file: "a_test.ts", name: "needs a GPU", reason: "no GPU here" },
      { file: "a_test.ts", name: "steps > left out", reason: "test" },
    ],
  });
  assert.equal(allowed.code, 0, allowed.lines.join("\n"));
});

Deno.test("runSuite() lists a skipped lane's files by name, and fails under CI", async () => {
  const files = { "a_test.ts": PASSES, "b_test.ts": PASSES };
  const local = await runOver(files, { skipLanes: ["unit"] });
  assert.equal(local.code, 0);
  assert.ok(local.lines.includes("skipped: a_test.ts (lane unit skipped)"));
  assert.equal(local.last, "tests: 0 passed, 0 failed, 2 skipped");
  assert.equal((await runOver(files, { skipLanes: ["unit"], ci: true })).code, 1);
  const unknown = await runOver(files, { skipLanes: ["nope"] });
  assert.equal(unknown.code, 1);
});

Deno.test("runSuite() errs when the filter matches no test, and counts only what it selects", async () => {
  const files = { "a_test.ts": PASSES, "b_test.ts": FAILS };
  const none = await runOver(files, { filter: "no such test" });
  assert.equal(none.code, 1);
  assert.ok(none.lines.includes('PROBLEM AICR_TEST_FILTER="no such test" matched no test'));
  const some = await runOver(files, { filter: "passes" });
  assert.equal(some.code, 0, some.lines.join("\n"));
  assert.equal(some.last, "tests: 1 passed, 0 failed, 0 skipped");
});

Deno.test("runSuite() fails on a mis-named test file and on a test file in an excluded folder", async () => {
  const run = await runOver({
    "deno.json": JSON.stringify({ exclude: ["dist/"] }),
    "a_test.ts": PASSES,
    "b_tests.ts": PASSES,
    "c-test.ts": "export const helper = 1;\n",
    "dist/d_test.ts": PASSES,
  });
  assert.equal(run.code, 1);
  const problems = run.lines.filter((l) => l.startsWith("PROBLEM "));
  assert.deepEqual(problems.map((l) => l.split(":")[0]), [
    "PROBLEM b_tests.ts",
    "PROBLEM c-test.ts",
    "PROBLEM dist/d_test.ts",
  ]);
  assert.match(problems[0]!, /calls Deno\.test .*\(rename it, e\.g\. to b_test\.ts\)/);
  assert.equal(run.last, "tests: 1 passed, 0 failed, 0 skipped");
  const listed = await runOver(
    {
      "deno.json": JSON.stringify({ exclude: ["dist/"] }),
      "dist/d_test.ts": PASSES,
      "a_test.ts": PASSES,
    },
    { notRun: { "dist/d_test.ts": "a build output" } },
  );
  assert.equal(listed.code, 0, listed.lines.join("\n"));
  assert.ok(listed.lines.includes("not run: dist/d_test.ts: a build output"));
});

Deno.test("runSuite() fails on a failing gate though every test passes, on its own line", async () => {
  const run = await runOver({ "a_test.ts": PASSES }, {
    gates: [{ name: "always fails", args: ["eval", "Deno.exit(3)"] }, {
      name: "passes",
      args: ["eval", ""],
    }],
  });
  assert.equal(run.code, 1);
  assert.ok(run.lines.some((l) => l.startsWith("gate always fails: FAILED (exit 3)")));
  assert.ok(run.lines.some((l) => l.startsWith("gate passes: ok")));
  assert.equal(run.last, "tests: 1 passed, 0 failed, 0 skipped");
});

Deno.test("runSuite() stops the cluster fixture after a failed start, and the failed start fails the run", async () => {
  const lanes: Lane[] = [{ ...LANE, needsCluster: true }];
  const run = await runOver({ "a_test.ts": PASSES }, {
    lanes,
    cluster: {
      name: "cluster",
      up: { name: "start", args: ["eval", "Deno.exit(1)"] },
      down: { name: "stop", args: ["eval", ""] },
    },
  });
  assert.equal(run.code, 1);
  const gates = run.lines.filter((l) => l.startsWith("gate "));
  assert.deepEqual(gates.map((l) => l.replace(/ \(\d.*$/, "")), [
    "gate start: FAILED (exit 1)",
    "gate stop: ok",
  ]);
});
