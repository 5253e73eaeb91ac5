/**
 * `aicr daemonset upgrade` and `status` against the real API server, the daemons and the signer
 * run by the kubelet stand-in from the built binary (which pulls `aicr:<any tag>` and fails to
 * pull what the test world does not publish, as a real node does):
 *
 * - an install of an older tag: `status` exits 0 and warns of the version skew;
 * - `upgrade` to this build's version: server-side applied under the one field manager `aicr`,
 *   the rolling update waited on, the CA Secret, the Lease and a signed baseline kept (the
 *   baseline still trusted), no skew left;
 * - `upgrade` to an image no registry serves: exit 8 naming the pull failure, every object back
 *   as it was (DaemonSet and signer on the previous image), the daemons Ready again;
 * - SIGINT while the rolling update is waited on: rolled back too, exit 130.
 */
import assert from "node:assert/strict";
import { createNamespace, type TestCluster, useTestCluster, waitFor } from "../cluster/harness.ts";
import type { Api, Obj } from "../kubelet/api.ts";
import { aicr } from "./_aicr.ts";

/** A port of its own: the daemons bind it on their node (host networking). */
const PORT = "9653";
const DAEMON_PODS = encodeURIComponent(
  "app.kubernetes.io/name=aicr,app.kubernetes.io/component=daemon",
);

async function get(admin: Api, path: string): Promise<Obj> {
  const res = await admin.request("GET", path);
  assert.equal(res.status, 200, `${path}: ${JSON.stringify(res.body)}`);
  return res.body;
}

function image(workload: Obj): string {
  return workload.spec.template.spec.containers[0].image;
}

/** The managers of an object's fields, as `manager/operation`. */
function managers(object: Obj): string[] {
  return ((object.metadata.managedFields ?? []) as Obj[])
    .filter((m) => !m.subresource)
    .map((m) => `${m.manager}/${m.operation}`)
    .sort();
}

Deno.test({
  name: "aicr daemonset upgrade: in place, CA and baselines kept; a bad image rolled back",
  sanitizeOps: false,
  sanitizeResources: false,
  async fn(t) {
    const env: TestCluster = await useTestCluster();
    const { admin } = env;
    const ns = await createNamespace(admin, "upgrade");
    const version = JSON.parse(await Deno.readTextFile("package.json")).version as string;
    const older = "aicr:0.0.9";
    const current = `aicr:${version}`;
    const gpuNodes = env.nodes.filter((n) => n.gpu).map((n) => n.name).sort();
    const dsWith = (options: Parameters<typeof aicr>[1], ...args: string[]) =>
      aicr(["daemonset", ...args, "--kubeconfig", env.cluster.adminKubeconfig, "-n", ns], {
        deadlineMs: 600_000,
        ...options,
      });
    const ds = (...args: string[]) => dsWith({}, ...args);
    const dsPath = `/apis/apps/v1/namespaces/${ns}/daemonsets/aicr-daemon`;
    const signerPath = `/apis/apps/v1/namespaces/${ns}/deployments/aicr-daemon-signer`;
    const secretPath = `/api/v1/namespaces/${ns}/secrets/aicr-daemon-signer`;
    const readyOn = async (want: string) => {
      const res = await admin.request(
        "GET",
        `/api/v1/namespaces/${ns}/pods?labelSelector=${DAEMON_PODS}`,
      );
      const pods = ((res.body.items ?? []) as Obj[]).filter((p) => !p.metadata.deletionTimestamp);
      return pods.length === gpuNodes.length &&
        pods.every((p) =>
          p.spec.containers[0].image === want &&
          (p.status?.conditions ?? []).some((c: Obj) => c.type === "Ready" && c.status === "True")
        );
    };
    try {
      let secret: Obj = {};
      await t.step("an older install: status healthy, the version skew warned", async () => {
        const run = await ds("install", "--image", older, "--port", PORT, "--timeout", "3m");
        assert.equal(run.code, 0, run.stderr);
        const set = await ds("baseline", "set", "--from-node", gpuNodes[0]!);
        assert.equal(set.code, 0, set.stderr);
        secret = await get(admin, secretPath);
        const status = await ds("status", "-t", "json");
        assert.equal(status.code, 0, status.stderr);
        const body = JSON.parse(status.stdout);
        assert.deepEqual(body.versionSkew, ["0.0.9"]);
        assert.equal(body.daemonSet.version, "0.0.9");
        assert.match(status.stderr, /the daemons run another version than this CLI/);
        assert.match(status.stderr, /aicr daemonset upgrade -n /);
        const fetch = await ds("fetch", "-o", "-", "--no-topology", "--node", gpuNodes[0]!);
        assert.equal(fetch.code, 0, fetch.stderr);
        assert.match(fetch.stderr, /the daemons run another version than this CLI daemons=0\.0\.9/);
      });

      await t.step(
        "upgrade: applied under one field manager, rolled out, CA, Lease and baseline kept",
        async () => {
          const leaseBefore = await get(
            admin,
            `/apis/coordination.k8s.io/v1/namespaces/${ns}/leases/aicr-daemon-signer`,
          );
          const run = await ds("upgrade", "--image", current, "--port", PORT, "--timeout", "3m");
          assert.equal(run.code, 0, run.stderr);
          assert.match(run.stderr, /upgrade done/);
          const daemonSet = await get(admin, dsPath);
          assert.equal(image(daemonSet), current);
          assert.equal(image(await get(admin, signerPath)), current);
          // One manager: install's creates moved to the apply entry, nothing left under Update.
          assert.deepEqual(managers(daemonSet), ["aicr/Apply"]);
          assert.ok(await readyOn(current), "every daemon Ready on the new image");
          const secretAfter = await get(admin, secretPath);
          assert.equal(secretAfter.metadata.uid, secret.metadata.uid);
          assert.equal(secretAfter.metadata.resourceVersion, secret.metadata.resourceVersion);
          const lease = await get(
            admin,
            `/apis/coordination.k8s.io/v1/namespaces/${ns}/leases/aicr-daemon-signer`,
          );
          assert.equal(lease.metadata.uid, leaseBefore.metadata.uid);
          const list = await ds("baseline", "list");
          assert.equal(list.code, 0, list.stderr);
          // Signed by the CA the upgrade kept: still verified, still used for drift.
          assert.match(
            list.stdout,
            new RegExp(`${gpuNodes[0]}\\s+node ${gpuNodes[0]}.*\\ssigned$`, "m"),
          );
          const status = await ds("status", "-t", "json");
          assert.equal(status.code, 0, status.stderr);
          assert.deepEqual(JSON.parse(status.stdout).versionSkew, []);
          assert.doesNotMatch(status.stderr, /another version/);
        },
      );

      await t.step(
        "upgrade to an image that cannot be pulled: exit 8 with the reason, rolled back",
        async () => {
          const bad = "registry.invalid/aicr/aicr:9.9.9";
          const run = await ds("upgrade", "--image", bad, "--port", PORT, "--timeout", "3m");
          assert.equal(run.code, 8, run.stderr);
          assert.match(
            run.stderr,
            new RegExp(`to ${bad.replaceAll(".", "\\.")}: its image could not be pulled on node`),
          );
          assert.match(run.stderr, new RegExp(`rolled back to ${current}`));
          assert.equal(image(await get(admin, dsPath)), current);
          assert.equal(image(await get(admin, signerPath)), current);
          await waitFor(
            "every daemon Ready on the previous image",
            async () => await readyOn(current) ? true : undefined,
            120_000,
          );
          const status = await ds("status");
          assert.equal(status.code, 0, status.stderr);
        },
      );

      await t.step("SIGINT amid the rolling update: rolled back, exit 130", async () => {
        let sent = false;
        const run = await dsWith(
          {
            onStderr: (text, kill) => {
              if (!sent && /waiting for the rolling update/.test(text)) {
                sent = true;
                kill("SIGINT");
              }
            },
          },
          "upgrade",
          "--image",
          "aicr:0.0.8",
          "--port",
          PORT,
          "--timeout",
          "3m",
        );
        assert.ok(sent, run.stderr);
        assert.equal(run.code, 130, run.stderr);
        assert.match(run.stderr, new RegExp(`rolled back to ${current}`));
        assert.equal(image(await get(admin, dsPath)), current);
        assert.equal(image(await get(admin, signerPath)), current);
        await waitFor(
          "every daemon Ready on the previous image",
          async () => await readyOn(current) ? true : undefined,
          120_000,
        );
      });

      await t.step("upgrade of what is not installed: exit 3 naming install", async () => {
        const run = await aicr([
          "daemonset",
          "upgrade",
          "--kubeconfig",
          env.cluster.adminKubeconfig,
          "-n",
          ns,
          "--name",
          "absent",
          "--image",
          current,
        ]);
        assert.equal(run.code, 3, run.stderr);
        assert.match(run.stderr, /it is not installed/);
      });
    } finally {
      await ds("uninstall");
      await admin.request("DELETE", `/api/v1/namespaces/${ns}`);
      await env.stop();
    }
  },
});
