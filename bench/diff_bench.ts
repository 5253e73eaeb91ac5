/**
 * Bench of `aicr diff`: two ~1 MiB snapshots, and a fleet report over 1,000 realistic
 * node snapshots (~1,000 readings each), with wall time and peak memory (VmHWM of a
 * child process that does only that scenario). Goals from issue #7: the fleet of 1,000
 * under 1 s and under 300 MiB.
 *
 * Scale (issue #15): mixed fleets (H100, GB200, CPU nodes from the real captures, ~1,300
 * readings each, cohorts by default) of 1,000 and 10,000 nodes fed one snapshot at a time to
 * `createFleetBuilder` (the snapshot dropped after each add), side by side in one run, so the
 * 10k/1k ratios show how time and memory scale. Goal: 10,000 under 10 s and under 1 GiB.
 * JSON parsing of snapshots is timed on its own (per snapshot, over 500).
 *
 * Run: `deno run -A bench/diff_bench.ts` (add `--json` for one JSON line, `--stream` to also
 * parse the fleet from one YAML stream, which takes about a minute in the YAML parser,
 * `--no-10k` to skip the 10,000-node fleet).
 */
import { readFileSync } from "node:fs";
import process from "node:process";
import {
  buildFleetReport,
  createFleetBuilder,
  DEFAULT_IGNORE_PATTERNS,
  diffSnapshots,
  encodeSnapshot,
  parseFleetText,
  parseSnapshot,
  renderDiff,
  renderFleetHtml,
  renderFleetTable,
} from "../snapshot/mod.ts";
import type { Snapshot } from "../snapshot/mod.ts";
import {
  makeLargeSnapshot,
  makeNodeSnapshot,
  padSnapshot,
  setReading,
} from "../snapshot/testdata/generate.ts";
import { generateMixedFleet, mixedCounts } from "../snapshot/testdata/mixed_fleet.ts";

const MIB = 1024 * 1024;
const FLEET_SIZE = 1000;
const READINGS_PAD = 900;
const GOAL_FLEET_MS = 1000;
const GOAL_FLEET_MIB = 300;
const GOAL_10K_MS = 10_000;
const GOAL_10K_MIB = 1024;

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

/**
 * A mixed fleet of `total` nodes (55 % H100, 30 % GB200, the rest CPU nodes), NodeTopology
 * lists cut to 50 names as at this scale they must be (uncut, each snapshot would carry every
 * node's name in every label: 1.3 MB per snapshot at 10,000 nodes), with one planted change
 * per 1,000 nodes; fed to the builder one snapshot at a time.
 */
function childMixedFleet(total: number): Result {
  const counts = mixedCounts(total);
  const builder = createFleetBuilder({ ignore: DEFAULT_IGNORE_PATTERNS });
  let addMs = 0;
  let addCpuMs = 0;
  let genMs = 0;
  let readings = 0;
  let planted = 0;
  let i = 0;
  let mark = performance.now();
  for (const snapshot of generateMixedFleet(counts, { maxNodesPerEntry: 50 })) {
    padSnapshot(snapshot, READINGS_PAD - 300);
    if (i % 1000 === 17) {
      setReading(snapshot, "OS.sysctl./proc/sys/vm/swappiness", "10");
      planted++;
    }
    if (i === 0) {
      // Compared readings: NodeTopology (one entry per node and label value) is left out.
      readings = snapshot.measurements.filter((m) => m.type !== "NodeTopology").reduce(
        (n, m) => n + m.subtypes.reduce((k, s) => k + Object.keys(s.data).length, 0),
        0,
      );
    }
    i++;
    const node = snapshot.metadata["source-node"];
    const cpu = process.cpuUsage();
    const start = performance.now();
    genMs += start - mark;
    builder.add({ node, snapshot });
    mark = performance.now();
    addMs += mark - start;
    const used = process.cpuUsage(cpu);
    addCpuMs += (used.user + used.system) / 1000;
  }
  const finish = time(() => builder.finish());
  const table = time(() => renderFleetTable(finish.value));
  const html = time(() => renderFleetHtml(finish.value));
  return {
    nodes: total,
    readingsPerNode: readings,
    cohorts: finish.value.summary.cohorts,
    outliers: finish.value.summary.outliers,
    planted,
    generateMs: genMs,
    addMs,
    addCpuMs,
    finishMs: finish.ms,
    reportMs: addMs + finish.ms,
    tableMs: table.ms,
    htmlMs: html.ms,
    htmlMiB: new TextEncoder().encode(html.value).length / MIB,
    peakMiB: peakMiB(),
  };
}

/** JSON parse (with validation) of 500 mixed-fleet snapshots: milliseconds per snapshot. */
function childParse(): Result {
  const texts: string[] = [];
  for (
    const snapshot of generateMixedFleet({ "p5-h100": 300, "p6-gb200": 150, "system-m7i": 50 })
  ) {
    padSnapshot(snapshot, READINGS_PAD - 300);
    texts.push(encodeSnapshot(snapshot, "json"));
  }
  const bytes = texts.reduce((n, t) => n + new TextEncoder().encode(t).length, 0);
  const parse = time(() => texts.map((t) => parseSnapshot(t)));
  return {
    snapshots: texts.length,
    kibPerSnapshot: bytes / texts.length / 1024,
    msPerSnapshot: parse.ms / texts.length,
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
      : scenario === "mixed-1k"
      ? childMixedFleet(1000)
      : scenario === "mixed-10k"
      ? childMixedFleet(10_000)
      : scenario === "parse"
      ? childParse()
      : childFleetStream();
    // deno-lint-ignore no-console -- the bench's own output
    console.log(JSON.stringify(result));
  } else {
    const diff = await runChild("diff");
    const fleetResult = await runChild("fleet");
    const stream: Result = Deno.args.includes("--stream") ? await runChild("fleet-stream") : {};
    const mixed1k = await runChild("mixed-1k");
    const mixed10k: Result = Deno.args.includes("--no-10k") ? {} : await runChild("mixed-10k");
    const parse = await runChild("parse");
    if (Deno.args.includes("--json")) {
      // deno-lint-ignore no-console -- the bench's own output
      console.log(
        JSON.stringify({ diff, fleet: fleetResult, fleetStream: stream, mixed1k, mixed10k, parse }),
      );
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
        "",
        `mixed fleets, cohorts by default, one snapshot at a time into createFleetBuilder (${mixed1k.readingsPerNode} readings per node)`,
        `  nodes    report (add + finish)      cpu       finish    table   html (MiB)      peak MiB   cohorts  outliers/planted`,
        ...[mixed1k, mixed10k].filter((r) => r.nodes !== undefined).map((r) =>
          `  ${String(r.nodes).padEnd(7)}  ${fmt(r.reportMs, 0).padStart(7)} ms  (${
            fmt(r.addMs, 0)
          } + ${fmt(r.finishMs, 0)})  ${fmt(r.addCpuMs, 0).padStart(6)} ms  ${
            fmt(r.finishMs, 0).padStart(5)
          } ms  ${fmt(r.tableMs, 0).padStart(4)} ms  ${fmt(r.htmlMs, 0)} ms (${
            fmt(r.htmlMiB, 2)
          })  ${fmt(r.peakMiB, 0).padStart(8)}   ${r.cohorts}        ${r.outliers}/${r.planted}`
        ),
        ...(mixed10k.nodes === undefined ? ["  (10,000 skipped: --no-10k)"] : [
          `  10k/1k   time x${fmt(mixed10k.reportMs! / mixed1k.reportMs!, 2)}, peak memory x${
            fmt(mixed10k.peakMiB! / mixed1k.peakMiB!, 2)
          } (nodes x10)`,
          `  10,000   report ${fmt(mixed10k.reportMs! / 1000, 2)} s   goal < ${
            GOAL_10K_MS / 1000
          } s   ${ok(mixed10k.reportMs! < GOAL_10K_MS)};  peak ${
            fmt(mixed10k.peakMiB, 0)
          } MiB   goal < ${GOAL_10K_MIB} MiB   ${ok(mixed10k.peakMiB! < GOAL_10K_MIB)}`,
        ]),
        `  JSON parse of one snapshot (${fmt(parse.kibPerSnapshot, 0)} KiB, with validation): ${
          fmt(parse.msPerSnapshot, 2)
        } ms, measured over ${parse.snapshots}; 10,000 would add ${
          fmt(parse.msPerSnapshot! * 10, 1)
        } s of parsing (x10,000 of the measured rate)`,
      ];
      // deno-lint-ignore no-console -- the bench's own output
      console.log(lines.join("\n"));
    }
  }
}
