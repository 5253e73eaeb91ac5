/**
 * An in-memory {@link ClusterReader} for tests: serves recorded API objects, paginates
 * with real continue tokens (honouring `limit`, capped by `maxPageSize`), records every
 * call, and throws injected errors per method.
 *
 * @module
 */
import type {
  ClusterReader,
  KubeApiResource,
  KubeDaemonSet,
  KubeNode,
  KubeObject,
  KubePod,
  KubeServerVersion,
  ListOptions,
  ListPage,
} from "../types.ts";
import { NotFoundError } from "../../errors.ts";

/** Contents and behaviour of a {@link FakeCluster}. */
export interface FakeClusterData {
  /** `GET /version`. */
  version?: KubeServerVersion;
  /** Pods of every namespace. */
  pods?: KubePod[];
  /** Nodes. */
  nodes?: KubeNode[];
  /** Discovery. */
  resources?: KubeApiResource[];
  /** Custom objects by `group/version/plural`. */
  customObjects?: Record<string, KubeObject[]>;
  /** DaemonSets. */
  daemonSets?: KubeDaemonSet[];
  /** Largest page returned whatever `limit` says. @default Infinity */
  maxPageSize?: number;
  /** Errors thrown by method name, or by `listCustomObjects:<group>/<version>/<plural>`. */
  errors?: Record<string, Error>;
  /** Milliseconds each call waits before answering. @default 0 */
  delayMs?: number;
}

/** One recorded call. */
export interface FakeCall {
  /** Method name. */
  method: string;
  /** Arguments worth asserting on. */
  args: Record<string, unknown>;
}

/** The in-memory cluster. */
export interface FakeCluster extends ClusterReader {
  /** Calls in order. */
  readonly calls: FakeCall[];
}

/**
 * Creates an in-memory cluster reader.
 *
 * @param data objects, page cap and injected errors
 * @returns the reader
 */
export function createFakeCluster(data: FakeClusterData = {}): FakeCluster {
  const calls: FakeCall[] = [];
  const maxPageSize = data.maxPageSize ?? Infinity;
  async function enter(
    method: string,
    args: Record<string, unknown>,
    signal?: AbortSignal,
  ): Promise<void> {
    calls.push({ method, args });
    if (data.delayMs) {
      await new Promise<void>((resolve, reject) => {
        const timer = setTimeout(resolve, data.delayMs);
        signal?.addEventListener("abort", () => {
          clearTimeout(timer);
          reject(new Error("aborted"));
        }, { once: true });
      });
    }
    const error = data.errors?.[method];
    if (error) throw error;
  }
  function page<T>(items: readonly T[], options: ListOptions = {}): ListPage<T> {
    const start = options.continue ? Number(options.continue.replace(/^page-/, "")) : 0;
    const size = Math.min(options.limit ?? Infinity, maxPageSize);
    const slice = items.slice(start, start + size);
    const next = start + slice.length;
    return next < items.length ? { items: slice, continue: `page-${next}` } : { items: slice };
  }
  return {
    calls,
    async serverVersion(signal?: AbortSignal): Promise<KubeServerVersion> {
      await enter("serverVersion", {}, signal);
      return data.version ?? {};
    },
    async listPods(options: ListOptions = {}): Promise<ListPage<KubePod>> {
      await enter("listPods", { limit: options.limit, continue: options.continue }, options.signal);
      return page(data.pods ?? [], options);
    },
    async getNode(name: string, signal?: AbortSignal): Promise<KubeNode> {
      await enter("getNode", { name }, signal);
      const node = (data.nodes ?? []).find((n) => n.metadata?.name === name);
      if (!node) throw new NotFoundError(`Cannot get node '${name}': it does not exist`);
      return node;
    },
    async listNodes(options: ListOptions = {}): Promise<ListPage<KubeNode>> {
      await enter(
        "listNodes",
        { limit: options.limit, continue: options.continue },
        options.signal,
      );
      return page(data.nodes ?? [], options);
    },
    async listApiResources(signal?: AbortSignal): Promise<KubeApiResource[]> {
      await enter("listApiResources", {}, signal);
      return data.resources ?? [];
    },
    async listCustomObjects(
      group: string,
      version: string,
      plural: string,
      options: ListOptions = {},
    ): Promise<ListPage<KubeObject>> {
      const key = `${group}/${version}/${plural}`;
      await enter(
        "listCustomObjects",
        { key, limit: options.limit, continue: options.continue },
        options.signal,
      );
      const error = data.errors?.[`listCustomObjects:${key}`];
      if (error) throw error;
      return page(data.customObjects?.[key] ?? [], options);
    },
    async listDaemonSets(options: ListOptions = {}): Promise<ListPage<KubeDaemonSet>> {
      await enter(
        "listDaemonSets",
        { limit: options.limit, continue: options.continue },
        options.signal,
      );
      return page(data.daemonSets ?? [], options);
    },
  };
}

/**
 * Loads a recorded JSON file from this folder.
 *
 * @param name file name under `testdata/k8s/`
 * @returns the parsed JSON
 */
export async function loadRecorded<T>(name: string): Promise<T> {
  const url = new URL(`./k8s/${name}`, import.meta.url);
  const { readFile } = await import("node:fs/promises");
  return JSON.parse(await readFile(url, "utf8")) as T;
}

/**
 * A fake cluster filled with every recorded object in `testdata/k8s/`.
 *
 * @param overrides page cap, errors, delay
 * @returns the reader
 */
export async function createRecordedCluster(
  overrides: Pick<FakeClusterData, "maxPageSize" | "errors" | "delayMs"> = {},
): Promise<FakeCluster> {
  const slinky = await loadRecorded<Record<string, KubeObject[]>>("slinky.json");
  const plural: Record<string, string> = {
    Controller: "controllers",
    NodeSet: "nodesets",
    LoginSet: "loginsets",
    RestApi: "restapis",
    Accounting: "accountings",
  };
  const customObjects: Record<string, KubeObject[]> = {
    "nvidia.com/v1/clusterpolicies":
      (await loadRecorded<{ items: KubeObject[] }>("clusterpolicies.nvidia.json")).items,
    "kyverno.io/v1/clusterpolicies":
      (await loadRecorded<{ items: KubeObject[] }>("clusterpolicies.kyverno.json")).items,
    "k8s.mariadb.com/v1alpha1/mariadbs":
      (await loadRecorded<{ items: KubeObject[] }>("mariadbs.json")).items,
  };
  for (const [kind, items] of Object.entries(slinky)) {
    customObjects[`slinky.slurm.net/v1beta1/${plural[kind]}`] = items;
  }
  const nodes = (await loadRecorded<{ items: KubeNode[] }>("nodes.json")).items;
  const gpuNode1 = await loadRecorded<KubeNode>("node-gpu-1.json");
  return createFakeCluster({
    version: await loadRecorded<KubeServerVersion>("version.json"),
    pods: (await loadRecorded<{ items: KubePod[] }>("pods.json")).items,
    nodes: nodes.map((n) => (n.metadata?.name === "gpu-node-1" ? withDetails(n, gpuNode1) : n)),
    resources: await loadRecorded<KubeApiResource[]>("api-resources.json"),
    customObjects,
    daemonSets: (await loadRecorded<{ items: KubeDaemonSet[] }>("daemonsets.json")).items,
    ...overrides,
  });
}

function withDetails(listed: KubeNode, detailed: KubeNode): KubeNode {
  // nodes.json carries the fleet's labels and taints; node-gpu-1.json the node's own details.
  const node: KubeNode = { ...detailed };
  if (listed.metadata) node.metadata = listed.metadata;
  node.spec = { ...detailed.spec, ...listed.spec };
  return node;
}
