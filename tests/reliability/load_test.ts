/**
 * Load: twenty concurrent `aicr snapshot` runs against one namespace, half of them through
 * the fault proxy (503 and lost responses on creates, 429 on reads, 503 on deletes). Each
 * succeeds or fails cleanly, and a label sweep afterwards finds nothing (namespaced, cluster-scoped,
 * staging ConfigMaps). The other half of the load case, a DaemonSet fleet
 * fetch while nodes come and go, waits for the fleet fetch (not built yet).
 */
import assert from "node:assert/strict";
import { parseSnapshot } from "../../snapshot/mod.ts";
import { aicr } from "../e2e/_aicr.ts";
import { startFaultProxy } from "../faults/proxy.ts";
import { record } from "./_report.ts";
import { ENABLED, snapshotArgs, suiteEnv } from "./_env.ts";

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

Deno.test({
  name: "reliability: a DaemonSet fleet fetch while nodes come and go",
  // The DaemonSet fleet fetch is not built yet; this half of the load case waits for it.
  ignore: true,
  fn() {},
});
