/**
 * What a fleet fetch returns, and what the CLI makes of it: the ok nodes' snapshots as one YAML
 * stream, the per-node status table, and the error (and so the exit code) the fetch ends with
 * when some node was not ok.
 *
 * @module
 */
import {
  IncompleteError,
  InterruptedError,
  NotFoundError,
  PermissionError,
  TimeoutError,
  ToolError,
} from "../errors.ts";
import { encodeSnapshot } from "../snapshot/mod.ts";
import type { NodeResult } from "./fleet_node.ts";
import type { FleetTopology } from "./fleet_topology.ts";

/** What a fetch returns. */
export interface FleetResult {
  /** One result per node, sorted by node name. */
  results: NodeResult[];
  /** The transport used. */
  transport: "direct" | "proxy";
  /** Targeted (or asked-for) nodes with no daemon pod, reported as not ready. */
  missingPods: number;
  /** The cluster's NodeTopology, listed once (absent with `topology: false`). */
  topology?: FleetTopology;
}

/**
 * One multi-document YAML stream of the ok nodes' snapshots (what `aicr diff --fleet` reads).
 *
 * @param results the fetch results
 * @returns the stream text (empty when no node was ok)
 */
export function fleetStream(results: readonly NodeResult[]): string {
  return results.flatMap((r) => r.snapshot ? [`---\n${encodeSnapshot(r.snapshot, "yaml")}`] : [])
    .join("");
}

/**
 * The per-node status table (stderr).
 *
 * @param results the fetch results
 * @returns the table, one line per node after the header
 */
export function formatFleetTable(results: readonly NodeResult[]): string {
  const rows = [
    ["NODE", "STATUS", "TRANSPORT", "TIME", "DETAIL"],
    ...results.map((r) => [
      r.node,
      r.status,
      r.transport ?? "",
      `${(r.durationMs / 1000).toFixed(2)}s`,
      (r.error ?? "").split("\n")[0] ?? "",
    ]),
  ];
  const widths = [0, 0, 0, 0];
  for (const row of rows) {
    for (let i = 0; i < 4; i++) widths[i] = Math.max(widths[i] as number, (row[i] ?? "").length);
  }
  return rows.map((row) =>
    row.map((cell, i) => (i < 4 ? cell.padEnd(widths[i] ?? 0) : cell)).join("  ").trimEnd()
  ).join("\n") + "\n";
}

/**
 * The error a fetch ends with when some node was not ok: a permission error (exit 4) when
 * every failure is a denial, a timeout (exit 5) when every one timed out, otherwise incomplete
 * (exit 9: not Ready or unreachable daemons; the API itself answered, so never 6). Undefined
 * when every node is ok (and at least one was asked).
 *
 * @param fleet the fetch result
 * @returns the error, or undefined
 */
export function fleetError(fleet: FleetResult): ToolError | undefined {
  const failed = fleet.results.filter((r) => r.status !== "ok");
  if (fleet.results.length === 0) {
    return new NotFoundError("Cannot fetch the fleet: no daemon pod runs on a targeted node");
  }
  if (failed.length === 0) return undefined;
  const interrupted = failed.find((r) => r.status === "interrupted");
  if (interrupted) {
    // Exit 130 as every verb on SIGINT/SIGTERM; what was fetched before it is written.
    return new InterruptedError(
      `Cannot fetch every node's snapshot: ${interrupted.error ?? "interrupted"}`,
    );
  }
  const message =
    `Cannot fetch every node's snapshot: ${failed.length} of ${fleet.results.length} nodes failed (${
      [...new Set(failed.map((r) => r.status))].join(", ")
    })`;
  if (failed.every((r) => r.status === "denied")) return new PermissionError(message);
  if (failed.every((r) => r.status === "timed-out")) return new TimeoutError(message);
  const notReady = failed.filter((r) => r.status === "not-ready").length;
  return new IncompleteError(message, {
    details: notReady > 0
      ? [
        `  ${notReady} node(s) have no Ready daemon pod: wait and fetch again, or see why with 'kubectl describe pod' on the pods named above`,
      ]
      : [],
  });
}
