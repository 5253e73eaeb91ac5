/**
 * The kubelet stand-in's readiness probes, on the real control plane: a container is Ready only
 * while its `httpGet` readiness probe answers 2xx/3xx. The `aicr` image serves as the probed
 * server (`aicr daemon` answers `/readyz` 200 once its first collection is done).
 */
import assert from "node:assert/strict";
import { createNamespace, useTestCluster, waitFor } from "../cluster/harness.ts";
import type { Obj } from "./api.ts";

function daemonPod(name: string, node: string, port: number, probePort: number): Obj {
  return {
    metadata: { name },
    spec: {
      nodeName: node,
      restartPolicy: "Always",
      containers: [{
        name: "aicr",
        image: "aicr:dev",
        args: [
          "daemon",
          "--insecure-http",
          "--insecure-no-auth",
          "--listen",
          "$(POD_IP)",
          "--port",
          String(port),
        ],
        env: [
          { name: "POD_IP", valueFrom: { fieldRef: { fieldPath: "status.podIP" } } },
          { name: "NODE_NAME", valueFrom: { fieldRef: { fieldPath: "spec.nodeName" } } },
        ],
        ports: [{ name: "http", containerPort: port }],
        readinessProbe: {
          httpGet: { path: "/readyz", port: probePort, scheme: "HTTP" },
          periodSeconds: 1,
        },
      }],
    },
  };
}

Deno.test({
  name: "kubelet: a readinessProbe decides Ready; a probe nobody answers keeps the pod not Ready",
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    const env = await useTestCluster();
    const ns = await createNamespace(env.admin, "kubelet-probes");
    try {
      const node = env.nodes.find((n) => !n.gpu)?.name ?? env.nodes[0]!.name;
      const port = 20_000 + Math.floor(Math.random() * 20_000);
      const pods = `/api/v1/namespaces/${ns}/pods`;
      for (
        const pod of [
          daemonPod("good", node, port, port),
          daemonPod("bad", node, port + 1, port + 2),
        ]
      ) {
        const res = await env.admin.request("POST", pods, pod);
        assert.equal(res.status, 201, JSON.stringify(res.body));
      }
      const ready = (pod: Obj) =>
        pod.status?.conditions?.find((c: Obj) => c.type === "Ready")?.status === "True";
      await waitFor("pod good Ready", async () => {
        const pod = (await env.admin.request("GET", `${pods}/good`)).body;
        return ready(pod) ? true : undefined;
      }, 60_000);
      const good = (await env.admin.request("GET", `${pods}/good`)).body;
      assert.equal(good.status.containerStatuses[0].ready, true);
      // "bad" runs (its daemon listens on another port) but its probe is never answered.
      await waitFor("pod bad Running", async () => {
        const pod = (await env.admin.request("GET", `${pods}/bad`)).body;
        return pod.status?.phase === "Running" ? true : undefined;
      });
      await new Promise((r) => setTimeout(r, 4000));
      const bad = (await env.admin.request("GET", `${pods}/bad`)).body;
      assert.equal(bad.status.phase, "Running");
      assert.equal(ready(bad), false);
      assert.equal(bad.status.containerStatuses[0].ready, false);
      assert.equal(
        bad.status.conditions.find((c: Obj) => c.type === "Ready").reason,
        "ContainersNotReady",
      );
    } finally {
      await env.admin.request("DELETE", `/api/v1/namespaces/${ns}`);
      await env.stop();
    }
  },
});
