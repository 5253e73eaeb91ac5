/**
 * Faults between the CLI and the apiserver, injected by our proxy (loopback only): lost
 * create responses for every kind a run creates, 429 with Retry-After and 503 at every
 * step, answers cut mid-body, slow answers, an apiserver "restart" (connections refused) during the wait and
 * during cleanup (real restarts: `restart_test.ts`), watches and log streams cut mid-stream. Each run must end clean (or
 * with the documented WARN), send every create to the apiserver once, and leave nothing.
 */
import assert from "node:assert/strict";
import { parseSnapshot } from "../../snapshot/mod.ts";
import { type FaultProxy, startFaultProxy } from "../faults/proxy.ts";
import { aicr } from "../e2e/_aicr.ts";
import { record } from "./_report.ts";
import { ENABLED, getObject, snapshotArgs, suiteEnv } from "./_env.ts";
import type { SuiteEnv } from "./_env.ts";

const RBAC = "/apis/rbac.authorization.k8s.io/v1";
const UNPROVEN =
  "WARN cleanup left behind an object it cannot prove this run created; if it is a stale orphan of this run, remove it by hand";

/** The collection paths of the kinds a run creates, as the proxy sees them. */
function createPaths(namespace: string): Record<string, RegExp> {
  return {
    ServiceAccount: new RegExp(`^/api/v1/namespaces/${namespace}/serviceaccounts(\\?|$)`),
    Role: new RegExp(`^${RBAC}/namespaces/${namespace}/roles(\\?|$)`),
    RoleBinding: new RegExp(`^${RBAC}/namespaces/${namespace}/rolebindings(\\?|$)`),
    ClusterRole: new RegExp(`^${RBAC}/clusterroles(\\?|$)`),
    ClusterRoleBinding: new RegExp(`^${RBAC}/clusterrolebindings(\\?|$)`),
    Job: new RegExp(`^/apis/batch/v1/namespaces/${namespace}/jobs(\\?|$)`),
  };
}

/** How many creates of each kind reached the apiserver (an injected status never does). */
function upstreamCreates(proxy: FaultProxy, paths: Record<string, RegExp>): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [kind, path] of Object.entries(paths)) {
    out[kind] = proxy.requests.filter((r) =>
      r.method === "POST" && path.test(r.path) && r.fault !== "status"
    ).length;
  }
  return out;
}

const ONCE_EACH = {
  ServiceAccount: 1,
  Role: 1,
  RoleBinding: 1,
  ClusterRole: 1,
  ClusterRoleBinding: 1,
  Job: 1,
};

Deno.test({
  name: "reliability: faults between the CLI and the apiserver",
  ignore: !ENABLED,
  // One cluster serves every step (its processes outlive the steps; close() ends them).
  sanitizeOps: false,
  sanitizeResources: false,
  async fn(t) {
    const suite: SuiteEnv = await suiteEnv();
    const { env } = suite;
    const proxies: FaultProxy[] = [];
    const proxy = async () => {
      const p = await startFaultProxy(env.cluster);
      proxies.push(p);
      return p;
    };
    try {
      await t.step(
        "a lost create response, for each kind a run creates: adopted, clean",
        async () => {
          const ns = await suite.namespace("rel-lost");
          const p = await proxy();
          const paths = createPaths(ns);
          for (const [kind, path] of Object.entries(paths)) {
            p.add({ method: "POST", path, action: { kind: "loseResponse" }, times: 1, name: kind });
          }
          const run = await aicr(snapshotArgs(p.kubeconfig, ns, "--timeout", "90s"));
          const left = await suite.leftovers(ns, run.runId);
          record("faults: lost create per kind", {
            faultsInjected: p.total,
            faultsSurvived: run.code === 0 && left.length === 0 ? p.total : 0,
            leftovers: left.length,
          });
          assert.equal(run.code, 0, run.stderr);
          assert.deepEqual(p.injected, ONCE_EACH, "every kind lost its create response once");
          assert.equal(parseSnapshot(run.stdout).kind, "Snapshot");
          assert.deepEqual(upstreamCreates(p, paths), ONCE_EACH, "no create was sent twice");
          assert.doesNotMatch(run.stderr, /WARN/);
          assert.deepEqual(left, []);
        },
      );

      await t.step(
        "a lost create whose name another invocation took meanwhile: kept, documented WARN",
        async () => {
          const ns = await suite.namespace("rel-lost-taken");
          const p = await proxy();
          let replacement:
            | { name: string; uid: string; labels: Record<string, string> }
            | undefined;
          p.add({
            method: "POST",
            path: createPaths(ns).Role!,
            action: { kind: "loseResponse" },
            times: 1,
            // The create landed; before the CLI re-reads, someone else takes the name.
            onMatch: async () => {
              const roles = await env.admin.request(
                "GET",
                `${RBAC}/namespaces/${ns}/roles?labelSelector=app.kubernetes.io%2Fname%3Daicr`,
              );
              const ours = roles.body.items[0];
              const name = ours.metadata.name as string;
              await env.admin.request("DELETE", `${RBAC}/namespaces/${ns}/roles/${name}`);
              const labels = {
                ...ours.metadata.labels,
                "aicr.run/invocation-id": "ffffffffffffffff",
              };
              const made = await env.admin.request("POST", `${RBAC}/namespaces/${ns}/roles`, {
                metadata: { name, labels },
                rules: [],
              });
              assert.equal(made.status, 201, JSON.stringify(made.body));
              replacement = { name, uid: made.body.metadata.uid, labels };
            },
          });
          const run = await aicr(snapshotArgs(p.kubeconfig, ns, "--timeout", "30s"));
          assert.ok(replacement, run.stderr);
          const still = await getObject(env, `${RBAC}/namespaces/${ns}/roles/${replacement.name}`);
          const left = (await suite.leftovers(ns, run.runId)).filter((o) =>
            o !== `Role/${replacement!.name}`
          );
          const warned = run.stderr.includes(
            `${UNPROVEN} kind=Role name=${replacement.name} runID=${run.runId} objectRunID=${run.runId} objectInvocationID=ffffffffffffffff`,
          );
          record("faults: lost create, name taken", {
            faultsInjected: p.total,
            faultsSurvived: run.code !== 0 && warned && still?.metadata.uid === replacement.uid &&
                left.length === 0
              ? p.total
              : 0,
            leftovers: left.length,
          });
          // The run cannot go on without its Role: it fails, and says why.
          assert.equal(run.code, 6, run.stderr);
          assert.match(
            run.stderr,
            /error: Cannot reach Kubernetes API server .* for POST .*\/roles/,
          );
          assert.ok(warned, run.stderr);
          assert.equal(still?.metadata.uid, replacement.uid, "the other invocation's Role stays");
          assert.deepEqual(left, []);
          await env.admin.request("DELETE", `${RBAC}/namespaces/${ns}/roles/${replacement.name}`);
        },
      );

      await t.step(
        "429 with Retry-After and 503 at every step: retried where safe, each create sent once",
        async () => {
          const ns = await suite.namespace("rel-5xx");
          const p = await proxy();
          const paths = createPaths(ns);
          const tooMany = (n: number) => ({
            kind: "status" as const,
            code: 429,
            headers: { "Retry-After": "1" },
            times: n,
          });
          const unavailable = { kind: "status" as const, code: 503 };
          const rules: [string, RegExp, ReturnType<typeof tooMany> | typeof unavailable, number][] =
            [
              ["POST", /selfsubjectaccessreviews/, tooMany(2), 2],
              ["GET", new RegExp(`^/api/v1/namespaces/${ns}(\\?|$)`), unavailable, 1],
              ["POST", paths.ServiceAccount!, tooMany(1), 1],
              ["POST", paths.Role!, unavailable, 1],
              ["POST", paths.ClusterRoleBinding!, tooMany(1), 1],
              ["POST", paths.Job!, unavailable, 1],
              ["GET", /\/jobs\/aicr-[^/?]+(\?|$)/, unavailable, 2],
              ["GET", /\/pods\?/, tooMany(1), 1],
              ["GET", /\/configmaps\/aicr-agent-snapshot-/, tooMany(1), 1],
              ["DELETE", /\/jobs\/aicr-/, unavailable, 1],
              ["DELETE", /\/clusterroles\/aicr-/, tooMany(1), 1],
              ["DELETE", /\/serviceaccounts\/aicr-/, unavailable, 1],
            ];
          for (const [method, path, action, times] of rules) {
            p.add({ method, path, action, times, name: "status" });
          }
          const run = await aicr(snapshotArgs(p.kubeconfig, ns, "--timeout", "90s"));
          const left = await suite.leftovers(ns, run.runId);
          record("faults: 429 and 503", {
            faultsInjected: p.total,
            faultsSurvived: run.code === 0 && left.length === 0 ? p.total : 0,
            leftovers: left.length,
          });
          assert.equal(run.code, 0, run.stderr);
          assert.equal(p.total, rules.reduce((n, r) => n + r[3], 0), "every fault fired");
          assert.deepEqual(upstreamCreates(p, paths), ONCE_EACH, "no create was sent twice");
          assert.deepEqual(left, []);
        },
      );

      await t.step("answers cut mid-body: reads retried, a cut create adopted, clean", async () => {
        const ns = await suite.namespace("rel-truncated");
        const p = await proxy();
        const paths = createPaths(ns);
        for (
          const [method, path] of [
            ["GET", new RegExp(`^/api/v1/namespaces/${ns}(\\?|$)`)],
            ["POST", paths.Job!],
            ["GET", /\/jobs\/aicr-[^/?]+(\?|$)/],
            ["GET", /\/configmaps\/aicr-agent-snapshot-/],
          ] as const
        ) p.add({ method, path, action: { kind: "truncate" }, times: 1 });
        const run = await aicr(snapshotArgs(p.kubeconfig, ns, "--timeout", "90s"));
        const left = await suite.leftovers(ns, run.runId);
        record("faults: answers cut mid-body", {
          faultsInjected: p.total,
          faultsSurvived: run.code === 0 && left.length === 0 ? p.total : 0,
          leftovers: left.length,
        });
        assert.equal(run.code, 0, run.stderr);
        assert.equal(p.total, 4);
        assert.equal(parseSnapshot(run.stdout).kind, "Snapshot");
        assert.deepEqual(upstreamCreates(p, paths), ONCE_EACH, "no create was sent twice");
        assert.deepEqual(left, []);
      });

      await t.step(
        "the apiserver is gone at cleanup for longer than cleanup waits (--timeout 10s, 16 s away): the run says so and names the sweep, which finishes",
        async () => {
          const ns = await suite.namespace("rel-down-at-cleanup");
          const p = await proxy();
          let outage: Promise<void> | undefined;
          p.add({
            method: "DELETE",
            path: /\/jobs\/aicr-/,
            // Never forwarded: the outage begins before cleanup's first delete reaches the
            // apiserver (an observed, forwarded DELETE sometimes landed and took the Job).
            action: { kind: "reset" },
            times: 1,
            onMatch: () => {
              // Cleanup waits for an absent API server up to --timeout (at most 30 s): outlast it.
              outage = p.refuse(16_000);
            },
          });
          const run = await aicr(snapshotArgs(p.kubeconfig, ns, "--timeout", "10s"));
          await outage;
          const remedy = `remedy="aicr cleanup --run-id ${run.runId} -n ${ns}"`;
          const before = await suite.leftovers(ns, run.runId);
          const swept = await aicr([
            "cleanup",
            "--kubeconfig",
            env.cluster.adminKubeconfig,
            "-n",
            ns,
            "--run-id",
            run.runId ?? "",
          ]);
          const left = await suite.leftovers(ns, run.runId);
          record("faults: apiserver gone at cleanup", {
            faultsInjected: p.total,
            faultsSurvived: run.code === 0 && run.stderr.includes(remedy) && swept.code === 0 &&
                left.length === 0
              ? p.total
              : 0,
            leftovers: left.length,
          });
          // The snapshot was delivered; the run's cleanup could not finish and says how to.
          assert.equal(run.code, 0, run.stderr);
          assert.equal(parseSnapshot(run.stdout).kind, "Snapshot");
          assert.match(run.stderr, /WARN cleanup could not delete an object this run created/);
          assert.ok(run.stderr.includes(remedy), run.stderr);
          assert.ok(before.length > 0, "the outage left objects for the sweep");
          // Cleanup gave up within --timeout (10 s), well inside the outage: every object the run
          // created is left (its pods go with the Job's UID once the apiserver is back).
          assert.deepEqual(
            before.filter((o) => !o.startsWith("Pod/")).map((o) => o.split("/")[0]).sort(),
            [...Object.keys(ONCE_EACH), "ConfigMap"].sort(),
            `cleanup gave up before the outage ended: ${before}`,
          );
          assert.ok(before.includes(`Job/aicr-${run.runId}`), `the Job is left: ${before}`);
          assert.equal(swept.code, 0, swept.stderr);
          assert.deepEqual(left, []);
        },
      );

      await t.step("lost delete responses during cleanup: resent by UID, clean", async () => {
        const ns = await suite.namespace("rel-lost-delete");
        const p = await proxy();
        for (const path of [/\/jobs\/aicr-/, /\/serviceaccounts\/aicr-/, /\/clusterroles\/aicr-/]) {
          p.add({ method: "DELETE", path, action: { kind: "loseResponse" }, times: 1 });
        }
        const run = await aicr(snapshotArgs(p.kubeconfig, ns, "--timeout", "90s"));
        const left = await suite.leftovers(ns, run.runId);
        record("faults: lost delete responses", {
          faultsInjected: p.total,
          faultsSurvived: run.code === 0 && left.length === 0 ? p.total : 0,
          leftovers: left.length,
        });
        assert.equal(run.code, 0, run.stderr);
        assert.equal(p.total, 3);
        assert.doesNotMatch(run.stderr, /WARN/);
        assert.deepEqual(left, []);
      });

      await t.step(
        "slow answers (1.5 s) at every phase: the run waits them out, clean",
        async () => {
          const ns = await suite.namespace("rel-slow");
          const p = await proxy();
          const paths = createPaths(ns);
          const slow = { kind: "delay" as const, ms: 1500 };
          for (
            const [method, path] of [
              ["POST", /selfsubjectaccessreviews/],
              ["POST", paths.ServiceAccount!],
              ["POST", paths.Job!],
              ["GET", /\/jobs\/aicr-[^/?]+(\?|$)/],
              ["GET", /\/configmaps\/aicr-agent-snapshot-/],
              ["DELETE", /\/jobs\/aicr-/],
              ["DELETE", /\/clusterrolebindings\/aicr-/],
            ] as const
          ) p.add({ method, path, action: slow, times: 1 });
          const run = await aicr(snapshotArgs(p.kubeconfig, ns, "--timeout", "90s"));
          const left = await suite.leftovers(ns, run.runId);
          record("faults: slow answers", {
            faultsInjected: p.total,
            faultsSurvived: run.code === 0 && left.length === 0 ? p.total : 0,
            leftovers: left.length,
          });
          assert.equal(run.code, 0, run.stderr);
          assert.equal(p.total, 7);
          assert.deepEqual(upstreamCreates(p, paths), ONCE_EACH);
          assert.deepEqual(left, []);
        },
      );

      await t.step(
        "the apiserver restarts during the wait and during cleanup, watches and logs drop: clean",
        async () => {
          const ns = await suite.namespace("rel-restart");
          const p = await proxy();
          const paths = createPaths(ns);
          const restarts: Promise<void>[] = [];
          // Every watch and log stream is cut 300 ms in.
          p.add({
            method: "GET",
            path: /[?&](watch|follow)=true/,
            action: { kind: "dropAfter", ms: 300 },
          });
          p.add({
            method: "GET",
            path: /\/jobs\/aicr-[^/?]+(\?|$)/,
            action: { kind: "observe" },
            times: 1,
            onMatch: () => {
              // Pushed at once, so the Promise.all below always awaits it, however fast the run.
              restarts.push(new Promise((r) => setTimeout(r, 200)).then(() => p.refuse(3000)));
            },
          });
          p.add({
            method: "DELETE",
            path: /\/jobs\/aicr-/,
            action: { kind: "observe" },
            times: 1,
            onMatch: () => {
              restarts.push(p.refuse(2000));
            },
          });
          const run = await aicr(snapshotArgs(p.kubeconfig, ns, "--timeout", "90s"));
          await Promise.all(restarts);
          const left = await suite.leftovers(ns, run.runId);
          record("faults: apiserver restart, dropped streams", {
            faultsInjected: p.total,
            faultsSurvived: run.code === 0 && left.length === 0 ? p.total : 0,
            leftovers: left.length,
          });
          assert.equal(run.code, 0, run.stderr);
          assert.equal(p.injected.refuse, 2, "two restarts");
          assert.ok((p.injected.dropAfter ?? 0) >= 1, "at least one stream was cut");
          assert.equal(parseSnapshot(run.stdout).kind, "Snapshot");
          assert.deepEqual(upstreamCreates(p, paths), ONCE_EACH);
          assert.deepEqual(left, []);
        },
      );
    } finally {
      for (const p of proxies) await p.stop();
      await suite.close();
    }
  },
});
