/**
 * The Snapshot model and its codec: the shared language of every aicr role.
 *
 * ```ts
 * import { createSnapshot, encodeSnapshot, parseSnapshot } from "./mod.ts";
 * const snap = createSnapshot([], { timestamp: new Date(0), version: "dev", nodeName: "n1" });
 * const again = parseSnapshot(encodeSnapshot(snap));
 * ```
 *
 * @module
 */
export * from "./model.ts";
export * from "./codec.ts";
export * from "./stream.ts";
export * from "./target.ts";
export * from "./diff.ts";
export * from "./fleet.ts";
export * from "./diff_render.ts";
export * from "./fleet_html.ts";
export * from "./diff_html.ts";
export * from "./cohort.ts";
export * from "./per_gpu.ts";
export * from "./baseline.ts";
export * from "./table.ts";
