/**
 * `aicr cleanup` end to end on the local cluster: an `aicr snapshot` killed with SIGKILL leaves
 * its objects; `aicr cleanup` without a run ID lists that run (run ID, namespace, age, what is
 * left) and the command that cleans it, deleting nothing (exit 1); the listed command removes
 * them; the listing then finds nothing (exit 0).
 */
import assert from "node:assert/strict";
import { createNamespace, type TestCluster, useTestCluster } from "../cluster/harness.ts";
import { aicr, runObjects } from "./_aicr.ts";

/** Keeps the agent pod Pending (no node carries the label): the run waits until it is killed. */
const PENDING = ["--node-selector", "aicr-test/none=true"];

Deno.test({
  name: "aicr cleanup: lists what a SIGKILLed run left, and its listed command removes it",
  sanitizeOps: false,
  sanitizeResources: false,
  async fn(t) {
    const env: TestCluster = await useTestCluster();
    const { admin } = env;
    const kubeconfig = env.cluster.adminKubeconfig;
    const namespace = await createNamespace(admin, "cleanup-list");
    const cleanup = (...args: string[]) =>
      aicr(["cleanup", "--kubeconfig", kubeconfig, ...args], { deadlineMs: 60_000 });
    try {
      let runId = "";
      await t.step("a run killed with SIGKILL leaves its objects", async () => {
        let killed = false;
        const run = await aicr(
          ["snapshot", "--kubeconfig", kubeconfig, "-n", namespace, "--timeout", "60s", ...PENDING],
          {
            deadlineMs: 90_000,
            onStderr: (text, kill) => {
              if (!killed && /waiting for the agent .*phase=Pending/.test(text)) {
                killed = true;
                kill("SIGKILL");
              }
            },
          },
        );
        assert.ok(killed, run.stderr);
        assert.ok(run.runId, run.stderr);
        runId = run.runId;
        const left = (await runObjects(admin, namespace, runId)).map((o) => o.split("/")[0]);
        for (const kind of ["Job", "ServiceAccount", "Role", "ClusterRole", "ConfigMap"]) {
          assert.ok(left.includes(kind), `${kind} left: ${left.join(", ")}`);
        }
      });

      let command: string[] = [];
      await t.step(
        "aicr cleanup lists the run, every namespace, with the command; deletes nothing",
        async () => {
          const before = await runObjects(admin, namespace, runId);
          const listing = await cleanup();
          assert.equal(listing.code, 1, listing.stderr);
          assert.match(listing.stdout, /^RUN ID +NAMESPACE +AGE +LEFT\n/);
          const row = listing.stdout.split("\n").find((l) => l.startsWith(runId));
          assert.ok(row, listing.stdout);
          assert.match(row, new RegExp(`^${runId} +${namespace} +\\d+[smhd] +Job, .*ClusterRole`));
          const line = listing.stdout.split("\n").find((l) =>
            l.trim().startsWith("aicr cleanup") && l.includes(runId)
          );
          assert.equal(
            line?.trim(),
            `aicr cleanup --kubeconfig ${kubeconfig} -n ${namespace} --run-id ${runId}`,
          );
          assert.match(listing.stderr, /run\(s\) left objects behind: nothing was deleted/);
          assert.deepEqual(await runObjects(admin, namespace, runId), before);
          command = line!.trim().split(" ").slice(1);

          // -n narrows the listing to that namespace's runs.
          const one = await cleanup("-n", namespace);
          assert.equal(one.code, 1, one.stderr);
          assert.deepEqual(
            one.stdout.split("\n").filter((l) => /^\d{8}-\d{6}-/.test(l)).map((l) =>
              l.split(/ +/)[0]
            ),
            [runId],
          );
        },
      );

      await t.step(
        "the listed command removes the run's objects; then nothing is listed",
        async () => {
          const swept = await aicr(command, { deadlineMs: 60_000 });
          assert.equal(swept.code, 0, swept.stderr);
          assert.match(swept.stderr, /cleanup: done/);
          assert.deepEqual(await runObjects(admin, namespace, runId), []);
          const after = await cleanup("-n", namespace);
          assert.equal(after.code, 0, after.stderr);
          assert.equal(after.stdout, "");
          assert.match(after.stderr, /cleanup: no run left objects behind/);
        },
      );
    } finally {
      await admin.request("DELETE", `/api/v1/namespaces/${namespace}`);
      await env.stop();
    }
  },
});
