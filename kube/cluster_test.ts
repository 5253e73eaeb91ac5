/**
 * The REST transport against the real test cluster: every write is sent with
 * `fieldValidation=Strict`, so a field the server does not know is an error naming it
 * (never silently dropped), and each `Warning` header reaches `onWarning` with the object.
 *
 * Runs when `AICR_CLUSTER_DIR` names a running cluster (the full `deno task test` run
 * sets it); skipped in unit runs.
 */
import assert from "node:assert/strict";
import process from "node:process";
import { createNamespace, useTestCluster } from "../tests/cluster/harness.ts";
import { connectKube, createKubeClient } from "./client.ts";
import { KubeApiError } from "./errors.ts";
import type { RestClient } from "./rest.ts";

const ENABLED = process.env.AICR_CLUSTER_DIR !== undefined;

Deno.test({
  name: "kube: writes are strict about unknown fields and turn Warning headers into callbacks",
  ignore: !ENABLED,
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    const env = await useTestCluster();
    const ns = await createNamespace(env.admin, "kube-strict");
    const warnings: { warning: string; object: string }[] = [];
    try {
      const kube = connectKube({ kubeconfig: env.cluster.adminKubeconfig }, () => undefined, {
        onWarning: (warning, object) => warnings.push({ warning, object }),
      });
      // A ConfigMap carrying a field the server does not know: refused, naming the field.
      await assert.rejects(
        kube.create("ConfigMap", {
          metadata: { name: "unknown-field", namespace: ns },
          data: { a: "1" },
          spec: { newerThanThisCluster: true },
        } as never),
        (e) =>
          e instanceof KubeApiError && e.status === 400 &&
          /unknown field "spec"/.test(e.message),
      );
      assert.equal(await kube.get("ConfigMap", ns, "unknown-field"), undefined, "nothing created");
      // The same write with the server's own validation asked for Warn: the header is told.
      await kube.rest.json({
        method: "POST",
        path: `/api/v1/namespaces/${ns}/configmaps`,
        query: { fieldValidation: "Warn" },
        body: {
          apiVersion: "v1",
          kind: "ConfigMap",
          metadata: { name: "warned" },
          data: { a: "1" },
          spec: { newerThanThisCluster: true },
        },
      });
      assert.equal(warnings.length, 1, JSON.stringify(warnings));
      assert.match(warnings[0]!.warning, /unknown field "spec"/);
      assert.equal(warnings[0]!.object, `POST /api/v1/namespaces/${ns}/configmaps name=warned`);
      // A clean write warns of nothing.
      await kube.applyConfigMap(ns, "clean", { labels: {}, data: { a: "1" } });
      assert.equal(warnings.length, 1);
    } finally {
      await env.admin.request("DELETE", `/api/v1/namespaces/${ns}`);
      await env.stop();
    }
  },
});

Deno.test({
  name:
    "kube: discovery from the aggregated answers equals discovery group version by group version",
  ignore: !ENABLED,
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    const env = await useTestCluster();
    try {
      const kube = connectKube({ kubeconfig: env.cluster.adminKubeconfig }, () => undefined);
      const paths: string[] = [];
      const seen = (rest: RestClient, legacy: boolean): RestClient => ({
        ...rest,
        json: (request) => {
          paths.push(request.path);
          // An older server: it ignores the aggregated Accept and answers the legacy lists.
          const { accept: _accept, ...plain } = request;
          return rest.json(legacy ? plain : request);
        },
      });
      const key = (r: { group: string; version: string; plural: string }) =>
        `${r.group}/${r.version}/${r.plural}`;
      const aggregated = await createKubeClient(seen(kube.rest, false)).discoverResources();
      assert.deepEqual(paths, ["/api", "/apis"], "two reads");
      paths.length = 0;
      const legacy = await createKubeClient(seen(kube.rest, true)).discoverResources();
      assert.ok(paths.length > 10, `one read per group version: ${paths.join(" ")}`);
      assert.ok(aggregated.some((r) => key(r) === "batch/v1/jobs" && r.kind === "Job"));
      assert.ok(aggregated.some((r) => key(r) === "/v1/pods" && r.namespaced));
      assert.deepEqual(
        [...aggregated].sort((a, b) => key(a).localeCompare(key(b))),
        [...legacy].sort((a, b) => key(a).localeCompare(key(b))),
      );
    } finally {
      await env.stop();
    }
  },
});

Deno.test({
  name:
    "kube: the real API server answers each PING: a watch silent for several idle bounds is kept on its one HTTP/2 connection",
  ignore: !ENABLED,
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    const env = await useTestCluster();
    const ns = await createNamespace(env.admin, "kube-ping");
    const stop = new AbortController();
    try {
      let pings = 0;
      const connections: string[] = [];
      // Short bounds, so a test shows in seconds what every command does after 30 s of silence.
      const kube = connectKube({ kubeconfig: env.cluster.adminKubeconfig }, () => undefined, {
        onConnect: (info) => connections.push(info.protocol),
        h2: { idleMs: 200, pingTimeoutMs: 2000, onPing: () => pings++ },
      });
      const watch = await kube.watch("ConfigMap", ns, {
        fieldSelector: "metadata.name=after-silence",
        signal: stop.signal,
      });
      const added = (async () => {
        for await (const event of watch) {
          if (event.type === "ADDED") return event.object.metadata?.name;
        }
        return "the watch ended";
      })();
      await new Promise((resolve) => setTimeout(resolve, 1500));
      await kube.applyConfigMap(ns, "after-silence", { labels: {}, data: { a: "1" } });
      let timer: ReturnType<typeof setTimeout> | undefined;
      const name = await Promise.race([
        added,
        new Promise((resolve) => timer = setTimeout(() => resolve("no event within 10 s"), 10_000)),
      ]).finally(() => clearTimeout(timer));

      assert.equal(name, "after-silence", "the watch outlived its silence");
      assert.ok(pings >= 3, `${pings} PINGs answered by kube-apiserver in 1.5 s of silence`);
      assert.deepEqual(connections, ["h2"], "one connection for the watch and the write");
    } finally {
      stop.abort();
      await env.admin.request("DELETE", `/api/v1/namespaces/${ns}`);
      await env.stop();
    }
  },
});
