/**
 * The test command's core: gates (commands that must succeed), an optional fixture around the
 * lanes (the local cluster: started before, stopped after, whatever happens), then every lane's
 * test files, each in its own `deno test` with a JUnit report and a deadline. Pass and fail come
 * from exit statuses and the reports, never from what a test prints. The last line is
 * `tests: N passed, N failed, N skipped`.
 *
 * How tests are counted: a test is a `Deno.test`; its steps (`t.step`) are counted on their own
 * line and not in the last one (a failed step fails its test, so the test counts as failed). A
 * file that fails outside any test (it does not load, it hangs past its deadline, its report is
 * missing, or deno test exits non-zero with no failing test in the report) counts as one failed
 * test named after the file. A file with no test counts as one failed test too, unless a filter
 * is set. A file of a skipped lane counts as one skipped test, named.
 *
 * @module
 */
import { spawn } from "node:child_process";
import { mkdir, readFile, rm } from "node:fs/promises";
import { join } from "node:path";
import process from "node:process";
import { parseJunit } from "./junit.ts";
import type { TestCase } from "./junit.ts";
import { discoverTests, listRepositoryFiles } from "./discover.ts";
import type { Lane } from "./discover.ts";

/** A command that must succeed: `deno <args>` in the repository. */
export interface Gate {
  /** What it checks, e.g. `fmt`. */
  name: string;
  /** Arguments to deno. */
  args: string[];
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
  /** Gates, run first, in order. */
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
  /** `--filter` for every file (`AICR_TEST_FILTER`). */
  filter?: string;
  /** Under CI (`CI=true`) a skip is a failure. */
  ci: boolean;
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
  /** Why the file failed outside any test, if it did. */
  fileFailure?: string;
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
  done: Promise<{ code: number; output: string }>;
  stop(): void;
}

const running = new Set<Spawned>();
let interrupted = false;

/** Stops every child the runner started and starts no more test files (Ctrl-C of the runner). */
export function stopAll(): void {
  interrupted = true;
  for (const child of running) child.stop();
}

function spawnDeno(
  config: SuiteConfig,
  args: string[],
  options: { env?: Record<string, string>; capture: boolean },
): Spawned {
  const child = spawn(config.deno, args, {
    cwd: config.root,
    env: { ...process.env, ...config.env, ...options.env },
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
  const spawned: Spawned = {
    done: new Promise((resolve) => {
      child.on("error", (error) => {
        output += `\n${error.message}\n`;
      });
      child.on("close", (code, signal) => {
        clearTimeout(killTimer);
        running.delete(spawned);
        resolve({ code: code ?? (signal ? 128 : 1), output });
      });
    }),
    stop() {
      group("SIGTERM");
      killTimer ??= setTimeout(() => group("SIGKILL"), KILL_GRACE_MS);
    },
  };
  running.add(spawned);
  return spawned;
}

async function runGate(config: SuiteConfig, gate: Gate): Promise<{ ok: boolean; line: string }> {
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
  const started = performance.now();
  const capture = !config.stream || lane.jobs > 1;
  const child = spawnDeno(config, [
    "test",
    "-A",
    "--no-prompt",
    // The type check gate checks every file once; each file's own run need not repeat it.
    "--no-check",
    `--junit-path=${report}`,
    ...(config.filter === undefined ? [] : ["--filter", config.filter]),
    file,
  ], { capture });
  let late = false;
  const deadline = setTimeout(() => {
    late = true;
    child.stop();
  }, lane.deadlineMs);
  const { code, output } = await child.done;
  clearTimeout(deadline);
  const took = performance.now() - started;
  if (capture && output) config.say(output.trimEnd());
  const result: FileResult = { file, lane: lane.name, cases: [], seconds: took / 1000 };
  if (late) {
    result.fileFailure = `no result within ${
      seconds(lane.deadlineMs)
    } (the lane's per-file deadline): stopped`;
    return result;
  }
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
    result.cases = parseJunit(
      text,
      config.filter === undefined ? {} : { filter: config.filter },
    ).map((c) => ({ ...c, file: c.file === "" ? file : c.file }));
  } catch (error) {
    result.fileFailure = `its report is unreadable: ${(error as Error).message}`;
    return result;
  }
  const failedCases = result.cases.some((c) => c.status === "failed");
  if (code !== 0 && !failedCases) {
    result.fileFailure = `deno test exited ${code} with no failing test in its report ` +
      "(it did not load, or failed after its tests)";
  } else if (code === 0 && failedCases) {
    result.fileFailure = "deno test exited 0 although its report has failures";
  } else if (config.filter === undefined && !result.cases.some((c) => !c.step)) {
    result.fileFailure = "it registered no test";
  }
  return result;
}

async function runLane(
  config: SuiteConfig,
  lane: Lane,
  files: readonly string[],
  first: number,
): Promise<FileResult[]> {
  config.say(
    `== lane ${lane.name} (${lane.description}): ${files.length} files, ${lane.jobs} at a time, ` +
      `deadline ${seconds(lane.deadlineMs)} per file`,
  );
  const results: FileResult[] = [];
  let next = 0;
  const worker = async () => {
    while (next < files.length && !interrupted) {
      const i = next++;
      const file = files[i]!;
      const r = await runTestFile(config, lane, file, first + i);
      results[i] = r;
      const count = (s: string) => r.cases.filter((c) => !c.step && c.status === s).length;
      config.say(
        `${r.fileFailure || count("failed") ? "FAILED" : "ok    "} ${file}: ${
          count("passed")
        } passed, ${count("failed")} failed, ${count("skipped")} skipped (${
          r.seconds.toFixed(1)
        } s)${r.fileFailure ? `; ${r.fileFailure}` : ""}`,
      );
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, lane.jobs) }, worker));
  return results.filter((r) => r !== undefined);
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
 * Runs the gates, the fixture and the lanes, and prints the result lines.
 *
 * @param config the run
 * @returns the exit code: 0 only when every gate passed, no test failed and nothing was wrong
 */
export async function runSuite(config: SuiteConfig): Promise<number> {
  const problems: string[] = [];
  const gates: { ok: boolean; line: string }[] = [];
  const laneLines: string[] = [];
  const files = await listRepositoryFiles(config.root);
  const found = discoverTests(config.root, files, { lanes: config.lanes, notRun: config.notRun });
  problems.push(...found.problems);
  for (const name of config.skipLanes) {
    if (!config.lanes.some((l) => l.name === name)) {
      problems.push(
        `AICR_SKIP_LANES names no lane '${name}' (lanes: ${
          config.lanes.map((l) => l.name).join(", ")
        })`,
      );
    }
  }

  for (const gate of config.gates) gates.push(await runGate(config, gate));

  const skips: { lane: string; reason: string; files: string[] }[] = [];
  const active: Lane[] = [];
  for (const lane of config.lanes) {
    const laneFiles = found.lanes.get(lane.name) ?? [];
    const reason = config.skipLanes.includes(lane.name)
      ? "AICR_SKIP_LANES"
      : await lane.unavailable?.();
    if (reason !== undefined) skips.push({ lane: lane.name, reason, files: laneFiles });
    else active.push(lane);
  }

  const results: FileResult[] = [];
  const needsCluster = config.cluster !== undefined && active.some((l) => l.needsCluster);
  try {
    if (needsCluster) gates.push(await runGate(config, config.cluster!.up));
    let index = 0;
    for (const lane of active) {
      const laneFiles = found.lanes.get(lane.name) ?? [];
      const started = performance.now();
      results.push(...await runLane(config, lane, laneFiles, index));
      index += laneFiles.length;
      laneLines.push(
        `lane ${lane.name}: ${laneFiles.length} files (${seconds(performance.now() - started)})`,
      );
    }
  } finally {
    // Also after a failed start: whatever it did start must stop.
    if (needsCluster) gates.push(await runGate(config, config.cluster!.down));
  }

  const t = tally(results, skips.reduce((n, s) => n + s.files.length, 0));
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
  if (config.filter !== undefined && ran === 0) {
    problems.push(`AICR_TEST_FILTER=${JSON.stringify(config.filter)} matched no test`);
    say(`PROBLEM ${problems.at(-1)}`);
  } else if (ran === 0 && active.length > 0) {
    problems.push("no test ran");
    say(`PROBLEM ${problems.at(-1)}`);
  }
  const failedGates = gates.filter((g) => !g.ok).length;
  if (failedGates > 0) say(`FAILED: ${failedGates} gate(s), named above`);
  say(
    `test steps: ${t.steps.passed} passed, ${t.steps.failed} failed, ${t.steps.skipped} skipped ` +
      "(inside the tests counted next; a failed step fails its test)",
  );
  say(`tests: ${t.passed} passed, ${t.failed} failed, ${t.skipped} skipped`);
  if (interrupted) {
    say("interrupted: the files not yet run were left out");
    return 130;
  }
  const ok = failedGates === 0 && t.failed === 0 && problems.length === 0 && ciSkips === 0;
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
