/**
 * `-t table` for one snapshot (upstream's `snapshot -t table`): a line of metadata, then one row
 * per reading, `TYPE SUBTYPE KEY VALUE`, in the document's order, for a human at a terminal. It
 * is a view, not a format to read back: `yaml` and `json` are.
 *
 * @module
 */
import { formatReading } from "./diff_render.ts";
import type { Snapshot } from "./model.ts";

/**
 * Renders a snapshot as a table.
 *
 * @param snapshot the snapshot
 * @param options the widest value cell
 * @returns the text, newline-terminated
 */
export function formatSnapshotTable(
  snapshot: Snapshot,
  options: { maxWidth?: number } = {},
): string {
  const { maxWidth = 80 } = options;
  const rows: string[][] = [["TYPE", "SUBTYPE", "KEY", "VALUE"]];
  for (const measurement of snapshot.measurements) {
    for (const subtype of measurement.subtypes) {
      const entries = Object.entries(subtype.data);
      if (entries.length === 0) {
        rows.push([measurement.type, subtype.subtype, "-", subtype.context?.status ?? "-"]);
      }
      for (const [key, value] of entries) {
        rows.push([measurement.type, subtype.subtype, key, formatReading(value, maxWidth)]);
      }
    }
  }
  const meta = Object.entries(snapshot.metadata).map(([k, v]) => `${k}=${v}`).join(" ");
  return `${`SNAPSHOT ${meta}`.trimEnd()}\n\n${alignColumns(rows)}`;
}

/**
 * Aligns rows into columns two spaces apart, the last column left ragged.
 *
 * @param rows the cells, header first
 * @returns the lines, each newline-terminated
 */
export function alignColumns(rows: readonly (readonly string[])[]): string {
  // Loops, not Math.max(...rows): a spread of every row overflows the stack on a large table.
  const widths: number[] = [];
  for (const row of rows) {
    for (const [i, cell] of row.entries()) widths[i] = Math.max(widths[i] ?? 0, cell.length);
  }
  return rows.map((r) =>
    r.map((cell, i) => (i < r.length - 1 ? cell.padEnd(widths[i] ?? 0) : cell)).join("  ")
      .trimEnd() + "\n"
  ).join("");
}
