/**
 * Least privilege, proved against the real RBAC of live runs: for each mode (default,
 * restricted, exact ServiceAccount with the rendered grant; `--discover-network` through
 * its rendered grant, since `aicr snapshot` refuses that flag until NetworkTopology
 * exists) the
 * agent's identity is asked a wide matrix of SubjectAccessReviews (verbs × resources ×
 * its namespace, another namespace and cluster scope, and ConfigMaps by name: the staging
 * one, the `cm://` output and `kube-root-ca.crt`). What it may do beyond an unbound
 * ServiceAccount of the same namespace (same groups) must be exactly the spec's rules
 * (aicr-behaviour.md §4.2, written out here by hand, not taken from `rbac/rules.ts`),
 * narrowed as issue #18 asks: ConfigMap writes limited by name to the staging ConfigMap
 * (`get, update`; aicr creates it) or to the `cm://` output (`create`, which a name cannot
 * limit, plus `get, update, patch`), so both a missing rule and an over-grant fail.
 *
 * `rbac/cluster_test.ts` proves the rule set's own questions against objects it applies
 * itself; this file proves what a real run's objects grant, and that nothing else is.
 */
import assert from "node:assert/strict";
import { mkdtemp, readdir, readFile, rm } from "node:fs/promises";
import { join } from "node:path";
import { parse as parseYaml } from "yaml";
import { aicr } from "../e2e/_aicr.ts";
import type { Api } from "../kubelet/api.ts";
import { record } from "./_report.ts";
import { ENABLED, PENDING, snapshotArgs, spawnAicr, suiteEnv, until } from "./_env.ts";

/** A spec rule: group, resources, verbs, and the names it is limited to (if any). */
type SpecRule = readonly [
  group: string,
  resources: readonly string[],
  verbs: readonly string[],
  names?: readonly string[],
];

/** The ConfigMaps one identity writes. */
interface Written {
  staging?: string;
  target?: string;
}

/**
 * §4.2's Role in the deployment namespace (`configmaps: create, get, update, patch`;
 * `pods: get, list`), narrowed by name: the staging ConfigMap `get, update` (aicr creates
 * it), the `cm://` output `create` plus `get, update, patch`.
 */
function specRole(written: Written): SpecRule[] {
  return [
    ...(written.staging
      ? [["", ["configmaps"], ["get", "update"], [written.staging]] as const]
      : []),
    ...(written.target
      ? [
        ["", ["configmaps"], ["create"]] as const,
        ["", ["configmaps"], ["get", "update", "patch"], [written.target]] as const,
      ]
      : []),
    ["", ["pods"], ["get", "list"]],
  ];
}
/** §4.2 v1.0.0: the read-only ClusterRole. */
const SPEC_CLUSTER_ROLE: readonly SpecRule[] = [
  ["", ["nodes", "pods"], ["get", "list"]],
  ["nvidia.com", ["clusterpolicies"], ["get", "list"]],
  ["slinky.slurm.net", ["controllers", "nodesets", "loginsets", "restapis", "accountings"], [
    "list",
  ]],
  ["k8s.mariadb.com", ["mariadbs"], ["list"]],
  ["apps", ["daemonsets"], ["get", "list"]],
];
/** §4.2: what `--discover-network` appends (cluster-scoped). */
const SPEC_DISCOVER_NETWORK: readonly SpecRule[] = [
  ["apiextensions.k8s.io", ["customresourcedefinitions"], [
    "get",
    "list",
    "create",
    "update",
    "patch",
  ]],
  ["", ["namespaces"], ["get", "create", "delete"]],
  ["apps", ["daemonsets"], ["get", "list", "watch", "create", "delete"]],
  ["", ["serviceaccounts", "configmaps"], ["get", "create", "delete"]],
  ["rbac.authorization.k8s.io", ["roles", "rolebindings"], ["get", "create", "delete"]],
  ["", ["pods/exec"], ["create"]],
  ["", ["nodes"], ["patch"]],
  ["configuration.net.nvidia.com", ["nicdevices"], ["get", "list"]],
  ["mellanox.com", ["nicclusterpolicies"], ["get", "patch"]],
];

/** The probe matrix: every resource a run or a thief could care about. */
const PROBED: readonly (readonly [string, readonly string[]])[] = [
  ["", [
    "pods",
    "pods/log",
    "pods/exec",
    "pods/eviction",
    "configmaps",
    "secrets",
    "serviceaccounts",
    "serviceaccounts/token",
    "nodes",
    "nodes/proxy",
    "namespaces",
    "events",
    "services",
    "endpoints",
    "persistentvolumeclaims",
  ]],
  ["apps", ["daemonsets", "deployments", "statefulsets"]],
  ["batch", ["jobs", "cronjobs"]],
  ["rbac.authorization.k8s.io", ["roles", "rolebindings", "clusterroles", "clusterrolebindings"]],
  ["apiextensions.k8s.io", ["customresourcedefinitions"]],
  ["admissionregistration.k8s.io", ["validatingwebhookconfigurations"]],
  ["certificates.k8s.io", ["certificatesigningrequests"]],
  ["authentication.k8s.io", ["tokenreviews"]],
  ["authorization.k8s.io", ["subjectaccessreviews"]],
  ["nvidia.com", ["clusterpolicies"]],
  ["slinky.slurm.net", ["controllers", "nodesets", "loginsets", "restapis", "accountings"]],
  ["k8s.mariadb.com", ["mariadbs"]],
  ["configuration.net.nvidia.com", ["nicdevices"]],
  ["mellanox.com", ["nicclusterpolicies"]],
];
const VERBS = [
  "get",
  "list",
  "watch",
  "create",
  "update",
  "patch",
  "delete",
  "deletecollection",
  "escalate",
  "bind",
  "impersonate",
];

interface Question {
  verb: string;
  group: string;
  resource: string;
  namespace?: string;
  name?: string;
}

const key = (q: Question) =>
  `${q.verb} ${q.group ? `${q.resource}.${q.group}` : q.resource}${q.name ? `/${q.name}` : ""} @${
    q.namespace ?? "cluster"
  }`;

function grants(rules: readonly SpecRule[], q: Question): boolean {
  return rules.some(([group, resources, verbs, names]) =>
    group === q.group && resources.includes(q.resource) && verbs.includes(q.verb) &&
    (names === undefined || (q.name !== undefined && names.includes(q.name)))
  );
}

/** What the spec lets the agent do, for one question. */
function expected(
  q: Question,
  ownNamespace: string,
  discoverNetwork: boolean,
  written: Written,
): boolean {
  const cluster = discoverNetwork
    ? [...SPEC_CLUSTER_ROLE, ...SPEC_DISCOVER_NETWORK]
    : SPEC_CLUSTER_ROLE;
  if (grants(cluster, q)) return true;
  return q.namespace === ownNamespace && grants(specRole(written), q);
}

function questions(ownNamespace: string, written: Written): Question[] {
  const out: Question[] = [];
  const names = [written.staging, written.target, "kube-root-ca.crt"].filter((n) =>
    n !== undefined
  ) as string[];
  for (const [group, resources] of PROBED) {
    for (const r of resources) {
      for (const verb of VERBS) {
        for (const namespace of [ownNamespace, "kube-system", undefined]) {
          out.push({ verb, group, resource: r, ...(namespace ? { namespace } : {}) });
        }
        if (r === "configmaps") {
          for (const name of names) {
            out.push({ verb, group, resource: r, namespace: ownNamespace, name });
          }
        }
      }
    }
  }
  return out;
}

async function review(admin: Api, user: string, groups: string[], q: Question): Promise<boolean> {
  const [resource, subresource] = q.resource.split("/");
  const res = await admin.request("POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", {
    apiVersion: "authorization.k8s.io/v1",
    kind: "SubjectAccessReview",
    spec: {
      user,
      groups,
      resourceAttributes: {
        verb: q.verb,
        group: q.group,
        resource,
        ...(subresource ? { subresource } : {}),
        ...(q.namespace ? { namespace: q.namespace } : {}),
        ...(q.name ? { name: q.name } : {}),
      },
    },
  });
  assert.equal(res.status, 201, JSON.stringify(res.body));
  return res.body.status?.allowed === true;
}

async function allowedSet(
  admin: Api,
  user: string,
  groups: string[],
  qs: Question[],
): Promise<Set<string>> {
  const allowed = new Set<string>();
  for (let i = 0; i < qs.length; i += 48) {
    const batch = qs.slice(i, i + 48);
    const answers = await Promise.all(batch.map((q) => review(admin, user, groups, q)));
    batch.forEach((q, j) => answers[j] && allowed.add(key(q)));
  }
  return allowed;
}

/** Proves one identity: returns the over-grants and the missing grants. */
async function prove(
  admin: Api,
  namespace: string,
  serviceAccount: string,
  discoverNetwork: boolean,
  written: Written,
): Promise<{ over: string[]; missing: string[]; asked: number }> {
  const groups = [
    "system:serviceaccounts",
    `system:serviceaccounts:${namespace}`,
    "system:authenticated",
  ];
  const user = `system:serviceaccount:${namespace}:${serviceAccount}`;
  // RBAC is read from an informer: wait until the grant is visible.
  await until(
    "the agent's grant to be visible",
    async () =>
      (await review(admin, user, groups, { verb: "list", group: "", resource: "nodes" })) &&
        (await review(admin, user, groups, {
          verb: "get",
          group: "",
          resource: "pods",
          namespace,
        }))
        ? true
        : undefined,
  );
  const qs = questions(namespace, written);
  const [agent, baseline] = await Promise.all([
    allowedSet(admin, user, groups, qs),
    allowedSet(admin, `system:serviceaccount:${namespace}:aicr-baseline-unbound`, groups, qs),
  ]);
  const over: string[] = [];
  const missing: string[] = [];
  for (const q of qs) {
    const k = key(q);
    const want = expected(q, namespace, discoverNetwork, written);
    if (agent.has(k) && !want && !baseline.has(k)) over.push(k);
    if (want && !agent.has(k)) missing.push(k);
  }
  return { over, missing, asked: qs.length * 2 };
}

Deno.test({
  name: "reliability: the agent's identity can do exactly the spec's rules, in every mode",
  ignore: !ENABLED,
  // One cluster serves every step (its processes outlive the steps; close() ends them).
  sanitizeOps: false,
  sanitizeResources: false,
  async fn(t) {
    const suite = await suiteEnv();
    const { env } = suite;
    const { admin } = env;
    const kubeconfig = env.cluster.adminKubeconfig;
    try {
      for (
        const [mode, extra, discoverNetwork] of [
          ["default", [], false],
          ["restricted (--privileged=false)", ["--privileged=false"], false],
        ] as const
      ) {
        await t.step(`${mode}: the live run's ServiceAccount, nothing more`, async () => {
          const ns = await suite.namespace("rel-priv");
          const run = spawnAicr(
            snapshotArgs(kubeconfig, ns, "--timeout", "90s", ...PENDING, ...extra),
          );
          const [, runId] = await run.waitFor(/runID=(\S+)/);
          await run.waitFor(/waiting for the agent/);
          const written = { staging: `aicr-agent-snapshot-${runId}` };
          const proof = await prove(admin, ns, `aicr-${runId}`, discoverNetwork, written);
          if (mode === "default") {
            // The prover itself: a grant slipped in beside the run's must be reported.
            const rbac = `/apis/rbac.authorization.k8s.io/v1/namespaces/${ns}`;
            await admin.request("POST", `${rbac}/roles`, {
              metadata: { name: "slipped-in" },
              rules: [{ apiGroups: [""], resources: ["secrets"], verbs: ["get"] }],
            });
            await admin.request("POST", `${rbac}/rolebindings`, {
              metadata: { name: "slipped-in" },
              roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "Role", name: "slipped-in" },
              subjects: [{ kind: "ServiceAccount", name: `aicr-${runId}`, namespace: ns }],
            });
            const caught = await until("the slipped-in grant to be caught", async () => {
              const again = await prove(admin, ns, `aicr-${runId}`, false, written);
              return again.over.length > 0 ? again.over : undefined;
            });
            assert.deepEqual(caught, [`get secrets @${ns}`]);
            await admin.request("DELETE", `${rbac}/rolebindings/slipped-in`);
            await admin.request("DELETE", `${rbac}/roles/slipped-in`);
          }
          run.kill("SIGINT");
          const done = await run.done;
          const left = await suite.leftovers(ns, runId);
          record(`privilege: ${mode}`, {
            accessReviews: proof.asked,
            overGrants: proof.over.length,
            leftovers: left.length,
          });
          assert.deepEqual(proof.over, [], "over-grants");
          assert.deepEqual(proof.missing, [], "grants the spec lists but the run lacks");
          assert.equal(done.code, 130, done.stderr);
          assert.deepEqual(left, []);
        });
      }

      for (const discoverNetwork of [false, true]) {
        const what = discoverNetwork
          ? "--discover-network: the rendered grant (aicr snapshot refuses the flag for now)"
          : "exact ServiceAccount: the rendered grant, and the run adds nothing";
        await t.step(what, async () => {
          const ns = await suite.namespace("rel-priv-exact");
          const sa = "irsa-snapshotter";
          assert.equal(
            (await admin.request("POST", `/api/v1/namespaces/${ns}/serviceaccounts`, {
              metadata: { name: sa },
            })).status,
            201,
          );
          const cwd = await mkdtemp(join(env.cluster.stateDir, "rbac-exact-"));
          const applied: string[] = [];
          const paths: Record<string, string> = {
            Role: `/apis/rbac.authorization.k8s.io/v1/namespaces/${ns}/roles`,
            RoleBinding: `/apis/rbac.authorization.k8s.io/v1/namespaces/${ns}/rolebindings`,
            ClusterRole: "/apis/rbac.authorization.k8s.io/v1/clusterroles",
            ClusterRoleBinding: "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
          };
          const flag = discoverNetwork ? ["--discover-network"] : [];
          const written = { staging: `aicr-agent-snapshot-${sa}`, target: "out" };
          try {
            const render = await aicr(
              [
                "snapshot",
                "-n",
                ns,
                "--add-roles-to-service-account",
                sa,
                "-o",
                `cm://${ns}/out`,
                ...flag,
              ],
              { cwd, env: { HOME: cwd } },
            );
            assert.equal(render.code, 0, render.stderr);
            const [dir] = await readdir(cwd);
            for (const file of (await readdir(join(cwd, dir!))).sort()) {
              const manifest = parseYaml(await readFile(join(cwd, dir!, file), "utf8"));
              const res = await admin.request("POST", paths[manifest.kind]!, manifest);
              assert.equal(res.status, 201, `${file}: ${res.body.message}`);
              applied.push(`${paths[manifest.kind]}/${manifest.metadata.name}`);
            }
            const args = snapshotArgs(
              kubeconfig,
              ns,
              "--timeout",
              "90s",
              "--service-account-name",
              sa,
              "-o",
              `cm://${ns}/out`,
              ...PENDING,
              ...flag,
            );
            if (discoverNetwork) {
              const proof = await prove(admin, ns, sa, true, written);
              const before = await suite.aicrObjects(ns);
              const refused = await aicr(args, { env: { HOME: cwd } });
              const left = (await suite.aicrObjects(ns)).filter((o) => !before.includes(o));
              record("privilege: --discover-network (rendered)", {
                accessReviews: proof.asked,
                overGrants: proof.over.length,
                leftovers: left.length,
              });
              assert.deepEqual(proof.over, [], "over-grants");
              assert.deepEqual(proof.missing, [], "grants the spec lists but the files lack");
              assert.equal(refused.code, 2, refused.stderr);
              assert.deepEqual(left, []);
              return;
            }
            const run = spawnAicr(args);
            const [, runId] = await run.waitFor(/runID=(\S+)/);
            await run.waitFor(/waiting for the agent/);
            const proof = await prove(admin, ns, sa, false, written);
            // The run itself created no identity and no grant.
            const runObjects = await suite.leftovers(ns, runId);
            run.kill("SIGINT");
            const done = await run.done;
            const left = await suite.leftovers(ns, runId);
            record("privilege: exact ServiceAccount", {
              accessReviews: proof.asked,
              overGrants: proof.over.length,
              leftovers: left.length,
            });
            assert.deepEqual(proof.over, [], "over-grants");
            assert.deepEqual(proof.missing, [], "grants the spec lists but the files lack");
            assert.deepEqual(runObjects.map((o) => o.split("/")[0]).sort(), ["Job", "Pod"]);
            assert.equal(done.code, 130, done.stderr);
            assert.deepEqual(left, []);
          } finally {
            for (const path of applied.reverse()) await admin.request("DELETE", path);
            await rm(cwd, { recursive: true, force: true });
          }
        });
      }
    } finally {
      await suite.close();
    }
  },
});
