import assert from "node:assert/strict";
import { apiStatus, loopbackKubeConfig, scriptedApiServer } from "../tests/fakes/api_server.ts";
import { createKubeClient } from "./client.ts";
import { ConflictError } from "../errors.ts";
import { KubeApiError } from "./errors.ts";
import { createRestClient } from "./rest.ts";

/** The client over the real transport, on the loopback fake; sleeps are not slept. */
function clientOn(port: number) {
  return createKubeClient(
    createRestClient(loopbackKubeConfig(port), { sleep: () => Promise.resolve() }),
  );
}

Deno.test("createKubeClient() creates with the kind's apiVersion at its collection, sent once", async () => {
  await using server = await scriptedApiServer([
    { status: 201, body: { metadata: { name: "aicr-x", uid: "u-1" } } },
  ]);
  const kube = clientOn(server.port);
  const created = await kube.create("Job", {
    metadata: { name: "aicr-x", namespace: "gpu-operator" },
  });
  assert.equal(created.metadata?.uid, "u-1");
  assert.equal(server.seen.length, 1);
  const [request] = server.seen;
  assert.equal(
    `${request?.method} ${request?.path}`,
    "POST /apis/batch/v1/namespaces/gpu-operator/jobs",
  );
  const body = JSON.parse(request?.body ?? "{}");
  assert.equal(body.apiVersion, "batch/v1");
  assert.equal(body.kind, "Job");
});

Deno.test("createKubeClient() deletes pinned to the UID: deleted, gone on 404, conflict on 409", async () => {
  await using server = await scriptedApiServer([
    { status: 200, body: { kind: "Status", status: "Success" } },
    apiStatus(404, "NotFound"),
    apiStatus(
      409,
      "Conflict",
      "Precondition failed: UID in precondition: u-1, UID in object meta: u-2",
    ),
  ]);
  const kube = clientOn(server.port);
  const options = { propagationPolicy: "Background" as const };
  assert.equal(await kube.deleteIfUid("Job", "ns", "j", "u-1", options), "deleted");
  assert.equal(await kube.deleteIfUid("Job", "ns", "j", "u-1", options), "gone");
  assert.equal(await kube.deleteIfUid("Job", "ns", "j", "u-1", options), "conflict");
  for (const request of server.seen) {
    assert.equal(`${request.method} ${request.path}`, "DELETE /apis/batch/v1/namespaces/ns/jobs/j");
    const body = JSON.parse(request.body);
    assert.deepEqual(body.preconditions, { uid: "u-1" });
    assert.equal(body.propagationPolicy, "Background");
  }
});

Deno.test("createKubeClient() resends a UID-pinned delete after a lost answer, never a create", async () => {
  await using server = await scriptedApiServer([
    { cut: "before-answer" },
    { status: 200, body: { kind: "Status", status: "Success" } },
  ]);
  const kube = clientOn(server.port);
  assert.equal(await kube.deleteIfUid("ConfigMap", "ns", "c", "u-9"), "deleted");
  assert.equal(server.seen.length, 2);
  await using lossy = await scriptedApiServer([{ cut: "before-answer" }]);
  const error = await clientOn(lossy.port).create("ConfigMap", {
    metadata: { name: "c", namespace: "ns" },
  }).catch((e) => e);
  assert.ok(error instanceof KubeApiError && error.status === 0, String(error));
  assert.equal(lossy.seen.length, 1);
});

Deno.test("createKubeClient() reads a missing object as undefined, and other errors as errors", async () => {
  await using server = await scriptedApiServer([
    apiStatus(404, "NotFound"),
    apiStatus(403, "Forbidden", 'namespaces "x" is forbidden'),
  ]);
  const kube = clientOn(server.port);
  assert.equal(await kube.get("Namespace", undefined, "x"), undefined);
  await assert.rejects(
    kube.get("Namespace", undefined, "x"),
    (e) => e instanceof KubeApiError && e.status === 403,
  );
  assert.deepEqual(server.seen.map((r) => r.path), [
    "/api/v1/namespaces/x",
    "/api/v1/namespaces/x",
  ]);
});

Deno.test("createKubeClient() listAll() follows continue tokens to the last page", async () => {
  await using server = await scriptedApiServer([
    { status: 200, body: { items: [{ metadata: { name: "a" } }], metadata: { continue: "t1" } } },
    { status: 200, body: { items: [{ metadata: { name: "b" } }], metadata: {} } },
  ]);
  const kube = clientOn(server.port);
  const items = await kube.listAll("Pod", "ns", { labelSelector: "aicr.run/run-id=r" });
  assert.deepEqual(items.map((i) => i.metadata?.name), ["a", "b"]);
  assert.equal(server.seen.length, 2);
  assert.doesNotMatch(server.seen[0]?.query ?? "", /continue=/);
  assert.match(server.seen[1]?.query ?? "", /continue=t1/);
  for (const r of server.seen) assert.match(r.query, /labelSelector=aicr.run%2Frun-id%3Dr/);
});

Deno.test("createKubeClient() discovers from the aggregated answers, each group's preferred version, stale groups skipped", async () => {
  const accepts: string[] = [];
  const group = (name: string, versions: unknown[]) => ({ metadata: { name }, versions });
  const resource = (name: string, kind: string, scope: string) => ({
    resource: name,
    responseKind: { group: "", version: "", kind },
    scope,
    verbs: ["get", "list"],
  });
  const answers: Record<string, unknown> = {
    "/api": {
      kind: "APIGroupDiscoveryList",
      items: [group("", [{ version: "v1", resources: [resource("nodes", "Node", "Cluster")] }])],
    },
    "/apis": {
      kind: "APIGroupDiscoveryList",
      items: [
        group("nvidia.com", [
          { version: "v1", resources: [resource("clusterpolicies", "ClusterPolicy", "Cluster")] },
          {
            version: "v1alpha1",
            resources: [resource("nvidiadrivers", "NVIDIADriver", "Cluster")],
          },
        ]),
        group("metrics.k8s.io", [{ version: "v1beta1", freshness: "Stale", resources: [] }]),
      ],
    },
  };
  await using server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, (req) => {
    accepts.push(req.headers.get("accept") ?? "");
    return Response.json(answers[new URL(req.url).pathname] ?? {}, {
      status: new URL(req.url).pathname in answers ? 200 : 404,
    });
  });
  const found = await clientOn(server.addr.port).discoverResources();
  assert.deepEqual(found, [
    {
      group: "",
      version: "v1",
      plural: "nodes",
      kind: "Node",
      namespaced: false,
      verbs: ["get", "list"],
    },
    {
      group: "nvidia.com",
      version: "v1",
      plural: "clusterpolicies",
      kind: "ClusterPolicy",
      namespaced: false,
      verbs: ["get", "list"],
    },
  ]);
  assert.equal(accepts.length, 2);
  for (const accept of accepts) {
    assert.match(
      accept,
      /^application\/json;g=apidiscovery\.k8s\.io;v=v2;as=APIGroupDiscoveryList,application\/json$/,
    );
  }
});

Deno.test("createKubeClient() rewrites a ConfigMap only when it is the object of the UID given, pinned by UID and version", async () => {
  const configMap = (uid: string) => ({
    status: 200,
    body: {
      metadata: { name: "out", namespace: "ns", uid, resourceVersion: "7", labels: { a: "1" } },
    },
  });
  await using server = await scriptedApiServer([configMap("u-2")]);
  const kube = clientOn(server.port);
  const content = { labels: { b: "2" }, data: { "snapshot.yaml": "x" } };
  const error = await kube.updateConfigMapIfUid("ns", "out", "u-1", content).catch((e) => e);
  assert.ok(error instanceof ConflictError, String(error));
  assert.match(error.message, /not the object this run created \(UID u-2, expected u-1\)/);
  assert.deepEqual(server.seen.map((r) => r.method), ["GET"], "nothing written");

  await using ours = await scriptedApiServer([configMap("u-1"), configMap("u-1")]);
  await clientOn(ours.port).updateConfigMapIfUid("ns", "out", "u-1", content);
  assert.deepEqual(ours.seen.map((r) => r.method), ["GET", "PUT"]);
  const put = JSON.parse(ours.seen[1]!.body);
  assert.deepEqual([put.metadata.uid, put.metadata.resourceVersion], ["u-1", "7"]);
});
