/**
 * The in-cluster signer (`aicr daemonset signer`, issue #25) against the real API server, its
 * pods run by the kubelet stand-in from the built binary:
 *
 * - GitOps: `aicr daemonset render` applied by the admin, no aicr command against the cluster
 *   afterwards, and every daemon turns Ready (its own certificate) on the signer's word alone;
 *   a node that joins later too.
 * - Bad input sent with real pod-bound tokens: a foreign signer name (never touched), an RSA key,
 *   names of another node, client usages, a token bound to no pod (each denied with its reason).
 * - With the signer scaled to zero: a request whose pod is gone, one whose node is gone, one
 *   approved without its certificate (a leader that died between the two writes); `fetch` signs
 *   when no signer runs. Scaled up again: refused with their reasons, the approved one issued.
 * - The Lease held by a dead pod is taken over only after its duration, and the request that
 *   waited is then signed.
 * - SIGKILL of the leader in the middle of a burst of requests: the other replica takes over and
 *   every request ends issued, none denied, none lost.
 */
import assert from "node:assert/strict";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { join } from "node:path";
import { parseAllDocuments } from "yaml";
import { Buffer } from "node:buffer";
import { createNamespace, type TestCluster, useTestCluster, waitFor } from "../cluster/harness.ts";
import type { Api, Obj } from "../kubelet/api.ts";
import { startKubelet } from "../kubelet/kubelet.ts";
import type { Kubelet } from "../kubelet/kubelet.ts";
import { aicr, httpsGet, mintToken } from "./_aicr.ts";
import { condition, CSR_PATH, csrBody, getCsr, postCsrAs } from "./_csr.ts";

const DAEMON_PODS = encodeURIComponent(
  "app.kubernetes.io/name=aicr,app.kubernetes.io/component=daemon",
);
/** A port of its own: the daemons bind it on their node (host networking). */
const PORT = "9643";
const SIGNER_PODS = encodeURIComponent(
  "app.kubernetes.io/name=aicr,app.kubernetes.io/component=signer",
);

/** Where the admin creates each kind `render` writes. */
function collection(ns: string, kind: string): string {
  const core = (plural: string) => `/api/v1/namespaces/${ns}/${plural}`;
  const rbac = "/apis/rbac.authorization.k8s.io/v1";
  const paths: Record<string, string> = {
    ServiceAccount: core("serviceaccounts"),
    Secret: core("secrets"),
    ConfigMap: core("configmaps"),
    Service: core("services"),
    ClusterRole: `${rbac}/clusterroles`,
    ClusterRoleBinding: `${rbac}/clusterrolebindings`,
    Role: `${rbac}/namespaces/${ns}/roles`,
    RoleBinding: `${rbac}/namespaces/${ns}/rolebindings`,
    DaemonSet: `/apis/apps/v1/namespaces/${ns}/daemonsets`,
    Deployment: `/apis/apps/v1/namespaces/${ns}/deployments`,
    Lease: `/apis/coordination.k8s.io/v1/namespaces/${ns}/leases`,
  };
  const path = paths[kind];
  if (!path) throw new Error(`no path for ${kind}`);
  return path;
}

async function pods(admin: Api, ns: string, selector: string): Promise<Obj[]> {
  const res = await admin.request("GET", `/api/v1/namespaces/${ns}/pods?labelSelector=${selector}`);
  return ((res.body.items ?? []) as Obj[]).filter((p) => !p.metadata.deletionTimestamp);
}

function isReady(pod: Obj): boolean {
  return ((pod.status?.conditions ?? []) as Obj[]).some((c) =>
    c.type === "Ready" && c.status === "True"
  );
}

/** The daemons Ready now, on nodes that exist (a pod of a removed node lingers a while). */
async function readyDaemons(admin: Api, ns: string): Promise<Obj[]> {
  return (await pods(admin, ns, DAEMON_PODS)).filter(isReady);
}

async function lease(admin: Api, ns: string): Promise<Obj> {
  const res = await admin.request(
    "GET",
    `/apis/coordination.k8s.io/v1/namespaces/${ns}/leases/aicr-daemon-signer`,
  );
  assert.equal(res.status, 200, JSON.stringify(res.body));
  return res.body;
}

async function scaleSigner(admin: Api, ns: string, replicas: number): Promise<void> {
  const res = await admin.request(
    "PATCH",
    `/apis/apps/v1/namespaces/${ns}/deployments/aicr-daemon-signer`,
    { spec: { replicas } },
  );
  assert.equal(res.status, 200, JSON.stringify(res.body));
  if (replicas === 0) {
    // Terminating ones too: a replica releases the Lease on its way out.
    await waitFor("no signer pod left", async () => {
      const res = await admin.request(
        "GET",
        `/api/v1/namespaces/${ns}/pods?labelSelector=${SIGNER_PODS}`,
      );
      return (res.body.items ?? []).length === 0 ? true : undefined;
    }, 90_000);
  }
}

/** A daemon's /readyz answered 200 with its own certificate, trusted by the install's CA only. */
async function servesOwnCertificate(admin: Api, ns: string, pod: Obj): Promise<boolean> {
  const cm = await admin.request("GET", `/api/v1/namespaces/${ns}/configmaps/aicr-daemon-ca`);
  const port = pod.spec.containers[0].ports[0].containerPort;
  try {
    const res = await httpsGet(`https://${pod.status.podIP}:${port}/readyz`, {
      ca: cm.body.data["ca.crt"],
      servername: pod.spec.nodeName,
    });
    return res.status === 200;
  } catch {
    return false;
  }
}

/**
 * A request for the right names with an RSA key, properly self-signed (the API server checks the
 * signature), made with openssl.
 */
async function rsaCsr(
  name: string,
  names: { node: string; ip: string },
  dir: string,
): Promise<Obj> {
  const key = join(dir, `${name}.key`);
  const out = await new Deno.Command("openssl", {
    args: [
      "req",
      "-new",
      "-newkey",
      "rsa:2048",
      "-nodes",
      "-keyout",
      key,
      "-subj",
      `/CN=${names.node}`,
      "-addext",
      `subjectAltName=DNS:${names.node},IP:${names.ip}`,
    ],
    stdout: "piped",
    stderr: "piped",
  }).output();
  assert.equal(out.code, 0, new TextDecoder().decode(out.stderr));
  return {
    apiVersion: "certificates.k8s.io/v1",
    kind: "CertificateSigningRequest",
    metadata: { name },
    spec: {
      request: Buffer.from(out.stdout).toString("base64"),
      signerName: "aicr.run/daemon-serving",
      usages: ["digital signature", "key encipherment", "server auth"],
    },
  };
}

/** The pid of a stand-in container whose environment names this pod (the kubelet runs them). */
async function pidOfPod(podName: string): Promise<number | undefined> {
  for await (const entry of Deno.readDir("/proc")) {
    if (!/^\d+$/.test(entry.name)) continue;
    const environ = await readFile(`/proc/${entry.name}/environ`, "utf8").catch(() => "");
    if (!environ.split("\0").includes(`POD_NAME=${podName}`)) continue;
    const cmdline = await readFile(`/proc/${entry.name}/cmdline`, "utf8").catch(() => "");
    if (cmdline.includes("signer")) return Number(entry.name);
  }
  return undefined;
}

Deno.test({
  name: "aicr daemonset signer: daemons Ready with no CLI, bad requests refused, leader failover",
  sanitizeOps: false,
  sanitizeResources: false,
  async fn(t) {
    const env: TestCluster = await useTestCluster();
    const { admin } = env;
    const clusterCa = await readFile(env.cluster.caFile, "utf8");
    const ns = await createNamespace(admin, "signer");
    const work = await mkdtemp(join(env.cluster.stateDir, "signer-"));
    const gpuNodes = env.nodes.filter((n) => n.gpu).map((n) => n.name).sort();
    let joined: Kubelet | undefined;
    const daemonToken = (pod: Obj) => mintToken(admin, ns, "aicr-daemon", { pod });
    const post = async (token: string, body: Obj) => {
      const res = await postCsrAs(env.cluster.server, clusterCa, token, body);
      assert.equal(res.status, 201, JSON.stringify(res.body));
      return body.metadata.name as string;
    };
    const issued = (name: string) =>
      waitFor(
        `${name} issued`,
        async () => (await getCsr(admin, name))?.status?.certificate ? true : undefined,
        90_000,
      );
    const refused = (name: string, type = "Denied") =>
      waitFor(`${name} ${type}`, async () => condition(await getCsr(admin, name), type), 90_000);
    try {
      await t.step(
        "render applied by hand: every daemon Ready on the signer's word, no CLI",
        async () => {
          const file = join(work, "aicr.yaml");
          const render = await aicr([
            "daemonset",
            "render",
            "-n",
            ns,
            "--image",
            "aicr:dev",
            "--port",
            PORT,
            // The stand-in runs the binary on every node: the image covers both architectures.
            "--image-platforms",
            "linux/amd64,linux/arm64",
            "-o",
            file,
          ]);
          assert.equal(render.code, 0, render.stderr);
          const started = Date.now();
          for (const doc of parseAllDocuments(await readFile(file, "utf8"))) {
            const object = doc.toJS() as Obj;
            const res = await admin.request("POST", collection(ns, object.kind), object);
            assert.equal(res.status, 201, `${object.kind}: ${JSON.stringify(res.body)}`);
          }
          // From here on no aicr command talks to this cluster until the fetch step.
          const daemons = await waitFor(
            "every GPU node's daemon serving its own certificate",
            async () => {
              const list = await pods(admin, ns, DAEMON_PODS);
              if (list.length !== gpuNodes.length || !list.every(isReady)) return undefined;
              for (const pod of list) {
                if (!await servesOwnCertificate(admin, ns, pod)) return undefined;
              }
              return list;
            },
            180_000,
          );
          assert.deepEqual(daemons.map((p) => p.spec.nodeName).sort(), gpuNodes);
          // deno-lint-ignore no-console
          console.log(
            `  daemons Ready ${((Date.now() - started) / 1000).toFixed(1)} s after the apply`,
          );
          const holder = (await lease(admin, ns)).spec?.holderIdentity as string;
          const signers = (await pods(admin, ns, SIGNER_PODS)).map((p) =>
            p.metadata.name as string
          );
          assert.ok(
            signers.some((name) => holder.startsWith(`${name}_`)),
            `${holder} of ${signers}`,
          );
        },
      );

      await t.step(
        "status: healthy, each node's daemon and certificate, the signer's leader (exit 0)",
        async () => {
          const run = await aicr([
            "daemonset",
            "status",
            "--kubeconfig",
            env.cluster.adminKubeconfig,
            "-n",
            ns,
            "-t",
            "json",
          ]);
          assert.equal(run.code, 0, run.stderr);
          const status = JSON.parse(run.stdout);
          assert.equal(status.kind, "DaemonSetStatus");
          assert.deepEqual(status.problems, []);
          assert.deepEqual(status.nodes.map((n: Obj) => n.node).sort(), gpuNodes);
          assert.ok(status.nodes.every((n: Obj) => n.ready && n.certificate === "issued"));
          const holder = (await lease(admin, ns)).spec?.holderIdentity as string;
          assert.equal(status.signer.leader.identity, holder);
          assert.equal(status.signer.available, 2);
          const table = await aicr([
            "daemonset",
            "status",
            "--kubeconfig",
            env.cluster.adminKubeconfig,
            "-n",
            ns,
          ]);
          assert.equal(table.code, 0, table.stderr);
          assert.match(table.stdout, /^Healthy$/m);
          assert.match(
            table.stdout,
            new RegExp(`leader ${holder.slice(0, holder.lastIndexOf("_"))}`),
          );
        },
      );

      let joinedNode = "";
      await t.step("a node that joins later: its daemon Ready with no CLI", async () => {
        joined = await startKubelet(env.cluster, {
          nodes: { "p5-h100": 1 },
          offset: 40,
          dir: join(work, "kubelet-joined"),
        });
        const joinedAt = Date.now();
        joinedNode = joined.nodes[0]?.name ?? "";
        const pod = await waitFor(
          `the daemon on ${joinedNode} serving its own certificate`,
          async () => {
            const found = (await pods(admin, ns, DAEMON_PODS)).find((p) =>
              p.spec.nodeName === joinedNode && isReady(p)
            );
            return found && await servesOwnCertificate(admin, ns, found) ? found : undefined;
          },
          120_000,
        );
        assert.equal(pod.spec.nodeName, joinedNode);
        // deno-lint-ignore no-console
        console.log(
          `  ${joinedNode} joined; its daemon Ready ${
            ((Date.now() - joinedAt) / 1000).toFixed(1)
          } s later`,
        );
      });

      await t.step(
        "bad requests with real pod-bound tokens: each refused with its reason, a foreign signer's untouched",
        async () => {
          const [pod] = await readyDaemons(admin, ns);
          assert.ok(pod);
          const token = await daemonToken(pod);
          const node = pod.spec.nodeName as string;
          const ip = pod.status.podIP as string;
          const foreign = await post(
            token,
            csrBody(`signer-foreign-${ns}`, { node, ip }, { signerName: "example.com/other" }),
          );
          const rsa = await post(token, await rsaCsr(`signer-rsa-${ns}`, { node, ip }, work));
          const otherNode = await post(
            token,
            csrBody(`signer-names-${ns}`, { node: "some-other-node", ip }),
          );
          const client = await post(
            token,
            csrBody(`signer-usages-${ns}`, { node, ip }, {
              usages: ["digital signature", "key encipherment", "server auth", "client auth"],
            }),
          );
          const unbound = await post(
            await mintToken(admin, ns, "aicr-daemon"),
            csrBody(`signer-unbound-${ns}`, { node, ip }),
          );
          // A good one sent last: once it is issued, the signer's pass saw every bad one before it.
          await issued(await post(token, csrBody(`signer-good-${ns}`, { node, ip })));
          for (
            const [name, reason] of [
              [rsa, "UnsupportedKey"],
              [otherNode, "WrongNames"],
              [client, "WrongUsages"],
              [unbound, "NotPodBound"],
            ]
          ) {
            const object = await refused(name as string);
            assert.equal(object.reason, reason, name);
            assert.ok(String(object.message).length > 0);
            const csr = await getCsr(admin, name as string);
            assert.equal(condition(csr, "Approved"), undefined, `${name} approved`);
            assert.equal(csr?.status?.certificate, undefined, `${name} issued`);
          }
          const untouched = await getCsr(admin, foreign);
          assert.deepEqual(
            untouched?.status?.conditions ?? [],
            [],
            "a foreign signer's request is never touched",
          );
        },
      );

      await t.step(
        "no signer running (an older install): the first fetch signs, waits, and finds the node ok",
        async () => {
          await scaleSigner(admin, ns, 0);
          assert.equal(
            (await lease(admin, ns)).spec?.holderIdentity ?? "",
            "",
            "released on SIGTERM",
          );
          const unhealthy = await aicr([
            "daemonset",
            "status",
            "--kubeconfig",
            env.cluster.adminKubeconfig,
            "-n",
            ns,
          ]);
          assert.equal(unhealthy.code, 9, unhealthy.stderr);
          assert.match(unhealthy.stderr, /unhealthy: 1 problem/);
          assert.match(unhealthy.stderr, /signer: no available replica \(0\/0 Ready\)/);
          const victim = (await readyDaemons(admin, ns)).find((p) =>
            p.spec.nodeName !== joinedNode
          );
          assert.ok(victim);
          const node = victim.spec.nodeName as string;
          const deleted = await admin.request(
            "DELETE",
            `/api/v1/namespaces/${ns}/pods/${victim.metadata.name}`,
          );
          assert.ok([200, 202].includes(deleted.status), JSON.stringify(deleted.body));
          // The DaemonSet's replacement has just started: the fetch signs its request, waits for it
          // to turn Ready, and fetches it (no longer `not-ready`, exit 9).
          await waitFor(
            "the replacement daemon running",
            async () =>
              (await pods(admin, ns, DAEMON_PODS)).find((p) =>
                p.spec.nodeName === node && p.metadata.uid !== victim.metadata.uid &&
                p.status?.phase === "Running"
              ),
            90_000,
          );
          const fetch = await aicr([
            "daemonset",
            "fetch",
            "--kubeconfig",
            env.cluster.adminKubeconfig,
            "-n",
            ns,
            "-o",
            join(work, "fleet") + "/",
            "--node",
            node,
          ], { deadlineMs: 180_000 });
          assert.equal(fetch.code, 0, fetch.stderr);
          assert.match(fetch.stderr, /daemon certificate signed/);
          assert.match(fetch.stderr, new RegExp(`${node}\\s+ok`));
        },
      );

      await t.step(
        "with no signer, a gone pod, a gone node and a half-approved request wait; the signer decides them",
        async () => {
          const list = await readyDaemons(admin, ns);
          const onJoined = list.find((p) => p.spec.nodeName === joinedNode);
          const [kept, gone] = list.filter((p) => p.spec.nodeName !== joinedNode);
          assert.ok(onJoined && kept && gone);
          // One approved by a leader that died before writing the certificate.
          const halfway = await post(
            await daemonToken(kept),
            csrBody(`signer-halfway-${ns}`, {
              node: kept.spec.nodeName,
              ip: kept.status.podIP,
            }),
          );
          const current = await getCsr(admin, halfway);
          const approve = await admin.request("PUT", `${CSR_PATH}/${halfway}/approval`, {
            ...current,
            status: {
              conditions: [{
                type: "Approved",
                status: "True",
                reason: "AicrDaemonPodMatched",
                message: "approved by a leader that died before signing",
              }],
            },
          });
          assert.equal(approve.status, 200, JSON.stringify(approve.body));
          // A request whose pod is then deleted (the DaemonSet makes another).
          const podGone = await post(
            await daemonToken(gone),
            csrBody(`signer-pod-gone-${ns}`, {
              node: gone.spec.nodeName,
              ip: gone.status.podIP,
            }),
          );
          const deleted = await admin.request(
            "DELETE",
            `/api/v1/namespaces/${ns}/pods/${gone.metadata.name}`,
            {
              gracePeriodSeconds: 0,
            },
          );
          assert.ok([200, 202].includes(deleted.status), JSON.stringify(deleted.body));
          // A request whose node then goes away (the autoscaler removed it; its pod lingers).
          const nodeGone = await post(
            await daemonToken(onJoined),
            csrBody(`signer-node-gone-${ns}`, {
              node: joinedNode,
              ip: onJoined.status.podIP,
            }),
          );
          await joined?.stop();
          joined = undefined;
          await scaleSigner(admin, ns, 2);
          await issued(halfway);
          assert.equal(condition(await getCsr(admin, halfway), "Failed"), undefined);
          assert.equal((await refused(podGone)).reason, "UnknownPod");
          const nodeRefusal = await refused(nodeGone);
          assert.equal(nodeRefusal.reason, "UnknownNode", JSON.stringify(nodeRefusal));
          assert.match(
            String(nodeRefusal.message),
            new RegExp(`node ${joinedNode} does not exist`),
          );
        },
      );

      await t.step(
        "a Lease held by a dead pod is taken over after its duration, and nothing is lost",
        async () => {
          await scaleSigner(admin, ns, 0);
          const current = await lease(admin, ns);
          const now = new Date().toISOString().replace(/\.(\d{3})Z$/, ".$1000Z");
          const put = await admin.request(
            "PUT",
            `/apis/coordination.k8s.io/v1/namespaces/${ns}/leases/aicr-daemon-signer`,
            {
              ...current,
              spec: {
                holderIdentity: "aicr-daemon-signer-dead-00000_deadbeef",
                leaseDurationSeconds: 15,
                acquireTime: now,
                renewTime: now,
                leaseTransitions: current.spec?.leaseTransitions ?? 0,
              },
            },
          );
          assert.equal(put.status, 200, JSON.stringify(put.body));
          const [pod] = await readyDaemons(admin, ns);
          assert.ok(pod);
          const waiting = await post(
            await daemonToken(pod),
            csrBody(`signer-waits-${ns}`, {
              node: pod.spec.nodeName,
              ip: pod.status.podIP,
            }),
          );
          await scaleSigner(admin, ns, 2);
          const scaledAt = Date.now();
          await waitFor(
            "two signer replicas running",
            async () =>
              (await pods(admin, ns, SIGNER_PODS)).filter(isReady).length === 2 ? true : undefined,
            90_000,
          );
          // The replicas see the dead holder's record and leave it alone for its duration.
          if (Date.now() - scaledAt < 8_000) {
            await new Promise((r) => setTimeout(r, 8_000 - (Date.now() - scaledAt)));
            assert.equal(
              (await lease(admin, ns)).spec?.holderIdentity,
              "aicr-daemon-signer-dead-00000_deadbeef",
              "taken over before its duration",
            );
            assert.equal((await getCsr(admin, waiting))?.status?.certificate, undefined);
          }
          await issued(waiting);
          const taken = await lease(admin, ns);
          assert.notEqual(taken.spec?.holderIdentity, "aicr-daemon-signer-dead-00000_deadbeef");
          assert.equal(taken.spec?.leaseTransitions, (current.spec?.leaseTransitions ?? 0) + 1);
        },
      );

      await t.step(
        "SIGKILL of the leader amid a burst of requests: the other replica signs them all",
        async () => {
          const daemons = await readyDaemons(admin, ns);
          const tokens = await Promise.all(daemons.map((p) => daemonToken(p)));
          const names = daemons.flatMap((p, i) =>
            Array.from(
              { length: 20 },
              (_, j) => ({
                pod: p,
                token: tokens[i] as string,
                name: `signer-burst-${i}-${j}-${ns}`,
              }),
            )
          );
          const leaderBefore = (await lease(admin, ns)).spec?.holderIdentity as string;
          const leaderPod = leaderBefore.slice(0, leaderBefore.lastIndexOf("_"));
          const pid = await pidOfPod(leaderPod);
          assert.ok(pid, `the leader ${leaderPod}'s process`);
          // The first wave is posted before the kill, and the leader is killed as soon as one of it
          // is approved: mid-approval. The second wave is posted after the kill, so only a new
          // leader can sign it, however fast the old one was with the first wave.
          const first = names.filter((_, i) => i % 2 === 0);
          const second = names.filter((_, i) => i % 2 === 1);
          const postAll = (wave: typeof names) =>
            Promise.all(
              wave.map(({ pod, token, name }) =>
                post(token, csrBody(name, { node: pod.spec.nodeName, ip: pod.status.podIP }))
              ),
            );
          const watching = (async () => {
            await waitFor("the first approval of the burst", async () => {
              for (const { name } of first.slice(0, 8)) {
                if (condition(await getCsr(admin, name), "Approved")) return true;
              }
              return undefined;
            }, 60_000);
            Deno.kill(pid, "SIGKILL");
          })();
          await postAll(first);
          await watching;
          await postAll(second);
          for (const { name } of names) await issued(name);
          for (const { name } of names) {
            const csr = await getCsr(admin, name);
            assert.equal(condition(csr, "Denied"), undefined, name);
            assert.equal(condition(csr, "Failed"), undefined, name);
          }
          const after = await lease(admin, ns);
          assert.notEqual(after.spec?.holderIdentity, leaderBefore, "another identity leads");
        },
      );

      await t.step("uninstall removes the signer's objects with the daemon's", async () => {
        const run = await aicr([
          "daemonset",
          "uninstall",
          "--kubeconfig",
          env.cluster.adminKubeconfig,
          "-n",
          ns,
        ], { deadlineMs: 180_000 });
        assert.equal(run.code, 0, run.stderr);
        for (const kind of ["Deployment", "Lease", "ServiceAccount", "Role"]) {
          const res = await admin.request(
            "GET",
            `${collection(ns, kind)}?labelSelector=${
              encodeURIComponent("app.kubernetes.io/name=aicr")
            }`,
          );
          assert.deepEqual(res.body.items, [], kind);
        }
        assert.deepEqual(await pods(admin, ns, SIGNER_PODS), []);
      });
    } finally {
      await joined?.stop().catch(() => {});
      const names = (await admin.request("GET", CSR_PATH)).body.items as Obj[] ?? [];
      for (const csr of names.filter((c) => String(c.metadata.name).endsWith(ns))) {
        await admin.request("DELETE", `${CSR_PATH}/${csr.metadata.name}`);
      }
      await admin.request("DELETE", `/api/v1/namespaces/${ns}`);
      // The daemons and signers this file's objects started end before the file does, passed or
      // failed (a failed step leaves them running): bounded, and said when they do not.
      await waitFor("the signer namespace's pods to end", async () => {
        const res = await admin.request("GET", `/api/v1/namespaces/${ns}/pods`);
        return res.status === 404 || (res.body.items ?? []).length === 0 ? true : undefined;
      }, 120_000).catch((error) => {
        // deno-lint-ignore no-console
        console.error(`  ${(error as Error).message}`);
      });
      await rm(work, { recursive: true, force: true });
      await env.stop();
    }
  },
});
