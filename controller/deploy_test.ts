import assert from "node:assert/strict";
import {
  exitCodeOf,
  InterruptedError,
  PermissionError,
  UntrustedSnapshotError,
  UsageError,
} from "../errors.ts";
import { KubeApiError, Ledger } from "../kube/mod.ts";
import type { AccessAttributes, KindName, KubeObject, NewObject } from "../kube/mod.ts";
import type { WatchEvent, WatchOptions } from "../kube/client.ts";
import { createLogger } from "../log.ts";
import {
  AGENT_REPORT_NONCE_ENV,
  digestText,
  formatAgentReport,
  formatAgentReportLine,
  snapshotConfigMapLabels,
  stagingConfigMapName,
} from "../manifests/mod.ts";
import type { AgentReport } from "../manifests/mod.ts";
import { buildInfo } from "../version.ts";
import { encodeSnapshot, formatConfigMapUri, parseSnapshot } from "../snapshot/mod.ts";
import { createFakeKube } from "../tests/fakes/kube.ts";
import { sampleSnapshot } from "../tests/fakes/snapshot.ts";
import { cleanupRun, deploySnapshot, FOREIGN_STAGING_WARNING } from "./deploy.ts";
import { AgentIdentityError } from "./agent_identity.ts";
import type { DeployOptions } from "./deploy.ts";

const NS = "gpu-operator";
const RUN = "20260102-150405-0123456789abcdef";
/**
 * The run's creates in steps: the ServiceAccount and both roles at once, then both bindings (each
 * after its role), then the staging ConfigMap, then the Job. Within a step the order of the calls is
 * the order of the list.
 */
const CREATE_STEPS: KindName[][] = [
  ["ServiceAccount", "Role", "ClusterRole"],
  ["RoleBinding", "ClusterRoleBinding"],
  ["ConfigMap"],
  ["Job"],
];
const RBAC_ORDER: KindName[] = CREATE_STEPS.slice(0, 2).flat();

/** What the fake agent does once its Job is created. */
type Agent = "succeeds" | "exits-3" | "nothing" | "deadline" | "interrupted";

interface SceneOptions {
  agent?: Agent;
  /** The caller may not do this verb on this resource (the gate's SelfSubjectAccessReviews). */
  denied?: { verb: string; resource: string };
  /** Creates of this kind are refused with 403 (a definite answer: nothing was created). */
  refuseCreate?: KindName;
  /** Creates of this kind land, but their response is lost. */
  loseCreate?: KindName;
  /** Once the Job exists, another party replaces this object (same name, another UID). */
  replaceOnJob?: KindName;
  /** Aborted once the Job exists (agent "interrupted"), as SIGINT would. */
  interrupt?: AbortController;
  /** Aborts this controller when the pre-flight namespace read starts, as SIGINT would. */
  interruptPreflight?: AbortController;
  /** The document the agent writes instead of this build's snapshot (another program's). */
  agentDocument?: string;
  /**
   * The agent container's termination message: by default this build's report of the document it
   * wrote (none with `agentDocument`: another program reports nothing); `false` for none.
   */
  report?: string | false;
  /** The node the agent's pod runs on. @default "gpu-1" */
  podNode?: string;
  /**
   * `log`: the agent says its report in its log (the line with the run's nonce) while its pod
   * still runs, and no termination message is there yet.
   */
  reportVia?: "log";
}

function agentOutput(job: KubeObject): { namespace: string; name: string } {
  const spec = job.spec as { template: { spec: { containers: { args: string[] }[] } } };
  const args = spec.template.spec.containers[0]?.args ?? [];
  const uri = args[args.indexOf("-o") + 1] ?? "";
  const [namespace = "", name = ""] = uri.replace("cm://", "").split("/");
  return { namespace, name };
}

function envOf(job: KubeObject, name: string): string | undefined {
  const spec = job.spec as {
    template: { spec: { containers: { env?: { name: string; value?: string }[] }[] } };
  };
  return spec.template.spec.containers[0]?.env?.find((e) => e.name === name)?.value;
}

function parsed(report: string): AgentReport {
  return JSON.parse(report) as AgentReport;
}

function stagingUid(job: KubeObject): string | undefined {
  const spec = job.spec as {
    template: { spec: { containers: { env?: { name: string; value?: string }[] }[] } };
  };
  return spec.template.spec.containers[0]?.env?.find((e) => e.name === "AICR_CONFIGMAP_UID")
    ?.value;
}

function templateLabels(job: KubeObject): Record<string, string> {
  const spec = job.spec as { template?: { metadata?: { labels?: Record<string, string> } } };
  return spec.template?.metadata?.labels ?? {};
}

/** A fake cluster with the namespace, an allowing authorizer and a fake agent. */
function scene(options: SceneOptions = {}) {
  const fake = createFakeKube();
  fake.put("Namespace", { metadata: { name: NS } });
  const reviews: AccessAttributes[] = [];
  const deletes: { kind: KindName; name: string; uid: string; grace?: number }[] = [];
  const allowed = (a: AccessAttributes) =>
    !(options.denied && a.verb === options.denied.verb && a.resource === options.denied.resource);
  fake.client.selfAccessReview = (attributes) => {
    reviews.push(attributes);
    return Promise.resolve({ allowed: allowed(attributes) });
  };
  fake.client.subjectAccessReview = () => Promise.resolve({ allowed: true });
  fake.client.podLog = () => Promise.resolve("agent: no GPU found\n");
  if (options.loseCreate) fake.loseNextCreateResponse(options.loseCreate);
  const get = fake.client.get.bind(fake.client);
  fake.client.get = ((kind, namespace, name, callOptions) => {
    if (kind === "Namespace" && options.interruptPreflight) {
      // A real client's read rejects with the signal's reason when the signal aborts it.
      options.interruptPreflight.abort(new Error("received SIGINT"));
      return Promise.reject(callOptions?.signal?.reason ?? new Error("not aborted"));
    }
    return get(kind, namespace, name, callOptions);
  }) as typeof fake.client.get;
  const create = fake.client.create.bind(fake.client);
  fake.client.create = async (kind, object, callOptions) => {
    if (kind === options.refuseCreate) {
      fake.calls.push({ method: "create", kind, name: object.metadata?.name ?? "" });
      throw new KubeApiError(`Cannot create ${kind}: forbidden by a quota`, 403, "Forbidden");
    }
    try {
      return await create(kind, object, callOptions);
    } finally {
      if (kind === "Job") onJob(object);
    }
  };
  const deleteIfUid = fake.client.deleteIfUid.bind(fake.client);
  fake.client.deleteIfUid = (kind, namespace, name, uid, callOptions) => {
    const grace = callOptions?.gracePeriodSeconds;
    deletes.push({ kind, name, uid, ...(grace !== undefined ? { grace } : {}) });
    return deleteIfUid(kind, namespace, name, uid, callOptions);
  };

  function onJob(object: NewObject): void {
    const name = object.metadata?.name ?? "";
    const job = fake.objects.get(`Job/${NS}/${name}`);
    if (!job) return;
    if (options.replaceOnJob) {
      const [key, found] = [...fake.objects.entries()].find(([k]) =>
        k.startsWith(`${options.replaceOnJob}/`)
      ) ?? [];
      if (key && found) {
        fake.objects.set(key, { ...found, metadata: { ...found.metadata, uid: "someone-else" } });
      }
    }
    const agent = options.agent ?? "succeeds";
    if (agent === "nothing") return;
    if (agent === "interrupted") {
      // SIGINT arrives while the run waits for its agent.
      options.interrupt?.abort(new Error("received SIGINT"));
      return;
    }
    if (agent === "deadline") {
      // The Job controller ends the Job at activeDeadlineSeconds; its pod is already gone.
      job.status = {
        conditions: [{
          type: "Failed",
          status: "True",
          reason: "DeadlineExceeded",
          message: "Job was active longer than specified deadline",
        }],
      };
      return;
    }
    // What the agent writes, and (as this build's agent does) reports through its termination
    // message, which the kubelet puts in the pod's status.
    const document = options.agentDocument ??
      encodeSnapshot(sampleSnapshot({ nodeName: "gpu-1" }), "yaml");
    const report = options.report ?? (options.agentDocument === undefined
      ? formatAgentReport({
        ...digestText(document),
        version: buildInfo().version,
        commit: buildInfo().commit,
      })
      : false);
    fake.put(
      "Pod",
      {
        metadata: {
          name: `${name}-abcde`,
          namespace: NS,
          // The pod carries the Job template's labels, as the Job controller copies them.
          labels: templateLabels(job),
          ownerReferences: [{
            apiVersion: "batch/v1",
            kind: "Job",
            name,
            uid: job.metadata?.uid ?? "",
            controller: true,
          }],
        },
        spec: { nodeName: options.podNode ?? "gpu-1" },
        status: agent === "succeeds" && options.reportVia === "log"
          ? { phase: "Running", containerStatuses: [{ name: "aicr", state: { running: {} } }] }
          : agent === "succeeds"
          ? {
            phase: "Succeeded",
            containerStatuses: [{
              name: "aicr",
              state: {
                terminated: { exitCode: 0, ...(report === false ? {} : { message: report }) },
              },
            }],
          }
          : {
            phase: "Failed",
            containerStatuses: [{ name: "aicr", state: { terminated: { exitCode: 3 } } }],
          },
      } as unknown as NewObject & { metadata: { name: string } },
    );
    if (agent === "succeeds" && options.reportVia === "log" && report !== false) {
      const line = formatAgentReportLine(envOf(job, AGENT_REPORT_NONCE_ENV) ?? "", parsed(report));
      fake.client.followPodLog = () =>
        Promise.resolve({
          close() {},
          async *[Symbol.asyncIterator]() {
            yield "collected collector=gpu";
            yield line;
            // The container has not exited yet: the stream stays open until closed.
            await new Promise(() => {});
          },
        });
    }
    if (agent === "succeeds") {
      // The agent writes where its Job's `-o` says, as the real one does: into the staging
      // ConfigMap of the UID its Job names (never creating one), or by apply to a cm:// output.
      const target = agentOutput(job);
      const pinned = stagingUid(job);
      if (pinned !== undefined) {
        const key = `ConfigMap/${target.namespace}/${target.name}`;
        const existing = fake.objects.get(key);
        if (existing?.metadata?.uid !== pinned) return;
        fake.objects.set(key, {
          ...existing,
          data: { "snapshot.yaml": document, format: "yaml" },
        } as KubeObject);
        return;
      }
      fake.put(
        "ConfigMap",
        {
          metadata: {
            name: target.name,
            namespace: target.namespace,
            labels: snapshotConfigMapLabels("1.0.0"),
          },
          data: { "snapshot.yaml": document, format: "yaml" },
        } as unknown as NewObject & { metadata: { name: string } },
      );
    }
  }

  const lines: string[] = [];
  const deps = {
    kube: fake.client,
    log: createLogger({ write: (t) => void lines.push(t) }),
    stderr: { write: (t: string) => void lines.push(`stderr: ${t}`) },
    now: () => new Date("2026-01-02T15:04:05Z"),
    randomHex: () => "0123456789abcdef",
  };
  /** What is left of the run: every object but the namespace. */
  const left = () => [...fake.objects.keys()].filter((k) => !k.startsWith("Namespace/")).sort();
  const created = () => fake.calls.filter((c) => c.method === "create").map((c) => c.kind);
  return { fake, deps, reviews, deletes, lines, left, created };
}

/** A delivery of the YAML document to stdout, as `aicr snapshot` without `-o` makes it. */
const TO_STDOUT: NonNullable<DeployOptions["delivery"]> = {
  target: { kind: "stdout" },
  format: "yaml",
  table: false,
  projections: [],
};

function options(overrides: Partial<DeployOptions> = {}): DeployOptions {
  return {
    namespace: NS,
    job: {
      image: "ghcr.io/nvidia/aicr:v1.0.0",
      nodeSelector: { "kubernetes.io/hostname": "gpu-1" },
    },
    serviceAccountPrefix: "aicr",
    discoverNetwork: false,
    timeoutMs: 10_000,
    noCleanup: false,
    autoTarget: false,
    runId: RUN,
    ...overrides,
  };
}

Deno.test("deploySnapshot() creates RBAC then the Job, reads the snapshot, and cleans up by UID", async () => {
  const s = scene();
  const result = await deploySnapshot(s.deps, options());
  assert.equal(result.runId, RUN);
  assert.equal(result.nodeName, "gpu-1");
  assert.equal(result.snapshot.metadata["source-node"], "gpu-1");
  assert.equal(formatConfigMapUri(result.configMap), `cm://${NS}/${stagingConfigMapName(RUN)}`);
  // The staging ConfigMap is aicr's own create, before the Job; the agent only updates it.
  assert.deepEqual(s.created(), [...RBAC_ORDER, "ConfigMap", "Job"]);
  // Every delete names the UID its create returned; the Job goes first.
  assert.equal(s.deletes[0]?.kind, "Job");
  for (const d of s.deletes) {
    assert.match(d.uid, /^uid-\d+$/, `${d.kind}/${d.name} deleted without its UID`);
  }
  assert.deepEqual(s.left(), [], "the run, its pod and its staging ConfigMap are gone");
});

Deno.test("deploySnapshot() asks the gate before any create, and a denial creates nothing", async () => {
  const s = scene({ denied: { verb: "create", resource: "jobs" } });
  const error = await deploySnapshot(s.deps, options()).catch((e) => e);
  assert.ok(error instanceof PermissionError, String(error));
  assert.equal(exitCodeOf(error), 4);
  assert.ok(s.reviews.some((r) => r.verb === "create" && r.resource === "jobs"));
  assert.deepEqual(s.created(), []);
  assert.deepEqual(s.left(), []);
});

for (const failAt of CREATE_STEPS.flat()) {
  Deno.test(`deploySnapshot() cleans up what it made when the ${failAt} create fails`, async () => {
    const s = scene({ refuseCreate: failAt });
    const error = await deploySnapshot(s.deps, options()).catch((e) => e);
    assert.ok(error instanceof KubeApiError, String(error));
    assert.match(error.message, new RegExp(`Cannot create ${failAt}`));
    // The failing step's creates all settle; nothing of a later step is created.
    const step = CREATE_STEPS.findIndex((kinds) => kinds.includes(failAt));
    const attempted = CREATE_STEPS.slice(0, step + 1).flat();
    assert.deepEqual(s.created(), attempted, "nothing is created after the failing step");
    const made = attempted.filter((kind) => kind !== failAt);
    assert.deepEqual(s.deletes.map((d) => d.kind).sort(), [...made].sort());
    assert.deepEqual(s.left(), []);
  });
}

Deno.test("deploySnapshot() cleans up after the agent fails, and says how it exited", async () => {
  const s = scene({ agent: "exits-3" });
  const error = await deploySnapshot(s.deps, options()).catch((e) => e);
  assert.equal(exitCodeOf(error), 8);
  assert.match(String(error.message), /the agent exited with code 3/);
  assert.ok(error.details.some((d: string) => d.includes("agent: no GPU found")), "log tail");
  assert.deepEqual(s.left(), []);
});

Deno.test("deploySnapshot() cleans up after the wait's deadline passes", async () => {
  const s = scene({ agent: "nothing" });
  const error = await deploySnapshot(s.deps, options({ timeoutMs: 50 })).catch((e) => e);
  assert.equal(exitCodeOf(error), 5, String(error));
  assert.match(String(error.message), /did not finish within/);
  assert.deepEqual(s.left(), []);
});

for (const lost of ["RoleBinding", "Job"] as KindName[]) {
  Deno.test(`deploySnapshot() adopts a ${lost} whose create response was lost, and deletes it by UID`, async () => {
    const s = scene({ loseCreate: lost });
    const result = await deploySnapshot(s.deps, options());
    assert.equal(result.nodeName, "gpu-1");
    const deleted = s.deletes.find((d) => d.kind === lost);
    assert.ok(deleted, `${lost} was not deleted`);
    assert.match(deleted.uid, /^uid-\d+$/);
    assert.deepEqual(s.left(), []);
  });
}

Deno.test("deploySnapshot() never deletes an object that replaced one of its own (UID precondition)", async () => {
  const s = scene({ replaceOnJob: "Role" });
  await deploySnapshot(s.deps, options());
  const role = [...s.fake.objects.entries()].find(([k]) => k.startsWith("Role/"));
  assert.ok(role, "the replacement Role is still there");
  assert.equal(role[1].metadata?.uid, "someone-else");
  assert.deepEqual(s.left().filter((k) => !k.startsWith("Role/")), []);
});

Deno.test("deploySnapshot() ends a SIGINT during the pre-flight as an interrupt (130), creating nothing", async () => {
  const signal = new AbortController();
  const s = scene({ interruptPreflight: signal });
  const error = await deploySnapshot(s.deps, options({ signal: signal.signal })).catch((e) => e);
  assert.ok(error instanceof InterruptedError, String(error));
  assert.equal(exitCodeOf(error), 130);
  assert.deepEqual(s.created(), []);
});

Deno.test("deploySnapshot() with a user cm:// leaves that ConfigMap alone and writes no staging one", async () => {
  const s = scene();
  const result = await deploySnapshot(
    s.deps,
    options({ output: { namespace: NS, name: "aicr-snapshot" } }),
  );
  assert.equal(formatConfigMapUri(result.configMap), `cm://${NS}/aicr-snapshot`);
  const job = s.fake.calls.find((c) => c.kind === "Job");
  assert.ok(job);
  assert.ok(s.fake.objects.has(`ConfigMap/${NS}/aicr-snapshot`), "the user's ConfigMap stays");
  // Only the user's ConfigMap remains (the fake agent's staging copy is swept as aicr's).
  assert.deepEqual(s.left(), [`ConfigMap/${NS}/aicr-snapshot`]);
});

Deno.test("deploySnapshot() with noCleanup leaves every object and says so", async () => {
  const s = scene();
  await deploySnapshot(s.deps, options({ noCleanup: true }));
  assert.deepEqual(s.deletes, []);
  assert.ok(s.left().some((k) => k.startsWith("Job/")));
  assert.ok(s.lines.some((l) => l.includes("leaving the run's objects")));
  const kinds = new Set(s.left().map((k) => k.split("/")[0]));
  for (const kind of [...RBAC_ORDER, "ConfigMap", "Job", "Pod"]) assert.ok(kinds.has(kind), kind);
});

Deno.test("deploySnapshot() with a pinned run ID never writes into, adopts or deletes a ConfigMap it did not create", async () => {
  const s = scene();
  s.fake.put(
    "ConfigMap",
    {
      metadata: { name: stagingConfigMapName(RUN), namespace: NS, labels: { team: "a" } },
      data: { precious: "data" },
    } as unknown as NewObject & { metadata: { name: string } },
  );
  const before = s.fake.objects.get(`ConfigMap/${NS}/${stagingConfigMapName(RUN)}`);
  const error = await deploySnapshot(s.deps, options()).catch((e) => e);
  assert.equal(exitCodeOf(error), 2, String(error));
  assert.match(error.message, /a ConfigMap this invocation did not create already has that name/);
  assert.ok(s.lines.some((l) => l.startsWith(`WARN ${FOREIGN_STAGING_WARNING}`)), s.lines.join(""));
  assert.ok(!s.created().includes("Job"), "no Job was created");
  assert.deepEqual(
    s.fake.objects.get(`ConfigMap/${NS}/${stagingConfigMapName(RUN)}`),
    before,
    "untouched",
  );
  assert.ok(!s.deletes.some((d) => d.kind === "ConfigMap"), "never deleted");
  assert.deepEqual(s.left(), [`ConfigMap/${NS}/${stagingConfigMapName(RUN)}`]);
});

Deno.test("deploySnapshot() explains a Job ended at its activeDeadlineSeconds, and cleans up", async () => {
  const s = scene({ agent: "deadline" });
  const error = await deploySnapshot(s.deps, options()).catch((e) => e);
  assert.equal(exitCodeOf(error), 8, String(error));
  assert.match(String(error.message), /the agent Job passed its activeDeadlineSeconds/);
  assert.deepEqual(s.left(), []);
});

Deno.test("deploySnapshot() cleans up after a SIGINT during the wait and ends as exit 130", async () => {
  const interrupt = new AbortController();
  const s = scene({ agent: "interrupted", interrupt });
  const error = await deploySnapshot(s.deps, options({ signal: interrupt.signal })).catch((e) => e);
  assert.ok(error instanceof InterruptedError, String(error));
  assert.equal(exitCodeOf(error), 130);
  assert.deepEqual(s.created(), [...RBAC_ORDER, "ConfigMap", "Job"]);
  assert.deepEqual(s.left(), [], "everything the run made is gone");
});

Deno.test("deploySnapshot() interrupted before any pod: a pod the Job controller creates as the Job is deleted is found and deleted by UID", async () => {
  const interrupt = new AbortController();
  const s = scene({ agent: "interrupted", interrupt });
  // The Job controller decided on a pod before the Job's delete reached it: the pod lands
  // just after cleanup's first look found none.
  const list = s.fake.client.list.bind(s.fake.client);
  let late: string | undefined;
  s.fake.client.list = (async (kind, namespace, callOptions) => {
    const found = await list(kind, namespace, callOptions);
    const job = s.deletes.find((d) => d.kind === "Job");
    if (kind === "Pod" && job && late === undefined) {
      late = `${job.name}-late1`;
      s.fake.put(
        "Pod",
        {
          metadata: {
            name: late,
            namespace: NS,
            labels: { "app.kubernetes.io/name": "aicr", "aicr.run/run-id": RUN },
            ownerReferences: [{
              apiVersion: "batch/v1",
              kind: "Job",
              name: job.name,
              uid: job.uid,
            }],
          },
        } as unknown as NewObject & { metadata: { name: string } },
      );
    }
    return found;
  }) as typeof s.fake.client.list;
  const error = await deploySnapshot(s.deps, options({ signal: interrupt.signal })).catch((e) => e);
  assert.ok(error instanceof InterruptedError, String(error));
  assert.ok(late, "the late pod was made");
  assert.ok(s.deletes.some((d) => d.kind === "Pod" && d.name === late), "deleted by its UID");
  assert.deepEqual(s.left(), [], "everything the run made is gone");
});

Deno.test("deploySnapshot() whose pod the garbage collector took before cleanup's first look does not look again (no settle wait)", async () => {
  const s = scene();
  // As the garbage collector does, faster than cleanup: the Job's delete takes its pod with it.
  const deleteIfUid = s.fake.client.deleteIfUid.bind(s.fake.client);
  s.fake.client.deleteIfUid = async (kind, namespace, name, uid, callOptions) => {
    const result = await deleteIfUid(kind, namespace, name, uid, callOptions);
    if (kind === "Job") {
      for (const key of [...s.fake.objects.keys()]) {
        if (key.startsWith(`Pod/${NS}/`)) s.fake.objects.delete(key);
      }
    }
    return result;
  };
  const list = s.fake.client.list.bind(s.fake.client);
  let podListsAfterJobDelete = 0;
  s.fake.client.list = ((kind, namespace, callOptions) => {
    if (kind === "Pod" && s.deletes.some((d) => d.kind === "Job")) podListsAfterJobDelete++;
    return list(kind, namespace, callOptions);
  }) as typeof s.fake.client.list;
  const result = await deploySnapshot(s.deps, options());
  assert.equal(result.nodeName, "gpu-1");
  // The run saw its pod while waiting: one look finds it gone, and cleanup is done. The settle
  // guard (looking again after a pause) is for runs that never saw their pod.
  assert.equal(podListsAfterJobDelete, 1, "cleanup looked for the pod once");
  assert.deepEqual(s.left(), []);
});

Deno.test("deploySnapshot() takes the agent's report from its log while its pod runs, and deletes the pod at once", async () => {
  const s = scene({ reportVia: "log" });
  // The pod never ends here: only the log's report can prove the snapshot.
  const result = await deploySnapshot(s.deps, options());
  assert.equal(result.snapshot.metadata["source-node"], "gpu-1");
  assert.doesNotMatch(s.lines.join(""), /aicr-agent-report/);
  const pod = s.deletes.find((d) => d.kind === "Pod");
  assert.equal(pod?.grace, 0, "the done agent's pod is not left to the kubelet's teardown");
  assert.deepEqual(s.left(), []);
});

Deno.test("deploySnapshot() refuses a snapshot replaced after the agent's log report (exit 10)", async () => {
  const s = scene({
    reportVia: "log",
    report: formatAgentReport({
      ...digestText("kind: Snapshot\nsomething: else\n"),
      version: buildInfo().version,
      commit: buildInfo().commit,
    }),
  });
  const error = await deploySnapshot(s.deps, options()).catch((e: unknown) => e);
  assert.ok(error instanceof UntrustedSnapshotError, String(error));
  assert.equal(exitCodeOf(error), 10);
  assert.deepEqual(s.left(), []);
});

Deno.test("deploySnapshot() delivers the snapshot before cleanup starts and returns once cleanup is done", async () => {
  const s = scene();
  let deletesAtDelivery: number | undefined;
  let delivered = "";
  const stdout = {
    write: (text: string) => {
      deletesAtDelivery = s.deletes.length;
      delivered += text;
    },
  };
  const result = await deploySnapshot({ ...s.deps, stdout }, options({ delivery: TO_STDOUT }));
  assert.equal(parseSnapshot(delivered).metadata["source-node"], "gpu-1");
  assert.equal(deletesAtDelivery, 0, "nothing was deleted before delivery");
  assert.ok(result.cleaned > 0, "the returned result counts what cleanup removed");
  assert.deepEqual(s.left(), [], "cleanup finished before deploySnapshot returned");
});

Deno.test("deploySnapshot() cleans up when delivery fails, and the failure is the run's error", async () => {
  const s = scene();
  const error = await deploySnapshot(
    s.deps,
    options({
      delivery: {
        ...TO_STDOUT,
        // A place that takes no file: the write fails as the run's error.
        target: { kind: "file", path: "/proc/aicr-denied/out.yaml" },
      },
    }),
  ).catch((e) => e);
  assert.ok(error instanceof UsageError, String(error));
  assert.deepEqual(s.left(), []);
});

Deno.test("deploySnapshot() reports a missing namespace before the gate's denial, though the gate ran beside the reads", async () => {
  const s = scene({ denied: { verb: "create", resource: "jobs" } });
  s.fake.objects.delete(`Namespace//${NS}`);
  s.fake.objects.delete(`Namespace/${NS}`);
  const error = await deploySnapshot(s.deps, options()).catch((e) => e);
  assert.ok(!(error instanceof PermissionError), String(error));
  assert.match(String(error.message), new RegExp(NS));
  assert.deepEqual(s.created(), []);
});

Deno.test("deploySnapshot() auto-targets GPU nodes the image can run on and names the ones it leaves out", async () => {
  const s = scene();
  const gpuNode = (name: string, arch: string) => ({
    metadata: {
      name,
      labels: { "nvidia.com/gpu.present": "true", "kubernetes.io/arch": arch },
    },
  });
  s.fake.put("Node", gpuNode("gpu-1", "amd64"));
  s.fake.put("Node", gpuNode("gb200-1", "arm64"));
  const run = options({
    job: { image: "r.example/aicr:1", architectures: ["amd64"] },
    autoTarget: true,
  });
  await deploySnapshot(s.deps, run);
  const log = s.lines.join("");
  assert.match(log, /auto-targeting GPU nodes .*architectures=amd64/);
  assert.match(
    log,
    /WARN auto-targeting left out GPU nodes of an architecture the image lacks nodes="gb200-1 \(arm64\)"/,
  );
  const job = s.fake.calls.find((c) => c.method === "create" && c.kind === "Job");
  assert.ok(job);

  // Every GPU node of another architecture: exit 2 before anything is created.
  const arm = scene();
  arm.fake.put("Node", gpuNode("gb200-1", "arm64"));
  const error = await deploySnapshot(arm.deps, run).catch((e) => e);
  assert.ok(error instanceof UsageError, String(error));
  assert.match(
    error.message,
    /every GPU node is of an architecture the image 'r\.example\/aicr:1' lacks \(it has amd64\): gb200-1 \(arm64\)/,
  );
  assert.deepEqual(arm.created(), []);
});

Deno.test("deploySnapshot() runs without a node selector, with a WARN, when it cannot look for GPU nodes", async () => {
  const s = scene();
  s.fake.put("Node", {
    metadata: { name: "gpu-1", labels: { "nvidia.com/gpu.present": "true" } },
  });
  const list = s.fake.client.list.bind(s.fake.client);
  s.fake.client.list = ((kind, namespace, callOptions) =>
    kind === "Node"
      ? Promise.reject(
        new KubeApiError("Cannot list Node: the server is unavailable", 503, "ServiceUnavailable"),
      )
      : list(kind, namespace, callOptions)) as typeof s.fake.client.list;
  const jobs: unknown[] = [];
  const create = s.fake.client.create.bind(s.fake.client);
  s.fake.client.create = ((kind, object, callOptions) => {
    if (kind === "Job") jobs.push(object);
    return create(kind, object, callOptions);
  }) as typeof s.fake.client.create;
  await deploySnapshot(s.deps, options({ job: { image: "r.example/aicr:1" }, autoTarget: true }));
  const log = s.lines.join("");
  assert.match(
    log,
    /WARN could not look for GPU nodes; running without a node selector error="Cannot list Node: the server is unavailable"/,
  );
  assert.doesNotMatch(log, /auto-targeting GPU nodes/);
  assert.equal(jobs.length, 1, "the run went on: the Job was created");
  const spec = (jobs[0] as { spec: { template: { spec: Record<string, unknown> } } }).spec;
  assert.equal(spec.template.spec.nodeSelector, undefined, "no GPU node selector injected");
});

Deno.test("deploySnapshot() refuses a snapshot NVIDIA's Go aicr wrote, naming it and the image, and cleans up", async () => {
  const s = scene({
    agentDocument: [
      "kind: Snapshot",
      "apiVersion: aicr.nvidia.com/v1alpha1",
      "metadata:",
      "  source-node: gpu-1",
      '  timestamp: "2026-01-01T00:00:00Z"',
      "  version: v0.11.1",
      "measurements: []",
      "",
    ].join("\n"),
  });
  const build = {
    version: "0.2.0",
    commit: "abc1234",
    backend: "node-sea",
    imageRepository: "ghcr.io/aicr-run/aicr",
  };
  const run = options({
    job: {
      image: "ghcr.io/nvidia/aicr:v0.11.1",
      nodeSelector: { "kubernetes.io/hostname": "gpu-1" },
    },
    build,
  });
  const delivered: string[] = [];
  const stdout = { write: (text: string) => void delivered.push(text) };
  const error = await deploySnapshot({ ...s.deps, stdout }, { ...run, delivery: TO_STDOUT })
    .catch((e) => e);
  assert.ok(error instanceof AgentIdentityError, String(error));
  assert.equal(exitCodeOf(error), 8);
  assert.equal(
    error.message,
    "Cannot use the snapshot as the agent that ran is NVIDIA's Go aicr v0.11.1, not aicr 0.2.0 (commit abc1234): the image 'ghcr.io/nvidia/aicr:v0.11.1' is not this build's",
  );
  assert.match(error.details.join("\n"), /aicr image push REGISTRY\/REPO/);
  assert.deepEqual(delivered, [], "nothing another program wrote is delivered");
  assert.deepEqual(s.left(), [], "cleanup ran as for any failure");
});

/** This build's report of a document, as its agent writes it into its termination message. */
function reportOf(document: string): string {
  return formatAgentReport({
    ...digestText(document),
    version: buildInfo().version,
    commit: buildInfo().commit,
  });
}

Deno.test("deploySnapshot() refuses a snapshot that is not what its agent reported writing (replaced in the ConfigMap), naming both digests", async () => {
  const genuine = encodeSnapshot(sampleSnapshot({ nodeName: "gpu-1" }), "yaml");
  // Another writer won the race between the agent's write and the CLI's read.
  const forged = encodeSnapshot(sampleSnapshot({ nodeName: "gpu-9" }), "yaml");
  const s = scene({ agentDocument: forged, report: reportOf(genuine) });
  const delivered: string[] = [];
  const stdout = { write: (text: string) => void delivered.push(text) };
  const error = await deploySnapshot({ ...s.deps, stdout }, {
    ...options(),
    delivery: TO_STDOUT,
  }).catch((e) => e);
  assert.ok(error instanceof UntrustedSnapshotError, String(error));
  assert.equal(exitCodeOf(error), 10);
  assert.equal(
    error.message,
    `Cannot trust the snapshot in 'cm://${NS}/${
      stagingConfigMapName(RUN)
    }': it is not what the agent wrote (read ${digestText(forged).digest}, ${
      digestText(forged).bytes
    } bytes; the agent reported ${digestText(genuine).digest}, ${digestText(genuine).bytes} bytes)`,
  );
  assert.deepEqual(delivered, [], "nothing forged is delivered");
  assert.deepEqual(s.left(), [], "cleanup ran as for any failure");
});

Deno.test("deploySnapshot() refuses a snapshot whose source-node is not the node its agent's pod ran on", async () => {
  // The report matches the text, but the text names another node than the pod's.
  const s = scene({ podNode: "gpu-2" });
  const error = await deploySnapshot(s.deps, options()).catch((e) => e);
  assert.ok(error instanceof UntrustedSnapshotError, String(error));
  assert.equal(exitCodeOf(error), 10);
  assert.match(
    error.message,
    /: its source-node is 'gpu-1' but the agent's pod ran on node 'gpu-2'$/,
  );
  assert.deepEqual(s.left(), []);
});

Deno.test("deploySnapshot() with no agent report names the program as not this build (exit 8); a malformed report is untrusted (exit 10)", async () => {
  const missing = scene({ report: false });
  const error = await deploySnapshot(missing.deps, options()).catch((e) => e);
  assert.ok(error instanceof AgentIdentityError, String(error));
  assert.equal(exitCodeOf(error), 8);
  assert.match(
    error.message,
    /^Cannot use the snapshot as the agent that ran is not aicr \S+.*: it reported nothing of what it wrote \(its container's termination message is empty\): the image 'ghcr\.io\/nvidia\/aicr:v1\.0\.0' is not this build's$/,
  );
  assert.deepEqual(missing.left(), []);
  for (
    const [report, why] of [
      ["not json", /is not JSON$/],
      [`{"digest":"md5:abc","bytes":1,"version":"0.1.0","commit":"x"}`, /'digest' is not sha256/],
      ["x".repeat(5000), /is over 4096 bytes$/],
    ] as const
  ) {
    const s = scene({ report });
    const bad = await deploySnapshot(s.deps, options()).catch((e) => e);
    assert.ok(bad instanceof UntrustedSnapshotError, `${report.slice(0, 20)}: ${bad}`);
    assert.equal(exitCodeOf(bad), 10);
    assert.match(bad.message, why);
    assert.deepEqual(s.left(), []);
  }
});

/** A pod of the run's Job already being deleted (its tracking finalizer not yet dropped). */
function terminatingPod(name: string, jobUid: string) {
  return {
    metadata: {
      name,
      namespace: NS,
      labels: { "app.kubernetes.io/name": "aicr", "aicr.run/run-id": RUN },
      ownerReferences: [{ apiVersion: "batch/v1", kind: "Job", name: "aicr-run", uid: jobUid }],
      deletionTimestamp: "2026-01-02T15:05:00Z",
    },
  } as unknown as NewObject & { metadata: { name: string } };
}

/**
 * Runs cleanup of a run whose Job's pod it saw, on a clock that moves 5 s at every reading (the
 * 30 s deadline passes after a few rounds, not 30 s).
 */
function cleanupOnFastClock(
  fake: ReturnType<typeof createFakeKube>,
  jobUid: string,
  log = createLogger({ write: () => {} }),
) {
  const ledger = new Ledger(fake.client, {
    labels: { "aicr.run/run-id": RUN },
    runIdLabel: "aicr.run/run-id",
    invocationIdLabel: "aicr.run/invocation-id",
  });
  let now = 0;
  const clock = () => (now += 5_000);
  const result = cleanupRun({ kube: fake.client, log, clock }, {
    ledger,
    namespace: NS,
    runId: RUN,
    jobName: "aicr-run",
    jobUid,
    sawPod: true,
  });
  return { result, elapsed: () => now };
}

Deno.test("cleanupRun() lists a terminating pod again when a watch from the list's version sees it go, not after a pause", async () => {
  const fake = createFakeKube();
  const jobUid = "job-uid-2";
  const pod = terminatingPod("aicr-run-fghij", jobUid);
  const stored = fake.put("Pod", pod);
  const watched: WatchOptions[] = [];
  // The finalizer goes (the pod with it) while the watch is open: only a watch sees it at once.
  fake.client.watch = <T extends KubeObject>(
    kind: KindName,
    namespace: string | undefined,
    options?: WatchOptions,
  ) => {
    assert.equal(kind, "Pod");
    assert.equal(namespace, NS);
    watched.push({ ...options });
    return Promise.resolve({
      close() {},
      async *[Symbol.asyncIterator]() {
        yield { type: "BOOKMARK", object: {} } as WatchEvent<T>;
        await fake.client.deleteIfUid("Pod", NS, pod.metadata.name, stored.metadata?.uid ?? "");
        yield { type: "DELETED", object: pod } as unknown as WatchEvent<T>;
      },
    });
  };
  // A loop that paused instead of watching would reach the deadline with the pod still there.
  const { result } = cleanupOnFastClock(fake, jobUid);
  assert.deepEqual((await result).remaining, []);
  assert.equal(watched.length, 1);
  assert.equal(watched[0]?.labelSelector, `app.kubernetes.io/name=aicr,aicr.run/run-id=${RUN}`);
  assert.equal(watched[0]?.resourceVersion, "1");
});

Deno.test("cleanupRun() names the agent's pods still terminating at its deadline, measured on the clock", async () => {
  const fake = createFakeKube();
  const jobUid = "job-uid-1";
  // A kubelet that has not confirmed: the pod stays.
  fake.put("Pod", terminatingPod("aicr-run-abcde", jobUid));
  const lines: string[] = [];
  const { result, elapsed } = cleanupOnFastClock(
    fake,
    jobUid,
    createLogger({ write: (t) => void lines.push(t) }),
  );
  assert.deepEqual((await result).remaining, ["Pod/aicr-run-abcde"]);
  assert.match(
    lines.join(""),
    /WARN cleanup: the agent's pods are still terminating pods=aicr-run-abcde/,
  );
  assert.ok(
    elapsed() <= 60_000,
    `gave up on the clock's deadline, not the real one (${elapsed()} ms)`,
  );
});
