import assert from "node:assert/strict";
import { daemonClusterRoleName, daemonLabels } from "../manifests/mod.ts";
import {
  daemonRbacObjects,
  renderedConfigMaps,
  renderedRbacObjects,
  runRbacObjects,
  toPolicyRules,
} from "./objects.ts";
import { agentRules, daemonRules } from "./rules.ts";

const RUN_ID = "20260103-103000-0123456789abcdef";
const INVOCATION_ID = "fedcba9876543210";
const STAGING = { staging: `aicr-agent-snapshot-${"20260103-103000-0123456789abcdef"}` };
const RUN_LABELS = {
  "app.kubernetes.io/name": "aicr",
  "app.kubernetes.io/managed-by": "aicr",
  "app.kubernetes.io/component": "snapshot-agent",
  "aicr.run/run-id": RUN_ID,
  "aicr.run/invocation-id": INVOCATION_ID,
};

Deno.test("objects: a run's five objects carry run-scoped names and all five labels", () => {
  const rbac = runRbacObjects({
    namespace: "gpu-operator",
    runId: RUN_ID,
    invocationId: INVOCATION_ID,
    configMaps: STAGING,
  });
  const sa = `aicr-${RUN_ID}`;
  const reader = `aicr-node-reader-${RUN_ID}`;
  assert.deepEqual(rbac.serviceAccount, {
    apiVersion: "v1",
    kind: "ServiceAccount",
    metadata: { name: sa, namespace: "gpu-operator", labels: RUN_LABELS },
  });
  assert.equal(rbac.role.metadata.name, sa);
  assert.equal(rbac.role.metadata.namespace, "gpu-operator");
  assert.deepEqual(rbac.roleBinding.roleRef, {
    apiGroup: "rbac.authorization.k8s.io",
    kind: "Role",
    name: sa,
  });
  assert.deepEqual(rbac.roleBinding.subjects, [
    { kind: "ServiceAccount", name: sa, namespace: "gpu-operator" },
  ]);
  assert.equal(rbac.clusterRole.metadata.name, reader);
  assert.equal(rbac.clusterRole.metadata.namespace, undefined);
  assert.deepEqual(rbac.clusterRoleBinding.roleRef, {
    apiGroup: "rbac.authorization.k8s.io",
    kind: "ClusterRole",
    name: reader,
  });
  assert.deepEqual(rbac.clusterRoleBinding.subjects, rbac.roleBinding.subjects);
  for (const object of Object.values(rbac)) assert.deepEqual(object.metadata.labels, RUN_LABELS);
});

Deno.test("objects: a run's Role and ClusterRole carry exactly the rule set", () => {
  const plain = runRbacObjects({
    namespace: "ns",
    runId: RUN_ID,
    invocationId: INVOCATION_ID,
    configMaps: STAGING,
  });
  assert.deepEqual(plain.role.rules, toPolicyRules(agentRules({ configMaps: STAGING }).namespaced));
  assert.deepEqual(
    plain.clusterRole.rules,
    toPolicyRules(agentRules({ configMaps: STAGING }).cluster),
  );
  assert.deepEqual(plain.role.rules[0], {
    apiGroups: [""],
    resources: ["configmaps"],
    verbs: ["get", "update"],
    resourceNames: [STAGING.staging],
  });
  const wide = runRbacObjects({
    namespace: "ns",
    runId: RUN_ID,
    invocationId: INVOCATION_ID,
    discoverNetwork: true,
    configMaps: STAGING,
  });
  assert.deepEqual(
    wide.clusterRole.rules,
    toPolicyRules(agentRules({ discoverNetwork: true, configMaps: STAGING }).cluster),
  );
  assert.equal(wide.clusterRole.rules.length, 15);
});

Deno.test("objects: the ServiceAccount prefix is cut so every name fits 63 characters", () => {
  const rbac = runRbacObjects({
    namespace: "ns",
    runId: RUN_ID,
    invocationId: INVOCATION_ID,
    serviceAccountPrefix: "a-very-long-service-account-prefix-indeed",
    configMaps: STAGING,
  });
  assert.equal(rbac.serviceAccount.metadata.name, `a-very-long-service-account-pr-${RUN_ID}`);
  assert.ok(rbac.serviceAccount.metadata.name.length <= 63);
});

Deno.test("objects: a run refuses a bad namespace or prefix by option", () => {
  assert.throws(
    () =>
      runRbacObjects({
        namespace: "ns",
        runId: RUN_ID,
        invocationId: INVOCATION_ID,
        serviceAccountPrefix: "A",
        configMaps: STAGING,
      }),
    /'serviceAccountName'/,
  );
});

Deno.test("objects: the rendered grant names the existing ServiceAccount and carries no run labels", () => {
  const grant = renderedRbacObjects({
    namespace: "gpu-operator",
    serviceAccount: "irsa-snapshotter",
    configMaps: renderedConfigMaps("irsa-snapshotter"),
  });
  assert.equal(grant.role.metadata.name, "aicr-agent-irsa-snapshotter-rbac");
  assert.equal(grant.roleBinding.metadata.name, "aicr-agent-irsa-snapshotter-rbac");
  assert.equal(grant.clusterRole.metadata.name, "aicr-agent-gpu-operator.irsa-snapshotter-rbac");
  assert.equal(
    grant.clusterRoleBinding.metadata.name,
    "aicr-agent-gpu-operator.irsa-snapshotter-rbac",
  );
  assert.deepEqual(grant.clusterRoleBinding.subjects, [
    { kind: "ServiceAccount", name: "irsa-snapshotter", namespace: "gpu-operator" },
  ]);
  for (const object of Object.values(grant)) {
    assert.deepEqual(object.metadata.labels, {
      "app.kubernetes.io/name": "aicr",
      "app.kubernetes.io/component": "snapshot-agent",
    });
  }
  // Same rules as a run-scoped grant, the staging ConfigMap named per ServiceAccount.
  const run = runRbacObjects({
    namespace: "gpu-operator",
    runId: RUN_ID,
    invocationId: INVOCATION_ID,
    configMaps: { staging: "aicr-agent-snapshot-irsa-snapshotter" },
  });
  assert.deepEqual(grant.role.rules, run.role.rules);
  assert.deepEqual(grant.clusterRole.rules, run.clusterRole.rules);
  assert.deepEqual(grant.role.rules[0]?.resourceNames, ["aicr-agent-snapshot-irsa-snapshotter"]);
  assert.deepEqual(renderedConfigMaps("sa", "out"), {
    staging: "aicr-agent-snapshot-sa",
    target: "out",
  });
  assert.throws(() => renderedConfigMaps("a".repeat(234)), /at most 233/);
});

Deno.test("objects: the daemon gets a ClusterRole, and a Role only when it publishes a ConfigMap", () => {
  const labels = daemonLabels({ name: "aicr-daemon" });
  const clusterRoleName = daemonClusterRoleName("aicr-system", "aicr-daemon");
  const plain = daemonRbacObjects({
    namespace: "aicr-system",
    name: "aicr-daemon",
    clusterRoleName,
    labels,
    rules: daemonRules(),
  });
  assert.equal(plain.role, undefined);
  assert.equal(plain.roleBinding, undefined);
  assert.equal(plain.clusterRole.metadata.name, "aicr-daemon-aicr-system.aicr-daemon");
  assert.deepEqual(plain.clusterRole.rules, toPolicyRules(daemonRules().cluster));
  assert.deepEqual(plain.serviceAccount.metadata, {
    name: "aicr-daemon",
    namespace: "aicr-system",
    labels,
  });
  const publishing = daemonRbacObjects({
    namespace: "aicr-system",
    name: "aicr-daemon",
    clusterRoleName,
    labels,
    rules: daemonRules({ publishConfigMap: true }),
  });
  assert.equal(publishing.role?.metadata.name, "aicr-daemon");
  assert.equal(publishing.roleBinding?.subjects[0]?.name, "aicr-daemon");
});
