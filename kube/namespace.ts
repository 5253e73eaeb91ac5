/**
 * The pre-flight namespace check both modes run before they create anything, and
 * `--create-namespace`: a namespace that is absent is created (after the gate, before anything
 * else), labelled `app.kubernetes.io/managed-by=aicr`, and never deleted (as `helm install
 * --create-namespace`: other things may come to live in it).
 *
 * @module
 */
import { NotFoundError } from "../errors.ts";
import type { Logger } from "../log.ts";
import type { AccessAttributes, KubeClient } from "./client.ts";
import { KubeApiError } from "./errors.ts";

/** What the pre-flight read found. */
export type NamespaceState = "exists" | "absent" | "unknown";

/** The question the gate adds when the run will create the namespace. */
export const CREATE_NAMESPACE_CHECK: AccessAttributes = {
  verb: "create",
  group: "",
  resource: "namespaces",
};

/**
 * The pre-flight namespace check both modes run: the namespace must exist, unless the caller
 * asked for it to be created (a caller who may not read namespaces passes; the first create then
 * tells).
 *
 * @param kube the client
 * @param namespace the namespace in use (from `--namespace` or the kubeconfig context)
 * @param options cancellation, and whether an absent namespace will be created
 * @returns `exists`, `absent` (only with `createIfAbsent`) or `unknown` (not readable)
 * @throws {NotFoundError} when it does not exist and is not to be created
 */
export async function checkNamespace(
  kube: KubeClient,
  namespace: string,
  options: { signal?: AbortSignal; createIfAbsent?: boolean } | AbortSignal = {},
): Promise<NamespaceState> {
  const { signal, createIfAbsent = false } = options instanceof AbortSignal
    ? { signal: options }
    : options;
  try {
    const ns = await kube.get("Namespace", undefined, namespace, signal ? { signal } : {});
    if (ns) return "exists";
    if (createIfAbsent) return "absent";
    throw new NotFoundError(
      `Cannot deploy into namespace '${namespace}': it does not exist`,
      {
        details: [
          (option) =>
            `  create it first (kubectl create namespace ${namespace}), pass ${
              option("createNamespace")
            }, or pass ${option("namespace")}`,
        ],
      },
    );
  } catch (error) {
    // Reading namespaces is not required of the caller; without it the Job create will tell.
    if (error instanceof KubeApiError && (error.status === 403 || error.status === 401)) {
      return "unknown";
    }
    throw error;
  }
}

/**
 * Creates the namespace the pre-flight found absent (`--create-namespace`). One that appeared
 * in between is fine.
 *
 * @param deps client and logger
 * @param namespace the namespace
 * @returns when it exists
 * @throws {KubeApiError} when the create fails for another reason
 */
export async function createNamespaceIfAbsent(
  deps: { kube: KubeClient; log: Logger },
  namespace: string,
): Promise<void> {
  try {
    await deps.kube.create("Namespace", {
      metadata: { name: namespace, labels: { "app.kubernetes.io/managed-by": "aicr" } },
    });
    deps.log.info("created namespace (kept after the run)", { namespace });
  } catch (error) {
    if (error instanceof KubeApiError && error.isAlreadyExists) return;
    throw error;
  }
}

/**
 * The names of the cluster's namespaces, sorted: what shell completion offers after `-n`. One
 * bounded attempt, no retries (a shell waits on it).
 *
 * @param kube the client
 * @param options per-attempt timeout and cancellation
 * @returns the names
 * @throws {KubeApiError} when the list fails
 */
export async function namespaceNames(
  kube: Pick<KubeClient, "listAll">,
  options: { timeoutMs: number; signal?: AbortSignal },
): Promise<string[]> {
  const { timeoutMs, signal } = options;
  const items = await kube.listAll("Namespace", undefined, {
    timeoutMs,
    retries: 0,
    ...(signal ? { signal } : {}),
  });
  return items.flatMap((ns) => ns.metadata?.name ?? []).sort();
}
