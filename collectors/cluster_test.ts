/**
 * K8s and NodeTopology against the real test cluster (apiserver + kubelet stand-in), through
 * the production `ClusterReader` over `kube/`. Runs when `AICR_CLUSTER_DIR` is set, as
 * `tests/run.ts` (npm test) does; plain unit runs skip it.
 *
 * @module
 */
import assert from "node:assert/strict";
import { NOOP_LOGGER } from "../log.ts";
import { connectKube } from "../kube/mod.ts";
import {
  CLUSTER_POLICY_CRD,
  type TestCluster,
  useTestCluster,
  waitFor,
} from "../tests/cluster/harness.ts";
import { collectK8s } from "./k8s.ts";
import { createClusterReader } from "./kube_reader.ts";
import { collectTopology } from "./topology.ts";
import type { KubeNode } from "./types.ts";

const ENABLED = Boolean(Deno.env.get("AICR_CLUSTER_DIR"));
const NAME = "aicr-collectors-test";
async function expectOk(
  env: TestCluster,
  method: string,
  path: string,
  body?: unknown,
): Promise<Record<string, unknown>> {
  const res = await env.admin.request(method, path, body);
  assert.ok(
    res.status < 300 || (method === "POST" && res.status === 409),
    `${method} ${path}: ${res.status} ${JSON.stringify(res.body)}`,
  );
  return res.body;
}

Deno.test({
  name: "collectK8s() and collectTopology() read the real test cluster through kube/",
  ignore: !ENABLED,
  async fn(t) {
    const env = await useTestCluster();
    const created: string[] = [];
    try {
      await expectOk(
        env,
        "POST",
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        CLUSTER_POLICY_CRD,
      );
      created.push(
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/clusterpolicies.nvidia.com",
      );
      await waitFor("the ClusterPolicy CRD to be served", async () => {
        const res = await env.admin.request("GET", "/apis/nvidia.com/v1/clusterpolicies");
        return res.status === 200 ? true : undefined;
      });
      await expectOk(env, "POST", "/apis/nvidia.com/v1/clusterpolicies", {
        apiVersion: "nvidia.com/v1",
        kind: "ClusterPolicy",
        metadata: { name: NAME },
        spec: {
          driver: { enabled: true, version: "580.82.07" },
          toolkit: { env: [{ value: "1", name: "A" }] },
        },
      });
      created.unshift(`/apis/nvidia.com/v1/clusterpolicies/${NAME}`);
      await expectOk(env, "POST", "/api/v1/namespaces/default/pods", {
        apiVersion: "v1",
        kind: "Pod",
        metadata: { name: NAME },
        // Never scheduled: no node carries this label.
        spec: {
          nodeSelector: { "aicr.test/nowhere": "true" },
          containers: [{
            name: "c",
            image:
              "registry.k8s.io/pause:3.10@sha256:ee6521f290b2168b6e0935a181d4cff9be1ac3f505666ef0e3c98fae8199917a",
          }],
        },
      });
      created.unshift(`/api/v1/namespaces/default/pods/${NAME}`);

      const kube = connectKube({ kubeconfig: env.cluster.adminKubeconfig }, () => undefined);
      const cluster = createClusterReader(kube);
      const apiNodes = (await expectOk(env, "GET", "/api/v1/nodes")).items as KubeNode[];
      const first = apiNodes[0];
      assert.ok(first?.metadata?.name, "the cluster has nodes");

      await t.step("K8s subtypes come from the API", async () => {
        const m = await collectK8s({ cluster, log: NOOP_LOGGER }, {
          nodeName: first.metadata!.name!,
        });
        const by = Object.fromEntries(m.subtypes.map((s) => [s.subtype, s]));
        const version = await expectOk(env, "GET", "/version");
        assert.deepEqual(by.server?.data, {
          version: version.gitVersion,
          platform: version.platform,
          goVersion: version.goVersion,
        });
        assert.equal(by.image?.data.pause, "3.10");
        assert.equal(by.policy?.data["driver.version"], "580.82.07");
        assert.equal(by.policy?.data["driver.enabled"], "true");
        assert.equal(by.policy?.data["toolkit.env"], '[{"name":"A","value":"1"}]');
        assert.equal(by.node?.data["source-node"], first.metadata?.name);
        assert.equal(
          by.node?.data["kubelet-version"],
          first.status?.nodeInfo?.kubeletVersion || undefined,
        );
        assert.equal(by.slinky?.context?.status, "absent");
        assert.equal(by.mariadb?.context?.status, "absent");
        assert.deepEqual(by.oke?.data, { "legacy-device-plugin": false });
        for (const name of ["server", "image", "policy", "node", "oke"]) {
          assert.equal(by[name]?.context?.status, "ok", name);
        }
      });

      await t.step(
        "NodeTopology folds every node, and the reader follows real continue tokens",
        async () => {
          const m = await collectTopology({ cluster });
          const [summary, taint, label] = m.subtypes;
          assert.equal(summary?.data["node-count"], apiNodes.length);
          for (const node of apiNodes) {
            const name = node.metadata?.name ?? "";
            const hostname = apiNodes.length > 1
              ? `kubernetes.io/hostname.${name}`
              : "kubernetes.io/hostname";
            assert.equal(label?.data[hostname], `${name}|${name}`);
            for (const tt of node.spec?.taints ?? []) {
              const entry = Object.entries(taint?.data ?? {}).find(([k]) =>
                k === tt.key || k.startsWith(`${tt.key}.`)
              );
              assert.ok(
                entry && String(entry[1]).split("|").at(-1)?.split(",").includes(name),
                `${tt.key} on ${name}`,
              );
            }
          }
          const page1 = await cluster.listNodes({ limit: 1 });
          assert.equal(page1.items.length, 1);
          if (apiNodes.length > 1) {
            assert.ok(page1.continue, "a continue token");
            const page2 = await cluster.listNodes({ limit: 1, continue: page1.continue! });
            assert.notEqual(page2.items[0]?.metadata?.name, page1.items[0]?.metadata?.name);
          }
        },
      );

      await t.step("a user with no rights gets denied subtypes, not empty ones", async () => {
        const nobody = createClusterReader(
          connectKube(
            { kubeconfig: await env.cluster.kubeconfigFor("aicr-collectors-nobody") },
            () => undefined,
          ),
        );
        const m = await collectK8s({ cluster: nobody, log: NOOP_LOGGER }, {
          nodeName: first.metadata!.name!,
        });
        const by = Object.fromEntries(m.subtypes.map((s) => [s.subtype, s]));
        assert.equal(by.image?.context?.status, "denied");
        assert.equal(by.node?.context?.status, "denied");
        assert.equal(by.oke?.context?.status, "denied");
        const topology = await collectTopology({ cluster: nobody });
        for (const s of topology.subtypes) assert.equal(s.context?.status, "denied", s.subtype);
      });
    } finally {
      for (const path of created) await env.admin.request("DELETE", path).catch(() => undefined);
      await env.stop();
    }
  },
});
