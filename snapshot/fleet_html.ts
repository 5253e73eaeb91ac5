/**
 * The fleet report as one self-contained HTML page: inline CSS, no scripts, no network.
 * A node × reading matrix of the readings where some node differs, the reference value
 * and its node count in each sticky column header, node names in a sticky first column,
 * and every outlier cell marked with the class `outlier` (readable at 200+ nodes). A subtype
 * a node lacks entirely gets one column, not one per reading.
 *
 * @module
 */
import { formatAbsentSubtype, formatFleetDifference, formatReading } from "./diff_render.ts";
import type { FleetAbsentSubtype, FleetColumn, FleetDifference, FleetReport } from "./fleet.ts";

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
}

/**
 * Escapes text for HTML content and attribute values.
 *
 * @param text any text
 * @returns the escaped text
 */
export function escapeHtml(text: string): string {
  return text.replace(
    /[&<>"']/g,
    (c) =>
      c === "&"
        ? "&amp;"
        : c === "<"
        ? "&lt;"
        : c === ">"
        ? "&gt;"
        : c === '"'
        ? "&quot;"
        : "&#39;",
  );
}

function rowId(node: string): string {
  return "node-" + encodeURIComponent(node).replace(/[^A-Za-z0-9_-]/g, "_");
}

const STYLE = `
*{box-sizing:border-box}
body{margin:0;font:13px/1.35 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#1d232a;background:#fff}
header{padding:12px 16px;border-bottom:1px solid #d0d7de;background:#f6f8fa}
h1{margin:0 0 4px;font-size:18px}
h2{font-size:14px;margin:14px 16px 6px}
.sub{color:#57606a;margin:0}
.badge{display:inline-block;padding:1px 8px;border-radius:10px;font-weight:600}
.badge.drift{background:#ffebe9;color:#a40e26;border:1px solid #ff818266}
.badge.clean{background:#dafbe1;color:#116329;border:1px solid #4ac26b66}
table.groups{border-collapse:collapse;margin:0 16px}
table.groups th,table.groups td{border:1px solid #d0d7de;padding:3px 8px;text-align:left}
details{margin:0 16px}
ul.outliers a{color:inherit;text-decoration:none}
ul.outliers a:hover{text-decoration:underline}
table.matrix tbody tr{scroll-margin-top:7em}
table.matrix tbody tr:target th{outline:2px solid #0969da}
ul.outliers{margin:6px 0;padding-left:18px;font-family:ui-monospace,SFMono-Regular,Menlo,monospace;font-size:12px;max-height:220px;overflow:auto}
.wrap{margin:8px 16px 16px;overflow:auto;max-height:calc(100vh - 40px);border:1px solid #d0d7de}
table.matrix{border-collapse:separate;border-spacing:0;font-family:ui-monospace,SFMono-Regular,Menlo,monospace;font-size:12px}
table.matrix th,table.matrix td{border-right:1px solid #eaeef2;border-bottom:1px solid #eaeef2;padding:2px 6px;white-space:nowrap}
table.matrix thead th{position:sticky;top:0;z-index:2;background:#f6f8fa;vertical-align:bottom;text-align:left;max-width:15em;white-space:normal;word-break:break-all;border-bottom:2px solid #8c959f}
table.matrix thead th.corner{left:0;z-index:3}
table.matrix tbody th{position:sticky;left:0;z-index:1;background:#fff;text-align:left;font-weight:500}
table.matrix tbody tr:nth-child(even) td.same{background:#fafbfc}
table.matrix tbody tr.outlier-row th{background:#fff8c5;font-weight:700}
.h-type{font-size:10px;text-transform:uppercase;letter-spacing:.04em;color:#57606a}
.h-path{font-weight:600}
.h-fleet{color:#116329;margin-top:2px}
.h-count{color:#57606a;font-size:11px}
td.same{color:#afb8c1;text-align:center}
td.outlier{background:#ffd8b5;color:#6e1d00;font-weight:700;outline:1px solid #e16f24;outline-offset:-1px}
td.outlier.missing{background:#ffcecb;color:#82071e;font-style:italic}
td.outlier.extra{background:#ddf4ff;color:#0a3069;outline-color:#218bff}
.legend span{display:inline-block;padding:0 6px;margin-right:8px}
`;

/**
 * Renders a fleet report as a self-contained HTML page.
 *
 * @param report the fleet report
 * @param options title, subtitle and cell width
 * @returns the HTML document
 */
export function renderFleetHtml(report: FleetReport, options: FleetHtmlOptions = {}): string {
  const { title = "aicr fleet drift", subtitle, maxCellWidth = 24, allReadings = false } = options;
  const { summary } = report;
  const out: string[] = [];
  out.push(
    `<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">`,
    `<meta name="viewport" content="width=device-width, initial-scale=1">`,
    `<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'">`,
    `<title>${escapeHtml(title)}</title>\n<style>${STYLE}</style>\n</head>\n<body>`,
  );
  // Columns: one per subtype some node lacks entirely (its collector failed, say), then one
  // per reading where some node differs otherwise, all in path order.
  const absentOf = new Map<string, FleetAbsentSubtype[]>();
  const subtypeColumns = new Map<string, FleetAbsentSubtype>();
  const byNode = new Map<string, Map<string, FleetDifference>>();
  for (const o of report.outliers) {
    const absent = o.absentSubtypes ?? [];
    absentOf.set(o.node, absent);
    for (const a of absent) if (!subtypeColumns.has(a.subtype)) subtypeColumns.set(a.subtype, a);
    const covered = (path: string) => absent.some((a) => path.startsWith(a.subtype + "."));
    byNode.set(
      o.node,
      new Map(o.differences.filter((d) => !covered(d.path)).map((d) => [d.path, d])),
    );
  }
  const shown = new Set<string>();
  for (const diffs of byNode.values()) for (const path of diffs.keys()) shown.add(path);
  type Column = { key: string; reading?: FleetColumn; absent?: FleetAbsentSubtype };
  const columns: Column[] = [
    ...[...subtypeColumns.values()].map((a) => ({ key: a.subtype, absent: a })),
    ...report.columns
      .filter((c) => allReadings || shown.has(c.path))
      .map((c) => ({ key: c.path, reading: c })),
  ].sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));

  const badge = summary.outliers > 0
    ? `<span class="badge drift">DRIFT DETECTED</span>`
    : `<span class="badge clean">NO DRIFT</span>`;
  out.push(
    `<header><h1>${escapeHtml(title)} ${badge}</h1>`,
    `<p class="sub">${summary.nodes} nodes · ${summary.outliers} outlier nodes · ${summary.differences} differing readings on outliers · ${columns.length} columns shown (${
      allReadings ? "every reading" : "only readings where some node differs"
    })${subtitle ? ` · ${escapeHtml(subtitle)}` : ""}</p></header>`,
  );

  out.push(
    `<h2>Configuration groups per measurement</h2>`,
    `<table class="groups"><thead><tr><th>type</th><th>groups</th><th>majority nodes</th><th>outlier nodes</th></tr></thead><tbody>`,
  );
  for (const m of report.measurements) {
    const majority = m.groups.find((g) => g.majority)?.nodes.length ?? 0;
    const total = m.groups.reduce((s, g) => s + g.nodes.length, 0);
    out.push(
      `<tr><td>${m.type}</td><td>${m.groups.length}</td><td>${majority}</td><td>${
        total - majority
      }</td></tr>`,
    );
  }
  out.push(`</tbody></table>`);

  if (report.outliers.length > 0) {
    out.push(
      `<h2>Outliers</h2><details open><summary>${report.outliers.length} nodes differ from the fleet</summary><ul class="outliers">`,
    );
    for (const o of report.outliers) {
      const link = (text: string) => `<li><a href="#${rowId(o.node)}">${escapeHtml(text)}</a></li>`;
      for (const a of absentOf.get(o.node) ?? []) out.push(link(formatAbsentSubtype(o.node, a)));
      for (const d of byNode.get(o.node)?.values() ?? []) {
        out.push(link(formatFleetDifference(o.node, d, 80)));
      }
    }
    out.push(`</ul></details>`);
  }

  if (columns.length > 0) {
    out.push(
      `<h2>Node × reading matrix</h2>`,
      `<p class="sub legend" style="margin:0 16px"><span class="outlier" style="background:#ffd8b5;font-weight:700">value</span>differs from the fleet <span style="background:#ffcecb;font-style:italic">(absent)</span>reading or whole subtype missing <span style="background:#ddf4ff">value</span>reading only on this node <span style="color:#afb8c1">·</span>same as the fleet (header)</p>`,
      `<div class="wrap"><table class="matrix"><thead><tr><th class="corner">node</th>`,
    );
    for (const { reading: c, absent: a } of columns) {
      if (a) {
        const type = a.subtype.slice(0, a.subtype.indexOf("."));
        out.push(
          `<th scope="col" data-path="${escapeHtml(a.subtype)}.*" title="${
            escapeHtml(`${a.subtype}.* (whole subtype)`)
          }"><div class="h-type">${escapeHtml(type)}</div><div class="h-path">${
            escapeHtml(a.subtype.slice(type.length + 1))
          }.*</div><div class="h-fleet">${a.readings} readings</div><div class="h-count">on ${a.fleetNodes}/${summary.nodes} nodes</div></th>`,
        );
        continue;
      }
      if (!c) continue;
      const rest = c.path.slice(c.type.length + 1);
      const fleet = c.fleet === undefined ? "(absent)" : formatReading(c.fleet, 80);
      out.push(
        `<th scope="col" data-path="${escapeHtml(c.path)}" title="${
          escapeHtml(`${c.path}\nfleet: ${fleet}`)
        }"><div class="h-type">${c.type}</div><div class="h-path">${
          escapeHtml(rest)
        }</div><div class="h-fleet">${escapeHtml(formatReading(c.fleet, maxCellWidth))}${
          c.fleet === undefined ? " (absent)" : ""
        }</div><div class="h-count">on ${c.fleetNodes}/${summary.nodes} nodes</div></th>`,
      );
    }
    out.push(`</tr></thead><tbody>`);
    for (const node of report.nodes) {
      const diffs = byNode.get(node);
      const absent = absentOf.get(node) ?? [];
      const cells: string[] = [];
      for (const { reading: c, absent: a } of columns) {
        if (a) {
          const lacking = absent.some((x) => x.subtype === a.subtype);
          cells.push(
            lacking
              ? `<td class="outlier missing" data-path="${escapeHtml(a.subtype)}.*" title="${
                escapeHtml(`${node}\n${a.subtype}.*\n(absent: ${a.readings} readings)`)
              }">(absent)</td>`
              : `<td class="same">·</td>`,
          );
          continue;
        }
        const d = c ? diffs?.get(c.path) : undefined;
        if (!c || !d) {
          cells.push(`<td class="same">·</td>`);
          continue;
        }
        const cls = d.kind === "removed"
          ? "outlier missing"
          : d.kind === "added"
          ? "outlier extra"
          : "outlier";
        const text = d.kind === "removed" ? "(absent)" : formatReading(d.value, maxCellWidth);
        const full = d.kind === "removed" ? "(absent)" : formatReading(d.value, 400);
        cells.push(
          `<td class="${cls}" data-path="${escapeHtml(c.path)}" title="${
            escapeHtml(`${node}\n${c.path}\n${full}`)
          }">${escapeHtml(text)}</td>`,
        );
      }
      out.push(
        `<tr${diffs ? ` class="outlier-row"` : ""} data-node="${escapeHtml(node)}" id="${
          rowId(node)
        }"><th scope="row">${escapeHtml(node)}</th>${cells.join("")}</tr>`,
      );
    }
    out.push(`</tbody></table></div>`);
  } else {
    out.push(`<p class="sub" style="margin:8px 16px">Every node has the same configuration.</p>`);
  }
  out.push(`</body>\n</html>\n`);
  return out.join("\n");
}
