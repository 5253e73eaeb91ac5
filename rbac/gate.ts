/**
 * The pre-flight permission gate of `aicr snapshot`: before anything is written, ask
 * whether the caller can do everything the run will do (SelfSubjectAccessReview) and,
 * in exact-ServiceAccount mode, whether that ServiceAccount holds the agent's rules
 * (SubjectAccessReview). Every failure is collected into one error, so one run tells
 * the user everything to fix. The reviewer is injected; the gate itself does no I/O.
 *
 * @module
 */
import { PermissionError, ToolError, UnavailableError } from "../errors.ts";
import { mapConcurrent } from "../io.ts";
import { UNREACHABLE_HINTS } from "../kube/mod.ts";
import type { Logger } from "../log.ts";
import { serviceAccountGroups, serviceAccountUser } from "../manifests/mod.ts";
import { accessQuestions, agentRules, qualifiedResource } from "./rules.ts";
import type { AgentConfigMaps } from "./rules.ts";
import type { AccessAttributes, RuleSet } from "./rules.ts";

/** Asks the API server authorization questions (implemented by `kube/`). */
export interface AccessReviewer {
  /**
   * Asks about the caller (SelfSubjectAccessReview).
   *
   * @param attributes the question
   * @returns whether it is allowed, and the authorizer's reason
   */
  selfReview(attributes: AccessAttributes): Promise<{ allowed: boolean; reason?: string }>;
  /**
   * Asks about another identity (SubjectAccessReview).
   *
   * @param user the user name, e.g. `system:serviceaccount:ns:sa`
   * @param groups the user's groups
   * @param attributes the question
   * @returns whether it is allowed
   * @throws {PermissionError} when the caller may not create SubjectAccessReviews
   */
  subjectReview(
    user: string,
    groups: string[],
    attributes: AccessAttributes,
  ): Promise<{ allowed: boolean }>;
}

/**
 * How the run gets its ServiceAccount: `prefix` creates a run-scoped one with the
 * full RBAC set, `exact` uses an existing one and creates no RBAC.
 */
export type ServiceAccountMode = "prefix" | "exact";

/** Options for {@link callerChecks}. */
export interface CallerCheckOptions {
  /** ServiceAccount mode. */
  mode: ServiceAccountMode;
  /** Whether aicr owns the output ConfigMap (no user `cm://`), so cleanup deletes it. */
  ownsOutput: boolean;
  /** `--namespace`. */
  namespace: string;
  /**
   * Whether the CLI rewrites the user's `cm://` output itself (controller-side projections
   * merged in), which needs `configmaps patch` (server-side apply). @default false
   */
  rewritesOutput?: boolean;
}

function namespaced(
  namespace: string,
  group: string,
  resource: string,
  verbs: readonly string[],
  subresource?: string,
): AccessAttributes[] {
  return verbs.map((verb) => ({
    verb,
    group,
    resource,
    ...(subresource === undefined ? {} : { subresource }),
    namespace,
  }));
}

function clusterScoped(
  group: string,
  resource: string,
  verbs: readonly string[],
): AccessAttributes[] {
  return verbs.map((verb) => ({ verb, group, resource }));
}

const RBAC_GROUP = "rbac.authorization.k8s.io";
const CREATE_DELETE = ["create", "delete"] as const;

/**
 * What the caller must be able to do, in the documented order. Both modes: get
 * serviceaccounts; create, get, list, watch, delete jobs.batch; get, list, watch pods;
 * get pods/log; get, list configmaps; and create, delete configmaps when aicr owns the output.
 * Prefix mode only: create and delete serviceaccounts, roles, rolebindings (namespace)
 * and clusterroles, clusterrolebindings (cluster), because cleanup always runs.
 *
 * @param options mode, output ownership and namespace
 * @returns the questions
 */
export function callerChecks(options: CallerCheckOptions): AccessAttributes[] {
  const { mode, ownsOutput, namespace, rewritesOutput = false } = options;
  const checks: AccessAttributes[] = [
    ...namespaced(namespace, "", "serviceaccounts", ["get"]),
    ...namespaced(namespace, "batch", "jobs", ["create", "get", "list", "watch", "delete"]),
    ...namespaced(namespace, "", "pods", ["get", "list", "watch"]),
    ...namespaced(namespace, "", "pods", ["get"], "log"),
    ...namespaced(namespace, "", "configmaps", ["get", "list"]),
    // aicr creates the staging ConfigMap before the Job and deletes it at cleanup.
    ...(ownsOutput ? namespaced(namespace, "", "configmaps", CREATE_DELETE) : []),
    ...(rewritesOutput ? namespaced(namespace, "", "configmaps", ["patch"]) : []),
  ];
  if (mode === "prefix") {
    checks.push(
      ...namespaced(namespace, "", "serviceaccounts", CREATE_DELETE),
      ...namespaced(namespace, RBAC_GROUP, "roles", CREATE_DELETE),
      ...namespaced(namespace, RBAC_GROUP, "rolebindings", CREATE_DELETE),
      ...clusterScoped(RBAC_GROUP, "clusterroles", CREATE_DELETE),
      ...clusterScoped(RBAC_GROUP, "clusterrolebindings", CREATE_DELETE),
    );
  }
  return checks;
}

/** One kind of object an operation creates: its API group, resource and namespace. */
export interface CreatedResource {
  /** API group; `""` is the core group. */
  group: string;
  /** The resource plural, e.g. `daemonsets`. */
  resource: string;
  /** The namespace; absent for cluster-scoped kinds. */
  namespace?: string;
}

/** Options for {@link creatorChecks}. */
export interface CreatorCheckOptions {
  /** Every kind the operation creates (duplicates are asked once). */
  creates: readonly CreatedResource[];
  /** Rule sets the created Roles and ClusterRoles grant: RBAC lets only their holder create them. */
  grants?: readonly RuleSet[];
  /** The namespace the grants' namespaced rules apply in. */
  namespace: string;
  /** More questions (e.g. reading the pods it waits for), asked after the rest. */
  extra?: readonly AccessAttributes[];
  /** Verbs asked per created kind. @default ["create", "get", "list", "delete"] */
  verbs?: readonly string[];
}

/**
 * What the caller must be able to do to create objects, clean them up on failure and sweep
 * them later: create, get (a lost create response is resolved by re-reading), list (found again
 * by labels) and delete on each created kind; then every rule granted (RBAC refuses to create
 * a role granting what its creator does not hold, unless it has `escalate`), then `extra`.
 * Derived from what the operation creates, so it cannot fall behind it.
 *
 * @param options the created kinds, granted rules, namespace and extra questions
 * @returns the questions, without duplicates
 */
export function creatorChecks(options: CreatorCheckOptions): AccessAttributes[] {
  const seen = new Set<string>();
  const out: AccessAttributes[] = [];
  const add = (attributes: AccessAttributes) => {
    const key = [
      attributes.verb,
      attributes.group,
      attributes.resource,
      attributes.subresource ?? "",
      attributes.namespace ?? "",
    ].join("\u0000");
    if (seen.has(key)) return;
    seen.add(key);
    out.push(attributes);
  };
  for (const created of options.creates) {
    for (const verb of options.verbs ?? ["create", "get", "list", "delete"]) {
      add({
        verb,
        group: created.group,
        resource: created.resource,
        ...(created.namespace === undefined ? {} : { namespace: created.namespace }),
      });
    }
  }
  for (const rules of options.grants ?? []) {
    for (const question of accessQuestions(rules, options.namespace)) add(question);
  }
  for (const question of options.extra ?? []) add(question);
  return out;
}

/**
 * The scope words of a denial line: `(namespace "x")` or `(cluster-scoped)`.
 *
 * @param attributes the question
 * @returns the scope in parentheses
 */
export function formatScope(attributes: AccessAttributes): string {
  return attributes.namespace === undefined
    ? "(cluster-scoped)"
    : `(namespace ${JSON.stringify(attributes.namespace)})`;
}

/** Who lacked a permission. */
export type Identity = { kind: "caller" } | { kind: "serviceAccount"; user: string };

/**
 * One line of the gate's error, e.g.
 * `- the caller (your kubeconfig identity) cannot "delete" clusterroles.rbac.authorization.k8s.io (cluster-scoped)`.
 *
 * @param identity the caller or the agent ServiceAccount
 * @param attributes the denied question
 * @returns the line
 */
export function formatDenial(identity: Identity, attributes: AccessAttributes): string {
  const who = identity.kind === "caller"
    ? "the caller (your kubeconfig identity)"
    : `agent ServiceAccount ${JSON.stringify(identity.user)}`;
  const name = attributes.name === undefined ? "" : ` ${JSON.stringify(attributes.name)}`;
  return `- ${who} cannot ${JSON.stringify(attributes.verb)} ${
    qualifiedResource(attributes)
  }${name} ${formatScope(attributes)}`;
}

/** The first line of the gate's error. */
export const MISSING_PERMISSIONS_HEADER = "missing required permissions:";

/** The WARN logged when the agent ServiceAccount's permissions cannot be checked. */
export const UNVERIFIED_SERVICE_ACCOUNT_WARNING =
  "could not verify the agent ServiceAccount's own permissions; continuing, but a missing rule will surface as an in-pod failure minutes from now instead of here";

const CONNECTION_CODES = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "ENOTFOUND",
  "EAI_AGAIN",
  "ETIMEDOUT",
  "UND_ERR_CONNECT_TIMEOUT",
  "UND_ERR_SOCKET",
]);
const CONNECTION_MESSAGE_REGEXP =
  /dial tcp|no such host|connection refused|i\/o timeout|TLS handshake timeout|network is unreachable|no route to host|getaddrinfo|fetch failed|ECONNREFUSED|EHOSTUNREACH|ENETUNREACH|ENOTFOUND/i;

/**
 * Whether an error means the API server could not be reached (refused, unreachable,
 * DNS, TLS handshake), looking through `cause`. A deadline alone is not one.
 *
 * @param error anything thrown
 * @returns whether it is a connection problem
 */
export function isConnectionError(error: unknown): boolean {
  let current: unknown = error;
  for (let depth = 0; depth < 5 && current instanceof Error; depth++) {
    const code = (current as { code?: unknown }).code;
    if (typeof code === "string" && CONNECTION_CODES.has(code)) return true;
    if (CONNECTION_MESSAGE_REGEXP.test(current.message)) return true;
    current = current.cause;
  }
  return false;
}

function reviewFailure(error: unknown, attributes: AccessAttributes): ToolError {
  if (error instanceof ToolError) return error;
  const what = `"${attributes.verb}" ${qualifiedResource(attributes)}`;
  if (isConnectionError(error)) {
    return new UnavailableError(
      `Cannot check permission ${what} as the Kubernetes API server is unreachable: ${
        error instanceof Error ? error.message : String(error)
      }`,
      {
        cause: error,
        details: UNREACHABLE_HINTS,
      },
    );
  }
  return new ToolError(
    `Cannot check permission ${what} as the access review failed: ${
      error instanceof Error ? error.message : String(error)
    }`,
    "internal",
    500,
    { cause: error },
  );
}

/** Options for {@link runGate}. */
export interface GateOptions {
  /** `--namespace`. */
  namespace: string;
  /** ServiceAccount mode, decided beforehand by a `get serviceaccounts`. */
  mode: ServiceAccountMode;
  /** The ServiceAccount the pod runs as (checked in exact mode). */
  serviceAccount: string;
  /** Whether aicr owns the output ConfigMap. */
  ownsOutput: boolean;
  /** Whether the CLI rewrites the user's `cm://` output (see {@link CallerCheckOptions}). */
  rewritesOutput?: boolean;
  /** `--discover-network`: widen the agent questions. @default false */
  discoverNetwork?: boolean;
  /** The ConfigMaps the agent writes, asked by name in exact mode. @default none */
  configMaps?: AgentConfigMaps;
  /** Where the WARN goes. */
  log: Logger;
  /** Reviews in flight at once. @default 8 */
  concurrency?: number;
  /**
   * The caller's questions, when the operation is not `aicr snapshot` (e.g. the DaemonSet
   * install's {@link creatorChecks}). @default callerChecks({ mode, ownsOutput, namespace })
   */
  caller?: readonly AccessAttributes[];
  /** More caller questions on top of {@link caller} (e.g. `create namespaces`). */
  extraCaller?: readonly AccessAttributes[];
  /**
   * The lines that end the missing-permissions error: how to fix it. @default for
   * `aicr snapshot` ({@link snapshotPermissionsFix}) when {@link caller} is not given, else none
   */
  fix?: readonly string[];
}

/**
 * How to fix a denied `aicr snapshot`: render the agent's RBAC for a ServiceAccount
 * (`--add-roles-to-service-account`, applies nothing), have it applied, then run as that
 * ServiceAccount (`--service-account-name`), which creates no RBAC and so asks the caller for
 * far less.
 *
 * @param options the namespace, the ServiceAccount mode and name, `--discover-network`
 * @returns the lines, indented as an error's details
 */
export function snapshotPermissionsFix(
  options: {
    namespace: string;
    mode: ServiceAccountMode;
    serviceAccount: string;
    discoverNetwork?: boolean;
  },
): string[] {
  const sa = options.mode === "exact" ? options.serviceAccount : "<service-account>";
  // Whole command lines to paste, filled in: the namespace, the account, discovery or not.
  const fill = (command: string) => {
    const filled = command.replace("{ns}", options.namespace).replace("{sa}", sa);
    return options.discoverNetwork ? filled : filled.replace(/ --discover-network$/, "");
  };
  return [
    options.mode === "exact"
      ? `fix: grant ServiceAccount "${sa}" the agent's rules, or have an admin do it:`
      : "fix: have an admin grant the above, or run as a ServiceAccount an admin prepared (no RBAC is created then):",
    `  ${
      fill("aicr snapshot --namespace {ns} --add-roles-to-service-account {sa} --discover-network")
    }   # writes snapshot-rbac-<runID>/, applies nothing`,
    "  kubectl apply -f snapshot-rbac-<runID>/",
    `  ${fill("aicr snapshot --namespace {ns} --service-account-name {sa} --discover-network")}`,
  ];
}

/** What the gate checked. */
export interface GateReport {
  /** Caller questions asked. */
  callerChecked: number;
  /** Agent ServiceAccount questions answered. */
  serviceAccountChecked: number;
  /** Agent ServiceAccount questions that could not be asked (SAR creation denied). */
  serviceAccountUnchecked: number;
}

type Outcome =
  | { kind: "allowed" }
  | { kind: "denied"; line: string }
  | { kind: "unchecked" };

/** One access question, for the caller or the agent's ServiceAccount. */
interface ReviewTask {
  identity: Identity;
  attributes: AccessAttributes;
}

/**
 * Asks one question: a self review for the caller, a subject review for the ServiceAccount
 * (unchecked when the caller may not ask that).
 *
 * @throws {ToolError} when the review itself fails
 */
async function review(
  reviewer: AccessReviewer,
  task: ReviewTask,
  context: { groups: readonly string[]; log: Logger },
): Promise<Outcome> {
  const { identity, attributes } = task;
  try {
    if (identity.kind === "caller") {
      const answer = await reviewer.selfReview(attributes);
      if (answer.allowed) return { kind: "allowed" };
      if (answer.reason) {
        context.log.debug("permission denied", {
          verb: attributes.verb,
          resource: qualifiedResource(attributes),
          reason: answer.reason,
        });
      }
    } else {
      const answer = await reviewer.subjectReview(identity.user, [...context.groups], attributes);
      if (answer.allowed) return { kind: "allowed" };
    }
    return { kind: "denied", line: formatDenial(identity, attributes) };
  } catch (error) {
    // guard: gate-unchecked-sa-only: only the agent's questions may go unchecked;
    // mutant: `identity.kind === "serviceAccount" && ` -> ``
    if (identity.kind === "serviceAccount" && error instanceof PermissionError) {
      return { kind: "unchecked" };
    }
    throw reviewFailure(error, attributes);
  }
}

/**
 * Runs the gate: every caller question, and in exact mode every agent question derived
 * from the rule set, concurrently (bounded). When the caller may not create
 * SubjectAccessReviews, it logs the documented WARN and goes on.
 *
 * @param reviewer asks the API server
 * @param options namespace, mode, ServiceAccount, ownership, discovery, logger
 * @returns what was checked
 * @throws {PermissionError} `missing required permissions:` and one line per denial
 * @throws {UnavailableError} when the API server cannot be reached
 * @throws {ToolError} when a review fails otherwise
 */
export async function runGate(reviewer: AccessReviewer, options: GateOptions): Promise<GateReport> {
  const {
    namespace,
    mode,
    serviceAccount,
    ownsOutput,
    discoverNetwork = false,
    log,
    concurrency = 8,
  } = options;
  const user = serviceAccountUser(namespace, serviceAccount);
  const groups = serviceAccountGroups(namespace);
  const caller = [
    ...(options.caller ??
      callerChecks({
        mode,
        ownsOutput,
        namespace,
        rewritesOutput: options.rewritesOutput ?? false,
      })),
    ...(options.extraCaller ?? []),
  ];
  const agent = mode === "exact"
    ? accessQuestions(
      agentRules({ discoverNetwork, configMaps: options.configMaps ?? {} }),
      namespace,
    )
    : [];
  const tasks: ReviewTask[] = [
    ...caller.map((attributes): ReviewTask => ({ identity: { kind: "caller" }, attributes })),
    ...agent.map((attributes): ReviewTask => ({
      identity: { kind: "serviceAccount", user },
      attributes,
    })),
  ];
  const outcomes = await mapConcurrent(
    tasks,
    concurrency,
    (task) => review(reviewer, task, { groups, log }),
  );
  const unchecked = outcomes.filter((o) => o.kind === "unchecked").length;
  if (unchecked > 0) {
    log.warn(UNVERIFIED_SERVICE_ACCOUNT_WARNING, {
      serviceAccount,
      namespace,
      uncheckedRules: unchecked,
      remedy:
        `grant the caller 'create subjectaccessreviews.authorization.k8s.io', or verify by hand with: kubectl auth can-i --list --as ${user}`,
    });
  }
  const lines = outcomes.flatMap((o) => (o.kind === "denied" ? [o.line] : []));
  // guard: gate-denied: a missing permission stops the run
  if (lines.length > 0) {
    const fix = options.fix ?? (options.caller ? [] : snapshotPermissionsFix(options));
    throw new PermissionError([MISSING_PERMISSIONS_HEADER, ...lines].join("\n"), {
      details: fix,
    });
  }
  return {
    callerChecked: caller.length,
    serviceAccountChecked: agent.length - unchecked,
    serviceAccountUnchecked: unchecked,
  };
}
