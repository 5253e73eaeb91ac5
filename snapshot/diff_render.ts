/**
 * Renderings of drift: a readable table (grouped by measurement, values side by side,
 * optional ANSI colour) and stable YAML/JSON documents, for two snapshots and for a fleet.
 *
 * @module
 */
import { stringify } from "yaml";
import { encodeJson } from "./codec.ts";
import type { Change, DiffResult } from "./diff.ts";
import type { FleetDifference, FleetReport } from "./fleet.ts";
import type { Reading } from "./model.ts";
import { collapsePerGpu } from "./per_gpu.ts";

/** Formats `aicr diff` renders for two snapshots (html in `fleet_html.ts`). */
export const DIFF_FORMATS = ["table", "yaml", "json", "html"] as const;

/** One diff format. */
export type DiffFormat = typeof DIFF_FORMATS[number];

/** Formats `aicr diff --fleet` renders (html in `fleet_html.ts`). */
export const FLEET_FORMATS = ["table", "yaml", "json", "html"] as const;

/** Options for the table renderers. */
export interface TableOptions {
  /** Colour with ANSI escapes (only when stdout is a terminal). @default false */
  color?: boolean;
  /** Longest value shown in a cell before it is cut with `…`. @default 60 */
  maxValueWidth?: number;
}

const ANSI = {
  red: "\x1b[31m",
  green: "\x1b[32m",
  yellow: "\x1b[33m",
  bold: "\x1b[1m",
  dim: "\x1b[2m",
  reset: "\x1b[0m",
} as const;

/**
 * Shows a reading in a table: strings as is (empty as `""`), absent as `-`, other
 * scalars as their YAML text, control characters escaped so one reading stays one line.
 *
 * @param value the reading, or undefined when absent
 * @param maxWidth longest text kept
 * @returns the cell text
 */
export function formatReading(value: Reading | undefined, maxWidth = 60): string {
  if (value === undefined) return "-";
  let text: string;
  if (value === null) text = "null";
  else if (typeof value === "string") {
    // deno-lint-ignore no-control-regex -- control characters are exactly what is escaped
    text = value === "" ? '""' : value.replace(/[\x00-\x1f\x7f]/g, (c) => {
      if (c === "\n") return "\\n";
      if (c === "\t") return "\\t";
      return `\\x${c.charCodeAt(0).toString(16).padStart(2, "0")}`;
    });
  } else text = String(value);
  return text.length > maxWidth ? text.slice(0, Math.max(1, maxWidth - 1)) + "…" : text;
}

function paint(text: string, color: string, enabled: boolean): string {
  return enabled ? color + text + ANSI.reset : text;
}

const KIND_COLOR: Record<Change["kind"], string> = {
  added: ANSI.green,
  removed: ANSI.red,
  modified: ANSI.yellow,
};

/**
 * Renders a diff as a table grouped by measurement type. Starts with `NO CHANGES` or
 * `CHANGES (a added, r removed, m modified)` and ends with `DRIFT DETECTED` or
 * `NO DRIFT`, as upstream does.
 *
 * @param result the diff
 * @param options colour and cell width
 * @returns the text, newline-terminated
 */
export function renderDiffTable(result: DiffResult, options: TableOptions = {}): string {
  const { color = false, maxValueWidth = 60 } = options;
  const { summary } = result;
  const lines: string[] = [];
  lines.push(`BASELINE ${result.baselineSource}`);
  lines.push(`TARGET   ${result.targetSource}`);
  lines.push("");
  if (summary.total === 0) {
    lines.push("NO CHANGES");
  } else {
    lines.push(
      `CHANGES (${summary.added} added, ${summary.removed} removed, ${summary.modified} modified)`,
    );
    const rows = collapseChanges(result.changes).map(({ path, items: [c] }) => ({
      change: c as Change,
      kind: (c as Change).kind.toUpperCase(),
      path,
      baseline: formatReading((c as Change).baseline, maxValueWidth),
      target: formatReading((c as Change).target, maxValueWidth),
    }));
    const header = { kind: "KIND", path: "PATH", baseline: "BASELINE", target: "TARGET" };
    // Loops, not Math.max(...rows): a spread of every change overflows the stack on a large diff.
    const width = {
      kind: header.kind.length,
      path: header.path.length,
      baseline: header.baseline.length,
    };
    for (const r of rows) {
      width.kind = Math.max(width.kind, r.kind.length);
      width.path = Math.max(width.path, r.path.length);
      width.baseline = Math.max(width.baseline, r.baseline.length);
    }
    const line = (kind: string, path: string, baseline: string, target: string) =>
      `  ${kind.padEnd(width.kind)}  ${path.padEnd(width.path)}  ${
        baseline.padEnd(width.baseline)
      }  ${target}`.trimEnd();
    let group = "";
    for (const row of rows) {
      const type = row.path.slice(0, row.path.indexOf("."));
      if (type !== group) {
        group = type;
        lines.push("");
        lines.push(paint(type, ANSI.bold, color));
        lines.push(
          paint(line(header.kind, header.path, header.baseline, header.target), ANSI.dim, color),
        );
      }
      const kindCell = paint(row.kind.padEnd(width.kind), KIND_COLOR[row.change.kind], color);
      lines.push(
        `  ${kindCell}  ${row.path.padEnd(width.path)}  ${
          row.baseline.padEnd(width.baseline)
        }  ${row.target}`.trimEnd(),
      );
      const nodes = row.change.nodes;
      if (nodes) {
        const parts: string[] = [];
        if (nodes.added.length > 0) parts.push(`+${nodes.added.join(",+")}`);
        if (nodes.removed.length > 0) parts.push(`-${nodes.removed.join(",-")}`);
        lines.push(
          `  ${"".padEnd(width.kind)}  ${paint(`nodes: ${parts.join(" ")}`, ANSI.dim, color)}`,
        );
      }
    }
  }
  if (result.statusChanges.length > 0) {
    lines.push("");
    lines.push("SOURCE STATUS (context, not counted as drift)");
    for (const s of result.statusChanges) {
      lines.push(`  ${s.path}: ${s.baseline ?? "-"} -> ${s.target ?? "-"}`);
    }
  }
  lines.push("");
  lines.push(
    summary.total > 0
      ? paint("DRIFT DETECTED", ANSI.red, color)
      : paint("NO DRIFT", ANSI.green, color),
  );
  return lines.join("\n") + "\n";
}

/**
 * Changes for display: the same change on several GPUs of the node is one entry with a GPU
 * range path (`GPU.gpu-0..7.power.limit.current`).
 *
 * @param changes changes sorted by path
 * @returns the entries, each with its changes
 */
export function collapseChanges(
  changes: readonly Change[],
): { path: string; items: Change[]; gpus?: number[] }[] {
  return collapsePerGpu(changes, {
    path: (c) => c.path,
    same: (a, b) =>
      a.kind === b.kind && formatReading(a.baseline, 1e4) === formatReading(b.baseline, 1e4) &&
      formatReading(a.target, 1e4) === formatReading(b.target, 1e4),
  });
}

/**
 * An outlier's differences for display: the same difference on several GPUs is one entry
 * with a GPU range path.
 *
 * @param differences differences sorted by path
 * @returns the entries, each with its differences
 */
export function collapseDifferences(
  differences: readonly FleetDifference[],
): { path: string; items: FleetDifference[]; gpus?: number[] }[] {
  return collapsePerGpu(differences, {
    path: (d) => d.path,
    same: (a, b) =>
      a.kind === b.kind && formatReading(a.value, 1e4) === formatReading(b.value, 1e4) &&
      formatReading(a.fleet, 1e4) === formatReading(b.fleet, 1e4),
  });
}

/**
 * The machine document of a diff: `baselineSource`, `targetSource`, `changes` (kind,
 * severity, path, baseline, target, and `nodes` for NodeTopology moves), `summary`,
 * `statusChanges`. Key order is fixed; values keep their types.
 *
 * @param result the diff
 * @returns a plain object ready to encode
 */
export function diffDocument(result: DiffResult): Record<string, unknown> {
  return {
    baselineSource: result.baselineSource,
    targetSource: result.targetSource,
    changes: result.changes.map((c) => {
      const out: Record<string, unknown> = { kind: c.kind, severity: c.severity, path: c.path };
      if (c.baseline !== undefined) out.baseline = c.baseline;
      if (c.target !== undefined) out.target = c.target;
      if (c.nodes) out.nodes = c.nodes;
      return out;
    }),
    summary: { ...result.summary },
    statusChanges: result.statusChanges.map((s) => ({ ...s })),
  };
}

/**
 * Encodes a plain document as YAML or JSON, deterministically (bigints exact).
 *
 * @param doc the document
 * @param format `yaml` or `json`
 * @returns the text, newline-terminated
 */
export function encodeDocument(doc: unknown, format: "yaml" | "json"): string {
  if (format === "json") return encodeJson(doc) + "\n";
  return stringify(doc, { version: "1.1", indent: 2, lineWidth: 0, indentSeq: true });
}

/**
 * Renders a diff in any {@link DIFF_FORMATS}.
 *
 * @param result the diff
 * @param format the format
 * @param options table options
 * @returns the text
 */
export function renderDiff(
  result: DiffResult,
  format: Exclude<DiffFormat, "html">,
  options: TableOptions = {},
): string {
  return format === "table"
    ? renderDiffTable(result, options)
    : encodeDocument(diffDocument(result), format);
}

/**
 * Formats one outlier line: `node: path value (cohort: reference on N nodes)`.
 *
 * @param node the node
 * @param d the difference
 * @param maxWidth longest value shown
 * @param path the path shown (a GPU range for a collapsed entry) @default d.path
 * @returns the line
 */
export function formatFleetDifference(
  node: string,
  d: FleetDifference,
  maxWidth = 60,
  path: string = d.path,
): string {
  const value = d.kind === "removed" ? "(absent)" : formatReading(d.value, maxWidth);
  const fleet = d.kind === "added" ? "(absent)" : formatReading(d.fleet, maxWidth);
  return `${node}: ${path} ${value} (cohort: ${fleet} on ${d.fleetNodes} node${
    d.fleetNodes === 1 ? "" : "s"
  })`;
}

/**
 * Formats one line for a subtype an outlier lacks entirely:
 * `node: OS.sysctl.* (absent: 1045 readings) (cohort: present on 199 nodes)`.
 *
 * @param node the node
 * @param absent the absent subtype
 * @returns the line
 */
export function formatAbsentSubtype(
  node: string,
  absent: NonNullable<FleetReport["outliers"][number]["absentSubtypes"]>[number],
): string {
  return `${node}: ${absent.subtype}.* (absent: ${absent.readings} reading${
    absent.readings === 1 ? "" : "s"
  }) (cohort: present on ${absent.fleetNodes} node${absent.fleetNodes === 1 ? "" : "s"})`;
}

/**
 * One line per cohort: its name, its nodes, its outliers; a cohort of one node says so.
 *
 * @param report the fleet report
 * @returns `[name, nodes, outliers]` rows, largest cohort first
 */
function cohortRows(report: FleetReport): [string, string, string][] {
  return report.cohorts.map((c) => [
    c.name,
    String(c.nodes.length),
    c.nodes.length === 1 ? "- (one node: nothing to compare with)" : String(c.outliers),
  ]);
}

/**
 * Renders a fleet report as text: the cohorts (name, nodes, outliers), then per cohort
 * with outliers one line per outlier reading (the same difference on several GPUs once,
 * as `GPU.gpu-0..7.<key>`), and the final `DRIFT DETECTED`/`NO DRIFT`.
 *
 * @param report the fleet report
 * @param options colour and cell width
 * @returns the text, newline-terminated
 */
export function renderFleetTable(report: FleetReport, options: TableOptions = {}): string {
  const { color = false, maxValueWidth = 60 } = options;
  const { summary } = report;
  const lines: string[] = [];
  lines.push(
    `FLEET (${summary.nodes} nodes in ${summary.cohorts} cohort${
      summary.cohorts === 1 ? "" : "s"
    }, ${summary.outliers} outliers, ${summary.differences} differences${
      summary.unreadable > 0 ? `, ${summary.unreadable} unreadable` : ""
    })`,
  );
  lines.push(
    report.groupBy.length > 0
      ? `COHORTS BY ${report.groupBy.join(", ")}`
      : "ONE COHORT (--group-by none)",
  );
  lines.push("");
  const rows = cohortRows(report);
  let nameWidth = 6;
  for (const r of rows) nameWidth = Math.max(nameWidth, r[0].length);
  lines.push(paint(`${"COHORT".padEnd(nameWidth)}  NODES  OUTLIERS`, ANSI.dim, color));
  for (const [name, nodes, outliers] of rows) {
    lines.push(`${name.padEnd(nameWidth)}  ${nodes.padStart(5)}  ${outliers}`);
  }
  if (report.unreadable.length > 0) {
    lines.push("");
    lines.push(paint(`UNREADABLE (not compared)`, ANSI.bold, color));
    for (const u of report.unreadable) {
      const where = u.source === u.node ? "" : ` (${u.source})`;
      lines.push(`  ${paint(u.node, ANSI.red, color)}${where}: ${u.reason}`);
    }
  }
  for (const cohort of report.cohorts) {
    const outliers = report.outliers.filter((o) => o.cohort === cohort.name);
    if (outliers.length === 0) continue;
    lines.push("");
    lines.push(
      paint(`OUTLIERS in ${cohort.name} (${cohort.nodes.length} nodes)`, ANSI.bold, color),
    );
    for (const o of outliers) {
      const node = paint(o.node, ANSI.yellow, color);
      const absent = o.absentSubtypes ?? [];
      for (const a of absent) lines.push(`  ${formatAbsentSubtype(node, a)}`);
      const shown = o.differences.filter((d) =>
        !absent.some((a) => d.path.startsWith(a.subtype + "."))
      );
      for (const entry of collapseDifferences(shown)) {
        lines.push(
          `  ${
            formatFleetDifference(
              node,
              entry.items[0] as FleetDifference,
              maxValueWidth,
              entry.path,
            )
          }`,
        );
      }
    }
  }
  lines.push("");
  lines.push(
    report.outliers.length > 0
      ? paint("DRIFT DETECTED", ANSI.red, color)
      : paint("NO DRIFT", ANSI.green, color),
  );
  if (summary.unreadable > 0) {
    lines.push(
      paint(
        `INCOMPLETE: ${summary.unreadable} snapshot(s) could not be compared`,
        ANSI.red,
        color,
      ),
    );
  }
  return lines.join("\n") + "\n";
}

/**
 * The machine document of a fleet report: `summary`, `groupBy`, `cohorts` (name, key
 * values, size, outliers, `single` for a cohort of one, and per measurement the groups with
 * their nodes, majority first), `outliers` (node, cohort, differences, and the subtypes it
 * lacks entirely as `absentSubtypes`) and `unreadable` (node, source, reason: members that could
 * not be compared).
 *
 * @param report the fleet report
 * @returns a plain object ready to encode
 */
export function fleetDocument(report: FleetReport): Record<string, unknown> {
  return {
    summary: { ...report.summary },
    groupBy: [...report.groupBy],
    cohorts: report.cohorts.map((c) => ({
      name: c.name,
      key: { ...c.key },
      size: c.nodes.length,
      outliers: c.outliers,
      ...(c.nodes.length === 1 ? { single: true } : {}),
      measurements: c.measurements.map((m) => ({
        type: m.type,
        groups: m.groups.map((g) => ({
          majority: g.majority,
          size: g.nodes.length,
          nodes: g.nodes,
        })),
      })),
    })),
    outliers: report.outliers.map((o) => {
      const outlier: Record<string, unknown> = {
        node: o.node,
        cohort: o.cohort,
        differences: o.differences.map((d) => {
          const out: Record<string, unknown> = { path: d.path, kind: d.kind };
          if (d.value !== undefined) out.value = d.value;
          if (d.fleet !== undefined) out.fleet = d.fleet;
          out.fleetNodes = d.fleetNodes;
          return out;
        }),
      };
      if (o.absentSubtypes) outlier.absentSubtypes = o.absentSubtypes.map((a) => ({ ...a }));
      return outlier;
    }),
    unreadable: report.unreadable.map((u) => ({ ...u })),
  };
}
