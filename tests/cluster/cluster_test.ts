/**
 * End-to-end proof that the test cluster is a real one: real apiserver, scheduler, controllers
 * (Job, garbage collector, serviceaccount) and RBAC, with pods run by the kubelet stand-in.
 *
 * Starts one cluster for the whole file (or reuses `AICR_CLUSTER_DIR` if one runs there).
 */

import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import type { Api, Obj } from "../kubelet/api.ts";
import { create, createNamespace, type TestCluster, useTestCluster, waitFor } from "./harness.ts";

/** A Job with one container of the host-userland image running `sh -c script`. */
function job(name: string, script: string, extra: { pod?: Obj; job?: Obj } = {}): Obj {
  return {
    apiVersion: "batch/v1",
    kind: "Job",
    metadata: { name },
    spec: {
      backoffLimit: 0,
      ...extra.job,
      template: {
        spec: {
          restartPolicy: "Never",
          terminationGracePeriodSeconds: 5,
          containers: [{
            name: "main",
            image: "busybox:1.36",
            command: ["sh", "-c", script],
            env: [{ name: "NODE_NAME", valueFrom: { fieldRef: { fieldPath: "spec.nodeName" } } }],
          }],
          ...extra.pod,
        },
      },
    },
  };
}

/** A bare pod running `sh -c script`. */
function pod(name: string, script: string, spec: Obj = {}): Obj {
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name },
    spec: {
      restartPolicy: "Never",
      terminationGracePeriodSeconds: 5,
      containers: [{ name: "main", image: "busybox", command: ["sh", "-c", script] }],
      ...spec,
    },
  };
}

async function getPod(api: Api, ns: string, name: string): Promise<Obj> {
  const res = await api.request("GET", `/api/v1/namespaces/${ns}/pods/${name}`);
  assert.equal(res.status, 200, `get pod ${ns}/${name}: ${res.body.message}`);
  return res.body;
}

async function waitPhase(api: Api, ns: string, name: string, phases: string[]): Promise<Obj> {
  return await waitFor(`pod ${ns}/${name} in ${phases.join("|")}`, async () => {
    const p = await getPod(api, ns, name);
    return phases.includes(p.status?.phase) ? p : undefined;
  });
}

async function jobPods(api: Api, ns: string, job: string): Promise<Obj[]> {
  const res = await api.request(
    "GET",
    `/api/v1/namespaces/${ns}/pods?labelSelector=${encodeURIComponent(`job-name=${job}`)}`,
  );
  return res.body.items ?? [];
}

async function logs(api: Api, ns: string, name: string): Promise<string> {
  const res = await api.request("GET", `/api/v1/namespaces/${ns}/pods/${name}/log`);
  assert.equal(res.status, 200, `logs of ${ns}/${name}: ${JSON.stringify(res.body)}`);
  return String(res.body.text ?? JSON.stringify(res.body));
}

Deno.test({
  name: "cluster: real control plane and kubelet stand-in",
  // One cluster serves every step; its watches, timers and child processes live across steps and
  // are released by env.stop() in `finally`, which the per-step sanitizers cannot see.
  sanitizeOps: false,
  sanitizeResources: false,
  async fn(t) {
    const env: TestCluster = await useTestCluster();
    const { admin } = env;
    const namespaces: string[] = [];
    const ns = async (prefix: string) => {
      const n = await createNamespace(admin, prefix);
      namespaces.push(n);
      return n;
    };
    const gpuNodes = env.nodes.filter((n) => n.gpu).map((n) => n.name);
    const cpuNodes = env.nodes.filter((n) => !n.gpu).map((n) => n.name);
    try {
      await t.step(
        "nodes from the profiles are registered Ready with GPU labels, capacity and taints",
        async () => {
          const res = await admin.request("GET", "/api/v1/nodes");
          const byName = new Map<string, Obj>(res.body.items.map((n: Obj) => [n.metadata.name, n]));
          for (const n of env.nodes) {
            const node = byName.get(n.name);
            assert.ok(node, `node ${n.name} registered`);
            const ready = node.status.conditions.find((c: Obj) => c.type === "Ready");
            assert.equal(ready.status, "True");
            assert.equal(
              node.status.addresses.find((a: Obj) => a.type === "InternalIP").address,
              n.ip,
            );
            if (n.gpu) {
              assert.equal(node.metadata.labels["nvidia.com/gpu.present"], "true");
              assert.equal(node.status.capacity["nvidia.com/gpu"], "8");
              assert.deepEqual(node.spec.taints.map((x: Obj) => x.key), ["nvidia.com/gpu"]);
            } else {
              assert.equal(node.metadata.labels["nvidia.com/gpu.present"], undefined);
              assert.equal(node.status.capacity["nvidia.com/gpu"], undefined);
            }
          }
          const lease = await admin.request(
            "GET",
            `/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/${env.nodes[0]!.name}`,
          );
          assert.equal(lease.status, 200);
          assert.equal(
            new Set(env.nodes.map((n) => n.ip)).size,
            env.nodes.length,
            "each node has its own address",
          );
        },
      );

      await t.step(
        "a Job whose pod runs a command completes, and its logs read back through the API",
        async () => {
          const n = await ns("job");
          await create(
            admin,
            `/apis/batch/v1/namespaces/${n}/jobs`,
            job("hello", 'echo "hello from $NODE_NAME"; echo second line'),
          );
          const done = await waitFor("Job Complete", async () => {
            const j = await admin.request("GET", `/apis/batch/v1/namespaces/${n}/jobs/hello`);
            return j.body.status?.conditions?.find((c: Obj) =>
                c.type === "Complete" && c.status === "True"
              )
              ? j.body
              : undefined;
          });
          assert.equal(done.status.succeeded, 1);
          const [p] = await jobPods(admin, n, "hello");
          assert.ok(p);
          assert.equal(p.status.phase, "Succeeded");
          const cs = p.status.containerStatuses[0];
          assert.equal(cs.state.terminated.exitCode, 0);
          assert.equal(cs.state.terminated.reason, "Completed");
          assert.ok(
            cpuNodes.includes(p.spec.nodeName),
            `untolerating pod on a CPU node, got ${p.spec.nodeName}`,
          );
          assert.equal(
            await logs(admin, n, p.metadata.name),
            `hello from ${p.spec.nodeName}\nsecond line\n`,
          );
          // kubectl logs goes the same way: apiserver → kubelet HTTPS with the kubelet client certificate.
          const out = await new Deno.Command("kubectl", {
            args: [
              "--kubeconfig",
              env.cluster.adminKubeconfig,
              "-n",
              n,
              "logs",
              "job/hello",
              "--tail=1",
            ],
            stdout: "piped",
            stderr: "piped",
          }).output();
          assert.equal(new TextDecoder().decode(out.stderr), "");
          assert.equal(new TextDecoder().decode(out.stdout), "second line\n");
        },
      );

      await t.step(
        "a container's exit code and reason are reported and the pod fails",
        async () => {
          const n = await ns("exit");
          await create(
            admin,
            `/api/v1/namespaces/${n}/pods`,
            pod("fails", "echo oops >&2; exit 3"),
          );
          const p = await waitPhase(admin, n, "fails", ["Failed", "Succeeded"]);
          assert.equal(p.status.phase, "Failed");
          assert.equal(p.status.containerStatuses[0].state.terminated.exitCode, 3);
          assert.equal(p.status.containerStatuses[0].state.terminated.reason, "Error");
          assert.equal(await logs(admin, n, "fails"), "oops\n");
          // `args` without `command` (kubectl run style) replace the image's default command.
          const argsOnly = pod("args", "");
          delete argsOnly.spec.containers[0].command;
          argsOnly.spec.containers[0].args = ["sh", "-c", "echo args only"];
          await create(admin, `/api/v1/namespaces/${n}/pods`, argsOnly);
          assert.equal(
            (await waitPhase(admin, n, "args", ["Failed", "Succeeded"])).status.phase,
            "Succeeded",
          );
          assert.equal(await logs(admin, n, "args"), "args only\n");
        },
      );

      await t.step(
        "a pod's ServiceAccount token is its own identity and RBAC denies what it does not grant",
        async () => {
          const n = await ns("rbac");
          await create(admin, `/api/v1/namespaces/${n}/serviceaccounts`, {
            metadata: { name: "agent" },
          });
          await create(admin, `/apis/rbac.authorization.k8s.io/v1/namespaces/${n}/roles`, {
            metadata: { name: "read-pods" },
            rules: [{ apiGroups: [""], resources: ["pods"], verbs: ["get", "list"] }],
          });
          await create(admin, `/apis/rbac.authorization.k8s.io/v1/namespaces/${n}/rolebindings`, {
            metadata: { name: "agent-read-pods" },
            roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "Role", name: "read-pods" },
            subjects: [{ kind: "ServiceAccount", name: "agent", namespace: n }],
          });
          const script = [
            "sa=/var/run/secrets/kubernetes.io/serviceaccount",
            'api="https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT"',
            'c() { curl -sS --cacert $sa/ca.crt -H "Authorization: Bearer $(cat $sa/token)" "$@"; }',
            'echo "ns=$(cat $sa/namespace)"',
            'echo "pods=$(c -o /dev/null -w "%{http_code}" "$api/api/v1/namespaces/$(cat $sa/namespace)/pods")"',
            'echo "secrets=$(c -o /dev/null -w "%{http_code}" "$api/api/v1/namespaces/$(cat $sa/namespace)/secrets")"',
            `c -X POST -H "Content-Type: application/json" -d '{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}' "$api/apis/authentication.k8s.io/v1/selfsubjectreviews" | tr -d ' \\n' | grep -o -e '"username":"[^"]*"' -e 'pod-name":\\["[^"]*"'`,
          ].join("\n");
          await create(
            admin,
            `/api/v1/namespaces/${n}/pods`,
            pod("whoami", script, { serviceAccountName: "agent" }),
          );
          const p = await waitPhase(admin, n, "whoami", ["Succeeded", "Failed"]);
          const out = await logs(admin, n, "whoami");
          assert.equal(p.status.phase, "Succeeded", out);
          assert.equal(
            out,
            `ns=${n}\npods=200\nsecrets=403\n"username":"system:serviceaccount:${n}:agent"\npod-name":["whoami"\n`,
          );
          // The token is the real projected one from the TokenRequest API, bound to the pod.
          assert.ok(
            p.spec.volumes.some((v: Obj) =>
              v.projected?.sources?.some((s: Obj) => s.serviceAccountToken)
            ),
          );
        },
      );

      await t.step("a limited test identity sees only what it is granted", async () => {
        const alice = await env.clientFor("alice");
        const denied = await alice.request("GET", "/api/v1/namespaces/default/pods");
        assert.equal(denied.status, 403);
        assert.match(denied.body.message, /User "alice" cannot list resource "pods"/);
        const viewer = await env.clientFor("bob", ["aicr:viewers"]);
        await admin.request("POST", "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", {
          metadata: { name: "aicr-test-viewers" },
          roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name: "view" },
          subjects: [{
            apiGroup: "rbac.authorization.k8s.io",
            kind: "Group",
            name: "aicr:viewers",
          }],
        });
        try {
          await waitFor(
            "bob can list pods via group",
            async () =>
              (await viewer.request("GET", "/api/v1/namespaces/default/pods")).status === 200
                ? true
                : undefined,
          );
          assert.equal(
            (await viewer.request("GET", "/api/v1/namespaces/default/secrets")).status,
            403,
          );
        } finally {
          await admin.request(
            "DELETE",
            "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/aicr-test-viewers",
          );
        }
      });

      await t.step(
        "a pod with a GPU nodeSelector lands only on a GPU node and sees its nvidia-smi",
        async () => {
          const n = await ns("gpu");
          const spec = {
            nodeSelector: { "nvidia.com/gpu.present": "true" },
            tolerations: [{ key: "nvidia.com/gpu", operator: "Exists", effect: "NoSchedule" }],
          };
          const names = ["g1", "g2", "g3", "g4"];
          const script = "nvidia-smi -q -x | grep -m1 -o '<product_name>[^<]*'";
          for (const name of names) {
            const p = pod(name, script, spec);
            // The agent mounts an emptyDir at /tmp: nvidia-smi must not depend on host paths under it.
            p.spec.volumes = [{ name: "tmp", emptyDir: {} }];
            p.spec.containers[0].volumeMounts = [{ name: "tmp", mountPath: "/tmp" }];
            await create(admin, `/api/v1/namespaces/${n}/pods`, p);
          }
          for (const name of names) {
            const p = await waitPhase(admin, n, name, ["Succeeded", "Failed"]);
            assert.ok(gpuNodes.includes(p.spec.nodeName), `${name} on ${p.spec.nodeName}`);
            assert.equal(p.status.phase, "Succeeded");
            const product = p.spec.nodeName.startsWith("p5-h100")
              ? "NVIDIA H100 80GB HBM3"
              : "NVIDIA GB200 192GB HBM3e";
            assert.equal(await logs(admin, n, name), `<product_name>${product}\n`);
            assert.equal(p.status.hostIP, env.nodes.find((x) => x.name === p.spec.nodeName)!.ip);
          }
        },
      );

      await t.step("a tainted node is avoided without a toleration", async () => {
        const n = await ns("taint");
        for (const name of ["c1", "c2", "c3", "c4"]) {
          await create(admin, `/api/v1/namespaces/${n}/pods`, pod(name, "true"));
        }
        for (const name of ["c1", "c2", "c3", "c4"]) {
          const p = await waitPhase(admin, n, name, ["Succeeded", "Failed"]);
          assert.ok(cpuNodes.includes(p.spec.nodeName), `${name} on ${p.spec.nodeName}`);
        }
        // Asking for GPU nodes without tolerating their taint: the scheduler finds no node.
        await create(
          admin,
          `/api/v1/namespaces/${n}/pods`,
          pod("untolerated", "true", { nodeSelector: { "nvidia.com/gpu.present": "true" } }),
        );
        const p = await waitFor("Unschedulable", async () => {
          const x = await getPod(admin, n, "untolerated");
          return x.status?.conditions?.find((c: Obj) =>
              c.type === "PodScheduled" && c.reason === "Unschedulable"
            )
            ? x
            : undefined;
        });
        assert.equal(p.spec.nodeName, undefined);
        assert.match(
          p.status.conditions.find((c: Obj) => c.type === "PodScheduled").message,
          /didn.t match Pod.s node affinity\/selector, \d+ node\(s\) had untolerated taint/,
        );
      });

      await t.step(
        "pods on different nodes listen on the same port at their node's address",
        async () => {
          const n = await ns("net");
          const port = 20000 + Math.floor(Math.random() * 30000);
          const [a, b] = env.nodes;
          assert.ok(a && b);
          const server = [
            "const host = Deno.env.get('POD_IP');",
            `Deno.serve({ hostname: host, port: ${port}, onListen() { console.log('listening on ' + host); } },`,
            "  () => new Response(Deno.env.get('NODE_NAME')));",
          ].join(" ");
          for (
            const [name, node, hostNetwork] of [["srv-a", a, false], ["srv-b", b, true]] as const
          ) {
            await create(admin, `/api/v1/namespaces/${n}/pods`, {
              apiVersion: "v1",
              kind: "Pod",
              metadata: { name },
              spec: {
                nodeName: node.name,
                hostNetwork,
                terminationGracePeriodSeconds: 1,
                tolerations: [{ operator: "Exists" }],
                containers: [{
                  name: "main",
                  image: "shell",
                  command: [Deno.execPath(), "eval", server],
                  env: [
                    { name: "POD_IP", valueFrom: { fieldRef: { fieldPath: "status.podIP" } } },
                    { name: "NODE_NAME", valueFrom: { fieldRef: { fieldPath: "spec.nodeName" } } },
                  ],
                }],
              },
            });
          }
          for (const [name, node] of [["srv-a", a], ["srv-b", b]] as const) {
            const p = await waitPhase(admin, n, name, ["Running", "Failed", "Succeeded"]);
            assert.equal(p.status.podIP, node.ip);
            await waitFor(
              `${name} listening`,
              async () =>
                (await logs(admin, n, name)).includes(`listening on ${node.ip}`) ? true : undefined,
            );
            const res = await fetch(`http://${node.ip}:${port}/`);
            assert.equal(await res.text(), node.name);
          }
          for (const name of ["srv-a", "srv-b"]) {
            await admin.request("DELETE", `/api/v1/namespaces/${n}/pods/${name}`);
          }
        },
      );

      await t.step(
        "securityContext runAsUser runs the container as that user; runAsNonRoot alone is refused",
        async () => {
          const n = await ns("user");
          const script = [
            "id -u; id -g",
            // No /dev/null here: the test must not depend on the host having a sane one.
            "test -r /var/run/secrets/kubernetes.io/serviceaccount/token && echo token-readable",
            "echo x > /tmp/x && echo tmp-writable",
            "if (echo x > /root/aicr-test-x) 2>/tmp/err; then echo root-writable; else echo root-denied; fi",
          ].join("; ");
          await create(
            admin,
            `/api/v1/namespaces/${n}/pods`,
            pod("nobody", script, {
              securityContext: { runAsNonRoot: true, runAsUser: 65534, runAsGroup: 65534 },
              volumes: [{ name: "tmp", emptyDir: {} }],
              containers: [{
                name: "main",
                image: "busybox",
                command: ["sh", "-c", script],
                volumeMounts: [{ name: "tmp", mountPath: "/tmp" }],
              }],
            }),
          );
          const p = await waitPhase(admin, n, "nobody", ["Succeeded", "Failed"]);
          const out = await logs(admin, n, "nobody");
          assert.equal(p.status.phase, "Succeeded", out);
          assert.equal(out, "65534\n65534\ntoken-readable\ntmp-writable\nroot-denied\n");
          await create(
            admin,
            `/api/v1/namespaces/${n}/pods`,
            pod("rootish", "true", {
              securityContext: { runAsNonRoot: true },
            }),
          );
          const refused = await waitFor("CreateContainerConfigError", async () => {
            const x = await getPod(admin, n, "rootish");
            const w = x.status?.containerStatuses?.[0]?.state?.waiting;
            return w?.reason === "CreateContainerConfigError" ? w : undefined;
          });
          assert.match(refused.message, /runAsNonRoot/);
        },
      );

      await t.step("an unknown image ends as ErrImagePull, then ImagePullBackOff", async () => {
        const n = await ns("image");
        const spec = pod("nopull", "true");
        spec.spec.containers[0].image = "registry.invalid/nothing:1";
        await create(admin, `/api/v1/namespaces/${n}/pods`, spec);
        const p = await waitFor("ImagePullBackOff", async () => {
          const x = await getPod(admin, n, "nopull");
          return x.status?.containerStatuses?.[0]?.state?.waiting?.reason === "ImagePullBackOff"
            ? x
            : undefined;
        });
        assert.equal(p.status.phase, "Pending");
        assert.match(
          p.status.containerStatuses[0].state.waiting.message,
          /ErrImagePull: .*registry\.invalid\/nothing:1: not found/,
        );
      });

      await t.step(
        "volumes, env and hostname: emptyDir over /tmp, configMap, downward API, restarts",
        async () => {
          const n = await ns("vol");
          await create(admin, `/api/v1/namespaces/${n}/configmaps`, {
            metadata: { name: "cfg" },
            data: { greeting: "hi" },
          });
          const script = [
            "n=$(cat /tmp/count 2>/dev/null || echo 0); echo $((n+1)) > /tmp/count",
            'echo "run=$((n+1)) host=$(hostname) pod=$POD ns=$NS greeting=$(cat /etc/cfg/greeting) env=$GREETING"',
            "test -s /var/run/secrets/kubernetes.io/serviceaccount/token",
            // Fail the first run: OnFailure restarts it, and the emptyDir keeps the count.
            '[ "$n" -ge 1 ]',
          ].join("; ");
          await create(
            admin,
            `/api/v1/namespaces/${n}/pods`,
            pod("vols", script, {
              restartPolicy: "OnFailure",
              volumes: [{ name: "tmp", emptyDir: {} }, { name: "cfg", configMap: { name: "cfg" } }],
              containers: [{
                name: "main",
                image: "busybox",
                command: ["sh", "-c", script],
                env: [
                  { name: "POD", valueFrom: { fieldRef: { fieldPath: "metadata.name" } } },
                  { name: "NS", valueFrom: { fieldRef: { fieldPath: "metadata.namespace" } } },
                  {
                    name: "GREETING",
                    valueFrom: { configMapKeyRef: { name: "cfg", key: "greeting" } },
                  },
                ],
                volumeMounts: [{ name: "tmp", mountPath: "/tmp" }, {
                  name: "cfg",
                  mountPath: "/etc/cfg",
                  readOnly: true,
                }],
              }],
            }),
          );
          const p = await waitPhase(admin, n, "vols", ["Succeeded", "Failed"]);
          assert.equal(p.status.phase, "Succeeded");
          assert.equal(p.status.containerStatuses[0].restartCount, 1);
          assert.equal(
            await logs(admin, n, "vols"),
            `run=2 host=vols pod=vols ns=${n} greeting=hi env=hi\n`,
          );
          assert.ok(!existsSync("/tmp/count"), "the emptyDir was private to the pod");
        },
      );
      await t.step("hostPath volumes are the host's files, read-only when asked", async () => {
        const n = await ns("hostpath");
        const dir = await Deno.makeTempDir({ prefix: "aicr-hostpath-" });
        try {
          await Deno.writeTextFile(`${dir}/f`, "from host\n");
          const script = [
            `cat ${dir}/f /view/f`,
            `if (echo x >> ${dir}/f) 2>/dev/null; then echo writable; else echo read-only; fi`,
            "echo y >> /view/f && echo view-writable",
          ].join("; ");
          await create(
            admin,
            `/api/v1/namespaces/${n}/pods`,
            pod("hp", script, {
              volumes: [{ name: "h", hostPath: { path: dir, type: "Directory" } }],
              containers: [{
                name: "main",
                image: "busybox",
                command: ["sh", "-c", script],
                volumeMounts: [
                  { name: "h", mountPath: dir, readOnly: true },
                  { name: "h", mountPath: "/view" },
                ],
              }],
            }),
          );
          const p = await waitPhase(admin, n, "hp", ["Succeeded", "Failed"]);
          const out = await logs(admin, n, "hp");
          assert.equal(p.status.phase, "Succeeded", out);
          assert.equal(out, "from host\nfrom host\nread-only\nview-writable\n");
          assert.equal(await Deno.readTextFile(`${dir}/f`), "from host\ny\n");
        } finally {
          await Deno.remove(dir, { recursive: true });
        }
      });

      await t.step(
        "deleting a pod sends SIGTERM, lets the process run on through the grace period, then SIGKILLs",
        async () => {
          const n = await ns("grace");
          // Observed, not timed: after TERM the process keeps printing (it was not killed with
          // the TERM), and it never exits by itself, so the pod going away means it was killed.
          const script =
            "trap 'echo got TERM; termed=1' TERM; echo started; while true; do [ -n \"$termed\" ] && echo alive after TERM; sleep 0.1; done";
          await create(
            admin,
            `/api/v1/namespaces/${n}/pods`,
            pod("stubborn", script, { terminationGracePeriodSeconds: 2 }),
          );
          await waitPhase(admin, n, "stubborn", ["Running"]);
          await waitFor(
            "started",
            async () => (await logs(admin, n, "stubborn")).includes("started") ? true : undefined,
          );
          assert.equal(
            (await admin.request("DELETE", `/api/v1/namespaces/${n}/pods/stubborn`)).status,
            200,
          );
          await waitFor(
            "got TERM",
            async () => (await logs(admin, n, "stubborn")).includes("got TERM") ? true : undefined,
          );
          await waitFor(
            "the process still running after TERM",
            async () =>
              (await logs(admin, n, "stubborn")).includes("alive after TERM") ? true : undefined,
          );
          await waitFor(
            "pod gone",
            async () =>
              (await admin.request("GET", `/api/v1/namespaces/${n}/pods/stubborn`)).status === 404
                ? true
                : undefined,
          );
        },
      );

      await t.step(
        "deleting a Job with propagationPolicy Background removes its pods and their processes",
        async () => {
          const n = await ns("gc");
          await create(admin, `/apis/batch/v1/namespaces/${n}/jobs`, job("sleeper", "sleep 300"));
          const running = await waitFor("sleeper running", async () => {
            const [p] = await jobPods(admin, n, "sleeper");
            return p?.status?.phase === "Running" ? p : undefined;
          });
          const pid = Number(
            String(running.status.containerStatuses[0].containerID).replace("aicr://", ""),
          );
          assert.ok(existsSync(`/proc/${pid}`));
          const del = await admin.request("DELETE", `/apis/batch/v1/namespaces/${n}/jobs/sleeper`, {
            apiVersion: "v1",
            kind: "DeleteOptions",
            propagationPolicy: "Background",
          });
          assert.equal(del.status, 200);
          await waitFor(
            "job pods gone",
            async () => (await jobPods(admin, n, "sleeper")).length === 0 ? true : undefined,
          );
          await waitFor(
            "process gone",
            () => Promise.resolve(existsSync(`/proc/${pid}`) ? undefined : true),
            10_000,
          );
        },
      );

      await t.step("activeDeadlineSeconds fails the Job through the Job controller", async () => {
        const n = await ns("deadline");
        await create(
          admin,
          `/apis/batch/v1/namespaces/${n}/jobs`,
          job("slow", "sleep 300", { job: { activeDeadlineSeconds: 2 } }),
        );
        const failed = await waitFor("Job Failed", async () => {
          const j = await admin.request("GET", `/apis/batch/v1/namespaces/${n}/jobs/slow`);
          return j.body.status?.conditions?.find((c: Obj) =>
            c.type === "Failed" && c.status === "True"
          );
        });
        assert.equal(failed.reason, "DeadlineExceeded");
        await waitFor(
          "deadline pods gone",
          async () => (await jobPods(admin, n, "slow")).length === 0 ? true : undefined,
        );
      });
    } finally {
      for (const n of namespaces) {
        await admin.request("DELETE", `/api/v1/namespaces/${n}`).catch(() => {});
      }
      await env.stop();
    }
  },
});
