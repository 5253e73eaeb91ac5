import assert from "node:assert/strict";
import { createLogger } from "../log.ts";
import { createFakeKube } from "../tests/fakes/kube.ts";
import { KubeApiError } from "./errors.ts";
import type { KindName } from "./resources.ts";
import { sweepObjects } from "./sweep.ts";

const MINE = { "app.kubernetes.io/name": "aicr", "app.kubernetes.io/instance": "d" };
const SELECTOR = "app.kubernetes.io/name=aicr,app.kubernetes.io/instance=d";

function cluster() {
  const fake = createFakeKube();
  const deletes: { kind: KindName; name: string; uid: string; policy?: string }[] = [];
  const deleteIfUid = fake.client.deleteIfUid.bind(fake.client);
  fake.client.deleteIfUid = (kind, namespace, name, uid, options) => {
    deletes.push({
      kind,
      name,
      uid,
      ...(options?.propagationPolicy ? { policy: options.propagationPolicy } : {}),
    });
    return deleteIfUid(kind, namespace, name, uid, options);
  };
  fake.put("DaemonSet", { metadata: { name: "d", namespace: "ns", labels: MINE } });
  fake.put("ServiceAccount", { metadata: { name: "d", namespace: "ns", labels: MINE } });
  fake.put("ServiceAccount", { metadata: { name: "other", namespace: "ns", labels: { a: "b" } } });
  fake.put("ClusterRole", { metadata: { name: "aicr-daemon-ns.d", labels: MINE } });
  fake.put("ClusterRole", { metadata: { name: "aicr-daemon-other.d", labels: MINE } });
  const lines: string[] = [];
  const log = createLogger({ write: (t) => void lines.push(t) });
  return { fake, deletes, lines, log };
}

Deno.test("sweepObjects() deletes what the labels find, kind by kind, each pinned to the UID it read", async () => {
  const { fake, deletes, log } = cluster();
  const swept = await sweepObjects({ kube: fake.client, log }, {
    selector: SELECTOR,
    namespace: "ns",
    kinds: ["DaemonSet", "ServiceAccount", "ClusterRole"],
    // A cluster-scoped object is this install's only when its name names this namespace.
    accept: (kind, o) => kind !== "ClusterRole" || (o.metadata?.name ?? "").includes("-ns."),
  });
  assert.deepEqual(swept.map((o) => `${o.kind}/${o.name} ${o.result}`), [
    "DaemonSet/d deleted",
    "ServiceAccount/d deleted",
    "ClusterRole/aicr-daemon-ns.d deleted",
  ]);
  for (const d of deletes) assert.match(d.uid, /^uid-\d+$/);
  assert.equal(deletes.find((d) => d.kind === "DaemonSet")?.policy, "Background");
  assert.deepEqual([...fake.objects.keys()].sort(), [
    "ClusterRole//aicr-daemon-other.d",
    "ServiceAccount/ns/other",
  ]);
});

Deno.test("sweepObjects() in a dry run only lists, and a failed delete is reported, not thrown", async () => {
  const { fake, deletes, log, lines } = cluster();
  const dry = await sweepObjects({ kube: fake.client, log }, {
    selector: SELECTOR,
    namespace: "ns",
    kinds: ["DaemonSet", "ServiceAccount"],
    dryRun: true,
  });
  assert.deepEqual(dry.map((o) => o.result), ["found", "found"]);
  assert.deepEqual(deletes, []);
  fake.client.deleteIfUid = (kind) =>
    kind === "DaemonSet"
      ? Promise.reject(
        new KubeApiError("Cannot DELETE daemonsets/d: 500 InternalError", 500, "InternalError"),
      )
      : Promise.resolve("deleted");
  const swept = await sweepObjects({ kube: fake.client, log }, {
    selector: SELECTOR,
    namespace: "ns",
    kinds: ["DaemonSet", "ServiceAccount"],
  });
  assert.deepEqual(swept.map((o) => `${o.kind} ${o.result}`), [
    "DaemonSet failed",
    "ServiceAccount deleted",
  ]);
  assert.match(swept[0]?.detail ?? "", /500 InternalError/);
  assert.ok(lines.some((l) => l.includes("cleanup could not delete an object")));
});

Deno.test("sweepObjects() reads an object replaced since the list as gone, never deleting the new one", async () => {
  const { fake, log } = cluster();
  const list = fake.client.listAll.bind(fake.client);
  fake.client.listAll = async (kind, namespace, options) => {
    const items = await list(kind, namespace, options);
    if (kind === "ServiceAccount") {
      // Between the list and the delete, someone deletes and recreates the ServiceAccount.
      fake.objects.delete("ServiceAccount/ns/d");
      fake.put("ServiceAccount", { metadata: { name: "d", namespace: "ns", labels: MINE } });
    }
    return items as never;
  };
  const swept = await sweepObjects({ kube: fake.client, log }, {
    selector: SELECTOR,
    namespace: "ns",
    kinds: ["ServiceAccount"],
  });
  assert.deepEqual(swept.map((o) => o.result), ["gone"]);
  assert.ok(fake.objects.has("ServiceAccount/ns/d"), "the new ServiceAccount stays");
});
