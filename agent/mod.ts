/**
 * Job mode, node side: `run.ts` collects → snapshots → delivers through `sink/` (stdout,
 * file, `cm://`). The controller side (deploy, wait, cleanup) lives in `controller/`.
 *
 * ```ts ignore
 * const result = await runAgent(deps, { target: { kind: "stdout" }, nodeName: "gpu-1" });
 * ```
 *
 * Only what callers outside the folder use is exported here (named); each file's other exports
 * serve its siblings and its tests.
 *
 * @module
 */
export { createNodeCollect, runAgent } from "./run.ts";
export { runLocalAgent } from "./local.ts";
export type { LocalAgentDeps, LocalAgentOptions } from "./local.ts";
