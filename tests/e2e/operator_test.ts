/**
 * What a kubectl-native operator expects of the built binary against the local cluster
 * (issue #14): progress while waiting (a heartbeat, the scheduler's reason at once, an image
 * pull ending the wait early), messages (a 401 names the rejected credentials, a fetch with no
 * Ready pod is exit 9 and not 6, hints only where they apply, nothing after the final error line,
 * no run ID for configuration errors), the closing summary line, and the JSON/JUnit reports.
 */
import assert from "node:assert/strict";
import { Buffer } from "node:buffer";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { parseSnapshot } from "../../snapshot/mod.ts";
import { createNamespace, type TestCluster, useTestCluster, waitFor } from "../cluster/harness.ts";
import type { Obj } from "../kubelet/api.ts";
import { parseAllDocuments } from "yaml";
import { aicr, aicrObjects, runObjects } from "./_aicr.ts";

/** An image the kubelet stand-in cannot pull (not in its image map): ErrImagePull, then ImagePullBackOff. */
const BAD_IMAGE = "registry.example/nope/not-aicr:0.0.0";

/** A log line (`message key=value`, a level word, or the agent's prefixed lines). */
const LOG_LINE_REGEXP = /^(WARN |ERROR |DEBUG |\[agent\] )|^[a-z][\w ':,-]* [a-zA-Z]+=\S/;

/** The lines after the `error:` line: the error's own details only, never a log line. */
function afterError(stderr: string): string[] {
  const lines = stderr.trimEnd().split("\n");
  const at = lines.findIndex((l) => l.startsWith("error: "));
  assert.ok(at >= 0, `an error line:\n${stderr}`);
  return lines.slice(at + 1);
}

function assertErrorIsLast(stderr: string): void {
  for (const line of afterError(stderr)) {
    assert.doesNotMatch(
      line,
      LOG_LINE_REGEXP,
      `nothing is logged after the final error line, but saw: ${line}\n${stderr}`,
    );
  }
}

Deno.test({
  name: "aicr as an operator expects it: progress, messages, summary and reports",
  sanitizeOps: false,
  sanitizeResources: false,
  async fn(t) {
    const env: TestCluster = await useTestCluster();
    const { admin } = env;
    const kubeconfig = env.cluster.adminKubeconfig;
    const namespaces: string[] = [];
    const ns = async (prefix: string) => {
      const name = await createNamespace(admin, prefix);
      namespaces.push(name);
      return name;
    };
    const dir = await mkdtemp(join(env.cluster.stateDir, "operator-"));
    try {
      await t.step(
        "an unschedulable agent: the scheduler's reason at once, a heartbeat, then the timeout",
        async () => {
          const namespace = await ns("op-pending");
          const run = await aicr([
            "snapshot",
            "--kubeconfig",
            kubeconfig,
            "-n",
            namespace,
            "--node-selector",
            "aicr-test/none=true",
            "--timeout",
            "23s",
          ]);
          assert.equal(run.code, 5, run.stderr);
          const lines = run.stderr.split("\n");
          const warn = lines.findIndex((l) => l.includes("the agent pod cannot be scheduled"));
          assert.ok(warn >= 0, run.stderr);
          assert.match(
            lines[warn] ?? "",
            /^WARN .*reason=".*didn't match Pod's node affinity\/selector/,
          );
          const progress = lines.filter((l) => l.startsWith("waiting for the agent"));
          const elapsed = progress.map((l) => Number(/elapsed=(\d+)s/.exec(l)?.[1]));
          // The pod's state stops changing once it is Pending: what keeps lines coming is the
          // heartbeat. Its cadence is proven on a fake clock (controller/wait_test.ts); here, on
          // the real one, only that it comes, so a slow scheduler on a loaded machine cannot
          // fail the step.
          assert.ok(elapsed.some((s) => s >= 10), `a heartbeat: ${elapsed.join(",")}`);
          assert.ok(
            warn < lines.findIndex((l) => /elapsed=(1\d|2\d)s/.test(l)),
            "the reason comes before the first heartbeat",
          );
          assert.match(run.stderr, /did not finish within 23s \(unschedulable\)/);
          assert.doesNotMatch(run.stderr, /auto-targeted/, "no auto-targeting with a selector");
          assertErrorIsLast(run.stderr);
          assert.deepEqual(await runObjects(admin, namespace, run.runId!), []);
        },
      );

      await t.step(
        "an image that cannot be pulled ends the run early, with no placement hint",
        async () => {
          const namespace = await ns("op-pull");
          const run = await aicr([
            "snapshot",
            "--kubeconfig",
            kubeconfig,
            "-n",
            namespace,
            "--image",
            BAD_IMAGE,
            "--timeout",
            "5m",
          ]);
          assert.equal(run.code, 8, run.stderr);
          assert.match(run.stderr, /auto-targeting GPU nodes/, "the run did auto-target");
          assert.match(
            run.stderr,
            /the agent image could not be pulled \((ErrImagePull|ImagePullBackOff)\)/,
          );
          assert.match(run.stderr, /failed to resolve reference .*: not found/);
          assert.doesNotMatch(run.stderr, /pass --node-selector/);
          assertErrorIsLast(run.stderr);
          assert.deepEqual(await runObjects(admin, namespace, run.runId!), []);
        },
      );

      await t.step("a good run closes with node, bytes, objects cleaned and seconds", async () => {
        const namespace = await ns("op-ok");
        const run = await aicr(["snapshot", "--kubeconfig", kubeconfig, "-n", namespace]);
        assert.equal(run.code, 0, run.stderr);
        const snapshot = parseSnapshot(run.stdout);
        const last = run.stderr.trimEnd().split("\n").at(-1) ?? "";
        const summary =
          /^snapshot complete node=(\S+) bytes=(\d+) cleaned=(\d+) seconds=[\d.]+ runID=(\S+)$/
            .exec(last);
        assert.ok(summary, `the last line is the summary: ${last}`);
        assert.equal(summary[1], snapshot.metadata["source-node"]);
        assert.equal(Number(summary[2]), Buffer.byteLength(run.stdout), "the bytes delivered");
        // ServiceAccount, Role, RoleBinding, ClusterRole, ClusterRoleBinding, Job, staging ConfigMap.
        assert.equal(Number(summary[3]), 7);
        assert.equal(summary[4], run.runId);
        assert.deepEqual(await runObjects(admin, namespace, run.runId!), []);
      });

      await t.step("configuration errors print no run ID", async () => {
        const namespace = await ns("op-config");
        for (
          const [args, code, message] of [
            [
              ["-n", namespace, "--runtime-class", "no-such-class"],
              3,
              /RuntimeClass "no-such-class" not found/,
            ],
            [["-n", "no-such-namespace-here"], 3, /no-such-namespace-here/],
          ] as const
        ) {
          const run = await aicr(["snapshot", "--kubeconfig", kubeconfig, ...args]);
          assert.equal(run.code, code, run.stderr);
          assert.match(run.stderr, message);
          assert.doesNotMatch(run.stderr, /runID=/, run.stderr);
          assertErrorIsLast(run.stderr);
        }
      });

      await t.step(
        "credentials the API server rejects: 401 says so and how to refresh",
        async () => {
          const text = await readFile(kubeconfig, "utf8");
          const server = /server: (\S+)/.exec(text)?.[1];
          const ca = /certificate-authority-data: (\S+)/.exec(text)?.[1];
          const bad = join(dir, "expired.kubeconfig");
          await writeFile(
            bad,
            [
              "apiVersion: v1",
              "kind: Config",
              "clusters:",
              `- name: lab\n  cluster:\n    server: ${server}\n    certificate-authority-data: ${ca}`,
              "users:",
              "- name: expired-user\n  user:\n    token: not-a-valid-token",
              "contexts:",
              "- name: lab-expired\n  context:\n    cluster: lab\n    user: expired-user",
              "current-context: lab-expired",
              "",
            ].join("\n"),
          );
          const run = await aicr(["snapshot", "--kubeconfig", bad, "-n", "default"]);
          assert.equal(run.code, 4, run.stderr);
          assert.match(run.stderr, /401 Unauthorized: the API server rejected the credentials/);
          assert.match(run.stderr, /kubeconfig user 'expired-user' \(context 'lab-expired'\)/);
          assert.match(run.stderr, /refresh them with the command that wrote them/);
          assert.doesNotMatch(run.stderr, /runID=/);
          assertErrorIsLast(run.stderr);
        },
      );

      await t.step(
        "daemonset install with an image that cannot be pulled ends early and rolls back",
        async () => {
          const namespace = await ns("op-ds-pull");
          const report = join(dir, "install-pull.json");
          const run = await aicr([
            "daemonset",
            "install",
            "--kubeconfig",
            kubeconfig,
            "-n",
            namespace,
            "--image",
            BAD_IMAGE,
            "--timeout",
            "5m",
            "--report",
            report,
          ]);
          assert.equal(run.code, 8, run.stderr);
          assert.match(
            run.stderr,
            /its image could not be pulled on node '\S+' \((ErrImagePull|ImagePullBackOff)\)/,
          );
          assert.match(run.stderr, /the install was rolled back: 19 object\(s\) removed/);
          assertErrorIsLast(run.stderr);
          const doc = JSON.parse(await readFile(report, "utf8"));
          assert.equal(doc.kind, "DaemonSetInstallReport");
          assert.equal(doc.result.status, "failed");
          assert.equal(doc.result.exitCode, 8);
          assert.match(doc.result.error, /could not be pulled/);
          const left = await admin.request(
            "GET",
            `/apis/apps/v1/namespaces/${namespace}/daemonsets`,
          );
          assert.deepEqual(left.body.items, []);
        },
      );

      await t.step(
        "install --no-wait, fetch with no Ready pod (exit 9, not 6), uninstall: JSON and JUnit reports",
        async () => {
          const namespace = await ns("op-ds-report");
          const ds = (...args: string[]) =>
            aicr(["daemonset", ...args, "--kubeconfig", kubeconfig, "-n", namespace]);
          const install = await ds("install", "--image", BAD_IMAGE, "--no-wait", "--report", "-");
          assert.equal(install.code, 0, install.stderr);
          const installed = JSON.parse(install.stdout);
          assert.equal(installed.kind, "DaemonSetInstallReport");
          assert.equal(installed.result.status, "ok");
          assert.match(installed.metadata.runId, /^\d{8}-\d{6}-[0-9a-f]{16}$/);
          assert.deepEqual(
            installed.objects.map((o: { kind: string; status: string }) => o.kind).sort(),
            // The daemon's twelve, and the in-cluster signer's seven (on by default).
            [
              "ClusterRole",
              "ClusterRole",
              "ClusterRole",
              "ClusterRoleBinding",
              "ClusterRoleBinding",
              "ClusterRoleBinding",
              "ConfigMap",
              "DaemonSet",
              "Deployment",
              "Lease",
              "Role",
              "Role",
              "RoleBinding",
              "RoleBinding",
              "Secret",
              "Service",
              "ServiceAccount",
              "ServiceAccount",
              "ServiceAccount",
            ],
          );
          assert.ok(
            installed.objects.every((o: { uid: string; status: string }) =>
              o.status === "created" && o.uid
            ),
          );

          // The DaemonSet controller makes the pods; the kubelet cannot pull their image. (The
          // signer's pods cannot either: they are not the daemon's, and not counted.)
          const gpuNodes = env.nodes.filter((n) => n.gpu).map((n) => n.name).sort();
          await waitFor("the daemon's pods, pulling", async () => {
            const pods = await admin.request(
              "GET",
              `/api/v1/namespaces/${namespace}/pods?labelSelector=${
                encodeURIComponent("app.kubernetes.io/component=daemon")
              }`,
            );
            const pulling = (pods.body.items ?? []).filter((p: Obj) =>
              /^(ErrImagePull|ImagePullBackOff)$/.test(
                p.status?.containerStatuses?.[0]?.state?.waiting?.reason ?? "",
              )
            );
            return pulling.length === gpuNodes.length ? true : undefined;
          });
          const json = join(dir, "fetch.json");
          const junit = join(dir, "fetch.xml");
          const fetch = await ds(
            "fetch",
            "-o",
            join(dir, "fleet.yaml"),
            "--report",
            json,
            "--junit",
            junit,
          );
          assert.equal(fetch.code, 9, fetch.stderr);
          assert.match(fetch.stderr, /nodes failed \(not-ready\)/);
          assert.doesNotMatch(fetch.stderr, /API server cannot be reached/);
          assertErrorIsLast(fetch.stderr);
          const fetched = JSON.parse(await readFile(json, "utf8"));
          assert.deepEqual(
            fetched.nodes.map((n: { node: string; status: string }) => [n.node, n.status]),
            gpuNodes.map((node) => [node, "not-ready"]),
          );
          assert.equal(fetched.result.exitCode, 9);
          assert.equal(fetched.result.counts["nodes.not-ready"], gpuNodes.length);
          // The cluster's topology was listed (once, as the reader) even with no node ready.
          assert.deepEqual(
            fetched.objects.map((o: { kind: string; status: string }) => [o.kind, o.status]),
            [["NodeTopology", "ok"]],
          );
          const xml = await readFile(junit, "utf8");
          assert.equal(xml.match(/<testcase /g)?.length, gpuNodes.length);
          assert.equal(xml.match(/<failure type="not-ready"/g)?.length, gpuNodes.length);
          for (const node of gpuNodes) assert.match(xml, new RegExp(`name="${node}"`));

          const uninstall = await ds("uninstall", "--report", "-");
          assert.equal(uninstall.code, 0, uninstall.stderr);
          const removed = JSON.parse(uninstall.stdout);
          assert.equal(removed.kind, "DaemonSetUninstallReport");
          const uids = new Set(installed.objects.map((o: { uid: string }) => o.uid));
          const deleted = removed.objects.filter((o: { status: string }) => o.status === "deleted");
          for (const uid of uids) {
            assert.ok(
              deleted.some((o: { uid: string }) => o.uid === uid),
              `object ${uid} reported deleted`,
            );
          }

          const cleanup = await aicr([
            "cleanup",
            "--kubeconfig",
            kubeconfig,
            "-n",
            namespace,
            "--run-id",
            installed.metadata.runId,
            "--report",
            "-",
          ]);
          assert.equal(cleanup.code, 0, cleanup.stderr);
          const swept = JSON.parse(cleanup.stdout);
          assert.equal(swept.kind, "CleanupReport");
          assert.deepEqual(swept.objects, [], "uninstall left nothing for the sweep");
          assert.equal(swept.metadata.runId, installed.metadata.runId);
        },
      );

      /** A copy of a kubeconfig whose current context names a namespace (as kubens leaves it). */
      const withContextNamespace = async (from: string, namespace: string, name: string) => {
        const text = await readFile(from, "utf8");
        const path = join(dir, name);
        await writeFile(
          path,
          text.replace(/(\n {4}context:\n)/, `$1      namespace: ${namespace}\n`),
        );
        return path;
      };

      await t.step(
        "without -n the namespace is the kubeconfig context's; the run, its lines and the gate name it",
        async () => {
          const namespace = await ns("op-ctx");
          const ctx = await withContextNamespace(kubeconfig, namespace, "ctx.kubeconfig");
          const run = await aicr(["snapshot", "--kubeconfig", ctx]);
          assert.equal(run.code, 0, run.stderr);
          assert.match(
            run.stderr,
            new RegExp(`namespace from the kubeconfig context namespace=${namespace} context=`),
          );
          assert.match(run.stderr, new RegExp(`runID=\\S+ namespace=${namespace}`));
          assert.deepEqual(await runObjects(admin, namespace, run.runId!), []);
          // -n still wins over the context.
          const other = await ns("op-ctx-flag");
          const flagged = await aicr(["snapshot", "--kubeconfig", ctx, "-n", other, "--dry-run"]);
          assert.equal(flagged.code, 0, flagged.stderr);
          assert.match(flagged.stdout, new RegExp(`namespace: ${other}\n`));
          assert.doesNotMatch(flagged.stderr, /namespace from the kubeconfig context/);
          // A caller without rights: the gate lists what is missing in the context's namespace.
          const nobody = await withContextNamespace(
            await env.cluster.kubeconfigFor("op-nobody"),
            namespace,
            "nobody.kubeconfig",
          );
          const denied = await aicr(["snapshot", "--kubeconfig", nobody]);
          assert.equal(denied.code, 4, denied.stderr);
          assert.match(denied.stderr, /missing required permissions:/);
          assert.match(
            denied.stderr,
            new RegExp(`cannot "create" jobs\\.batch \\(namespace "${namespace}"\\)`),
          );
          assert.doesNotMatch(denied.stderr, /namespace "default"/);
        },
      );

      await t.step(
        "--dry-run prints the run's seven objects (yaml and json), states its lookups, creates nothing",
        async () => {
          const namespace = await ns("op-dry");
          const before = await aicrObjects(admin, namespace);
          const yaml = await aicr([
            "snapshot",
            "--kubeconfig",
            kubeconfig,
            "-n",
            namespace,
            "--dry-run",
          ]);
          assert.equal(yaml.code, 0, yaml.stderr);
          const docs = parseAllDocuments(yaml.stdout).map((d) => d.toJS());
          assert.deepEqual(docs.map((d) => d.kind), [
            "ServiceAccount",
            "Role",
            "RoleBinding",
            "ClusterRole",
            "ClusterRoleBinding",
            "ConfigMap",
            "Job",
          ]);
          // The staging ConfigMap a run creates before its Job, with the run's labels.
          const staging = docs.at(-2);
          assert.match(staging.metadata.name, /^aicr-agent-snapshot-/);
          assert.equal(staging.metadata.namespace, namespace);
          assert.equal(staging.metadata.labels["app.kubernetes.io/name"], "aicr");
          assert.equal(
            staging.metadata.labels["aicr.run/run-id"],
            docs[0].metadata.labels["aicr.run/run-id"],
          );
          const job = docs.at(-1);
          assert.equal(job.metadata.namespace, namespace);
          // Auto-targeting looked the GPU nodes up, as a run would, and the Job carries the result.
          assert.deepEqual(job.spec.template.spec.nodeSelector, {
            "nvidia.com/gpu.present": "true",
          });
          assert.equal(job.spec.template.spec.serviceAccountName, docs[0].metadata.name);
          assert.match(
            yaml.stderr,
            new RegExp(`dry run: read-only lookup request="get namespace ${namespace}"`),
          );
          assert.match(
            yaml.stderr,
            /read-only lookup request="list nodes -l 'nvidia\.com\/gpu\.present=true,kubernetes\.io\/arch in \(amd64,arm64\)' --limit 1"/,
          );
          assert.match(yaml.stderr, /dry run: nothing was created namespace=\S+ objects=7/);
          assert.doesNotMatch(yaml.stderr, /snapshot agent run: runID=/);
          const json = await aicr([
            "snapshot",
            "--kubeconfig",
            kubeconfig,
            "-n",
            namespace,
            "--dry-run",
            "-t",
            "json",
            "--node-selector",
            "kubernetes.io/hostname=p5-h100-1",
          ]);
          assert.equal(json.code, 0, json.stderr);
          const list = JSON.parse(json.stdout);
          assert.equal(list.kind, "List");
          assert.deepEqual(list.items.at(-1).spec.template.spec.nodeSelector, {
            "kubernetes.io/hostname": "p5-h100-1",
          });
          assert.doesNotMatch(
            json.stderr,
            /list nodes/,
            "no auto-targeting lookup with a selector",
          );
          assert.deepEqual(await aicrObjects(admin, namespace), before, "nothing was created");
          // --offline: no cluster at all (this kubeconfig points at a port nothing listens on).
          const dead = join(dir, "dead.kubeconfig");
          await writeFile(
            dead,
            (await readFile(kubeconfig, "utf8")).replace(
              /server: \S+/,
              "server: https://127.0.0.1:9",
            ),
          );
          const offline = await aicr([
            "snapshot",
            "--kubeconfig",
            dead,
            "-n",
            namespace,
            "--dry-run",
            "--offline",
          ]);
          assert.equal(offline.code, 0, offline.stderr);
          assert.equal(parseAllDocuments(offline.stdout).length, 7);
          assert.match(
            offline.stderr,
            /assumed \(offline\): no node is labelled nvidia\.com\/gpu\.present=true/,
          );
          const reached = await aicr([
            "snapshot",
            "--kubeconfig",
            dead,
            "-n",
            namespace,
            "--dry-run",
          ]);
          assert.equal(reached.code, 6, "without --offline the lookups need the cluster");
        },
      );

      await t.step("--create-namespace creates an absent namespace and keeps it", async () => {
        const name = `op-created-${Date.now().toString(36)}`;
        const missing = await aicr(["snapshot", "--kubeconfig", kubeconfig, "-n", name]);
        assert.equal(missing.code, 3, missing.stderr);
        assert.match(missing.stderr, /pass --create-namespace/);
        namespaces.push(name);
        const run = await aicr([
          "snapshot",
          "--kubeconfig",
          kubeconfig,
          "-n",
          name,
          "--create-namespace",
        ]);
        assert.equal(run.code, 0, run.stderr);
        assert.match(
          run.stderr,
          new RegExp(`created namespace \\(kept after the run\\) namespace=${name}`),
        );
        const created = await admin.request("GET", `/api/v1/namespaces/${name}`);
        assert.equal(created.status, 200);
        assert.equal(created.body.metadata.labels["app.kubernetes.io/managed-by"], "aicr");
        assert.deepEqual(await runObjects(admin, name, run.runId!), []);
      });
    } finally {
      // A failed step may leave an install: its cluster-scoped objects outlive the namespace.
      for (const name of namespaces.filter((n) => n.startsWith("op-ds-"))) {
        await aicr(["daemonset", "uninstall", "--kubeconfig", kubeconfig, "-n", name]);
      }
      await rm(dir, { recursive: true, force: true });
      for (const name of namespaces) await admin.request("DELETE", `/api/v1/namespaces/${name}`);
      await env.stop();
    }
  },
});
