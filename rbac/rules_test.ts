import assert from "node:assert/strict";
import {
  accessQuestions,
  agentRules,
  DAEMON_READER_RULES,
  daemonRules,
  isMutating,
  qualifiedResource,
  signerRules,
  splitResource,
} from "./rules.ts";
import type { AccessAttributes, Rule } from "./rules.ts";

function summary(rules: readonly Rule[]): string[] {
  return rules.map((r) =>
    `${r.group || "core"} ${r.resources.join(",")}${
      r.resourceNames ? `[${r.resourceNames.join(",")}]` : ""
    }: ${r.verbs.join(",")}`
  );
}

const STAGING = { staging: "aicr-agent-snapshot-20260103-103000-0123456789abcdef" };

Deno.test("rules: the namespaced Role writes only the staging ConfigMap (no create) and reads pods", () => {
  assert.deepEqual(summary(agentRules({ configMaps: STAGING }).namespaced), [
    `core configmaps[${STAGING.staging}]: get,update`,
    "core pods: get,list",
  ]);
});

Deno.test("rules: with a cm:// output the Role creates ConfigMaps and writes only that one", () => {
  assert.deepEqual(summary(agentRules({ configMaps: { target: "aicr-snapshot" } }).namespaced), [
    "core configmaps: create",
    "core configmaps[aicr-snapshot]: get,update,patch",
    "core pods: get,list",
  ]);
  // A name-limited rule is asked once per name; a nameless question would be denied.
  const questions = accessQuestions(agentRules({ configMaps: { target: "x" } }), "ns")
    .filter((q) => q.resource === "configmaps");
  assert.deepEqual(questions.map((q) => `${q.verb} ${q.name ?? "*"}`), [
    "create *",
    "get x",
    "update x",
    "patch x",
  ]);
});

Deno.test("rules: the ClusterRole baseline is the documented read-only set", () => {
  const cluster = agentRules({ configMaps: STAGING }).cluster;
  assert.deepEqual(summary(cluster), [
    "core nodes: get,list",
    "core pods: get,list",
    "nvidia.com clusterpolicies: get,list",
    "slinky.slurm.net controllers,nodesets,loginsets,restapis,accountings: list",
    "k8s.mariadb.com mariadbs: list",
    "apps daemonsets: get,list",
  ]);
  assert.ok(cluster.every((rule) => !isMutating(rule)));
});

Deno.test("rules: --discover-network appends the documented cluster-scoped rules", () => {
  const cluster = agentRules({ discoverNetwork: true, configMaps: STAGING }).cluster;
  assert.deepEqual(summary(cluster.slice(6)), [
    "apiextensions.k8s.io customresourcedefinitions: get,list,create,update,patch",
    "core namespaces: get,create,delete",
    "apps daemonsets: get,list,watch,create,delete",
    "core serviceaccounts,configmaps: get,create,delete",
    "rbac.authorization.k8s.io roles,rolebindings: get,create,delete",
    "core pods/exec: create",
    "core nodes: patch",
    "configuration.net.nvidia.com nicdevices: get,list",
    "mellanox.com nicclusterpolicies: get,patch",
  ]);
  // Everything but the NicDevice read mutates.
  assert.deepEqual(
    cluster.slice(6).filter((rule) => !isMutating(rule)).map((r) => r.resources[0]),
    ["nicdevices"],
  );
  assert.equal(agentRules({ discoverNetwork: true, configMaps: STAGING }).namespaced.length, 2);
});

Deno.test("rules: every rule explains itself", () => {
  const all = [
    ...agentRules({ discoverNetwork: true, configMaps: STAGING }).namespaced,
    ...agentRules({ discoverNetwork: true, configMaps: STAGING }).cluster,
    ...daemonRules({ publishConfigMap: true }).namespaced,
    ...daemonRules().cluster,
  ];
  for (const rule of all) assert.ok(rule.why.length > 20, rule.resources.join(","));
});

Deno.test("rules: the default rule set asks 18 questions (upstream's WARN example says 20: it grants every ConfigMap)", () => {
  // 4 namespaced (the staging ConfigMap get, update; pods x2) + 14 cluster (nodes 2, pods 2,
  // clusterpolicies 2, five Slinky lists, mariadbs 1, daemonsets 2).
  const questions = accessQuestions(agentRules({ configMaps: STAGING }), "gpu-operator");
  assert.equal(questions.length, 18);
  assert.equal(questions.filter((q) => q.namespace === "gpu-operator").length, 4);
  assert.deepEqual(questions[0], {
    verb: "get",
    group: "",
    resource: "configmaps",
    namespace: "gpu-operator",
    name: STAGING.staging,
  });
  assert.deepEqual(questions.at(-1), { verb: "list", group: "apps", resource: "daemonsets" });
});

Deno.test("rules: --discover-network questions drop the repeated DaemonSet reads and split subresources", () => {
  const questions = accessQuestions(
    agentRules({ discoverNetwork: true, configMaps: STAGING }),
    "ns",
  );
  // 18 + CRDs 5 + namespaces 3 + daemonsets 3 new (watch, create, delete) + sa/cm 6 +
  // roles/rolebindings 6 + pods/exec 1 + nodes patch 1 + nicdevices 2 + nicclusterpolicies 2.
  assert.equal(questions.length, 47);
  const daemonsets = questions.filter((q) => q.resource === "daemonsets").map((q) => q.verb);
  assert.deepEqual(daemonsets, ["get", "list", "watch", "create", "delete"]);
  const exec: AccessAttributes | undefined = questions.find((q) => q.subresource === "exec");
  assert.deepEqual(exec, { verb: "create", group: "", resource: "pods", subresource: "exec" });
});

Deno.test("rules: the daemon reads like the agent, checks its clients, and never mutates", () => {
  const rules = daemonRules();
  assert.deepEqual(rules.namespaced, []);
  assert.deepEqual(summary(rules.cluster.slice(6)), [
    "authentication.k8s.io tokenreviews: create",
    "authorization.k8s.io subjectaccessreviews: create",
  ]);
  assert.equal(daemonRules({ delegatedAuth: false }).cluster.length, 6);
  // Its own Node by GET only: the fleet fetch lists the nodes once (as the reader), no daemon does.
  assert.deepEqual(summary(rules.cluster.filter((r) => r.resources.includes("nodes"))), [
    "core nodes: get",
  ]);
  assert.ok(
    !accessQuestions(rules, "ns").some((q) => q.resource === "nodes" && q.verb === "list"),
  );
  // The agent (Job mode) still lists every node, as upstream.
  assert.ok(
    accessQuestions(agentRules({ configMaps: STAGING }), "ns").some((q) =>
      q.resource === "nodes" && q.verb === "list"
    ),
  );
  assert.deepEqual(summary(daemonRules({ publishConfigMap: true }).namespaced), [
    "core configmaps: create,get,update,patch",
  ]);
});

Deno.test("rules: the reader opens snapshots and lists nodes (the fetch's one topology LIST), nothing else", () => {
  assert.deepEqual(summary(DAEMON_READER_RULES), [
    "aicr.run snapshots: get",
    "core nodes: list",
  ]);
  assert.ok(DAEMON_READER_RULES.every((rule) => !isMutating(rule)));
});

Deno.test("rules: resource names read as kubectl writes them", () => {
  assert.equal(qualifiedResource({ group: "batch", resource: "jobs" }), "jobs.batch");
  assert.equal(qualifiedResource({ group: "", resource: "pods", subresource: "log" }), "pods/log");
  assert.equal(qualifiedResource({ group: "", resource: "nodes" }), "nodes");
  assert.equal(
    qualifiedResource({ group: "rbac.authorization.k8s.io", resource: "clusterroles" }),
    "clusterroles.rbac.authorization.k8s.io",
  );
  assert.equal(
    qualifiedResource({ group: "apps", resource: "deployments", subresource: "scale" }),
    "deployments.apps/scale",
  );
  assert.deepEqual(splitResource("pods"), { resource: "pods" });
});

Deno.test("rules: the signer approves and signs for its one signer name, reads its one Secret and Lease, creates nothing", () => {
  const rules = signerRules({
    signerName: "aicr.run/daemon-serving",
    caSecret: "aicr-daemon-signer",
    lease: "aicr-daemon-signer",
    daemonSet: "aicr-daemon",
  });
  assert.deepEqual(summary(rules.namespaced), [
    "core secrets[aicr-daemon-signer]: get",
    "coordination.k8s.io leases[aicr-daemon-signer]: get,update",
    "apps daemonsets[aicr-daemon]: get",
    "core pods: get,list",
  ]);
  assert.deepEqual(summary(rules.cluster), [
    "certificates.k8s.io certificatesigningrequests: get,list,watch",
    "certificates.k8s.io certificatesigningrequests/approval: update",
    "certificates.k8s.io certificatesigningrequests/status: update",
    "certificates.k8s.io signers[aicr.run/daemon-serving]: approve,sign",
    "core nodes: get",
  ]);
  const all = [...rules.namespaced, ...rules.cluster];
  assert.ok(all.every((r) => !r.verbs.includes("create") && !r.verbs.includes("delete")));
  assert.ok(all.every((r) => !r.verbs.includes("*") && !r.resources.includes("*")));
  // Every mutating rule but the CSR subresources is limited by name.
  for (const rule of all.filter(isMutating)) {
    assert.ok(
      rule.resourceNames !== undefined ||
        rule.resources[0]?.startsWith("certificatesigningrequests/"),
      summary([rule])[0],
    );
  }
});
