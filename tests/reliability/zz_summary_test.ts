/**
 * The last test of the suite (files run in path order): a label sweep of the whole
 * cluster for anything a snapshot run created (every earlier test file's runs included),
 * then the reliability totals printed so CI output shows them, holding the two goals
 * (nothing left behind, nothing over-granted) over every case that reported.
 */
import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import process from "node:process";
import { createApi, type Obj } from "../kubelet/api.ts";
import { loadCluster } from "../cluster/cluster.ts";
import { record, reportPath, summarize, summaryText } from "./_report.ts";
import { ENABLED } from "./_env.ts";

/** Kinds a snapshot run creates, cluster-wide list paths. */
const KINDS = [
  ["Job", "/apis/batch/v1/jobs"],
  ["Pod", "/api/v1/pods"],
  ["ServiceAccount", "/api/v1/serviceaccounts"],
  ["Role", "/apis/rbac.authorization.k8s.io/v1/roles"],
  ["RoleBinding", "/apis/rbac.authorization.k8s.io/v1/rolebindings"],
  ["ClusterRole", "/apis/rbac.authorization.k8s.io/v1/clusterroles"],
  ["ClusterRoleBinding", "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings"],
] as const;

/** Everything of any snapshot run still in the shared cluster, or undefined without one. */
async function sweepCluster(): Promise<string[] | undefined> {
  const dir = process.env.AICR_CLUSTER_DIR;
  // Only a shared cluster (with its kubelet) saw the other files' runs.
  if (!dir || !existsSync(join(dir, "kubelet.json"))) return undefined;
  const cluster = await loadCluster(dir);
  if (!cluster) return undefined;
  const api = createApi(cluster.server, {
    ca: readFileSync(cluster.caFile, "utf8"),
    cert: readFileSync(cluster.adminCert.cert, "utf8"),
    key: readFileSync(cluster.adminCert.key, "utf8"),
  });
  try {
    const selector = encodeURIComponent(
      "app.kubernetes.io/managed-by=aicr,app.kubernetes.io/component=snapshot-agent",
    );
    const found: string[] = [];
    for (const [kind, path] of KINDS) {
      const res = await api.request("GET", `${path}?labelSelector=${selector}`);
      for (const o of (res.body.items ?? []) as Obj[]) {
        found.push(
          `${kind}/${o.metadata.namespace ? `${o.metadata.namespace}/` : ""}${o.metadata.name}`,
        );
      }
    }
    const cms = await api.request("GET", "/api/v1/configmaps");
    for (const o of (cms.body.items ?? []) as Obj[]) {
      if (String(o.metadata.name).startsWith("aicr-agent-snapshot-")) {
        found.push(`ConfigMap/${o.metadata.namespace}/${o.metadata.name}`);
      }
    }
    return found;
  } finally {
    api.close();
  }
}

Deno.test({
  name: "reliability: a label sweep of the cluster, and the summary of the figures",
  // Only after the suite ran (a cluster is named); unit runs have no figures to hold.
  ignore: !ENABLED,
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    const swept = await sweepCluster();
    if (swept) record("suite: label sweep of the cluster at the end", { leftovers: swept.length });
    const path = reportPath();
    // deno-lint-ignore no-console
    console.log(
      summaryText(path) +
        (swept ? "" : "\n  (no shared cluster to sweep: each file used its own)"),
    );
    const text = existsSync(path) ? readFileSync(path, "utf8") : "";
    const totals = summarize(text);
    // The sweep above is this file's own line: a summary needs the other files' cases.
    const cases = summarize(
      text.split("\n").filter((line) => !line.startsWith('{"key":"suite: ')).join("\n"),
    ).cases;
    assert.ok(
      cases > 0,
      `nothing to summarise: no reliability case recorded in ${path} (the suite's files run first)`,
    );
    assert.deepEqual(swept ?? [], [], "a label sweep of the cluster finds nothing");
    assert.equal(totals.leftovers, 0, "objects left behind");
    assert.equal(totals.overGrants, 0, "over-grants found");
    assert.equal(totals.faultsSurvived, totals.faultsInjected, "every injected fault survived");
    assert.equal(
      totals.identityAttacksRefused,
      totals.identityAttacks,
      "every attempt to speak for another node was refused",
    );
  },
});
