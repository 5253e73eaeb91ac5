/**
 * Drift as a metric, end to end on the local cluster: the built binary installs the daemon
 * (which the kubelet stand-in runs on the GPU nodes), `aicr daemonset baseline set|get|list|
 * delete` stores per-cohort baselines, and each daemon's `/metrics`, scraped with a token of
 * the API server's default audience (as a stock Prometheus sends), says whether it read its
 * cohort's baseline and how many readings differ from it. Install adds a headless Service, and
 * a ServiceMonitor only while the `monitoring.coreos.com/v1` CRD exists; uninstall removes both.
 */
import assert from "node:assert/strict";
import { mkdtemp, writeFile } from "node:fs/promises";
import { request } from "node:https";
import { join } from "node:path";
import { encodeSnapshot, parseSnapshot, snapshotCohort } from "../../snapshot/mod.ts";
import { setReading } from "../../snapshot/testdata/generate.ts";
import { createNamespace, type TestCluster, useTestCluster, waitFor } from "../cluster/harness.ts";
import type { Api, Obj } from "../kubelet/api.ts";
import { aicr } from "./_aicr.ts";

function httpsGet(
  url: string,
  options: { ca: string; servername: string; token: string },
): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(url, {
      ca: options.ca,
      servername: options.servername,
      agent: false,
      headers: { authorization: `Bearer ${options.token}` },
    }, (res) => {
      let body = "";
      res.on("data", (chunk) => (body += chunk));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on("error", reject);
    req.end();
  });
}

async function ok(api: Api, method: string, path: string, body?: unknown): Promise<Obj> {
  const res = await api.request(method, path, body as Obj | undefined);
  assert.ok(
    res.status >= 200 && res.status < 300,
    `${method} ${path}: ${JSON.stringify(res.body)}`,
  );
  return res.body;
}

/** The value of one sample line of a metric whose labels include every one given. */
function sample(text: string, metric: string, labels: Record<string, string>): number | undefined {
  for (const line of text.split("\n")) {
    if (!line.startsWith(`${metric}{`)) continue;
    const close = line.lastIndexOf("}");
    const body = line.slice(metric.length + 1, close);
    if (Object.entries(labels).every(([k, v]) => body.includes(`${k}="${v}"`))) {
      return Number(line.slice(close + 1).trim());
    }
  }
  return undefined;
}

const SERVICE_MONITOR_CRD = {
  apiVersion: "apiextensions.k8s.io/v1",
  kind: "CustomResourceDefinition",
  metadata: { name: "servicemonitors.monitoring.coreos.com" },
  spec: {
    group: "monitoring.coreos.com",
    names: {
      kind: "ServiceMonitor",
      listKind: "ServiceMonitorList",
      plural: "servicemonitors",
      singular: "servicemonitor",
    },
    scope: "Namespaced",
    versions: [{
      name: "v1",
      served: true,
      storage: true,
      schema: { openAPIV3Schema: { type: "object", "x-kubernetes-preserve-unknown-fields": true } },
    }],
  },
};

Deno.test({
  name:
    "aicr daemonset baseline: per-cohort baselines, drift 0 then >0 in /metrics, refusals, Service and ServiceMonitor",
  sanitizeOps: false,
  sanitizeResources: false,
  async fn(t) {
    const env: TestCluster = await useTestCluster();
    const { admin } = env;
    const kubeconfig = env.cluster.adminKubeconfig;
    const ns = await createNamespace(admin, "baseline-e2e");
    const dir = await mkdtemp(join(env.cluster.stateDir, "baseline-"));
    const ds = (...args: string[]) =>
      aicr(["daemonset", ...args, "--kubeconfig", kubeconfig, "-n", ns], { deadlineMs: 180_000 });
    const h100 = env.nodes.find((n) => n.gpu && n.profile === "p5-h100")?.name;
    const gb200 = env.nodes.find((n) => n.gpu && n.profile === "p6-gb200")?.name;
    assert.ok(h100 && gb200, "the test cluster has an H100 and a GB200 node");
    let crdCreated = false;
    /** Whether the daemon's ServiceAccount may get a ConfigMap of the namespace. */
    const may = async (name: string) =>
      (await ok(admin, "POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", {
        apiVersion: "authorization.k8s.io/v1",
        kind: "SubjectAccessReview",
        spec: {
          user: `system:serviceaccount:${ns}:aicr-daemon`,
          groups: ["system:serviceaccounts", `system:serviceaccounts:${ns}`],
          resourceAttributes: { namespace: ns, verb: "get", resource: "configmaps", name },
        },
      })).status.allowed === true;
    try {
      // A stock Prometheus: its own ServiceAccount, 'get nodes/metrics', a default-audience token.
      await ok(admin, "POST", `/api/v1/namespaces/${ns}/serviceaccounts`, {
        metadata: { name: "prometheus" },
      });
      await ok(admin, "POST", "/apis/rbac.authorization.k8s.io/v1/clusterroles", {
        metadata: { name: `${ns}-metrics` },
        rules: [{ apiGroups: [""], resources: ["nodes/metrics"], verbs: ["get"] }],
      });
      await ok(admin, "POST", "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", {
        metadata: { name: `${ns}-metrics` },
        roleRef: {
          apiGroup: "rbac.authorization.k8s.io",
          kind: "ClusterRole",
          name: `${ns}-metrics`,
        },
        subjects: [{ kind: "ServiceAccount", name: "prometheus", namespace: ns }],
      });
      const token = (await ok(
        admin,
        "POST",
        `/api/v1/namespaces/${ns}/serviceaccounts/prometheus/token`,
        { apiVersion: "authentication.k8s.io/v1", kind: "TokenRequest", spec: {} },
      )).status.token as string;

      let scrape: (node: string) => Promise<string> = () => Promise.resolve("");
      await t.step(
        "install adds a headless Service with scrape annotations (no ServiceMonitor CRD)",
        async () => {
          const run = await ds(
            "install",
            "--image",
            "aicr:dev",
            "--timeout",
            "90s",
            "--baseline-interval",
            "1s",
          );
          assert.equal(run.code, 0, run.stderr);
          assert.match(
            run.stderr,
            /no ServiceMonitor CRD \(monitoring\.coreos\.com\/v1\); the headless Service carries prometheus\.io\/scrape annotations/,
          );
          const service = await ok(admin, "GET", `/api/v1/namespaces/${ns}/services/aicr-daemon`);
          assert.equal(service.spec.clusterIP, "None");
          assert.equal(service.metadata.annotations["prometheus.io/scrape"], "true");
          const ca = (await ok(admin, "GET", `/api/v1/namespaces/${ns}/configmaps/aicr-daemon-ca`))
            .data["ca.crt"] as string;
          const pods = (await ok(
            admin,
            "GET",
            `/api/v1/namespaces/${ns}/pods?labelSelector=${
              encodeURIComponent("app.kubernetes.io/component=daemon")
            }`,
          )).items as Obj[];
          scrape = async (node: string) => {
            const pod = pods.find((p) => p.spec.nodeName === node);
            assert.ok(pod, `a daemon pod on ${node}`);
            const port = pod.spec.containers[0].ports[0].containerPort;
            const res = await httpsGet(`https://${pod.status.podIP}:${port}/metrics`, {
              ca,
              // Each daemon's own certificate names its node (issue #18).
              servername: node,
              token,
            });
            assert.equal(res.status, 200, res.body);
            return res.body;
          };
        },
      );

      await t.step("without a baseline the daemon serves and says 'missing'", async () => {
        const text = await waitFor("baseline state missing", async () => {
          const body = await scrape(h100);
          return sample(body, "aicr_baseline_info", { state: "missing" }) === 1 ? body : undefined;
        });
        assert.equal(
          sample(text, "aicr_drift_readings", {}),
          undefined,
          "no drift without a baseline",
        );
      });

      let cohortKey = "";
      let fetched = "";
      await t.step(
        "baseline set --from-node, then get and list; the daemon exports drift 0",
        async () => {
          const set = await ds("baseline", "set", "--from-node", h100);
          assert.equal(set.code, 0, set.stderr);
          const list = await ds("baseline", "list");
          assert.equal(list.code, 0, list.stderr);
          assert.match(
            list.stdout,
            new RegExp(`NVIDIA H100 80GB HBM3 ×8.*${h100}\\s+node ${h100}`),
          );
          const get = await ds("baseline", "get");
          assert.equal(get.code, 0, get.stderr);
          fetched = get.stdout;
          const snapshot = parseSnapshot(fetched);
          assert.equal(snapshot.metadata["source-node"], h100);
          cohortKey = snapshotCohort(snapshot).key;
          assert.match(list.stdout, new RegExp(`^${cohortKey}\\s`, "m"));
          // The daemon may get exactly the baselines that exist, no other ConfigMap.
          assert.equal(await may(`aicr-daemon-baseline-${cohortKey}`), true);
          assert.equal(await may("aicr-daemon-ca"), false);
          assert.equal(await may("kube-root-ca.crt"), false);
          await waitFor("drift 0 from the node's own baseline", async () => {
            const body = await scrape(h100);
            const drift = ["K8s", "GPU", "OS", "SystemD"].map((m) =>
              sample(body, "aicr_drift_readings", { measurement: m })
            );
            return sample(body, "aicr_baseline_info", { state: "ok" }) === 1 &&
                drift.every((d) => d === 0)
              ? true
              : undefined;
          });
        },
      );

      await t.step("a baseline with another driver: the daemon's GPU drift becomes 1", async () => {
        const changed = parseSnapshot(fetched);
        setReading(changed, "GPU.smi.driver", "999.99.99");
        const file = join(dir, "changed.yaml");
        await writeFile(file, encodeSnapshot(changed));
        const set = await ds("baseline", "set", "-f", file, "--cohort", cohortKey);
        assert.equal(set.code, 0, set.stderr);
        await waitFor("GPU drift 1", async () => {
          const body = await scrape(h100);
          return sample(body, "aicr_drift_readings", { measurement: "GPU" }) === 1 &&
              sample(body, "aicr_drift_readings", { measurement: "OS" }) === 0
            ? true
            : undefined;
        });
      });

      await t.step(
        "a baseline of another cohort and a malformed one are refused, nothing written",
        async () => {
          const before = (await ds("baseline", "list")).stdout;
          const gb = parseSnapshot(fetched);
          setReading(gb, "GPU.smi.gpu.model", "NVIDIA GB200 192GB HBM3e");
          const file = join(dir, "gb200.yaml");
          await writeFile(file, encodeSnapshot(gb));
          const wrong = await ds("baseline", "set", "-f", file, "--cohort", cohortKey);
          assert.equal(wrong.code, 2, wrong.stderr);
          assert.match(wrong.stderr, /belongs to cohort 'NVIDIA GB200 192GB HBM3e ×8/);
          const bad = join(dir, "bad.yaml");
          await writeFile(bad, "kind: ConfigMap\napiVersion: v1\n");
          const malformed = await ds("baseline", "set", "-f", bad);
          assert.equal(malformed.code, 2, malformed.stderr);
          assert.match(malformed.stderr, /must be 'Snapshot'/);
          assert.equal((await ds("baseline", "list")).stdout, before);
        },
      );

      await t.step(
        "a foreign ConfigMap at a baseline's name is left untouched; that daemon may not read it",
        async () => {
          // The GB200 node's cohort, read from its daemon's own metrics.
          const body = await waitFor("the GB200 daemon's state", async () => {
            const text = await scrape(gb200);
            return sample(text, "aicr_baseline_info", { state: "missing" }) === 1
              ? text
              : undefined;
          });
          const name = /aicr_baseline_info\{[^}]*configmap="([^"]+)"/.exec(body)?.[1];
          assert.ok(name, body);
          await ok(admin, "POST", `/api/v1/namespaces/${ns}/configmaps`, {
            metadata: { name },
            data: { owner: "someone else" },
          });
          const set = await ds("baseline", "set", "--from-node", gb200);
          assert.equal(set.code, 2, set.stderr);
          assert.match(
            set.stderr,
            /name is taken by an object aicr did not create; it is left untouched/,
          );
          const cm = await ok(admin, "GET", `/api/v1/namespaces/${ns}/configmaps/${name}`);
          assert.deepEqual(cm.data, { owner: "someone else" });
          // No baseline was set under that name, so no grant names it: the daemon cannot read
          // the foreign object, and still says its cohort has no baseline.
          assert.equal(await may(name), false);
          const text = await scrape(gb200);
          assert.equal(sample(text, "aicr_baseline_info", { state: "missing" }), 1, text);
          assert.equal(sample(text, "aicr_baseline_read_errors_total", {}), undefined, text);
          await ok(admin, "DELETE", `/api/v1/namespaces/${ns}/configmaps/${name}`);
        },
      );

      await t.step(
        "baseline delete: the daemon goes back to 'missing' and keeps serving",
        async () => {
          const del = await ds("baseline", "delete", "--cohort", cohortKey);
          assert.equal(del.code, 0, del.stderr);
          assert.equal((await ds("baseline", "list")).stdout.trim().split("\n").length, 1);
          await waitFor("state missing again", async () => {
            const body = await scrape(h100);
            return sample(body, "aicr_baseline_info", { state: "missing" }) === 1 &&
                sample(body, "aicr_drift_readings", {}) === undefined
              ? true
              : undefined;
          });
        },
      );

      await t.step("a daemon whose grant is gone says 'forbidden' and keeps serving", async () => {
        assert.equal(await may(`aicr-daemon-baseline-${cohortKey}`), false, "delete withdrew it");
        await ok(
          admin,
          "DELETE",
          `/apis/rbac.authorization.k8s.io/v1/namespaces/${ns}/rolebindings/aicr-daemon`,
        );
        await waitFor("state forbidden", async () => {
          const body = await scrape(h100);
          return sample(body, "aicr_baseline_info", { state: "forbidden" }) === 1 &&
              (sample(body, "aicr_baseline_read_errors_total", { reason: "forbidden" }) ?? 0) > 0
            ? true
            : undefined;
        });
      });

      await t.step("uninstall removes the Service", async () => {
        const run = await ds("uninstall");
        assert.equal(run.code, 0, run.stderr);
        const res = await admin.request("GET", `/api/v1/namespaces/${ns}/services/aicr-daemon`);
        assert.equal(res.status, 404);
      });

      await t.step(
        "with the ServiceMonitor CRD: install creates one, uninstall removes it",
        async () => {
          await ok(
            admin,
            "POST",
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
            SERVICE_MONITOR_CRD,
          );
          crdCreated = true;
          await waitFor("the CRD served", async () => {
            const res = await admin.request("GET", "/apis/monitoring.coreos.com/v1");
            return res.status === 200 ? true : undefined;
          });
          const run = await ds("install", "--image", "aicr:dev", "--no-wait");
          assert.equal(run.code, 0, run.stderr);
          assert.match(run.stderr, /ServiceMonitor created for the headless Service/);
          const monitor = await ok(
            admin,
            "GET",
            `/apis/monitoring.coreos.com/v1/namespaces/${ns}/servicemonitors/aicr-daemon`,
          );
          assert.equal(monitor.spec.endpoints[0].port, "https");
          // Per-node certificates name the pod IP Prometheus scrapes: no fixed server name.
          assert.equal(monitor.spec.endpoints[0].tlsConfig.serverName, undefined);
          const service = await ok(admin, "GET", `/api/v1/namespaces/${ns}/services/aicr-daemon`);
          assert.equal(service.metadata.annotations?.["prometheus.io/scrape"], undefined);
          const gone = await ds("uninstall");
          assert.equal(gone.code, 0, gone.stderr);
          for (
            const path of [
              `/apis/monitoring.coreos.com/v1/namespaces/${ns}/servicemonitors/aicr-daemon`,
              `/api/v1/namespaces/${ns}/services/aicr-daemon`,
              `/apis/apps/v1/namespaces/${ns}/daemonsets/aicr-daemon`,
            ]
          ) assert.equal((await admin.request("GET", path)).status, 404, path);
        },
      );
    } finally {
      if (crdCreated) {
        await admin.request(
          "DELETE",
          "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/servicemonitors.monitoring.coreos.com",
        );
      }
      await aicr(["daemonset", "uninstall", "--kubeconfig", kubeconfig, "-n", ns]).catch(() => {});
      await admin.request(
        "DELETE",
        `/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/${ns}-metrics`,
      );
      await admin.request(
        "DELETE",
        `/apis/rbac.authorization.k8s.io/v1/clusterroles/${ns}-metrics`,
      );
      await admin.request("DELETE", `/api/v1/namespaces/${ns}`);
      await env.stop();
    }
  },
});
