/**
 * The resource kinds aicr reads and writes, with their API paths.
 *
 * @module
 */

/** How a kind is addressed in the API. */
export interface ResourceType {
  /** Kind, e.g. `Job`. */
  kind: string;
  /** API group, `""` for core. */
  group: string;
  /** API version. */
  version: string;
  /** Plural resource name. */
  plural: string;
  /** Whether objects live in a namespace. */
  namespaced: boolean;
}

function type(
  kind: string,
  group: string,
  version: string,
  plural: string,
  namespaced: boolean,
): ResourceType {
  return { kind, group, version, plural, namespaced };
}

/** Every kind aicr touches, by kind name. */
export const RESOURCES = {
  Namespace: type("Namespace", "", "v1", "namespaces", false),
  Node: type("Node", "", "v1", "nodes", false),
  Pod: type("Pod", "", "v1", "pods", true),
  ConfigMap: type("ConfigMap", "", "v1", "configmaps", true),
  Secret: type("Secret", "", "v1", "secrets", true),
  Service: type("Service", "", "v1", "services", true),
  ServiceAccount: type("ServiceAccount", "", "v1", "serviceaccounts", true),
  Event: type("Event", "", "v1", "events", true),
  Job: type("Job", "batch", "v1", "jobs", true),
  DaemonSet: type("DaemonSet", "apps", "v1", "daemonsets", true),
  Deployment: type("Deployment", "apps", "v1", "deployments", true),
  Role: type("Role", "rbac.authorization.k8s.io", "v1", "roles", true),
  RoleBinding: type("RoleBinding", "rbac.authorization.k8s.io", "v1", "rolebindings", true),
  ClusterRole: type("ClusterRole", "rbac.authorization.k8s.io", "v1", "clusterroles", false),
  ClusterRoleBinding: type(
    "ClusterRoleBinding",
    "rbac.authorization.k8s.io",
    "v1",
    "clusterrolebindings",
    false,
  ),
  RuntimeClass: type("RuntimeClass", "node.k8s.io", "v1", "runtimeclasses", false),
  Lease: type("Lease", "coordination.k8s.io", "v1", "leases", true),
  CertificateSigningRequest: type(
    "CertificateSigningRequest",
    "certificates.k8s.io",
    "v1",
    "certificatesigningrequests",
    false,
  ),
  /** prometheus-operator's; only touched when discovery shows its CRD. */
  ServiceMonitor: type("ServiceMonitor", "monitoring.coreos.com", "v1", "servicemonitors", true),
} as const satisfies Record<string, ResourceType>;

/** A kind name aicr knows. */
export type KindName = keyof typeof RESOURCES;

/**
 * The API version string (`v1`, `batch/v1`) of a resource type.
 *
 * @param resource the resource type
 * @returns the apiVersion
 */
export function apiVersionOf(resource: ResourceType): string {
  return resource.group === "" ? resource.version : `${resource.group}/${resource.version}`;
}

/**
 * The collection path of a resource type, optionally in a namespace.
 *
 * @param resource the resource type
 * @param namespace the namespace (namespaced kinds; omit for all namespaces)
 * @returns e.g. `/apis/batch/v1/namespaces/ns/jobs`
 */
export function collectionPath(resource: ResourceType, namespace?: string): string {
  const root = resource.group === ""
    ? `/api/${resource.version}`
    : `/apis/${resource.group}/${resource.version}`;
  const ns = resource.namespaced && namespace ? `/namespaces/${encodeURIComponent(namespace)}` : "";
  return `${root}${ns}/${resource.plural}`;
}

/**
 * The path of one object.
 *
 * @param resource the resource type
 * @param namespace the namespace (ignored for cluster-scoped kinds)
 * @param name the object name
 * @returns the object path
 */
export function objectPath(
  resource: ResourceType,
  namespace: string | undefined,
  name: string,
): string {
  return `${collectionPath(resource, namespace)}/${encodeURIComponent(name)}`;
}
