/**
 * One real cluster plus kubelet stand-in for a test run.
 *
 * ```ts ignore
 * const env = await useTestCluster();
 * try {
 *   const res = await env.admin.request("GET", "/api/v1/nodes");
 * } finally {
 *   await env.stop();
 * }
 * ```
 *
 * If `AICR_CLUSTER_DIR` points at a cluster started by `deno task cluster:up` (with its kubelet), it is
 * reused and left running (unless `own` is asked); otherwise a fresh one is started in a temporary
 * folder and `stop()` ends it.
 *
 * @module
 */

import { existsSync, readFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type Cluster, loadCluster, startCluster } from "./cluster.ts";
import { type Api, createApi, type Obj } from "../kubelet/api.ts";
import { type Kubelet, type KubeletOptions, startKubelet } from "../kubelet/kubelet.ts";

/** A running test environment. */
export interface TestCluster {
  cluster: Cluster;
  /** Client with the admin certificate (`system:masters`). */
  admin: Api;
  /** Nodes simulated by the kubelet stand-in (or the real-kubelet lane's nodes). */
  nodes: { name: string; ip: string; profile: string; gpu: boolean }[];
  /**
   * With `realKubelet`: the command prefix that runs a program inside the lane's network
   * namespace, where the nodes' and pods' addresses are (run aicr through it).
   */
  inNetns?: string[];
  /** Client for a certificate with this user name and groups (no rights unless a test binds some). */
  clientFor(user: string, groups?: readonly string[]): Promise<Api>;
  /** Stops what this call started (nothing when an existing cluster was reused). */
  stop(): Promise<void>;
}

/** Nodes of a test run unless told otherwise: one GPU node of each kind and two CPU nodes. */
export const TEST_NODES: Record<string, number> = { "p5-h100": 1, "p6-gb200": 1, "system-m7i": 2 };

/**
 * Reads an identity's PEM files from a kubeconfig written by the cluster (embedded data).
 *
 * @param path kubeconfig path
 * @param ca CA PEM
 * @param server apiserver URL
 * @returns a client
 */
function apiFromKubeconfig(path: string, ca: string, server: string): Api {
  const text = readFileSync(path, "utf8");
  const field = (k: string) => atob(new RegExp(`${k}: (\\S+)`).exec(text)![1]!);
  return createApi(server, {
    ca,
    cert: field("client-certificate-data"),
    key: field("client-key-data"),
  });
}

/**
 * Starts (or reuses) a cluster and a kubelet stand-in.
 *
 * @param options.kubelet kubelet options (nodes default {@link TEST_NODES})
 * @param options.realKubelet start (or reuse, `AICR_REALNODE_DIR`) the real-kubelet lane instead
 * @param options.log progress writer
 * @returns the environment
 * @throws {Error} when the cluster cannot start
 */
export async function useTestCluster(
  options: {
    kubelet?: KubeletOptions;
    log?: (line: string) => void;
    /** Real kubelets, containerd and runc instead of the stand-in (`tests/realnode/`). */
    realKubelet?: boolean | { nodes?: number };
    /**
     * Start a cluster of its own even when `AICR_CLUSTER_DIR` names a running one: for tests
     * that crash and restart the control plane (`tests/reliability/restart_test.ts`), which
     * would disturb the other tests' shared cluster.
     */
    own?: boolean;
  } = {},
): Promise<TestCluster> {
  const { log = () => {} } = options;
  if (options.realKubelet) {
    const { useRealNodeLane } = await import("../realnode/harness.ts");
    const nodes = options.realKubelet === true ? 2 : options.realKubelet.nodes ?? 2;
    const lane = await useRealNodeLane({ nodes, log });
    const ca = readFileSync(lane.cluster.caFile, "utf8");
    const clients: Api[] = [];
    return {
      cluster: lane.cluster,
      admin: lane.admin,
      nodes: lane.nodes,
      inNetns: lane.inNetns,
      async clientFor(user: string, groups: readonly string[] = []): Promise<Api> {
        const path = await lane.cluster.kubeconfigFor(user, groups);
        const api = apiFromKubeconfig(path, ca, lane.cluster.server);
        clients.push(api);
        return api;
      },
      async stop(): Promise<void> {
        for (const api of clients) api.close();
        await lane.stop();
      },
    };
  }
  let cluster: Cluster | undefined;
  let kubelet: Kubelet | undefined;
  let tmp: string | undefined;
  let nodes: TestCluster["nodes"];
  const envDir = Deno.env.get("AICR_CLUSTER_DIR");
  const existing = envDir && !options.own ? await loadCluster(envDir) : undefined;
  if (existing && existsSync(join(existing.stateDir, "kubelet.json"))) {
    cluster = existing;
    nodes = JSON.parse(readFileSync(join(existing.stateDir, "kubelet.json"), "utf8")).nodes;
  } else {
    tmp = await mkdtemp(join(tmpdir(), "aicr-cluster-"));
    const dir = tmp;
    cluster = await startCluster({ stateDir: tmp, log }).catch(async (e) => {
      await rm(dir, { recursive: true, force: true });
      throw e;
    });
    try {
      kubelet = await startKubelet(cluster, { nodes: TEST_NODES, log, ...options.kubelet });
    } catch (e) {
      await cluster.stop();
      await rm(tmp, { recursive: true, force: true });
      throw e;
    }
    nodes = kubelet.nodes;
  }
  const ca = readFileSync(cluster.caFile, "utf8");
  const admin = apiFromKubeconfig(cluster.adminKubeconfig, ca, cluster.server);
  const clients: Api[] = [admin];
  const c = cluster;
  return {
    cluster: c,
    admin,
    nodes,
    async clientFor(user: string, groups: readonly string[] = []): Promise<Api> {
      const api = apiFromKubeconfig(await c.kubeconfigFor(user, groups), ca, c.server);
      clients.push(api);
      return api;
    },
    async stop(): Promise<void> {
      for (const api of clients) api.close();
      try {
        await kubelet?.stop();
      } finally {
        if (tmp) {
          try {
            await c.stop();
          } finally {
            await rm(tmp, { recursive: true, force: true });
          }
        }
      }
    },
  };
}

/**
 * Polls `probe` until it returns a value other than undefined.
 *
 * @param what description for the timeout error
 * @param probe the check
 * @param timeoutMs give up after this long (default 60 s)
 * @returns the probe's value
 * @throws {Error} on timeout, with the last value seen
 */
export async function waitFor<T>(
  what: string,
  probe: () => Promise<T | undefined>,
  timeoutMs = 60_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  while (Date.now() < deadline) {
    try {
      const v = await probe();
      if (v !== undefined) return v;
    } catch (e) {
      last = e;
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`Timed out waiting for ${what}${last ? `: ${last}` : ""}`);
}

/**
 * Creates a namespace with a generated name.
 *
 * @param admin admin client
 * @param prefix name prefix
 * @returns its name
 * @throws {Error} when the API refuses
 */
export async function createNamespace(admin: Api, prefix: string): Promise<string> {
  const res = await admin.request("POST", "/api/v1/namespaces", {
    apiVersion: "v1",
    kind: "Namespace",
    metadata: { generateName: `${prefix}-` },
  });
  if (res.status !== 201) {
    throw new Error(`Cannot create namespace: HTTP ${res.status} ${res.body.message}`);
  }
  const ns = res.body.metadata.name as string;
  // Pods need the namespace's default ServiceAccount, which the serviceaccount controller creates.
  await waitFor(`serviceaccount ${ns}/default`, async () => {
    const sa = await admin.request("GET", `/api/v1/namespaces/${ns}/serviceaccounts/default`);
    return sa.status === 200 ? true : undefined;
  });
  return ns;
}

/**
 * Creates an object and returns it.
 *
 * @param api client
 * @param path collection path
 * @param obj the object
 * @returns the created object
 * @throws {Error} when the API does not answer 201
 */
export async function create(api: Api, path: string, obj: Obj): Promise<Obj> {
  const res = await api.request("POST", path, obj);
  if (res.status !== 201) {
    throw new Error(`Cannot create ${path}: HTTP ${res.status} ${res.body.message}`);
  }
  return res.body;
}

/**
 * The GPU Operator's ClusterPolicy CRD (`nvidia.com/v1`, cluster-scoped, any spec), for tests that
 * give the cluster a ClusterPolicy as a GPU cluster has one.
 */
export const CLUSTER_POLICY_CRD: Obj = {
  apiVersion: "apiextensions.k8s.io/v1",
  kind: "CustomResourceDefinition",
  metadata: { name: "clusterpolicies.nvidia.com" },
  spec: {
    group: "nvidia.com",
    scope: "Cluster",
    names: {
      plural: "clusterpolicies",
      singular: "clusterpolicy",
      kind: "ClusterPolicy",
      listKind: "ClusterPolicyList",
    },
    versions: [{
      name: "v1",
      served: true,
      storage: true,
      schema: { openAPIV3Schema: { type: "object", "x-kubernetes-preserve-unknown-fields": true } },
    }],
  },
};
