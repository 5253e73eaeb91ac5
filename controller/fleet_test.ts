import assert from "node:assert/strict";
import { exitCodeOf, InterruptedError } from "../errors.ts";
import { KubeApiError } from "../kube/mod.ts";
import type { RestRequest } from "../kube/mod.ts";
import { createLogger } from "../log.ts";
import { encodeSnapshot, parseSnapshotStream } from "../snapshot/mod.ts";
import { createFakeKube } from "../tests/fakes/kube.ts";
import { sampleSnapshot } from "../tests/fakes/snapshot.ts";
import {
  AnswerTooLargeError,
  fetchFleet,
  fleetError,
  fleetStream,
  formatFleetTable,
} from "./fleet.ts";
import type { DirectGet, DirectRequest, FleetResult, HttpAnswer } from "./fleet.ts";

const NS = "aicr-system";
const LABELS = {
  "app.kubernetes.io/name": "aicr",
  "app.kubernetes.io/component": "daemon",
  "app.kubernetes.io/instance": "aicr-daemon",
};

function cluster(nodes: { node: string; ip: string; ready?: boolean }[]) {
  const fake = createFakeKube();
  fake.put("ConfigMap", {
    metadata: { name: "aicr-daemon-ca", namespace: NS },
    data: { "ca.crt": "CA PEM" },
  } as never);
  for (const { node, ip, ready = true } of nodes) {
    fake.put("Pod", {
      metadata: { name: `aicr-daemon-${node}`, namespace: NS, labels: LABELS },
      spec: { nodeName: node, containers: [{ ports: [{ containerPort: 8443 }] }] },
      status: { podIP: ip, conditions: [{ type: "Ready", status: ready ? "True" : "False" }] },
    } as never);
  }
  const tokenRequests: RestRequest[] = [];
  const proxied: RestRequest[] = [];
  fake.client.rest.json = <T>(request: RestRequest) => {
    // The signer's list of pending certificate requests: none here.
    if (request.method === "GET") return Promise.resolve({ items: [] } as T);
    tokenRequests.push(request);
    // No audience: the reader's token for the API server (the topology LIST).
    const node = (request.body as { spec: { audiences?: string[] } }).spec.audiences?.[0] ??
      "the API server";
    return Promise.resolve({ status: { token: `reader-token for ${node}` } } as T);
  };
  return { fake, tokenRequests, proxied };
}

function snapshotAnswer(node: string): HttpAnswer {
  return { status: 200, body: encodeSnapshot(sampleSnapshot({ nodeName: node })) };
}

const quiet = () => createLogger({ write: () => {} });

Deno.test("fleet: each node gets its own status and its own token, bound to its node", async () => {
  const { fake, tokenRequests } = cluster([
    { node: "a-ok", ip: "10.0.0.1" },
    { node: "b-503", ip: "10.0.0.2" },
    { node: "c-403", ip: "10.0.0.3" },
    { node: "d-refused", ip: "10.0.0.4" },
    { node: "e-slow", ip: "10.0.0.5" },
    { node: "f-429", ip: "10.0.0.6" },
    { node: "g-pending", ip: "10.0.0.7", ready: false },
  ]);
  const seen: DirectRequest[] = [];
  let rateLimited = false;
  const directGet: DirectGet = (request) => {
    seen.push(request);
    const ip = new URL(request.url).hostname;
    switch (ip) {
      case "10.0.0.1":
        return Promise.resolve(snapshotAnswer("a-ok"));
      case "10.0.0.2":
        return Promise.resolve({ status: 503, body: '{"message":"not ready"}' });
      case "10.0.0.3":
        return Promise.resolve({ status: 403, body: '{"message":"User \\"x\\" cannot get"}' });
      case "10.0.0.4":
        return Promise.reject(Object.assign(new Error("connect ECONNREFUSED"), { code: "x" }));
      case "10.0.0.6":
        if (!rateLimited) {
          rateLimited = true;
          return Promise.resolve({ status: 429, body: "{}", retryAfterSeconds: 1 });
        }
        return Promise.resolve(snapshotAnswer("f-429"));
      default:
        return new Promise((_, reject) =>
          request.signal.addEventListener("abort", () => reject(request.signal.reason))
        );
    }
  };
  const sleeps: number[] = [];
  const fleet = await fetchFleet({
    kube: fake.client,
    log: quiet(),
    directGet,
    sleep: (ms) => {
      sleeps.push(ms);
      return Promise.resolve();
    },
  }, { namespace: NS, transport: "direct", timeoutMs: 1500 });
  assert.deepEqual(fleet.results.map((r) => [r.node, r.status]), [
    ["a-ok", "ok"],
    ["b-503", "not-ready"],
    ["c-403", "denied"],
    ["d-refused", "unreachable"],
    ["e-slow", "timed-out"],
    ["f-429", "ok"],
    ["g-pending", "not-ready"],
  ]);
  assert.equal(fleet.results[0]?.snapshot?.metadata["source-node"], "a-ok");
  assert.deepEqual(sleeps, [1000], "429 is retried once after Retry-After");
  assert.equal(
    seen.filter((r) => r.url.includes("10.0.0.7")).length,
    0,
    "a pod not Ready is not asked",
  );
  // Each node's request carries its own token and must be answered with a certificate naming it.
  for (const r of seen) {
    const node = r.servername;
    assert.equal(r.token, `reader-token for aicr-daemon:${node}`);
    assert.equal(r.ca, "CA PEM");
  }
  assert.equal(seen[0]?.url, "https://10.0.0.1:8443/v1/snapshot");
  assert.equal(seen[0]?.servername, "a-ok");
  // One token per asked node (the six Ready ones), none for the pending pod; and the fake has
  // no bearer-token client, so no reader token for the API server either (listed as the caller).
  assert.equal(tokenRequests.length, 6);
  assert.equal(fleet.topology?.as, "caller");
  assert.ok(
    tokenRequests.every((r) =>
      r.path === `/api/v1/namespaces/${NS}/serviceaccounts/aicr-reader/token`
    ),
  );
  const first = tokenRequests.find((r) =>
    (r.body as { spec: { audiences: string[] } }).spec.audiences[0] === "aicr-daemon:a-ok"
  );
  assert.deepEqual((first?.body as { spec: unknown }).spec, {
    audiences: ["aicr-daemon:a-ok"],
    expirationSeconds: 600,
    boundObjectRef: { apiVersion: "v1", kind: "Node", name: "a-ok" },
  });
  const error = fleetError(fleet);
  assert.equal(exitCodeOf(error), 9);
  assert.match(String(error?.message), /5 of 7 nodes failed/);
  const table = formatFleetTable(fleet.results);
  assert.match(table, /^NODE\s+STATUS\s+TRANSPORT\s+TIME\s+DETAIL\n/);
  assert.match(table, /c-403\s+denied\s+direct\s+\S+s\s+HTTP 403: User "x" cannot get/);
  const stream = parseSnapshotStream(fleetStream(fleet.results));
  assert.deepEqual(stream.map((s) => s.metadata["source-node"]), ["a-ok", "f-429"]);
});

Deno.test("fleet: no more than the concurrency bound is in flight", async () => {
  const nodes = Array.from({ length: 40 }, (_, i) => ({ node: `n-${i}`, ip: `10.0.1.${i}` }));
  const { fake } = cluster(nodes);
  let inFlight = 0;
  let max = 0;
  const directGet: DirectGet = async (request) => {
    inFlight++;
    max = Math.max(max, inFlight);
    await new Promise((resolve) => setTimeout(resolve, 2));
    inFlight--;
    return snapshotAnswer(request.servername);
  };
  const fleet = await fetchFleet({ kube: fake.client, log: quiet(), directGet }, {
    namespace: NS,
    concurrency: 5,
  });
  assert.equal(fleet.results.length, 40);
  assert.ok(fleet.results.every((r) => r.status === "ok"));
  assert.ok(max <= 5, `at most 5 at once, saw ${max}`);
  assert.equal(fleetError(fleet), undefined);
});

Deno.test("fleet: auto falls back to the pod proxy when one daemon cannot be reached directly", async () => {
  const { fake } = cluster([{ node: "a", ip: "10.0.0.1" }, { node: "b", ip: "10.0.0.2" }]);
  const proxied: RestRequest[] = [];
  fake.client.rest.text = (request: RestRequest) => {
    proxied.push(request);
    if (request.path.includes("aicr-daemon-b")) {
      return Promise.reject(
        new KubeApiError(
          `Cannot GET ${request.path}: 503 ServiceUnavailable: error trying to reach service: dial tcp 10.0.0.2:8443: connect: connection refused`,
          503,
          "ServiceUnavailable",
        ),
      );
    }
    return Promise.resolve(encodeSnapshot(sampleSnapshot({ nodeName: "a" })));
  };
  let direct = 0;
  const fleet = await fetchFleet({
    kube: fake.client,
    log: quiet(),
    directGet: () => {
      direct++;
      return Promise.reject(new Error("connect timed out after 2000 ms"));
    },
  }, { namespace: NS });
  assert.equal(direct, 1, "one direct try");
  assert.equal(fleet.transport, "proxy");
  assert.deepEqual(fleet.results.map((r) => [r.node, r.status, r.transport]), [
    ["a", "ok", "proxy"],
    ["b", "unreachable", "proxy"],
  ]);
  assert.equal(
    proxied[0]?.path,
    `/api/v1/namespaces/${NS}/pods/https:aicr-daemon-a:8443/proxy/v1/snapshot`,
  );
  assert.deepEqual(proxied[0]?.headers, {
    "X-Aicr-Authorization": "Bearer reader-token for aicr-daemon:a",
  });
  assert.equal(proxied[0]?.idempotent, false, "one attempt per node");
});

Deno.test("fleet: the exit code says what kind of failure it was", () => {
  const result = (statuses: string[]): FleetResult => ({
    transport: "direct",
    missingPods: 0,
    results: statuses.map((status, i) => ({
      node: `n${i}`,
      pod: `p${i}`,
      status: status as never,
      durationMs: 1,
    })),
  });
  assert.equal(fleetError(result(["ok", "ok"])), undefined);
  assert.equal(exitCodeOf(fleetError(result(["ok", "denied"]))), 4);
  assert.equal(exitCodeOf(fleetError(result(["timed-out", "ok"]))), 5);
  assert.equal(exitCodeOf(fleetError(result(["denied", "unreachable"]))), 9);
  assert.equal(exitCodeOf(fleetError(result([]))), 3);
});

Deno.test("fleet: targeted nodes without a daemon pod are listed as not ready, untolerated ones are not targeted", async () => {
  const { fake } = cluster([{ node: "gpu-1", ip: "10.0.0.1" }]);
  fake.put("DaemonSet", {
    metadata: { name: "aicr-daemon", namespace: NS, generation: 1 },
    spec: {
      template: {
        spec: {
          nodeSelector: { "nvidia.com/gpu.present": "true" },
          tolerations: [{ key: "nvidia.com/gpu", operator: "Exists", effect: "NoSchedule" }],
        },
      },
    },
    status: { observedGeneration: 1, desiredNumberScheduled: 2 },
  } as never);
  const node = (name: string, gpu: boolean, taints: unknown[] = []) =>
    fake.put("Node", {
      metadata: { name, labels: gpu ? { "nvidia.com/gpu.present": "true" } : {} },
      spec: { taints },
    } as never);
  node("gpu-1", true, [{ key: "nvidia.com/gpu", value: "present", effect: "NoSchedule" }]);
  node("gpu-2", true, [{ key: "node.kubernetes.io/not-ready", effect: "NoExecute" }]);
  node("gpu-3", true, [{ key: "dedicated", value: "infra", effect: "NoSchedule" }]);
  node("cpu-1", false);
  const fleet = await fetchFleet({
    kube: fake.client,
    log: quiet(),
    directGet: () => Promise.resolve(snapshotAnswer("gpu-1")),
  }, { namespace: NS });
  assert.deepEqual(fleet.results.map((r) => [r.node, r.status, r.error ?? ""]), [
    ["gpu-1", "ok", ""],
    ["gpu-2", "not-ready", "no daemon pod on this node yet"],
  ]);
  assert.equal(fleet.missingPods, 1);
  assert.equal(exitCodeOf(fleetError(fleet)), 9);
  const asked = await fetchFleet({
    kube: fake.client,
    log: quiet(),
    directGet: () => Promise.resolve(snapshotAnswer("gpu-1")),
  }, { namespace: NS, nodes: ["gpu-1", "cpu-1"] });
  assert.deepEqual(asked.results.map((r) => [r.node, r.status]), [
    ["cpu-1", "not-ready"],
    ["gpu-1", "ok"],
  ]);
});

Deno.test("fleet: an answer over the bound is that node's own failure (too-large), the others kept", async () => {
  const { fake } = cluster([
    { node: "a-huge", ip: "10.0.0.1" },
    { node: "b-ok", ip: "10.0.0.2" },
  ]);
  const bounds: (number | undefined)[] = [];
  const directGet: DirectGet = (request) => {
    bounds.push(request.maxBytes);
    return new URL(request.url).hostname === "10.0.0.1"
      ? Promise.reject(new AnswerTooLargeError(request.maxBytes ?? 0))
      : Promise.resolve(snapshotAnswer("b-ok"));
  };
  const fleet = await fetchFleet({ kube: fake.client, log: quiet(), directGet }, {
    namespace: NS,
    transport: "direct",
    maxAnswerBytes: 4096,
  });
  assert.deepEqual(fleet.results.map((r) => [r.node, r.status]), [
    ["a-huge", "too-large"],
    ["b-ok", "ok"],
  ]);
  assert.deepEqual(bounds, [4096, 4096]);
  assert.match(fleet.results[0]?.error ?? "", /exceeds the 4096-byte bound/);
  assert.equal(exitCodeOf(fleetError(fleet)), 9);
});

Deno.test("fleet: a certificate or a snapshot that is not the node's is that node's wrong-identity", async () => {
  const { fake } = cluster([
    { node: "a", ip: "10.0.0.1" },
    { node: "b", ip: "10.0.0.2" },
    { node: "c", ip: "10.0.0.3" },
  ]);
  const directGet: DirectGet = (request) => {
    switch (request.servername) {
      case "a":
        // Another node's certificate at a's address: the handshake's name check fails.
        return Promise.reject(
          Object.assign(new Error("Hostname/IP does not match certificate's altnames"), {
            code: "ERR_TLS_CERT_ALTNAME_INVALID",
          }),
        );
      case "b":
        // A valid handshake, but the answer speaks for another node.
        return Promise.resolve(snapshotAnswer("c"));
      default:
        return Promise.resolve(snapshotAnswer("c"));
    }
  };
  const fleet = await fetchFleet({ kube: fake.client, log: quiet(), directGet }, {
    namespace: NS,
    transport: "direct",
  });
  assert.deepEqual(fleet.results.map((r) => [r.node, r.status]), [
    ["a", "wrong-identity"],
    ["b", "wrong-identity"],
    ["c", "ok"],
  ]);
  assert.match(String(fleet.results[0]?.error), /ERR_TLS_CERT_ALTNAME_INVALID/);
  assert.match(String(fleet.results[1]?.error), /describes node 'c', not 'b'/);
  assert.equal(fleet.results[1]?.snapshot, undefined, "nothing of it is kept");
  assert.equal(exitCodeOf(fleetError(fleet)), 9);
  // Through the pod proxy (no certificate to check) the snapshot's source-node still is.
  fake.client.rest.text = () => Promise.resolve(encodeSnapshot(sampleSnapshot({ nodeName: "c" })));
  const proxied = await fetchFleet({ kube: fake.client, log: quiet() }, {
    namespace: NS,
    transport: "proxy",
    nodes: ["a"],
  });
  assert.deepEqual(proxied.results.map((r) => [r.node, r.status]), [["a", "wrong-identity"]]);
});

Deno.test("fleet: an API server that cannot bind tokens to a Node (before 1.31) gets per-node audiences alone", async () => {
  const { fake } = cluster([{ node: "a", ip: "10.0.0.1" }, { node: "b", ip: "10.0.0.2" }]);
  const minted: RestRequest[] = [];
  fake.client.rest.json = <T>(request: RestRequest) => {
    if (request.method === "GET") return Promise.resolve({ items: [] } as T);
    minted.push(request);
    const spec = (request.body as { spec: { audiences: string[]; boundObjectRef?: unknown } })
      .spec;
    if (spec.boundObjectRef) {
      return Promise.reject(
        new KubeApiError(
          `Cannot POST ${request.path}: 400 BadRequest: boundObjectRef.kind: Unsupported value: "Node"`,
          400,
          "BadRequest",
        ),
      );
    }
    return Promise.resolve({ status: { token: `reader-token for ${spec.audiences[0]}` } } as T);
  };
  const lines: string[] = [];
  const fleet = await fetchFleet({
    kube: fake.client,
    log: createLogger({ write: (t) => void lines.push(t) }),
    directGet: (request) => Promise.resolve(snapshotAnswer(request.servername)),
  }, { namespace: NS, transport: "direct", concurrency: 1 });
  assert.deepEqual(fleet.results.map((r) => r.status), ["ok", "ok"]);
  // One refused bound request, then unbound ones only, each still with its node's audience.
  assert.deepEqual(
    minted.map((r) => {
      const spec = (r.body as { spec: { audiences: string[]; boundObjectRef?: unknown } }).spec;
      return [spec.audiences[0], spec.boundObjectRef !== undefined];
    }),
    [["aicr-daemon:a", true], ["aicr-daemon:a", false], ["aicr-daemon:b", false]],
  );
  assert.ok(lines.some((l) => l.includes("cannot bind tokens to a Node")));
});

Deno.test("fleet: nodes refused node binding at once each ask again without it", async () => {
  const { fake } = cluster([{ node: "a", ip: "10.0.0.1" }, { node: "b", ip: "10.0.0.2" }]);
  const minted: [string, boolean][] = [];
  fake.client.rest.json = <T>(request: RestRequest) => {
    if (request.method === "GET") return Promise.resolve({ items: [] } as T);
    const spec = (request.body as { spec: { audiences: string[]; boundObjectRef?: unknown } })
      .spec;
    minted.push([spec.audiences[0] as string, spec.boundObjectRef !== undefined]);
    if (spec.boundObjectRef) {
      return Promise.reject(
        new KubeApiError(
          `Cannot POST ${request.path}: 400 BadRequest: cannot bind token to a Node object as the ServiceAccountTokenNodeBinding feature-gate is disabled`,
          400,
          "BadRequest",
        ),
      );
    }
    return Promise.resolve({ status: { token: `reader-token for ${spec.audiences[0]}` } } as T);
  };
  const fleet = await fetchFleet({
    kube: fake.client,
    log: quiet(),
    directGet: (request) => Promise.resolve(snapshotAnswer(request.servername)),
  }, { namespace: NS, transport: "direct", concurrency: 2 });
  assert.deepEqual(fleet.results.map((r) => [r.node, r.status]), [["a", "ok"], ["b", "ok"]]);
  // Both bound requests were in flight before the first refusal was learnt.
  assert.deepEqual(minted.slice().sort(), [
    ["aicr-daemon:a", false],
    ["aicr-daemon:a", true],
    ["aicr-daemon:b", false],
    ["aicr-daemon:b", true],
  ]);
});

/** Nodes for the topology LIST, in a client of their own (the reader's). */
function nodesClient(names: string[], refuse = false) {
  const reader = createFakeKube();
  for (const name of names) {
    reader.put("Node", {
      metadata: { name, labels: { "node.kubernetes.io/instance-type": `type-of-${name}` } },
    } as never);
  }
  if (refuse) {
    reader.client.list = () =>
      Promise.reject(new KubeApiError("Cannot list nodes: forbidden", 403, "Forbidden"));
  }
  return reader;
}

Deno.test("fleet: the cluster's NodeTopology is listed once per fetch, as the reader with a token for the API server", async () => {
  const names = ["a", "b", "c"];
  const { fake, tokenRequests } = cluster(
    names.map((node, i) => ({ node, ip: `10.0.0.${i + 1}` })),
  );
  const reader = nodesClient(names);
  const bearers: string[] = [];
  fake.client.withBearerToken = (token) => {
    bearers.push(token);
    return reader.client;
  };
  const fleet = await fetchFleet({
    kube: fake.client,
    log: quiet(),
    directGet: (request) => Promise.resolve(snapshotAnswer(request.servername)),
  }, { namespace: NS, transport: "direct", concurrency: 2 });
  assert.ok(fleet.results.every((r) => r.status === "ok"));
  // One reader token without an audience (the API server's), besides the three per node.
  const apiTokens = tokenRequests.filter((r) =>
    (r.body as { spec: { audiences?: string[] } }).spec.audiences === undefined
  );
  assert.equal(apiTokens.length, 1);
  assert.equal(apiTokens[0]?.path, `/api/v1/namespaces/${NS}/serviceaccounts/aicr-reader/token`);
  assert.deepEqual((apiTokens[0]?.body as { spec: unknown }).spec, { expirationSeconds: 600 });
  assert.deepEqual(bearers, ["reader-token for the API server"]);
  // One LIST of the nodes, by the reader; none by the caller.
  assert.deepEqual(reader.calls.filter((c) => c.kind === "Node").map((c) => c.method), ["list"]);
  assert.equal(fake.calls.filter((c) => c.kind === "Node").length, 0);
  const topology = fleet.topology;
  assert.equal(topology?.status, "ok");
  assert.equal(topology?.as, "reader");
  assert.equal(topology?.nodes, 3);
  const doc = topology?.document;
  assert.equal(doc?.metadata["topology-scope"], "cluster");
  assert.equal(doc?.metadata["source-node"], "");
  assert.deepEqual(doc?.measurements.map((m) => m.type), ["NodeTopology"]);
  const label = doc?.measurements[0]?.subtypes.find((s) => s.subtype === "label")?.data;
  assert.equal(label?.["node.kubernetes.io/instance-type.type-of-b"], "type-of-b|b");
});

Deno.test("fleet: a reader that may not list nodes (an older install) leaves the LIST to the caller; refused there too, the topology says denied and the nodes are kept", async () => {
  const { fake } = cluster([{ node: "a", ip: "10.0.0.1" }]);
  fake.put("Node", { metadata: { name: "a" } } as never);
  fake.client.withBearerToken = () => nodesClient(["a"], true).client;
  const directGet: DirectGet = (request) => Promise.resolve(snapshotAnswer(request.servername));
  const fleet = await fetchFleet({ kube: fake.client, log: quiet(), directGet }, {
    namespace: NS,
    transport: "direct",
  });
  assert.equal(fleet.topology?.status, "ok");
  assert.equal(fleet.topology?.as, "caller");
  assert.equal(fleet.topology?.nodes, 1);

  const refused = cluster([{ node: "a", ip: "10.0.0.1" }]);
  refused.fake.client.withBearerToken = () => nodesClient(["a"], true).client;
  const list = refused.fake.client.list;
  refused.fake.client.list = (kind, namespace, options) =>
    kind === "Node"
      ? Promise.reject(new KubeApiError("Cannot list nodes: forbidden", 403, "Forbidden"))
      : list(kind, namespace, options);
  const lines: string[] = [];
  const denied = await fetchFleet({
    kube: refused.fake.client,
    log: createLogger({ write: (t) => lines.push(t) }),
    directGet,
  }, { namespace: NS, transport: "direct" });
  assert.equal(denied.results[0]?.status, "ok");
  assert.equal(denied.topology?.status, "denied");
  assert.equal(fleetError(denied), undefined, "the topology alone does not fail the fetch");
  assert.match(lines.join(""), /cannot list the nodes for the cluster's NodeTopology/);
});

Deno.test("fleet: topology false lists no node and mints no API token", async () => {
  const { fake, tokenRequests } = cluster([{ node: "a", ip: "10.0.0.1" }]);
  let bearer = 0;
  fake.client.withBearerToken = () => {
    bearer++;
    return fake.client;
  };
  const fleet = await fetchFleet({
    kube: fake.client,
    log: quiet(),
    directGet: (request) => Promise.resolve(snapshotAnswer(request.servername)),
  }, { namespace: NS, transport: "direct", topology: false });
  assert.equal(fleet.topology, undefined);
  assert.equal(bearer, 0);
  assert.equal(tokenRequests.length, 1);
  assert.equal(fake.calls.filter((c) => c.kind === "Node").length, 0);
});

Deno.test("fleet: a daemon that is another program or version is that node's wrong-build, named", async () => {
  const { fake } = cluster([
    { node: "a", ip: "10.0.0.1" },
    { node: "b", ip: "10.0.0.2" },
    { node: "c", ip: "10.0.0.3" },
  ]);
  const answer = (node: string, edit: (text: string) => string) => {
    const ok = snapshotAnswer(node);
    return { ...ok, body: edit(ok.body) };
  };
  const directGet: DirectGet = (request) => {
    switch (request.servername) {
      case "a":
        return Promise.resolve(
          answer("a", (t) => t.replace("aicr.run/v1", "aicr.nvidia.com/v1alpha1")),
        );
      case "b":
        return Promise.resolve(answer("b", (t) => t.replace(/0\.1\.0-dev/, "0.9.0")));
      default:
        return Promise.resolve(snapshotAnswer("c"));
    }
  };
  const fleet = await fetchFleet({ kube: fake.client, log: quiet(), directGet }, {
    namespace: NS,
    transport: "direct",
  });
  assert.deepEqual(fleet.results.map((r) => [r.node, r.status]), [
    ["a", "wrong-build"],
    ["b", "wrong-build"],
    ["c", "ok"],
  ]);
  assert.match(
    String(fleet.results[0]?.error),
    /Cannot use node 'a''s snapshot as the daemon that ran is NVIDIA's Go aicr 0\.1\.0-dev, not aicr 0\.1\.0: its image is not this build's/,
  );
  assert.match(
    String(fleet.results[1]?.error),
    /the daemon that ran is aicr 0\.9\.0, not aicr 0\.1\.0/,
  );
  assert.equal(fleet.results[0]?.snapshot, undefined, "nothing of it is kept");
  assert.equal(exitCodeOf(fleetError(fleet)), 9);
});

Deno.test("fleet: a daemon of this version but another commit is wrong-build, directly and through the pod proxy", async () => {
  const build = {
    version: "0.2.0",
    commit: "1111111",
    backend: "node-sea",
    imageRepository: "ghcr.io/aicr-run/aicr",
  };
  const headers = (node: string) => ({
    "x-aicr-version": "0.2.0",
    "x-aicr-commit": node === "a" ? "2222222" : "1111111",
  });
  const nodes = [{ node: "a", ip: "10.0.0.1" }, { node: "b", ip: "10.0.0.2" }];
  const direct = cluster(nodes);
  const viaDirect = await fetchFleet({
    kube: direct.fake.client,
    log: quiet(),
    build,
    directGet: (request) => {
      const h = headers(request.servername);
      return Promise.resolve({
        ...snapshotAnswer(request.servername),
        build: { version: h["x-aicr-version"], commit: h["x-aicr-commit"] },
      });
    },
  }, { namespace: NS, transport: "direct" });
  const proxy = cluster(nodes);
  proxy.fake.client.rest.text = (request: RestRequest) => {
    const node = /aicr-daemon-(\w+):/.exec(request.path)?.[1] ?? "";
    // What the API server's pod proxy passes on: the daemon's answer headers.
    request.onHeaders?.(headers(node));
    return Promise.resolve(encodeSnapshot(sampleSnapshot({ nodeName: node })));
  };
  const viaProxy = await fetchFleet({ kube: proxy.fake.client, log: quiet(), build }, {
    namespace: NS,
    transport: "proxy",
  });
  for (const fleet of [viaDirect, viaProxy]) {
    assert.deepEqual(fleet.results.map((r) => [r.node, r.status]), [
      ["a", "wrong-build"],
      ["b", "ok"],
    ]);
    assert.match(
      String(fleet.results[0]?.error),
      /the daemon that ran is aicr 0\.2\.0 \(commit 2222222\), not aicr 0\.2\.0 \(commit 1111111\)/,
    );
  }
});

Deno.test("fleet: SIGTERM mid-fetch: the answered nodes stay ok, the cut ones are interrupted (not timed-out), exit 130", async () => {
  const { fake } = cluster([
    { node: "a-answered", ip: "10.0.0.1" },
    { node: "b-slow", ip: "10.0.0.2" },
  ]);
  const interrupt = new AbortController();
  const directGet: DirectGet = (request) => {
    if (new URL(request.url).hostname === "10.0.0.1") {
      return Promise.resolve(snapshotAnswer("a-answered"));
    }
    // A healthy daemon that answers slowly: the signal comes while it is being read.
    return new Promise((_resolve, reject) => {
      request.signal?.addEventListener(
        "abort",
        () => reject(new Error("The operation was aborted")),
      );
      setTimeout(() => interrupt.abort(new Error("received SIGTERM")), 20);
    });
  };
  const fleet = await fetchFleet({ kube: fake.client, log: quiet(), directGet }, {
    namespace: NS,
    transport: "direct",
    signal: interrupt.signal,
  });
  assert.deepEqual(fleet.results.map((r) => [r.node, r.status, r.error]), [
    ["a-answered", "ok", undefined],
    ["b-slow", "interrupted", "interrupted (Error: received SIGTERM)"],
  ]);
  const error = fleetError(fleet);
  assert.ok(error instanceof InterruptedError, String(error));
  assert.equal(exitCodeOf(error), 130);
  assert.equal(
    error.message,
    "Cannot fetch every node's snapshot: interrupted (Error: received SIGTERM)",
  );
});
