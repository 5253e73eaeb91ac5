/**
 * `aicr daemonset upgrade` keeps what the install chose, against the real API server and the
 * kubelet stand-in running the built binary:
 *
 * - an install with a node selector (one node), a toleration, a port, a baseline interval and one
 *   signer replica records them on its DaemonSet (`aicr.run/install-settings`);
 * - an upgrade given no flag but the image keeps every one of them, with no placement warning;
 * - an upgrade given `--port` changes the port only (and records it), warning of that one field;
 * - a corrupted annotation is refused, exit 2, naming the DaemonSet, the annotation and the fix,
 *   nothing written;
 * - without the annotation (an older build's install) the flags or their defaults, warned of the
 *   placement they change, and recorded from then on.
 */
import assert from "node:assert/strict";
import { createNamespace, type TestCluster, useTestCluster, waitFor } from "../cluster/harness.ts";
import type { Api, Obj } from "../kubelet/api.ts";
import { aicr } from "./_aicr.ts";

/** Ports of their own: the daemons bind them on their node (host networking). */
const PORT = "9671";
const PORT2 = "9672";
const ANNOTATION = "aicr.run/install-settings";
const DAEMON_PODS = encodeURIComponent(
  "app.kubernetes.io/name=aicr,app.kubernetes.io/component=daemon",
);

async function get(admin: Api, path: string): Promise<Obj> {
  const res = await admin.request("GET", path);
  assert.equal(res.status, 200, `${path}: ${JSON.stringify(res.body)}`);
  return res.body;
}

/** What the install chose, as the live DaemonSet and the signer's Deployment show it. */
function placement(ds: Obj, signer: Obj): Obj {
  const pod = ds.spec.template.spec;
  const container = pod.containers[0];
  const args = container.args as string[];
  return {
    nodeSelector: pod.nodeSelector,
    tolerations: pod.tolerations,
    port: container.ports.map((p: Obj) => p.containerPort),
    baselineInterval: args[args.indexOf("--baseline-interval") + 1],
    signerReplicas: signer.spec.replicas,
  };
}

Deno.test({
  name: "aicr daemonset upgrade: keeps the install's settings, a flag given changes only its own",
  sanitizeOps: false,
  sanitizeResources: false,
  async fn(t) {
    const env: TestCluster = await useTestCluster();
    const { admin } = env;
    const ns = await createNamespace(admin, "upgrade-settings");
    const version = JSON.parse(await Deno.readTextFile("package.json")).version as string;
    const current = `aicr:${version}`;
    const node = env.nodes.filter((n) => n.gpu).map((n) => n.name).sort()[0]!;
    const ds = (...args: string[]) =>
      aicr(["daemonset", ...args, "--kubeconfig", env.cluster.adminKubeconfig, "-n", ns], {
        deadlineMs: 600_000,
      });
    const dsPath = `/apis/apps/v1/namespaces/${ns}/daemonsets/aicr-daemon`;
    const signerPath = `/apis/apps/v1/namespaces/${ns}/deployments/aicr-daemon-signer`;
    const live = async () => placement(await get(admin, dsPath), await get(admin, signerPath));
    const readyOn = async (image: string) => {
      const res = await admin.request(
        "GET",
        `/api/v1/namespaces/${ns}/pods?labelSelector=${DAEMON_PODS}`,
      );
      const pods = ((res.body.items ?? []) as Obj[]).filter((p) => !p.metadata.deletionTimestamp);
      return pods.length === 1 && pods[0]!.spec.nodeName === node &&
        pods[0]!.spec.containers[0].image === image;
    };
    const chosen = {
      nodeSelector: { "kubernetes.io/hostname": node },
      tolerations: [{ key: "nvidia.com/gpu", operator: "Exists", effect: "NoSchedule" }],
      port: [Number(PORT)],
      baselineInterval: "30s",
      signerReplicas: 1,
    };
    try {
      await t.step("install with non-default placement records it", async () => {
        const run = await ds(
          "install",
          "--image",
          "aicr:0.0.9",
          "--node-selector",
          `kubernetes.io/hostname=${node}`,
          "--toleration",
          "nvidia.com/gpu:NoSchedule",
          "--port",
          PORT,
          "--baseline-interval",
          "30s",
          "--signer-replicas",
          "1",
          "--timeout",
          "3m",
        );
        assert.equal(run.code, 0, run.stderr);
        assert.deepEqual(await live(), chosen);
        const recorded = JSON.parse((await get(admin, dsPath)).metadata.annotations[ANNOTATION]);
        assert.equal(recorded.port, PORT);
        assert.deepEqual(recorded.nodeSelector, [`kubernetes.io/hostname=${node}`]);
        assert.equal(recorded.image, undefined, "the image is not a setting: upgrade moves it");
      });

      await t.step("upgrade with no flag keeps every setting, no placement warning", async () => {
        const run = await ds("upgrade", "--image", current, "--timeout", "3m");
        assert.equal(run.code, 0, run.stderr);
        assert.doesNotMatch(run.stderr, /changes where or how the daemons run/);
        const daemonSet = await get(admin, dsPath);
        assert.equal(daemonSet.spec.template.spec.containers[0].image, current);
        assert.deepEqual(await live(), chosen);
        assert.ok(await readyOn(current), "the one daemon runs the new image on its node");
      });

      await t.step("upgrade with --port changes the port only, and records it", async () => {
        const run = await ds("upgrade", "--image", current, "--port", PORT2, "--timeout", "3m");
        assert.equal(run.code, 0, run.stderr);
        assert.match(run.stderr, /changes where or how the daemons run.*field=port/);
        assert.doesNotMatch(run.stderr, /field=(nodeSelector|tolerations)/);
        assert.deepEqual(await live(), { ...chosen, port: [Number(PORT2)] });
        const recorded = JSON.parse((await get(admin, dsPath)).metadata.annotations[ANNOTATION]);
        assert.equal(recorded.port, PORT2);
        await waitFor("the daemon Ready", async () => await readyOn(current) ? true : undefined);
      });

      await t.step(
        "a corrupted annotation: exit 2 naming it and the fix, nothing written",
        async () => {
          const patched = await admin.request("PATCH", dsPath, {
            metadata: { annotations: { [ANNOTATION]: '{"port":"99999","hostNetwork":false}' } },
          });
          assert.equal(patched.status, 200, JSON.stringify(patched.body));
          const before = await get(admin, dsPath);
          const signerBefore = await get(admin, signerPath);
          const run = await ds("upgrade", "--image", current, "--timeout", "1m");
          assert.equal(run.code, 2, run.stderr);
          assert.match(
            run.stderr,
            new RegExp(`daemon '${ns}/aicr-daemon'.*annotation 'aicr\\.run/install-settings'`),
          );
          assert.match(run.stderr, /'hostNetwork' is not a setting this build knows/);
          assert.match(run.stderr, /pass the install's flags explicitly/);
          const after = await get(admin, dsPath);
          assert.equal(after.metadata.resourceVersion, before.metadata.resourceVersion);
          const signerAfter = await get(admin, signerPath);
          assert.equal(signerAfter.metadata.resourceVersion, signerBefore.metadata.resourceVersion);
          // A value the flags refuse is refused from the annotation too.
          await admin.request("PATCH", dsPath, {
            metadata: { annotations: { [ANNOTATION]: '{"port":"99999"}' } },
          });
          const bad = await ds("upgrade", "--image", current, "--timeout", "1m");
          assert.equal(bad.code, 2, bad.stderr);
          assert.match(
            bad.stderr,
            /Cannot use '--port' as it must be a whole number from 1 to 65535/,
          );
        },
      );

      await t.step(
        "an install that recorded nothing: the flags or defaults, warned, then recorded",
        async () => {
          const removed = await admin.request("PATCH", dsPath, {
            metadata: { annotations: { [ANNOTATION]: null } },
          });
          assert.equal(removed.status, 200, JSON.stringify(removed.body));
          const run = await ds("upgrade", "--image", current, "--port", PORT2, "--timeout", "3m");
          assert.equal(run.code, 0, run.stderr);
          // The default selector (GPU nodes) replaces the install's one node, as before this build.
          assert.match(run.stderr, /changes where or how the daemons run.*field=nodeSelector/);
          assert.match(run.stderr, /this install recorded no settings/);
          const daemonSet = await get(admin, dsPath);
          assert.deepEqual(daemonSet.spec.template.spec.nodeSelector, {
            "nvidia.com/gpu.present": "true",
          });
          const recorded = JSON.parse(daemonSet.metadata.annotations[ANNOTATION]);
          assert.equal(recorded.port, PORT2);
          assert.equal(recorded.nodeSelector, undefined);
        },
      );
    } finally {
      await ds("uninstall");
      await admin.request("DELETE", `/api/v1/namespaces/${ns}`);
      await env.stop();
    }
  },
});
