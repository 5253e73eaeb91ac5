/**
 * The search behind every `--redact` end-to-end test: every node name, node address, pod address,
 * hostname and registry host the API server knows ({@link clusterOriginals}), looked for in every
 * byte a run gave back ({@link hits}). Used by `redact_test.ts` (the local cluster) and
 * `../realnode/realnode_test.ts` (real kubelets and containerd).
 *
 * @module
 */
import assert from "node:assert/strict";
import { readdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import { CLUSTER_POLICY_CRD, waitFor } from "../cluster/harness.ts";
import type { Api, Obj } from "../kubelet/api.ts";
import type { AicrResult } from "./_aicr.ts";

/** What a run gave back, or a file it wrote, by name. */
export type Output = { what: string; text: string };

export const LABEL_IP = "aicr-test.example/node-ip";
export const LABEL_HOST = "aicr-test.example/hostname";

/** The registry host of an image reference, if it names one (`host.tld/`, `host:port/`). */
export function registryHost(image: string): string | undefined {
  const first = image.split("/")[0] ?? "";
  if (!image.includes("/") || !/[.:]|^localhost$/.test(first)) return undefined;
  return first.replace(/:\d+$/, "");
}

/** Every string under a value, with its path. */
function* strings(value: unknown): Generator<string> {
  if (typeof value === "string") yield value;
  else if (Array.isArray(value)) { for (const v of value) yield* strings(v); }
  else if (value && typeof value === "object") {
    for (const v of Object.values(value)) yield* strings(v);
  }
}

/**
 * Every node name, node address, pod address, hostname and registry host the API server knows,
 * each with what it is.
 *
 * @param admin the API server, as an admin
 * @param seen pods read earlier (a run's own pods, gone by now), counted as listed ones
 * @returns each value with what it is
 */
export async function clusterOriginals(
  admin: Api,
  seen: readonly Obj[] = [],
): Promise<Map<string, string>> {
  const found = new Map<string, string>();
  const add = (value: string | undefined, what: string) => {
    const known = found.get(value ?? "");
    if (value && !known?.split(", ").includes(what)) {
      found.set(value, known ? `${known}, ${what}` : what);
    }
  };
  const nodes = (await admin.request("GET", "/api/v1/nodes")).body.items as Obj[];
  for (const node of nodes) {
    add(node.metadata.name, "node name");
    for (const a of node.status?.addresses ?? []) add(a.address, `node ${a.type}`);
    add(node.metadata.labels?.["kubernetes.io/hostname"], "hostname label");
    add(node.metadata.labels?.[LABEL_HOST], "hostname label");
    add(node.metadata.labels?.[LABEL_IP], "node address label");
    for (const image of node.status?.images ?? []) {
      for (const name of image.names ?? []) add(registryHost(name), "registry host");
    }
  }
  const pods = (await admin.request("GET", "/api/v1/pods")).body.items as Obj[];
  for (const pod of [...pods, ...seen]) {
    for (const ip of [pod.status?.podIP, ...(pod.status?.podIPs ?? []).map((p: Obj) => p.ip)]) {
      add(ip, "pod IP");
    }
    add(pod.status?.hostIP, "host IP");
    const containers = [...pod.spec.containers, ...(pod.spec.initContainers ?? [])];
    for (const c of [...containers, ...(pod.status?.containerStatuses ?? [])]) {
      add(registryHost(c.image ?? ""), "registry host");
    }
  }
  const policies = await admin.request("GET", "/apis/nvidia.com/v1/clusterpolicies");
  for (const policy of (policies.body.items ?? []) as Obj[]) {
    for (const value of strings(policy.spec)) add(registryHost(value), "registry host");
  }
  return found;
}

/** Each original found in an output: `<what> '<value>' in <output>`. */
export function hits(outputs: readonly Output[], originals: Map<string, string>): string[] {
  const found: string[] = [];
  for (const { what, text } of outputs) {
    const lower = text.toLowerCase();
    for (const [value, kind] of originals) {
      const at = lower.indexOf(value.toLowerCase());
      if (at >= 0) {
        found.push(
          `${kind} '${value}' in ${what}: ...${text.slice(Math.max(0, at - 60), at + 60)}`,
        );
      }
    }
  }
  return found;
}

/** A run's stdout and stderr as outputs, after checking its exit code. */
export function outputsOf(what: string, run: AicrResult, code = 0): Output[] {
  assert.equal(run.code, code, `${what}: exit ${run.code}\n${run.stderr}`);
  return [{ what: `${what} stdout`, text: run.stdout }, {
    what: `${what} stderr`,
    text: run.stderr,
  }];
}

/** Every file of a directory, its name as an output too. */
export async function filesOf(dir: string, what: string): Promise<Output[]> {
  const out: Output[] = [];
  for (const name of (await readdir(dir)).sort()) {
    out.push({ what: `${what} file name`, text: name });
    out.push({ what: `${what}${name}`, text: await readFile(join(dir, name), "utf8") });
  }
  return out;
}

/**
 * Reads every pod of the cluster again and again until stopped: a run's own pods (its agent's
 * address) are gone when the run ends, and {@link clusterOriginals} counts them from here.
 *
 * @param admin the API server, as an admin
 * @returns `stop()`, which resolves to every pod read
 */
export function watchPods(admin: Api): { stop(): Promise<Obj[]> } {
  const seen: Obj[] = [];
  let running = true;
  const loop = (async () => {
    while (running) {
      const res = await admin.request("GET", "/api/v1/pods").catch(() => undefined);
      if (res?.status === 200) seen.push(...(res.body.items as Obj[]));
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
  })();
  return {
    async stop() {
      running = false;
      await loop;
      return seen;
    },
  };
}

/** The registry a GPU operator's ClusterPolicy names here (a host the cluster then knows). */
export const PRIVATE_REGISTRY = "registry.gpu-corp.example:5000";

/**
 * A GPU operator's ClusterPolicy CRD and one policy naming {@link PRIVATE_REGISTRY}.
 *
 * @returns the paths of what it created (what the test deletes after; nothing else)
 */
export async function seedClusterPolicy(admin: Api): Promise<string[]> {
  const created: string[] = [];
  const crds = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
  const crd = await admin.request("POST", crds, CLUSTER_POLICY_CRD);
  assert.ok([201, 409].includes(crd.status), JSON.stringify(crd.body));
  if (crd.status === 201) created.push(`${crds}/${CLUSTER_POLICY_CRD.metadata.name}`);
  await waitFor("the ClusterPolicy CRD served", async () => {
    const res = await admin.request("GET", "/apis/nvidia.com/v1/clusterpolicies");
    return res.status === 200 ? true : undefined;
  });
  const policies = "/apis/nvidia.com/v1/clusterpolicies";
  const policy = await admin.request("POST", policies, {
    apiVersion: "nvidia.com/v1",
    kind: "ClusterPolicy",
    metadata: { name: "aicr-redact-test" },
    spec: {
      driver: { repository: `${PRIVATE_REGISTRY}/nvidia`, image: "driver", version: "570.86.15" },
      toolkit: { repository: `${PRIVATE_REGISTRY}/nvidia/k8s`, image: "container-toolkit" },
    },
  });
  assert.equal(policy.status, 201, JSON.stringify(policy.body));
  created.unshift(`${policies}/aicr-redact-test`);
  return created;
}

/** Labels each node with its address and a hostname of its own (as cloud providers' do). */
export async function labelNodes(
  admin: Api,
  nodes: readonly { name: string; ip: string }[],
  on: boolean,
): Promise<void> {
  for (const node of nodes) {
    const res = await admin.request("PATCH", `/api/v1/nodes/${node.name}`, {
      metadata: {
        labels: {
          [LABEL_IP]: on ? node.ip : null,
          [LABEL_HOST]: on ? `${node.name}.gpu.corp.example` : null,
        },
      },
    });
    assert.equal(res.status, 200, JSON.stringify(res.body));
  }
}
