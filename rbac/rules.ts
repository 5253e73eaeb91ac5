/**
 * THE rule set: every permission the agent and the daemon hold, each with the reason
 * it exists. The run-scoped Role and ClusterRole, the rendered
 * `--add-roles-to-service-account` manifests, the DaemonSet's RBAC and the agent side
 * of the pre-flight gate are all derived from here, so none can fall behind another.
 *
 * @module
 */
import type { AccessAttributes } from "../kube/mod.ts";

/** One RBAC rule of one API group, with the reason the agent needs it. */
export interface Rule {
  /** API group; `""` is the core group. */
  readonly group: string;
  /** Resources, `resource` or `resource/subresource`. */
  readonly resources: readonly string[];
  /** Verbs, in the order they are written. */
  readonly verbs: readonly string[];
  /** Object names the rule is limited to; absent for every object of the resources. */
  readonly resourceNames?: readonly string[];
  /** Why the agent needs this rule: one sentence without a final period, shown in rendered headers. */
  readonly why: string;
}

/** The rules of one identity, split by scope. */
export interface RuleSet {
  /** Rules of the namespaced Role (the deployment namespace only). */
  readonly namespaced: readonly Rule[];
  /** Rules of the ClusterRole. */
  readonly cluster: readonly Rule[];
}

/** One authorization question: the one access-review type, from `kube/`. */
export type { AccessAttributes } from "../kube/mod.ts";

/** Verbs that change nothing. */
export const READ_ONLY_VERBS: readonly string[] = ["get", "list", "watch"];

/** The agent's namespaced read of pods (its own pod, for its node). */
export const AGENT_POD_RULE: Rule = {
  group: "",
  resources: ["pods"],
  verbs: ["get", "list"],
  why:
    "The agent reads the pods of its own namespace (its own pod, for the node it landed on); it reads nothing else here",
};

/** The ConfigMaps the agent writes; every name is in the Role's namespace. */
export interface AgentConfigMaps {
  /**
   * The staging ConfigMap aicr creates for the run (with this invocation's labels) and the
   * agent only updates, pinned to its UID: `get, update` on this one name, no create.
   */
  staging?: string;
  /** The user's `cm://` output, which the agent creates or updates by server-side apply. */
  target?: string;
}

/**
 * The agent's namespaced rules: `get, update` on the staging ConfigMap alone, or `create`
 * plus `get, update, patch` on the `cm://` target alone, and reading pods. Never every
 * ConfigMap of the namespace (`kube-root-ca.crt` and the user's own included).
 *
 * @param configMaps the staging name and the `cm://` target, as the run has them
 * @returns the rules
 */
export function agentNamespacedRules(configMaps: AgentConfigMaps): Rule[] {
  const rules: Rule[] = [];
  if (configMaps.staging !== undefined) {
    rules.push({
      group: "",
      resources: ["configmaps"],
      verbs: ["get", "update"],
      resourceNames: [configMaps.staging],
      why:
        `The agent writes the snapshot into the staging ConfigMap "${configMaps.staging}", which aicr creates (labelled with the invocation) before the Job; it reads it and updates it pinned to its UID, so it can neither create a ConfigMap there nor touch any other`,
    });
  }
  if (configMaps.target !== undefined) {
    rules.push(
      {
        group: "",
        resources: ["configmaps"],
        verbs: ["create"],
        why:
          `The agent creates the cm:// output "${configMaps.target}" the first time; a create cannot be limited by name (the API server authorizes it before the object has one)`,
      },
      {
        group: "",
        resources: ["configmaps"],
        verbs: ["get", "update", "patch"],
        resourceNames: [configMaps.target],
        why:
          `The agent writes the snapshot into the cm:// output "${configMaps.target}" with a server-side apply; limited by name to that ConfigMap`,
      },
    );
  }
  rules.push(AGENT_POD_RULE);
  return rules;
}

/** The agent's read-only ClusterRole baseline. */
export const AGENT_CLUSTER_RULES: readonly Rule[] = [
  {
    group: "",
    resources: ["nodes"],
    verbs: ["get", "list"],
    why:
      "The agent reads its own node (provider, kubelet, kernel and OS versions) and lists every node for the label and taint topology",
  },
  {
    group: "",
    resources: ["pods"],
    verbs: ["get", "list"],
    why:
      "The agent lists pods in all namespaces to record which container image tags run in the cluster (image names and tags only)",
  },
  {
    group: "nvidia.com",
    resources: ["clusterpolicies"],
    verbs: ["get", "list"],
    why:
      "The agent reads the GPU Operator ClusterPolicy spec (driver, toolkit and device plugin settings)",
  },
  {
    group: "slinky.slurm.net",
    resources: ["controllers", "nodesets", "loginsets", "restapis", "accountings"],
    verbs: ["list"],
    why:
      "The agent detects Slinky (Slurm on Kubernetes); it keeps only allowlisted identity, association and boolean fields, never configuration, status, pod templates or Secret and ConfigMap references or contents",
  },
  {
    group: "k8s.mariadb.com",
    resources: ["mariadbs"],
    verbs: ["list"],
    why:
      "The agent records whether official MariaDB CRs are present; it does not inspect database configuration, Services, operator Deployments, pods or external databases",
  },
  {
    group: "apps",
    resources: ["daemonsets"],
    verbs: ["get", "list"],
    why: "The agent detects the legacy OKE NVIDIA device-plugin DaemonSet",
  },
];

/**
 * The daemon's read of Nodes: `get` only. Each daemon reads its own Node (K8s readings and its
 * own NodeTopology); it never lists them (`aicr daemonset fetch` lists the cluster's once per
 * fetch, as the reader: {@link DAEMON_READER_RULES}). One ClusterRole serves every daemon, so
 * the name cannot be pinned per node.
 */
export const DAEMON_NODE_RULE: Rule = {
  group: "",
  resources: ["nodes"],
  verbs: ["get"],
  why:
    "The daemon reads its own node (provider, kubelet, kernel and OS versions, its labels and taints); it never lists nodes",
};

/**
 * The daemon's read-only cluster rules: the agent's baseline with the Node rule narrowed to
 * {@link DAEMON_NODE_RULE}.
 */
export const DAEMON_CLUSTER_RULES: readonly Rule[] = AGENT_CLUSTER_RULES.map((rule) =>
  rule.group === "" && rule.resources.includes("nodes") ? DAEMON_NODE_RULE : rule
);

/**
 * The cluster-scoped rules `--discover-network` appends for k8s-launch-kit's live
 * discovery. Most of them mutate the cluster.
 */
export const DISCOVER_NETWORK_RULES: readonly Rule[] = [
  {
    group: "apiextensions.k8s.io",
    resources: ["customresourcedefinitions"],
    verbs: ["get", "list", "create", "update", "patch"],
    why: "k8s-launch-kit installs and updates the CustomResourceDefinitions its discovery uses",
  },
  {
    group: "",
    resources: ["namespaces"],
    verbs: ["get", "create", "delete"],
    why: "k8s-launch-kit creates and tears down a bootstrap namespace for its discovery pods",
  },
  {
    group: "apps",
    resources: ["daemonsets"],
    verbs: ["get", "list", "watch", "create", "delete"],
    why:
      "k8s-launch-kit runs a discovery DaemonSet on the nodes, waits for it, and deletes it afterwards",
  },
  {
    group: "",
    resources: ["serviceaccounts", "configmaps"],
    verbs: ["get", "create", "delete"],
    why:
      "k8s-launch-kit creates the discovery DaemonSet's ServiceAccount and configuration, and deletes them afterwards",
  },
  {
    group: "rbac.authorization.k8s.io",
    resources: ["roles", "rolebindings"],
    verbs: ["get", "create", "delete"],
    why: "k8s-launch-kit grants its discovery pods their own Role, and deletes it afterwards",
  },
  {
    group: "",
    resources: ["pods/exec"],
    verbs: ["create"],
    why: "k8s-launch-kit execs into the discovery DaemonSet pods to read NIC VPD and link state",
  },
  {
    group: "",
    resources: ["nodes"],
    verbs: ["patch"],
    why: "k8s-launch-kit writes nvidia.kubernetes-launch-kit.* labels onto the nodes",
  },
  {
    group: "configuration.net.nvidia.com",
    resources: ["nicdevices"],
    verbs: ["get", "list"],
    why: "k8s-launch-kit reads the NicDevice objects the NVIDIA Network Operator publishes",
  },
  {
    group: "mellanox.com",
    resources: ["nicclusterpolicies"],
    verbs: ["get", "patch"],
    why: "k8s-launch-kit may patch the Network Operator's NicClusterPolicy",
  },
];

/**
 * What the daemon adds to the agent's read-only baseline: it authenticates and
 * authorizes its HTTP clients against the API server (delegated auth, the
 * kube-rbac-proxy pattern), so scraping a snapshot needs a Kubernetes identity.
 */
export const DAEMON_AUTH_RULES: readonly Rule[] = [
  {
    group: "authentication.k8s.io",
    resources: ["tokenreviews"],
    verbs: ["create"],
    why: "The daemon checks the bearer token of every HTTP client (delegated authentication)",
  },
  {
    group: "authorization.k8s.io",
    resources: ["subjectaccessreviews"],
    verbs: ["create"],
    why:
      "The daemon asks whether an authenticated HTTP client may read snapshots (delegated authorization)",
  },
];

/**
 * What the reader ServiceAccount of an installed daemon holds: reading snapshots, nothing else
 * (the daemon's SubjectAccessReview asks exactly this; see daemon/README.md). The fleet fetch
 * mints this account's token, so the user's own credential never reaches a node.
 */
export const DAEMON_READER_RULES: readonly Rule[] = [
  {
    group: "aicr.run",
    resources: ["snapshots"],
    verbs: ["get"],
    why:
      "The fleet fetch reads each node's snapshot from its daemon (a virtual resource no API serves: it opens snapshots and nothing else)",
  },
  {
    group: "",
    resources: ["nodes"],
    verbs: ["list"],
    why:
      "The fleet fetch lists the nodes once per fetch for the cluster's label and taint topology (each daemon reports its own node only); what every node's snapshot carried before",
  },
];

/**
 * What a daemon needs to get its own serving certificate (daemon/README.md, "Per-node
 * identity"): create its CertificateSigningRequest and read it back until it is signed. No
 * update, no approval, no signing: only the in-cluster signer, the installer or a fetch signs,
 * and only requests it can match to a live pod of the DaemonSet on the node the request names.
 */
export const DAEMON_CSR_RULES: readonly Rule[] = [
  {
    group: "certificates.k8s.io",
    resources: ["certificatesigningrequests"],
    verbs: ["create", "get"],
    why:
      "The daemon asks for its own serving certificate (signer aicr.run/daemon-serving) with its pod-bound token and reads it back once signed",
  },
];

/** The group of CertificateSigningRequests and signers. */
const CERTIFICATES_GROUP = "certificates.k8s.io";

/**
 * The in-cluster signer's cluster-scoped rules (CertificateSigningRequests are cluster-scoped):
 * read and watch the requests, write the approval and the certificate, and approve and sign for
 * the one signer name `signerName` and no other; `get` Nodes to check that the node a request's
 * token names still exists.
 *
 * @param signerName the CSR signer name (`aicr.run/daemon-serving`)
 * @returns the rules
 */
export function signerClusterRules(signerName: string): Rule[] {
  return [
    {
      group: CERTIFICATES_GROUP,
      resources: ["certificatesigningrequests"],
      verbs: ["get", "list", "watch"],
      why:
        `The signer lists and watches the certificate requests of its signer ${signerName} (a field selector: RBAC cannot narrow a list by signer name), and re-reads one before deciding it`,
    },
    {
      group: CERTIFICATES_GROUP,
      resources: ["certificatesigningrequests/approval"],
      verbs: ["update"],
      why:
        "The signer approves a daemon's request it matched to a live pod, or denies it with a reason",
    },
    {
      group: CERTIFICATES_GROUP,
      resources: ["certificatesigningrequests/status"],
      verbs: ["update"],
      why: "The signer writes the issued certificate into an approved request's status",
    },
    {
      group: CERTIFICATES_GROUP,
      resources: ["signers"],
      verbs: ["approve", "sign"],
      resourceNames: [signerName],
      why:
        `The API server lets the signer approve and sign requests of ${signerName} only (no other signer name, kubelet and kube-apiserver client ones included)`,
    },
    {
      group: "",
      resources: ["nodes"],
      verbs: ["get"],
      why:
        "The signer checks that the node a request's pod-bound token names exists, with the UID the token carries",
    },
  ];
}

/** The names the in-cluster signer's namespaced rules are limited to. */
export interface SignerNames {
  /** The install's CA Secret (`<name>-signer`). */
  caSecret: string;
  /** The signer's Lease (`<name>-signer`). */
  lease: string;
  /** The daemon's DaemonSet (its UID is the proof a pod is one of its own). */
  daemonSet: string;
}

/**
 * The in-cluster signer's rules in the daemon's namespace: `get` its one CA Secret, `get` and
 * `update` its one Lease (leader election; the install creates it, so no `create`), `get` the
 * DaemonSet by name, and read the pods (a pod-bound token names a pod; RBAC cannot narrow a list
 * by labels).
 *
 * @param names the CA Secret, the Lease and the DaemonSet
 * @returns the rules
 */
export function signerNamespacedRules(names: SignerNames): Rule[] {
  return [
    {
      group: "",
      resources: ["secrets"],
      verbs: ["get"],
      resourceNames: [names.caSecret],
      why:
        `The signer reads the install's CA key from Secret "${names.caSecret}" to sign, and no other Secret`,
    },
    {
      group: "coordination.k8s.io",
      resources: ["leases"],
      verbs: ["get", "update"],
      resourceNames: [names.lease],
      why:
        `The signer's replicas elect one leader through Lease "${names.lease}" (acquire, renew, release); the install creates it`,
    },
    {
      group: "apps",
      resources: ["daemonsets"],
      verbs: ["get"],
      resourceNames: [names.daemonSet],
      why:
        `The signer reads DaemonSet "${names.daemonSet}": a request is signed only for a pod it controls`,
    },
    {
      group: "",
      resources: ["pods"],
      verbs: ["get", "list"],
      why:
        "The signer matches each request's pod-bound token to a live pod of the DaemonSet, its node and its IP",
    },
  ];
}

/**
 * The in-cluster signer's rule set (its Role in the daemon's namespace and its ClusterRole).
 *
 * @param options the signer name and the names its namespaced rules are limited to
 * @returns the rule set
 */
export function signerRules(options: SignerNames & { signerName: string }): RuleSet {
  return {
    namespaced: signerNamespacedRules(options),
    cluster: signerClusterRules(options.signerName),
  };
}

/** Rules the daemon needs to publish its snapshot into a ConfigMap of its namespace. */
export const DAEMON_CONFIGMAP_RULES: readonly Rule[] = [
  {
    group: "",
    resources: ["configmaps"],
    verbs: ["create", "get", "update", "patch"],
    why: "The daemon publishes its node's latest snapshot into a ConfigMap in its own namespace",
  },
];

/**
 * What the daemon needs to read its cohort's baseline: `get` on the baseline ConfigMaps of its
 * own namespace, by name. The names are made per cohort when someone sets a baseline, after the
 * install wrote this rule, so `aicr daemonset baseline set` and `delete` keep `resourceNames` in
 * step with the baselines that exist; the list always holds a placeholder name no baseline has,
 * since an empty `resourceNames` would mean every ConfigMap. No `list` or `watch`: neither can be
 * narrowed by name, and the daemon polls `get` of its own cohort's name instead.
 *
 * @param configMaps the names the daemon may read (placeholder included)
 * @returns the rule
 */
export function daemonBaselineRules(configMaps: readonly string[]): Rule[] {
  return [{
    group: "",
    resources: ["configmaps"],
    verbs: ["get"],
    resourceNames: [...new Set(configMaps)].sort(),
    why:
      "The daemon reads its cohort's baseline ConfigMap by name to export aicr_drift_readings; get only, limited to the baselines that exist (aicr daemonset baseline set and delete keep this list)",
  }];
}

/**
 * Whether a rule can change the cluster: any verb other than get, list or watch.
 *
 * @param rule the rule
 * @returns whether it mutates
 */
export function isMutating(rule: Rule): boolean {
  return rule.verbs.some((verb) => !READ_ONLY_VERBS.includes(verb));
}

/** Options for {@link agentRules}. */
export interface AgentRuleOptions {
  /** The ConfigMaps the agent writes (the Role names them; nothing else is writable). */
  configMaps: AgentConfigMaps;
  /** `--discover-network`: append the mutating discovery rules. @default false */
  discoverNetwork?: boolean;
}

/**
 * The agent's rules: the namespaced Role (limited to the ConfigMaps it writes) and the
 * ClusterRole, the latter widened by the mutating discovery rules under `--discover-network`.
 *
 * @param options the ConfigMaps and `discoverNetwork`
 * @returns the rule set
 */
export function agentRules(options: AgentRuleOptions): RuleSet {
  const { discoverNetwork = false } = options;
  return {
    namespaced: agentNamespacedRules(options.configMaps),
    cluster: discoverNetwork
      ? [...AGENT_CLUSTER_RULES, ...DISCOVER_NETWORK_RULES]
      : [...AGENT_CLUSTER_RULES],
  };
}

/**
 * What a scheduled agent (`aicr snapshot --render-cronjob`) holds: it creates one ConfigMap per
 * run under a new name, so `create` cannot be limited by name, and prunes its series, so `list`
 * and `delete` cannot either (RBAC has no label selectors): give the series a namespace of its
 * own. It never updates or patches a ConfigMap. The cluster rules are the agent's read-only set.
 *
 * @returns the rules
 */
export function scheduledAgentRules(): RuleSet {
  return {
    namespaced: [
      {
        group: "",
        resources: ["configmaps"],
        verbs: ["create"],
        why:
          "Each scheduled run creates its snapshot's ConfigMap <name>-<time>; a create cannot be limited by name",
      },
      {
        group: "",
        resources: ["configmaps"],
        verbs: ["list", "delete"],
        why:
          "Each run keeps the newest N of its series (label aicr.run/series) and deletes the older ones, each pinned to the UID it listed; RBAC cannot limit by label",
      },
      AGENT_POD_RULE,
    ],
    cluster: [...AGENT_CLUSTER_RULES],
  };
}

/** Options for {@link daemonRules}. */
export interface DaemonRuleOptions {
  /** Check HTTP clients with TokenReview and SubjectAccessReview. @default true */
  delegatedAuth?: boolean;
  /** Let the daemon publish its snapshot into a ConfigMap of its namespace. @default false */
  publishConfigMap?: boolean;
  /** Let the daemon request its serving certificate through the CSR API. @default false */
  servingCertificate?: boolean;
  /**
   * The baseline ConfigMaps of its namespace the daemon may `get` (never empty: callers add a
   * placeholder). @default none: no baseline rule
   */
  baselineConfigMaps?: readonly string[];
}

/**
 * The daemon's rules: the agent's read-only cluster baseline (it runs the same
 * collectors) with Nodes narrowed to `get` (it reads its own Node, never the list), the
 * delegated-auth rules, and ConfigMap writes only when it publishes.
 * It never gets the discovery rules: a long-lived identity must not mutate the cluster.
 *
 * @param options `delegatedAuth`, `publishConfigMap`, `servingCertificate`, `baselineConfigMaps`
 * @returns the rule set
 */
export function daemonRules(options: DaemonRuleOptions = {}): RuleSet {
  const {
    delegatedAuth = true,
    publishConfigMap = false,
    servingCertificate = false,
    baselineConfigMaps,
  } = options;
  return {
    namespaced: [
      ...(publishConfigMap ? DAEMON_CONFIGMAP_RULES : []),
      ...(baselineConfigMaps ? daemonBaselineRules(baselineConfigMaps) : []),
    ],
    cluster: [
      ...DAEMON_CLUSTER_RULES,
      ...(delegatedAuth ? DAEMON_AUTH_RULES : []),
      ...(servingCertificate ? DAEMON_CSR_RULES : []),
    ],
  };
}

/**
 * Splits `pods/exec` into resource and subresource.
 *
 * @param resource `resource` or `resource/subresource`
 * @returns the two parts
 */
export function splitResource(resource: string): { resource: string; subresource?: string } {
  const slash = resource.indexOf("/");
  return slash < 0
    ? { resource }
    : { resource: resource.slice(0, slash), subresource: resource.slice(slash + 1) };
}

/**
 * Flattens rules into one question per (verb, resource), namespaced rules asked in
 * `namespace` and cluster rules cluster-wide, without duplicates (the discovery
 * DaemonSet rule repeats the baseline's `get` and `list`). This is what the gate asks
 * of an existing ServiceAccount, and its length is the WARN's `uncheckedRules`.
 *
 * @param rules the rule set
 * @param namespace the deployment namespace
 * @returns the questions, in rule order
 */
export function accessQuestions(rules: RuleSet, namespace: string): AccessAttributes[] {
  const seen = new Set<string>();
  const questions: AccessAttributes[] = [];
  function add(rule: Rule, scope: string | undefined): void {
    for (const resource of rule.resources) {
      for (const verb of rule.verbs) {
        // A rule limited by names is asked once per name (a nameless question would be denied).
        for (const name of rule.resourceNames ?? [undefined]) {
          const question: AccessAttributes = {
            verb,
            group: rule.group,
            ...splitResource(resource),
            ...(scope === undefined ? {} : { namespace: scope }),
            ...(name === undefined ? {} : { name }),
          };
          const key = [verb, rule.group, resource, scope ?? "", name ?? ""].join("\u0000");
          if (seen.has(key)) continue;
          seen.add(key);
          questions.push(question);
        }
      }
    }
  }
  for (const rule of rules.namespaced) add(rule, namespace);
  for (const rule of rules.cluster) add(rule, undefined);
  return questions;
}

/**
 * The name kubectl and the gate's messages use for a resource: core resources bare
 * (`pods`, `pods/log`), others `resource.group` (`jobs.batch`), a subresource after
 * the group (`deployments.apps/scale`).
 *
 * @param attributes group, resource and subresource
 * @returns the qualified name
 */
export function qualifiedResource(
  attributes: Pick<AccessAttributes, "group" | "resource" | "subresource">,
): string {
  const base = (attributes.group ?? "") === ""
    ? attributes.resource
    : `${attributes.resource}.${attributes.group}`;
  return attributes.subresource === undefined ? base : `${base}/${attributes.subresource}`;
}
