/**
 * The test command's core: gates (commands that must succeed), an optional fixture around the
 * lanes (the local cluster: started before, stopped after, whatever happens), then every lane's
 * test files, each in its own `deno test` with a JUnit report and a deadline. Pass and fail come
 * from exit statuses and the reports, never from what a test prints. The last line is
 * `tests: N passed, N failed, N skipped`.
 *
 * How tests are counted: a test is a `Deno.test` (told from a step by how many tests the file
 * registered, `tests/runner/preload.ts`, never by its name); its steps (`t.step`) are counted on
 * their own line and not in the last one. A failed test or a failed step fails the run. A file
 * that fails outside any test (it does not load, it registers no test, it hangs past its
 * deadline or the run's, its report is missing or disagrees with what it registered, deno test
 * exits non-zero with no failing test in the report, or work it started was still pending after
 * its last test) counts as one failed test named after the file; so does a file the run's
 * deadline left unstarted. A file of a skipped lane counts as one skipped test, named.
 *
 * Under `CI=true` nothing may narrow the run: a filter, a lane skip or a lane selection is
 * refused before anything runs. When a file ends, every process it left running (its process
 * group, and every process carrying its owner mark, `tests/runner/processes.ts`) is ended and
 * named.
 *
 * @module
 */
import { spawn } from "node:child_process";
import { mkdir, readFile, rm } from "node:fs/promises";
import { isAbsolute, join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import process from "node:process";
import { parseJunit } from "./junit.ts";
import type { TestCase } from "./junit.ts";
import { discoverTests, listRepositoryFiles } from "./discover.ts";
import type { Lane } from "./discover.ts";
import { endOwnedProcesses, OWNER_ENV } from "./processes.ts";
import type { ProcessInfo } from "./processes.ts";

/** The module every test file is run with (`deno test --preload`). */
const PRELOAD = fileURLToPath(new URL("./preload.ts", import.meta.url));

/** A command that must succeed: `deno <args>` in the repository. */
export interface Gate {
  /** What it checks, e.g. `fmt`. */
  name: string;
  /** Arguments to deno. */
  args: string[];
  /** Run only when one of these lanes runs (default: always). */
  lanes?: string[];
}

/** Something the lanes need around them, started by one command and stopped by another. */
export interface Fixture {
  /** What it is, e.g. `local cluster`. */
  name: string;
  /** Starts it (a failure fails the run; the lanes still run, and `down` still runs). */
  up: Gate;
  /** Stops it. */
  down: Gate;
}

/** A skip that is expected even under `CI=true`, because no machine of CI's kind can run it. */
export interface AllowedSkip {
  /** The test file. */
  file: string;
  /** The test's name. */
  name: string;
  /** Why CI cannot run it. */
  reason: string;
}

/** Everything one run of the test command uses. */
export interface SuiteConfig {
  /** The repository. */
  root: string;
  /** The deno executable. */
  deno: string;
  /** Gates, run first, in order (each only when a lane it is for runs). */
  gates: Gate[];
  /** Started before the lanes that need it, stopped after. */
  cluster?: Fixture;
  /** The lanes, run one after another; a file goes to the first lane that takes it. */
  lanes: Lane[];
  /** Test files left out on purpose, with the reason (printed on every run). */
  notRun: Record<string, string>;
  /** Skips that do not fail a CI run. */
  allowedSkips: AllowedSkip[];
  /** Lanes to skip (`AICR_SKIP_LANES`). */
  skipLanes: string[];
  /** Lanes to run, the others skipped (`--lane`); all when absent. */
  onlyLanes?: string[];
  /** `--filter` for every file (`AICR_TEST_FILTER`). */
  filter?: string;
  /** Under CI (`CI=true`) a skip is a failure, and nothing may narrow the run. */
  ci: boolean;
  /** The whole run's deadline: files still running then are stopped, the rest not started. */
  deadlineMs?: number;
  /** Environment for every command (added to the runner's own). */
  env: Record<string, string>;
  /** Where JUnit reports go (a fresh folder of this run). */
  reportDir: string;
  /** Let file output through as it comes (else it is printed when the file ends). */
  stream: boolean;
  /** Progress and details (stderr in the real run). */
  say: (line: string) => void;
  /** The result lines (stdout in the real run); the last one is the tests line. */
  result: (line: string) => void;
}

/** How one test file went. */
export interface FileResult {
  /** The file. */
  file: string;
  /** Its lane. */
  lane: string;
  /** Its tests and steps. */
  cases: TestCase[];
  /** Tests the filter left out. */
  filteredOut: number;
  /** Why the file failed outside any test, if it did. */
  fileFailure?: string;
  /** Processes it left running, each ended by the runner. */
  leftRunning: ProcessInfo[];
  /** Seconds it took. */
  seconds: number;
}

/** The counts of the last line, and more. */
export interface Tally {
  /** Tests passed. */
  passed: number;
  /** Tests failed, file failures included. */
  failed: number;
  /** Tests skipped, skipped lanes' files included. */
  skipped: number;
  /** Steps passed, failed and skipped. */
  steps: { passed: number; failed: number; skipped: number };
}

const KILL_GRACE_MS = 5_000;

function seconds(ms: number): string {
  return ms >= 60_000 && ms % 60_000 === 0 ? `${ms / 60_000} min` : `${(ms / 1000).toFixed(1)} s`;
}

/** A child running in its own process group, so a deadline stops the whole tree. */
interface Spawned {
  done: Promise<{ code: number; output: string; leftRunning: ProcessInfo[] }>;
  stop(): void;
}

const running = new Set<Spawned>();
let interrupted = false;
let runMark = 0;

/** Stops every child the runner started and starts no more test files (Ctrl-C of the runner). */
export function stopAll(): void {
  interrupted = true;
  for (const child of running) child.stop();
}

/**
 * Starts `deno <args>` in a process group of its own. With `endLeftovers` (a test file), when it
 * exits whatever is left of its group, and every process carrying its owner mark, is ended (by
 * PID) before `done` resolves.
 */
function spawnDeno(
  config: SuiteConfig,
  args: string[],
  options: { env?: Record<string, string>; capture: boolean; endLeftovers?: boolean },
): Spawned {
  // Only a test file's processes are marked and ended: a gate may start what must outlive it
  // (the local cluster's `up`).
  const mark = options.endLeftovers ? `${process.pid}-${++runMark}` : undefined;
  const child = spawn(config.deno, args, {
    cwd: config.root,
    env: {
      ...process.env,
      ...config.env,
      ...options.env,
      ...(mark === undefined ? {} : { [OWNER_ENV]: mark }),
    },
    stdio: options.capture ? ["ignore", "pipe", "pipe"] : "inherit",
    detached: true,
  });
  let output = "";
  child.stdout?.setEncoding("utf8");
  child.stderr?.setEncoding("utf8");
  child.stdout?.on("data", (text: string) => (output += text));
  child.stderr?.on("data", (text: string) => (output += text));
  let killTimer: ReturnType<typeof setTimeout> | undefined;
  const group = (signal: NodeJS.Signals) => {
    try {
      if (child.pid !== undefined) process.kill(-child.pid, signal);
    } catch {
      // Already gone.
    }
  };
  const exited = new Promise<number>((resolve) => {
    child.on("error", (error) => {
      output += `\n${error.message}\n`;
      resolve(127);
    });
    child.on("exit", (code, signal) => resolve(code ?? (signal ? 128 : 1)));
  });
  const closed = new Promise<void>((resolve) => child.on("close", () => resolve()));
  const finish = async () => {
    const code = await exited;
    clearTimeout(killTimer);
    // A process it left may hold its output open: ended first, then the output is complete.
    const leftRunning = mark === undefined ? [] : await endOwnedProcesses(
      { ...(child.pid === undefined ? {} : { pgid: child.pid }), mark },
      { graceMs: KILL_GRACE_MS },
    );
    // A process outside its group without its mark (setsid and a cleared environment) could still
    // hold the output open: the output is read for a while more, then let go.
    let hold: ReturnType<typeof setTimeout> | undefined;
    const held = await Promise.race([
      closed.then(() => false),
      new Promise<boolean>((resolve) => (hold = setTimeout(() => resolve(true), KILL_GRACE_MS))),
    ]);
    clearTimeout(hold);
    if (held) {
      child.stdout?.destroy();
      child.stderr?.destroy();
      output += "\n(the runner: a process it could not find holds this output open; not read)\n";
    }
    running.delete(spawned);
    return { code, output, leftRunning };
  };
  const spawned: Spawned = {
    done: finish(),
    stop() {
      group("SIGTERM");
      killTimer ??= setTimeout(() => group("SIGKILL"), KILL_GRACE_MS);
    },
  };
  running.add(spawned);
  return spawned;
}

interface GateResult {
  ok: boolean;
  line: string;
}

async function runGate(config: SuiteConfig, gate: Gate): Promise<GateResult> {
  config.say(`== ${gate.name}`);
  const started = performance.now();
  const child = spawnDeno(config, gate.args, { capture: !config.stream });
  const { code, output } = await child.done;
  if (!config.stream && output) config.say(output.trimEnd());
  const ok = code === 0;
  const line = `gate ${gate.name}: ${ok ? "ok" : `FAILED (exit ${code})`} (${
    seconds(performance.now() - started)
  })`;
  config.say(line);
  return { ok, line };
}

/** What `tests/runner/preload.ts` recorded of one file's run. */
interface FileRecord {
  /** Tests registered per file (JUnit suite name, without `./`). */
  tests: Map<string, number>;
  /** Whether work was pending after the last test (null: this deno cannot tell). */
  pendingWork?: boolean | null;
  /** The kinds of resource still open then (`child`, `tcpStream`, ...). */
  open?: string[];
}

async function readRecord(config: SuiteConfig, path: string): Promise<FileRecord> {
  const record: FileRecord = { tests: new Map() };
  let text = "";
  try {
    text = await readFile(path, "utf8");
  } catch {
    return record;
  }
  for (const line of text.split("\n")) {
    if (line.trim() === "") continue;
    const entry = JSON.parse(line) as {
      test?: string;
      unload?: { pendingWork: boolean | null; open?: string[] };
    };
    if (entry.test !== undefined) {
      const name = suiteName(config.root, entry.test);
      record.tests.set(name, (record.tests.get(name) ?? 0) + 1);
    }
    if (entry.unload !== undefined) {
      record.pendingWork = entry.unload.pendingWork;
      record.open = entry.unload.open ?? [];
    }
  }
  return record;
}

/** The name deno's JUnit report gives a file's suite (without `./`). */
function suiteName(root: string, url: string): string {
  if (!url.startsWith("file:")) return url;
  const path = relative(root, fileURLToPath(url));
  return path.startsWith("..") || isAbsolute(path) ? url : path.split("\\").join("/");
}

/**
 * Runs one test file in its own `deno test` and reads its report.
 *
 * @param config the run
 * @param lane the file's lane
 * @param file the file, repository-relative
 * @param index a number unique in this run (names the report)
 * @returns its tests, and why it failed outside them, if it did
 */
export async function runTestFile(
  config: SuiteConfig,
  lane: Lane,
  file: string,
  index: number,
): Promise<FileResult> {
  const report = join(config.reportDir, `${index}.xml`);
  const recordPath = join(config.reportDir, `${index}.record.jsonl`);
  const started = performance.now();
  const capture = !config.stream || lane.jobs > 1;
  const child = spawnDeno(config, [
    "test",
    "-A",
    "--no-prompt",
    // The type check gate checks every file once; each file's own run need not repeat it.
    "--no-check",
    `--preload=${PRELOAD}`,
    `--junit-path=${report}`,
    ...(config.filter === undefined ? [] : ["--filter", config.filter]),
    file,
  ], { capture, env: { AICR_TEST_RECORD: recordPath }, endLeftovers: true });
  let late: string | undefined;
  const deadline = setTimeout(() => {
    late = `no result within ${seconds(lane.deadlineMs)} (the lane's per-file deadline): stopped`;
    child.stop();
  }, lane.deadlineMs);
  const onRunDeadline = () => {
    late ??= "still running at the run's deadline: stopped";
    child.stop();
  };
  runDeadline.listeners.add(onRunDeadline);
  const { code, output, leftRunning } = await child.done;
  clearTimeout(deadline);
  runDeadline.listeners.delete(onRunDeadline);
  const took = performance.now() - started;
  if (capture && output) config.say(output.trimEnd());
  const result: FileResult = {
    file,
    lane: lane.name,
    cases: [],
    filteredOut: 0,
    leftRunning,
    seconds: took / 1000,
  };
  if (late !== undefined) {
    result.fileFailure = late;
    return result;
  }
  const record = await readRecord(config, recordPath);
  const registered = [...record.tests.values()].reduce((n, c) => n + c, 0);
  let text: string | undefined;
  try {
    text = await readFile(report, "utf8");
  } catch {
    text = undefined;
  }
  if (text === undefined) {
    result.fileFailure = `deno test exited ${code} and wrote no report`;
    return result;
  }
  try {
    const parsed = parseJunit(text, {
      tests: record.tests,
      ...(config.filter === undefined ? {} : { filter: config.filter }),
    });
    result.cases = parsed.cases.map((c) => ({ ...c, file: c.file === "" ? file : c.file }));
    result.filteredOut = parsed.filteredOut;
  } catch (error) {
    result.fileFailure = `its report is unreadable: ${(error as Error).message}`;
    return result;
  }
  const failedTests = result.cases.some((c) => !c.step && c.status === "failed");
  if (code !== 0 && !failedTests) {
    result.fileFailure = `deno test exited ${code} with no failing test in its report ` +
      "(it did not load, or failed after its tests)";
  } else if (code === 0 && failedTests) {
    result.fileFailure = "deno test exited 0 although its report has failures";
  } else if (registered === 0) {
    result.fileFailure = "it registered no test";
  } else if (record.pendingWork === true) {
    const open = record.open?.length ? `; still open: ${record.open.join(", ")}` : "";
    result.fileFailure = "work it started was still pending after its last test (a timer, a " +
      "promise, a server or a child process): deno test does not wait for it, so a failure it " +
      `raises would never be seen; settle it before the file's last test ends${open}`;
  } else if (record.pendingWork === null) {
    result.fileFailure = "this deno cannot tell whether work was pending after the last test " +
      "(no eventLoopHasMoreWork): update tests/runner/preload.ts";
  }
  return result;
}

/** The run's deadline: files running when it passes stop, files not started stay so. */
const runDeadline = { passed: false, listeners: new Set<() => void>() };

async function runLane(
  config: SuiteConfig,
  lane: Lane,
  files: readonly string[],
  first: number,
): Promise<{ results: FileResult[]; notStarted: string[] }> {
  config.say(
    `== lane ${lane.name} (${lane.description}): ${files.length} files, ${lane.jobs} at a time, ` +
      `deadline ${seconds(lane.deadlineMs)} per file`,
  );
  const results: FileResult[] = [];
  let next = 0;
  const worker = async () => {
    while (next < files.length && !interrupted && !runDeadline.passed) {
      const i = next++;
      const file = files[i]!;
      const r = await runTestFile(config, lane, file, first + i);
      results[i] = r;
      const count = (s: string) => r.cases.filter((c) => !c.step && c.status === s).length;
      const failedSteps = r.cases.some((c) => c.step && c.status === "failed");
      config.say(
        `${r.fileFailure || count("failed") || failedSteps ? "FAILED" : "ok    "} ${file}: ${
          count("passed")
        } passed, ${count("failed")} failed, ${count("skipped")} skipped (${
          r.seconds.toFixed(1)
        } s)${r.fileFailure ? `; ${r.fileFailure}` : ""}`,
      );
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, lane.jobs) }, worker));
  return {
    results: results.filter((r) => r !== undefined),
    notStarted: files.filter((_, i) => results[i] === undefined),
  };
}

/**
 * Counts tests and steps over every file.
 *
 * @param results the files' results
 * @param skippedFiles files of skipped lanes
 * @returns the counts
 */
export function tally(results: readonly FileResult[], skippedFiles: number): Tally {
  const t: Tally = {
    passed: 0,
    failed: 0,
    skipped: skippedFiles,
    steps: { passed: 0, failed: 0, skipped: 0 },
  };
  for (const r of results) {
    if (r.fileFailure) t.failed += 1;
    for (const c of r.cases) {
      if (c.step) t.steps[c.status] += 1;
      else t[c.status] += 1;
    }
  }
  return t;
}

/**
 * What narrows a run (a filter, lane skips, a lane selection), each named with its value.
 *
 * @param config the run
 * @returns one entry per narrowing setting
 */
export function narrowing(config: SuiteConfig): string[] {
  return [
    ...(config.filter === undefined ? [] : [`AICR_TEST_FILTER=${JSON.stringify(config.filter)}`]),
    ...(config.skipLanes.length === 0 ? [] : [`AICR_SKIP_LANES=${config.skipLanes.join(",")}`]),
    ...(config.onlyLanes === undefined ? [] : [`--lane ${config.onlyLanes.join(",")}`]),
  ];
}

/**
 * Runs the gates, the fixture and the lanes, and prints the result lines.
 *
 * @param config the run
 * @returns the exit code: 0 only when every gate passed, no test failed and nothing was wrong;
 *   2 when the run is refused before it starts
 */
export async function runSuite(config: SuiteConfig): Promise<number> {
  const narrowed = narrowing(config);
  if (config.ci && narrowed.length > 0) {
    config.say(
      `error: ${narrowed.join(" and ")} would leave tests out, and CI=true runs every test: ` +
        "unset it (.ci/run clears every AICR_* variable)",
    );
    return 2;
  }
  const problems: string[] = [];
  const gates: GateResult[] = [];
  const laneLines: string[] = [];
  const files = await listRepositoryFiles(config.root);
  const found = discoverTests(config.root, files, { lanes: config.lanes, notRun: config.notRun });
  problems.push(...found.problems);
  for (const name of [...config.skipLanes, ...config.onlyLanes ?? []]) {
    if (!config.lanes.some((l) => l.name === name)) {
      problems.push(
        `${
          config.skipLanes.includes(name) ? "AICR_SKIP_LANES" : "--lane"
        } names no lane '${name}' ` +
          `(lanes: ${config.lanes.map((l) => l.name).join(", ")})`,
      );
    }
  }

  runDeadline.passed = false;
  const deadlineTimer = config.deadlineMs === undefined ? undefined : setTimeout(() => {
    runDeadline.passed = true;
    for (const stop of runDeadline.listeners) stop();
  }, config.deadlineMs);
  const skips: { lane: string; reason: string; files: string[] }[] = [];
  const active: Lane[] = [];
  for (const lane of config.lanes) {
    const laneFiles = found.lanes.get(lane.name) ?? [];
    const reason = config.skipLanes.includes(lane.name)
      ? "AICR_SKIP_LANES"
      : config.onlyLanes !== undefined && !config.onlyLanes.includes(lane.name)
      ? `not selected by --lane ${config.onlyLanes.join(",")}`
      : await lane.unavailable?.();
    if (reason !== undefined) skips.push({ lane: lane.name, reason, files: laneFiles });
    else active.push(lane);
  }

  const results: FileResult[] = [];
  const notStarted: { file: string; lane: string }[] = [];
  const needsCluster = config.cluster !== undefined && active.some((l) => l.needsCluster);
  try {
    for (const gate of config.gates) {
      if (gate.lanes !== undefined && !active.some((l) => gate.lanes!.includes(l.name))) continue;
      if (runDeadline.passed) {
        gates.push({ ok: false, line: `gate ${gate.name}: NOT RUN (the run's deadline passed)` });
        continue;
      }
      gates.push(await runGate(config, gate));
    }
    if (needsCluster && !runDeadline.passed) gates.push(await runGate(config, config.cluster!.up));
    let index = 0;
    for (const lane of active) {
      const laneFiles = found.lanes.get(lane.name) ?? [];
      const started = performance.now();
      const ran = await runLane(config, lane, laneFiles, index);
      results.push(...ran.results);
      notStarted.push(...ran.notStarted.map((file) => ({ file, lane: lane.name })));
      index += laneFiles.length;
      laneLines.push(
        `lane ${lane.name}: ${laneFiles.length} files (${seconds(performance.now() - started)})`,
      );
    }
  } finally {
    clearTimeout(deadlineTimer);
    // Also after a failed start: whatever it did start must stop.
    if (needsCluster) gates.push(await runGate(config, config.cluster!.down));
  }

  const t = tally(results, skips.reduce((n, s) => n + s.files.length, 0));
  if (runDeadline.passed) t.failed += notStarted.length;
  const say = config.result;
  say("== result");
  for (const g of gates) say(g.line);
  for (const l of laneLines) say(l);
  for (const { path, reason } of found.notRun) say(`not run: ${path}: ${reason}`);
  for (const p of problems) say(`PROBLEM ${p}`);
  let ciSkips = 0;
  for (const s of skips) {
    say(`skipped lane ${s.lane} (${s.reason}): ${s.files.length} files not run`);
    for (const f of s.files) say(`skipped: ${f} (lane ${s.lane} skipped)`);
    if (config.ci) ciSkips += Math.max(1, s.files.length);
  }
  for (const r of results) {
    for (const c of r.cases) {
      if (c.status !== "skipped") continue;
      const allowed = config.allowedSkips.find((a) => a.file === c.file && a.name === c.name);
      say(
        `skipped${c.step ? " step" : ""}: ${c.file} > ${c.name}${
          allowed ? ` (allowed under CI: ${allowed.reason})` : ""
        }`,
      );
      if (config.ci && !allowed) ciSkips += 1;
    }
  }
  for (const r of results) {
    for (const p of r.leftRunning) {
      say(`left running by ${r.file}, ended: pid ${p.pid} ${p.command}`);
    }
  }
  for (const r of results) {
    if (r.fileFailure) say(`FAILED file: ${r.file}: ${r.fileFailure}`);
    for (const c of r.cases) {
      if (c.status === "failed") {
        say(
          `FAILED${c.step ? " step" : ""}: ${c.file} > ${c.name}${
            c.message ? `: ${c.message}` : ""
          }`,
        );
      }
    }
  }
  if (runDeadline.passed) {
    for (const { file, lane } of notStarted) {
      say(`FAILED file: ${file}: not started (lane ${lane}): the run's deadline had passed`);
    }
    say(
      `FAILED: the run's deadline (${seconds(config.deadlineMs!)}) passed: ${
        results.filter((r) => r.fileFailure?.includes("the run's deadline")).length
      } file(s) stopped and ${notStarted.length} not started, named above`,
    );
  }
  if (ciSkips > 0) {
    say(
      `FAILED: ${ciSkips} skip(s) under CI=true: CI must run everything this machine can ` +
        "(install what is missing in .ci/run)",
    );
  }
  const ran = results.reduce(
    (n, r) => n + (r.fileFailure ? 1 : 0) + r.cases.filter((c) => !c.step).length,
    0,
  );
  if (config.filter !== undefined) {
    const leftOut = results.reduce((n, r) => n + r.filteredOut, 0);
    say(
      `filtered: AICR_TEST_FILTER=${
        JSON.stringify(config.filter)
      } ran ${ran} tests and left out ${leftOut}`,
    );
  }
  if (config.filter !== undefined && ran === 0) {
    problems.push(`AICR_TEST_FILTER=${JSON.stringify(config.filter)} matched no test`);
    say(`PROBLEM ${problems.at(-1)}`);
  } else if (ran === 0 && active.length > 0) {
    problems.push("no test ran");
    say(`PROBLEM ${problems.at(-1)}`);
  }
  const failedGates = gates.filter((g) => !g.ok).length;
  if (failedGates > 0) say(`FAILED: ${failedGates} gate(s), named above`);
  if (t.steps.failed > 0) say(`FAILED: ${t.steps.failed} step(s), named above`);
  say(
    `test steps: ${t.steps.passed} passed, ${t.steps.failed} failed, ${t.steps.skipped} skipped ` +
      "(inside the tests counted next; a failed step fails the run)",
  );
  say(`tests: ${t.passed} passed, ${t.failed} failed, ${t.skipped} skipped`);
  if (interrupted) {
    say("interrupted: the files not yet run were left out");
    return 130;
  }
  const ok = failedGates === 0 && t.failed === 0 && t.steps.failed === 0 &&
    problems.length === 0 && ciSkips === 0;
  return ok ? 0 : 1;
}

/**
 * Creates a fresh folder for this run's reports.
 *
 * @param dir the folder
 * @returns the folder
 */
export async function freshDir(dir: string): Promise<string> {
  await rm(dir, { recursive: true, force: true });
  await mkdir(dir, { recursive: true });
  return dir;
}
