/**
 * The one test command (`npm test`, which CI runs): the gates (fmt, lint, type check),
 * the release binary build, the local control plane (built from Go modules, started
 * here with the kubelet stand-in), every test, and a last line
 * `tests: N passed, N failed`. The cluster is stopped whatever happens.
 *
 * Environment: `AICR_CLUSTER_DIR` reuses a cluster already started by
 * `deno task cluster:up` (left running); `AICR_TEST_FILTER` passes `--filter`.
 *
 * @module
 */
import { mkdir, mkdtemp, rm } from "node:fs/promises";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = dirname(dirname(fileURLToPath(import.meta.url)));
const DENO = Deno.execPath();

interface Step {
  name: string;
  ok: boolean;
  seconds: number;
}

const steps: Step[] = [];

function say(line: string): void {
  // deno-lint-ignore no-console
  console.error(`== ${line}`);
}

async function run(
  name: string,
  args: string[],
  options: { env?: Record<string, string>; capture?: boolean } = {},
): Promise<{ ok: boolean; output: string }> {
  say(name);
  const t0 = performance.now();
  const child = new Deno.Command(DENO, {
    args,
    cwd: ROOT,
    env: options.env ?? {},
    stdout: options.capture ? "piped" : "inherit",
    stderr: "inherit",
  }).spawn();
  let output = "";
  if (options.capture && child.stdout) {
    const decoder = new TextDecoder();
    for await (const chunk of child.stdout) {
      const text = decoder.decode(chunk, { stream: true });
      output += text;
      await Deno.stdout.write(chunk);
    }
  }
  const status = await child.status;
  const step = { name, ok: status.success, seconds: (performance.now() - t0) / 1000 };
  steps.push(step);
  say(`${name}: ${step.ok ? "ok" : "FAILED"} (${step.seconds.toFixed(1)} s)`);
  return { ok: status.success, output };
}

/** Reads deno test's summary: `ok | 12 passed (3 steps) | 0 failed (4s)`. */
function parseSummary(output: string): { passed: number; failed: number } | undefined {
  // deno-lint-ignore no-control-regex
  const plain = output.replace(/\x1b\[[0-9;]*m/g, "");
  const match = /(?:ok|FAILED) \| (\d+) passed(?: \(\d+ steps?\))? \| (\d+) failed/.exec(plain);
  return match ? { passed: Number(match[1]), failed: Number(match[2]) } : undefined;
}

async function main(): Promise<number> {
  const gates = [
    await run("fmt", ["fmt", "--check"]),
    await run("lint", ["lint"]),
    await run("type check", ["check", "."]),
  ];
  const build = await run("build dist/aicr", ["run", "-A", "scripts/build.ts"]);
  const clusterBuild = await run("build the control plane (cached)", [
    "run",
    "-A",
    "tests/cluster/cluster.ts",
    "build",
  ]);

  const reuse = Deno.env.get("AICR_CLUSTER_DIR");
  // Under the repository, not /tmp: the agent pod mounts an emptyDir over /tmp, which
  // would hide the kubelet stand-in's per-node files from the processes it runs.
  await mkdir(join(ROOT, ".cluster-runs"), { recursive: true });
  const stateDir = reuse ?? await mkdtemp(join(ROOT, ".cluster-runs", "run-"));
  const env = { AICR_CLUSTER_DIR: stateDir, AICR_BIN: join(ROOT, "dist", "aicr") };
  let attempted = false;
  let start: { ok: boolean } = { ok: true };
  let tests: { passed: number; failed: number } | undefined;
  try {
    if (!reuse && clusterBuild.ok) {
      attempted = true;
      start = await run(
        "start the local cluster",
        ["run", "-A", "tests/cluster/cluster.ts", "up"],
        {
          env,
        },
      );
    }
    const filter = Deno.env.get("AICR_TEST_FILTER");
    const result = await run("deno test", [
      "test",
      "-A",
      "--no-prompt",
      ...(filter ? ["--filter", filter] : []),
    ], { env, capture: true });
    tests = parseSummary(result.output);
  } finally {
    // Also after a failed start: whatever it did start must stop.
    if (attempted) {
      await run("stop the local cluster", ["run", "-A", "tests/cluster/cluster.ts", "down"], {
        env,
      });
    }
    if (!reuse) await rm(stateDir, { recursive: true, force: true }).catch(() => {});
  }

  // A cluster that did not start is a failure even when each test then starts its own.
  const setupFailures = [...gates, build, clusterBuild, start].filter((s) => !s.ok).length;
  const passed = (tests?.passed ?? 0) + gates.filter((g) => g.ok).length;
  const failed = (tests?.failed ?? (tests ? 0 : 1)) + setupFailures;
  for (const step of steps) {
    say(`${step.ok ? "ok    " : "FAILED"} ${step.name} (${step.seconds.toFixed(1)} s)`);
  }
  // deno-lint-ignore no-console
  console.log(`tests: ${passed} passed, ${failed} failed`);
  return failed === 0 ? 0 : 1;
}

Deno.exitCode = await main();
