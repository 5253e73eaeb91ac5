/**
 * `aicr daemonset` end to end: the built binary installs the DaemonSet, the kubelet stand-in runs
 * its pods (the same binary as `aicr daemon`), the binary fetches every GPU node's snapshot, the
 * daemons refuse a caller without a token (401) and one without the grant (403), and uninstall
 * leaves no object labelled aicr behind, namespaced or cluster-scoped. With `--log-json` every
 * stderr line of a fetch (its table, a warning, its final error) is one JSON object; with `-q` only
 * its error is said, and stdout stays the same.
 *
 * The kubelet stand-in runs no probes (its README), so a pod is Ready once its process runs, not
 * once `/readyz` answers; the test therefore waits on `/readyz` itself, and checks that it never
 * said 200 before the first collection ended.
 */
import assert from "node:assert/strict";
import { mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { networkInterfaces } from "node:os";
import { join } from "node:path";
import { parseNvidiaSmi } from "../../collectors/mod.ts";
import { generateDaemonTls } from "../../x509.ts";
import {
  FLEET_TOPOLOGY_FILE,
  isClusterTopologyDocument,
  parseSnapshot,
  parseSnapshotStream,
} from "../../snapshot/mod.ts";
import type { Snapshot } from "../../snapshot/mod.ts";
import { createNamespace, type TestCluster, useTestCluster, waitFor } from "../cluster/harness.ts";
import type { Api, Obj } from "../kubelet/api.ts";
import { NOT_AICR_IMAGE } from "../kubelet/notaicr.ts";
import { startFaultProxy } from "../faults/proxy.ts";
import { aicr, AICR_BIN, bindsTokensToNodes, httpsGet, mintToken, nodeFixture } from "./_aicr.ts";

function externalIPv4(): string | undefined {
  for (const list of Object.values(networkInterfaces())) {
    for (const address of list ?? []) {
      if (address.family === "IPv4" && !address.internal) return address.address;
    }
  }
  return undefined;
}

const SELECTOR = encodeURIComponent("app.kubernetes.io/name=aicr");
/** The daemon's pods only (the in-cluster signer's pods carry component `signer`). */
const DAEMON_PODS = encodeURIComponent(
  "app.kubernetes.io/name=aicr,app.kubernetes.io/component=daemon",
);

/** A snapshot's NodeTopology: summary, labels, its source, and every node its lists name. */
function topologyOf(snapshot: Snapshot) {
  const topology = snapshot.measurements.find((m) => m.type === "NodeTopology");
  const data = (name: string) => topology?.subtypes.find((s) => s.subtype === name)?.data ?? {};
  const named = new Set<string>();
  for (const name of ["label", "taint"]) {
    for (const value of Object.values(data(name))) {
      const list = String(value).slice(String(value).lastIndexOf("|") + 1);
      for (const node of list.split(",")) if (node) named.add(node);
    }
  }
  return {
    summary: data("summary"),
    label: data("label"),
    context: topology?.subtypes[0]?.context?.source,
    named: [...named].sort(),
  };
}

function gpuData(snapshot: Snapshot) {
  const gpu = snapshot.measurements.find((m) => m.type === "GPU");
  return gpu?.subtypes.map((s) => ({ subtype: s.subtype, data: s.data })) ?? [];
}

/**
 * A token for `sa`; with a node, for that node's daemon: its audience, and bound to the node
 * where the API server binds tokens to Nodes (`bound`; 1.31+).
 */
function mint(
  admin: Api,
  ns: string,
  sa: string,
  node?: string,
  bound = true,
): Promise<string> {
  return mintToken(
    admin,
    ns,
    sa,
    node ? { audiences: [`aicr-daemon:${node}`], ...(bound ? { node } : {}) } : {},
  );
}

/** Every object labelled aicr in the namespace, and every cluster-scoped one naming it. */
async function leftovers(admin: Api, ns: string): Promise<string[]> {
  const namespaced = [
    ["DaemonSet", `/apis/apps/v1/namespaces/${ns}/daemonsets`],
    ["Deployment", `/apis/apps/v1/namespaces/${ns}/deployments`],
    ["Lease", `/apis/coordination.k8s.io/v1/namespaces/${ns}/leases`],
    ["Pod", `/api/v1/namespaces/${ns}/pods`],
    ["ServiceAccount", `/api/v1/namespaces/${ns}/serviceaccounts`],
    ["Secret", `/api/v1/namespaces/${ns}/secrets`],
    ["ConfigMap", `/api/v1/namespaces/${ns}/configmaps`],
    ["Role", `/apis/rbac.authorization.k8s.io/v1/namespaces/${ns}/roles`],
    ["RoleBinding", `/apis/rbac.authorization.k8s.io/v1/namespaces/${ns}/rolebindings`],
  ];
  const cluster = [
    ["ClusterRole", "/apis/rbac.authorization.k8s.io/v1/clusterroles"],
    ["ClusterRoleBinding", "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings"],
  ];
  const found: string[] = [];
  for (const [kind, path] of [...namespaced, ...cluster]) {
    const res = await admin.request("GET", `${path}?labelSelector=${SELECTOR}`);
    assert.equal(res.status, 200, JSON.stringify(res.body));
    for (const item of (res.body.items ?? []) as Obj[]) {
      const name = item.metadata.name as string;
      // Other tests' cluster-scoped aicr objects may exist; this install's names carry its namespace.
      if (cluster.some(([k]) => k === kind) && !name.includes(`-${ns}.`)) continue;
      found.push(`${kind}/${name}`);
    }
  }
  return found;
}

/** A node name no node has: the fetch reports it not-ready (exit 9). */
const ABSENT_NODE = "no-such-node";
const LEVELS = ["debug", "info", "warn", "error"];

/** Every non-empty line of stderr, each one JSON object (fails naming the first that is not). */
function jsonRecords(stderr: string): Record<string, unknown>[] {
  return stderr.split("\n").filter((line) => line !== "").map((line) => {
    let parsed: unknown;
    try {
      parsed = JSON.parse(line);
    } catch {
      throw new Error(`a stderr line is not JSON: ${line}\n--- all of stderr:\n${stderr}`);
    }
    assert.ok(parsed && typeof parsed === "object" && !Array.isArray(parsed), line);
    return parsed as Record<string, unknown>;
  });
}

/** The API server refuses every LIST of Nodes (the fetch's cluster NodeTopology): a warning. */
function refuseNodeList(proxy: Awaited<ReturnType<typeof startFaultProxy>>): void {
  proxy.add({
    method: "GET",
    path: /^\/api\/v1\/nodes(\?|$)/,
    action: {
      kind: "status",
      code: 403,
      body: {
        kind: "Status",
        apiVersion: "v1",
        status: "Failure",
        reason: "Forbidden",
        message: 'nodes is forbidden: cannot list resource "nodes" at the cluster scope',
        code: 403,
      },
    },
  });
}

/**
 * A fetch's stream, what a daemon's next collection keeps: each document's node and scope, its
 * readings' names, and the GPU data (the fixture's). Values such as `/proc/sys/fs/file-nr` change
 * when a daemon collects again between two fetches.
 */
function streamOf(stdout: string) {
  const docs = parseSnapshotStream(stdout);
  assert.ok(docs.length > 0, "a stream of snapshots");
  return docs.map((doc) => ({
    node: doc.metadata["source-node"],
    scope: doc.metadata["topology-scope"],
    readings: doc.measurements.map((m) =>
      `${m.type}: ${m.subtypes.map((s) => `${s.subtype}(${Object.keys(s.data).sort()})`)}`
    ),
    gpu: gpuData(doc),
  }));
}

Deno.test({
  name: "aicr daemonset: install, fetch every GPU node, 401/403, uninstall leaves nothing",
  sanitizeOps: false,
  sanitizeResources: false,
  async fn(t) {
    const env: TestCluster = await useTestCluster();
    const { admin } = env;
    const kubeconfig = env.cluster.adminKubeconfig;
    const ns = await createNamespace(admin, "ds-e2e");
    const out = await mkdtemp(join(env.cluster.stateDir, "ds-out-"));
    const gpuNodes = env.nodes.filter((n) => n.gpu).map((n) => n.name).sort();
    assert.ok(gpuNodes.length >= 2, "the test cluster has several GPU nodes");
    assert.ok(env.nodes.some((n) => !n.gpu), "and CPU nodes");
    // Before 1.31 reader tokens carry their node's audience alone (daemon/README.md).
    const nodeBinding = await bindsTokensToNodes(admin, ns, gpuNodes[0] as string);
    const ds = (...args: string[]) =>
      aicr(["daemonset", ...args, "--kubeconfig", kubeconfig, "-n", ns]);
    try {
      await t.step(
        "a caller without rights gets every missing permission and nothing is created",
        async () => {
          const alice = await env.cluster.kubeconfigFor("alice", ["team-a"]);
          const run = await aicr([
            "daemonset",
            "install",
            "--kubeconfig",
            alice,
            "-n",
            ns,
            "--image",
            "aicr:dev",
          ]);
          assert.equal(run.code, 4, run.stderr);
          assert.match(run.stderr, /missing required permissions:/);
          for (
            const line of [
              `cannot "create" daemonsets.apps (namespace "${ns}")`,
              `cannot "create" secrets (namespace "${ns}")`,
              `cannot "create" clusterroles.rbac.authorization.k8s.io (cluster-scoped)`,
              `cannot "create" tokenreviews.authentication.k8s.io (cluster-scoped)`,
              `cannot "get" snapshots.aicr.run (cluster-scoped)`,
            ]
          ) assert.ok(run.stderr.includes(line), `missing line: ${line}\n${run.stderr}`);
          assert.deepEqual(await leftovers(admin, ns), []);
        },
      );

      await t.step(
        "NVIDIA's image (its Go aicr exits on the daemon verb) is named, rolled back (exit 8)",
        async () => {
          // Its stand-in has amd64 only: said so, the pods stay off the arm64 GPU node.
          const run = await ds(
            "install",
            "--image",
            NOT_AICR_IMAGE,
            "--image-platforms",
            "linux/amd64",
            "--timeout",
            "90s",
          );
          assert.equal(run.code, 8, run.stderr);
          assert.match(
            run.stderr,
            /the daemon leaves out the nodes of an architecture the image lacks nodes="[^"]*p6-gb200-1 \(arm64\)[^"]*" image=ghcr\.io\/nvidia\/aicr:v0\.11\.1 architectures=amd64/,
          );
          assert.match(
            run.stderr,
            /the daemon that ran on node 'p5-h100-1' is NVIDIA's Go aicr: it exited 1 on the 'daemon' verb \('.*flag provided but not defined: -port.*'\): the image 'ghcr\.io\/nvidia\/aicr:v0\.11\.1' is not this build's/,
          );
          assert.match(run.stderr, /aicr image push REGISTRY\/REPO/);
          // The rollback deleted the DaemonSet; its pods go with it (the garbage collector).
          await waitFor(
            "the rolled-back daemon's pods gone",
            async () => (await leftovers(admin, ns)).length === 0 ? true : undefined,
          );
        },
      );

      let installedAt = 0;
      let pods: Obj[] = [];
      await t.step("install places one daemon on each GPU node and nowhere else", async () => {
        const run = await ds("install", "--image", "aicr:dev", "--timeout", "90s");
        assert.equal(run.code, 0, run.stderr);
        assert.match(run.stderr, /daemon ready/);
        installedAt = Date.now();
        const list = await admin.request(
          "GET",
          `/api/v1/namespaces/${ns}/pods?labelSelector=${DAEMON_PODS}`,
        );
        pods = list.body.items as Obj[];
        assert.deepEqual(pods.map((p) => p.spec.nodeName).sort(), gpuNodes);
        // Install waited for Ready, which the readiness probe on /readyz decides: every daemon
        // answers 200 right away.
        const ca = await caOf(admin, ns);
        for (const p of pods) {
          const url = `https://${p.status.podIP}:${
            p.spec.containers[0].ports[0].containerPort
          }/readyz`;
          // Each daemon's own certificate, naming its node.
          const res = await httpsGet(url, { ca, servername: p.spec.nodeName });
          assert.equal(res.status, 200, `${p.spec.nodeName}: ${res.body}`);
        }
      });

      await t.step(
        "fetch writes each GPU node's snapshot, its GPU data its own fixture",
        async () => {
          const dir = join(out, "fleet") + "/";
          const run = await ds("fetch", "-o", dir);
          assert.equal(run.code, 0, run.stderr);
          assert.match(run.stderr, /NODE\s+STATUS\s+TRANSPORT/);
          for (const node of gpuNodes) {
            assert.match(run.stderr, new RegExp(`${node}\\s+ok\\s+direct`));
          }
          // The node files, and the cluster's topology once beside them.
          assert.deepEqual(
            (await readdir(dir)).sort(),
            [...gpuNodes.map((n) => `${n}.yaml`), FLEET_TOPOLOGY_FILE].sort(),
          );
          assert.match(run.stderr, new RegExp(`topology=.${env.nodes.length} nodes`));
          for (const node of gpuNodes) {
            const snapshot = parseSnapshot(await readFile(join(dir, `${node}.yaml`), "utf8"));
            assert.equal(snapshot.metadata["source-node"], node);
            const want = parseNvidiaSmi(nodeFixture(env.cluster.stateDir, node))
              .map((s) => ({ subtype: s.subtype, data: s.data }));
            assert.deepEqual(gpuData(snapshot), want, `GPU data of ${node}`);
            // Each daemon reports its own Node only, and says so.
            assert.equal(snapshot.metadata["topology-scope"], "node");
            const own = topologyOf(snapshot);
            assert.equal(own.summary["node-count"], 1);
            assert.equal(own.summary.scope, "node");
            assert.equal(own.context, `GET /api/v1/nodes/${node}`);
            assert.equal(own.label["kubernetes.io/hostname"], `${node}|${node}`);
            assert.deepEqual(own.named, [node], `${node} names only itself`);
          }
          const cluster = parseSnapshot(await readFile(join(dir, FLEET_TOPOLOGY_FILE), "utf8"));
          assert.equal(cluster.metadata["topology-scope"], "cluster");
          assert.equal(cluster.metadata["source-node"], "");
          assert.deepEqual(cluster.measurements.map((m) => m.type), ["NodeTopology"]);
          const all = topologyOf(cluster);
          assert.equal(all.summary["node-count"], env.nodes.length);
          assert.equal(all.context, "LIST /api/v1/nodes");
          // Every node of the cluster, CPU nodes included: one LIST, not the daemons' nodes.
          assert.deepEqual(all.named, env.nodes.map((n) => n.name).sort());
          // What aicr diff --fleet compares.
          const diff = await aicr(["diff", "--fleet", dir]);
          assert.equal(diff.code, 0, diff.stderr);
          assert.match(diff.stdout, new RegExp(`^FLEET \\(${gpuNodes.length} nodes`));
          const stream = await ds("fetch", "-o", "-");
          assert.equal(stream.code, 0, stream.stderr);
          const docs = parseSnapshotStream(stream.stdout);
          // The topology document last, once.
          assert.equal(docs.at(-1)?.metadata["topology-scope"], "cluster");
          assert.deepEqual(
            docs.slice(0, -1).map((d) => d.metadata["source-node"]).sort(),
            gpuNodes,
          );
          const noTopology = await ds("fetch", "--no-topology", "-o", "-");
          assert.equal(noTopology.code, 0, noTopology.stderr);
          assert.deepEqual(
            parseSnapshotStream(noTopology.stdout).map((d) => d.metadata["source-node"]).sort(),
            gpuNodes,
          );
          // The alias: aicr snapshot --from-daemonset.
          const alias = await aicr([
            "snapshot",
            "--from-daemonset",
            "--kubeconfig",
            kubeconfig,
            "-n",
            ns,
          ]);
          assert.equal(alias.code, 0, alias.stderr);
          assert.deepEqual(
            parseSnapshotStream(alias.stdout).filter((d) => !isClusterTopologyDocument(d))
              .map((d) => d.metadata["source-node"]).sort(),
            gpuNodes,
          );
        },
      );

      /** `daemonset fetch` of every GPU node and one absent node, through a fault proxy. */
      const fetchThrough = (proxy: { kubeconfig: string }, ...args: string[]) =>
        aicr([
          ...args,
          "daemonset",
          "fetch",
          "--kubeconfig",
          proxy.kubeconfig,
          "-n",
          ns,
          "-o",
          "-",
          ...[...gpuNodes, ABSENT_NODE].flatMap((node) => ["--node", node]),
        ]);

      await t.step(
        "--log-json: every stderr line of fetch is one JSON object, table, warning and error included",
        async () => {
          const proxy = await startFaultProxy(env.cluster);
          try {
            refuseNodeList(proxy);
            const run = await fetchThrough(proxy, "--log-json");
            // An absent node: incomplete (exit 9); the ok nodes' snapshots are written anyway.
            assert.equal(run.code, 9, run.stderr);
            assert.deepEqual(
              parseSnapshotStream(run.stdout).filter((d) => !isClusterTopologyDocument(d))
                .map((d) => d.metadata["source-node"]).sort(),
              gpuNodes,
            );
            const records = jsonRecords(run.stderr);
            for (const record of records) {
              assert.ok(!Number.isNaN(Date.parse(String(record.time))), JSON.stringify(record));
              assert.ok(LEVELS.includes(String(record.level)), JSON.stringify(record));
              assert.equal(typeof record.msg, "string", JSON.stringify(record));
            }
            // The per-node table: one info line per row, its header too.
            const info = records.filter((r) => r.level === "info").map((r) => String(r.msg));
            assert.ok(info.some((m) => /^NODE\s+STATUS\s+TRANSPORT/.test(m)), run.stderr);
            for (const node of gpuNodes) {
              assert.ok(info.some((m) => new RegExp(`^${node}\\s+ok\\s+direct`).test(m)), node);
            }
            assert.ok(info.some((m) => new RegExp(`^${ABSENT_NODE}\\s+not-ready`).test(m)));
            // The warning, its fields as fields.
            const warning = records.find((r) => r.level === "warn");
            assert.equal(
              warning?.msg,
              "cannot list the nodes for the cluster's NodeTopology; the node snapshots are kept",
              run.stderr,
            );
            assert.equal(warning?.status, "denied", run.stderr);
            assert.match(String(warning?.remedy), /^grant 'list nodes' to ServiceAccount /);
            // The error the run ends with: the last line, with its details and exit code.
            const last = records.at(-1);
            assert.equal(last?.level, "error", run.stderr);
            assert.equal(
              last?.msg,
              `Cannot fetch every node's snapshot: 1 of ${
                gpuNodes.length + 1
              } nodes failed (not-ready)`,
            );
            assert.equal(last?.exitCode, 9);
            assert.match(String((last?.details as string[])?.[0]), /^1 node\(s\) have no Ready/);
            assert.equal(records.filter((r) => r.level === "error").length, 1, run.stderr);
          } finally {
            await proxy.stop();
          }
        },
      );

      await t.step(
        "-q: fetch says no info or warning line, only its error; stdout is unchanged",
        async () => {
          // Without a fault: nothing at all on stderr, the same snapshots on stdout.
          const loud = await ds("fetch", "-o", "-");
          assert.equal(loud.code, 0, loud.stderr);
          assert.match(loud.stderr, /NODE\s+STATUS\s+TRANSPORT/);
          const quiet = await ds("fetch", "-q", "-o", "-");
          assert.equal(quiet.code, 0, quiet.stderr);
          assert.equal(quiet.stderr, "", "no table, no info line");
          assert.deepEqual(streamOf(quiet.stdout), streamOf(loud.stdout));
          // A warning and a failed node: the error alone on stderr, as text and as JSON.
          const proxy = await startFaultProxy(env.cluster);
          try {
            refuseNodeList(proxy);
            const faulted = (...args: string[]) => fetchThrough(proxy, ...args);
            const said = await faulted();
            assert.equal(said.code, 9, said.stderr);
            assert.match(said.stderr, /^WARN cannot list the nodes/m);
            const run = await faulted("-q");
            assert.equal(run.code, 9, run.stderr);
            assert.deepEqual(streamOf(run.stdout), streamOf(said.stdout));
            assert.deepEqual(run.stderr.split("\n").filter((l) => l !== ""), [
              `error: Cannot fetch every node's snapshot: 1 of ${
                gpuNodes.length + 1
              } nodes failed (not-ready)`,
              "  1 node(s) have no Ready daemon pod: wait and fetch again, or see why with 'kubectl describe pod' on the pods named above",
            ]);
            const json = await faulted("-q", "--log-json");
            assert.equal(json.code, 9, json.stderr);
            const records = jsonRecords(json.stderr);
            assert.deepEqual(records.map((r) => [r.level, r.exitCode]), [["error", 9]]);
          } finally {
            await proxy.stop();
          }
        },
      );

      await t.step(
        "SIGTERM while nodes are fetched: exit 130, no healthy node reported as timed-out",
        async () => {
          // The reader tokens of the nodes are held 3 s by a proxy: the signal lands mid-fetch.
          const proxy = await startFaultProxy(env.cluster);
          try {
            let reached: () => void = () => {};
            const inFetch = new Promise<void>((resolve) => (reached = resolve));
            proxy.add({
              method: "POST",
              path: /\/serviceaccounts\/[^/]+\/token/,
              action: { kind: "delay", ms: 3000 },
              onMatch: () => reached(),
            });
            let sent = false;
            const run = aicr(
              [
                "--debug",
                "daemonset",
                "fetch",
                "--kubeconfig",
                proxy.kubeconfig,
                "-n",
                ns,
                "-o",
                "-",
              ],
              {
                deadlineMs: 60_000,
                // Once: a second signal is left to the default handler (main() in mod.ts).
                onStderr: (_text, kill) => {
                  if (sent) return;
                  sent = true;
                  void inFetch.then(() => setTimeout(() => kill("SIGTERM"), 300));
                },
              },
            );
            const done = await run;
            assert.equal(done.code, 130, done.stderr);
            assert.match(
              done.stderr,
              /^error: Cannot fetch every node's snapshot: interrupted \(Error: received SIGTERM\)$/m,
            );
            assert.doesNotMatch(done.stderr, /timed-out/, "no node is said to have timed out");
          } finally {
            await proxy.stop();
          }
        },
      );

      await t.step(
        "the daemon may get Nodes but not list them; the reader may list them (the fetch's one LIST)",
        async () => {
          const may = async (account: string, verb: string) => {
            const review = await admin.request(
              "POST",
              "/apis/authorization.k8s.io/v1/subjectaccessreviews",
              {
                apiVersion: "authorization.k8s.io/v1",
                kind: "SubjectAccessReview",
                spec: {
                  user: `system:serviceaccount:${ns}:${account}`,
                  groups: ["system:serviceaccounts", `system:serviceaccounts:${ns}`],
                  resourceAttributes: { verb, resource: "nodes" },
                },
              },
            );
            return review.body.status?.allowed === true;
          };
          assert.equal(await may("aicr-daemon", "get"), true);
          assert.equal(await may("aicr-daemon", "list"), false);
          assert.equal(await may("aicr-reader", "list"), true);
          assert.equal(await may("aicr-reader", "get"), false);
        },
      );

      await t.step(
        "every pod turned Ready (its /readyz probe) only after its first collection ended",
        async () => {
          const ca = await caOf(admin, ns);
          for (const p of pods) {
            const url = `https://${p.status.podIP}:${
              p.spec.containers[0].ports[0].containerPort
            }/v1/snapshot`;
            const reader = await mint(admin, ns, "aicr-reader", p.spec.nodeName, nodeBinding);
            const res = await httpsGet(url, { ca, servername: p.spec.nodeName, token: reader });
            assert.equal(res.status, 200, res.body);
            // Within --max-age (60 s) this is still the first collection, and it ended before
            // install saw the pod Ready.
            const collectedAt = Date.parse(String(res.headers["x-aicr-collected-at"]));
            assert.ok(Number.isFinite(collectedAt), "X-Aicr-Collected-At is a time");
            const readyAt = installedAt;
            assert.ok(
              collectedAt <= readyAt + 1000,
              `${p.spec.nodeName}: ready at ${readyAt}, collected at ${collectedAt}`,
            );
          }
        },
      );

      await t.step(
        "no token is 401, another ServiceAccount's token is 403, the reader's 200",
        async () => {
          const ca = await caOf(admin, ns);
          const p = pods[0] as Obj;
          const url = `https://${p.status.podIP}:${
            p.spec.containers[0].ports[0].containerPort
          }/v1/snapshot`;
          const servername = p.spec.nodeName as string;
          const none = await httpsGet(url, { ca, servername });
          assert.equal(none.status, 401, none.body);
          const other = await mint(admin, ns, "default", servername, nodeBinding);
          const denied = await httpsGet(url, { ca, servername, token: other });
          assert.equal(denied.status, 403, denied.body);
          assert.match(
            JSON.parse(denied.body).message,
            new RegExp(
              `User "system:serviceaccount:${ns}:default" cannot get resource "snapshots"`,
            ),
          );
          const reader = await mint(admin, ns, "aicr-reader", servername, nodeBinding);
          assert.equal((await httpsGet(url, { ca, servername, token: reader })).status, 200);
          // A certificate from another CA is refused by the client: the published CA is what counts.
          const clusterCa = await readFile(env.cluster.caFile, "utf8");
          await assert.rejects(httpsGet(url, { ca: clusterCa, servername }));
        },
      );

      await t.step(
        "through the pod proxy the loopback nodes are unreachable, each said so",
        async () => {
          // The API server refuses to proxy to 127.x pod IPs (daemon/README.md): the API answered,
          // the nodes did not: exit 9 (incomplete), never 6 (API unavailable); each node said so.
          const run = await ds("fetch", "--transport", "proxy", "-o", "-");
          assert.equal(run.code, 9, run.stderr);
          for (const node of gpuNodes) {
            assert.match(
              run.stderr,
              new RegExp(`${node}\\s+unreachable\\s+proxy\\s+.*address not allowed`),
            );
          }
          // No node's snapshot: the cluster's topology alone (the API answered the LIST).
          assert.deepEqual(
            parseSnapshotStream(run.stdout).map((d) => d.metadata["topology-scope"]),
            ["cluster"],
          );
        },
      );

      await t.step({
        name: "through the pod proxy a daemon on a routable address answers the fetch",
        // The pod proxy refuses loopback pod IPs; a daemon on this machine's own address is
        // reached through it (a pod object points there: no kubelet runs it).
        ignore: externalIPv4() === undefined,
        fn: async () => {
          const ip = externalIPv4() as string;
          const port = 30_000 + Math.floor(Math.random() * 20_000);
          const dir = await mkdtemp(join(out, "proxied-"));
          // Through the proxy the API server does not verify the daemon's certificate (README):
          // a throwaway one serves. What the fetch checks there is the snapshot's source-node.
          const tls = generateDaemonTls({ dnsNames: ["proxied-node"], now: new Date() });
          await writeFile(join(dir, "tls.crt"), tls.cert);
          await writeFile(join(dir, "tls.key"), tls.key);
          // The daemon's own credential: the API server's audience.
          const token = await mint(admin, ns, "aicr-daemon");
          await writeFile(
            join(dir, "kubeconfig"),
            [
              "apiVersion: v1",
              "kind: Config",
              `clusters: [{name: c, cluster: {server: ${env.cluster.server}, certificate-authority: ${env.cluster.caFile}}}]`,
              `users: [{name: u, user: {token: ${token}}}]`,
              "contexts: [{name: x, context: {cluster: c, user: u}}]",
              "current-context: x",
              "",
            ].join("\n"),
          );
          const daemon = new Deno.Command(AICR_BIN, {
            args: [
              "daemon",
              "--listen",
              ip,
              "--port",
              String(port),
              "--tls-cert-file",
              join(dir, "tls.crt"),
              "--tls-key-file",
              join(dir, "tls.key"),
              "--token-audience",
              "aicr-daemon:proxied-node",
              // As install sets it: only where the API server binds tokens to Nodes.
              ...(nodeBinding ? ["--require-node-bound-token"] : []),
              "--kubeconfig",
              join(dir, "kubeconfig"),
              "--node-name",
              "proxied-node",
            ],
            clearEnv: true,
            env: { PATH: Deno.env.get("PATH") ?? "/usr/bin:/bin" },
            stdout: "null",
            stderr: "piped",
          }).spawn();
          const pods = `/api/v1/namespaces/${ns}/pods`;
          // The daemon is ended in `finally` whatever fails from here on.
          try {
            // Reader tokens are bound to their node: the proxied pod's node must exist as an object.
            const node = await admin.request("POST", "/api/v1/nodes", {
              metadata: { name: "proxied-node" },
            });
            assert.equal(node.status, 201, JSON.stringify(node.body));
            // A controller owner of its own keeps the DaemonSet controller from adopting (and then
            // deleting) a pod of its selector on a node it does not target.
            const owner = await admin.request("POST", `/api/v1/namespaces/${ns}/configmaps`, {
              metadata: { name: "proxied-owner" },
            });
            assert.equal(owner.status, 201, JSON.stringify(owner.body));
            const created = await admin.request("POST", pods, {
              metadata: {
                name: "proxied",
                ownerReferences: [{
                  apiVersion: "v1",
                  kind: "ConfigMap",
                  name: "proxied-owner",
                  uid: owner.body.metadata.uid,
                  controller: true,
                }],
                labels: {
                  "app.kubernetes.io/name": "aicr",
                  "app.kubernetes.io/component": "daemon",
                  "app.kubernetes.io/instance": "aicr-daemon",
                },
              },
              spec: {
                nodeName: "proxied-node",
                containers: [{ name: "aicr", image: "aicr:dev", ports: [{ containerPort: port }] }],
              },
            });
            assert.equal(created.status, 201, JSON.stringify(created.body));
            const status = await admin.request("PATCH", `${pods}/proxied/status`, {
              status: {
                phase: "Running",
                podIP: ip,
                podIPs: [{ ip }],
                conditions: [{ type: "Ready", status: "True" }],
              },
            }, "application/merge-patch+json");
            assert.equal(status.status, 200, JSON.stringify(status.body));
            await waitFor("the proxied daemon ready", async () => {
              const res = await httpsGet(`https://${ip}:${port}/readyz`, {
                ca: tls.caCert,
                servername: "proxied-node",
              }).catch(() => undefined);
              return res?.status === 200 ? true : undefined;
            }, 60_000);
            const run = await ds(
              "fetch",
              "--transport",
              "proxy",
              "--node",
              "proxied-node",
              "-o",
              "-",
            );
            assert.equal(run.code, 0, run.stderr);
            assert.match(run.stderr, /proxied-node\s+ok\s+proxy/);
            // Before 1.31 the fetch says its tokens carry their node's audience alone.
            assert.equal(/cannot bind tokens to a Node/.test(run.stderr), !nodeBinding, run.stderr);
            const docs = parseSnapshotStream(run.stdout).filter((d) =>
              !isClusterTopologyDocument(d)
            );
            assert.deepEqual(docs.map((d) => d.metadata["source-node"]), ["proxied-node"]);
          } finally {
            try {
              daemon.kill("SIGTERM");
            } catch {
              // It exited already (its status is read next).
            }
            await daemon.status;
            await daemon.stderr.cancel().catch(() => {});
            await admin.request("DELETE", `${pods}/proxied`, {
              apiVersion: "v1",
              kind: "DeleteOptions",
              gracePeriodSeconds: 0,
            });
            await admin.request("DELETE", `/api/v1/namespaces/${ns}/configmaps/proxied-owner`);
            await admin.request("DELETE", "/api/v1/nodes/proxied-node");
            await rm(dir, { recursive: true, force: true });
          }
        },
      });

      await t.step(
        "--all-nodes in a second namespace serves every node; removing it spares the first install",
        async () => {
          const ns2 = await createNamespace(admin, "ds-e2e-all");
          const first = await leftovers(admin, ns);
          try {
            const all = (...args: string[]) =>
              aicr(["daemonset", ...args, "--kubeconfig", kubeconfig, "-n", ns2]);
            // Host networking: the first install holds 8443 on the GPU nodes' addresses.
            const install = await all(
              "install",
              "--image",
              "aicr:dev",
              "--all-nodes",
              "--port",
              "8444",
            );
            assert.equal(install.code, 0, install.stderr);
            const run = await all("fetch", "-o", "-");
            assert.equal(run.code, 0, run.stderr);
            const docs = parseSnapshotStream(run.stdout).filter((d) =>
              !isClusterTopologyDocument(d)
            );
            const every = env.nodes.map((n) => n.name).sort();
            assert.deepEqual(docs.map((d) => d.metadata["source-node"]).sort(), every);
            for (const doc of docs) {
              const node = doc.metadata["source-node"];
              const isGpu = gpuNodes.includes(node);
              const smi = gpuData(doc).find((s) => s.subtype === "smi")?.data;
              // A CPU node's daemon reports nvidia-smi absent: zero GPUs.
              assert.equal(smi?.["gpu-count"], isGpu ? 8 : 0, `${node}: its own GPU count`);
            }
            const uninstall = await all("uninstall");
            assert.equal(uninstall.code, 0, uninstall.stderr);
            assert.deepEqual(await leftovers(admin, ns2), []);
            assert.deepEqual(await leftovers(admin, ns), first, "the first install is untouched");
          } finally {
            await aicr(["daemonset", "uninstall", "--kubeconfig", kubeconfig, "-n", ns2]);
            await admin.request("DELETE", `/api/v1/namespaces/${ns2}`);
          }
        },
      );

      await t.step("a second install is a conflict and changes nothing", async () => {
        const before = await leftovers(admin, ns);
        const run = await ds("install", "--image", "aicr:dev");
        assert.equal(run.code, 2, run.stderr);
        assert.match(run.stderr, /already installed/);
        assert.deepEqual(await leftovers(admin, ns), before);
      });

      await t.step(
        "uninstall --dry-run says what it would delete and deletes nothing",
        async () => {
          const before = await leftovers(admin, ns);
          assert.ok(before.length > 0);
          const run = await ds("uninstall", "--dry-run");
          assert.equal(run.code, 0, run.stderr);
          const wouldDelete = run.stderr.split("\n").filter((l) =>
            l.includes("would delete kind=")
          );
          assert.ok(wouldDelete.some((l) => l.includes("kind=DaemonSet")), run.stderr);
          assert.ok(wouldDelete.some((l) => l.includes("kind=ClusterRole ")), run.stderr);
          assert.match(
            run.stderr,
            /dry run: the uninstall would delete these objects; nothing was deleted .*objects=\d+/,
          );
          assert.doesNotMatch(run.stderr, /uninstalled|deleted=/);
          assert.deepEqual(await leftovers(admin, ns), before);
        },
      );

      await t.step("uninstall removes every object, namespaced and cluster-scoped", async () => {
        const run = await ds("uninstall");
        assert.equal(run.code, 0, run.stderr);
        assert.match(run.stderr, /uninstalled/);
        assert.deepEqual(await leftovers(admin, ns), []);
        const again = await ds("uninstall");
        assert.equal(again.code, 0, again.stderr);
        assert.match(again.stderr, /nothing was installed/);
      });
    } finally {
      await aicr(["daemonset", "uninstall", "--kubeconfig", kubeconfig, "-n", ns]);
      await admin.request("DELETE", `/api/v1/namespaces/${ns}`);
      await rm(out, { recursive: true, force: true });
      await env.stop();
    }
  },
});

async function caOf(admin: Api, ns: string): Promise<string> {
  const cm = await admin.request("GET", `/api/v1/namespaces/${ns}/configmaps/aicr-daemon-ca`);
  assert.equal(cm.status, 200, JSON.stringify(cm.body));
  return cm.body.data["ca.crt"] as string;
}
