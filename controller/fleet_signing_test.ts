import assert from "node:assert/strict";
import type { KubeObject, RestRequest } from "../kube/mod.ts";
import { UsageError } from "../errors.ts";
import { createLogger } from "../log.ts";
import { createFakeKube } from "../tests/fakes/kube.ts";
import { signAndAwaitReady, signOrLeaveToSigner } from "./fleet_signing.ts";

const LABELS = {
  "app.kubernetes.io/name": "aicr",
  "app.kubernetes.io/component": "daemon",
  "app.kubernetes.io/instance": "aicr-daemon",
};
const USER = "system:serviceaccount:aicr-system:aicr-daemon";

function daemonPod(name: string, node: string, ready: boolean): KubeObject {
  return {
    metadata: { name, namespace: "aicr-system", labels: LABELS },
    spec: { nodeName: node },
    status: {
      phase: "Running",
      podIP: "10.0.0.1",
      conditions: [{ type: "Ready", status: ready ? "True" : "False" }],
    },
  };
}

function world() {
  const fake = createFakeKube();
  fake.put("DaemonSet", { metadata: { name: "aicr-daemon", namespace: "aicr-system" } });
  const writes: string[] = [];
  let requests: KubeObject[] = [];
  fake.client.rest.json = <T>(request: RestRequest): Promise<T> => {
    if (request.method === "GET") return Promise.resolve({ items: requests } as T);
    writes.push(`${request.method} ${request.path}`);
    return Promise.resolve(request.body as T);
  };
  const clock = { ms: 0 };
  return {
    fake,
    writes,
    setRequests: (list: KubeObject[]) => void (requests = list),
    clock,
    deps: {
      kube: fake.client,
      log: createLogger({ write: () => {} }),
      now: () => new Date(clock.ms),
      sleep: (ms: number) => {
        clock.ms += ms;
        return Promise.resolve();
      },
    },
  };
}

function request(podUid: string, status: KubeObject["status"] = {}): KubeObject {
  return {
    metadata: { name: `csr-${podUid}` },
    spec: {
      signerName: "aicr.run/daemon-serving",
      username: USER,
      extra: { "authentication.kubernetes.io/pod-uid": [podUid] },
    },
    status,
  };
}

Deno.test("signOrLeaveToSigner() leaves the signing to a running in-cluster signer", async () => {
  const w = world();
  w.fake.put("Deployment", {
    metadata: { name: "aicr-daemon-signer", namespace: "aicr-system" },
    spec: { replicas: 2 },
    status: { readyReplicas: 2, availableReplicas: 2 },
  } as never);
  w.fake.put("Lease", {
    metadata: { name: "aicr-daemon-signer", namespace: "aicr-system" },
    spec: { holderIdentity: "aicr-daemon-signer-x_1" },
  } as never);
  const pod = w.fake.put("Pod", daemonPod("a", "gpu-1", false) as never);
  w.setRequests([request(pod.metadata?.uid ?? "")]);
  const state = await signOrLeaveToSigner(w.deps, {
    namespace: "aicr-system",
    name: "aicr-daemon",
  });
  assert.equal(state.by, "signer");
  assert.deepEqual([...state.coming], [pod.metadata?.uid]);
  assert.deepEqual(w.writes, [], "the fetch approved nothing");
});

Deno.test("signOrLeaveToSigner() signs when no signer runs (an install made before it)", async () => {
  const w = world();
  const state = await signOrLeaveToSigner(w.deps, {
    namespace: "aicr-system",
    name: "aicr-daemon",
  });
  assert.equal(state.by, "fetch");
});

Deno.test("signOrLeaveToSigner() lets a kubeconfig error through, with no signing warning", async () => {
  const w = world();
  const lines: string[] = [];
  const broken = new UsageError("Cannot load kubeconfig '/nowhere': no such file");
  w.fake.client.rest.json = () => Promise.reject(broken);
  const deps = { ...w.deps, log: createLogger({ write: (line: string) => void lines.push(line) }) };
  await assert.rejects(
    signOrLeaveToSigner(deps, { namespace: "aicr-system", name: "aicr-daemon" }),
    (e) => e === broken,
  );
  assert.deepEqual(lines.filter((l) => /cannot sign/.test(l)), []);
});

Deno.test("signOrLeaveToSigner() warns and goes on when the API refuses the signing", async () => {
  const w = world();
  const lines: string[] = [];
  w.fake.client.rest.json = () => Promise.reject(new Error("HTTP 403 forbidden"));
  const deps = { ...w.deps, log: createLogger({ write: (line: string) => void lines.push(line) }) };
  const state = await signOrLeaveToSigner(deps, { namespace: "aicr-system", name: "aicr-daemon" });
  assert.equal(state.by, "nobody");
  assert.equal(lines.filter((l) => /cannot sign pending daemon certificate/.test(l)).length, 1);
});

Deno.test("signAndAwaitReady() waits for a daemon whose certificate is coming, and no broken one", async () => {
  const w = world();
  const coming = w.fake.put("Pod", daemonPod("a", "gpu-1", false) as never);
  const crashing = w.fake.put("Pod", {
    ...daemonPod("b", "gpu-2", false),
    status: {
      phase: "Running",
      containerStatuses: [{ state: { waiting: { reason: "CrashLoopBackOff" } } }],
    },
  } as never);
  w.setRequests([request(coming.metadata?.uid ?? "", { certificate: "eA==" })]);
  // Turns Ready two polls later (its next readiness probe after the certificate).
  let polls = 0;
  const sleep = w.deps.sleep;
  const deps = {
    ...w.deps,
    sleep: async (ms: number) => {
      await sleep(ms);
      if (++polls === 2) {
        const pod = w.fake.objects.get("Pod/aicr-system/a");
        if (pod) {
          pod.status = {
            ...(pod.status as object),
            conditions: [{ type: "Ready", status: "True" }],
          };
        }
      }
    },
  };
  const result = await signAndAwaitReady(deps, {
    namespace: "aicr-system",
    name: "aicr-daemon",
    timeoutMs: 30_000,
  });
  assert.deepEqual(result, { by: "fetch", waiting: [] });
  assert.equal(polls, 2, "returned as soon as it was Ready, not at the deadline");
  assert.ok(crashing.metadata?.uid);
});

Deno.test("signAndAwaitReady() waits for a daemon started just now that has not asked yet, up to its deadline", async () => {
  const w = world();
  w.fake.put("Pod", {
    ...daemonPod("a", "gpu-1", false),
    status: { phase: "Running", startTime: new Date(0).toISOString(), conditions: [] },
  } as never);
  const result = await signAndAwaitReady(w.deps, {
    namespace: "aicr-system",
    name: "aicr-daemon",
    timeoutMs: 5_000,
  });
  assert.deepEqual(result.waiting, ["gpu-1"]);
  assert.ok(w.clock.ms >= 5_000 && w.clock.ms < 7_000);
  // Long started and never asking: not about to become Ready; no wait.
  w.clock.ms = 10 * 60_000;
  const stale = await signAndAwaitReady(w.deps, {
    namespace: "aicr-system",
    name: "aicr-daemon",
    timeoutMs: 5_000,
  });
  assert.deepEqual(stale.waiting, []);
});
