/**
 * Shell completion against the local cluster: the built binary's hidden `__complete namespaces`
 * lists the cluster's namespaces, the bash script offers them after `-n` (with the command line's
 * `--kubeconfig`), and a cluster that accepts connections but never answers gives nothing, exit 0,
 * once the call's own 2 s bound passed (the shell's `timeout` is the second bound).
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { createNamespace, type TestCluster, useTestCluster } from "../cluster/harness.ts";
import { aicr, AICR_BIN } from "./_aicr.ts";
import { completeInBash } from "../_bash_completion.ts";

async function bashComplete(words: string[]): Promise<{ words: string[]; stderr: string }> {
  const script = await aicr(["completion", "bash"]);
  assert.equal(script.code, 0, script.stderr);
  return await completeInBash(script.stdout, words);
}

Deno.test({
  name: "completion: namespaces from the real cluster, bounded when it does not answer",
  sanitizeOps: false,
  sanitizeResources: false,
  async fn(t) {
    const env: TestCluster = await useTestCluster();
    const { admin } = env;
    const kubeconfig = env.cluster.adminKubeconfig;
    const namespace = await createNamespace(admin, "complete-me");
    try {
      await t.step("__complete namespaces lists the cluster's namespaces", async () => {
        const run = await aicr(["__complete", "namespaces", "--kubeconfig", kubeconfig], {
          deadlineMs: 30_000,
        });
        assert.equal(run.code, 0, run.stderr);
        assert.equal(run.stderr, "");
        const names = run.stdout.trim().split("\n");
        for (const want of ["default", "kube-system", namespace]) {
          assert.ok(names.includes(want), `${want} in ${names.join(" ")}`);
        }
        assert.deepEqual(names, [...names].sort());
      });

      await t.step("bash offers them after -n, with the command line's --kubeconfig", async () => {
        const got = await bashComplete([
          AICR_BIN,
          "--kubeconfig",
          kubeconfig,
          "snapshot",
          "-n",
          "complete-m",
        ]);
        assert.deepEqual(got.words, [namespace]);
        assert.equal(got.stderr, "");
      });

      await t.step("a server that never answers: nothing, exit 0, no error text", async () => {
        const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
        const held: Deno.Conn[] = [];
        const accepting = (async () => {
          try {
            for await (const conn of listener) held.push(conn);
          } catch {
            // closed
          }
        })();
        const silent = join(env.cluster.stateDir, "silent.kubeconfig");
        const text = await Deno.readTextFile(kubeconfig);
        await Deno.writeTextFile(
          silent,
          text.replace(
            /server: https:\/\/[^\s]+/,
            `server: https://127.0.0.1:${listener.addr.port}`,
          ),
        );
        try {
          const run = await aicr(["__complete", "namespaces", "--kubeconfig", silent], {
            deadlineMs: 20_000,
          });
          assert.equal(run.code, 0, run.stderr);
          assert.equal(run.stdout, "");
          assert.equal(run.stderr, "");
          assert.ok(held.length > 0, "the call reached the silent server");
        } finally {
          listener.close();
          for (const conn of held) conn.close();
          await accepting;
          await Deno.remove(silent);
        }
      });
    } finally {
      await admin.request("DELETE", `/api/v1/namespaces/${namespace}`);
      await env.stop();
    }
  },
});
