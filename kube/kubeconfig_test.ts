import assert from "node:assert/strict";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Buffer } from "node:buffer";
import type https from "node:https";
import { UsageError } from "../errors.ts";
import {
  bearerConnection,
  inClusterConnection,
  isNativelyCovered,
  loadKubeConfig,
  nativeConnection,
} from "./connection.ts";
import type { KubeConnection } from "./connection.ts";
import { mergeKubeConfigs, selectContext } from "./kubeconfig.ts";
import type { KubeConfigFile } from "./kubeconfig.ts";

const b64 = (s: string) => Buffer.from(s).toString("base64");

/** The options one request would carry. */
async function applied(connection: KubeConnection): Promise<https.RequestOptions> {
  const options: https.RequestOptions = {};
  await connection.apply(options);
  return options;
}

async function withDir(fn: (dir: string) => Promise<void>): Promise<void> {
  const dir = await mkdtemp(join(tmpdir(), "aicr-kubeconfig-"));
  try {
    await fn(dir);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** A kind/kubeadm admin kubeconfig: everything inline as base64 data. */
const KIND_ADMIN = {
  apiVersion: "v1",
  kind: "Config",
  clusters: [{
    name: "kind-gpu",
    cluster: {
      server: "https://127.0.0.1:36443/",
      "certificate-authority-data": b64("CA PEM"),
    },
  }],
  users: [{
    name: "kind-gpu",
    user: {
      "client-certificate-data": b64("CERT PEM"),
      "client-key-data": b64("KEY PEM"),
    },
  }],
  contexts: [{ name: "kind-gpu", context: { cluster: "kind-gpu", user: "kind-gpu" } }],
  "current-context": "kind-gpu",
  preferences: {},
};

Deno.test("nativeConnection() carries a kind admin's inline CA and client certificate, and no token", async () => {
  const selected = selectContext(
    mergeKubeConfigs([{ path: "/home/op/.kube/config", document: KIND_ADMIN }]),
    undefined,
  );
  assert.equal(isNativelyCovered(selected), true);
  const connection = nativeConnection(selected);
  assert.equal(connection.server, "https://127.0.0.1:36443");
  assert.equal(connection.context, "kind-gpu");
  assert.equal(connection.user, "kind-gpu");
  assert.equal(connection.namespace, undefined);
  assert.equal(connection.pooled, true);
  const options = await applied(connection);
  assert.equal(String(options.ca), "CA PEM");
  assert.equal(String(options.cert), "CERT PEM");
  assert.equal(String(options.key), "KEY PEM");
  assert.equal(options.rejectUnauthorized, undefined);
  assert.deepEqual(options.headers, {});
});

Deno.test("nativeConnection() reads relative files from the kubeconfig's folder and re-reads a token file after a minute", async () => {
  await withDir(async (dir) => {
    await writeFile(join(dir, "ca.crt"), "FILE CA");
    await writeFile(join(dir, "token"), "first-token\n");
    const files: KubeConfigFile[] = [{
      path: join(dir, "config"),
      document: {
        clusters: [{
          name: "prod",
          cluster: {
            server: "https://api.prod.example:6443",
            "certificate-authority": "ca.crt",
            "tls-server-name": "kubernetes.default",
          },
        }],
        users: [{ name: "ci", user: { "token-file": "token" } }],
        contexts: [{
          name: "prod-ci",
          context: { cluster: "prod", user: "ci", namespace: "gpu-ops" },
        }],
        "current-context": "prod-ci",
      },
    }];
    let now = 0;
    const connection = nativeConnection(
      selectContext(mergeKubeConfigs(files), undefined),
      () => now,
    );
    assert.equal(connection.namespace, "gpu-ops");
    const first = await applied(connection);
    assert.equal(String(first.ca), "FILE CA");
    assert.equal(first.servername, "kubernetes.default");
    assert.deepEqual(first.headers, { Authorization: "Bearer first-token" });
    await writeFile(join(dir, "token"), "rotated-token");
    now = 30_000;
    assert.deepEqual((await applied(connection)).headers, { Authorization: "Bearer first-token" });
    now = 61_000;
    assert.deepEqual((await applied(connection)).headers, {
      Authorization: "Bearer rotated-token",
    });
  });
});

Deno.test("nativeConnection() sends basic auth, impersonation, and skips verification when told", async () => {
  const selected = selectContext(
    mergeKubeConfigs([{
      path: "/etc/kube/lab",
      document: {
        clusters: [{
          name: "lab",
          cluster: { server: "https://10.0.0.1", "insecure-skip-tls-verify": true },
        }],
        users: [{
          name: "admin",
          user: { username: "admin", password: "s3cret", as: "gpu-operator" },
        }],
        contexts: [{ name: "lab", context: { cluster: "lab", user: "admin" } }],
        "current-context": "lab",
      },
    }]),
    undefined,
  );
  const options = await applied(nativeConnection(selected));
  assert.equal(options.rejectUnauthorized, false);
  assert.equal(options.auth, "admin:s3cret");
  assert.deepEqual(options.headers, { "Impersonate-User": "gpu-operator" });
});

Deno.test("mergeKubeConfigs() merges KUBECONFIG files as kubectl: first current-context and first entry of a name win", () => {
  const cluster = (server: string) => ({ server });
  const merged = mergeKubeConfigs([
    {
      path: "/a/config",
      document: {
        clusters: [{ name: "shared", cluster: cluster("https://first") }],
        users: [{ name: "u", user: { token: "first" } }],
        contexts: [{ name: "one", context: { cluster: "shared", user: "u" } }],
        "current-context": "one",
      },
    },
    {
      path: "/b/config",
      document: {
        clusters: [
          { name: "shared", cluster: cluster("https://second") },
          { name: "other", cluster: cluster("https://other") },
        ],
        users: [{ name: "u", user: { token: "second" } }],
        contexts: [{ name: "two", context: { cluster: "other", user: "u" } }],
        "current-context": "two",
      },
    },
  ]);
  assert.equal(merged.currentContext, "one");
  assert.deepEqual(merged.clusters.map((c) => c.server), ["https://first", "https://other"]);
  assert.deepEqual(merged.users.map((u) => u.raw.token), ["first"]);
  assert.equal(selectContext(merged, "two").cluster.server, "https://other");
});

Deno.test("isNativelyCovered() leaves exec and auth-provider users, extra impersonation and proxies to client-node", () => {
  const covered = (user: Record<string, unknown>, cluster: Record<string, unknown> = {}) =>
    isNativelyCovered(selectContext(
      mergeKubeConfigs([{
        path: "/c",
        document: {
          clusters: [{ name: "c", cluster: { server: "https://x", ...cluster } }],
          users: [{ name: "u", user }],
          contexts: [{ name: "x", context: { cluster: "c", user: "u" } }],
          "current-context": "x",
        },
      }]),
      undefined,
    ));
  const eks = {
    exec: {
      apiVersion: "client.authentication.k8s.io/v1beta1",
      command: "aws",
      args: ["eks", "get-token", "--cluster-name", "gpu"],
    },
  };
  const gke = { "auth-provider": { name: "gcp", config: { "cmd-path": "gcloud" } } };
  assert.equal(covered(eks), false);
  assert.equal(covered(gke), false);
  assert.equal(covered({ token: "t", "as-groups": ["system:masters"] }), false);
  assert.equal(covered({ token: "t" }, { "proxy-url": "http://proxy:3128" }), false);
  assert.equal(covered({ token: "t", exec: null }), true);
  assert.equal(covered({}), true);
});

Deno.test("loadKubeConfig() runs an exec plugin through client-node and keeps the proxy of a proxy-url cluster", async () => {
  await withDir(async (dir) => {
    const credential = JSON.stringify({
      apiVersion: "client.authentication.k8s.io/v1beta1",
      kind: "ExecCredential",
      status: { token: "exec-token" },
    });
    await writeFile(
      join(dir, "config"),
      [
        "apiVersion: v1",
        "kind: Config",
        "clusters:",
        "- name: eks",
        "  cluster:",
        "    server: https://eks.example",
        `    certificate-authority-data: ${b64("EKS CA")}`,
        "- name: behind-proxy",
        "  cluster:",
        "    server: https://private.example",
        "    proxy-url: http://127.0.0.1:3128",
        "users:",
        "- name: eks-user",
        "  user:",
        "    exec:",
        "      apiVersion: client.authentication.k8s.io/v1beta1",
        "      command: sh",
        `      args: ["-c", ${JSON.stringify(`echo '${credential}'`)}]`,
        "- name: plain",
        "  user:",
        "    token: plain-token",
        "contexts:",
        "- name: eks",
        "  context: {cluster: eks, user: eks-user, namespace: ml}",
        "- name: proxied",
        "  context: {cluster: behind-proxy, user: plain}",
        "current-context: eks",
        "",
      ].join("\n"),
    );
    const env = (name: string) => name === "HOME" ? dir : undefined;
    const eks = await loadKubeConfig({ kubeconfig: join(dir, "config") }, env);
    assert.equal(eks.context, "eks");
    assert.equal(eks.namespace, "ml");
    assert.equal(eks.pooled, true);
    const options = await applied(eks);
    assert.equal(String(options.ca), "EKS CA");
    assert.equal((options.headers as Record<string, string>).Authorization, "Bearer exec-token");
    assert.equal(options.agent, undefined);
    const proxied = await loadKubeConfig(
      { kubeconfig: join(dir, "config"), context: "proxied" },
      env,
    );
    assert.equal(proxied.pooled, false);
    const viaProxy = await applied(proxied);
    assert.ok(viaProxy.agent, "the proxy agent is kept");
    assert.equal((viaProxy.headers as Record<string, string>).Authorization, "Bearer plain-token");
  });
});

Deno.test("loadKubeConfig() reads every KUBECONFIG file and names the file that cannot be loaded", async () => {
  await withDir(async (dir) => {
    await writeFile(
      join(dir, "a"),
      JSON.stringify({
        clusters: [{ name: "a", cluster: { server: "https://a" } }],
        users: [{ name: "a", user: { token: "ta" } }],
        contexts: [{ name: "a", context: { cluster: "a", user: "a" } }],
      }),
    );
    await writeFile(join(dir, "b"), "current-context: a\n");
    await writeFile(join(dir, "broken"), "clusters:\n- name: x\n  cluster: {}\n");
    const env = (files: string) => (name: string) =>
      name === "KUBECONFIG" ? files : name === "HOME" ? dir : undefined;
    const connection = await loadKubeConfig({}, env(`${join(dir, "a")}:${join(dir, "b")}`));
    assert.equal(connection.server, "https://a");
    assert.deepEqual((await applied(connection)).headers, { Authorization: "Bearer ta" });
    await assert.rejects(
      loadKubeConfig({ kubeconfig: join(dir, "broken") }, env("")),
      (error: unknown) =>
        error instanceof UsageError &&
        error.message ===
          `Cannot load kubeconfig '${join(dir, "broken")}': clusters[0].cluster.server is missing`,
    );
    await assert.rejects(
      loadKubeConfig({ kubeconfig: join(dir, "a"), context: "nope" }, env("")),
      /Cannot use context 'nope': it is not in the kubeconfig \(contexts: a\)/,
    );
    await assert.rejects(
      loadKubeConfig({ kubeconfig: join(dir, "a") }, env("")),
      /Cannot find a Kubernetes API server: the kubeconfig has no current cluster/,
    );
  });
});

Deno.test("inClusterConnection() reads the ServiceAccount mount and brackets an IPv6 host", async () => {
  await withDir(async (dir) => {
    await writeFile(join(dir, "ca.crt"), "CLUSTER CA");
    await writeFile(join(dir, "token"), "sa-token");
    await writeFile(join(dir, "namespace"), "gpu-operator");
    const env = (name: string) =>
      ({ KUBERNETES_SERVICE_HOST: "fd00::1", KUBERNETES_SERVICE_PORT: "443" })[name];
    const connection = inClusterConnection(env, { dir });
    assert.equal(connection.server, "https://[fd00::1]:443");
    assert.equal(connection.context, "inClusterContext");
    assert.equal(connection.user, "inClusterUser");
    assert.equal(connection.namespace, "gpu-operator");
    const options = await applied(connection);
    assert.equal(String(options.ca), "CLUSTER CA");
    assert.deepEqual(options.headers, { Authorization: "Bearer sa-token" });
    assert.throws(() => inClusterConnection(() => undefined, { dir }), /KUBERNETES_SERVICE_HOST/);
  });
});

Deno.test("bearerConnection() keeps the server's trust and proxy and speaks with the token alone", async () => {
  const kubeconfig = {
    server: "https://10.0.0.1:6443",
    context: "admin@c",
    user: "admin",
    namespace: "team",
    pooled: true,
    apply(options: Record<string, unknown>) {
      Object.assign(options, {
        ca: "CA",
        servername: "api",
        cert: "CERT",
        key: "KEY",
        auth: "u:p",
      });
      options.headers = { Authorization: "Bearer admin", "Impersonate-User": "bob", "X-Keep": "1" };
      return Promise.resolve();
    },
  };
  const bearer = bearerConnection(kubeconfig, "reader-token");
  const options: Record<string, unknown> = {};
  await bearer.apply(options);
  assert.deepEqual(options, {
    ca: "CA",
    servername: "api",
    headers: { "X-Keep": "1", Authorization: "Bearer reader-token" },
  });
  assert.equal(bearer.server, kubeconfig.server);
  assert.equal(bearer.pooled, true);
  assert.equal(bearer.user, "(bearer token)");
});
