/**
 * Someone else's hands in the run: the Job, the ServiceAccount or the staging ConfigMap
 * deleted or replaced mid-run, and a second invocation reusing the run ID. The run must
 * fail clearly (or succeed), print the documented WARN where it applies, and never
 * delete an object of another invocation.
 */
import assert from "node:assert/strict";
import { parseSnapshot } from "../../snapshot/mod.ts";
import { type FaultProxy, startFaultProxy } from "../faults/proxy.ts";
import type { Obj } from "../kubelet/api.ts";
import { aicr } from "../e2e/_aicr.ts";
import { record } from "./_report.ts";
import { ENABLED, getObject, PENDING, snapshotArgs, spawnAicr, suiteEnv, until } from "./_env.ts";
import type { SuiteEnv } from "./_env.ts";

/** The run's WARN when the staging name is taken before it could create it. */
const FOREIGN_STAGING_WARN =
  "WARN the staging ConfigMap's name is taken by an object this invocation did not create; it is left untouched (not written into, not adopted, not deleted)";
const OTHER_INVOCATION = "eeeeeeeeeeeeeeee";

Deno.test({
  name: "reliability: objects deleted or replaced mid-run, and a reused run ID",
  ignore: !ENABLED,
  // One cluster serves every step (its processes outlive the steps; close() ends them).
  sanitizeOps: false,
  sanitizeResources: false,
  async fn(t) {
    const suite: SuiteEnv = await suiteEnv();
    const { env } = suite;
    const { admin } = env;
    const kubeconfig = env.cluster.adminKubeconfig;
    const proxies: FaultProxy[] = [];
    const jobsPath = (ns: string) => `/apis/batch/v1/namespaces/${ns}/jobs`;
    /** Another invocation's Job at the same name: same labels but the invocation ID, suspended. */
    const replacementJob = (job: Obj) => ({
      metadata: {
        name: job.metadata.name,
        labels: { ...job.metadata.labels, "aicr.run/invocation-id": OTHER_INVOCATION },
      },
      spec: {
        suspend: true,
        template: {
          metadata: { labels: { "aicr.run/invocation-id": OTHER_INVOCATION } },
          spec: {
            restartPolicy: "Never",
            containers: [{ name: "c", image: "registry.invalid/none:0" }],
          },
        },
      },
    });
    const replaceJob = async (ns: string) => {
      const list = await admin.request(
        "GET",
        `${jobsPath(ns)}?labelSelector=app.kubernetes.io%2Fname%3Daicr`,
      );
      const job = list.body.items[0] as Obj;
      await admin.request(
        "DELETE",
        `${jobsPath(ns)}/${job.metadata.name}`,
        { propagationPolicy: "Background" },
      );
      await until(
        "the Job to go",
        async () =>
          (await getObject(env, `${jobsPath(ns)}/${job.metadata.name}`)) ? undefined : true,
      );
      const made = await admin.request("POST", jobsPath(ns), replacementJob(job));
      assert.equal(made.status, 201, JSON.stringify(made.body));
      return {
        name: job.metadata.name as string,
        ours: job.metadata.uid as string,
        theirs: made.body.metadata.uid as string,
      };
    };
    try {
      await t.step(
        "the Job is replaced during the wait: clear failure, the replacement stays",
        async () => {
          const ns = await suite.namespace("rel-job-replaced");
          const run = spawnAicr(snapshotArgs(kubeconfig, ns, "--timeout", "60s", ...PENDING));
          await run.waitFor(/waiting for the agent .*phase=Pending/);
          const swap = await replaceJob(ns);
          const done = await run.done;
          const still = await getObject(env, `${jobsPath(ns)}/${swap.name}`);
          const left = (await suite.leftovers(ns, done.runId)).filter((o) =>
            o !== `Job/${swap.name}`
          );
          const ok = done.code === 8 && still?.metadata.uid === swap.theirs && left.length === 0;
          record("tamper: Job replaced in the wait", {
            faultsInjected: 1,
            faultsSurvived: ok ? 1 : 0,
            leftovers: left.length,
          });
          assert.equal(done.code, 8, done.stderr);
          assert.match(
            done.stderr,
            /error: Cannot get a snapshot: the agent Job '.*' was deleted or replaced during the run/,
          );
          assert.equal(still?.metadata.uid, swap.theirs, "the other invocation's Job stays");
          assert.deepEqual(left, []);
          await admin.request("DELETE", `${jobsPath(ns)}/${swap.name}`, {
            propagationPolicy: "Background",
          });
        },
      );

      await t.step(
        "the Job is replaced after its agent wrote the snapshot: delivered, the staging ConfigMap (aicr's, by UID) removed",
        async () => {
          const ns = await suite.namespace("rel-job-replaced-late");
          const p = await startFaultProxy(env.cluster);
          proxies.push(p);
          let swap: Awaited<ReturnType<typeof replaceJob>> | undefined;
          p.add({
            method: "GET",
            path: /\/configmaps\/aicr-agent-snapshot-/,
            action: { kind: "observe" },
            times: 1,
            onMatch: async () => {
              swap = await replaceJob(ns);
            },
          });
          const done = await spawnAicr(snapshotArgs(p.kubeconfig, ns, "--timeout", "60s")).done;
          assert.ok(swap, done.stderr);
          const cmName = `aicr-agent-snapshot-${done.runId}`;
          const cm = await getObject(env, `/api/v1/namespaces/${ns}/configmaps/${cmName}`);
          const still = await getObject(env, `${jobsPath(ns)}/${swap.name}`);
          const left = (await suite.leftovers(ns, done.runId)).filter((o) =>
            o !== `Job/${swap!.name}`
          );
          const ok = done.code === 0 && cm === undefined && still?.metadata.uid === swap.theirs &&
            left.length === 0;
          record("tamper: Job replaced after the write", {
            faultsInjected: 1,
            faultsSurvived: ok ? 1 : 0,
            leftovers: left.length,
          });
          assert.equal(done.code, 0, done.stderr);
          assert.equal(parseSnapshot(done.stdout).kind, "Snapshot");
          assert.equal(cm, undefined, "aicr created the staging ConfigMap: its UID proves it");
          assert.equal(still?.metadata.uid, swap.theirs, "the other invocation's Job stays");
          assert.deepEqual(left, []);
          await admin.request("DELETE", `${jobsPath(ns)}/${swap.name}`, {
            propagationPolicy: "Background",
          });
        },
      );

      await t.step("the ServiceAccount is replaced mid-run: the replacement stays", async () => {
        const ns = await suite.namespace("rel-sa-replaced");
        const run = spawnAicr(snapshotArgs(kubeconfig, ns, "--timeout", "8s", ...PENDING));
        await run.waitFor(/waiting for the agent .*phase=Pending/);
        const sas = await admin.request(
          "GET",
          `/api/v1/namespaces/${ns}/serviceaccounts?labelSelector=app.kubernetes.io%2Fname%3Daicr`,
        );
        const sa = sas.body.items[0] as Obj;
        await admin.request(
          "DELETE",
          `/api/v1/namespaces/${ns}/serviceaccounts/${sa.metadata.name}`,
        );
        const made = await admin.request("POST", `/api/v1/namespaces/${ns}/serviceaccounts`, {
          metadata: {
            name: sa.metadata.name,
            labels: { ...sa.metadata.labels, "aicr.run/invocation-id": OTHER_INVOCATION },
          },
        });
        assert.equal(made.status, 201);
        const done = await run.done;
        const still = await getObject(
          env,
          `/api/v1/namespaces/${ns}/serviceaccounts/${sa.metadata.name}`,
        );
        const left = (await suite.leftovers(ns, done.runId)).filter((o) =>
          o !== `ServiceAccount/${sa.metadata.name}`
        );
        const ok = done.code === 5 && still?.metadata.uid === made.body.metadata.uid &&
          left.length === 0;
        record("tamper: ServiceAccount replaced", {
          faultsInjected: 1,
          faultsSurvived: ok ? 1 : 0,
          leftovers: left.length,
        });
        assert.equal(done.code, 5, done.stderr);
        assert.equal(
          still?.metadata.uid,
          made.body.metadata.uid,
          "the replacement ServiceAccount stays",
        );
        assert.deepEqual(left, []);
        await admin.request(
          "DELETE",
          `/api/v1/namespaces/${ns}/serviceaccounts/${sa.metadata.name}`,
        );
      });

      await t.step(
        "the staging ConfigMap is replaced by a foreign one mid-run: the replacement stays as it is",
        async () => {
          const ns = await suite.namespace("rel-cm-foreign");
          const run = spawnAicr(snapshotArgs(kubeconfig, ns, "--timeout", "6s", ...PENDING));
          const [, runId] = await run.waitFor(/runID=(\S+)/);
          await run.waitFor(/waiting for the agent .*phase=Pending/);
          const cmName = `aicr-agent-snapshot-${runId}`;
          const ours = await getObject(env, `/api/v1/namespaces/${ns}/configmaps/${cmName}`);
          assert.equal(ours?.metadata.labels?.["aicr.run/run-id"], runId, "aicr created it");
          assert.equal(
            (await admin.request("DELETE", `/api/v1/namespaces/${ns}/configmaps/${cmName}`)).status,
            200,
          );
          const made = await admin.request("POST", `/api/v1/namespaces/${ns}/configmaps`, {
            metadata: { name: cmName, labels: { team: "b" } },
            data: { mine: "yes" },
          });
          assert.equal(made.status, 201);
          const done = await run.done;
          const cm = await getObject(env, `/api/v1/namespaces/${ns}/configmaps/${cmName}`);
          const left = (await suite.leftovers(ns, runId)).filter((o) =>
            o !== `ConfigMap/${cmName}`
          );
          // Cleanup's delete is pinned to the UID aicr's create returned: the replacement
          // answers 409 and is left as it is.
          const ok = done.code === 5 && cm?.metadata.uid === made.body.metadata.uid &&
            cm?.data?.mine === "yes" && left.length === 0;
          record("tamper: staging ConfigMap foreign", {
            faultsInjected: 1,
            faultsSurvived: ok ? 1 : 0,
            leftovers: left.length,
          });
          assert.equal(done.code, 5, done.stderr);
          assert.equal(cm?.metadata.uid, made.body.metadata.uid, "the foreign ConfigMap stays");
          assert.deepEqual(cm?.data, { mine: "yes" }, "and nothing was written into it");
          assert.deepEqual(left, []);
          await admin.request("DELETE", `/api/v1/namespaces/${ns}/configmaps/${cmName}`);
        },
      );

      await t.step(
        "a pinned --run-id whose staging name holds someone's ConfigMap: untouched, exit 2 before the Job",
        async () => {
          const ns = await suite.namespace("rel-cm-pinned");
          const runId = "20260102-150405-00000000000000aa";
          const cmName = `aicr-agent-snapshot-${runId}`;
          const made = await admin.request("POST", `/api/v1/namespaces/${ns}/configmaps`, {
            metadata: { name: cmName, labels: { team: "c" } },
            data: { precious: "data" },
          });
          assert.equal(made.status, 201);
          const done = await spawnAicr(
            snapshotArgs(kubeconfig, ns, "--timeout", "30s", "--run-id", runId),
          ).done;
          const cm = await getObject(env, `/api/v1/namespaces/${ns}/configmaps/${cmName}`);
          const left = (await suite.leftovers(ns, runId)).filter((o) =>
            o !== `ConfigMap/${cmName}`
          );
          const ok = done.code === 2 && done.stderr.includes(FOREIGN_STAGING_WARN) &&
            cm?.metadata.resourceVersion === made.body.metadata.resourceVersion &&
            left.length === 0;
          record("tamper: pinned run ID meets a foreign staging ConfigMap", {
            faultsInjected: 1,
            faultsSurvived: ok ? 1 : 0,
            leftovers: left.length,
          });
          assert.equal(done.code, 2, done.stderr);
          assert.ok(done.stderr.includes(`${FOREIGN_STAGING_WARN} name=${cmName}`), done.stderr);
          assert.match(
            done.stderr,
            /error: Cannot stage the snapshot in 'cm:\/\/.*': a ConfigMap this invocation did not create already has that name/,
          );
          assert.equal(
            cm?.metadata.resourceVersion,
            made.body.metadata.resourceVersion,
            "not written into, not deleted",
          );
          assert.deepEqual(left, [], "the run's other objects are cleaned up");
          // aicr cleanup of that run ID keeps it too.
          const swept = await aicr([
            "cleanup",
            "--kubeconfig",
            kubeconfig,
            "-n",
            ns,
            "--run-id",
            runId,
          ], {
            env: { HOME: "/nonexistent" },
          });
          assert.equal(swept.code, 8, swept.stderr);
          assert.equal(
            (await getObject(env, `/api/v1/namespaces/${ns}/configmaps/${cmName}`))?.metadata
              .resourceVersion,
            made.body.metadata.resourceVersion,
          );
          await admin.request("DELETE", `/api/v1/namespaces/${ns}/configmaps/${cmName}`);
        },
      );

      await t.step(
        "the agent writes only into the ConfigMap of its UID: a replaced one and a missing one are refused",
        async () => {
          const ns = await suite.namespace("rel-agent-uid");
          const made = await admin.request("POST", `/api/v1/namespaces/${ns}/configmaps`, {
            metadata: { name: "staging", labels: { team: "d" } },
            data: { precious: "data" },
          });
          assert.equal(made.status, 201);
          const agent = (name: string, uid: string) =>
            aicr(["agent", "--kubeconfig", kubeconfig, "-o", `cm://${ns}/${name}`], {
              env: { HOME: "/nonexistent", AICR_CONFIGMAP_UID: uid },
            });
          const replaced = await agent("staging", "00000000-0000-0000-0000-000000000000");
          const missing = await agent("gone", "00000000-0000-0000-0000-000000000000");
          const cm = await getObject(env, `/api/v1/namespaces/${ns}/configmaps/staging`);
          const created = await getObject(env, `/api/v1/namespaces/${ns}/configmaps/gone`);
          const ours = await agent("staging", made.body.metadata.uid);
          const written = await getObject(env, `/api/v1/namespaces/${ns}/configmaps/staging`);
          const ok = replaced.code === 2 && missing.code === 3 &&
            cm?.metadata.resourceVersion === made.body.metadata.resourceVersion &&
            created === undefined && ours.code === 0;
          record("tamper: agent write pinned to the staging UID", {
            faultsInjected: 2,
            faultsSurvived: ok ? 2 : 0,
          });
          assert.equal(replaced.code, 2, replaced.stderr);
          assert.match(replaced.stderr, /it is not the object this run created/);
          assert.equal(cm?.metadata.resourceVersion, made.body.metadata.resourceVersion);
          assert.equal(missing.code, 3, missing.stderr);
          assert.match(missing.stderr, /it no longer exists .*never created here/);
          assert.equal(created, undefined, "the agent created nothing");
          assert.equal(ours.code, 0, ours.stderr);
          assert.equal(written?.metadata.uid, made.body.metadata.uid);
          assert.equal(written?.metadata.labels?.team, "d", "its own labels are kept");
          assert.ok(written?.data?.["snapshot.yaml"], "the snapshot went into that object");
        },
      );

      await t.step(
        "the output refuses the write after the snapshot is taken (/dev/full): exit 2 naming it, the snapshot kept",
        async () => {
          const ns = await suite.namespace("rel-out-full");
          const done = await spawnAicr(
            snapshotArgs(kubeconfig, ns, "--timeout", "60s", "-o", "/dev/full"),
          ).done;
          const kept = /the snapshot was saved here instead path=(\S+)/.exec(done.stderr)?.[1];
          const text = kept ? await Deno.readTextFile(kept).catch(() => "") : "";
          const left = await suite.leftovers(ns, done.runId);
          const ok = done.code === 2 && text.includes("kind: Snapshot") && left.length === 0;
          record("tamper: output write fails after the run", {
            faultsInjected: 1,
            faultsSurvived: ok ? 1 : 0,
            leftovers: left.length,
          });
          assert.equal(done.code, 2, done.stderr);
          assert.match(done.stderr, /^error: Cannot write snapshot to '\/dev\/full': /m);
          assert.ok(kept, done.stderr);
          assert.equal(parseSnapshot(text).kind, "Snapshot");
          assert.ok(kept.endsWith(`aicr-snapshot-${done.runId}.yaml`), kept);
          assert.deepEqual(left, []);
          await Deno.remove(kept);
        },
      );

      await t.step(
        "the staging ConfigMap is deleted after the agent wrote it: clear failure, clean",
        async () => {
          const ns = await suite.namespace("rel-cm-deleted");
          const p = await startFaultProxy(env.cluster);
          proxies.push(p);
          p.add({
            method: "GET",
            path: /\/configmaps\/aicr-agent-snapshot-/,
            action: { kind: "observe" },
            times: 1,
            onMatch: async (req) => {
              const path = req.path.split("?")[0]!;
              const res = await admin.request("DELETE", path);
              assert.equal(res.status, 200);
            },
          });
          const done = await spawnAicr(snapshotArgs(p.kubeconfig, ns, "--timeout", "60s")).done;
          const left = await suite.leftovers(ns, done.runId);
          const ok = done.code === 3 && left.length === 0;
          record("tamper: staging ConfigMap deleted", {
            faultsInjected: 1,
            faultsSurvived: ok ? 1 : 0,
            leftovers: left.length,
          });
          assert.equal(done.code, 3, done.stderr);
          assert.match(
            done.stderr,
            /error: Cannot read the snapshot from 'cm:\/\/.*': the agent finished but wrote no ConfigMap/,
          );
          assert.deepEqual(left, []);
        },
      );

      await t.step(
        "a second invocation reuses a live run's ID: it fails clearly and deletes nothing of the first",
        async () => {
          const ns = await suite.namespace("rel-same-id");
          const runId = `20260202-020202-${crypto.randomUUID().replaceAll("-", "").slice(0, 16)}`;
          const first = spawnAicr(
            snapshotArgs(kubeconfig, ns, "--timeout", "60s", "--run-id", runId, ...PENDING),
          );
          await first.waitFor(/waiting for the agent .*phase=Pending/);
          const before = await suite.leftovers(ns, runId);
          const uids = async () => {
            const out: string[] = [];
            for (const o of before) {
              const [kind, name] = o.split("/");
              const path = {
                Job: `${jobsPath(ns)}/${name}`,
                Pod: `/api/v1/namespaces/${ns}/pods/${name}`,
                ConfigMap: `/api/v1/namespaces/${ns}/configmaps/${name}`,
                ServiceAccount: `/api/v1/namespaces/${ns}/serviceaccounts/${name}`,
                Role: `/apis/rbac.authorization.k8s.io/v1/namespaces/${ns}/roles/${name}`,
                RoleBinding:
                  `/apis/rbac.authorization.k8s.io/v1/namespaces/${ns}/rolebindings/${name}`,
                ClusterRole: `/apis/rbac.authorization.k8s.io/v1/clusterroles/${name}`,
                ClusterRoleBinding:
                  `/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/${name}`,
              }[kind!]!;
              out.push(`${o}=${(await getObject(env, path))?.metadata.uid}`);
            }
            return out;
          };
          const uidsBefore = await uids();
          const second = await spawnAicr(
            snapshotArgs(kubeconfig, ns, "--timeout", "60s", "--run-id", runId, ...PENDING),
          ).done;
          const uidsAfter = await uids();
          first.kill("SIGINT");
          const firstDone = await first.done;
          const left = await suite.leftovers(ns, runId);
          const ok = second.code === 2 && firstDone.code === 130 &&
            JSON.stringify(uidsAfter) === JSON.stringify(uidsBefore) && left.length === 0;
          record("tamper: run ID reused", {
            faultsInjected: 1,
            faultsSurvived: ok ? 1 : 0,
            leftovers: left.length,
          });
          assert.equal(second.code, 2, second.stderr);
          assert.match(
            second.stderr,
            /error: Cannot create the run.s objects: run ID \S+ is already in use[\s\S]*aicr cleanup --run-id/,
          );
          assert.deepEqual(
            uidsAfter,
            uidsBefore,
            "every object of the first invocation stands, same UIDs",
          );
          assert.equal(firstDone.code, 130, firstDone.stderr);
          assert.deepEqual(left, []);
        },
      );
    } finally {
      for (const p of proxies) await p.stop();
      await suite.close();
    }
  },
});
