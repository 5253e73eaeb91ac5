/**
 * The one test command (`npm test`, which CI runs): the gates (fmt, lint, type check, the
 * release binary build, the control-plane build), the local cluster (started here with the
 * kubelet stand-in, stopped whatever happens), then every test file, lane by lane, each file in
 * its own `deno test` with a JUnit report and a per-file deadline. The last line is
 * `tests: N passed, N failed, N skipped`; how tests and steps are counted is in
 * `tests/runner/suite.ts`. The exit status is 0 only when every gate passed and no test failed.
 *
 * Arguments: `--lane <name>[,<name>]` runs only those lanes (`deno task test:unit` is
 * `--lane unit`), the others named as skipped; a gate runs only when a lane it is for runs.
 *
 * Environment:
 * - `AICR_CLUSTER_DIR` reuses a cluster already started by `deno task cluster:up` (left running).
 * - `AICR_TEST_FILTER` passes `--filter` to every file; matching no test at all is an error, and
 *   the result says how many tests it left out.
 * - `AICR_SKIP_LANES=e2e` skips lanes by name, each of their files named as skipped.
 * - `AICR_TEST_JOBS` sets how many unit files run at once (default 2).
 * - `AICR_TEST_DEADLINE_MIN` sets the whole run's deadline in minutes (default
 *   {@link DEADLINE_MIN}): files still running then are stopped, the rest not started, each
 *   named, and the tests line is still printed.
 * - `CI=true` turns every skip (of a test, a step or a lane) into a failure, except the
 *   {@link ALLOWED_SKIPS}: CI must install what the tests need (see `.ci/run`). A filter, a lane
 *   skip or `--lane` is refused under CI.
 * - `UPDATE_GOLDEN` must not be set: the test command never rewrites golden files.
 *
 * @module
 */
import { existsSync } from "node:fs";
import { mkdir, mkdtemp, rm } from "node:fs/promises";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import type { Lane } from "./runner/discover.ts";
import { laneUnavailable } from "./realnode/harness.ts";
import { runSuite, stopAll } from "./runner/suite.ts";
import type { AllowedSkip, Fixture, Gate } from "./runner/suite.ts";

const ROOT = dirname(dirname(fileURLToPath(import.meta.url)));

/**
 * The folder of the lane `realnode`: real kubelets, containerd and runc (its harness's own
 * tests run there too).
 */
const REALNODE_REGEXP = /^tests\/realnode\//;

/**
 * The folders of the lane `e2e`, which need the local cluster or the built binary, and the files
 * named `cluster_test.ts` beside the modules they test against the local cluster.
 */
const E2E_REGEXP = /^tests\/(cluster|kubelet|e2e|reliability)\/|(^|\/)cluster_test\.ts$/;

/** The whole run's deadline, in minutes (`AICR_TEST_DEADLINE_MIN`). */
export const DEADLINE_MIN = 60;

/**
 * The lanes, run in this order. A new lane (e.g. one against a real kubelet) goes here with a
 * `match` that takes its files before `unit` does, and `unavailable` saying why it cannot run
 * on a machine (then it is skipped, named, and fails a CI run).
 */
export const LANES: Lane[] = [
  {
    name: "unit",
    description: "no cluster",
    match: (path) => !E2E_REGEXP.test(path) && !REALNODE_REGEXP.test(path),
    jobs: Math.max(1, Number(Deno.env.get("AICR_TEST_JOBS") ?? 2) || 1),
    deadlineMs: 5 * 60_000,
    needsCluster: false,
  },
  {
    name: "e2e",
    description: "the local cluster, the kubelet stand-in and the built binary",
    match: (path) => E2E_REGEXP.test(path),
    jobs: 1,
    deadlineMs: 10 * 60_000,
    needsCluster: true,
  },
  {
    name: "realnode",
    description: "real kubelets, containerd and runc in a network namespace of their own " +
      "(the lane starts its own control plane; tests/realnode)",
    match: (path) => REALNODE_REGEXP.test(path),
    jobs: 1,
    deadlineMs: 10 * 60_000,
    needsCluster: false,
    unavailable: () => Promise.resolve(laneUnavailable()),
  },
];

/** Test files the command does not run, with the reason (none today). */
export const NOT_RUN: Record<string, string> = {};

/** Skips that do not fail a CI run: none, every test runs on a machine of CI's kind. */
export const ALLOWED_SKIPS: AllowedSkip[] = [];

/** The gates; a gate with `lanes` runs only when one of those lanes runs. */
export const GATES: Gate[] = [
  { name: "fmt", args: ["fmt", "--check"] },
  { name: "lint", args: ["lint"] },
  { name: "type check", args: ["check", "."] },
  // Each listed safety check removed must fail a unit test (tests/mutants/mutants.ts).
  { name: "mutation check", args: ["run", "-A", "tests/mutants/mutants.ts"], lanes: ["unit"] },
  { name: "build dist/aicr", args: ["run", "-A", "scripts/build.ts"], lanes: ["e2e", "realnode"] },
  {
    name: "build the linux/arm64 binary (under qemu-user)",
    args: ["run", "-A", "scripts/build.ts", "--arch", "arm64"],
    lanes: ["e2e", "realnode"],
  },
  {
    name: "build the control plane (cached)",
    args: ["run", "-A", "tests/cluster/cluster.ts", "build"],
    lanes: ["e2e", "realnode"],
  },
  {
    name: "build helm, kubectl and prometheus (cached)",
    args: ["run", "-A", "tests/cluster/tools.ts", "build"],
  },
];

function say(line: string): void {
  // deno-lint-ignore no-console
  console.error(line);
}

function result(line: string): void {
  // deno-lint-ignore no-console
  console.log(line);
}

/**
 * Reads the command line: `--lane a,b` (or `--lane a --lane b`, `--lane=a`).
 *
 * @param args the arguments
 * @returns the lanes chosen, or undefined for all; or the error
 */
export function parseArgs(args: readonly string[]): { onlyLanes?: string[] } | { error: string } {
  const lanes: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]!;
    const value = arg === "--lane" ? args[++i] : arg.startsWith("--lane=") ? arg.slice(7) : null;
    if (value === null) {
      return { error: `unknown argument '${arg}' (the only one is --lane <name>)` };
    }
    if (value === undefined || value === "") return { error: "--lane needs a lane name" };
    lanes.push(...value.split(",").map((l) => l.trim()).filter((l) => l !== ""));
  }
  return lanes.length ? { onlyLanes: lanes } : {};
}

async function main(): Promise<number> {
  const parsed = parseArgs(Deno.args);
  if ("error" in parsed) {
    say(`error: ${parsed.error}`);
    return 2;
  }
  const deadlineMin = Number(Deno.env.get("AICR_TEST_DEADLINE_MIN") ?? DEADLINE_MIN);
  if (!(deadlineMin > 0)) {
    say(
      `error: AICR_TEST_DEADLINE_MIN=${
        Deno.env.get("AICR_TEST_DEADLINE_MIN")
      } is not a positive number of minutes`,
    );
    return 2;
  }
  if (Deno.env.get("UPDATE_GOLDEN") !== undefined) {
    say(
      "error: UPDATE_GOLDEN is set; the test command never rewrites golden files. Unset it " +
        "(rewrite a golden file on purpose with `UPDATE_GOLDEN=1 deno test -A <its test file>`)",
    );
    return 2;
  }
  const reuse = Deno.env.get("AICR_CLUSTER_DIR");
  if (reuse !== undefined && !existsSync(reuse)) {
    say(`error: AICR_CLUSTER_DIR=${reuse} does not exist: start it with deno task cluster:up`);
    return 2;
  }
  // Under the repository, not /tmp: the agent pod mounts an emptyDir over /tmp, which would
  // hide the kubelet stand-in's per-node files from the processes it runs.
  await mkdir(join(ROOT, ".cluster-runs"), { recursive: true });
  const runDir = await mkdtemp(join(ROOT, ".cluster-runs", "run-"));
  const clusterDir = reuse ?? join(runDir, "cluster");
  const reportDir = join(runDir, "junit");
  await mkdir(reportDir, { recursive: true });
  const cluster: Fixture | undefined = reuse ? undefined : {
    name: "local cluster",
    up: { name: "start the local cluster", args: ["run", "-A", "tests/cluster/cluster.ts", "up"] },
    down: {
      name: "stop the local cluster",
      args: ["run", "-A", "tests/cluster/cluster.ts", "down"],
    },
  };
  const filter = Deno.env.get("AICR_TEST_FILTER");
  const ci = ["true", "1"].includes(Deno.env.get("CI") ?? "");
  const onSignal = () => stopAll();
  Deno.addSignalListener("SIGINT", onSignal);
  Deno.addSignalListener("SIGTERM", onSignal);
  try {
    return await runSuite({
      root: ROOT,
      deno: Deno.execPath(),
      gates: GATES,
      ...(cluster ? { cluster } : {}),
      lanes: LANES,
      notRun: NOT_RUN,
      allowedSkips: ALLOWED_SKIPS,
      skipLanes: (Deno.env.get("AICR_SKIP_LANES") ?? "").split(",").map((s) => s.trim())
        .filter((s) => s !== ""),
      ...(filter ? { filter } : {}),
      ...parsed,
      ci,
      deadlineMs: deadlineMin * 60_000,
      env: {
        AICR_CLUSTER_DIR: clusterDir,
        AICR_BIN: join(ROOT, "dist", "aicr"),
        // A fresh report, so the reliability summary sums this run's cases only.
        AICR_RELIABILITY_REPORT: join(runDir, "reliability.jsonl"),
      },
      reportDir,
      stream: true,
      say,
      result,
    });
  } finally {
    Deno.removeSignalListener("SIGINT", onSignal);
    Deno.removeSignalListener("SIGTERM", onSignal);
    await rm(runDir, { recursive: true, force: true }).catch(() => {});
  }
}

if (import.meta.main) Deno.exitCode = await main();
