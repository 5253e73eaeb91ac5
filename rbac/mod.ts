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
 * @module
 */
export * from "./rules.ts";
export * from "./objects.ts";
export * from "./gate.ts";
export * from "./render.ts";
export { createAccessReviewer } from "./kube_reviewer.ts";
