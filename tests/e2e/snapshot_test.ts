/**
 * `aicr snapshot` end to end: the built binary as the CLI, and as the agent inside pods
 * the kubelet stand-in runs, against the real local control plane. Every case asserts
 * the cluster afterwards.
 */
import assert from "node:assert/strict";
import { mkdtemp, readdir, readFile, rm } from "node:fs/promises";
import { join } from "node:path";
import { parse as parseYaml } from "yaml";
import { parseNvidiaSmi } from "../../collectors/mod.ts";
import { parseSnapshot } from "../../snapshot/mod.ts";
import type { Snapshot } from "../../snapshot/mod.ts";
import { createNamespace, type TestCluster, useTestCluster } from "../cluster/harness.ts";
import { aicr, aicrObjects, nodeFixture, runObjects } from "./_aicr.ts";
import { startFaultProxy } from "../faults/proxy.ts";
import { assertQuiet } from "./binary_harness.ts";
import { NOT_AICR_IMAGE, REFUSED_AGENT } from "../kubelet/notaicr.ts";

function gpuData(snapshot: Snapshot) {
  const gpu = snapshot.measurements.find((m) => m.type === "GPU");
  return gpu?.subtypes.map((s) => ({ subtype: s.subtype, data: s.data })) ?? [];
}

Deno.test({
  name: "aicr snapshot: end to end on the local cluster",
  // One cluster serves every step (its processes outlive the steps; env.stop() ends them).
  sanitizeOps: false,
  sanitizeResources: false,
  async fn(t) {
    const env: TestCluster = await useTestCluster();
    const { admin } = env;
    const kubeconfig = env.cluster.adminKubeconfig;
    /** `aicr snapshot` as the admin in a namespace. */
    const runSnapshot = (namespace: string, ...args: string[]) =>
      aicr(["snapshot", "--kubeconfig", kubeconfig, "-n", namespace, ...args]);
    const namespaces: string[] = [];
    const ns = async (prefix: string) => {
      const name = await createNamespace(admin, prefix);
      namespaces.push(name);
      return name;
    };
    try {
      await t.step(
        "a default run lands on a GPU node, returns its GPU data, and leaves nothing",
        async () => {
          const namespace = await ns("snap-default");
          const run = await runSnapshot(namespace, "--timeout", "90s");
          assert.equal(run.code, 0, run.stderr);
          assert.match(run.stderr, /auto-targeting GPU nodes/);
          // Only aicr's own lines: the CLI's and the agent's (streamed from its pod's log).
          assert.match(run.stderr, /\bagent\b/);
          assertQuiet(run.stderr, "the CLI's and the agent's stderr");
          assert.ok(run.runId, "the run ID is logged");
          assert.match(run.runId!, /^\d{8}-\d{6}-[0-9a-f]{16}$/);
          const snapshot = parseSnapshot(run.stdout);
          const node = snapshot.metadata["source-node"];
          const gpuNodes = env.nodes.filter((n) => n.gpu).map((n) => n.name);
          assert.ok(gpuNodes.includes(node), `ran on ${node}, a GPU node`);
          // Field by field, the GPU measurement is what that node's nvidia-smi prints.
          const want = parseNvidiaSmi(nodeFixture(env.cluster.stateDir, node))
            .map((s) => ({ subtype: s.subtype, data: s.data }));
          assert.deepEqual(gpuData(snapshot), want);
          const smi = gpuData(snapshot).find((s) => s.subtype === "smi")?.data;
          assert.equal(smi?.["gpu-count"], 8);
          assert.deepEqual(await runObjects(admin, namespace, run.runId!), []);
        },
      );

      await t.step(
        "--log-json makes every stderr line JSON, the agent's relayed lines included",
        async () => {
          const namespace = await ns("snap-logjson");
          const run = await runSnapshot(namespace, "--log-json");
          assert.equal(run.code, 0, run.stderr);
          const lines = run.stderr.split("\n").filter((line) => line !== "");
          const records = lines.map((line) => {
            try {
              return JSON.parse(line) as Record<string, unknown>;
            } catch {
              throw new Error(`a stderr line is not JSON: ${line}\n${run.stderr}`);
            }
          });
          for (const record of records) {
            assert.equal(typeof record.msg, "string", JSON.stringify(record));
            assert.ok(["debug", "info", "warn", "error"].includes(String(record.level)));
          }
          // The in-pod agent's line, relayed from its pod's log with its fields.
          const saved = records.find((r) => r.msg === "snapshot saved to ConfigMap");
          assert.equal(saved?.component, "agent");
          assert.match(String(saved?.uri), /^cm:\/\//);
          assert.equal(parseSnapshot(run.stdout).kind, "Snapshot");
          const runId = /runID=(\S+)$/.exec(
            String(records.find((r) => String(r.msg).startsWith("snapshot agent run:"))?.msg),
          )?.[1];
          assert.ok(runId, run.stderr);
          assert.deepEqual(await runObjects(admin, namespace, runId), []);
        },
      );

      await t.step(
        "in text mode every relayed agent line carries [agent], --debug's JSON ones too",
        async () => {
          const namespace = await ns("snap-agentprefix");
          for (const args of [[], ["--debug"]]) {
            const run = await runSnapshot(namespace, ...args);
            assert.equal(run.code, 0, run.stderr);
            const lines = run.stderr.split("\n").filter((line) => line !== "");
            assert.deepEqual(lines.filter((line) => line.startsWith("{")), [], run.stderr);
            // Lines only the in-pod agent says: each one relayed with its prefix.
            const inPod = lines.filter((line) =>
              /snapshot saved to ConfigMap|\bcollected collector=/.test(line)
            );
            // The save, and with --debug each collector's line (GPU, OS, SystemD, K8s, topology).
            assert.ok(inPod.length >= (args.length ? 5 : 1), run.stderr);
            for (const line of inPod) assert.match(line, /^\[agent\] /, run.stderr);
            assert.deepEqual(await runObjects(admin, namespace, run.runId!), []);
          }
        },
      );

      await t.step(
        "the whole run speaks HTTP/2 over one connection to the API server, the agent over its own",
        async () => {
          const namespace = await ns("snap-h2");
          const run = await runSnapshot(namespace, "--debug");
          assert.equal(run.code, 0, run.stderr);
          const connects = run.stderr.split("\n").filter((line) =>
            line.includes("connected to the API server")
          );
          // The CLI's pre-flight, gate, creates, wait, read and cleanup share one connection.
          const cli = connects.filter((line) => !line.startsWith("[agent]"));
          assert.equal(cli.length, 1, run.stderr);
          assert.match(cli[0] ?? "", /protocol=h2/);
          const agent = connects.filter((line) => line.startsWith("[agent]"));
          assert.equal(agent.length, 1, run.stderr);
          assert.match(agent[0] ?? "", /protocol=h2/);
        },
      );

      await t.step(
        "the agent's report comes through its log, never relayed, and proves the snapshot read",
        async () => {
          const namespace = await ns("snap-report-log");
          const run = await runSnapshot(namespace, "--debug");
          assert.equal(run.code, 0, run.stderr);
          assert.match(run.stderr, /snapshot read configMap=\S+ report=log/, run.stderr);
          assert.doesNotMatch(run.stderr, /aicr-agent-report/, run.stderr);
          assert.deepEqual(await runObjects(admin, namespace, run.runId!), []);
        },
      );

      await t.step("-q leaves stderr empty on success: the snapshot alone, on stdout", async () => {
        const namespace = await ns("snap-quiet");
        const run = await runSnapshot(namespace, "-q");
        assert.equal(run.code, 0, run.stderr);
        assert.equal(run.stderr, "", "no info or warning line, the agent's relayed ones included");
        assert.equal(parseSnapshot(run.stdout).kind, "Snapshot");
        assert.deepEqual(await aicrObjects(admin, namespace), []);
      });

      await t.step(
        "--request-timeout bounds each API request: a held one fails the run, exit 5, nothing left",
        async () => {
          const namespace = await ns("snap-reqtimeout");
          const proxy = await startFaultProxy(env.cluster);
          try {
            // The API server answers the run's first permission check only after 4 s.
            const held = () =>
              proxy.add({
                method: "POST",
                path: /selfsubjectaccessreviews/,
                action: { kind: "delay", ms: 4000 },
                times: 1,
              });
            /** The run through the proxy, with a --request-timeout. */
            const viaProxy = (timeout: string) =>
              aicr([
                "snapshot",
                "--kubeconfig",
                proxy.kubeconfig,
                "-n",
                namespace,
                "--request-timeout",
                timeout,
              ]);
            held();
            // The message is the deadline's own: the bound ended the request, not the answer.
            const bounded = await viaProxy("1s");
            assert.equal(bounded.code, 5, bounded.stderr);
            assert.match(
              bounded.stderr,
              /^error: Cannot POST \/apis\/authorization\.k8s\.io\/v1\/selfsubjectaccessreviews on 'https:\/\/127\.0\.0\.1:\d+': no complete answer within the request timeout of 1s: raise '--request-timeout' \(0 for none\)$/m,
            );
            assert.deepEqual(await aicrObjects(admin, namespace), []);

            // 0 is no bound: the same held answer is waited for, and the run succeeds.
            proxy.clear();
            held();
            const unbounded = await viaProxy("0");
            assert.equal(unbounded.code, 0, unbounded.stderr);
            assert.equal(parseSnapshot(unbounded.stdout).kind, "Snapshot");
            assert.equal(proxy.injected.delay, 2);
            assert.deepEqual(await aicrObjects(admin, namespace), []);
          } finally {
            await proxy.stop();
          }
        },
      );

      await t.step("--format json and --output file write that file and nothing else", async () => {
        const namespace = await ns("snap-file");
        const dir = await mkdtemp(join(env.cluster.stateDir, "out-"));
        try {
          const file = join(dir, "snap.json");
          const run = await runSnapshot(
            namespace,
            "--node-selector",
            "kubernetes.io/hostname=p5-h100-1",
            "--format",
            "json",
            "-o",
            file,
          );
          assert.equal(run.code, 0, run.stderr);
          assert.equal(run.stdout, "");
          const doc = JSON.parse(await readFile(file, "utf8"));
          assert.equal(doc.metadata["source-node"], "p5-h100-1");
          assert.deepEqual(await readdir(dir), ["snap.json"]);
          assert.deepEqual(await runObjects(admin, namespace, run.runId!), []);
        } finally {
          await rm(dir, { recursive: true, force: true });
        }
      });

      await t.step(
        "a cm:// output in the run's namespace is kept, the rest is cleaned up",
        async () => {
          const namespace = await ns("snap-cm");
          const run = await runSnapshot(namespace, "-o", `cm://${namespace}/aicr-snapshot`);
          assert.equal(run.code, 0, run.stderr);
          const cm = await admin.request(
            "GET",
            `/api/v1/namespaces/${namespace}/configmaps/aicr-snapshot`,
          );
          assert.equal(cm.status, 200);
          assert.equal(cm.body.metadata.labels["app.kubernetes.io/component"], "Snapshot");
          assert.equal(cm.body.data.format, "yaml");
          assert.equal(parseSnapshot(cm.body.data["snapshot.yaml"]).kind, "Snapshot");
          assert.deepEqual(await runObjects(admin, namespace, run.runId!), []);
        },
      );

      await t.step(
        "a cm:// output in another namespace is refused before anything is created",
        async () => {
          const namespace = await ns("snap-mismatch");
          const run = await runSnapshot(namespace, "-o", "cm://other/x");
          assert.equal(run.code, 2, run.stderr);
          assert.match(run.stderr, /namespace must match '--namespace'/);
          assert.deepEqual(await aicrObjects(admin, namespace), []);
        },
      );

      await t.step(
        "a caller with too few rights gets the full list and the cluster is unchanged",
        async () => {
          const namespace = await ns("snap-denied");
          const alice = await env.cluster.kubeconfigFor("alice", ["team-a"]);
          const run = await aicr(["snapshot", "--kubeconfig", alice, "-n", namespace]);
          assert.equal(run.code, 4, run.stderr);
          assert.match(run.stderr, /missing required permissions:/);
          for (
            const line of [
              `- the caller (your kubeconfig identity) cannot "create" jobs.batch (namespace "${namespace}")`,
              `- the caller (your kubeconfig identity) cannot "get" pods/log (namespace "${namespace}")`,
              `- the caller (your kubeconfig identity) cannot "delete" configmaps (namespace "${namespace}")`,
              `- the caller (your kubeconfig identity) cannot "create" clusterroles.rbac.authorization.k8s.io (cluster-scoped)`,
              `- the caller (your kubeconfig identity) cannot "delete" clusterrolebindings.rbac.authorization.k8s.io (cluster-scoped)`,
            ]
          ) assert.ok(run.stderr.includes(line), `missing line: ${line}\n${run.stderr}`);
          // The list ends with the fix: an admin-prepared ServiceAccount.
          assert.match(
            run.stderr,
            new RegExp(
              `--add-roles-to-service-account <service-account> .*\n.*kubectl apply -f snapshot-rbac-<runID>/\n {2}aicr snapshot --namespace ${namespace} --service-account-name <service-account>\n$`,
            ),
          );
          assert.deepEqual(await aicrObjects(admin, namespace), []);
        },
      );

      await t.step(
        "exact mode: an unbound ServiceAccount is caught by the gate; the rendered RBAC fixes it",
        async () => {
          const namespace = await ns("snap-exact");
          const sa = "irsa-snapshotter";
          const created = await admin.request(
            "POST",
            `/api/v1/namespaces/${namespace}/serviceaccounts`,
            {
              metadata: { name: sa },
            },
          );
          assert.equal(created.status, 201);
          const denied = await runSnapshot(
            namespace,
            "--service-account-name",
            sa,
            "-o",
            `cm://${namespace}/aicr-snapshot`,
          );
          assert.equal(denied.code, 4, denied.stderr);
          assert.ok(
            denied.stderr.includes(
              `- agent ServiceAccount "system:serviceaccount:${namespace}:${sa}" cannot "list" nodes (cluster-scoped)`,
            ),
            denied.stderr,
          );
          assert.deepEqual(await aicrObjects(admin, namespace), []);

          // Render, apply, and run again as that ServiceAccount.
          const cwd = await mkdtemp(join(env.cluster.stateDir, "rbac-"));
          try {
            const render = await aicr([
              "snapshot",
              "-n",
              namespace,
              "--add-roles-to-service-account",
              sa,
              "-o",
              `cm://${namespace}/aicr-snapshot`,
            ], { cwd });
            assert.equal(render.code, 0, render.stderr);
            const [dir] = await readdir(cwd);
            assert.match(dir ?? "", /^snapshot-rbac-\d{8}-\d{6}-[0-9a-f]{16}$/);
            const files = (await readdir(join(cwd, dir!))).sort();
            assert.deepEqual(files, [
              "01-role.yaml",
              "02-rolebinding.yaml",
              "03-clusterrole.yaml",
              "04-clusterrolebinding.yaml",
            ]);
            const paths: Record<string, string> = {
              Role: `/apis/rbac.authorization.k8s.io/v1/namespaces/${namespace}/roles`,
              RoleBinding:
                `/apis/rbac.authorization.k8s.io/v1/namespaces/${namespace}/rolebindings`,
              ClusterRole: "/apis/rbac.authorization.k8s.io/v1/clusterroles",
              ClusterRoleBinding: "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
            };
            for (const file of files) {
              const manifest = parseYaml(await readFile(join(cwd, dir!, file), "utf8"));
              const res = await admin.request("POST", paths[manifest.kind]!, manifest);
              assert.equal(res.status, 201, `${file}: ${res.body.message}`);
            }
            const again = await aicr(
              [
                "snapshot",
                "--kubeconfig",
                kubeconfig,
                "-n",
                namespace,
                "--service-account-name",
                sa,
                "-o",
                `cm://${namespace}/aicr-snapshot`,
              ],
            );
            assert.equal(again.code, 0, again.stderr);
            const cm = await admin.request(
              "GET",
              `/api/v1/namespaces/${namespace}/configmaps/aicr-snapshot`,
            );
            const snap = parseSnapshot(cm.body.data["snapshot.yaml"]);
            assert.equal(gpuData(snap).find((s) => s.subtype === "smi")?.data["gpu-count"], 8);
            // Exact mode creates no RBAC and no ServiceAccount of its own.
            assert.deepEqual(await runObjects(admin, namespace, again.runId!), []);
            // Without a cm:// output the run stages in the ServiceAccount's own ConfigMap, the
            // one name the grant carries, and removes it afterwards.
            const staged = await aicr([
              "snapshot",
              "--kubeconfig",
              kubeconfig,
              "-n",
              namespace,
              "--service-account-name",
              sa,
            ]);
            assert.equal(staged.code, 0, staged.stderr);
            assert.equal(gpuData(parseSnapshot(staged.stdout)).length > 0, true);
            assert.equal(
              (await admin.request(
                "GET",
                `/api/v1/namespaces/${namespace}/configmaps/aicr-agent-snapshot-${sa}`,
              )).status,
              404,
            );
            assert.deepEqual(await runObjects(admin, namespace, staged.runId!), []);
            const sas = await admin.request(
              "GET",
              `/api/v1/namespaces/${namespace}/serviceaccounts`,
            );
            assert.deepEqual(
              sas.body.items.map((i: { metadata: { name: string } }) => i.metadata.name).sort(),
              ["default", sa],
            );
            for (const file of [...files].reverse()) {
              const manifest = parseYaml(await readFile(join(cwd, dir!, file), "utf8"));
              const base = paths[manifest.kind]!;
              await admin.request("DELETE", `${base}/${manifest.metadata.name}`);
            }
          } finally {
            await rm(cwd, { recursive: true, force: true });
          }
        },
      );

      await t.step(
        "five concurrent runs in one namespace all succeed and leave nothing",
        async () => {
          const namespace = await ns("snap-concurrent");
          const runs = await Promise.all(
            [0, 1, 2, 3, 4].map(() => runSnapshot(namespace, "--timeout", "120s")),
          );
          for (const run of runs) {
            assert.equal(run.code, 0, run.stderr);
            assert.equal(parseSnapshot(run.stdout).kind, "Snapshot");
          }
          assert.equal(new Set(runs.map((r) => r.runId)).size, 5, "five distinct run IDs");
          assert.deepEqual(await aicrObjects(admin, namespace), []);
        },
      );

      await t.step(
        "a Job that cannot schedule times out with the scheduler's reason (exit 5), clean",
        async () => {
          const namespace = await ns("snap-unschedulable");
          const run = await runSnapshot(
            namespace,
            "--node-selector",
            "no-such-label=true",
            "--timeout",
            "6s",
          );
          assert.equal(run.code, 5, run.stderr);
          assert.match(run.stderr, /did not finish within 6s \(unschedulable\)/);
          assert.match(run.stderr, /could not be scheduled: 0\/\d+ nodes are available/);
          assert.deepEqual(await runObjects(admin, namespace, run.runId!), []);
        },
      );

      await t.step("a bad image fails with the pull error (exit 8), clean", async () => {
        const namespace = await ns("snap-image");
        const run = await runSnapshot(
          namespace,
          "--image",
          "registry.invalid/nope/agent:0",
          "--timeout",
          "60s",
        );
        assert.equal(run.code, 8, run.stderr);
        assert.match(
          run.stderr,
          /the agent image could not be pulled \((ErrImagePull|ImagePullBackOff)\)/,
        );
        assert.match(
          run.stderr,
          /node selector nvidia\.com\/gpu\.present=true/,
          "names the injected selector",
        );
        assert.deepEqual(await runObjects(admin, namespace, run.runId!), []);
      });

      await t.step(
        "NVIDIA's image (its Go aicr has no agent verb) is refused, named, clean (exit 8)",
        async () => {
          const namespace = await ns("snap-upstream");
          const run = await runSnapshot(
            namespace,
            "--image",
            NOT_AICR_IMAGE,
            "--node-selector",
            "kubernetes.io/hostname=p5-h100-1",
            "--timeout",
            "90s",
          );
          assert.equal(run.code, 8, run.stderr);
          assert.match(run.stderr, REFUSED_AGENT);
          assert.match(run.stderr, /aicr image push REGISTRY\/REPO/);
          assert.equal(run.stdout, "", "nothing another program wrote is delivered");
          assert.deepEqual(await runObjects(admin, namespace, run.runId!), []);
        },
      );

      await t.step(
        "a foreign reference the test world does not publish fails to pull, as on a real node",
        async () => {
          const namespace = await ns("snap-foreign");
          const run = await runSnapshot(
            namespace,
            "--image",
            "ghcr.io/nvidia/aicr:latest",
            "--timeout",
            "60s",
          );
          assert.equal(run.code, 8, run.stderr);
          assert.match(
            run.stderr,
            /the agent image could not be pulled \((ErrImagePull|ImagePullBackOff)\)/,
          );
          assert.match(run.stderr, /ghcr\.io\/nvidia\/aicr:latest.*not found/);
          assert.deepEqual(await runObjects(admin, namespace, run.runId!), []);
        },
      );

      await t.step(
        "an agent that exits non-zero reports its exit code and log tail (exit 8), clean",
        async () => {
          const namespace = await ns("snap-agent-fails");
          // Restricted mode adds no GPU request, so --require-gpu on a CPU node fails in the pod.
          const run = await runSnapshot(
            namespace,
            "--privileged=false",
            "--require-gpu",
            "--node-selector",
            "kubernetes.io/hostname=system-m7i-1",
          );
          assert.equal(run.code, 8, run.stderr);
          assert.match(run.stderr, /the agent exited with code 3/);
          assert.match(
            run.stderr,
            /--- agent logs ---[\s\S]*--require-gpu was set but no GPU was detected[\s\S]*--- end logs ---/,
          );
          assert.deepEqual(await runObjects(admin, namespace, run.runId!), []);
        },
      );

      await t.step("SIGINT during the wait still cleans up and exits 130", async () => {
        const namespace = await ns("snap-sigint");
        const run = await aicr(
          [
            "snapshot",
            "--kubeconfig",
            kubeconfig,
            "-n",
            namespace,
            "--node-selector",
            "no-such-label=true",
            "--timeout",
            "60s",
          ],
          { signalAfterMs: { signal: "SIGINT", ms: 2500 } },
        );
        assert.equal(run.code, 130, run.stderr);
        assert.ok(run.runId, run.stderr);
        assert.deepEqual(await runObjects(admin, namespace, run.runId!), []);
      });
    } finally {
      for (const name of namespaces) await admin.request("DELETE", `/api/v1/namespaces/${name}`);
      await env.stop();
    }
  },
});
