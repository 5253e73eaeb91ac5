/**
 * The fleet report as one self-contained HTML page: inline CSS, no scripts, no network.
 *
 * Built to stay readable from 8 to thousands of nodes: the cohorts first (name, nodes,
 * outliers; a cohort of one node says so), then one section per cohort with outliers: its
 * outlier lines, and a node × reading matrix of the readings where some node of the cohort
 * differs. Outlier rows come first; the nodes that match their cohort are folded into one
 * line while "only outliers" is on (a CSS-only switch, on by default), and listed below
 * when it is off. Column headers carry the measurement type, the path broken only at `.`,
 * `/`, `_` or `-`, the cohort's value and its node count; a reading that is the same on
 * several GPUs of the cohort is one column (`gpu-0..7`). Every outlier cell is marked with
 * the class `outlier` (`outlier missing` for an absent reading, `outlier extra` for one only
 * that node has). A subtype a node lacks entirely gets one column, not one per reading.
 *
 * @module
 */
import { breakablePath, escapeHtml, htmlPage } from "./_html.ts";
import {
  collapseDifferences,
  formatAbsentSubtype,
  formatFleetDifference,
  formatReading,
} from "./diff_render.ts";
import type {
  FleetAbsentSubtype,
  FleetCohort,
  FleetColumn,
  FleetDifference,
  FleetOutlier,
  FleetReport,
} from "./fleet.ts";
import { collapsePerGpu, formatGpuRange } from "./per_gpu.ts";

export { escapeHtml } from "./_html.ts";

/** Options for {@link renderFleetHtml}. */
export interface FleetHtmlOptions {
  /** Page title. @default "aicr fleet drift" */
  title?: string;
  /** Shown under the title, e.g. the inputs and the time. */
  subtitle?: string;
  /** Longest value shown in a cell (the full value is in its tooltip). @default 24 */
  maxCellWidth?: number;
  /**
   * Show every column of the report (build it with `allReadings`), not only readings where
   * some node differs. @default false
   */
  allReadings?: boolean;
  /** Start with only the outlier rows shown (the switch on the page turns it off). @default true */
  outliersOnly?: boolean;
}

function rowId(node: string): string {
  return "node-" + encodeURIComponent(node).replace(/[^A-Za-z0-9_-]/g, "_");
}

const STYLE = `
#only-outliers{position:absolute;opacity:0;pointer-events:none}
label.switch{display:inline-block;margin-top:6px;padding:2px 10px;border:1px solid #8c959f;border-radius:12px;cursor:pointer;background:#fff;user-select:none}
label.switch .on,label.switch .off{display:none}
#only-outliers:checked ~ header label.switch .on{display:inline}
#only-outliers:not(:checked) ~ header label.switch .off{display:inline}
#only-outliers:checked ~ main tr.same-row{display:none}
#only-outliers:not(:checked) ~ main tr.match-summary{display:none}
#only-outliers:focus-visible ~ header label.switch{outline:2px solid #0969da}
section.cohort{border-top:1px solid #d0d7de;margin-top:14px}
details{margin:0 16px}
ul.outliers{margin:6px 0;padding-left:18px;font-family:ui-monospace,SFMono-Regular,Menlo,monospace;font-size:12px;max-height:220px;overflow:auto}
ul.outliers a{color:inherit;text-decoration:none}
ul.outliers a:hover{text-decoration:underline}
.wrap{margin:8px 16px 16px;overflow:auto;max-height:calc(100vh - 40px);border:1px solid #d0d7de}
table.matrix{border-collapse:separate;border-spacing:0;font-family:ui-monospace,SFMono-Regular,Menlo,monospace;font-size:12px}
table.matrix th,table.matrix td{border-right:1px solid #eaeef2;border-bottom:1px solid #eaeef2;padding:2px 6px;white-space:nowrap}
table.matrix thead th{position:sticky;top:0;z-index:2;background:#f6f8fa;vertical-align:bottom;text-align:left;min-width:7em;max-width:17em;white-space:normal;word-break:normal;overflow-wrap:normal;hyphens:none;border-bottom:2px solid #8c959f}
table.matrix thead th.type-start{border-left:2px solid #8c959f}
table.matrix thead th.corner{left:0;z-index:3;min-width:0}
table.matrix tbody th{position:sticky;left:0;z-index:1;background:#fff;text-align:left;font-weight:500}
table.matrix tbody tr{scroll-margin-top:7em}
table.matrix tbody tr:target th{outline:2px solid #0969da}
table.matrix tbody tr.outlier-row th{background:#fff8c5;font-weight:700}
table.matrix tbody tr.match-summary th{font-weight:400;color:#57606a;font-style:italic;background:#f6f8fa;white-space:normal;position:static}
.h-type{font-size:10px;text-transform:uppercase;letter-spacing:.04em;color:#57606a}
.h-sub{color:#57606a}
.h-key{font-weight:600}
.h-fleet{color:#116329;margin-top:2px}
.h-count{color:#57606a;font-size:11px}
td.same{color:#afb8c1;text-align:center}
td.outlier{background:#ffd8b5;color:#6e1d00;font-weight:700;outline:1px solid #e16f24;outline-offset:-1px}
td.outlier.missing{background:#ffcecb;color:#82071e;font-style:italic}
td.outlier.extra{background:#ddf4ff;color:#0a3069;outline-color:#218bff}
.legend{margin:0 16px}
.legend span{display:inline-block;padding:0 6px;margin-right:8px}
`;

/** One matrix column: a reading, a GPU range of one reading, or a whole absent subtype. */
interface Column {
  key: string;
  type: string;
  /** Reading paths behind it (one per GPU of a range). */
  paths: string[];
  gpus?: number[];
  reading?: FleetColumn;
  fleetNodes: number;
  absent?: FleetAbsentSubtype;
}

/**
 * Renders a fleet report as a self-contained HTML page.
 *
 * @param report the fleet report
 * @param options title, subtitle, cell width, all readings, outliers-only start
 * @returns the HTML document
 */
export function renderFleetHtml(report: FleetReport, options: FleetHtmlOptions = {}): string {
  const {
    title = "aicr fleet drift",
    subtitle,
    maxCellWidth = 24,
    allReadings = false,
    outliersOnly = true,
  } = options;
  const { summary } = report;
  const out: string[] = [];
  const badge = summary.outliers > 0
    ? `<span class="badge drift">DRIFT DETECTED</span>`
    : `<span class="badge clean">NO DRIFT</span>`;
  const incomplete = summary.unreadable > 0
    ? ` <span class="badge drift">${summary.unreadable} UNREADABLE</span>`
    : "";
  out.push(
    `<input type="checkbox" id="only-outliers"${outliersOnly ? " checked" : ""}>`,
    `<header><h1>${escapeHtml(title)} ${badge}${incomplete}</h1>`,
    `<p class="sub">${summary.nodes} nodes in ${summary.cohorts} cohort${
      summary.cohorts === 1 ? "" : "s"
    } (${
      report.groupBy.length > 0
        ? `by ${escapeHtml(report.groupBy.join(", "))}`
        : "the whole fleet as one"
    }) · ${summary.outliers} outlier nodes · ${summary.differences} differing readings on outliers · columns: ${
      allReadings ? "every reading" : "readings where some node of the cohort differs"
    }${subtitle ? ` · ${escapeHtml(subtitle)}` : ""}</p>`,
    `<label class="switch" for="only-outliers"><span class="on">showing only outliers: click to list every node</span><span class="off">showing every node: click to show only outliers</span></label></header>`,
    `<main>`,
  );

  out.push(
    `<h2>Cohorts</h2>`,
    `<p class="sub" style="margin:0 16px 6px">Each node is compared with the majority of its cohort only.</p>`,
    `<table class="list cohorts"><thead><tr><th>cohort</th><th>nodes</th><th>outliers</th></tr></thead><tbody>`,
  );
  report.cohorts.forEach((c, i) => {
    const name = c.outliers > 0
      ? `<a href="#cohort-${i + 1}">${escapeHtml(c.name)}</a>`
      : escapeHtml(c.name);
    const outliers = c.nodes.length === 1
      ? `<span class="sub">one node: nothing to compare with</span>`
      : String(c.outliers);
    out.push(
      `<tr data-cohort="${
        escapeHtml(c.name)
      }"><td>${name}</td><td class="num">${c.nodes.length}</td><td class="num">${outliers}</td></tr>`,
    );
  });
  out.push(`</tbody></table>`);
  if (report.unreadable.length > 0) out.push(unreadableSection(report.unreadable));

  const byCohort = new Map<string, FleetOutlier[]>();
  for (const o of report.outliers) {
    let list = byCohort.get(o.cohort);
    if (!list) byCohort.set(o.cohort, list = []);
    list.push(o);
  }
  report.cohorts.forEach((cohort, i) => {
    const outliers = byCohort.get(cohort.name) ?? [];
    if (outliers.length === 0 && !allReadings) return;
    out.push(renderCohort(cohort, i + 1, outliers, { maxCellWidth, allReadings }));
  });
  if (summary.outliers === 0) {
    out.push(
      `<p class="sub" style="margin:12px 16px">Every node has the configuration of its cohort.</p>`,
    );
  }
  out.push(`</main>`);
  return htmlPage(title, STYLE, out.join("\n"));
}

/**
 * The cohort matrix's columns, sorted by key: a subtype some outlier lacks entirely, then its
 * readings, per-GPU readings collapsed into one column when every GPU's cohort value agrees.
 */
function matrixColumns(
  absentSubtypes: readonly FleetAbsentSubtype[],
  readings: readonly FleetColumn[],
): Column[] {
  return [
    ...absentSubtypes.map((a) => ({
      key: a.subtype,
      type: a.subtype.slice(0, a.subtype.indexOf(".")),
      paths: [],
      fleetNodes: a.fleetNodes,
      absent: a,
    })),
    ...collapsePerGpu(readings, {
      path: (c) => c.path,
      same: (a, b) => formatReading(a.fleet, 1e4) === formatReading(b.fleet, 1e4),
    }).map((entry) => {
      const first = entry.items[0] as FleetColumn;
      const column: Column = {
        key: entry.path,
        type: first.type,
        paths: entry.items.map((c) => c.path),
        reading: first,
        fleetNodes: entry.items.reduce((least, c) => Math.min(least, c.fleetNodes), Infinity),
      };
      if (entry.gpus) column.gpus = entry.gpus;
      return column;
    }),
  ].sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
}

/** A column's header: type, subtype, key, the cohort's value and how many nodes carry it. */
function headerCell(
  c: Column,
  options: { typeStart: boolean; nodes: number; maxCellWidth: number },
): string {
  const { nodes: n, maxCellWidth } = options;
  const start = options.typeStart ? ` class="type-start"` : "";
  const rest = c.key.slice(c.type.length + 1);
  const cut = c.absent ? rest.length : subtypeEnd(c, rest);
  const sub = rest.slice(0, cut);
  const key = c.absent ? ".*" : rest.slice(cut);
  const fleetText = c.absent
    ? `${c.absent.readings} readings`
    : `${escapeHtml(formatReading(c.reading?.fleet, maxCellWidth))}${
      c.reading?.fleet === undefined ? " (absent)" : ""
    }`;
  const tip = c.absent
    ? `${c.key}.* (whole subtype)`
    : `${c.key}\ncohort: ${
      c.reading?.fleet === undefined ? "(absent)" : formatReading(c.reading.fleet, 80)
    }`;
  return `<th scope="col"${start} data-path="${
    escapeHtml(c.absent ? `${c.key}.*` : c.key)
  }" title="${escapeHtml(tip)}"><div class="h-type">${escapeHtml(c.type)}</div><div class="h-sub">${
    breakablePath(sub)
  }</div><div class="h-key">${
    breakablePath(key)
  }</div><div class="h-fleet">${fleetText}</div><div class="h-count">on ${c.fleetNodes}/${n} nodes</div></th>`;
}

/** The cohort's outliers as a list, one link per finding to the node's row. */
function outlierLinks(
  outliers: readonly FleetOutlier[],
  findings: {
    absentOf: Map<string, FleetAbsentSubtype[]>;
    shownOf: Map<string, FleetDifference[]>;
  },
): string[] {
  const out = [
    `<details open><summary>${outliers.length} node${
      outliers.length === 1 ? " differs" : "s differ"
    } from the cohort</summary><ul class="outliers">`,
  ];
  for (const o of outliers) {
    const link = (text: string) => `<li><a href="#${rowId(o.node)}">${escapeHtml(text)}</a></li>`;
    for (const a of findings.absentOf.get(o.node) ?? []) {
      out.push(link(formatAbsentSubtype(o.node, a)));
    }
    for (const entry of collapseDifferences(findings.shownOf.get(o.node) ?? [])) {
      out.push(
        link(formatFleetDifference(o.node, entry.items[0] as FleetDifference, 80, entry.path)),
      );
    }
  }
  out.push(`</ul></details>`);
  return out;
}

function renderCohort(
  cohort: FleetCohort,
  index: number,
  outliers: readonly FleetOutlier[],
  options: { maxCellWidth: number; allReadings: boolean },
): string {
  const { maxCellWidth, allReadings } = options;
  const n = cohort.nodes.length;
  const out: string[] = [];
  out.push(
    `<section class="cohort" id="cohort-${index}" data-cohort="${escapeHtml(cohort.name)}">`,
    `<h2>${escapeHtml(cohort.name)} <span class="sub">${n} node${
      n === 1 ? "" : "s"
    } · ${outliers.length} outlier${outliers.length === 1 ? "" : "s"}</span></h2>`,
  );
  // Per outlier: subtypes it lacks entirely, and its other differences by path.
  const absentOf = new Map<string, FleetAbsentSubtype[]>();
  const subtypeColumns = new Map<string, FleetAbsentSubtype>();
  const byNode = new Map<string, Map<string, FleetDifference>>();
  const shownOf = new Map<string, FleetDifference[]>();
  for (const o of outliers) {
    const absent = o.absentSubtypes ?? [];
    absentOf.set(o.node, absent);
    for (const a of absent) if (!subtypeColumns.has(a.subtype)) subtypeColumns.set(a.subtype, a);
    const covered = (path: string) => absent.some((a) => path.startsWith(a.subtype + "."));
    const shown = o.differences.filter((d) => !covered(d.path));
    shownOf.set(o.node, shown);
    byNode.set(o.node, new Map(shown.map((d) => [d.path, d])));
  }
  if (outliers.length > 0) {
    for (const line of outlierLinks(outliers, { absentOf, shownOf })) out.push(line);
  }

  const used = new Set<string>();
  for (const diffs of byNode.values()) for (const path of diffs.keys()) used.add(path);
  const readingColumns = cohort.columns.filter((c) => allReadings || used.has(c.path));
  const columns = matrixColumns([...subtypeColumns.values()], readingColumns);
  if (columns.length === 0) {
    out.push(`</section>`);
    return out.join("\n");
  }

  out.push(
    `<p class="sub legend"><span style="background:#ffd8b5;font-weight:700">value</span>differs from the cohort <span style="background:#ffcecb;font-style:italic">(absent)</span>reading or whole subtype missing <span style="background:#ddf4ff">value</span>reading only on this node <span style="color:#afb8c1">·</span>same as the cohort (header)</p>`,
    `<div class="wrap"><table class="matrix"><thead><tr><th class="corner">node</th>`,
  );
  let lastType = "";
  for (const c of columns) {
    out.push(headerCell(c, { typeStart: c.type !== lastType, nodes: n, maxCellWidth }));
    lastType = c.type;
  }
  out.push(`</tr></thead><tbody>`);
  const outlierNodes = new Set(outliers.map((o) => o.node));
  const row = (node: string, cls: string) => {
    const diffs = byNode.get(node);
    const absent = absentOf.get(node) ?? [];
    const cells = columns.map((c) => cell(node, c, diffs, absent, maxCellWidth));
    return `<tr class="${cls}" data-node="${escapeHtml(node)}" id="${
      rowId(node)
    }"><th scope="row">${escapeHtml(node)}</th>${cells.join("")}</tr>`;
  };
  for (const node of cohort.nodes) if (outlierNodes.has(node)) out.push(row(node, "outlier-row"));
  const matching = n - outlierNodes.size;
  if (matching > 0) {
    out.push(
      `<tr class="match-summary"><th scope="row" colspan="${
        columns.length + 1
      }">${matching} more node${
        matching === 1 ? "" : "s"
      } match the cohort on every column (switch off "only outliers" to list them)</th></tr>`,
    );
  }
  for (const node of cohort.nodes) if (!outlierNodes.has(node)) out.push(row(node, "same-row"));
  out.push(`</tbody></table></div></section>`);
  return out.join("\n");
}

const GPU_RANGE_SUBTYPE_REGEXP = /^gpu-\d+(?:\.\.\d+)?(?:,\d+(?:\.\.\d+)?)*\./;
const UNIT_SUBTYPE_REGEXP =
  /^[^.]+\.(?:service|socket|timer|mount|target|slice|scope|path|device|swap|automount)\./;

/**
 * Where the subtype ends in a column's path after its type, for the two-line header:
 * `gpu-0..7.`, a systemd unit (`containerd.service.`), else the first dot (every other
 * subtype the collectors write is one word).
 */
function subtypeEnd(c: Column, rest: string): number {
  const special = (c.gpus ? GPU_RANGE_SUBTYPE_REGEXP : UNIT_SUBTYPE_REGEXP).exec(rest);
  if (special && (c.gpus || c.type === "SystemD")) return special[0].length;
  const dot = rest.indexOf(".");
  return dot < 0 ? 0 : dot + 1;
}

function cell(
  node: string,
  c: Column,
  diffs: Map<string, FleetDifference> | undefined,
  absent: readonly FleetAbsentSubtype[],
  maxCellWidth: number,
): string {
  if (c.absent) {
    const lacking = absent.some((x) => x.subtype === c.absent?.subtype);
    return lacking
      ? `<td class="outlier missing" data-path="${escapeHtml(c.key)}.*" title="${
        escapeHtml(`${node}\n${c.key}.*\n(absent: ${c.absent.readings} readings)`)
      }">(absent)</td>`
      : `<td class="same">·</td>`;
  }
  const found = c.paths.map((p) => diffs?.get(p));
  const present = found.filter((d): d is FleetDifference => d !== undefined);
  if (present.length === 0) return `<td class="same">·</td>`;
  const show = (d: FleetDifference, width: number) =>
    d.kind === "removed" ? "(absent)" : formatReading(d.value, width);
  const kinds = new Set(present.map((d) => d.kind));
  const cls = kinds.size > 1
    ? "outlier"
    : present[0]?.kind === "removed"
    ? "outlier missing"
    : present[0]?.kind === "added"
    ? "outlier extra"
    : "outlier";
  let text: string;
  let full: string;
  const values = new Set(present.map((d) => show(d, 1e4)));
  if (!c.gpus || (present.length === c.paths.length && values.size === 1)) {
    text = show(present[0] as FleetDifference, maxCellWidth);
    full = show(present[0] as FleetDifference, 400);
  } else {
    // Some GPUs of the range differ, or differ in different ways: name them.
    const byValue = new Map<string, number[]>();
    found.forEach((d, k) => {
      if (!d) return;
      const v = show(d, 1e4);
      let gpus = byValue.get(v);
      if (!gpus) byValue.set(v, gpus = []);
      gpus.push((c.gpus as number[])[k] as number);
    });
    const parts = [...byValue].map(([v, gpus]) => `gpu-${formatGpuRange(gpus)}: ${v}`);
    full = parts.join("; ");
    text = formatReading(full, maxCellWidth + 12);
  }
  return `<td class="${cls}" data-path="${escapeHtml(c.key)}" title="${
    escapeHtml(`${node}\n${c.key}\n${full}`)
  }">${escapeHtml(text)}</td>`;
}

/** The members that could not be read or compared: node, source, reason. */
function unreadableSection(unreadable: FleetReport["unreadable"]): string {
  const rows = unreadable.map((u) =>
    `<tr><td>${escapeHtml(u.node)}</td><td>${escapeHtml(u.source)}</td><td>${
      escapeHtml(u.reason)
    }</td></tr>`
  );
  return [
    `<h2>Unreadable</h2>`,
    `<p class="sub" style="margin:0 16px 6px">These snapshots could not be read or compared; every other node is.</p>`,
    `<table class="list unreadable"><thead><tr><th>node</th><th>source</th><th>reason</th></tr></thead><tbody>`,
    ...rows,
    `</tbody></table>`,
  ].join("\n");
}
