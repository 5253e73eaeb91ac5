/**
 * The RBAC objects of a run, of the rendered exact-ServiceAccount grant and of the
 * daemon, built as plain manifests from the rule set in `rules.ts` and the names in
 * `manifests/`.
 *
 * @module
 */
import {
  DAEMON_CSR_SIGNER,
  daemonSignerSecretName,
  DEFAULT_SERVICE_ACCOUNT_PREFIX,
  exactStagingConfigMapName,
  nodeReaderName,
  renderedClusterRoleName,
  renderedLabels,
  renderedRoleName,
  runLabels,
  serviceAccountRunName,
  signerClusterRoleName,
  signerName,
  validateServiceAccountName,
} from "../manifests/mod.ts";
import type { Labels, ObjectMeta, RunIdentity } from "../manifests/mod.ts";
import { agentRules, scheduledAgentRules, signerRules } from "./rules.ts";
import type { AgentConfigMaps, Rule, RuleSet } from "./rules.ts";

/** An RBAC rule exactly as Kubernetes writes it. */
export interface PolicyRule {
  /** API groups (`""` is core). */
  apiGroups: string[];
  /** Resources. */
  resources: string[];
  /** Verbs. */
  verbs: string[];
  /** Object names the rule is limited to, when it is. */
  resourceNames?: string[];
}

/** A binding's subject: always a ServiceAccount here. */
export interface ServiceAccountSubject {
  /** `ServiceAccount`. */
  kind: "ServiceAccount";
  /** Its name. */
  name: string;
  /** Its namespace. */
  namespace: string;
}

/** A binding's role reference. */
export interface RoleRef {
  /** `rbac.authorization.k8s.io`. */
  apiGroup: "rbac.authorization.k8s.io";
  /** `Role` or `ClusterRole`. */
  kind: "Role" | "ClusterRole";
  /** The role's name. */
  name: string;
}

/** A ServiceAccount manifest. */
export interface ServiceAccountManifest {
  /** `v1`. */
  apiVersion: "v1";
  /** `ServiceAccount`. */
  kind: "ServiceAccount";
  /** Metadata. */
  metadata: ObjectMeta;
}

/** A Role manifest. */
export interface RoleManifest {
  /** `rbac.authorization.k8s.io/v1`. */
  apiVersion: "rbac.authorization.k8s.io/v1";
  /** `Role`. */
  kind: "Role";
  /** Metadata. */
  metadata: ObjectMeta;
  /** Rules. */
  rules: PolicyRule[];
}

/** A ClusterRole manifest. */
export interface ClusterRoleManifest {
  /** `rbac.authorization.k8s.io/v1`. */
  apiVersion: "rbac.authorization.k8s.io/v1";
  /** `ClusterRole`. */
  kind: "ClusterRole";
  /** Metadata. */
  metadata: ObjectMeta;
  /** Rules. */
  rules: PolicyRule[];
}

/** A RoleBinding manifest. */
export interface RoleBindingManifest {
  /** `rbac.authorization.k8s.io/v1`. */
  apiVersion: "rbac.authorization.k8s.io/v1";
  /** `RoleBinding`. */
  kind: "RoleBinding";
  /** Metadata. */
  metadata: ObjectMeta;
  /** The Role. */
  roleRef: RoleRef;
  /** The ServiceAccount. */
  subjects: ServiceAccountSubject[];
}

/** A ClusterRoleBinding manifest. */
export interface ClusterRoleBindingManifest {
  /** `rbac.authorization.k8s.io/v1`. */
  apiVersion: "rbac.authorization.k8s.io/v1";
  /** `ClusterRoleBinding`. */
  kind: "ClusterRoleBinding";
  /** Metadata. */
  metadata: ObjectMeta;
  /** The ClusterRole. */
  roleRef: RoleRef;
  /** The ServiceAccount. */
  subjects: ServiceAccountSubject[];
}

/** The four objects that grant a rule set to a ServiceAccount. */
export interface RbacGrant {
  /** Namespaced rules. */
  role: RoleManifest;
  /** Binds the Role to the ServiceAccount. */
  roleBinding: RoleBindingManifest;
  /** Cluster rules. */
  clusterRole: ClusterRoleManifest;
  /** Binds the ClusterRole to the ServiceAccount. */
  clusterRoleBinding: ClusterRoleBindingManifest;
}

/** A run's RBAC: its own ServiceAccount plus the grant. */
export interface RunRbac extends RbacGrant {
  /** The run-scoped ServiceAccount. */
  serviceAccount: ServiceAccountManifest;
}

const RBAC_API = "rbac.authorization.k8s.io/v1";
const RBAC_GROUP = "rbac.authorization.k8s.io";

/**
 * Converts rules into Kubernetes `PolicyRule`s (dropping the explanations).
 *
 * @param rules the rules
 * @returns the policy rules, in order
 */
export function toPolicyRules(rules: readonly Rule[]): PolicyRule[] {
  return rules.map((rule) => ({
    apiGroups: [rule.group],
    resources: [...rule.resources],
    verbs: [...rule.verbs],
    ...(rule.resourceNames ? { resourceNames: [...rule.resourceNames] } : {}),
  }));
}

function meta(name: string, labels: Labels, namespace?: string): ObjectMeta {
  return namespace === undefined
    ? { name, labels: { ...labels } }
    : { name, namespace, labels: { ...labels } };
}

/** What names and labels a grant gets. */
interface GrantNames {
  namespace: string;
  serviceAccount: string;
  roleName: string;
  clusterRoleName: string;
  labels: Labels;
  rules: RuleSet;
}

function buildGrant(names: GrantNames): RbacGrant {
  const { namespace, serviceAccount, roleName, clusterRoleName, labels, rules } = names;
  const subjects: ServiceAccountSubject[] = [{
    kind: "ServiceAccount",
    name: serviceAccount,
    namespace,
  }];
  return {
    role: {
      apiVersion: RBAC_API,
      kind: "Role",
      metadata: meta(roleName, labels, namespace),
      rules: toPolicyRules(rules.namespaced),
    },
    roleBinding: {
      apiVersion: RBAC_API,
      kind: "RoleBinding",
      metadata: meta(roleName, labels, namespace),
      roleRef: { apiGroup: RBAC_GROUP, kind: "Role", name: roleName },
      subjects,
    },
    clusterRole: {
      apiVersion: RBAC_API,
      kind: "ClusterRole",
      metadata: meta(clusterRoleName, labels),
      rules: toPolicyRules(rules.cluster),
    },
    clusterRoleBinding: {
      apiVersion: RBAC_API,
      kind: "ClusterRoleBinding",
      metadata: meta(clusterRoleName, labels),
      roleRef: { apiGroup: RBAC_GROUP, kind: "ClusterRole", name: clusterRoleName },
      subjects: subjects.map((s) => ({ ...s })),
    },
  };
}

/** Options for {@link runRbacObjects}. */
export interface RunRbacOptions extends RunIdentity {
  /** `--namespace`. */
  namespace: string;
  /** `--service-account-name` used as a prefix. @default "aicr" */
  serviceAccountPrefix?: string;
  /** `--discover-network`. @default false */
  discoverNetwork?: boolean;
  /** The one ConfigMap the agent writes: the staging name, or the `cm://` target. */
  configMaps: AgentConfigMaps;
}

/**
 * A run's RBAC in prefix mode: ServiceAccount, Role and RoleBinding `<sa>-<runID>`,
 * ClusterRole and ClusterRoleBinding `aicr-node-reader-<runID>`, all five carrying the
 * five run labels.
 *
 * @param options namespace, run identity, prefix and `discoverNetwork`
 * @returns the five manifests
 * @throws {UsageError} when the namespace or prefix is not a valid name
 */
export function runRbacObjects(options: RunRbacOptions): RunRbac {
  const {
    namespace,
    serviceAccountPrefix = DEFAULT_SERVICE_ACCOUNT_PREFIX,
    discoverNetwork = false,
  } = options;
  const labels = runLabels(options);
  const name = serviceAccountRunName(serviceAccountPrefix, options.runId);
  const grant = buildGrant({
    namespace,
    serviceAccount: name,
    roleName: name,
    clusterRoleName: nodeReaderName(options.runId),
    labels,
    rules: agentRules({ discoverNetwork, configMaps: options.configMaps }),
  });
  return {
    serviceAccount: {
      apiVersion: "v1",
      kind: "ServiceAccount",
      metadata: meta(name, labels, namespace),
    },
    ...grant,
  };
}

/** Options for {@link renderedRbacObjects}. */
export interface RenderedRbacOptions {
  /** `--namespace`. */
  namespace: string;
  /** `--add-roles-to-service-account`. */
  serviceAccount: string;
  /** `--discover-network`. @default false */
  discoverNetwork?: boolean;
  /** The ConfigMaps runs as this ServiceAccount write (see {@link renderedConfigMaps}). */
  configMaps: AgentConfigMaps;
}

/**
 * The ConfigMaps runs as an existing ServiceAccount write: its own staging ConfigMap
 * (`aicr-agent-snapshot-<sa>`, one name every run as it shares, so a grant can name it) and,
 * when given, the `cm://` output.
 *
 * @param serviceAccount the ServiceAccount
 * @param target the `cm://` output's name, when the runs write one
 * @returns the names for {@link agentRules}
 * @throws {UsageError} when the staging name would be too long
 */
export function renderedConfigMaps(serviceAccount: string, target?: string): AgentConfigMaps {
  return {
    staging: exactStagingConfigMapName(serviceAccount),
    ...(target !== undefined ? { target } : {}),
  };
}

/**
 * The grant `--add-roles-to-service-account` renders for an existing ServiceAccount:
 * Role and RoleBinding `aicr-agent-<sa>-rbac`, ClusterRole and ClusterRoleBinding
 * `aicr-agent-<ns>.<sa>-rbac`, with the same rules a run-scoped grant carries and no
 * run, invocation or managed-by label.
 *
 * @param options namespace, ServiceAccount and `discoverNetwork`
 * @returns the four manifests
 * @throws {UsageError} when the namespace or ServiceAccount is not a valid name
 */
export function renderedRbacObjects(options: RenderedRbacOptions): RbacGrant {
  const { namespace, serviceAccount, discoverNetwork = false } = options;
  validateServiceAccountName("serviceAccount", serviceAccount);
  return buildGrant({
    namespace,
    serviceAccount,
    roleName: renderedRoleName(serviceAccount),
    clusterRoleName: renderedClusterRoleName(namespace, serviceAccount),
    labels: renderedLabels(),
    rules: agentRules({ discoverNetwork, configMaps: options.configMaps }),
  });
}

/**
 * The grant of scheduled snapshots: ServiceAccount, Role and RoleBinding `<name>`, ClusterRole and
 * ClusterRoleBinding `aicr-node-reader-<ns>.<name>`, with {@link scheduledAgentRules}.
 *
 * @param options the namespace, the series name and the objects' labels
 * @returns the ServiceAccount and the grant
 */
export function scheduledRbacObjects(
  options: { namespace: string; name: string; labels: Labels },
): RunRbac {
  const { namespace, name, labels } = options;
  const grant = buildGrant({
    namespace,
    serviceAccount: name,
    roleName: name,
    clusterRoleName: `aicr-node-reader-${namespace}.${name}`,
    labels,
    rules: scheduledAgentRules(),
  });
  return {
    serviceAccount: {
      apiVersion: "v1",
      kind: "ServiceAccount",
      metadata: meta(name, labels, namespace),
    },
    ...grant,
  };
}

/** Options for {@link daemonRbacObjects}. */
export interface DaemonRbacOptions {
  /** The daemon's namespace. */
  namespace: string;
  /** The daemon's name, shared by its ServiceAccount, Role and RoleBinding. */
  name: string;
  /** The ClusterRole and ClusterRoleBinding name. */
  clusterRoleName: string;
  /** The daemon's labels (from `daemonLabels`). */
  labels: Labels;
  /** The daemon's rules (from `daemonRules`). */
  rules: RuleSet;
}

/** The daemon's RBAC; the Role pair only when the daemon has namespaced rules. */
export interface DaemonRbac {
  /** The daemon's ServiceAccount. */
  serviceAccount: ServiceAccountManifest;
  /** Namespaced rules, when there are any. */
  role?: RoleManifest;
  /** Binds the Role, when there is one. */
  roleBinding?: RoleBindingManifest;
  /** Cluster rules. */
  clusterRole: ClusterRoleManifest;
  /** Binds the ClusterRole. */
  clusterRoleBinding: ClusterRoleBindingManifest;
}

/**
 * The DaemonSet mode's RBAC: its ServiceAccount, a ClusterRole for the daemon rules
 * and, only when the daemon publishes a ConfigMap, a Role.
 *
 * @param options names, labels and rules
 * @returns the manifests
 * @throws {UsageError} when the namespace is not a valid name
 */
export function daemonRbacObjects(options: DaemonRbacOptions): DaemonRbac {
  const { namespace, name, clusterRoleName, labels, rules } = options;
  const grant = buildGrant({
    namespace,
    serviceAccount: name,
    roleName: name,
    clusterRoleName,
    labels,
    rules,
  });
  const serviceAccount: ServiceAccountManifest = {
    apiVersion: "v1",
    kind: "ServiceAccount",
    metadata: meta(name, labels, namespace),
  };
  const cluster = {
    clusterRole: grant.clusterRole,
    clusterRoleBinding: grant.clusterRoleBinding,
  };
  return rules.namespaced.length === 0
    ? { serviceAccount, ...cluster }
    : { serviceAccount, role: grant.role, roleBinding: grant.roleBinding, ...cluster };
}

/** Options for {@link signerRbacObjects}. */
export interface SignerRbacOptions {
  /** The daemon's namespace. */
  namespace: string;
  /** The daemon's name (the signer's objects are `<name>-signer`). */
  name: string;
  /** The signer's labels (from `signerLabels`). */
  labels: Labels;
}

/** The in-cluster signer's RBAC, and the rules it grants (the gate checks the installer holds them). */
export interface SignerRbac extends DaemonRbac {
  /** The rules granted. */
  rules: RuleSet;
}

/**
 * The in-cluster signer's ServiceAccount, Role and RoleBinding `<name>-signer` (its CA Secret,
 * its Lease and the DaemonSet, each by name; the pods) and ClusterRole and ClusterRoleBinding
 * `aicr-csr-signer-<ns>.<name>` (the requests, approve and sign for its signer name only).
 *
 * @param options namespace, daemon name and labels
 * @returns the manifests and the rules
 * @throws {UsageError} when a name is invalid
 */
export function signerRbacObjects(options: SignerRbacOptions): SignerRbac {
  const { namespace, name, labels } = options;
  const rules = signerRules({
    signerName: DAEMON_CSR_SIGNER,
    caSecret: daemonSignerSecretName(name),
    lease: signerName(name),
    daemonSet: name,
  });
  const rbac = daemonRbacObjects({
    namespace,
    name: signerName(name),
    clusterRoleName: signerClusterRoleName(namespace, name),
    labels,
    rules,
  });
  return { ...rbac, rules };
}
