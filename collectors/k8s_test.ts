import assert from "node:assert/strict";
import { PermissionError, UnavailableError } from "../errors.ts";
import { NOOP_LOGGER } from "../log.ts";
import {
  collectK8s,
  flattenSpec,
  goJson,
  imageReadings,
  nodeReadings,
  okeReadings,
  providerOf,
  shortImage,
  slinkyReadings,
} from "./k8s.ts";
import { createFakeCluster, createRecordedCluster, loadRecorded } from "./testdata/fake_cluster.ts";
import type { KubeNode, KubeObject, KubePod } from "./types.ts";

Deno.test("shortImage() strips the registry path and digest and defaults the tag to latest", () => {
  const table: [string, [string, string]][] = [
    ["registry.k8s.io/kube-apiserver:v1.33.5", ["kube-apiserver", "v1.33.5"]],
    ["nvcr.io/nvidia/gpu-operator:v25.10.1@sha256:abc", ["gpu-operator", "v25.10.1"]],
    ["busybox", ["busybox", "latest"]],
    ["localhost:5001/aicr:local", ["aicr", "local"]],
    ["registry.example.com:5000/team/tool@sha256:feedface", ["tool", "latest"]],
  ];
  for (const [image, want] of table) assert.deepEqual(shortImage(image), want, image);
});

Deno.test("imageReadings() folds containers, init and ephemeral containers of every pod", async () => {
  const pods = (await loadRecorded<{ items: KubePod[] }>("pods.json")).items;
  assert.deepEqual(imageReadings(pods), {
    "kube-apiserver": "v1.33.5",
    "kube-proxy": "v1.33.5-eksbuild.2",
    "gpu-operator": "v25.10.1",
    "gpu-operator-validator": "v25.10.1",
    busybox: "latest",
    aicr: "local",
    tool: "latest",
  });
});

Deno.test("imageReadings() resolves colliding names the same way whatever the pod order", () => {
  const a: KubePod = {
    metadata: { namespace: "a", name: "p" },
    spec: { containers: [{ image: "x/app:1" }] },
  };
  const b: KubePod = {
    metadata: { namespace: "b", name: "p" },
    spec: { containers: [{ image: "y/app:2" }] },
  };
  assert.deepEqual(imageReadings([a, b]), { app: "2" });
  assert.deepEqual(imageReadings([b, a]), { app: "2" });
});

Deno.test("flattenSpec() flattens a ClusterPolicy spec into string dot-keys", async () => {
  const [policy] =
    (await loadRecorded<{ items: KubeObject[] }>("clusterpolicies.nvidia.json")).items;
  assert.deepEqual(flattenSpec(policy?.spec), {
    "driver.enabled": "true",
    "driver.version": "580.82.07",
    "driver.repository": "nvcr.io/nvidia",
    "driver.rdma.enabled": "false",
    "driver.licensingConfig": "<nil>",
    "toolkit.enabled": "true",
    "toolkit.env": '[{"name":"CONTAINERD_SET_AS_DEFAULT","value":"1"}]',
    "devicePlugin.config.name": "time-slicing",
    "devicePlugin.config.default": "any",
    "dcgmExporter.serviceMonitor.interval": "15",
    "mig.strategy": "single",
  });
  assert.equal(goJson({ b: [1, true, null], a: "x" }), '{"a":"x","b":[1,true,null]}');
});

Deno.test("providerOf() maps provider-ID prefixes and keeps unknown ones raw", () => {
  assert.equal(providerOf("aws:///us-west-2a/i-1"), "eks");
  assert.equal(providerOf("gce://p/z/n"), "gke");
  assert.equal(providerOf("azure:///subscriptions/x"), "aks");
  assert.equal(providerOf("oci://ocid1.instance"), "oke");
  assert.equal(providerOf("Kind://docker/kind/n"), "kind");
  assert.equal(providerOf(""), "");
});

Deno.test("nodeReadings() sets only keys whose source is non-empty", async () => {
  const node = await loadRecorded<KubeNode>("node-gpu-1.json");
  assert.deepEqual(nodeReadings(node, "gpu-node-1"), {
    "source-node": "gpu-node-1",
    provider: "eks",
    "provider-id": "aws:///us-west-2a/i-0123456789abcdef0",
    "container-runtime-id": "containerd://2.0.3",
    "container-runtime-name": "containerd",
    "container-runtime-version": "2.0.3",
    "kubelet-version": "v1.33.5-eks-3025e55",
    "kernel-version": "6.8.0-1028-aws",
    "operating-system": "linux",
    "os-image": "Ubuntu 24.04.1 LTS",
  });
  assert.deepEqual(nodeReadings({ metadata: { name: "bare" } }, "bare"), { "source-node": "bare" });
});

Deno.test("slinkyReadings() projects only identity, associations and allowlisted booleans", async () => {
  const objects = await loadRecorded<Record<string, KubeObject[]>>("slinky.json");
  const data = slinkyReadings(objects);
  assert.deepEqual(data, {
    "controller.count": 1,
    "controller.slurm/slurm.apiVersion": "slinky.slurm.net/v1beta1",
    "controller.slurm/slurm.accountingRef": "slurm/slurm-acct",
    "controller.slurm/slurm.persistence.enabled": true,
    "nodeset.count": 1,
    "nodeset.slurm/gpu-workers.apiVersion": "slinky.slurm.net/v1beta1",
    "nodeset.slurm/gpu-workers.controllerRef": "slurm/slurm",
    "nodeset.slurm/gpu-workers.ssh.enabled": false,
    "loginset.count": 0,
    "restapi.count": 1,
    "restapi.slurm/slurm-rest.apiVersion": "slinky.slurm.net/v1beta1",
    "restapi.slurm/slurm-rest.controllerRef": "slurm/slurm",
    "accounting.count": 1,
    "accounting.slurm/slurm-acct.apiVersion": "slinky.slurm.net/v1beta1",
  });
  const text = JSON.stringify(data);
  for (const secret of ["secret-key", "db-pass", "SchedulerType", "slurmd:25.05", "lab"]) {
    assert.equal(text.includes(secret), false, secret);
  }
});

Deno.test("okeReadings() detects the legacy OKE device plugin DaemonSet", async () => {
  const daemonSets = (await loadRecorded<{ items: [] }>("daemonsets.json")).items;
  assert.deepEqual(okeReadings(daemonSets), {
    "legacy-device-plugin": true,
    "legacy-device-plugin.daemonset": "kube-system/nvidia-gpu-device-plugin",
    "legacy-device-plugin.image": "v0.14.5",
  });
  assert.deepEqual(okeReadings([]), { "legacy-device-plugin": false });
});

Deno.test("collectK8s() reads every subtype from recorded API objects, paginating with limit and continue", async () => {
  const cluster = await createRecordedCluster({ maxPageSize: 2 });
  const m = await collectK8s({ cluster, log: NOOP_LOGGER }, { nodeName: "gpu-node-1" });
  assert.deepEqual(m.subtypes.map((s) => s.subtype), [
    "server",
    "image",
    "policy",
    "node",
    "slinky",
    "mariadb",
    "oke",
  ]);
  for (const s of m.subtypes) assert.equal(s.context?.status, "ok", s.subtype);
  assert.deepEqual(m.subtypes[0]?.data, {
    version: "v1.33.5-eks-3025e55",
    platform: "linux/amd64",
    goVersion: "go1.24.4",
  });
  assert.equal(Object.keys(m.subtypes[1]?.data ?? {}).length, 7);
  // Both ClusterPolicy groups merge; the status subresource is not listed.
  assert.equal(m.subtypes[2]?.data["driver.version"], "580.82.07");
  assert.equal(m.subtypes[2]?.data.validationFailureAction, "Audit");
  assert.equal(m.subtypes[3]?.data.provider, "eks");
  assert.equal(m.subtypes[4]?.data["nodeset.count"], 1);
  assert.deepEqual(m.subtypes[5]?.data, { present: true, count: 1, "slurm/mariadb": true });
  assert.equal(m.subtypes[6]?.data["legacy-device-plugin"], true);
  const podPages = cluster.calls.filter((c) => c.method === "listPods");
  assert.deepEqual(podPages.map((c) => c.args), [
    { limit: 500, continue: undefined },
    { limit: 500, continue: "page-2" },
    { limit: 500, continue: "page-4" },
  ]);
  const listed = cluster.calls.filter((c) => c.method === "listCustomObjects").map((c) =>
    c.args.key
  );
  assert.equal(listed.includes("nvidia.com/v1/clusterpolicies/status"), false);
  assert.equal(cluster.calls.filter((c) => c.method === "listApiResources").length, 1);
});

Deno.test("collectK8s() degrades each failing call to its own subtype with the failure's status", async () => {
  const cluster = await createRecordedCluster({
    errors: {
      serverVersion: new UnavailableError("Cannot reach the API server: connection refused"),
      listPods: new PermissionError("Cannot list pods: forbidden"),
      "listCustomObjects:nvidia.com/v1/clusterpolicies": new PermissionError("forbidden"),
      "listCustomObjects:slinky.slurm.net/v1beta1/controllers": new PermissionError(
        "Cannot list controllers.slinky.slurm.net: forbidden",
      ),
    },
  });
  const m = await collectK8s({ cluster, log: NOOP_LOGGER }, { nodeName: "no-such-node" });
  const byName = Object.fromEntries(m.subtypes.map((s) => [s.subtype, s]));
  assert.deepEqual(byName.server?.data, { version: null, platform: null, goVersion: null });
  assert.equal(byName.server?.context?.status, "failed");
  assert.deepEqual(byName.image?.data, {});
  assert.equal(byName.image?.context?.status, "denied");
  // A forbidden ClusterPolicy group is skipped; the other group still counts.
  assert.equal(byName.policy?.context?.status, "ok");
  assert.equal(byName.policy?.data.validationFailureAction, "Audit");
  assert.equal("driver.version" in (byName.policy?.data ?? {}), false);
  assert.equal(byName.node?.context?.status, "absent");
  assert.equal(byName.slinky?.context?.status, "denied");
  assert.equal(byName.oke?.context?.status, "ok");
});

Deno.test("collectK8s() says absent for Slinky and MariaDB when their API groups are not served", async () => {
  const cluster = createFakeCluster({ version: { gitVersion: "v1.34.0" }, resources: [] });
  const m = await collectK8s({ cluster, log: NOOP_LOGGER }, { nodeName: "" });
  const byName = Object.fromEntries(m.subtypes.map((s) => [s.subtype, s]));
  assert.equal(byName.slinky?.context?.status, "absent");
  assert.deepEqual(byName.mariadb?.data, { present: false });
  assert.equal(byName.mariadb?.context?.status, "absent");
  assert.deepEqual(byName.policy?.data, {});
  assert.equal(byName.node?.context?.status, "absent");
  assert.match(byName.node?.context?.message ?? "", /no node name/);
  assert.deepEqual(byName.server?.data, { version: "v1.34.0", platform: null, goVersion: null });
});

Deno.test("collectK8s() without a client gives every subtype empty with status absent", async () => {
  const m = await collectK8s({ log: NOOP_LOGGER }, { nodeName: "n" });
  assert.equal(m.subtypes.length, 7);
  for (const s of m.subtypes) {
    assert.deepEqual(s.data, {});
    assert.equal(s.context?.status, "absent");
  }
});
