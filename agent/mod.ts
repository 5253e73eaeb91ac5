/**
 * Job mode: the node side (`run.ts`: collect → snapshot → sink) and the controller
 * side (`deploy.ts`: gate → create → wait → read → deliver → cleanup).
 *
 * ```ts ignore
 * const result = await runAgent(deps, { target: { kind: "stdout" }, nodeName: "gpu-1" });
 * ```
 *
 * @module
 */
export * from "./run.ts";
export * from "./sinks.ts";
export * from "./sweep.ts";
export * from "./deploy.ts";
export * from "./wait.ts";
