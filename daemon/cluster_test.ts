/**
 * The daemon against the real local control plane (runs when `AICR_CLUSTER_DIR` names a running
 * cluster, as `npm test` provides; ignored otherwise): tokens minted by TokenRequest, reviewed by
 * TokenReview with the daemon's audience, authorized by SubjectAccessReview on the virtual
 * `snapshots.aicr.run` resource, with the daemon talking to the API as its own ServiceAccount;
 * and what the API server's pod proxy does with loopback pod IPs and with credentials.
 *
 * @module
 */
import assert from "node:assert/strict";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { request } from "node:https";
import { networkInterfaces, tmpdir } from "node:os";
import { join } from "node:path";
import process from "node:process";
import { connectKube } from "../kube/mod.ts";
import { createLogger } from "../log.ts";
import { create, createNamespace, useTestCluster } from "../tests/cluster/harness.ts";
import type { Api } from "../tests/kubelet/api.ts";
import { createCachingAuthorizer, createDaemon, createKubeAuth, serve } from "./mod.ts";
import { fakeCollector, generateTestTls } from "./_testing.ts";
import { waitUntil } from "../tests/_wait.ts";

const CLUSTER = Deno.env.get("AICR_CLUSTER_DIR");
const AUDIENCE = "aicr-daemon";

async function mint(admin: Api, ns: string, sa: string, audiences?: string[]): Promise<string> {
  const res = await admin.request("POST", `/api/v1/namespaces/${ns}/serviceaccounts/${sa}/token`, {
    apiVersion: "authentication.k8s.io/v1",
    kind: "TokenRequest",
    spec: { expirationSeconds: 600, ...(audiences ? { audiences } : {}) },
  });
  assert.equal(res.status, 201, JSON.stringify(res.body));
  return res.body.status.token as string;
}

function get(
  url: string,
  ca: string,
  headers: Record<string, string> = {},
): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(url, { ca, headers, agent: false }, (res) => {
      let body = "";
      res.on("data", (chunk) => (body += chunk));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on("error", reject);
    req.end();
  });
}

function externalIPv4(): string | undefined {
  for (const list of Object.values(networkInterfaces())) {
    for (const address of list ?? []) {
      if (address.family === "IPv4" && !address.internal) return address.address;
    }
  }
  return undefined;
}

Deno.test({
  name:
    "daemon on a real API server: 401, 200 and 403 by TokenReview and SubjectAccessReview, /metrics with a default-audience token, and the pod proxy's limits",
  ignore: !CLUSTER,
  async fn() {
    const env = await useTestCluster();
    const tls = generateTestTls();
    const tmp = await mkdtemp(join(tmpdir(), "aicr-daemon-cluster-"));
    const admin = env.admin;
    const ns = await createNamespace(admin, "aicr-daemon");
    const role = `aicr-snapshot-reader-${ns}`;
    const cleanup: string[] = [];
    let server: Awaited<ReturnType<typeof serve>> | undefined;
    let daemon: ReturnType<typeof createDaemon> | undefined;
    try {
      for (const name of ["aicr-reader", "nobody", "aicr-daemon", "prometheus"]) {
        await create(admin, `/api/v1/namespaces/${ns}/serviceaccounts`, { metadata: { name } });
      }
      const rbac = "/apis/rbac.authorization.k8s.io/v1";
      await create(admin, `${rbac}/clusterroles`, {
        metadata: { name: role },
        rules: [{ apiGroups: ["aicr.run"], resources: ["snapshots"], verbs: ["get"] }],
      });
      cleanup.push(`${rbac}/clusterroles/${role}`);
      const scraper = `aicr-metrics-scraper-${ns}`;
      await create(admin, `${rbac}/clusterroles`, {
        metadata: { name: scraper },
        rules: [{ apiGroups: [""], resources: ["nodes/metrics"], verbs: ["get"] }],
      });
      cleanup.push(`${rbac}/clusterroles/${scraper}`);
      for (
        const [name, roleName, sa] of [
          [role, role, "aicr-reader"],
          [scraper, scraper, "prometheus"],
          [`aicr-daemon-delegator-${ns}`, "system:auth-delegator", "aicr-daemon"],
        ] as const
      ) {
        await create(admin, `${rbac}/clusterrolebindings`, {
          metadata: { name },
          roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name: roleName },
          subjects: [{ kind: "ServiceAccount", name: sa, namespace: ns }],
        });
        cleanup.push(`${rbac}/clusterrolebindings/${name}`);
      }
      const reader = await mint(admin, ns, "aicr-reader", [AUDIENCE]);
      const readerForApi = await mint(admin, ns, "aicr-reader");
      const nobody = await mint(admin, ns, "nobody", [AUDIENCE]);
      // The daemon reaches the API as its own ServiceAccount, as it would in its pod.
      const kubeconfig = join(tmp, "daemon.kubeconfig");
      await writeFile(
        kubeconfig,
        [
          "apiVersion: v1",
          "kind: Config",
          "clusters: [{name: c, cluster: {server: " + env.cluster.server +
          ", certificate-authority: " + env.cluster.caFile + "}}]",
          "users: [{name: u, user: {token: " + (await mint(admin, ns, "aicr-daemon")) + "}}]",
          "contexts: [{name: x, context: {cluster: c, user: u}}]",
          "current-context: x",
          "",
        ].join("\n"),
      );
      const kube = connectKube({ kubeconfig }, (name) => process.env[name]);
      daemon = createDaemon({
        collect: fakeCollector().collect,
        auth: createCachingAuthorizer(createKubeAuth(kube, { audiences: [AUDIENCE] })),
        clock: Date.now,
        log: createLogger({ write: () => {} }),
        build: { version: "test", commit: "test" },
        nodeName: "node-1",
        // As `aicr daemon --token-audience aicr-daemon` builds it: /metrics takes the API
        // server's own audience, like the kubelet.
        metricsAuth: createCachingAuthorizer(createKubeAuth(kube, { audiences: [] })),
      });
      server = await serve(daemon.app, { hostname: "0.0.0.0", port: 0, tls });
      daemon.start();
      const url = `https://127.0.0.1:${server.port}/v1/snapshot`;
      assert.equal((await get(url, tls.ca)).status, 401);
      assert.equal((await get(url, tls.ca, { authorization: `Bearer ${reader}` })).status, 200);
      const denied = await get(url, tls.ca, { authorization: `Bearer ${nobody}` });
      assert.equal(denied.status, 403);
      assert.match(
        JSON.parse(denied.body).message,
        new RegExp(`User "system:serviceaccount:${ns}:nobody" cannot get resource "snapshots"`),
      );
      assert.equal(
        (await get(url, tls.ca, { authorization: `Bearer ${readerForApi}` })).status,
        401,
        "a token for the API server's audience is refused",
      );

      // /metrics: a stock Prometheus token (the API server's default audience) with
      // 'get nodes/metrics' is let in; the same token is refused on the snapshot, a dedicated-
      // audience token is refused on /metrics, and a default-audience token without the
      // permission is denied.
      const metricsUrl = `https://127.0.0.1:${server.port}/metrics`;
      const prometheus = await mint(admin, ns, "prometheus");
      await waitUntil("the daemon's first collection", () => daemon?.cache.ready ?? false);
      const scraped = await get(metricsUrl, tls.ca, { authorization: `Bearer ${prometheus}` });
      assert.equal(scraped.status, 200, scraped.body);
      assert.match(scraped.body, /^aicr_node_info\{node="node-1",/m);
      assert.match(scraped.body, /^aicr_snapshot_last_change_timestamp_seconds \d+/m);
      assert.equal(
        (await get(url, tls.ca, { authorization: `Bearer ${prometheus}` })).status,
        401,
        "the snapshot keeps its dedicated audience",
      );
      assert.equal(
        (await get(metricsUrl, tls.ca, { authorization: `Bearer ${reader}` })).status,
        401,
        "a token of the daemon's dedicated audience is not a scrape token",
      );
      const noPermission = await get(metricsUrl, tls.ca, {
        authorization: `Bearer ${readerForApi}`,
      });
      assert.equal(noPermission.status, 403);
      assert.match(JSON.parse(noPermission.body).message, /cannot get resource "nodes\/metrics"/);

      // The API server's pod proxy refuses loopback pod IPs (the local cluster's node IPs)...
      await create(admin, `/api/v1/namespaces/${ns}/pods`, {
        metadata: { name: "daemon" },
        spec: { containers: [{ name: "c", image: "none" }], nodeName: "no-such-node" },
      });
      const setPodIp = (ip: string) =>
        admin.request("PATCH", `/api/v1/namespaces/${ns}/pods/daemon/status`, {
          status: { phase: "Running", podIP: ip, podIPs: [{ ip }] },
        });
      assert.equal((await setPodIp("127.0.0.1")).status, 200);
      const proxyPath =
        `/api/v1/namespaces/${ns}/pods/https:daemon:${server.port}/proxy/v1/snapshot`;
      const refused = await admin.request("GET", proxyPath);
      assert.equal(refused.status, 400);
      assert.equal(refused.body.message, "address not allowed");

      // ...and, on a routable address, strips Authorization but passes X-Aicr-Authorization.
      const ip = externalIPv4();
      if (ip) {
        assert.equal((await setPodIp(ip)).status, 200);
        const adminHttp = Deno.createHttpClient({
          caCerts: [await readFile(env.cluster.caFile, "utf8")],
          cert: await readFile(env.cluster.adminCert.cert, "utf8"),
          key: await readFile(env.cluster.adminCert.key, "utf8"),
        });
        try {
          const viaProxy = async (headers: Record<string, string>) => {
            const res = await fetch(`${env.cluster.server}${proxyPath}?format=json`, {
              client: adminHttp,
              headers,
            });
            return { status: res.status, body: await res.text() };
          };
          const stripped = await viaProxy({ authorization: `Bearer ${reader}` });
          assert.equal(stripped.status, 401, stripped.body);
          assert.match(stripped.body, /no bearer token/);
          const passed = await viaProxy({ "x-aicr-authorization": `Bearer ${reader}` });
          assert.equal(passed.status, 200, passed.body);
          assert.equal(JSON.parse(passed.body).kind, "Snapshot");
        } finally {
          adminHttp.close();
        }
      }
    } finally {
      await server?.shutdown();
      await daemon?.close();
      for (const path of cleanup) await admin.request("DELETE", path);
      await admin.request("DELETE", `/api/v1/namespaces/${ns}`);
      await rm(tmp, { recursive: true, force: true });
      await env.stop();
    }
  },
});
