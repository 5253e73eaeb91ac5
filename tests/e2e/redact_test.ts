/**
 * `--redact` end to end on the local cluster: `aicr snapshot --redact` (Job mode), `aicr
 * daemonset fetch --redact` (to a directory, to stdout, with its reports) and `aicr diff
 * --redact` (a pair and a fleet; table, YAML, JSON and HTML) are run by the built binary, and
 * every byte they give back (stdout, stderr, every file written and every file's name) is
 * searched for every node name, node address, pod address, hostname and registry host the API
 * server knows, read from it after the runs. One hit fails the test.
 *
 * The cluster is given what a real one has and the test world lacks: each node a label carrying
 * its address and a hostname, and a GPU operator's ClusterPolicy naming a private registry, so
 * those values reach the snapshots through the real collectors (checked: the same runs without
 * `--redact` carry them). Two redacted snapshots of one node, taken apart, compare clean, and a
 * redacted fleet groups into the same cohorts as the original.
 */
import assert from "node:assert/strict";
import { mkdtemp, readdir, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { parseSnapshot } from "../../snapshot/mod.ts";
import { createNamespace, useTestCluster } from "../cluster/harness.ts";
import type { Obj } from "../kubelet/api.ts";
import { aicr } from "./_aicr.ts";
import {
  clusterOriginals,
  filesOf,
  hits,
  labelNodes,
  type Output,
  outputsOf,
  PRIVATE_REGISTRY,
  seedClusterPolicy,
} from "./_redact_search.ts";

/** A fleet report's shape: its summary, and each cohort's size and groups' sizes. */
function fleetShape(json: string) {
  const doc = JSON.parse(json) as Obj;
  return {
    summary: doc.summary,
    cohorts: (doc.cohorts as Obj[]).map((c) => ({
      size: c.size,
      groups: (c.measurements as Obj[]).map((m) => (m.groups as Obj[]).map((g) => g.size)),
    })),
  };
}

Deno.test({
  name: "aicr --redact: no node name, address, hostname or registry host survives in any output",
  sanitizeOps: false,
  sanitizeResources: false,
  async fn(t) {
    const env = await useTestCluster();
    const { admin } = env;
    const kubeconfig = env.cluster.adminKubeconfig;
    const ns = await createNamespace(admin, "redact-e2e");
    const work = await mkdtemp(join(env.cluster.stateDir, "redact-"));
    const key = join(work, "aicr-redact.key");
    await writeFile(key, btoa(String.fromCharCode(...crypto.getRandomValues(new Uint8Array(32)))));
    const redact = ["--redact", "--redact-key-file", key];
    const gpuNode = env.nodes.find((n) => n.gpu && n.profile.startsWith("p5"))?.name ?? "";
    assert.ok(gpuNode, "an amd64 GPU node");
    const run = (args: string[]) => aicr(args, { cwd: work, deadlineMs: 240_000 });
    const kube = ["--kubeconfig", kubeconfig, "-n", ns];
    /** What the redacted runs gave back, and what the same runs gave without --redact. */
    const redacted: Output[] = [];
    const plain: Output[] = [];
    const seeded = await seedClusterPolicy(admin);
    await labelNodes(admin, env.nodes, true);
    try {
      await t.step("aicr snapshot --redact (Job mode): twice on one node, clean diff", async () => {
        const job = ["snapshot", ...kube, "--node-selector", `kubernetes.io/hostname=${gpuNode}`];
        const a = await run([...job, ...redact, "--timeout", "120s"]);
        redacted.push(...outputsOf("snapshot --redact -o -", a));
        // --log-json: the CLI's records and the agent's relayed ones, redacted alike.
        const b = await run([
          ...job,
          ...redact,
          "--log-json",
          "--timeout",
          "120s",
          "-o",
          "b.json",
          "-t",
          "json",
        ]);
        assert.match(b.stderr, /^\{"time":.*"node":"redacted-[0-9a-f]{12}"/m);
        redacted.push(...outputsOf("snapshot --redact -o b.json", b));
        const bText = await readFile(join(work, "b.json"), "utf8");
        redacted.push({ what: "b.json", text: bText });
        await writeFile(join(work, "a.yaml"), a.stdout);
        const original = await run([...job, "--timeout", "120s", "-o", "plain.yaml"]);
        plain.push(...outputsOf("snapshot", original));
        plain.push({ what: "plain.yaml", text: await readFile(join(work, "plain.yaml"), "utf8") });
        // What is redacted is said in the document, with the key's id.
        const doc = parseSnapshot(a.stdout);
        assert.equal(doc.metadata.redacted, "hostnames,node-names,ip-addresses,registry-hosts");
        assert.match(doc.metadata["redaction-key-id"] ?? "", /^[0-9a-f]{16}$/);
        assert.equal(parseSnapshot(bText).metadata["source-node"], doc.metadata["source-node"]);
        // Two runs apart, one key: the same tokens, so nothing but what changed is drift.
        const same = await run(["diff", "-b", "a.yaml", "--target", "b.json", "--fail-on-drift"]);
        assert.equal(same.code, 0, same.stdout + same.stderr);
        assert.match(same.stdout, /NO DRIFT/);
        // Into a ConfigMap: the agent wrote its own, unredacted; the CLI replaces it.
        const cm = await run([...job, ...redact, "--timeout", "120s", "-o", `cm://${ns}/shared`]);
        redacted.push(...outputsOf("snapshot --redact -o cm://", cm));
        const map = await admin.request("GET", `/api/v1/namespaces/${ns}/configmaps/shared`);
        assert.equal(map.status, 200, JSON.stringify(map.body));
        assert.match(JSON.stringify(map.body.data), /redaction-key-id/);
        redacted.push({ what: "ConfigMap shared", text: JSON.stringify(map.body) });
        // And a redacted snapshot against the original, redacted on the way: no change either.
        const mixed = await run([
          "diff",
          ...redact,
          "-b",
          "plain.yaml",
          "--target",
          "a.yaml",
          "--fail-on-drift",
        ]);
        redacted.push(...outputsOf("diff --redact plain.yaml a.yaml", mixed));
      });

      await t.step("aicr daemonset fetch --redact: directory, stream and reports", async () => {
        const install = await run([
          "daemonset",
          "install",
          ...kube,
          "--image",
          "aicr:dev",
          "--timeout",
          "120s",
        ]);
        assert.equal(install.code, 0, install.stderr);
        const fetch = await run([
          "daemonset",
          "fetch",
          ...kube,
          ...redact,
          "-o",
          "fleet/",
          "--report",
          "fetch-report.json",
          "--junit",
          "fetch-junit.xml",
        ]);
        redacted.push(...outputsOf("daemonset fetch --redact -o fleet/", fetch));
        redacted.push(...await filesOf(join(work, "fleet"), "fleet/"));
        for (const file of ["fetch-report.json", "fetch-junit.xml"]) {
          redacted.push({ what: file, text: await readFile(join(work, file), "utf8") });
        }
        const stream = await run(["daemonset", "fetch", ...kube, ...redact, "-o", "-"]);
        redacted.push(...outputsOf("daemonset fetch --redact -o -", stream));
        const alias = await run(["snapshot", "--from-daemonset", ...kube, ...redact]);
        redacted.push(...outputsOf("snapshot --from-daemonset --redact", alias));
        const original = await run(["daemonset", "fetch", ...kube, "-o", "plain-fleet/"]);
        plain.push(...outputsOf("daemonset fetch", original));
        plain.push(...await filesOf(join(work, "plain-fleet"), "plain-fleet/"));
      });

      await t.step("aicr diff --redact: a pair and a fleet, in every format", async () => {
        const files = (await readdir(join(work, "plain-fleet"))).filter((f) => !f.startsWith("_"));
        const gpuFiles = files.filter((f) =>
          env.nodes.some((n) => n.gpu && f === `${n.name}.yaml`)
        );
        assert.ok(gpuFiles.length >= 2, files.join(" "));
        const [first, second] = gpuFiles.map((f) => `plain-fleet/${f}`) as [string, string];
        for (const format of ["table", "yaml", "json", "html"]) {
          const pair = await run([
            "diff",
            ...redact,
            "-b",
            first,
            "--target",
            second,
            "-t",
            format,
          ]);
          redacted.push(...outputsOf(`diff --redact ${format}`, pair));
          const fleet = await run(["diff", ...redact, "--fleet", "plain-fleet/", "-t", format]);
          redacted.push(...outputsOf(`diff --redact --fleet ${format}`, fleet));
          const original = await run(["diff", "-b", first, "--target", second, "-t", format]);
          plain.push(...outputsOf(`diff ${format}`, original));
          const all = await run(["diff", "--fleet", "plain-fleet/", "-t", format]);
          plain.push(...outputsOf(`diff --fleet ${format}`, all));
        }
        const html = await run([
          "diff",
          ...redact,
          "--fleet",
          "plain-fleet/",
          "--all-readings",
          "-t",
          "html",
          "-o",
          "fleet.html",
        ]);
        redacted.push(...outputsOf("diff --redact --fleet -o fleet.html", html));
        redacted.push({
          what: "fleet.html",
          text: await readFile(join(work, "fleet.html"), "utf8"),
        });
        // A corrupt member, named by its node's file: an unreadable node of the report (exit 9),
        // named by its token in the report and on stderr.
        const broken = await mkdtemp(join(work, "broken-"));
        for (const f of files) {
          await writeFile(join(broken, f), await readFile(join(work, "plain-fleet", f), "utf8"));
        }
        await writeFile(join(broken, `${first.split("/")[1]}`), "{ not: [a snapshot");
        const partial = await run(["diff", ...redact, "--fleet", broken, "-t", "json"]);
        redacted.push(...outputsOf("diff --redact --fleet with a corrupt file", partial, 9));
      });

      await t.step("cohorts group the redacted fleet as the original", async () => {
        // One cohort of every GPU node: which of them share each measurement's configuration.
        const fleet = ["--group-by", "none", "-t", "json"];
        const original = await run(["diff", "--fleet", "plain-fleet/", ...fleet]);
        const fetched = await run(["diff", "--fleet", "fleet/", ...fleet]);
        const onTheWay = await run(["diff", ...redact, "--fleet", "plain-fleet/", ...fleet]);
        for (const r of [original, fetched, onTheWay]) assert.equal(r.code, 0, r.stderr);
        const want = fleetShape(original.stdout);
        assert.equal(want.cohorts[0]?.size, env.nodes.filter((n) => n.gpu).length);
        assert.deepEqual(fleetShape(fetched.stdout), want);
        assert.deepEqual(fleetShape(onTheWay.stdout), want);
        // Redacted by fetch or by diff: one key, the same report.
        assert.equal(
          fetched.stdout.replaceAll("fleet/", ""),
          onTheWay.stdout.replaceAll("plain-fleet/", ""),
        );
      });

      await t.step(
        "no original value survives; the same runs without --redact carry them",
        async () => {
          const originals = await clusterOriginals(admin);
          const kinds = new Set([...originals.values()].flatMap((k) => k.split(", ")));
          for (const kind of ["node name", "node InternalIP", "pod IP", "registry host"]) {
            assert.ok(kinds.has(kind), `the cluster knows a ${kind}: ${[...kinds].join(", ")}`);
          }
          assert.ok(originals.has(PRIVATE_REGISTRY.replace(/:\d+$/, "")));
          assert.deepEqual(hits(redacted, originals), []);
          // Not a vacuous search: the originals are there without --redact.
          const seen = new Set(hits(plain, originals).map((h) => h.split("'")[1]));
          for (const node of env.nodes) {
            assert.ok(seen.has(node.name), `${node.name} in the original outputs`);
            assert.ok(seen.has(node.ip), `${node.ip} in the original outputs`);
            assert.ok(seen.has(`${node.name}.gpu.corp.example`), "the hostname label");
          }
          assert.ok(seen.has(PRIVATE_REGISTRY.replace(/:\d+$/, "")), "the registry host");
        },
      );
    } finally {
      await run(["daemonset", "uninstall", ...kube, "--timeout", "60s"]);
      await labelNodes(admin, env.nodes, false);
      for (const path of seeded) await admin.request("DELETE", path);
      await admin.request("DELETE", `/api/v1/namespaces/${ns}`);
      await env.stop();
    }
  },
});
