/**
 * The rule set, the RBAC objects, the rendered grant, the gate and the manifests against
 * the real test cluster (apiserver with RBAC and PodSecurity admission): what the gate
 * asks is exactly what the objects grant, and the apiserver accepts every manifest.
 *
 * Runs when `AICR_CLUSTER_DIR` names a running cluster (the full `deno task test` run
 * sets it); skipped in unit runs.
 */
import assert from "node:assert/strict";
import process from "node:process";
import { parse } from "yaml";
import { PermissionError } from "../errors.ts";
import { createLogger } from "../log.ts";
import {
  buildAgentJob,
  buildDaemonSet,
  serviceAccountGroups,
  serviceAccountUser,
} from "../manifests/mod.ts";
import type { AgentJobConfig, PodSpec } from "../manifests/mod.ts";
import type { Api, Obj } from "../tests/kubelet/api.ts";
import { createNamespace, useTestCluster } from "../tests/cluster/harness.ts";
import type { TestCluster } from "../tests/cluster/harness.ts";
import { accessQuestions, agentRules, daemonRules } from "./rules.ts";
import type { AccessAttributes } from "./rules.ts";
import { daemonRbacObjects, renderedConfigMaps, runRbacObjects } from "./objects.ts";
import { callerChecks, runGate } from "./gate.ts";
import type { AccessReviewer } from "./gate.ts";
import { renderRbacFiles } from "./render.ts";

const ENABLED = process.env.AICR_CLUSTER_DIR !== undefined;
const RBAC = "/apis/rbac.authorization.k8s.io/v1";

function resourceAttributes(a: AccessAttributes): Obj {
  return {
    verb: a.verb,
    group: a.group,
    resource: a.resource,
    ...(a.subresource ? { subresource: a.subresource } : {}),
    ...(a.namespace ? { namespace: a.namespace } : {}),
    ...(a.name ? { name: a.name } : {}),
  };
}

/** A reviewer over a test client: SSAR as the client's identity, SAR for others. */
function reviewerFor(api: Api): AccessReviewer {
  return {
    async selfReview(attributes) {
      const res = await api.request(
        "POST",
        "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
        {
          apiVersion: "authorization.k8s.io/v1",
          kind: "SelfSubjectAccessReview",
          spec: { resourceAttributes: resourceAttributes(attributes) },
        },
      );
      assert.equal(res.status, 201, JSON.stringify(res.body));
      return { allowed: res.body.status?.allowed === true, reason: res.body.status?.reason ?? "" };
    },
    async subjectReview(user, groups, attributes) {
      const res = await api.request("POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", {
        apiVersion: "authorization.k8s.io/v1",
        kind: "SubjectAccessReview",
        spec: { user, groups, resourceAttributes: resourceAttributes(attributes) },
      });
      if (res.status === 403) {
        throw new PermissionError(`Cannot create subjectaccessreviews: ${res.body.message}`);
      }
      assert.equal(res.status, 201, JSON.stringify(res.body));
      return { allowed: res.body.status?.allowed === true };
    },
  };
}

async function post(api: Api, path: string, obj: unknown, dryRun = false): Promise<Obj> {
  const res = await api.request("POST", `${path}${dryRun ? "?dryRun=All" : ""}`, obj);
  assert.equal(res.status, 201, `POST ${path}: HTTP ${res.status} ${res.body.message}`);
  return res.body;
}

function pathOf(obj: { kind: string; metadata: { namespace?: string } }): string {
  const ns = obj.metadata.namespace;
  switch (obj.kind) {
    case "ServiceAccount":
      return `/api/v1/namespaces/${ns}/serviceaccounts`;
    case "Role":
      return `${RBAC}/namespaces/${ns}/roles`;
    case "RoleBinding":
      return `${RBAC}/namespaces/${ns}/rolebindings`;
    case "ClusterRole":
      return `${RBAC}/clusterroles`;
    case "ClusterRoleBinding":
      return `${RBAC}/clusterrolebindings`;
    case "Job":
      return `/apis/batch/v1/namespaces/${ns}/jobs`;
    case "DaemonSet":
      return `/apis/apps/v1/namespaces/${ns}/daemonsets`;
    default:
      throw new Error(`no path for ${obj.kind}`);
  }
}

async function createAll(
  api: Api,
  objects: readonly { kind: string; metadata: Obj }[],
): Promise<void> {
  for (const obj of objects) await post(api, pathOf(obj as never), obj);
}

async function deleteClusterScoped(api: Api, names: readonly string[]): Promise<void> {
  for (const name of names) {
    await api.request("DELETE", `${RBAC}/clusterrolebindings/${name}`);
    await api.request("DELETE", `${RBAC}/clusterroles/${name}`);
  }
}

async function allowedFor(
  reviewer: AccessReviewer,
  namespace: string,
  sa: string,
  questions: readonly AccessAttributes[],
): Promise<string[]> {
  const denied: string[] = [];
  for (const q of questions) {
    const { allowed } = await reviewer.subjectReview(
      serviceAccountUser(namespace, sa),
      serviceAccountGroups(namespace),
      q,
    );
    if (!allowed) denied.push(`${q.verb} ${q.resource}${q.subresource ? `/${q.subresource}` : ""}`);
  }
  return denied;
}

let env: TestCluster | undefined;
async function cluster(): Promise<TestCluster> {
  env ??= await useTestCluster();
  return env;
}

const RUN_A = "20260103-103000-00000000000000aa";
const RUN_B = "20260103-103000-00000000000000bb";
const INVOCATION = "fedcba9876543210";

Deno.test({
  name: "cluster: a run's RBAC grants every question the gate asks, and nothing it does not",
  ignore: !ENABLED,
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    const { admin } = await cluster();
    const ns = await createNamespace(admin, "aicr-rbac");
    const reviewer = reviewerFor(admin);
    try {
      for (const [runId, discoverNetwork] of [[RUN_A, false], [RUN_B, true]] as const) {
        const configMaps = { staging: `aicr-agent-snapshot-${runId}` };
        const rbac = runRbacObjects({
          namespace: ns,
          runId,
          invocationId: INVOCATION,
          discoverNetwork,
          configMaps,
        });
        await createAll(admin, Object.values(rbac));
        const sa = rbac.serviceAccount.metadata.name;
        const questions = accessQuestions(agentRules({ discoverNetwork, configMaps }), ns);
        assert.equal(questions.length, discoverNetwork ? 47 : 18);
        assert.deepEqual(await allowedFor(reviewer, ns, sa, questions), []);
        // Not granted: writes outside the rule set, ConfigMaps in another namespace, and any
        // ConfigMap of this namespace but the staging one (kube-root-ca.crt included).
        const outside: AccessAttributes[] = [
          { verb: "get", group: "", resource: "secrets", namespace: ns },
          { verb: "delete", group: "", resource: "nodes" },
          ...(discoverNetwork ? [] : [
            { verb: "create", group: "", resource: "configmaps", namespace: ns },
            { verb: "get", group: "", resource: "configmaps", namespace: ns },
          ]),
          {
            verb: "update",
            group: "",
            resource: "configmaps",
            namespace: ns,
            name: "kube-root-ca.crt",
          },
          {
            verb: "patch",
            group: "",
            resource: "configmaps",
            namespace: ns,
            name: "kube-root-ca.crt",
          },
          {
            verb: "update",
            group: "",
            resource: "configmaps",
            namespace: ns,
            name: "aicr-snapshot",
          },
          // --discover-network grants ConfigMap and node writes cluster-wide, by design.
          ...(discoverNetwork ? [] : [
            { verb: "create", group: "", resource: "configmaps", namespace: "kube-system" },
            { verb: "patch", group: "", resource: "nodes" },
          ]),
        ];
        assert.deepEqual(
          await allowedFor(reviewer, ns, sa, outside),
          outside.map((q) => `${q.verb} ${q.resource}`),
        );
      }
    } finally {
      await deleteClusterScoped(admin, [`aicr-node-reader-${RUN_A}`, `aicr-node-reader-${RUN_B}`]);
      await admin.request("DELETE", `/api/v1/namespaces/${ns}`);
    }
  },
});

Deno.test({
  name:
    "cluster: the rendered files apply as written and grant the existing ServiceAccount the same questions",
  ignore: !ENABLED,
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    const { admin } = await cluster();
    const ns = await createNamespace(admin, "aicr-render");
    const { files } = renderRbacFiles({
      namespace: ns,
      serviceAccount: "irsa-snapshotter",
      runId: RUN_A,
      outputConfigMap: "aicr-snapshot",
      version: "0.1.0",
    });
    try {
      await createAll(admin, files.map((f) => parse(f.text)));
      const configMaps = renderedConfigMaps("irsa-snapshotter", "aicr-snapshot");
      const questions = accessQuestions(agentRules({ configMaps }), ns);
      assert.deepEqual(await allowedFor(reviewerFor(admin), ns, "irsa-snapshotter", questions), []);
      // Update and patch stop at the two names the grant carries.
      const outside: AccessAttributes[] = [
        {
          verb: "update",
          group: "",
          resource: "configmaps",
          namespace: ns,
          name: "kube-root-ca.crt",
        },
        { verb: "patch", group: "", resource: "configmaps", namespace: ns, name: "other" },
        { verb: "delete", group: "", resource: "configmaps", namespace: ns, name: "aicr-snapshot" },
      ];
      assert.deepEqual(
        await allowedFor(reviewerFor(admin), ns, "irsa-snapshotter", outside),
        outside.map((q) => `${q.verb} ${q.resource}`),
      );
    } finally {
      await deleteClusterScoped(admin, [`aicr-agent-${ns}.irsa-snapshotter-rbac`]);
      await admin.request("DELETE", `/api/v1/namespaces/${ns}`);
    }
  },
});

Deno.test({
  name:
    "cluster: the gate lists every missing caller permission, passes once they are granted, and warns when SAR is denied",
  ignore: !ENABLED,
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    const env = await cluster();
    const { admin } = env;
    const ns = await createNamespace(admin, "aicr-gate");
    const user = `gate-${ns}`;
    const caller = await env.clientFor(user);
    const lines: string[] = [];
    const log = createLogger({ write: (t) => void lines.push(t) });
    const options = { namespace: ns, serviceAccount: "irsa-snapshotter", ownsOutput: true, log };
    try {
      const denied = await runGate(reviewerFor(caller), { ...options, mode: "prefix" })
        .then(() => undefined, (e: unknown) => e);
      assert.ok(denied instanceof PermissionError);
      const deniedLines = denied.message.split("\n");
      assert.equal(deniedLines[0], "missing required permissions:");
      assert.equal(deniedLines.length, 1 + 24);
      assert.ok(
        deniedLines.includes(
          `- the caller (your kubeconfig identity) cannot "get" pods/log (namespace "${ns}")`,
        ),
      );
      assert.ok(
        deniedLines.includes(
          '- the caller (your kubeconfig identity) cannot "delete" clusterroles.rbac.authorization.k8s.io (cluster-scoped)',
        ),
      );

      // Grant exactly what callerChecks asks; the real authorizer must then allow every question.
      const checks = callerChecks({ mode: "prefix", ownsOutput: true, namespace: ns });
      const toRule = (c: AccessAttributes) => ({
        apiGroups: [c.group],
        resources: [c.subresource ? `${c.resource}/${c.subresource}` : c.resource],
        verbs: [c.verb],
      });
      const subjects = [{ kind: "User", apiGroup: "rbac.authorization.k8s.io", name: user }];
      await post(admin, `${RBAC}/namespaces/${ns}/roles`, {
        metadata: { name: "caller" },
        rules: checks.filter((c) => c.namespace).map(toRule),
      });
      await post(admin, `${RBAC}/namespaces/${ns}/rolebindings`, {
        metadata: { name: "caller" },
        roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "Role", name: "caller" },
        subjects,
      });
      await post(admin, `${RBAC}/clusterroles`, {
        metadata: { name: `caller-${ns}` },
        rules: checks.filter((c) => !c.namespace).map(toRule),
      });
      await post(admin, `${RBAC}/clusterrolebindings`, {
        metadata: { name: `caller-${ns}` },
        roleRef: {
          apiGroup: "rbac.authorization.k8s.io",
          kind: "ClusterRole",
          name: `caller-${ns}`,
        },
        subjects,
      });
      // RBAC is read from an informer: wait until the grant is visible.
      const deadline = Date.now() + 30_000;
      let report;
      while (!report) {
        report = await runGate(reviewerFor(caller), { ...options, mode: "prefix" }).catch((e) => {
          if (Date.now() > deadline) throw e;
          return undefined;
        });
        if (!report) await new Promise((r) => setTimeout(r, 200));
      }
      assert.deepEqual(report, {
        callerChecked: 24,
        serviceAccountChecked: 0,
        serviceAccountUnchecked: 0,
      });

      // Exact mode: this caller may not create SubjectAccessReviews, so the gate warns and goes on.
      lines.length = 0;
      const exact = await runGate(reviewerFor(caller), {
        ...options,
        mode: "exact",
        configMaps: { staging: "aicr-agent-snapshot-irsa-snapshotter" },
      });
      assert.deepEqual(exact, {
        callerChecked: 14,
        serviceAccountChecked: 0,
        serviceAccountUnchecked: 18,
      });
      assert.equal(lines.length, 1);
      assert.ok(
        lines[0]?.startsWith("WARN could not verify the agent ServiceAccount's own permissions"),
      );
      assert.ok(lines[0]?.includes(`uncheckedRules=18 remedy="grant the caller`));
    } finally {
      await admin.request("DELETE", `${RBAC}/clusterrolebindings/caller-${ns}`);
      await admin.request("DELETE", `${RBAC}/clusterroles/caller-${ns}`);
      await admin.request("DELETE", `/api/v1/namespaces/${ns}`);
    }
  },
});

Deno.test({
  name:
    "cluster: the apiserver accepts every Job variant and the DaemonSet, and PSS restricted admits only the restricted pod",
  ignore: !ENABLED,
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    const { admin } = await cluster();
    const ns = await createNamespace(admin, "aicr-manifests");
    try {
      const base: AgentJobConfig = {
        namespace: ns,
        runId: RUN_A,
        invocationId: INVOCATION,
        serviceAccountName: `aicr-${RUN_A}`,
        image: "ghcr.io/nvidia/aicr:v0.1.0",
      };
      const variants: AgentJobConfig[] = [
        base,
        { ...base, privileged: false },
        { ...base, requireGpu: true },
        { ...base, runtimeClass: "nvidia", nodeSelector: { "nvidia.com/gpu.present": "true" } },
        {
          ...base,
          tolerations: [
            { key: "nvidia.com/gpu", operator: "Equal", value: "present", effect: "NoSchedule" },
            { key: "dedicated", operator: "Exists", effect: "NoSchedule" },
            { operator: "Exists", effect: "NoExecute" },
          ],
        },
        {
          ...base,
          imagePullSecrets: ["regcred"],
          requests: { cpu: "500m", memory: "1.5Gi", "ephemeral-storage": "1e9" },
          limits: { cpu: "1500m", memory: "2Gi", "hugepages-2Mi": "0" },
          output: { namespace: ns, name: "aicr-snapshot" },
          maxNodesPerEntry: 5,
        },
        ...(["ubuntu", "rhel", "cos", "amazonlinux", "ol", "talos"] as const).map((os) => ({
          ...base,
          os,
        })),
      ];
      for (const config of variants) {
        await post(admin, pathOf(buildAgentJob(config)), buildAgentJob(config), true);
      }
      const ds = buildDaemonSet({
        namespace: ns,
        image: base.image,
        tls: { secretName: "aicr-daemon-tls" },
      });
      await post(admin, pathOf(ds), ds, true);
      const daemon = daemonRbacObjects({
        namespace: ns,
        name: "aicr-daemon",
        clusterRoleName: `aicr-daemon-${ns}.aicr-daemon`,
        labels: ds.metadata.labels ?? {},
        rules: daemonRules({ publishConfigMap: true }),
      });
      for (const obj of Object.values(daemon)) if (obj) await post(admin, pathOf(obj), obj, true);

      // PodSecurity "restricted" enforced: the restricted pod passes, the privileged one does not.
      const restrictedNs = await createNamespace(admin, "aicr-pss");
      try {
        const patched = await admin.request("PATCH", `/api/v1/namespaces/${restrictedNs}`, {
          metadata: { labels: { "pod-security.kubernetes.io/enforce": "restricted" } },
        });
        assert.equal(patched.status, 200);
        // Admission wants a ServiceAccount that exists: the namespace's default.
        const inPss = { ...base, namespace: restrictedNs, serviceAccountName: "default" };
        const podOf = (spec: PodSpec) => ({
          apiVersion: "v1",
          kind: "Pod",
          metadata: { name: "agent" },
          spec,
        });
        const restricted = buildAgentJob({ ...inPss, privileged: false });
        await post(
          admin,
          `/api/v1/namespaces/${restrictedNs}/pods`,
          podOf(restricted.spec.template.spec),
          true,
        );
        const privileged = buildAgentJob(inPss);
        const res = await admin.request(
          "POST",
          `/api/v1/namespaces/${restrictedNs}/pods?dryRun=All`,
          podOf(privileged.spec.template.spec),
        );
        assert.equal(res.status, 403, JSON.stringify(res.body));
        assert.match(String(res.body.message), /violates PodSecurity "restricted/);
      } finally {
        await admin.request("DELETE", `/api/v1/namespaces/${restrictedNs}`);
      }
    } finally {
      await admin.request("DELETE", `/api/v1/namespaces/${ns}`);
    }
  },
});

// A fixture, not a test: stops what cluster() started (nothing when a running cluster was reused).
Deno.test.afterAll(async () => {
  await env?.stop();
});
