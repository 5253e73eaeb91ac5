/**
 * The collectors' {@link ClusterReader} over the shared Kubernetes client.
 *
 * @module
 */
import { NotFoundError } from "../errors.ts";
import type { KubeClient, KubeObject as ApiObject } from "../kube/mod.ts";
import type {
  ClusterReader,
  KubeDaemonSet,
  KubeNode,
  KubeObject,
  KubePod,
  ListOptions,
  ListPage,
} from "./types.ts";

function page<T>(result: { items: ApiObject[]; continue?: string }): ListPage<T> {
  const out: ListPage<T> = { items: result.items as unknown as T[] };
  if (result.continue) out.continue = result.continue;
  return out;
}

function listOptions(options?: ListOptions) {
  return {
    ...(options?.limit ? { limit: options.limit } : {}),
    ...(options?.continue ? { continue: options.continue } : {}),
    ...(options?.signal ? { signal: options.signal } : {}),
  };
}

/**
 * Adapts a {@link KubeClient} to what the K8s and NodeTopology collectors read.
 *
 * @param kube the client
 * @returns the reader
 */
export function createClusterReader(kube: KubeClient): ClusterReader {
  return {
    async serverVersion(signal) {
      return await kube.serverVersion(signal ? { signal } : {});
    },
    async listPods(options) {
      return page<KubePod>(await kube.list("Pod", undefined, listOptions(options)));
    },
    async getNode(name, signal) {
      const node = await kube.get<ApiObject>("Node", undefined, name, signal ? { signal } : {});
      if (!node) throw new NotFoundError(`Cannot read node '${name}': it does not exist`);
      return node as unknown as KubeNode;
    },
    async listNodes(options) {
      return page<KubeNode>(await kube.list("Node", undefined, listOptions(options)));
    },
    async listApiResources(signal) {
      return (await kube.discoverResources(signal ? { signal } : {})).map((r) => ({
        group: r.group,
        version: r.version,
        kind: r.kind,
        plural: r.plural,
        namespaced: r.namespaced,
      }));
    },
    async listCustomObjects(group, version, plural, options) {
      const result = await kube.rest.json<
        { items?: ApiObject[]; metadata?: { continue?: string } }
      >({
        method: "GET",
        path: `/apis/${group}/${version}/${plural}`,
        query: { limit: options?.limit, continue: options?.continue },
        ...(options?.signal ? { signal: options.signal } : {}),
      });
      return page<KubeObject>({
        items: result.items ?? [],
        ...(result.metadata?.continue ? { continue: result.metadata.continue } : {}),
      });
    },
    async listDaemonSets(options) {
      return page<KubeDaemonSet>(await kube.list("DaemonSet", undefined, listOptions(options)));
    },
  };
}
