/**
 * The agent's and the daemon's permissions: the one rule set, the RBAC objects built
 * from it, the rendered `--add-roles-to-service-account` manifests, and the pre-flight
 * permission gate. Everything but the gate (which asks an injected reviewer) is pure.
 *
 * ```ts
 * import { accessQuestions, agentRules } from "./mod.ts";
 * const questions = accessQuestions(agentRules(), "gpu-operator");
 * // questions.length === 20: what the gate asks of an existing ServiceAccount
 * ```
 *
 * @module
 */
export * from "./rules.ts";
export * from "./objects.ts";
