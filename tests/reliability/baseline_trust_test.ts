/**
 * Issue #28 item 3, on the real cluster with the built binary: a user who may write ConfigMaps in
 * the daemon's namespace, and nothing else, cannot decide what drift the daemons report. Each
 * attack is made through that user's own credentials (the API server accepts every write), and
 * each must be refused by the signature: the daemons say `state="untrusted"` and export no drift,
 * `baseline list` says so in its TRUST column, and a re-install grants none of them.
 *
 * - an edited baseline (the snapshot changed in place, signature kept);
 * - a copied one (the signed H100 baseline written under the GB200 cohort's name);
 * - a planted one (the right labels and annotations, unsigned), then a re-install.
 */
import assert from "node:assert/strict";
import { encodeSnapshot, parseSnapshot } from "../../snapshot/mod.ts";
import { setReading } from "../../snapshot/testdata/generate.ts";
import { createNamespace, useTestCluster, waitFor } from "../cluster/harness.ts";
import type { Api, Obj } from "../kubelet/api.ts";
import { aicr, httpsGet, mintToken } from "../e2e/_aicr.ts";
import { record } from "./_report.ts";
import { ENABLED } from "./_env.ts";

async function ok(api: Api, method: string, path: string, body?: unknown): Promise<Obj> {
  const res = await api.request(method, path, body as Obj | undefined);
  assert.ok(
    res.status >= 200 && res.status < 300,
    `${method} ${path}: ${JSON.stringify(res.body)}`,
  );
  return res.body;
}

/** The value of one sample of a metric whose labels include every one given. */
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

Deno.test({
  name: "reliability: a ConfigMap writer cannot decide what drift the daemons report",
  ignore: !ENABLED,
  sanitizeOps: false,
  sanitizeResources: false,
  async fn(t) {
    const env = await useTestCluster();
    const { admin } = env;
    const kubeconfig = env.cluster.adminKubeconfig;
    const ns = await createNamespace(admin, "rel-baseline");
    const ds = (...args: string[]) =>
      aicr(["daemonset", ...args, "--kubeconfig", kubeconfig, "-n", ns], { deadlineMs: 240_000 });
    const h100 = env.nodes.find((n) => n.gpu && n.profile === "p5-h100")?.name;
    const gb200 = env.nodes.find((n) => n.gpu && n.profile === "p6-gb200")?.name;
    assert.ok(h100 && gb200, "the test cluster has an H100 and a GB200 node");
    let attacks = 0;
    let refused = 0;
    const cmPath = (name = "") => `/api/v1/namespaces/${ns}/configmaps${name ? `/${name}` : ""}`;
    const grantedNames = async () => {
      const role = await ok(
        admin,
        "GET",
        `/apis/rbac.authorization.k8s.io/v1/namespaces/${ns}/roles/aicr-daemon`,
      );
      return (role.rules as Obj[]).find((r) => r.resources?.includes("configmaps"))
        ?.resourceNames as string[];
    };
    try {
      // The attacker: may do anything with ConfigMaps of the namespace, nothing else.
      await ok(admin, "POST", `/apis/rbac.authorization.k8s.io/v1/namespaces/${ns}/roles`, {
        metadata: { name: "configmap-writer" },
        rules: [{
          apiGroups: [""],
          resources: ["configmaps"],
          verbs: ["get", "list", "create", "update", "patch", "delete"],
        }],
      });
      await ok(admin, "POST", `/apis/rbac.authorization.k8s.io/v1/namespaces/${ns}/rolebindings`, {
        metadata: { name: "configmap-writer" },
        roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "Role", name: "configmap-writer" },
        subjects: [{ kind: "User", name: "mallory", apiGroup: "rbac.authorization.k8s.io" }],
      });
      const mallory = await env.clientFor("mallory");
      // Prometheus' stand-in: a ServiceAccount allowed 'get nodes/metrics'.
      await ok(admin, "POST", `/api/v1/namespaces/${ns}/serviceaccounts`, {
        metadata: { name: "scraper" },
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
        subjects: [{ kind: "ServiceAccount", name: "scraper", namespace: ns }],
      });

      const install = async () => {
        const run = await ds(
          "install",
          "--image",
          "aicr:dev",
          "--timeout",
          "120s",
          "--baseline-interval",
          "1s",
        );
        assert.equal(run.code, 0, run.stderr);
        return run;
      };
      let scraperToken: string | undefined;
      /** Scrapes one node's daemon's /metrics (its own certificate, the install's CA). */
      const scrape = async (node: string) => {
        const ca = (await ok(admin, "GET", cmPath("aicr-daemon-ca"))).data["ca.crt"] as string;
        const pods = (await ok(
          admin,
          "GET",
          `/api/v1/namespaces/${ns}/pods?labelSelector=${
            encodeURIComponent("app.kubernetes.io/component=daemon")
          }`,
        )).items as Obj[];
        const pod = pods.find((p) => p.spec.nodeName === node && !p.metadata.deletionTimestamp);
        assert.ok(pod, `a daemon pod on ${node}`);
        const port = pod.spec.containers[0].ports[0].containerPort;
        // One token for every scrape: a new one per poll would spend the daemon's budget of
        // TokenReviews for unseen tokens (429) and hide the state the wait is for.
        const token = scraperToken ??= await mintToken(admin, ns, "scraper");
        const res = await httpsGet(`https://${pod.status.podIP}:${port}/metrics`, {
          ca,
          servername: node,
          token,
        });
        assert.equal(res.status, 200, res.body);
        return res.body;
      };
      const waitState = (node: string, state: string) =>
        waitFor(`${node}: baseline ${state}`, async () => {
          const body = await scrape(node);
          if (sample(body, "aicr_baseline_info", { state }) === 1) return body;
          // Thrown, so a timeout names the state the daemon stayed in.
          const now = /^aicr_baseline_info\{[^}]*state="([^"]+)"[^}]*\} 1$/m.exec(body)?.[1];
          throw new Error(`the daemon says state="${now ?? "(none)"}"`);
        }, 90_000);

      let h100Baseline = "";
      await t.step("a signed baseline is used: drift 0, TRUST signed", async () => {
        await install();
        const set = await ds("baseline", "set", "--from-node", h100);
        assert.equal(set.code, 0, set.stderr);
        const list = await ds("baseline", "list");
        assert.match(list.stdout, /^KEY\s+COHORT\s+NODE\s+SOURCE\s+UPDATED\s+TRUST$/m);
        assert.match(list.stdout, /\ssigned$/m);
        const text = await waitState(h100, "ok");
        assert.equal(sample(text, "aicr_drift_readings", { measurement: "GPU" }), 0);
        h100Baseline = (await ok(admin, "GET", cmPath())).items
          .find((o: Obj) => o.metadata.labels?.["app.kubernetes.io/component"] === "baseline")
          .metadata.name;
      });

      await t.step("edited in place by a ConfigMap writer: untrusted, no drift, said", async () => {
        attacks++;
        const cm = await ok(mallory, "GET", cmPath(h100Baseline));
        // Hide a driver downgrade for the whole cohort: the node's driver becomes the baseline's.
        const forged = parseSnapshot(cm.data["snapshot.yaml"]);
        setReading(forged, "GPU.smi.driver", "999.99.99");
        cm.data["snapshot.yaml"] = encodeSnapshot(forged);
        await ok(mallory, "PUT", cmPath(h100Baseline), cm);
        const text = await waitState(h100, "untrusted");
        assert.equal(sample(text, "aicr_drift_readings", {}), undefined, "no drift from it");
        const list = await ds("baseline", "list");
        assert.match(list.stdout, /\sedited$/m);
        assert.match(
          list.stderr,
          /WARN baseline untrusted: the daemons do not use it for drift .*trust=edited/,
        );
        refused++;
      });

      await t.step("a signed baseline copied under another cohort's name: untrusted", async () => {
        attacks++;
        const set = await ds("baseline", "set", "--from-node", gb200);
        assert.equal(set.code, 0, set.stderr);
        await waitState(gb200, "ok");
        const names = await grantedNames();
        const gbName = names.find((n) => n !== h100Baseline && !n.endsWith("-none")) as string;
        // Restore the H100 one first (set again), then copy its signed content and signature.
        assert.equal((await ds("baseline", "set", "--from-node", h100)).code, 0);
        const source = await ok(mallory, "GET", cmPath(h100Baseline));
        const target = await ok(mallory, "GET", cmPath(gbName));
        target.data = source.data;
        await ok(mallory, "PUT", cmPath(gbName), target);
        const text = await waitState(gb200, "untrusted");
        assert.equal(sample(text, "aicr_drift_readings", {}), undefined);
        refused++;
      });

      await t.step(
        "planted with the right labels, then a re-install: nothing granted, said",
        async () => {
          attacks++;
          const uninstall = await ds("uninstall");
          assert.equal(uninstall.code, 0, uninstall.stderr);
          // The H100 baseline (signed by the old CA) is kept; the attacker plants its own for the
          // same cohort name after deleting it, unsigned, with every label and annotation right.
          const kept = await ok(mallory, "GET", cmPath(h100Baseline));
          await ok(mallory, "DELETE", cmPath(h100Baseline));
          const forged = parseSnapshot(kept.data["snapshot.yaml"]);
          setReading(forged, "GPU.smi.driver", "999.99.99");
          await ok(mallory, "POST", cmPath(), {
            metadata: {
              name: h100Baseline,
              labels: kept.metadata.labels,
              annotations: kept.metadata.annotations,
            },
            data: {
              "snapshot.yaml": encodeSnapshot(forged),
              format: "yaml",
              source: "node x",
              timestamp: kept.data.timestamp,
            },
          });
          const run = await install();
          assert.match(
            run.stderr,
            /WARN baseline untrusted: the daemons do not use it for drift .*trust=unsigned/,
          );
          assert.match(
            run.stderr,
            /trust=other-ca/,
            "the old install's baselines are not granted either",
          );
          assert.deepEqual(await grantedNames(), ["aicr-daemon-baseline-none"]);
          // The daemon cannot even read it, and says its cohort has no usable baseline.
          await waitState(h100, "missing");
          const list = await ds("baseline", "list");
          assert.match(list.stdout, /\sunsigned$/m);
          refused++;
        },
      );

      await t.step(
        "the remedy: the operator sets it again, signed by the new CA, used",
        async () => {
          const got = await ds("baseline", "get", "--cohort", h100Baseline.slice(-16));
          assert.equal(got.code, 0, got.stderr);
          assert.match(got.stderr, /WARN baseline untrusted: .*trust=unsigned/);
          const set = await ds("baseline", "set", "--from-node", h100);
          assert.equal(set.code, 0, set.stderr);
          await waitState(h100, "ok");
        },
      );
    } finally {
      record("identity: forged baselines", {
        identityAttacks: attacks,
        identityAttacksRefused: refused,
      });
      await ds("uninstall").catch(() => {});
      await admin.request(
        "DELETE",
        `/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/${ns}-metrics`,
      );
      await admin.request(
        "DELETE",
        `/apis/rbac.authorization.k8s.io/v1/clusterroles/${ns}-metrics`,
      );
    }
  },
});
