/**
 * Job mode, node side: `run.ts` collects → snapshots → delivers through `sinks.ts` (stdout,
 * file, `cm://`). The controller side (deploy, wait, cleanup) lives in `controller/`.
 *
 * ```ts ignore
 * const result = await runAgent(deps, { target: { kind: "stdout" }, nodeName: "gpu-1" });
 * ```
 *
 * @module
 */
export * from "./run.ts";
export * from "./sinks.ts";
