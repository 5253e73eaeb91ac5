/**
 * The shipped alert rules (`charts/aicr/files/aicr-rules.yaml`, from `manifests/monitoring.ts`)
 * under Prometheus' own `promtool`: the file is valid, and `promtool test rules` runs the unit
 * tests of `testdata/alerts_test.yaml`, which make every alert fire (drift appears, baseline
 * unreadable, daemon down, version skew, collections failing) and keep it quiet where it must.
 * Every series the rules and the dashboard read is one the daemon exports. Needs Debian's
 * `prometheus` package (`.ci/run` installs it).
 *
 * @module
 */
import assert from "node:assert/strict";
import { copyFile, mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { parse } from "yaml";
import { createDaemonMetrics } from "../../daemon/metrics.ts";
import { DAEMON_ALERTS, daemonAlertRules, daemonDashboard } from "../../manifests/monitoring.ts";
import { CHART_DIR } from "../../scripts/chart.ts";

const HERE = dirname(fileURLToPath(import.meta.url));
const RULES = join(CHART_DIR, "files", "aicr-rules.yaml");
const TESTS = join(HERE, "testdata", "alerts_test.yaml");
const PROMTOOL = Deno.env.get("PROMTOOL") ?? "/usr/bin/promtool";

async function promtool(args: string[], cwd: string): Promise<{ code: number; text: string }> {
  try {
    await Deno.stat(PROMTOOL);
  } catch {
    assert.fail(
      `promtool not found at ${PROMTOOL}: install it with 'apt-get update && apt-get install -y prometheus' (as root), or set PROMTOOL to its path`,
    );
  }
  const out = await new Deno.Command(PROMTOOL, { args, cwd, stdout: "piped", stderr: "piped" })
    .output();
  const text = new TextDecoder().decode(out.stdout) + new TextDecoder().decode(out.stderr);
  return { code: out.code, text };
}

Deno.test("alerts: promtool accepts the shipped rules file", async () => {
  const run = await promtool(["check", "rules", RULES], CHART_DIR);
  assert.equal(run.code, 0, run.text);
  assert.match(run.text, new RegExp(`SUCCESS: ${DAEMON_ALERTS.length} rules found`));
});

Deno.test("alerts: promtool test rules passes for every alert", async () => {
  const dir = await mkdtemp(join(tmpdir(), "aicr-promtool-"));
  try {
    await copyFile(RULES, join(dir, "aicr-rules.yaml"));
    await copyFile(TESTS, join(dir, "alerts_test.yaml"));
    const run = await promtool(["test", "rules", "alerts_test.yaml"], dir);
    assert.equal(run.code, 0, run.text);
    assert.match(run.text, /SUCCESS/);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

Deno.test("alerts: every alert is made to fire by some promtool test", async () => {
  const tests = parse(await readFile(TESTS, "utf8")) as {
    tests: { alert_rule_test?: { alertname: string; exp_alerts: unknown[] }[] }[];
  };
  const fired = new Set(
    tests.tests.flatMap((t) => t.alert_rule_test ?? []).filter((a) => a.exp_alerts.length > 0)
      .map((a) => a.alertname),
  );
  const shipped = daemonAlertRules().groups.flatMap((g) => g.rules.map((r) => r.alert));
  assert.deepEqual(shipped, [...DAEMON_ALERTS]);
  assert.deepEqual(shipped.filter((a) => !fired.has(a)), [], "alerts no test makes fire");
});

/** Metric names a PromQL expression reads (identifiers followed by `{`, `[` or an operator). */
function metricNames(expr: string): string[] {
  const noStrings = expr.replace(/"[^"]*"/g, '""');
  const names = [...noStrings.matchAll(/\b([a-z_:][a-z0-9_:]*)\s*(?=\{|\[|\s*[)><=!*+-]|$)/g)]
    .map((m) => m[1]!);
  const words = new Set([
    "by",
    "on",
    "without",
    "ignoring",
    "group_left",
    "group_right",
    "and",
    "or",
    "unless",
    "bool",
    "count",
    "sum",
    "max",
    "min",
    "avg",
    "rate",
    "increase",
    "vector",
    "time",
  ]);
  return names.filter((n) => !words.has(n) && /^(aicr_|process_|up$)/.test(n));
}

Deno.test("alerts: the rules and the dashboard read only series the daemon exports (and up)", () => {
  const metrics = createDaemonMetrics({ version: "1.0.0", commit: "c" }, {
    processStats: () => ({ cpuSeconds: 1, residentBytes: 1, startTimeSeconds: 1 }),
  });
  const exported = new Set(["up"]);
  for (const [, name, type] of metrics.render().matchAll(/^# TYPE (\S+) (\S+)$/gm)) {
    exported.add(name!);
    if (type === "histogram") {
      for (const s of ["_bucket", "_sum", "_count"]) exported.add(name + s);
    }
  }
  const exprs = [
    ...daemonAlertRules().groups.flatMap((g) => g.rules.map((r) => r.expr)),
    ...(daemonDashboard().panels as { targets: { expr: string }[] }[]).flatMap((p) =>
      p.targets.map((t) => t.expr)
    ),
  ];
  const read = exprs.flatMap(metricNames);
  assert.ok(read.includes("aicr_drift_readings") && read.includes("up"), read.join(","));
  assert.deepEqual([...new Set(read.filter((n) => !exported.has(n)))], []);
});
