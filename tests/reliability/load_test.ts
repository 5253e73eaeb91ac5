/**
 * Load: twenty concurrent `aicr snapshot` runs against one namespace, half of them through
 * the fault proxy (503 and lost responses on creates, 429 on reads, 503 on deletes). Each
 * succeeds or fails cleanly, and a label sweep afterwards finds nothing (namespaced, cluster-scoped,
 * staging ConfigMaps). Then a DaemonSet fleet fetch, again and again, while a GPU node
 * leaves the fleet (its `nvidia.com/gpu.present` label goes, so its daemon is removed) and
 * comes back: every fetch is whole or fails per node, cleanly; uninstall leaves nothing.
 */
import assert from "node:assert/strict";
import {
  isClusterTopologyDocument,
  parseSnapshot,
  parseSnapshotStream,
} from "../../snapshot/mod.ts";
import type { Api, Obj } from "../kubelet/api.ts";
import { aicr } from "../e2e/_aicr.ts";
import { startFaultProxy } from "../faults/proxy.ts";
import { record } from "./_report.ts";
import { ENABLED, snapshotArgs, suiteEnv, until } from "./_env.ts";

/** The nodes of a fetched stream (its last document, the cluster's topology, left out). */
function nodesOf(stdout: string): string[] {
  return parseSnapshotStream(stdout).filter((d) => !isClusterTopologyDocument(d))
    .map((d) => d.metadata["source-node"]);
}

const RUNS = 20;

Deno.test({
  name: "reliability: twenty concurrent runs in one namespace leave nothing",
  ignore: !ENABLED,
  // The cluster's processes outlive the test (close() ends what it started).
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    const suite = await suiteEnv();
    try {
      const ns = await suite.namespace("rel-load");
      // Half the runs go through the fault proxy, which spreads survivable faults over them.
      const proxy = await startFaultProxy(suite.env.cluster);
      const unavailable = { kind: "status" as const, code: 503 };
      const slowDown = { kind: "status" as const, code: 429, headers: { "Retry-After": "1" } };
      proxy.add({ method: "POST", path: /\/jobs(\?|$)/, action: unavailable, times: 3 });
      proxy.add({
        method: "POST",
        path: /\/serviceaccounts(\?|$)/,
        action: { kind: "loseResponse" },
        times: 3,
      });
      proxy.add({ method: "GET", path: /\/pods\?/, action: slowDown, times: 5 });
      proxy.add({ method: "DELETE", path: /\/roles\/aicr-/, action: unavailable, times: 3 });
      const kubeconfig = suite.env.cluster.adminKubeconfig;
      const runs = await Promise.all(
        Array.from(
          { length: RUNS },
          (_, i) =>
            aicr(snapshotArgs(i % 2 ? proxy.kubeconfig : kubeconfig, ns, "--timeout", "240s")),
        ),
      );
      await proxy.stop();
      const clean = (r: (typeof runs)[number]) =>
        r.code === 0
          ? parseSnapshot(r.stdout).kind === "Snapshot"
          : /^error: Cannot /m.test(r.stderr);
      const perRun = await Promise.all(runs.map((r) => suite.leftovers(ns, r.runId)));
      const sweep = await suite.aicrObjects(ns);
      const leftovers = perRun.reduce((n, l) => n + l.length, 0) + sweep.length;
      const ok = runs.every((r) => r.code === 0) && leftovers === 0;
      record("load: twenty concurrent runs", {
        concurrentRuns: runs.filter((r) => r.code === 0).length,
        faultsInjected: proxy.total,
        faultsSurvived: ok ? proxy.total : 0,
        leftovers,
      });
      assert.equal(proxy.total, 14, "every spread fault fired");
      for (const r of runs) assert.ok(clean(r), `run ${r.runId} exit ${r.code}:\n${r.stderr}`);
      assert.equal(new Set(runs.map((r) => r.runId)).size, RUNS, "distinct run IDs");
      assert.deepEqual(
        runs.filter((r) => r.code !== 0).map((r) => r.stderr),
        [],
        "all twenty succeed on the local cluster",
      );
      assert.deepEqual(perRun.flat(), [], "no run left an object (cluster-scoped included)");
      assert.deepEqual(sweep, [], "a label sweep of the namespace finds nothing");
    } finally {
      await suite.close();
    }
  },
});

const SELECTOR = encodeURIComponent("app.kubernetes.io/name=aicr");
const GPU_LABEL = "nvidia.com/gpu.present";

/** Every object labelled aicr in the namespace, and every cluster-scoped one naming it. */
async function daemonLeftovers(admin: Api, ns: string): Promise<string[]> {
  const found: string[] = [];
  for (
    const [kind, path] of [
      ["DaemonSet", `/apis/apps/v1/namespaces/${ns}/daemonsets`],
      ["Deployment", `/apis/apps/v1/namespaces/${ns}/deployments`],
      ["Lease", `/apis/coordination.k8s.io/v1/namespaces/${ns}/leases`],
      ["Pod", `/api/v1/namespaces/${ns}/pods`],
      ["ServiceAccount", `/api/v1/namespaces/${ns}/serviceaccounts`],
      ["Secret", `/api/v1/namespaces/${ns}/secrets`],
      ["ConfigMap", `/api/v1/namespaces/${ns}/configmaps`],
      ["Role", `/apis/rbac.authorization.k8s.io/v1/namespaces/${ns}/roles`],
      ["RoleBinding", `/apis/rbac.authorization.k8s.io/v1/namespaces/${ns}/rolebindings`],
      ["ClusterRole", "/apis/rbac.authorization.k8s.io/v1/clusterroles"],
      ["ClusterRoleBinding", "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings"],
    ] as const
  ) {
    const res = await admin.request("GET", `${path}?labelSelector=${SELECTOR}`);
    for (const item of (res.body.items ?? []) as Obj[]) {
      const name = item.metadata.name as string;
      if (kind.startsWith("Cluster") && !name.includes(`-${ns}.`)) continue;
      found.push(`${kind}/${name}`);
    }
  }
  return found;
}

Deno.test({
  name: "reliability: a DaemonSet fleet fetch while a GPU node goes and comes back",
  ignore: !ENABLED,
  // The cluster's processes outlive the test (close() ends what it started).
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    const suite = await suiteEnv();
    const { admin } = suite.env;
    const kubeconfig = suite.env.cluster.adminKubeconfig;
    const gpuNodes = suite.env.nodes.filter((n) => n.gpu).map((n) => n.name).sort();
    const leaving = gpuNodes.at(-1)!;
    const ns = await suite.namespace("rel-fleet");
    const ds = (...args: string[]) =>
      aicr(["daemonset", ...args, "--kubeconfig", kubeconfig, "-n", ns]);
    const label = (value: string | null) =>
      admin.request("PATCH", `/api/v1/nodes/${leaving}`, {
        metadata: { labels: { [GPU_LABEL]: value } },
      });
    const podOn = async (node: string) => {
      const list = await admin.request(
        "GET",
        `/api/v1/namespaces/${ns}/pods?labelSelector=${
          encodeURIComponent("app.kubernetes.io/name=aicr,app.kubernetes.io/component=daemon")
        }`,
      );
      return ((list.body.items ?? []) as Obj[]).find((p) =>
        p.spec.nodeName === node && !p.metadata.deletionTimestamp
      );
    };
    // The fetch loop: stopped in `finally` too, so a failed step leaves no fetch running.
    let churning = false;
    let loop: Promise<void> = Promise.resolve();
    try {
      const install = await ds("install", "--image", "aicr:dev", "--timeout", "90s");
      assert.equal(install.code, 0, install.stderr);
      // Fetch again and again while the node leaves the fleet (its GPU label goes, so the
      // DaemonSet removes its daemon) and comes back.
      churning = true;
      const fetches: { code: number; stderr: string; stdout: string }[] = [];
      loop = (async () => {
        while (churning) fetches.push(await ds("fetch", "-o", "-", "--timeout", "10s"));
      })();
      assert.equal((await label(null)).status, 200);
      await until(
        "the leaving node's daemon to go",
        async () => (await podOn(leaving)) ? undefined : true,
        60_000,
      );
      // Two fetches that started after it went, then it comes back.
      const gone = fetches.length;
      await until(
        "fetches while the node is gone",
        () => Promise.resolve(fetches.length >= gone + 2 ? true : undefined),
        60_000,
      );
      const whileGone = fetches.slice(gone + 1, gone + 2);
      assert.equal((await label("true")).status, 200);
      await until("the node's daemon to come back", async () => {
        const pod = await podOn(leaving);
        return pod?.status?.conditions?.some((c: Obj) => c.type === "Ready" && c.status === "True")
          ? true
          : undefined;
      }, 90_000);
      const back = fetches.length;
      await until(
        "fetches after it came back",
        () => Promise.resolve(fetches.length >= back + 2 ? true : undefined),
        60_000,
      );
      churning = false;
      await loop;
      const final = await until("a fetch that finds the whole fleet again", async () => {
        const run = await ds("fetch", "-o", "-", "--timeout", "10s");
        return run.code === 0 ? run : undefined;
      }, 60_000);
      // One more fetch through the fault proxy: 503 on its reads, 429 on its token request.
      const proxy = await startFaultProxy(suite.env.cluster);
      proxy.add({ method: "GET", path: /./, action: { kind: "status", code: 503 }, times: 3 });
      proxy.add({
        method: "POST",
        path: /\/token(\?|$)/,
        action: { kind: "status", code: 429, headers: { "Retry-After": "1" } },
        times: 1,
      });
      const faulty = await aicr([
        "daemonset",
        "fetch",
        "-o",
        "-",
        "--kubeconfig",
        proxy.kubeconfig,
        "-n",
        ns,
      ]);
      await proxy.stop();
      const uninstall = await ds("uninstall");
      const left = await daemonLeftovers(admin, ns);
      // Clean: whole fleet, or a per-node status table and an error naming what failed.
      const clean = (r: { code: number; stderr: string }) =>
        r.code === 0 || (/NODE\s+STATUS/.test(r.stderr) && /^error: Cannot /m.test(r.stderr));
      const survived = fetches.every(clean) && faulty.code === 0 && uninstall.code === 0 &&
        left.length === 0;
      record("load: fleet fetch while a node goes and comes back", {
        faultsInjected: 2 + proxy.total,
        faultsSurvived: survived ? 2 + proxy.total : 0,
        leftovers: left.length,
      });
      assert.equal(proxy.total, 4, "every fault fired");
      assert.equal(faulty.code, 0, faulty.stderr);
      assert.deepEqual(
        nodesOf(faulty.stdout).sort(),
        gpuNodes,
      );
      assert.deepEqual(
        whileGone.map((r) => nodesOf(r.stdout)),
        [gpuNodes.filter((n) => n !== leaving)],
        "a fetch while the node was gone serves the rest of the fleet",
      );
      for (const r of fetches) assert.ok(clean(r), `exit ${r.code}:\n${r.stderr}`);
      assert.deepEqual(
        nodesOf(final.stdout).sort(),
        gpuNodes,
      );
      assert.equal(uninstall.code, 0, uninstall.stderr);
      assert.deepEqual(left, []);
    } finally {
      churning = false;
      await loop.catch(() => {});
      await label("true");
      await ds("uninstall");
      await suite.close();
    }
  },
});
