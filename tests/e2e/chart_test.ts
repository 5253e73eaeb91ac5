/**
 * The Helm chart and the rendered manifests on the local cluster, driven by a real helm and a real
 * kubectl (built from Go modules, `tests/cluster/tools.ts`) and the built binary:
 * - `helm install` with the in-cluster signer: every daemon's certificate request is approved and
 *   signed with no aicr command run (the signer's Deployment, from the same image); `aicr daemonset
 *   fetch` then reads every GPU node through the chart's own CA (made by Helm's genCAWithKey);
 * - `helm upgrade` keeps the CA and the baselines `aicr daemonset baseline set` granted;
 * - `helm uninstall` leaves exactly what the chart's README says: the CA Secret and the baselines;
 * - `aicr daemonset render | kubectl apply -f -`, the GitOps path: the same objects, and a fetch
 *   works against them.
 *
 * @module
 */
import assert from "node:assert/strict";
import { mkdtemp, readdir, rm } from "node:fs/promises";
import { join } from "node:path";
import { CHART_DIR } from "../../scripts/chart.ts";
import { buildTools } from "../cluster/tools.ts";
import { createNamespace, type TestCluster, useTestCluster, waitFor } from "../cluster/harness.ts";
import type { Api, Obj } from "../kubelet/api.ts";
import { aicr } from "./_aicr.ts";

const SIGNER = "aicr.run/daemon-serving";

async function run(cmd: string, args: string[], env: Record<string, string> = {}) {
  const out = await new Deno.Command(cmd, { args, env, stdout: "piped", stderr: "piped" })
    .output();
  const text = (b: Uint8Array) => new TextDecoder().decode(b);
  return { code: out.code, stdout: text(out.stdout), stderr: text(out.stderr) };
}

/** The daemons' requests of a namespace's install: signer, requester, and whether issued. */
async function daemonCsrs(admin: Api, ns: string) {
  const res = await admin.request("GET", "/apis/certificates.k8s.io/v1/certificatesigningrequests");
  assert.equal(res.status, 200);
  return (res.body.items as Obj[]).filter((c) =>
    c.spec.signerName === SIGNER && c.spec.username === `system:serviceaccount:${ns}:aicr-daemon`
  ).map((c) => ({
    name: c.metadata.name as string,
    pod: ((c.spec.extra ?? {})["authentication.kubernetes.io/pod-name"] ?? [])[0] as string,
    issued: Boolean(c.status?.certificate),
  }));
}

/** Every object labelled aicr in the namespace, and every cluster-scoped one naming it. */
async function leftovers(admin: Api, ns: string): Promise<string[]> {
  const selector = `?labelSelector=${encodeURIComponent("app.kubernetes.io/name=aicr")}`;
  const kinds: [string, string, boolean][] = [
    ["DaemonSet", `/apis/apps/v1/namespaces/${ns}/daemonsets`, true],
    ["Deployment", `/apis/apps/v1/namespaces/${ns}/deployments`, true],
    ["Pod", `/api/v1/namespaces/${ns}/pods`, true],
    ["Lease", `/apis/coordination.k8s.io/v1/namespaces/${ns}/leases`, true],
    ["ServiceAccount", `/api/v1/namespaces/${ns}/serviceaccounts`, true],
    ["Secret", `/api/v1/namespaces/${ns}/secrets`, true],
    ["ConfigMap", `/api/v1/namespaces/${ns}/configmaps`, true],
    ["Service", `/api/v1/namespaces/${ns}/services`, true],
    ["Role", `/apis/rbac.authorization.k8s.io/v1/namespaces/${ns}/roles`, true],
    ["RoleBinding", `/apis/rbac.authorization.k8s.io/v1/namespaces/${ns}/rolebindings`, true],
    ["ClusterRole", "/apis/rbac.authorization.k8s.io/v1/clusterroles", false],
    ["ClusterRoleBinding", "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", false],
  ];
  const found: string[] = [];
  for (const [kind, path, namespaced] of kinds) {
    const res = await admin.request("GET", path + selector);
    assert.equal(res.status, 200, `${kind}: ${JSON.stringify(res.body)}`);
    for (const item of (res.body.items ?? []) as Obj[]) {
      const name = item.metadata.name as string;
      if (!namespaced && !name.includes(`-${ns}.`)) continue;
      found.push(`${kind}/${name}`);
    }
  }
  return found.sort();
}

Deno.test({
  name:
    "chart: helm install signs in-cluster, fetch reads it, uninstall keeps only the CA and baselines",
  sanitizeOps: false,
  sanitizeResources: false,
  async fn(t) {
    const { helm, kubectl } = await buildTools();
    const env: TestCluster = await useTestCluster();
    const { admin } = env;
    const kubeconfig = env.cluster.adminKubeconfig;
    const home = await mkdtemp(join(env.cluster.stateDir, "helm-"));
    const helmEnv = {
      HELM_CACHE_HOME: join(home, "cache"),
      HELM_CONFIG_HOME: join(home, "config"),
      HELM_DATA_HOME: join(home, "data"),
      HOME: home,
      PATH: "/usr/bin:/bin",
    };
    const h = (...args: string[]) => run(helm, [...args, "--kubeconfig", kubeconfig], helmEnv);
    const gpuNodes = env.nodes.filter((n) => n.gpu).map((n) => n.name).sort();
    const ns = await createNamespace(admin, "chart-e2e");
    const gitops = await createNamespace(admin, "gitops-e2e");
    const ds = (namespace: string, ...args: string[]) =>
      aicr(["daemonset", ...args, "--kubeconfig", kubeconfig, "-n", namespace]);
    const caSecret = async () =>
      (await admin.request("GET", `/api/v1/namespaces/${ns}/secrets/aicr-daemon-signer`)).body
        ?.data?.["tls.crt"];
    try {
      await t.step(
        "helm install: the signer signs every daemon's request, no aicr run",
        async () => {
          const install = await h(
            "install",
            "aicr",
            CHART_DIR,
            "-n",
            ns,
            "--set",
            "signer.enabled=true",
          );
          assert.equal(install.code, 0, install.stderr);
          // No aicr command has run yet: whatever signs now is the chart's signer.
          await waitFor("every GPU node's daemon signed in-cluster", async () => {
            const pods = (await admin.request(
              "GET",
              `/api/v1/namespaces/${ns}/pods?labelSelector=${
                encodeURIComponent("app.kubernetes.io/component=daemon")
              }`,
            )).body.items as Obj[];
            const list = await daemonCsrs(admin, ns);
            const signed = pods.filter((p) =>
              list.some((c) => c.pod === p.metadata.name && c.issued)
            );
            return pods.length === gpuNodes.length && signed.length === pods.length
              ? list
              : undefined;
          }, 120_000);
          // One of the signer's pods holds the Lease.
          const lease = await admin.request(
            "GET",
            `/apis/coordination.k8s.io/v1/namespaces/${ns}/leases/aicr-daemon-signer`,
          );
          assert.equal(lease.status, 200, JSON.stringify(lease.body));
          assert.match(String(lease.body.spec?.holderIdentity ?? ""), /aicr-daemon-signer-/);
        },
      );

      await t.step("aicr daemonset fetch reads every GPU node through the chart's CA", async () => {
        const dir = join(home, "fleet") + "/";
        const fetch = await waitFor("fetch ok", async () => {
          const r = await ds(ns, "fetch", "-o", dir);
          return r.code === 0 ? r : undefined;
        }, 60_000);
        for (const node of gpuNodes) assert.match(fetch.stderr, new RegExp(`${node}\\s+ok`));
        assert.deepEqual(
          (await readdir(dir)).filter((f) => !f.startsWith("_")).sort(),
          gpuNodes.map((n) => `${n}.yaml`),
        );
      });

      await t.step("helm upgrade keeps the CA and the baselines baseline set granted", async () => {
        const before = await caSecret();
        const set = await ds(ns, "baseline", "set", "--from-node", gpuNodes[0]!);
        assert.equal(set.code, 0, set.stderr);
        // Helm owns the daemon's Role (server-side apply): the grant is a Role of its own.
        const granted = async () =>
          (((await admin.request(
            "GET",
            `/apis/rbac.authorization.k8s.io/v1/namespaces/${ns}/roles/aicr-daemon-baselines`,
          )).body.rules ?? []) as { resourceNames?: string[] }[]).flatMap((r) =>
            r.resourceNames ?? []
          );
        const names = await granted();
        assert.equal(names.length, 1, `${names.join(",")}\n${set.stderr}`);
        const upgrade = await h(
          "upgrade",
          "aicr",
          CHART_DIR,
          "-n",
          ns,
          "--set",
          "signer.enabled=true",
        );
        assert.equal(upgrade.code, 0, upgrade.stderr);
        assert.equal(await caSecret(), before, "the CA is the same");
        assert.deepEqual(await granted(), names, "the baseline grant stays");
        // The upgrade read the baselines (lookup): the chart's Role lists it, as install's does.
        const chartRole = (await admin.request(
          "GET",
          `/apis/rbac.authorization.k8s.io/v1/namespaces/${ns}/roles/aicr-daemon`,
        )).body.rules as { resourceNames?: string[] }[];
        assert.ok(chartRole.some((r) => r.resourceNames?.includes(names[0]!)));
      });

      await t.step(
        "helm uninstall leaves the CA Secret and the baselines with their grant, nothing else",
        async () => {
          const uninstall = await h("uninstall", "aicr", "-n", ns, "--wait");
          assert.equal(uninstall.code, 0, uninstall.stderr);
          const kept = (o: string) =>
            o === "Secret/aicr-daemon-signer" || o === "Role/aicr-daemon-baselines" ||
            o === "RoleBinding/aicr-daemon-baselines" ||
            /^ConfigMap\/aicr-daemon-baseline-[0-9a-f]{16}$/.test(o);
          const left = await waitFor("only the kept objects", async () => {
            const l = await leftovers(admin, ns);
            return l.every(kept) ? l : undefined;
          }, 60_000);
          assert.equal(left.length, 4, left.join(","));
          // baseline delete --all takes the baselines and their grant.
          const del = await ds(ns, "baseline", "delete", "--all");
          assert.equal(del.code, 0, del.stderr);
          assert.deepEqual(await leftovers(admin, ns), ["Secret/aicr-daemon-signer"]);
        },
      );

      await t.step("render | kubectl apply -f -: the GitOps path serves a fetch", async () => {
        const file = join(home, "aicr.yaml");
        const render = await ds(gitops, "render", "-o", file);
        assert.equal(render.code, 0, render.stderr);
        const apply = await run(kubectl, ["apply", "-f", file, "--kubeconfig", kubeconfig]);
        assert.equal(apply.code, 0, apply.stderr);
        const dir = join(home, "gitops") + "/";
        // With no signer rendered, the fetch signs the requests first (daemon/README.md).
        const fetch = await waitFor("fetch ok", async () => {
          const r = await ds(gitops, "fetch", "-o", dir);
          return r.code === 0 ? r : undefined;
        }, 90_000);
        for (const node of gpuNodes) assert.match(fetch.stderr, new RegExp(`${node}\\s+ok`));
        // Applying the same file again changes nothing (the same objects, no drift).
        const again = await run(kubectl, ["apply", "-f", file, "--kubeconfig", kubeconfig]);
        assert.equal(again.code, 0, again.stderr);
        assert.doesNotMatch(again.stdout, /configured|created/, again.stdout);
      });
    } finally {
      await ds(gitops, "uninstall");
      await h("uninstall", "aicr", "-n", ns);
      for (const name of [ns, gitops]) {
        await admin.request("DELETE", `/api/v1/namespaces/${name}`);
      }
      await rm(home, { recursive: true, force: true });
      await env.stop();
    }
  },
});
