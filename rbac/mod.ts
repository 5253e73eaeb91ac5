/**
 * The agent's and the daemon's permissions: the one rule set, the RBAC objects built
 * from it, the rendered `--add-roles-to-service-account` manifests, and the pre-flight
 * permission gate. Everything but the gate (which asks an injected reviewer) is pure.
 *
 * ```ts
 * import { accessQuestions, agentRules, callerChecks } from "./mod.ts";
 * // What the gate asks of an existing ServiceAccount writing its staging ConfigMap: 18
 * // questions (get and update of that one ConfigMap, never every ConfigMap).
 * const configMaps = { staging: "aicr-agent-snapshot-irsa-snapshotter" };
 * const agent = accessQuestions(agentRules({ configMaps }), "gpu-operator");
 * // What it asks of the caller in exact mode with a user cm:// output: 12 questions.
 * const caller = callerChecks({ mode: "exact", ownsOutput: false, namespace: "gpu-operator" });
 * ```
 *
 * Only what callers outside the folder use (and the example above) is exported here (named); each
 * file's other exports serve its siblings and its tests.
 *
 * @module
 */
export { accessQuestions, agentRules, DAEMON_READER_RULES, daemonRules } from "./rules.ts";
export type { AccessAttributes, RuleSet } from "./rules.ts";
export {
  daemonRbacObjects,
  runRbacObjects,
  scheduledRbacObjects,
  signerRbacObjects,
} from "./objects.ts";
export type { RunRbac } from "./objects.ts";
export { callerChecks, creatorChecks, runGate } from "./gate.ts";
export type { GateReport, ServiceAccountMode } from "./gate.ts";
export { rbacNextSteps, renderRbacFiles, writeRbacDirectory } from "./render.ts";
export { createAccessReviewer } from "./kube_reviewer.ts";
