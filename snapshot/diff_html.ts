/**
 * A two-snapshot diff as one self-contained HTML page (`aicr diff -b A --target B -t html`):
 * inline CSS, no scripts, no network. The summary and verdict first, then one table per
 * measurement type (kind, path, baseline, target; the same change on several GPUs once, as
 * `GPU.gpu-0..7.<key>`), then the collector status changes, which never count as drift.
 *
 * @module
 */
import { breakablePath, escapeHtml, htmlPage } from "./_html.ts";
import type { Change, DiffResult } from "./diff.ts";
import { collapseChanges, formatReading } from "./diff_render.ts";

/** Options for {@link renderDiffHtml}. */
export interface DiffHtmlOptions {
  /** Page title. @default "aicr drift" */
  title?: string;
  /** Shown under the title, e.g. the time. */
  subtitle?: string;
  /** Longest value shown in a cell (the full value is in its tooltip). @default 80 */
  maxCellWidth?: number;
}

const STYLE = `
table.changes{margin-bottom:8px;font-family:ui-monospace,SFMono-Regular,Menlo,monospace;font-size:12px}
table.changes td.path{max-width:44em;overflow-wrap:normal;word-break:normal}
tr.added td.kind{color:#116329;font-weight:700}
tr.removed td.kind{color:#a40e26;font-weight:700}
tr.modified td.kind{color:#9a6700;font-weight:700}
td.baseline{background:#ffebe9}
td.target{background:#dafbe1}
td.none{background:none;color:#8c959f}
.nodes{color:#57606a;font-size:11px}
dl.sources{margin:4px 0 0;display:grid;grid-template-columns:max-content auto;gap:0 10px}
dl.sources dt{color:#57606a}
dl.sources dd{margin:0;font-family:ui-monospace,SFMono-Regular,Menlo,monospace}
`;

/**
 * Renders a two-snapshot diff as a self-contained HTML page.
 *
 * @param result the diff
 * @param options title, subtitle, cell width
 * @returns the HTML document
 */
export function renderDiffHtml(result: DiffResult, options: DiffHtmlOptions = {}): string {
  const { title = "aicr drift", subtitle, maxCellWidth = 80 } = options;
  const { summary } = result;
  const out: string[] = [];
  const badge = summary.total > 0
    ? `<span class="badge drift">DRIFT DETECTED</span>`
    : `<span class="badge clean">NO DRIFT</span>`;
  out.push(
    `<header><h1>${escapeHtml(title)} ${badge}</h1>`,
    `<dl class="sources"><dt>baseline</dt><dd>${
      escapeHtml(result.baselineSource)
    }</dd><dt>target</dt><dd>${escapeHtml(result.targetSource)}</dd></dl>`,
    `<p class="sub">${summary.total} changes: ${summary.added} added, ${summary.removed} removed, ${summary.modified} modified${
      subtitle ? ` · ${escapeHtml(subtitle)}` : ""
    }</p></header>`,
  );
  if (summary.total === 0) {
    out.push(`<p class="sub" style="margin:12px 16px">No reading differs.</p>`);
  }
  const entries = collapseChanges(result.changes);
  if (entries.length < result.changes.length) {
    out.push(
      `<p class="sub" style="margin:8px 16px 0">${result.changes.length} changes in ${entries.length} rows: the same change on several GPUs is one row (gpu-0..7).</p>`,
    );
  }
  const types = [...new Set(entries.map((e) => e.path.slice(0, e.path.indexOf("."))))];
  for (const type of types) {
    const mine = entries.filter((e) => e.path.startsWith(type + "."));
    out.push(
      `<h2>${escapeHtml(type)} <span class="sub">${mine.length} change${
        mine.length === 1 ? "" : "s"
      }</span></h2>`,
      `<table class="list changes" data-type="${
        escapeHtml(type)
      }"><thead><tr><th>kind</th><th>path</th><th>baseline</th><th>target</th></tr></thead><tbody>`,
    );
    for (const entry of mine) {
      const c = entry.items[0] as Change;
      const cellOf = (value: Change["baseline"], cls: string) =>
        value === undefined
          ? `<td class="${cls} none">-</td>`
          : `<td class="${cls}" title="${escapeHtml(formatReading(value, 4000))}">${
            escapeHtml(formatReading(value, maxCellWidth))
          }</td>`;
      const nodes = c.nodes
        ? `<div class="nodes">nodes: ${
          escapeHtml(
            [...c.nodes.added.map((n) => `+${n}`), ...c.nodes.removed.map((n) => `-${n}`)]
              .join(" "),
          )
        }</div>`
        : "";
      out.push(
        `<tr class="${c.kind}" data-path="${
          escapeHtml(entry.path)
        }"><td class="kind">${c.kind}</td><td class="path">${
          breakablePath(entry.path)
        }${nodes}</td>${cellOf(c.baseline, "baseline")}${cellOf(c.target, "target")}</tr>`,
      );
    }
    out.push(`</tbody></table>`);
  }
  if (result.statusChanges.length > 0) {
    out.push(
      `<h2>Source status <span class="sub">context, not counted as drift</span></h2>`,
      `<table class="list status"><thead><tr><th>subtype</th><th>baseline</th><th>target</th></tr></thead><tbody>`,
    );
    for (const s of result.statusChanges) {
      out.push(
        `<tr><td class="mono">${escapeHtml(s.path)}</td><td>${
          escapeHtml(s.baseline ?? "-")
        }</td><td>${escapeHtml(s.target ?? "-")}</td></tr>`,
      );
    }
    out.push(`</tbody></table>`);
  }
  return htmlPage(title, STYLE, out.join("\n"));
}
