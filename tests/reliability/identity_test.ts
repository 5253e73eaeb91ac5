/**
 * Issue #18 part 1, per-node identity in DaemonSet mode, on the real cluster with the built
 * binary: every daemon gets a certificate of its own naming its node (through the CSR API,
 * signed by the install), the fetch verifies it; then the attacks of the outside review, each
 * a regression case: a rogue server holding node B's credentials answering for node A, node
 * B's reader token replayed to node A, a token bound to another pod, certificate requests from
 * another identity or naming another node. Uninstall removes aicr's requests and never touches
 * another signer's.
 */
import assert from "node:assert/strict";
import { Buffer } from "node:buffer";
import { X509Certificate } from "node:crypto";
import { readFileSync } from "node:fs";
import { fetchFleet, nodeDirectGet } from "../../controller/fleet.ts";
import { connectKube } from "../../kube/mod.ts";
import { createLogger } from "../../log.ts";
import { generateServingKey, issueServingCertificate, placeholderCertificate } from "../../x509.ts";
import { serve } from "../../daemon/serve.ts";
import { encodeSnapshot } from "../../snapshot/mod.ts";
import { sampleSnapshot } from "../fakes/snapshot.ts";
import { createNamespace, useTestCluster, waitFor } from "../cluster/harness.ts";
import type { Obj } from "../kubelet/api.ts";
import { aicr, bindsTokensToNodes, httpsGet, mintToken as mint } from "../e2e/_aicr.ts";
import { condition, CSR_PATH, csrBody, getCsr as csr, postCsrAs, SIGNER } from "../e2e/_csr.ts";
import { record } from "./_report.ts";
import { ENABLED } from "./_env.ts";

Deno.test({
  name: "reliability: per-node daemon identity, and one node never speaks for another",
  ignore: !ENABLED,
  sanitizeOps: false,
  sanitizeResources: false,
  async fn(t) {
    const env = await useTestCluster();
    const { admin } = env;
    const kubeconfig = env.cluster.adminKubeconfig;
    const clusterCa = readFileSync(env.cluster.caFile, "utf8");
    const ns = await createNamespace(admin, "identity");
    const ds = (...args: string[]) =>
      aicr(["daemonset", ...args, "--kubeconfig", kubeconfig, "-n", ns], { deadlineMs: 240_000 });
    let attacks = 0;
    let refused = 0;
    const attack = async (run: () => Promise<void>) => {
      attacks++;
      await run();
      refused++;
    };
    // Another signer's request (created first, so every later step could touch it).
    const foreign = `identity-foreign-${ns}`;
    const made = await admin.request("POST", CSR_PATH, {
      ...csrBody(foreign, { node: "x", ip: "10.9.9.9" }),
      spec: {
        ...csrBody(foreign, { node: "x", ip: "10.9.9.9" }).spec,
        signerName: "example.com/x",
      },
    });
    assert.equal(made.status, 201, JSON.stringify(made.body));
    const extraNames: string[] = [foreign];
    const cleanupRbac: string[] = [];
    try {
      let pods: Obj[] = [];
      let ca = "";
      await t.step(
        "install: each daemon serves a certificate of its own, naming its node",
        async () => {
          const run = await ds(
            "install",
            "--image",
            "aicr:dev",
            "--all-nodes",
            "--timeout",
            "180s",
          );
          assert.equal(run.code, 0, run.stderr);
          // Who signs is a race between this install, which signs while it waits, and the
          // in-cluster signer it starts; what each daemon then serves is checked below.
          assert.match(run.stderr, /daemon ready .*nodes=\d+ signer=\S+/);
          const list = await admin.request(
            "GET",
            `/api/v1/namespaces/${ns}/pods?labelSelector=${
              encodeURIComponent("app.kubernetes.io/name=aicr,app.kubernetes.io/component=daemon")
            }`,
          );
          pods = list.body.items as Obj[];
          assert.equal(pods.length, env.nodes.length);
          const cm = await admin.request(
            "GET",
            `/api/v1/namespaces/${ns}/configmaps/aicr-daemon-ca`,
          );
          ca = cm.body.data["ca.crt"];
          const fingerprints = new Set<string>();
          for (const pod of pods) {
            const node = pod.spec.nodeName as string;
            const answer = await waitFor(`${node} serving its own certificate`, async () => {
              const res = await httpsGet(`https://${pod.status.podIP}:8443/readyz`, {
                ca,
                servername: node,
              }).catch(() => undefined);
              return res?.status === 200 ? res : undefined;
            }, 60_000);
            assert.equal(answer.peer?.subject?.CN, node);
            assert.equal(
              answer.peer?.subjectaltname,
              `DNS:${node}, IP Address:${pod.status.podIP}`,
            );
            fingerprints.add(answer.peer?.fingerprint256 ?? "");
          }
          assert.equal(fingerprints.size, pods.length, "no two daemons share a certificate");
          // Nothing of the key is stored: no Secret but the install's CA.
          const secrets = await admin.request("GET", `/api/v1/namespaces/${ns}/secrets`);
          assert.deepEqual(
            (secrets.body.items as Obj[]).map((s) => s.metadata.name).filter((n) =>
              String(n).startsWith("aicr")
            ),
            ["aicr-daemon-signer"],
          );
        },
      );

      await t.step("fetch verifies every node's certificate and source-node: all ok", async () => {
        const run = await ds("fetch", "-o", "-");
        assert.equal(run.code, 0, run.stderr);
        for (const n of env.nodes) {
          assert.match(run.stderr, new RegExp(`${n.name}\\s+ok\\s+direct`));
        }
      });

      const [podA, podB] = pods.slice().sort((x, y) =>
        String(x.spec.nodeName).localeCompare(String(y.spec.nodeName))
      ) as [Obj, Obj];
      const nodeA = podA.spec.nodeName as string;
      const nodeB = podB.spec.nodeName as string;
      const urlOf = (pod: Obj) => `https://${pod.status.podIP}:8443/v1/snapshot`;

      await t.step(
        "a rogue server holding node B's key and certificate answering for node A: wrong-identity",
        async () => {
          await attack(async () => {
            // Node B compromised: its key, and a certificate the install's CA issued for B.
            const secret = await admin.request(
              "GET",
              `/api/v1/namespaces/${ns}/secrets/aicr-daemon-signer`,
            );
            const decode = (k: string) => Buffer.from(secret.body.data[k], "base64").toString();
            const key = generateServingKey();
            const certB = issueServingCertificate({
              ca: { caCert: decode("tls.crt"), caKey: decode("tls.key") },
              publicKey: key.publicKey,
              node: nodeB,
              ipAddresses: [podB.status.podIP],
              now: new Date(),
              lifetimeSeconds: 3600,
            });
            assert.ok(new X509Certificate(certB).verify(new X509Certificate(ca).publicKey));
            let tokensSeen = 0;
            const rogue = await serve((req) => {
              if (req.headers.get("authorization")) tokensSeen++;
              // It answers with a snapshot claiming to be node A.
              return new Response(encodeSnapshot(sampleSnapshot({ nodeName: nodeA }), "json"));
            }, {
              hostname: "127.0.0.1",
              port: 0,
              tls: {
                cert: certB,
                key: key.privateKey.export({ type: "pkcs8", format: "pem" }) as string,
              },
            });
            try {
              const kube = connectKube({ kubeconfig }, () => undefined);
              // Traffic for node A reaches the rogue (an address taken over, a poisoned route).
              const fleet = await fetchFleet({
                kube,
                log: createLogger({ write: () => {} }),
                directGet: (req) =>
                  nodeDirectGet(
                    req.servername === nodeA ? { ...req, url: `${rogue.url}/v1/snapshot` } : req,
                  ),
              }, { namespace: ns, transport: "direct", nodes: [nodeA, nodeB] });
              const byNode = new Map(fleet.results.map((r) => [r.node, r]));
              assert.equal(byNode.get(nodeA)?.status, "wrong-identity", byNode.get(nodeA)?.error);
              assert.match(String(byNode.get(nodeA)?.error), /ERR_TLS_CERT_ALTNAME_INVALID/);
              assert.equal(byNode.get(nodeA)?.snapshot, undefined, "nothing of the rogue is kept");
              assert.equal(byNode.get(nodeB)?.status, "ok", "the other nodes are kept");
              assert.equal(tokensSeen, 0, "node A's token never reached the rogue");
            } finally {
              await rogue.shutdown();
            }
          });
          await attack(async () => {
            // The real daemon of node B reached at node A's address: B's own certificate.
            const kube = connectKube({ kubeconfig }, () => undefined);
            const fleet = await fetchFleet({
              kube,
              log: createLogger({ write: () => {} }),
              directGet: (req) =>
                nodeDirectGet(req.servername === nodeA ? { ...req, url: urlOf(podB) } : req),
            }, { namespace: ns, transport: "direct", nodes: [nodeA] });
            assert.equal(fleet.results[0]?.status, "wrong-identity");
          });
          await attack(async () => {
            // A self-signed certificate naming node A (no CA behind it).
            const key = generateServingKey();
            const rogue = await serve(() => new Response("{}"), {
              hostname: "127.0.0.1",
              port: 0,
              tls: {
                cert: placeholderCertificate(key, new Date()),
                key: key.privateKey.export({ type: "pkcs8", format: "pem" }) as string,
              },
            });
            try {
              await assert.rejects(
                nodeDirectGet({
                  url: `${rogue.url}/v1/snapshot`,
                  ca,
                  servername: nodeA,
                  token: "never-sent",
                  connectTimeoutMs: 2000,
                  signal: AbortSignal.timeout(10_000),
                }),
                (error: { code?: string }) => error.code === "DEPTH_ZERO_SELF_SIGNED_CERT",
              );
            } finally {
              await rogue.shutdown();
            }
          });
        },
      );

      // Before 1.31 the API server cannot bind a token to a Node: reader tokens carry their
      // node's audience alone, and that is what keeps one node's token from opening another.
      const nodeBinding = await bindsTokensToNodes(admin, ns, nodeA);
      const readerOf = (node: string) =>
        mint(admin, ns, "aicr-reader", {
          audiences: [`aicr-daemon:${node}`],
          ...(nodeBinding ? { node } : {}),
        });

      await t.step(
        "node B's reader token is refused by node A's daemon (401), accepted by B's",
        async () => {
          const tokenB = await readerOf(nodeB);
          assert.equal(
            (await httpsGet(urlOf(podB), { ca, servername: nodeB, token: tokenB })).status,
            200,
          );
          await attack(async () => {
            const replay = await httpsGet(urlOf(podA), { ca, servername: nodeA, token: tokenB });
            assert.equal(replay.status, 401, replay.body);
          });
          await attack(async () => {
            // The old shared audience, bound to nothing: refused.
            const shared = await mint(admin, ns, "aicr-reader", { audiences: ["aicr-daemon"] });
            const res = await httpsGet(urlOf(podA), { ca, servername: nodeA, token: shared });
            assert.equal(res.status, 401, res.body);
          });
          const tokenA = await readerOf(nodeA);
          assert.equal(
            (await httpsGet(urlOf(podA), { ca, servername: nodeA, token: tokenA })).status,
            200,
          );
        },
      );

      await t.step({
        name: `a token of node A's audience bound to node B, or to no node, is refused (401)${
          nodeBinding
            ? ""
            : " [skipped: this API server cannot bind tokens to a Node (before 1.31)]"
        }`,
        ignore: !nodeBinding,
        fn: async () => {
          await attack(async () => {
            // Node A's audience, but bound to node B: still refused.
            const bound = await mint(admin, ns, "aicr-reader", {
              audiences: [`aicr-daemon:${nodeA}`],
              node: nodeB,
            });
            const res = await httpsGet(urlOf(podA), { ca, servername: nodeA, token: bound });
            assert.equal(res.status, 401, res.body);
          });
          await attack(async () => {
            // Node A's audience, bound to nothing: refused.
            const unbound = await mint(admin, ns, "aicr-reader", {
              audiences: [`aicr-daemon:${nodeA}`],
            });
            const res = await httpsGet(urlOf(podA), { ca, servername: nodeA, token: unbound });
            assert.equal(res.status, 401, res.body);
          });
        },
      });

      await t.step(
        "certificate requests aicr does not sign: another identity, another node, no pod",
        async () => {
          // Another ServiceAccount allowed to create CSRs.
          const role = `identity-csr-${ns}`;
          cleanupRbac.push(role);
          for (
            const [path, body] of [
              ["/apis/rbac.authorization.k8s.io/v1/clusterroles", {
                metadata: { name: role },
                rules: [{
                  apiGroups: ["certificates.k8s.io"],
                  resources: ["certificatesigningrequests"],
                  verbs: ["create", "get"],
                }],
              }],
              ["/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", {
                metadata: { name: role },
                roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name: role },
                subjects: [{ kind: "ServiceAccount", name: "default", namespace: ns }],
              }],
            ] as const
          ) {
            const res = await admin.request("POST", path, body);
            assert.equal(res.status, 201, JSON.stringify(res.body));
          }
          const other = await mint(admin, ns, "default", {});
          const fromOther = `identity-other-sa-${ns}`;
          // The daemon's own ServiceAccount with a token bound to node A's pod, asking for B.
          const daemonA = await mint(admin, ns, "aicr-daemon", { pod: podA });
          const wrongNode = `identity-wrong-node-${ns}`;
          // The daemon's ServiceAccount with a token bound to no pod.
          const unbound = await mint(admin, ns, "aicr-daemon", {});
          const noPod = `identity-no-pod-${ns}`;
          extraNames.push(fromOther, wrongNode, noPod);
          await waitFor("the requests accepted by the API server", async () => {
            for (
              const [token, name, names] of [
                [other, fromOther, { node: nodeA, ip: podA.status.podIP }],
                [daemonA, wrongNode, { node: nodeB, ip: podB.status.podIP }],
                [unbound, noPod, { node: nodeA, ip: podA.status.podIP }],
              ] as const
            ) {
              if (await csr(admin, name)) continue;
              const res = await postCsrAs(
                env.cluster.server,
                clusterCa,
                token,
                csrBody(name, names),
              );
              if (res.status !== 201) return undefined; // RBAC caches settle
            }
            return true;
          }, 30_000);
          const run = await ds("fetch", "-o", "-");
          assert.equal(run.code, 0, run.stderr);
          await attack(async () => {
            const object = await csr(admin, fromOther);
            assert.equal(object?.status?.certificate, undefined, "not signed");
            assert.equal(condition(object, "Approved"), undefined, "not approved");
            assert.equal(condition(object, "Denied"), undefined, "another identity's: left alone");
          });
          await attack(async () => {
            const object = await csr(admin, wrongNode);
            assert.equal(object?.status?.certificate, undefined);
            assert.equal(condition(object, "Denied")?.reason, "WrongNames");
          });
          await attack(async () => {
            const object = await csr(admin, noPod);
            assert.equal(object?.status?.certificate, undefined);
            assert.equal(condition(object, "Denied")?.reason, "NotPodBound");
          });
        },
      );

      await t.step(
        "uninstall removes aicr's requests and the CA, never another signer's",
        async () => {
          const run = await ds("uninstall");
          assert.equal(run.code, 0, run.stderr);
          const list = await admin.request(
            "GET",
            `${CSR_PATH}?fieldSelector=${encodeURIComponent(`spec.signerName=${SIGNER}`)}`,
          );
          const left = (list.body.items as Obj[]).filter((c) =>
            c.spec.username === `system:serviceaccount:${ns}:aicr-daemon`
          );
          assert.deepEqual(left.map((c) => c.metadata.name), []);
          const kept = await csr(admin, foreign);
          assert.ok(kept, "another signer's request is still there");
          assert.deepEqual(kept?.status?.conditions ?? [], [], "and untouched");
          assert.ok(
            await csr(admin, `identity-other-sa-${ns}`),
            "another identity's is still there",
          );
          for (const path of ["secrets/aicr-daemon-signer", "configmaps/aicr-daemon-ca"]) {
            const res = await admin.request("GET", `/api/v1/namespaces/${ns}/${path}`);
            assert.equal(res.status, 404, path);
          }
          record("identity_test: per-node identity attacks", {
            identityAttacks: attacks,
            identityAttacksRefused: refused,
            leftovers: left.length,
          });
        },
      );
    } finally {
      await aicr(["daemonset", "uninstall", "--kubeconfig", kubeconfig, "-n", ns]);
      for (const name of extraNames) await admin.request("DELETE", `${CSR_PATH}/${name}`);
      for (const name of cleanupRbac) {
        await admin.request(
          "DELETE",
          `/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/${name}`,
        );
        await admin.request("DELETE", `/apis/rbac.authorization.k8s.io/v1/clusterroles/${name}`);
      }
      await admin.request("DELETE", `/api/v1/namespaces/${ns}`);
      await env.stop();
    }
  },
});
