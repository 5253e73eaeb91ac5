/**
 * The pre-flight namespace check both modes run before they create anything.
 *
 * @module
 */
import { NotFoundError } from "../errors.ts";
import type { KubeClient } from "./client.ts";
import { KubeApiError } from "./errors.ts";

/**
 * The pre-flight namespace check both modes run: the namespace must exist (a caller who may
 * not read namespaces passes; the first create then tells).
 *
 * @param kube the client
 * @param namespace `--namespace`
 * @param signal cancels the read
 * @returns when it exists or cannot be checked
 * @throws {NotFoundError} when it does not exist
 */
export async function checkNamespace(
  kube: KubeClient,
  namespace: string,
  signal?: AbortSignal,
): Promise<void> {
  try {
    const ns = await kube.get("Namespace", undefined, namespace, signal ? { signal } : {});
    if (!ns) {
      throw new NotFoundError(
        `Cannot deploy into namespace '${namespace}': it does not exist`,
        {
          details: [`create it first (kubectl create namespace ${namespace}) or pass --namespace`],
        },
      );
    }
  } catch (error) {
    // Reading namespaces is not required of the caller; without it the Job create will tell.
    if (error instanceof KubeApiError && (error.status === 403 || error.status === 401)) return;
    throw error;
  }
}
