/**
 * Scheduled snapshots end to end: `aicr snapshot --render-cronjob` applied with the real kubectl,
 * its Job created by hand from the CronJob three times (`kubectl create job --from=cronjob/...`,
 * as an operator runs one now; the CronJob controller would create the same Job on schedule), the
 * pods run by the kubelet stand-in as the rendered ServiceAccount with the rendered RBAC alone.
 * Asserts the series keeps the newest `--keep-last`, prunes by label only (a ConfigMap outside the
 * series is untouched), and that `aicr diff` compares two of them through `cm://`.
 */
import assert from "node:assert/strict";
import { mkdtemp, rm } from "node:fs/promises";
import { join } from "node:path";
import type { Obj } from "../kubelet/api.ts";
import {
  create,
  createNamespace,
  type TestCluster,
  useTestCluster,
  waitFor,
} from "../cluster/harness.ts";
import { buildTools } from "../cluster/tools.ts";
import { aicr } from "./_aicr.ts";

async function run(cmd: string, args: string[]) {
  const out = await new Deno.Command(cmd, { args, stdout: "piped", stderr: "piped" }).output();
  const text = (b: Uint8Array) => new TextDecoder().decode(b);
  return { code: out.code, stdout: text(out.stdout), stderr: text(out.stderr) };
}

Deno.test({
  name: "scheduled snapshots: the rendered CronJob's Jobs keep the last N, and diff reads two",
  sanitizeOps: false,
  sanitizeResources: false,
  async fn(t) {
    const { kubectl } = await buildTools();
    const env: TestCluster = await useTestCluster();
    const { admin } = env;
    const kubeconfig = env.cluster.adminKubeconfig;
    const k = (...args: string[]) => run(kubectl, [...args, "--kubeconfig", kubeconfig]);
    const ns = await createNamespace(admin, "cron-e2e");
    const dir = await mkdtemp(join(env.cluster.stateDir, "cron-"));
    const node = env.nodes.find((n) => n.gpu)!.name;
    const file = join(dir, "cronjob.yaml");
    const series = async () =>
      ((await admin.request(
        "GET",
        `/api/v1/namespaces/${ns}/configmaps?labelSelector=aicr.run/series=h100`,
      )).body.items as Obj[]).map((c) => c.metadata.name as string).sort();
    try {
      await t.step("render, then kubectl apply: the CronJob and its least RBAC", async () => {
        const render = await aicr([
          "snapshot",
          "--render-cronjob",
          "--kubeconfig",
          kubeconfig,
          "-n",
          ns,
          "--node-selector",
          `kubernetes.io/hostname=${node}`,
          "--schedule",
          "0 6 * * 2",
          "--keep-last",
          "2",
          "--job-name",
          "h100",
          "-o",
          file,
        ]);
        assert.equal(render.code, 0, render.stderr);
        assert.match(render.stderr, /nothing was created/);
        const apply = await k("apply", "-f", file);
        assert.equal(apply.code, 0, apply.stderr);
        assert.match(apply.stdout, /cronjob.batch\/h100 created/);
        const role = await admin.request(
          "GET",
          `/apis/rbac.authorization.k8s.io/v1/namespaces/${ns}/roles/h100`,
        );
        const verbs = (role.body.rules as Obj[]).filter((r) => r.resources.includes("configmaps"))
          .flatMap((r) => r.verbs as string[]).sort();
        assert.deepEqual(verbs, ["create", "delete", "list"], "no update, patch, get or watch");
      });

      const planted = await create(admin, `/api/v1/namespaces/${ns}/configmaps`, {
        apiVersion: "v1",
        kind: "ConfigMap",
        metadata: { name: "h100-20200101-000000", labels: { "aicr.run/series": "other" } },
        data: { note: "another series: never pruned by this one" },
      });

      const written: string[][] = [];
      for (const round of [1, 2, 3]) {
        await t.step(`run ${round}: kubectl create job --from=cronjob/h100, complete`, async () => {
          const job = `h100-manual-${round}`;
          const created = await k("create", "job", job, "--from=cronjob/h100", "-n", ns);
          assert.equal(created.code, 0, created.stderr);
          await waitFor(`job ${job} complete`, async () => {
            const res = await admin.request("GET", `/apis/batch/v1/namespaces/${ns}/jobs/${job}`);
            if ((res.body.status?.failed ?? 0) > 0) {
              const logs = await k("logs", `job/${job}`, "-n", ns);
              throw new Error(`job ${job} failed: ${logs.stdout}${logs.stderr}`);
            }
            return (res.body.status?.succeeded ?? 0) > 0 ? true : undefined;
          }, 90_000);
          written.push(await series());
          // Names carry the second of the run: the next run gets a later one.
          await new Promise((r) => setTimeout(r, 1100));
        });
      }

      await t.step("the series kept the newest two; the first and nothing else pruned", () => {
        assert.equal(written[0]!.length, 1);
        assert.equal(written[1]!.length, 2);
        assert.equal(written[2]!.length, 2);
        const [first] = written[0]!;
        assert.ok(!written[2]!.includes(first!), `${first} was pruned`);
        assert.ok(written[2]!.every((name) => /^h100-\d{8}-\d{6}$/.test(name)));
        assert.ok(written[2]!.every((name) => name > first!), "pruned the oldest");
      });

      await t.step("a ConfigMap of another series is untouched", async () => {
        const res = await admin.request(
          "GET",
          `/api/v1/namespaces/${ns}/configmaps/${planted.metadata.name}`,
        );
        assert.equal(res.status, 200);
        assert.equal(res.body.metadata.uid, planted.metadata.uid);
      });

      await t.step("aicr diff reads two of the series through cm://", async () => {
        const [older, newer] = written[2]!;
        const diff = await aicr([
          "diff",
          "--kubeconfig",
          kubeconfig,
          "-b",
          `cm://${ns}/${older}`,
          "--target",
          `cm://${ns}/${newer}`,
          "-t",
          "json",
        ]);
        assert.equal(diff.code, 0, diff.stderr);
        const report = JSON.parse(diff.stdout);
        assert.equal(report.baselineSource, `cm://${ns}/${older}`);
        assert.equal(report.targetSource, `cm://${ns}/${newer}`);
        assert.equal(typeof report.summary.total, "number");
      });
    } finally {
      await admin.request("DELETE", `/api/v1/namespaces/${ns}`);
      for (const path of ["clusterroles", "clusterrolebindings"]) {
        await admin.request(
          "DELETE",
          `/apis/rbac.authorization.k8s.io/v1/${path}/aicr-node-reader-${ns}.h100`,
        );
      }
      await rm(dir, { recursive: true, force: true });
    }
  },
});
