import assert from "node:assert/strict";
import { KubeApiError } from "../kube/mod.ts";
import type { KindName, KubeClient, KubeObject } from "../kube/mod.ts";
import { createLogger } from "../log.ts";
import { exitCodeOf } from "../errors.ts";
import {
  formatAge,
  formatLeftoverRuns,
  LEFTOVER_SELECTOR,
  listLeftoverRuns,
  runLeftoverListing,
} from "./leftovers.ts";

const NOW = new Date("2026-12-05T19:00:00Z");
const RUN_A = "20261205-183000-00000000000000aa";
const RUN_B = "20261205-185500-00000000000000bb";

function runLabels(runId: string): Record<string, string> {
  return {
    "app.kubernetes.io/name": "aicr",
    "app.kubernetes.io/managed-by": "aicr",
    "aicr.run/run-id": runId,
  };
}

interface Stored {
  kind: KindName;
  object: KubeObject;
}

function obj(kind: KindName, name: string, options: {
  namespace?: string;
  labels?: Record<string, string>;
  created?: string;
  subjects?: { kind: string; name: string; namespace: string }[];
}): Stored {
  return {
    kind,
    object: {
      metadata: {
        name,
        ...(options.namespace ? { namespace: options.namespace } : {}),
        ...(options.labels ? { labels: options.labels } : {}),
        ...(options.created ? { creationTimestamp: options.created } : {}),
      },
      ...(options.subjects ? { subjects: options.subjects } : {}),
    } as KubeObject,
  };
}

/** The API server's answer to a label-selected list: existence and equality terms, a namespace or all. */
function fakeLister(stored: Stored[], options: { forbidAllNamespaces?: boolean } = {}) {
  const calls: { kind: KindName; namespace: string | undefined }[] = [];
  const listAll = <T extends KubeObject>(
    kind: KindName,
    namespace: string | undefined,
    list?: { labelSelector?: string },
  ): Promise<T[]> => {
    calls.push({ kind, namespace });
    assert.equal(list?.labelSelector, LEFTOVER_SELECTOR);
    if (namespace === undefined && options.forbidAllNamespaces) {
      return Promise.reject(new KubeApiError("Cannot list: 403 Forbidden", 403, "Forbidden"));
    }
    const terms = (list?.labelSelector ?? "").split(",");
    return Promise.resolve(
      stored.filter((s) =>
        s.kind === kind &&
        (namespace === undefined || s.object.metadata?.namespace === namespace ||
          s.object.metadata?.namespace === undefined) &&
        terms.every((term) => {
          const [key = "", value] = term.split("=");
          const label = s.object.metadata?.labels?.[key];
          return value === undefined ? label !== undefined : label === value;
        })
      ).map((s) => structuredClone(s.object) as T),
    );
  };
  return { listAll, calls };
}

/** A killed run in `snap-a` (everything left), one in `snap-b` (only its cluster-scoped RBAC). */
function cluster(): Stored[] {
  const a = { namespace: "snap-a", labels: runLabels(RUN_A), created: "2026-12-05T18:30:00Z" };
  return [
    obj("Job", "aicr-" + RUN_A, a),
    obj("Pod", "aicr-" + RUN_A + "-x7", { ...a, created: "2026-12-05T18:30:02Z" }),
    obj("ConfigMap", "aicr-staging", a),
    obj("ConfigMap", "aicr-snapshot-out", a),
    obj("ServiceAccount", "aicr-" + RUN_A, a),
    obj("ClusterRole", "aicr-node-reader-" + RUN_A, {
      labels: runLabels(RUN_A),
      created: "2026-12-05T18:30:00Z",
    }),
    obj("ClusterRoleBinding", "aicr-node-reader-" + RUN_B, {
      labels: runLabels(RUN_B),
      created: "2026-12-05T18:55:00Z",
      subjects: [{ kind: "ServiceAccount", name: "aicr-" + RUN_B, namespace: "snap-b" }],
    }),
    // Not a run's: a DaemonSet install's ServiceAccount, and a lookalike without managed-by.
    obj("ServiceAccount", "aicr-daemon", {
      namespace: "aicr-system",
      labels: { "app.kubernetes.io/name": "aicr", "app.kubernetes.io/managed-by": "aicr" },
    }),
    obj("ConfigMap", "lookalike", {
      namespace: "snap-a",
      labels: { "aicr.run/run-id": RUN_A, "app.kubernetes.io/name": "aicr" },
    }),
  ];
}

Deno.test("listLeftoverRuns() groups every namespace's labelled objects by run, oldest first", async () => {
  const { listAll, calls } = fakeLister(cluster());
  const runs = await listLeftoverRuns({ listAll });
  assert.deepEqual(runs.map((r) => [r.runId, r.namespace, r.createdAt?.toISOString()]), [
    [RUN_A, "snap-a", "2026-12-05T18:30:00.000Z"],
    [RUN_B, "snap-b", "2026-12-05T18:55:00.000Z"],
  ]);
  assert.deepEqual(runs[0]?.objects.map((o) => o.kind), [
    "Job",
    "Pod",
    "ConfigMap",
    "ConfigMap",
    "ClusterRole",
    "ServiceAccount",
  ]);
  assert.ok(calls.every((c) => c.namespace === undefined), "every namespace");
  // One namespace: the other namespace's run is left out, its cluster-scoped objects too.
  const one = await listLeftoverRuns(fakeLister(cluster()), { namespace: "snap-a" });
  assert.deepEqual(one.map((r) => r.runId), [RUN_A]);
});

Deno.test("formatLeftoverRuns() prints run ID, namespace, age and what is left, then each command", () => {
  const text = formatLeftoverRuns([
    {
      runId: RUN_A,
      namespace: "snap-a",
      createdAt: new Date("2026-12-05T18:30:00Z"),
      objects: [
        { kind: "Job", name: "j", namespace: "snap-a" },
        { kind: "ConfigMap", name: "a", namespace: "snap-a" },
        { kind: "ConfigMap", name: "b", namespace: "snap-a" },
        { kind: "ClusterRole", name: "c" },
      ],
    },
    { runId: RUN_B, namespace: "", objects: [{ kind: "ClusterRoleBinding", name: "d" }] },
  ], { now: NOW, cleanCommand: (run) => `aicr cleanup --run-id ${run.runId}` });
  assert.equal(
    text,
    [
      "RUN ID                            NAMESPACE  AGE  LEFT",
      `${RUN_A}  snap-a     30m  Job, ConfigMap (2), ClusterRole`,
      `${RUN_B}  -          -    ClusterRoleBinding`,
      "",
      "Clean each with:",
      `  aicr cleanup --run-id ${RUN_A}`,
      `  aicr cleanup --run-id ${RUN_B}`,
      "",
    ].join("\n"),
  );
  assert.deepEqual([59_999, 150_000, 3 * 3_600_000, 50 * 3_600_000, -5].map(formatAge), [
    "59s",
    "2m",
    "3h",
    "2d",
    "0s",
  ]);
});

function listingDeps(listAll: KubeClient["listAll"]) {
  const out: string[] = [];
  const err: string[] = [];
  const logs: string[] = [];
  const deps = {
    connect: () => ({ listAll }) as unknown as KubeClient,
    log: createLogger({ write: (t) => void logs.push(t) }),
    stdout: { write: (t: string) => void out.push(t) },
    stderr: { write: (t: string) => void err.push(t) },
    now: () => NOW,
    signal: new AbortController().signal,
  };
  return { deps, out, err, logs };
}

Deno.test("runLeftoverListing() lists and exits 1 when runs left objects, 0 with none, deletes nothing", async () => {
  const { deps, out } = listingDeps(fakeLister(cluster()).listAll);
  const error = await runLeftoverListing(deps, {
    fallbackNamespace: "default",
    cleanCommand: (run) => `aicr cleanup -n ${run.namespace} --run-id ${run.runId}`,
    reports: {},
  }).catch((e) => e);
  assert.equal(exitCodeOf(error), 1);
  assert.match(String(error.message), /2 run\(s\) left objects behind: nothing was deleted/);
  assert.match(out.join(""), new RegExp(`aicr cleanup -n snap-b --run-id ${RUN_B}\n$`));

  const empty = listingDeps(fakeLister([]).listAll);
  await runLeftoverListing(empty.deps, {
    fallbackNamespace: "default",
    cleanCommand: String,
    reports: {},
  });
  assert.equal(empty.out.join(""), "");
  assert.match(empty.logs.join(""), /no run left objects behind/);
});

Deno.test("runLeftoverListing() falls back to the named namespace when every namespace is forbidden", async () => {
  const lister = fakeLister(cluster(), { forbidAllNamespaces: true });
  const { deps, out, logs } = listingDeps(lister.listAll);
  const error = await runLeftoverListing(deps, {
    fallbackNamespace: "snap-a",
    cleanCommand: (run) => `aicr cleanup --run-id ${run.runId}`,
    reports: {},
  }).catch((e) => e);
  assert.equal(exitCodeOf(error), 1);
  assert.match(logs.join(""), /cannot list every namespace, listing one namespace=snap-a/);
  assert.ok(out.join("").includes(RUN_A));
  assert.ok(!out.join("").includes(RUN_B));
});

Deno.test("runLeftoverListing() --report -: the JSON report alone on stdout, the table on stderr", async () => {
  const { deps, out, err } = listingDeps(fakeLister(cluster()).listAll);
  const error = await runLeftoverListing(deps, {
    fallbackNamespace: "default",
    cleanCommand: (run) => `aicr cleanup --run-id ${run.runId}`,
    reports: { json: "-" },
  }).catch((e) => e);
  assert.equal(exitCodeOf(error), 1);
  const report = JSON.parse(out.join(""));
  assert.equal(report.kind, "CleanupReport");
  assert.deepEqual(
    [...new Set(report.objects.map((o: { detail: string }) => o.detail))],
    [`run ${RUN_A}`, `run ${RUN_B}`],
  );
  assert.ok(report.objects.every((o: { status: string }) => o.status === "found"));
  assert.match(err.join(""), /^RUN ID +NAMESPACE +AGE +LEFT\n/);
});
