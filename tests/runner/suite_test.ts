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

Deno.test("runSuite() lists a test gated on the machine as skipped with its reason, never loses it", async () => {
  // The real tests/_gated.ts, as tests/realnode uses it: a gated test is registered either way.
  const gatedUrl = new URL("../_gated.ts", import.meta.url).href;
  const files = {
    "gated_test.ts": `import { gated } from ${JSON.stringify(gatedUrl)};
Deno.test("runs", () => {});
Deno.test(gated(Deno.env.get("GATE_OPEN") ? undefined : "no containerd (install containerd)", {
  name: "needs containerd",
  fn() {},
}));\n`,
  };
  const local = await runOver(files);
  assert.equal(local.code, 0, local.lines.join("\n"));
  assert.ok(
    local.lines.includes(
      "skipped: gated_test.ts > needs containerd (skipped: no containerd (install containerd))",
    ),
    local.lines.join("\n"),
  );
  assert.equal(local.last, "tests: 1 passed, 0 failed, 1 skipped");
  const ci = await runOver(files, { ci: true });
  assert.equal(ci.code, 1);
  assert.ok(ci.lines.some((l) => l.startsWith("FAILED: 1 skip(s) under CI=true")));
  const open = await runOver(files, { env: { GATE_OPEN: "1" } });
  assert.equal(open.last, "tests: 2 passed, 0 failed, 0 skipped");
});

Deno.test("runSuite() lists a skipped lane's files by name, and fails under CI", async () => {
  const files = { "a_test.ts": PASSES, "b_test.ts": PASSES };
  const local = await runOver(files, { skipLanes: ["unit"] });
  assert.equal(local.code, 0);
  assert.ok(local.lines.includes("skipped: a_test.ts (lane unit skipped)"));
  assert.equal(local.last, "tests: 0 passed, 0 failed, 2 skipped");
  const unknown = await runOver(files, { skipLanes: ["nope"] });
  assert.equal(unknown.code, 1);
});

Deno.test("runSuite() refuses under CI a filter, a lane skip or a lane selection, naming it, before anything runs", async () => {
  const files = { "a_test.ts": PASSES };
  const gates = [{ name: "would run", args: ["eval", ""] }];
  const cases: [Partial<SuiteConfig>, string][] = [
    [{ filter: "passes" }, 'AICR_TEST_FILTER="passes"'],
    [{ skipLanes: ["unit"] }, "AICR_SKIP_LANES=unit"],
    [{ onlyLanes: ["unit"] }, "--lane unit"],
  ];
  for (const [narrow, named] of cases) {
    const run = await runOver(files, { ci: true, gates, ...narrow });
    assert.equal(run.code, 2, named);
    assert.ok(
      run.said.startsWith(`error: ${named} would leave tests out, and CI=true runs every test`),
      run.said,
    );
    assert.deepEqual(run.lines, [], "no gate, no file, no result");
  }
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

Deno.test("runSuite() judges tests, not names: a failing test named 'X > Y' beside a test 'X' fails the run", async () => {
  const run = await runOver({
    "a_test.ts": `Deno.test("X", () => {});
Deno.test("X > Y", () => { throw new Error("boom"); });\n`,
  });
  assert.equal(run.code, 1, run.lines.join("\n"));
  assert.ok(
    run.lines.includes("FAILED: a_test.ts > X > Y: Uncaught Error: boom"),
    run.lines.join("\n"),
  );
  assert.equal(
    run.lines.at(-2),
    "test steps: 0 passed, 0 failed, 0 skipped " +
      "(inside the tests counted next; a failed step fails the run)",
  );
  assert.equal(run.last, "tests: 1 passed, 1 failed, 0 skipped");
});

Deno.test("runSuite() counts a step named like a test as a step, and a failed step fails the run", async () => {
  const run = await runOver({
    "a_test.ts": `Deno.test("X > Y", () => {});
Deno.test("X", async (t) => {
  await t.step("Y", () => {});
  await t.step("Z", () => { throw new Error("step boom"); });
});\n`,
  });
  assert.equal(run.code, 1);
  assert.ok(run.lines.includes("FAILED step: a_test.ts > X > Z: Uncaught Error: step boom"));
  assert.ok(run.lines.includes("FAILED: 1 step(s), named above"), run.lines.join("\n"));
  assert.match(run.lines.at(-2)!, /^test steps: 1 passed, 1 failed, 0 skipped/);
  assert.equal(run.last, "tests: 1 passed, 1 failed, 0 skipped");
});

Deno.test("runSuite() prints how many tests a filter left out, and a file registering no test still fails", async () => {
  const run = await runOver({
    "a_test.ts": PASSES + `Deno.test("other", () => {});\nDeno.test("third", () => {});\n`,
    "empty_test.ts": "export const x = 1;\n",
  }, { filter: "passes" });
  assert.equal(run.code, 1);
  assert.ok(
    run.lines.includes('filtered: AICR_TEST_FILTER="passes" ran 2 tests and left out 2'),
    run.lines.join("\n"),
  );
  assert.ok(run.lines.includes("FAILED file: empty_test.ts: it registered no test"));
  assert.equal(run.last, "tests: 1 passed, 1 failed, 0 skipped");
});

Deno.test("runSuite() fails a file that leaves work pending after its last test: a late throw is never lost", async () => {
  const off = "sanitizeOps: false, sanitizeResources: false";
  const run = await runOver({
    "timer_test.ts": `Deno.test({ name: "leaves a timer", ${off}, fn() {
  setTimeout(() => { throw new Error("late"); }, 2_000);
}});\n`,
    "promise_test.ts": `Deno.test({ name: "leaves a promise", ${off}, fn() {
  void (async () => { await new Promise((r) => setTimeout(r, 2_000)); throw new Error("late"); })();
}});\n`,
    "child_test.ts": `Deno.test({ name: "leaves a child", ${off}, fn() {
  new Deno.Command("sleep", { args: ["30"], stdout: "null", stderr: "null" }).spawn();
}});\n`,
    "settled_test.ts": `let timer: number | undefined;
Deno.test({ name: "starts a timer", ${off}, fn() {
  timer = setTimeout(() => { throw new Error("late"); }, 60_000);
}});
Deno.test.afterAll(() => clearTimeout(timer));\n`,
  });
  assert.equal(run.code, 1);
  assert.ok(
    run.lines.some((l) =>
      l.startsWith("FAILED file: child_test.ts: work it started was still pending") &&
      l.endsWith("; still open: child")
    ),
    run.lines.join("\n"),
  );
  for (const file of ["promise_test.ts", "timer_test.ts"]) {
    assert.ok(
      run.lines.some((l) =>
        l.startsWith(`FAILED file: ${file}: work it started was still pending after its last test`)
      ),
      run.lines.join("\n"),
    );
  }
  assert.ok(!run.lines.some((l) => l.includes("settled_test.ts")), run.lines.join("\n"));
  assert.equal(run.last, "tests: 4 passed, 3 failed, 0 skipped");
});

function alive(pid: number): boolean {
  try {
    const stat = Deno.readTextFileSync(`/proc/${pid}/stat`);
    return !/^\S+ \(.*\) [ZX] /.test(stat);
  } catch {
    return false;
  }
}

Deno.test("runSuite() ends every process a file left running, in its group or in a session of its own, and names it", async () => {
  const dir = await mkdtemp(join(tmpdir(), "aicr-runner-pids-"));
  try {
    const run = await runOver({
      "a_test.ts":
        `Deno.test({ name: "starts two sleepers", sanitizeOps: false, sanitizeResources: false, async fn() {
  for (const args of [["sleep", "301"], ["setsid", "sleep", "302"]]) {
    const child = new Deno.Command(args[0], { args: args.slice(1), stdout: "null", stderr: "null" }).spawn();
    child.unref();
    Deno.writeTextFileSync("${dir}/" + args.at(-1), String(child.pid));
  }
}});\n`,
    });
    const pids = ["301", "302"].map((n) => Number(Deno.readTextFileSync(join(dir, n))));
    for (const pid of pids) assert.ok(!alive(pid), `pid ${pid} was ended`);
    assert.equal(run.code, 0, run.lines.join("\n"));
    for (const [i, pid] of pids.entries()) {
      assert.ok(
        run.lines.some((l) =>
          new RegExp(`^left running by a_test\\.ts, ended: pid ${pid} \\S*sleep ${301 + i}$`).test(
            l,
          )
        ),
        run.lines.join("\n"),
      );
    }
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

Deno.test("runSuite() stops at the run's deadline and still prints the tests line, naming what did not finish", async () => {
  const run = await runOver({
    "a_test.ts": `Deno.test("hangs", () => new Promise((r) => setTimeout(r, 3_600_000)));\n`,
    "b_test.ts": PASSES,
  }, { lanes: [{ ...LANE, jobs: 1 }], deadlineMs: 3_000 });
  assert.equal(run.code, 1);
  assert.ok(
    run.lines.includes("FAILED file: a_test.ts: still running at the run's deadline: stopped"),
    run.lines.join("\n"),
  );
  assert.ok(
    run.lines.includes(
      "FAILED file: b_test.ts: not started (lane unit): the run's deadline had passed",
    ),
  );
  assert.ok(
    run.lines.includes(
      "FAILED: the run's deadline (3.0 s) passed: 1 file(s) stopped and 1 not started, named above",
    ),
  );
  assert.equal(run.last, "tests: 0 passed, 2 failed, 0 skipped");
});

Deno.test("runSuite() runs a gate only when a lane it is for runs", async () => {
  const lanes: Lane[] = [
    { ...LANE, match: (p) => !p.startsWith("e2e/") },
    { ...LANE, name: "e2e", match: (p) => p.startsWith("e2e/"), needsCluster: true },
  ];
  const gates = [
    { name: "fmt", args: ["eval", ""] },
    { name: "control plane", args: ["eval", ""], lanes: ["e2e"] },
  ];
  const files = { "a_test.ts": PASSES, "e2e/b_test.ts": PASSES };
  const unit = await runOver(files, { lanes, gates, onlyLanes: ["unit"] });
  assert.equal(unit.code, 0, unit.lines.join("\n"));
  assert.deepEqual(unit.lines.filter((l) => l.startsWith("gate ")).map((l) => l.split(":")[0]), [
    "gate fmt",
  ]);
  assert.ok(unit.lines.includes("skipped lane e2e (not selected by --lane unit): 1 files not run"));
  assert.equal(unit.last, "tests: 1 passed, 0 failed, 1 skipped");
  const all = await runOver(files, { lanes, gates });
  assert.deepEqual(all.lines.filter((l) => l.startsWith("gate ")).map((l) => l.split(":")[0]), [
    "gate fmt",
    "gate control plane",
  ]);
});

Deno.test("runSuite() leaves running what the cluster fixture starts, from its start to its stop", async () => {
  const dir = await mkdtemp(join(tmpdir(), "aicr-runner-fixture-"));
  try {
    const pidFile = join(dir, "pid");
    const up = `const c = new Deno.Command("setsid", { args: ["sleep", "303"], stdin: "null",
  stdout: "null", stderr: "null" }).spawn(); c.unref(); Deno.writeTextFileSync(${
      JSON.stringify(pidFile)
    }, String(c.pid));`;
    const run = await runOver({
      "a_test.ts": `Deno.test("the fixture's process runs", () => {
  const pid = Deno.readTextFileSync(${JSON.stringify(pidFile)});
  const stat = Deno.readTextFileSync("/proc/" + pid + "/stat");
  if (/^\\S+ \\(.*\\) [ZX] /.test(stat)) throw new Error("ended");
});\n`,
    }, {
      lanes: [{ ...LANE, needsCluster: true }],
      cluster: {
        name: "cluster",
        up: { name: "start", args: ["eval", up] },
        down: {
          name: "stop",
          args: ["eval", `Deno.kill(Number(Deno.readTextFileSync(${JSON.stringify(pidFile)})))`],
        },
      },
    });
    assert.equal(run.code, 0, run.lines.join("\n"));
    assert.ok(!run.lines.some((l) => l.startsWith("left running")), run.lines.join("\n"));
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});
