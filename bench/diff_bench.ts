/**
 * Bench of `aicr diff`: two ~1 MiB snapshots, and a fleet report over 1,000 realistic
 * node snapshots (~1,000 readings each), with wall time and peak memory (VmHWM of a
 * child process that does only that scenario). Goals from issue #7: the fleet of 1,000
 * under 1 s and under 300 MiB.
 *
 * Run: `deno run -A bench/diff_bench.ts` (add `--json` for one JSON line, `--stream` to also
 * parse the fleet from one YAML stream, which takes about a minute in the YAML parser).
 */
import { readFileSync } from "node:fs";
import process from "node:process";
import {
  buildFleetReport,
  DEFAULT_IGNORE_PATTERNS,
  diffSnapshots,
  encodeSnapshot,
  parseSnapshot,
  renderDiff,
  renderFleetHtml,
  renderFleetTable,
} from "../snapshot/mod.ts";
import type { Snapshot } from "../snapshot/mod.ts";
import { parseFleetText } from "../cli/diff.ts";
import {
  makeLargeSnapshot,
  makeNodeSnapshot,
  padSnapshot,
  setReading,
} from "../snapshot/testdata/generate.ts";

const MIB = 1024 * 1024;
const FLEET_SIZE = 1000;
const READINGS_PAD = 900;
const GOAL_FLEET_MS = 1000;
const GOAL_FLEET_MIB = 300;

function peakMiB(): number {
  const status = readFileSync("/proc/self/status", "utf8");
  const kib = Number(/VmHWM:\s+(\d+)/.exec(status)?.[1] ?? NaN);
  return kib / 1024;
}

function rssMiB(): number {
  const status = readFileSync("/proc/self/status", "utf8");
  return Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? NaN) / 1024;
}

/** Best wall time of `runs` runs, and the CPU time (user + system) of that run. */
function time<T>(fn: () => T, runs = 1): { ms: number; cpuMs: number; value: T } {
  let best = Infinity;
  let cpuMs = Infinity;
  let value!: T;
  for (let i = 0; i < runs; i++) {
    const cpu = process.cpuUsage();
    const start = performance.now();
    value = fn();
    const ms = performance.now() - start;
    const used = process.cpuUsage(cpu);
    if (ms < best) {
      best = ms;
      cpuMs = (used.user + used.system) / 1000;
    }
  }
  return { ms: best, cpuMs, value };
}

function fleet(): Snapshot[] {
  const nodes = Array.from({ length: FLEET_SIZE }, (_, i) => `gpu-node-${i + 1}`);
  return nodes.map((node, i) => {
    const s = padSnapshot(
      makeNodeSnapshot(node, { clusterNodes: nodes, boot: i + 1 }),
      READINGS_PAD,
    );
    if (i % 100 === 16) setReading(s, "GPU.smi.driver", "570.124.06");
    return s;
  });
}

/** The fleet encoded node by node, so the snapshot objects never all live at once. */
function fleetTexts(): string[] {
  const nodes = Array.from({ length: FLEET_SIZE }, (_, i) => `gpu-node-${i + 1}`);
  return nodes.map((node, i) => {
    const s = padSnapshot(
      makeNodeSnapshot(node, { clusterNodes: nodes, boot: i + 1 }),
      READINGS_PAD,
    );
    if (i % 100 === 16) setReading(s, "GPU.smi.driver", "570.124.06");
    return encodeSnapshot(s);
  });
}

type Result = Record<string, number>;

function childDiff(): Result {
  const a = makeLargeSnapshot("gpu-node-1", MIB);
  const b = makeLargeSnapshot("gpu-node-1", MIB);
  setReading(b, "GPU.smi.driver", "570.124.06");
  setReading(b, "OS.kmod.nvidia_fs", true);
  const ta = encodeSnapshot(a);
  const tb = encodeSnapshot(b);
  const parse = time(() => [parseSnapshot(ta), parseSnapshot(tb)]);
  const [pa, pb] = parse.value as [Snapshot, Snapshot];
  const diff = time(() => diffSnapshots(pa, pb, { ignore: DEFAULT_IGNORE_PATTERNS }), 5);
  const render = time(() => renderDiff(diff.value, "table"));
  return {
    bytesA: new TextEncoder().encode(ta).length,
    bytesB: new TextEncoder().encode(tb).length,
    readings: Object.values(pa.measurements).reduce(
      (n, m) => n + m.subtypes.reduce((k, s) => k + Object.keys(s.data).length, 0),
      0,
    ),
    changes: diff.value.summary.total,
    parseMs: parse.ms,
    diffMs: diff.ms,
    diffCpuMs: diff.cpuMs,
    renderMs: render.ms,
    peakMiB: peakMiB(),
  };
}

function childFleet(): Result {
  const snapshots = fleet();
  const inputMiB = rssMiB();
  const members = snapshots.map((snapshot) => ({
    node: snapshot.metadata["source-node"],
    snapshot,
  }));
  const report = time(() => buildFleetReport(members, { ignore: DEFAULT_IGNORE_PATTERNS }));
  const table = time(() => renderFleetTable(report.value));
  const html = time(() => renderFleetHtml(report.value));
  return {
    nodes: snapshots.length,
    readingsPerNode: snapshots[0]!.measurements.reduce(
      (n, m) => n + m.subtypes.reduce((k, s) => k + Object.keys(s.data).length, 0),
      0,
    ),
    outliers: report.value.summary.outliers,
    reportMs: report.ms,
    reportCpuMs: report.cpuMs,
    tableMs: table.ms,
    htmlMs: html.ms,
    rssWithInputMiB: inputMiB,
    peakMiB: peakMiB(),
  };
}

function childFleetStream(): Result {
  const text = fleetTexts().join("---\n");
  const bytes = new TextEncoder().encode(text).length;
  const before = peakMiB();
  const start = performance.now();
  const snapshots = parseFleetText(text, "fleet.yaml");
  const parsed = performance.now();
  const report = buildFleetReport(
    snapshots.map((snapshot) => ({ node: snapshot.metadata["source-node"], snapshot })),
    { ignore: DEFAULT_IGNORE_PATTERNS },
  );
  const end = performance.now();
  return {
    streamMiB: bytes / MIB,
    outliers: report.summary.outliers,
    parseMs: parsed - start,
    reportMs: end - parsed,
    peakBeforeParseMiB: before,
    peakMiB: peakMiB(),
  };
}

async function runChild(scenario: string): Promise<Result> {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", "--no-prompt", new URL(import.meta.url).pathname, "--child", scenario],
    stdout: "piped",
    stderr: "inherit",
  }).output();
  if (out.code !== 0) throw new Error(`bench child '${scenario}' failed with exit ${out.code}`);
  return JSON.parse(new TextDecoder().decode(out.stdout));
}

function fmt(n: number | undefined, digits = 1): string {
  return n === undefined ? "?" : n.toFixed(digits);
}

if (import.meta.main) {
  const childAt = Deno.args.indexOf("--child");
  if (childAt >= 0) {
    const scenario = Deno.args[childAt + 1];
    const result = scenario === "diff"
      ? childDiff()
      : scenario === "fleet"
      ? childFleet()
      : childFleetStream();
    // deno-lint-ignore no-console -- the bench's own output
    console.log(JSON.stringify(result));
  } else {
    const diff = await runChild("diff");
    const fleetResult = await runChild("fleet");
    const stream: Result = Deno.args.includes("--stream") ? await runChild("fleet-stream") : {};
    if (Deno.args.includes("--json")) {
      // deno-lint-ignore no-console -- the bench's own output
      console.log(JSON.stringify({ diff, fleet: fleetResult, fleetStream: stream }));
    } else {
      const ok = (pass: boolean) => pass ? "ok" : "MISSED";
      const lines = [
        `aicr diff bench (deno ${Deno.version.deno}, ${navigator.hardwareConcurrency} cpus)`,
        "",
        `two snapshots: ${fmt(diff.bytesA! / MIB, 2)} MiB and ${
          fmt(diff.bytesB! / MIB, 2)
        } MiB, ${diff.readings} readings each, ${diff.changes} changes`,
        `  diff           ${fmt(diff.diffMs)} ms (best of 5; cpu ${fmt(diff.diffCpuMs)} ms)`,
        `  parse both     ${fmt(diff.parseMs)} ms`,
        `  render table   ${fmt(diff.renderMs)} ms`,
        `  peak memory    ${fmt(diff.peakMiB)} MiB (VmHWM, whole process)`,
        "",
        `fleet: ${fleetResult.nodes} snapshots in memory, ${fleetResult.readingsPerNode} readings each, ${fleetResult.outliers} planted outliers found`,
        `  fleet report   ${fmt(fleetResult.reportMs)} ms   goal < ${GOAL_FLEET_MS} ms   ${
          ok(fleetResult.reportMs! < GOAL_FLEET_MS)
        }  (first run, cold JIT; cpu ${fmt(fleetResult.reportCpuMs)} ms)`,
        `  peak memory    ${fmt(fleetResult.peakMiB)} MiB   goal < ${GOAL_FLEET_MIB} MiB   ${
          ok(fleetResult.peakMiB! < GOAL_FLEET_MIB)
        }  (VmHWM incl. runtime and the 1,000 input snapshots; RSS with inputs alone ${
          fmt(fleetResult.rssWithInputMiB)
        } MiB)`,
        `  render table   ${fmt(fleetResult.tableMs)} ms, html ${fmt(fleetResult.htmlMs)} ms`,
        "",
        ...(stream.parseMs === undefined
          ? [
            "(add --stream for the fleet parsed from one YAML stream: about a minute of YAML parsing)",
          ]
          : [
            `fleet end to end from one YAML stream of ${fmt(stream.streamMiB)} MiB (informational)`,
            `  parse          ${fmt(stream.parseMs)} ms`,
            `  fleet report   ${fmt(stream.reportMs)} ms`,
            `  peak memory    ${fmt(stream.peakMiB)} MiB (${
              fmt(stream.peakBeforeParseMiB)
            } MiB before parsing: generating the stream)`,
            "  (the parse time is the snapshot codec's YAML parser, not the diff)",
          ]),
      ];
      // deno-lint-ignore no-console -- the bench's own output
      console.log(lines.join("\n"));
    }
  }
}
