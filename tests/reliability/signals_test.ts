/**
 * Signals at each phase of `aicr snapshot` (gate, RBAC creation, Job creation, wait,
 * delivery): SIGINT and SIGTERM run the cleanup and exit 130 with nothing left. SIGKILL
 * leaves the run's objects; `aicr cleanup --run-id` finds them by the run's labels and
 * deletes them by UID, and never touches an object of another run or one that is not
 * aicr's.
 */
import assert from "node:assert/strict";
import { type FaultProxy, type FaultRule, startFaultProxy } from "../faults/proxy.ts";
import { aicr, AICR_BIN } from "../e2e/_aicr.ts";
import { record } from "./_report.ts";
import { ENABLED, getObject, PENDING, snapshotArgs, spawnAicr, suiteEnv, until } from "./_env.ts";
import { withDeadline } from "../_wait.ts";
import type { SuiteEnv } from "./_env.ts";

const RBAC = "/apis/rbac.authorization.k8s.io/v1";
const STAGING_WARN =
  "WARN cleanup left behind the ConfigMap at this run's staging name: it does not carry the run's labels, so aicr did not create it";

/** Where a phase is held open (3 s) so a signal lands inside it. */
function phaseRule(phase: string, namespace: string): FaultRule | undefined {
  const hold = { kind: "delay" as const, ms: 3000 };
  switch (phase) {
    case "gate":
      return { method: "POST", path: /selfsubjectaccessreviews/, action: hold, times: 64 };
    case "RBAC creation":
      return {
        method: "POST",
        path: new RegExp(`${RBAC}/namespaces/${namespace}/roles(\\?|$)`),
        action: hold,
        times: 1,
      };
    case "Job creation":
      return {
        method: "POST",
        path: new RegExp(`/apis/batch/v1/namespaces/${namespace}/jobs(\\?|$)`),
        action: hold,
        times: 1,
      };
    case "delivery":
      return { method: "GET", path: /\/configmaps\/aicr-agent-snapshot-/, action: hold, times: 1 };
    default:
      return undefined;
  }
}

const PHASES = ["gate", "RBAC creation", "Job creation", "wait", "delivery"];

Deno.test({
  name: "reliability: signals at every phase, and the sweep after SIGKILL",
  ignore: !ENABLED,
  // One cluster serves every step (its processes outlive the steps; close() ends them).
  sanitizeOps: false,
  sanitizeResources: false,
  async fn(t) {
    const suite: SuiteEnv = await suiteEnv();
    const { env } = suite;
    const kubeconfig = env.cluster.adminKubeconfig;
    const proxies: FaultProxy[] = [];
    try {
      await t.step(
        "SIGINT and SIGTERM at each phase: cleanup runs, exit 130, nothing left",
        async () => {
          const cases = PHASES.flatMap((phase) =>
            (["SIGINT", "SIGTERM"] as const).map((signal) => ({ phase, signal }))
          );
          const results = await Promise.all(cases.map(async ({ phase, signal }) => {
            const ns = await suite.namespace(`rel-sig-${phase.split(" ")[0]!.toLowerCase()}`);
            const p = await startFaultProxy(env.cluster);
            proxies.push(p);
            let reached: () => void = () => {};
            const inPhase = new Promise<void>((resolve) => (reached = resolve));
            let signalSent: () => void = () => {};
            const sent = new Promise<void>((resolve) => (signalSent = resolve));
            const rule = phaseRule(phase, ns);
            // The phase's request is held until the signal is sent: the signal lands in that
            // phase, observed, whatever the machine's speed (then the 3 s hold still runs).
            if (rule) p.add({ ...rule, onMatch: () => (reached(), sent) });
            const args = snapshotArgs(
              p.kubeconfig,
              ns,
              "--timeout",
              "60s",
              ...(phase === "wait" ? PENDING : []),
            );
            const run = spawnAicr(args);
            // The wait is observed by its own line (the pod cannot be scheduled: it stays there).
            if (phase === "wait") await run.waitFor(/waiting for the agent/);
            else {
              await withDeadline(
                `the ${phase} phase's request`,
                Promise.race([
                  inPhase,
                  run.done.then((d) => {
                    throw new Error(`aicr ended before the ${phase} phase:\n${d.stderr}`);
                  }),
                ]),
                60_000,
              );
            }
            run.kill(signal);
            signalSent();
            const done = await run.done;
            const left = await suite.leftovers(ns, done.runId);
            return { phase, signal, ns, done, left };
          }));
          let survived = 0;
          for (const r of results) if (r.done.code === 130 && r.left.length === 0) survived++;
          record("signals: SIGINT/SIGTERM per phase", {
            faultsInjected: results.length,
            faultsSurvived: survived,
            leftovers: results.reduce((n, r) => n + r.left.length, 0),
          });
          for (const r of results) {
            const what = `${r.signal} during ${r.phase}`;
            assert.equal(r.done.code, 130, `${what}:\n${r.done.stderr}`);
            assert.match(
              r.done.stderr,
              /error: Cannot (finish the snapshot run|deliver the snapshot): interrupted \(Error: received SIG(INT|TERM)\)/,
              what,
            );
            assert.equal(r.done.stdout, "", `${what}: nothing delivered`);
            assert.deepEqual(r.left, [], what);
          }
        },
      );

      await t.step(
        "the reader of stderr goes away mid-run (EPIPE): cleanup still runs",
        async () => {
          const ns = await suite.namespace("rel-epipe");
          const child = new Deno.Command(AICR_BIN, {
            args: snapshotArgs(kubeconfig, ns, "--timeout", "5s", ...PENDING),
            env: { HOME: "/nonexistent" },
            clearEnv: true,
            stdout: "null",
            stderr: "piped",
          }).spawn();
          // Read until the run waits, then close our end, as `2>&1 | head -3` does.
          const reader = child.stderr.getReader();
          let text = "";
          while (!/waiting for the agent/.test(text)) {
            const { value, done } = await reader.read();
            if (done) break;
            text += new TextDecoder().decode(value);
          }
          await reader.cancel();
          const status = await child.status;
          const runId = /runID=(\S+)/.exec(text)?.[1];
          const left = await suite.leftovers(ns, runId);
          record("signals: stderr closed mid-run", {
            faultsInjected: 1,
            faultsSurvived: status.code === 5 && left.length === 0 ? 1 : 0,
            leftovers: left.length,
          });
          assert.ok(runId, text);
          assert.equal(status.code, 5, "the run times out as it would have, and cleans up");
          assert.deepEqual(left, []);
        },
      );

      await t.step(
        "SIGKILL during the wait leaves the run's objects; aicr cleanup --run-id removes only those",
        async () => {
          const ns = await suite.namespace("rel-kill-wait");
          const run = spawnAicr(snapshotArgs(kubeconfig, ns, "--timeout", "60s", ...PENDING));
          await run.waitFor(/waiting for the agent .*phase=Pending/);
          run.kill("SIGKILL");
          const killed = await run.done;
          const runId = killed.runId!;
          assert.ok(runId, killed.stderr);
          const before = (await suite.leftovers(ns, runId)).map((o) => o.split("/")[0]).sort();
          assert.deepEqual(before, [
            "ClusterRole",
            "ClusterRoleBinding",
            "ConfigMap",
            "Job",
            "Pod",
            "Role",
            "RoleBinding",
            "ServiceAccount",
          ]);
          // The run's staging ConfigMap (aicr created it, with the run's labels) is replaced by
          // someone's own ConfigMap at that name: it must survive the sweep.
          assert.equal(
            (await env.admin.request(
              "DELETE",
              `/api/v1/namespaces/${ns}/configmaps/aicr-agent-snapshot-${runId}`,
            )).status,
            200,
          );
          // Decoys: another run's Role, an object carrying the run ID but not managed by
          // aicr, and a ConfigMap at the staging name that is not aicr's.
          const otherRun = "20260101-000000-0000000000000000";
          const labels = (runIdValue: string) => ({
            "app.kubernetes.io/name": "aicr",
            "app.kubernetes.io/managed-by": "aicr",
            "app.kubernetes.io/component": "snapshot-agent",
            "aicr.run/run-id": runIdValue,
            "aicr.run/invocation-id": "0000000000000000",
          });
          const decoys = [
            [`${RBAC}/namespaces/${ns}/roles`, {
              metadata: { name: "decoy-other-run", labels: labels(otherRun) },
              rules: [],
            }],
            [`/api/v1/namespaces/${ns}/serviceaccounts`, {
              metadata: {
                name: "decoy-not-managed",
                labels: { "aicr.run/run-id": runId, "app.kubernetes.io/name": "aicr" },
              },
            }],
            [`/api/v1/namespaces/${ns}/configmaps`, {
              metadata: { name: `aicr-agent-snapshot-${runId}`, labels: { team: "a" } },
              data: { note: "not aicr's" },
            }],
          ] as const;
          const decoyUids: string[] = [];
          for (const [path, body] of decoys) {
            const res = await env.admin.request("POST", path, body);
            assert.equal(res.status, 201, JSON.stringify(res.body));
            decoyUids.push(res.body.metadata.uid);
          }

          const dry = await aicr([
            "cleanup",
            "--kubeconfig",
            kubeconfig,
            "-n",
            ns,
            "--run-id",
            runId,
            "--dry-run",
          ], { env: { HOME: "/nonexistent" } });
          assert.equal(dry.code, 8, dry.stderr); // the foreign ConfigMap would stay
          assert.equal((dry.stderr.match(/^would delete /gm) ?? []).length, 7, dry.stderr);
          const ofRun = async () =>
            (await suite.leftovers(ns, runId)).filter((o) =>
              o !== "ServiceAccount/decoy-not-managed"
            );
          assert.deepEqual(
            (await ofRun()).map((o) => o.split("/")[0]).sort(),
            before,
            "a dry run deletes nothing (the staging name now holds the foreign ConfigMap)",
          );

          const swept = await aicr([
            "cleanup",
            "--kubeconfig",
            kubeconfig,
            "-n",
            ns,
            "--run-id",
            runId,
          ], { env: { HOME: "/nonexistent" } });
          assert.equal(swept.code, 8, swept.stderr);
          assert.match(
            swept.stderr,
            /Cannot finish the cleanup of run .*: 1 object\(s\) left behind/,
          );
          assert.ok(
            swept.stderr.includes(
              `${STAGING_WARN} name=aicr-agent-snapshot-${runId} objectRunID=""`,
            ),
            swept.stderr,
          );
          // The Pod may already be gone with its Job (garbage collector) when the sweep lists pods.
          const deleted = [...swept.stderr.matchAll(/^deleted kind=(\w+)/gm)].map((m) => m[1]);
          assert.deepEqual(
            deleted.filter((k) => k !== "Pod"),
            ["Job", "RoleBinding", "ClusterRoleBinding", "Role", "ClusterRole", "ServiceAccount"],
            swept.stderr,
          );
          const left = await until("the run's pod to go", async () => {
            const l = await ofRun();
            return l.length === 1 ? l : undefined;
          }).catch(ofRun);
          assert.deepEqual(left, [`ConfigMap/aicr-agent-snapshot-${runId}`]);
          const paths = [
            `${RBAC}/namespaces/${ns}/roles/decoy-other-run`,
            `/api/v1/namespaces/${ns}/serviceaccounts/decoy-not-managed`,
            `/api/v1/namespaces/${ns}/configmaps/aicr-agent-snapshot-${runId}`,
          ];
          for (const [i, path] of paths.entries()) {
            assert.equal(
              (await getObject(env, path))?.metadata.uid,
              decoyUids[i],
              `${path} untouched`,
            );
          }
          // Once the foreign ConfigMap is gone the sweep has nothing left and exits 0.
          for (const path of paths) await env.admin.request("DELETE", path);
          const again = await aicr([
            "cleanup",
            "--kubeconfig",
            kubeconfig,
            "-n",
            ns,
            "--run-id",
            runId,
          ], { env: { HOME: "/nonexistent" } });
          assert.equal(again.code, 0, again.stderr);
          assert.match(again.stderr, /cleanup: nothing of the run was found/);
          record("signals: SIGKILL in the wait, then aicr cleanup", {
            faultsInjected: 1,
            faultsSurvived: 1,
            leftovers: (await suite.leftovers(ns, runId)).length,
          });
        },
      );

      await t.step(
        "--no-cleanup keeps the run; aicr cleanup --run-id removes all of it",
        async () => {
          const ns = await suite.namespace("rel-no-cleanup");
          const kept = await aicr(
            snapshotArgs(kubeconfig, ns, "--timeout", "60s", "--no-cleanup"),
            {
              env: { HOME: "/nonexistent" },
            },
          );
          assert.equal(kept.code, 0, kept.stderr);
          const runId = kept.runId!;
          const before = (await suite.leftovers(ns, runId)).map((o) => o.split("/")[0]);
          for (
            const kind of [
              "Job",
              "ServiceAccount",
              "Role",
              "RoleBinding",
              "ClusterRole",
              "ClusterRoleBinding",
              "ConfigMap",
            ]
          ) assert.ok(before.includes(kind), `${kind} kept: ${before.join(",")}`);
          const swept = await aicr(
            ["cleanup", "--kubeconfig", kubeconfig, "-n", ns, "--run-id", runId],
            { env: { HOME: "/nonexistent" } },
          );
          assert.equal(swept.code, 0, swept.stderr);
          const left = await until("the run's objects to go", async () => {
            const l = await suite.leftovers(ns, runId);
            return l.length === 0 ? l : undefined;
          }).catch(async () => await suite.leftovers(ns, runId));
          record("signals: --no-cleanup, then aicr cleanup", { leftovers: left.length });
          assert.deepEqual(left, []);
        },
      );

      await t.step(
        "SIGKILL during delivery: the sweep removes the Job, then the staging ConfigMap it wrote",
        async () => {
          const ns = await suite.namespace("rel-kill-deliver");
          const p = await startFaultProxy(env.cluster);
          proxies.push(p);
          let reached: () => void = () => {};
          const inPhase = new Promise<void>((resolve) => (reached = resolve));
          p.add({ ...phaseRule("delivery", ns)!, onMatch: () => reached() });
          const run = spawnAicr(snapshotArgs(p.kubeconfig, ns, "--timeout", "60s"));
          await withDeadline("the delivery phase's request", inPhase, 60_000);
          run.kill("SIGKILL");
          const killed = await run.done;
          const runId = killed.runId!;
          const before = await suite.leftovers(ns, runId);
          assert.ok(before.includes(`ConfigMap/aicr-agent-snapshot-${runId}`), before.join(","));
          assert.ok(before.some((o) => o.startsWith("Job/")), before.join(","));
          // The sweep itself meets faults: 503 on reads and deletes, a lost delete response.
          const faults = await startFaultProxy(env.cluster);
          proxies.push(faults);
          const unavailable = { kind: "status" as const, code: 503 };
          faults.add({ method: "GET", path: /\/jobs\?/, action: unavailable, times: 1 });
          faults.add({ method: "DELETE", path: /\/jobs\/aicr-/, action: unavailable, times: 1 });
          faults.add({
            method: "DELETE",
            path: /\/serviceaccounts\/aicr-/,
            action: { kind: "loseResponse" },
            times: 1,
          });
          faults.add({
            method: "DELETE",
            path: /\/configmaps\/aicr-agent-snapshot-/,
            action: { kind: "loseResponse" },
            times: 1,
          });
          const swept = await aicr([
            "cleanup",
            "--kubeconfig",
            faults.kubeconfig,
            "-n",
            ns,
            "--run-id",
            runId,
          ], { env: { HOME: "/nonexistent" } });
          assert.equal(swept.code, 0, swept.stderr);
          assert.equal(faults.total, 4, "every fault fired");
          assert.match(swept.stderr, /^(deleted|gone) kind=ConfigMap name=.*aicr-agent-snapshot-/m);
          const left = await until("the run's objects to go", async () => {
            const l = await suite.leftovers(ns, runId);
            return l.length === 0 ? l : undefined;
          }).catch(async () => await suite.leftovers(ns, runId));
          record("signals: SIGKILL in delivery, then aicr cleanup under faults", {
            faultsInjected: 1 + faults.total,
            faultsSurvived: left.length === 0 && swept.code === 0 ? 1 + faults.total : 0,
            leftovers: left.length,
          });
          assert.deepEqual(left, []);
        },
      );
    } finally {
      for (const p of proxies) await p.stop();
      await suite.close();
    }
  },
});
