/**
 * The one source of every name and label aicr puts on a Kubernetes object: run IDs,
 * invocation IDs, run-scoped names that always fit 63 characters, the names of the
 * rendered exact-ServiceAccount grant, the labels of runs and of the snapshot
 * ConfigMap, label selectors, and Kubernetes name validation with errors that name
 * the option (the CLI names its flag).
 *
 * @module
 */
import { UsageError } from "../errors.ts";

/** Labels of one object, in the order they are written. */
export type Labels = Record<string, string>;

/** `app.kubernetes.io/name`: always `aicr`. */
export const LABEL_NAME = "app.kubernetes.io/name";
/** `app.kubernetes.io/managed-by`: `aicr` on every object a run creates. */
export const LABEL_MANAGED_BY = "app.kubernetes.io/managed-by";
/** `app.kubernetes.io/component`: `snapshot-agent`, `daemon`, or `Snapshot` on the ConfigMap. */
const LABEL_COMPONENT = "app.kubernetes.io/component";
/** `app.kubernetes.io/version`: the agent's version, on the snapshot ConfigMap. */
const LABEL_VERSION = "app.kubernetes.io/version";
/** `app.kubernetes.io/instance`: tells two DaemonSets of one namespace apart. */
const LABEL_INSTANCE = "app.kubernetes.io/instance";
/** `aicr.run/run-id`: the run ID; settable, so it proves nothing on its own. */
export const LABEL_RUN_ID = "aicr.run/run-id";
/** `aicr.run/invocation-id`: generated per process; what cleanup's ownership proof rests on. */
export const LABEL_INVOCATION_ID = "aicr.run/invocation-id";

/** The value of {@link LABEL_NAME} and {@link LABEL_MANAGED_BY}. */
export const APP_NAME = "aicr";
/** Component of the snapshot agent Job, its pod and its RBAC. */
const COMPONENT_SNAPSHOT_AGENT = "snapshot-agent";
/** Component of the DaemonSet mode's objects. */
const COMPONENT_DAEMON = "daemon";
/** Component of the in-cluster CSR signer's objects (its Deployment, pods, RBAC and Lease). */
const COMPONENT_SIGNER = "signer";
/** Component the in-pod agent writes on the snapshot ConfigMap. */
const COMPONENT_SNAPSHOT = "Snapshot";

/** A component aicr creates objects for. */
export type Component =
  | typeof COMPONENT_SNAPSHOT_AGENT
  | typeof COMPONENT_DAEMON
  | typeof COMPONENT_SIGNER;

/** Default `--job-name` prefix. */
export const DEFAULT_JOB_NAME_PREFIX = "aicr";
/** Default `--service-account-name` prefix. */
export const DEFAULT_SERVICE_ACCOUNT_PREFIX = "aicr";
/** Prefix of the run-scoped ClusterRole and ClusterRoleBinding. */
const NODE_READER_PREFIX = "aicr-node-reader";
/** Prefix of the staging ConfigMap the agent writes when no `cm://` was given. */
const STAGING_CONFIGMAP_PREFIX = "aicr-agent-snapshot";
/** Prefix of the directory `--add-roles-to-service-account` writes. */
const RBAC_DIRECTORY_PREFIX = "snapshot-rbac";

/** Longest Kubernetes object name that is also a DNS-1123 label (Jobs, pod-template labels). */
const MAX_NAME_LENGTH = 63;
/** Length of a run ID: `YYYYMMDD-HHMMSS-` plus 16 hex digits. */
const RUN_ID_LENGTH = 32;
/** Longest prefix kept in a run-scoped name: 63 - 1 (`-`) - 32. */
export const MAX_PREFIX_LENGTH = MAX_NAME_LENGTH - 1 - RUN_ID_LENGTH;
/** Hex digits the random source must give for a run or invocation ID. */
const RANDOM_HEX_LENGTH = 16;

const RUN_ID_REGEXP = /^\d{8}-\d{6}-[0-9a-f]{16}$/;
const INVOCATION_ID_REGEXP = /^[0-9a-f]{16}$/;
const HEX_REGEXP = /^[0-9a-f]{16}$/;
const DNS1123_LABEL_REGEXP = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const DNS1123_SUBDOMAIN_REGEXP =
  /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const PREFIX_REGEXP = /^[a-z0-9][-a-z0-9]*$/;
const LABEL_NAME_REGEXP = /^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/;
const LABEL_VALUE_REGEXP = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;

function randomHex16(randomHex: () => string): string {
  const hex = randomHex().toLowerCase();
  if (!HEX_REGEXP.test(hex)) {
    throw new RangeError(
      `Cannot make an ID as the random source must give ${RANDOM_HEX_LENGTH} hex digits: current value is "${hex}"`,
    );
  }
  return hex;
}

function pad(value: number, width: number): string {
  return String(value).padStart(width, "0");
}

/**
 * Makes a run ID: `<YYYYMMDD-HHMMSS>-<16 hex>` in UTC, 32 characters. The time part
 * sorts runs and tells an operator when a leftover object was made; the hex part
 * makes concurrent runs in the same second distinct.
 *
 * @param now the clock reading
 * @param randomHex gives 16 lowercase hex digits (e.g. 8 random bytes as hex)
 * @returns the run ID
 * @throws {RangeError} when `randomHex` gives anything but 16 hex digits
 */
export function newRunId(now: Date, randomHex: () => string): string {
  const stamp = `${pad(now.getUTCFullYear(), 4)}${pad(now.getUTCMonth() + 1, 2)}${
    pad(now.getUTCDate(), 2)
  }-${pad(now.getUTCHours(), 2)}${pad(now.getUTCMinutes(), 2)}${pad(now.getUTCSeconds(), 2)}`;
  return `${stamp}-${randomHex16(randomHex)}`;
}

/**
 * Checks the run ID format.
 *
 * @param value any value
 * @returns whether it is `<YYYYMMDD-HHMMSS>-<16 hex>`
 */
export function isRunId(value: unknown): value is string {
  return typeof value === "string" && RUN_ID_REGEXP.test(value);
}

/**
 * Makes an invocation ID: 16 hex digits, one per deployer (process), never
 * configurable. Cleanup deletes an object whose create response was lost only when it
 * carries this value, because a run ID can be shared on purpose.
 *
 * @param randomHex gives 16 lowercase hex digits
 * @returns the invocation ID
 * @throws {RangeError} when `randomHex` gives anything but 16 hex digits
 */
export function newInvocationId(randomHex: () => string): string {
  return randomHex16(randomHex);
}

/**
 * Checks the invocation ID format.
 *
 * @param value any value
 * @returns whether it is 16 lowercase hex digits
 */
export function isInvocationId(value: unknown): value is string {
  return typeof value === "string" && INVOCATION_ID_REGEXP.test(value);
}

function assertRunId(runId: string): void {
  if (!isRunId(runId)) {
    throw new RangeError(
      `Cannot make a run-scoped name as the run ID must be <YYYYMMDD-HHMMSS>-<16 hex>: current value is "${runId}"`,
    );
  }
}

/**
 * Checks a DNS-1123 label: at most 63 lowercase alphanumerics or `-`, starting and
 * ending alphanumeric (namespaces, Job names).
 *
 * @param value any string
 * @returns whether it is a DNS-1123 label
 */
export function isDns1123Label(value: string): boolean {
  return value.length <= 63 && DNS1123_LABEL_REGEXP.test(value);
}

/**
 * Checks a DNS-1123 subdomain: at most 253 characters of dot-separated labels
 * (ServiceAccounts, ConfigMaps, RBAC objects).
 *
 * @param value any string
 * @returns whether it is a DNS-1123 subdomain
 */
export function isDns1123Subdomain(value: string): boolean {
  return value.length <= 253 && DNS1123_SUBDOMAIN_REGEXP.test(value);
}

/**
 * Validates a namespace option.
 *
 * @param option the option it came from, e.g. `namespace`
 * @param value the value
 * @returns the value
 * @throws {UsageError} naming the option and the value when it is not a DNS-1123 label
 */
export function validateNamespace(option: string, value: string): string {
  if (!isDns1123Label(value)) {
    throw new UsageError(
      (name) =>
        `Cannot use '${
          name(option)
        }' as it must be a DNS-1123 label (at most 63 lowercase letters, digits or '-', starting and ending with a letter or digit): current value is '${value}'`,
    );
  }
  return value;
}

/**
 * Validates a ServiceAccount name option.
 *
 * @param option the option it came from, e.g. `serviceAccount`
 * @param value the value
 * @returns the value
 * @throws {UsageError} naming the option and the value when it is not a DNS-1123 subdomain
 */
export function validateServiceAccountName(option: string, value: string): string {
  if (!isDns1123Subdomain(value)) {
    throw new UsageError(
      (name) =>
        `Cannot use '${
          name(option)
        }' as it must be a DNS-1123 subdomain (at most 253 lowercase letters, digits, '-' or '.', each dot-separated part starting and ending with a letter or digit): current value is '${value}'`,
    );
  }
  return value;
}

/**
 * Builds `<prefix>-<runID>`, cutting the prefix to 30 characters and trimming the
 * `-` the cut may leave, so the name always fits 63 characters and always ends in the
 * run ID's hex segment.
 *
 * @param prefix the name prefix, e.g. the `jobName` option
 * @param runId the run ID
 * @param options `option` names the option the prefix came from in errors (default `jobName`)
 * @returns the run-scoped name
 * @throws {UsageError} when the prefix has characters a Kubernetes name cannot hold
 * @throws {RangeError} when `runId` is not a run ID
 */
export function runScopedName(
  prefix: string,
  runId: string,
  options: { option?: string } = {},
): string {
  const { option = "jobName" } = options;
  assertRunId(runId);
  if (!PREFIX_REGEXP.test(prefix)) {
    throw new UsageError(
      (name) =>
        `Cannot use '${
          name(option)
        }' as a name prefix as it must be lowercase letters, digits or '-', starting with a letter or digit: current value is '${prefix}'`,
    );
  }
  const kept = prefix.slice(0, MAX_PREFIX_LENGTH).replace(/-+$/, "");
  return `${kept}-${runId}`;
}

/**
 * The agent Job's name: `<job-name>-<runID>`.
 *
 * @param prefix the `--job-name` value (default `aicr`)
 * @param runId the run ID
 * @returns the Job name
 * @throws {UsageError} when the prefix is not usable in a name
 */
export function jobName(prefix: string, runId: string): string {
  return runScopedName(prefix, runId, { option: "jobName" });
}

/**
 * The run-scoped ServiceAccount's name, shared by its Role and RoleBinding:
 * `<service-account-name>-<runID>` (default `aicr-<runID>`).
 *
 * @param prefix the `--service-account-name` value used as a prefix
 * @param runId the run ID
 * @returns the ServiceAccount, Role and RoleBinding name
 * @throws {UsageError} when the prefix is not usable in a name
 */
export function serviceAccountRunName(prefix: string, runId: string): string {
  return runScopedName(prefix, runId, { option: "serviceAccountName" });
}

/**
 * The run-scoped ClusterRole and ClusterRoleBinding name: `aicr-node-reader-<runID>`.
 *
 * @param runId the run ID
 * @returns the name
 */
export function nodeReaderName(runId: string): string {
  return runScopedName(NODE_READER_PREFIX, runId);
}

/**
 * The staging ConfigMap's name: `aicr-agent-snapshot-<runID>`.
 *
 * @param runId the run ID
 * @returns the name
 */
export function stagingConfigMapName(runId: string): string {
  return runScopedName(STAGING_CONFIGMAP_PREFIX, runId);
}

/**
 * The staging ConfigMap of runs as an existing ServiceAccount (`--service-account-name`
 * naming one): `aicr-agent-snapshot-<sa>`, one name for every run as that account, so the
 * grant `--add-roles-to-service-account` renders can name it (a per-run name cannot be
 * granted ahead). Two such runs at once meet at its create: the second stops with a conflict.
 *
 * @param serviceAccount the ServiceAccount's name
 * @returns the name
 * @throws {UsageError} when the name would exceed 253 characters
 */
export function exactStagingConfigMapName(serviceAccount: string): string {
  const name = `${STAGING_CONFIGMAP_PREFIX}-${serviceAccount}`;
  if (name.length > 253) {
    throw new UsageError(
      `Cannot name the staging ConfigMap '${
        name.slice(0, 40)
      }...' as it must be at most 253 characters: the ServiceAccount name is ${serviceAccount.length} characters (at most 233)`,
    );
  }
  return name;
}

/**
 * The directory `--add-roles-to-service-account` writes: `snapshot-rbac-<runID>`.
 *
 * @param runId the run ID
 * @returns the directory name (relative)
 */
export function rbacDirectoryName(runId: string): string {
  return runScopedName(RBAC_DIRECTORY_PREFIX, runId);
}

/**
 * The rendered Role and RoleBinding name: `aicr-agent-<sa>-rbac`. It ends in `-rbac`,
 * which no run-scoped name can, so the two name spaces never collide.
 *
 * @param serviceAccount the `--add-roles-to-service-account` value
 * @returns the name
 * @throws {UsageError} when the ServiceAccount name is not a DNS-1123 subdomain
 */
export function renderedRoleName(serviceAccount: string): string {
  validateServiceAccountName("serviceAccount", serviceAccount);
  return `aicr-agent-${serviceAccount}-rbac`;
}

/**
 * The rendered ClusterRole and ClusterRoleBinding name: `aicr-agent-<ns>.<sa>-rbac`.
 * A namespace never holds `.`, so no other (namespace, ServiceAccount) pair gives the
 * same name.
 *
 * @param namespace the `--namespace` value
 * @param serviceAccount the `--add-roles-to-service-account` value
 * @returns the name
 * @throws {UsageError} when either value is not a valid Kubernetes name
 */
export function renderedClusterRoleName(namespace: string, serviceAccount: string): string {
  validateServiceAccountName("serviceAccount", serviceAccount);
  return `aicr-agent-${namespace}.${serviceAccount}-rbac`;
}

/**
 * The user name Kubernetes gives a ServiceAccount: `system:serviceaccount:<ns>:<sa>`.
 *
 * @param namespace the namespace
 * @param serviceAccount the ServiceAccount name
 * @returns the user name
 */
export function serviceAccountUser(namespace: string, serviceAccount: string): string {
  return `system:serviceaccount:${namespace}:${serviceAccount}`;
}

/**
 * The groups Kubernetes gives a ServiceAccount's tokens.
 *
 * @param namespace the namespace
 * @returns `system:serviceaccounts`, `system:serviceaccounts:<ns>`, `system:authenticated`
 */
export function serviceAccountGroups(namespace: string): string[] {
  return ["system:serviceaccounts", `system:serviceaccounts:${namespace}`, "system:authenticated"];
}

/** What identifies a run's objects. */
export interface RunIdentity {
  /** The run ID. */
  runId: string;
  /** The invocation ID of the deployer that creates the objects. */
  invocationId: string;
  /** The component. @default "snapshot-agent" */
  component?: Component;
}

/**
 * The five labels on every object a run creates (and on the Job's pod template):
 * name, managed-by, component, run ID and invocation ID.
 *
 * @param identity run ID, invocation ID and component
 * @returns the labels
 * @throws {RangeError} when an ID has the wrong format
 */
export function runLabels(identity: RunIdentity): Labels {
  const { runId, invocationId, component = COMPONENT_SNAPSHOT_AGENT } = identity;
  assertRunId(runId);
  if (!isInvocationId(invocationId)) {
    throw new RangeError(
      `Cannot label a run's objects as the invocation ID must be 16 hex digits: current value is "${invocationId}"`,
    );
  }
  return {
    [LABEL_NAME]: APP_NAME,
    [LABEL_MANAGED_BY]: APP_NAME,
    [LABEL_COMPONENT]: component,
    [LABEL_RUN_ID]: runId,
    [LABEL_INVOCATION_ID]: invocationId,
  };
}

/**
 * The labels of objects a user applies from `--add-roles-to-service-account`: no
 * managed-by (aicr does not manage them) and no run or invocation ID (no run cleans
 * them up).
 *
 * @returns the labels
 */
export function renderedLabels(): Labels {
  return { [LABEL_NAME]: APP_NAME, [LABEL_COMPONENT]: COMPONENT_SNAPSHOT_AGENT };
}

/**
 * Turns any string into a valid label value: characters outside `[A-Za-z0-9._-]`
 * become `-`, the result is cut to 63 characters and trimmed to start and end
 * alphanumeric (`0.1.0+abc` becomes `0.1.0-abc`).
 *
 * @param value any string
 * @returns a valid label value (possibly empty)
 */
export function toLabelValue(value: string): string {
  return value.replace(/[^A-Za-z0-9._-]/g, "-").slice(0, 63).replace(/^[^A-Za-z0-9]+/, "")
    .replace(/[^A-Za-z0-9]+$/, "");
}

/**
 * The labels the in-pod agent writes on the snapshot ConfigMap: name `aicr`,
 * component `Snapshot` and the agent's own version (not the CLI's).
 *
 * @param agentVersion the version of the binary that collected
 * @returns the labels
 */
export function snapshotConfigMapLabels(agentVersion: string): Labels {
  return {
    [LABEL_NAME]: APP_NAME,
    [LABEL_COMPONENT]: COMPONENT_SNAPSHOT,
    [LABEL_VERSION]: toLabelValue(agentVersion),
  };
}

/**
 * Formats an equality label selector, `k1=v1,k2=v2`, in the given order.
 *
 * @param labels the labels to match
 * @returns the selector string
 */
export function formatLabelSelector(labels: Labels): string {
  return Object.entries(labels).map(([key, value]) => `${key}=${value}`).join(",");
}

/**
 * The selector of one run's objects: `app.kubernetes.io/name=aicr,aicr.run/run-id=<id>`.
 * It only narrows candidates; ownership is proven by UID or invocation ID.
 *
 * @param runId the run ID
 * @returns the selector string
 */
export function runSelector(runId: string): string {
  return formatLabelSelector({ [LABEL_NAME]: APP_NAME, [LABEL_RUN_ID]: runId });
}

/**
 * The stable selector of every run's objects of one component, as the docs use it:
 * `app.kubernetes.io/name=aicr,app.kubernetes.io/component=snapshot-agent`.
 *
 * @param component the component @default "snapshot-agent"
 * @returns the selector string
 */
export function componentSelector(component: Component = COMPONENT_SNAPSHOT_AGENT): string {
  return formatLabelSelector({ [LABEL_NAME]: APP_NAME, [LABEL_COMPONENT]: component });
}

/**
 * Checks that an object's labels include every wanted label with the same value.
 *
 * @param labels the object's labels (may be missing)
 * @param want the labels to find
 * @returns whether all match
 */
export function matchesLabels(
  labels: Readonly<Labels> | undefined,
  want: Readonly<Labels>,
): boolean {
  return Object.entries(want).every(([key, value]) => labels?.[key] === value);
}

/**
 * The ownership proof cleanup asks of an object whose create response was lost: it
 * carries every one of this run's five labels, invocation ID included.
 *
 * @param labels the object's labels
 * @param identity this run's identity
 * @returns whether this invocation provably created it
 */
export function carriesRunLabels(
  labels: Readonly<Labels> | undefined,
  identity: RunIdentity,
): boolean {
  return matchesLabels(labels, runLabels(identity));
}

/**
 * Checks a label key (also a node-selector or taint key): an optional DNS subdomain
 * prefix and `/`, then a name of at most 63 alphanumerics, `-`, `_` or `.`.
 *
 * @param key any string
 * @returns whether Kubernetes accepts it as a label key
 */
export function isLabelKey(key: string): boolean {
  const slash = key.lastIndexOf("/");
  const name = slash < 0 ? key : key.slice(slash + 1);
  const prefix = slash < 0 ? undefined : key.slice(0, slash);
  if (prefix !== undefined && !isDns1123Subdomain(prefix)) return false;
  return name.length <= 63 && LABEL_NAME_REGEXP.test(name);
}

/**
 * Checks a label value: empty, or at most 63 alphanumerics, `-`, `_` or `.`, starting
 * and ending alphanumeric.
 *
 * @param value any string
 * @returns whether Kubernetes accepts it as a label value
 */
export function isLabelValue(value: string): boolean {
  return value.length <= 63 && LABEL_VALUE_REGEXP.test(value);
}

/** Default name of the DaemonSet, its ServiceAccount and its Role. */
export const DEFAULT_DAEMON_NAME = "aicr-daemon";

/**
 * The daemon's ClusterRole and ClusterRoleBinding name: `aicr-daemon-<ns>.<name>`.
 * The `.` keeps (namespace, name) pairs apart, and the `aicr-daemon-` start keeps it
 * apart from the rendered `aicr-agent-…-rbac` grants.
 *
 * @param namespace the daemon's namespace
 * @param name the daemon's name
 * @returns the name
 * @throws {UsageError} when either value is not a valid Kubernetes name
 */
export function daemonClusterRoleName(namespace: string, name: string): string {
  return `aicr-daemon-${namespace}.${validateDaemonName(name)}`;
}

/**
 * Validates the daemon's name (DaemonSet, ServiceAccount, instance label).
 *
 * @param name the name
 * @returns the name
 * @throws {UsageError} when it is not a DNS-1123 label
 */
export function validateDaemonName(name: string): string {
  if (!isDns1123Label(name)) {
    throw new UsageError(
      `Cannot name the daemon as it must be a DNS-1123 label (at most 63 lowercase letters, digits or '-'): current value is '${name}'`,
    );
  }
  return name;
}

/** Options for {@link daemonLabels}. */
export interface DaemonLabelOptions {
  /** The daemon's name, written as `app.kubernetes.io/instance`. */
  name: string;
  /** The installing run's ID, when an install is tracked like a run. */
  runId?: string;
  /** The installing invocation's ID (with `runId`). */
  invocationId?: string;
}

/**
 * The labels of the DaemonSet mode's objects: name, managed-by, component `daemon`,
 * instance, plus the run and invocation IDs when the installer passes them.
 *
 * @param options name and optional run identity
 * @returns the labels
 * @throws {RangeError} when only one of the two IDs is given, or one has the wrong format
 */
export function daemonLabels(options: DaemonLabelOptions): Labels {
  return installLabels(options, COMPONENT_DAEMON);
}

/**
 * The labels of the in-cluster signer's objects: the daemon's labels with component `signer`
 * (so the DaemonSet's selector never matches a signer pod), instance the daemon's name.
 *
 * @param options the daemon's name and optional run identity
 * @returns the labels
 * @throws {RangeError} when only one of the two IDs is given, or one has the wrong format
 */
export function signerLabels(options: DaemonLabelOptions): Labels {
  return installLabels(options, COMPONENT_SIGNER);
}

function installLabels(
  options: DaemonLabelOptions,
  component: typeof COMPONENT_DAEMON | typeof COMPONENT_SIGNER,
): Labels {
  const { name, runId, invocationId } = options;
  if ((runId === undefined) !== (invocationId === undefined)) {
    throw new RangeError("Cannot label the daemon as runId and invocationId go together");
  }
  const base: Labels = runId !== undefined && invocationId !== undefined
    ? runLabels({ runId, invocationId, component })
    : {
      [LABEL_NAME]: APP_NAME,
      [LABEL_MANAGED_BY]: APP_NAME,
      [LABEL_COMPONENT]: component,
    };
  return { ...base, [LABEL_INSTANCE]: name };
}

/**
 * The DaemonSet's pod selector: name, component `daemon` and instance. It leaves out
 * the run labels because a selector is immutable and must survive a re-install.
 *
 * @param name the daemon's name
 * @returns the match labels
 */
export function daemonSelectorLabels(name: string): Labels {
  return {
    [LABEL_NAME]: APP_NAME,
    [LABEL_COMPONENT]: COMPONENT_DAEMON,
    [LABEL_INSTANCE]: name,
  };
}

/**
 * The signer Deployment's pod selector: name, component `signer` and instance (the daemon's
 * name). Disjoint from {@link daemonSelectorLabels} by the component.
 *
 * @param name the daemon's name
 * @returns the match labels
 */
export function signerSelectorLabels(name: string): Labels {
  return {
    [LABEL_NAME]: APP_NAME,
    [LABEL_COMPONENT]: COMPONENT_SIGNER,
    [LABEL_INSTANCE]: name,
  };
}

/** The audience of the tokens the fleet fetch mints and the installed daemons require. */
export const DAEMON_TOKEN_AUDIENCE = "aicr-daemon";

/**
 * The audience of a reader token for one node's daemon: `aicr-daemon:<node>`. Each daemon's
 * TokenReview asks only for its own node's, so a token one daemon received is refused by every
 * other (node names cannot hold ':').
 *
 * @param node the node
 * @returns the audience
 */
export function daemonNodeAudience(node: string): string {
  return `${DAEMON_TOKEN_AUDIENCE}:${node}`;
}

/** The signer name of the daemons' serving certificates (CertificateSigningRequest `signerName`). */
export const DAEMON_CSR_SIGNER = "aicr.run/daemon-serving";

/** The reader ServiceAccount of the default daemon: the fleet fetch mints its token for it. */
export const DEFAULT_DAEMON_READER_NAME = "aicr-reader";

/**
 * The reader ServiceAccount of a daemon: `aicr-reader` for the default daemon, `<name>-reader`
 * for another one in the same namespace.
 *
 * @param name the daemon's name
 * @returns the ServiceAccount name
 * @throws {UsageError} when the name is not a DNS-1123 label
 */
export function daemonReaderName(name: string): string {
  validateDaemonName(name);
  return name === DEFAULT_DAEMON_NAME ? DEFAULT_DAEMON_READER_NAME : `${name}-reader`;
}

/**
 * The reader's ClusterRole and ClusterRoleBinding name: `aicr-snapshot-reader-<ns>.<name>`
 * (per install, so uninstalling one namespace's daemon never touches another's grant).
 *
 * @param namespace the daemon's namespace
 * @param name the daemon's name
 * @returns the name
 * @throws {UsageError} when either value is not a valid Kubernetes name
 */
export function daemonReaderClusterRoleName(namespace: string, name: string): string {
  return `aicr-snapshot-reader-${namespace}.${validateDaemonName(name)}`;
}

/**
 * The Secret holding the install's CA key and certificate (`tls.key`, `tls.crt`): `<name>-signer`.
 * Never mounted: the installer and the fetch (the caller's RBAC) and the in-cluster signer (its
 * ServiceAccount may `get` this one Secret by name) read it through the API to sign.
 *
 * @param name the daemon's name
 * @returns the Secret name
 * @throws {UsageError} when the name is invalid
 */
export function daemonSignerSecretName(name: string): string {
  return `${validateDaemonName(name)}-signer`;
}

/**
 * The in-cluster signer's name: its Deployment, ServiceAccount, Role, RoleBinding and Lease are
 * all `<name>-signer`, the name of the CA Secret it reads ({@link daemonSignerSecretName}).
 *
 * @param name the daemon's name
 * @returns the signer's name
 * @throws {UsageError} when the name is invalid
 */
export function signerName(name: string): string {
  return daemonSignerSecretName(name);
}

/**
 * The signer's ClusterRole and ClusterRoleBinding name: `aicr-csr-signer-<ns>.<name>` (per
 * install, as the daemon's).
 *
 * @param namespace the daemon's namespace
 * @param name the daemon's name
 * @returns the name
 * @throws {UsageError} when the name is invalid
 */
export function signerClusterRoleName(namespace: string, name: string): string {
  return `aicr-csr-signer-${namespace}.${validateDaemonName(name)}`;
}

/**
 * The ConfigMap publishing the daemon's CA certificate for the CLI: `<name>-ca`.
 *
 * @param name the daemon's name
 * @returns the ConfigMap name
 */
export function daemonCaConfigMapName(name: string): string {
  return `${validateDaemonName(name)}-ca`;
}

/**
 * Whether an object is one of a daemon's own, by its labels: the daemon's selector labels, and
 * managed by aicr (`install`, `render`) or by Helm (the chart `charts/aicr/`, whose objects carry
 * the same labels but for `managed-by`, which Helm sets to `Helm`).
 *
 * @param labels the object's labels
 * @param name the daemon's name
 * @returns whether it is the daemon's
 */
export function isDaemonObject(labels: Labels | undefined, name: string): boolean {
  return matchesLabels(labels, daemonSelectorLabels(name)) &&
    (labels?.[LABEL_MANAGED_BY] === APP_NAME || labels?.[LABEL_MANAGED_BY] === HELM_MANAGER);
}

/** The `managed-by` value Helm writes on what a chart installs. */
export const HELM_MANAGER = "Helm";

/**
 * The labels uninstall finds a daemon's objects by: managed-by `aicr` plus the selector
 * labels (name, component `daemon`, instance). The run and invocation IDs are left out so
 * any install of that daemon is found.
 *
 * @param name the daemon's name
 * @returns the labels
 */
export function daemonSweepLabels(name: string): Labels {
  return { ...daemonSelectorLabels(name), [LABEL_MANAGED_BY]: APP_NAME };
}

/**
 * The label selector of every object one install made, daemon and signer alike: name,
 * managed-by and instance, component `daemon` or `signer` (never `baseline`: baselines are the
 * operator's data and outlive an uninstall).
 *
 * @param name the daemon's name
 * @returns the selector, e.g. `app.kubernetes.io/name=aicr,...,app.kubernetes.io/component in (daemon,signer)`
 */
export function installSweepSelector(name: string): string {
  return `${
    formatLabelSelector({
      [LABEL_NAME]: APP_NAME,
      [LABEL_MANAGED_BY]: APP_NAME,
      [LABEL_INSTANCE]: validateDaemonName(name),
    })
  },${LABEL_COMPONENT} in (${COMPONENT_DAEMON},${COMPONENT_SIGNER})`;
}

/** Component of the per-cohort baseline ConfigMaps (`aicr daemonset baseline set`). */
export const COMPONENT_BASELINE = "baseline";

/**
 * The labels of a daemon's baseline ConfigMaps: name, managed-by, component `baseline`,
 * instance (the daemon's name). Not the daemon's sweep labels (component `daemon`): a
 * baseline is the operator's data and outlives an uninstall and re-install.
 *
 * @param name the daemon's name
 * @returns the labels
 */
export function baselineLabels(name: string): Labels {
  return {
    [LABEL_NAME]: APP_NAME,
    [LABEL_MANAGED_BY]: APP_NAME,
    [LABEL_COMPONENT]: COMPONENT_BASELINE,
    [LABEL_INSTANCE]: validateDaemonName(name),
  };
}
