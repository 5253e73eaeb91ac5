import assert from "node:assert/strict";
import { exitCodeOf, formatError } from "../errors.ts";
import type { KubeObject, NewObject } from "../kube/mod.ts";
import { createLogger } from "../log.ts";
import { createFakeKube } from "../tests/fakes/kube.ts";
import {
  createImagePullCheck,
  explainPullFailure,
  unschedulableReason,
  waitForAgentJob,
} from "./wait.ts";
import type { PodObject } from "./wait.ts";

const NS = "snap";
const JOB = "aicr-20260102-150405-0123456789abcdef";
const RUN = "20260102-150405-0123456789abcdef";

/** The wait every test starts from: this file's Job and run, a 30 s bound, 5 ms polls. */
function waitOptions(
  jobUid: string,
  extra: Partial<Parameters<typeof waitForAgentJob>[1]> = {},
): Parameters<typeof waitForAgentJob>[1] {
  return {
    namespace: NS,
    jobName: JOB,
    jobUid,
    runId: RUN,
    timeoutMs: 30_000,
    pollMs: 5,
    ...extra,
  };
}

/** A fake cluster holding the run's Job and, when given, its one pod with this status. */
function scene(podStatus?: PodObject["status"], nodeName?: string) {
  const fake = createFakeKube();
  const job = fake.put("Job", { metadata: { name: JOB, namespace: NS } });
  const jobUid = job.metadata?.uid ?? "";
  const setPod = (status: PodObject["status"], node?: string) =>
    fake.put(
      "Pod",
      {
        metadata: {
          name: `${JOB}-abcde`,
          namespace: NS,
          labels: { "aicr.run/run-id": RUN },
          ownerReferences: [{ kind: "Job", name: JOB, uid: jobUid, controller: true }],
          creationTimestamp: "2026-01-02T15:04:06Z",
        },
        ...(node ? { spec: { nodeName: node } } : {}),
        status,
      } as unknown as NewObject & { metadata: { name: string } },
    );
  if (podStatus) setPod(podStatus, nodeName);
  fake.client.podLog = () => Promise.resolve("agent: reading /proc\nagent: denied\n");
  const lines: string[] = [];
  const log = createLogger({ write: (t) => void lines.push(t) });
  return { fake, jobUid, setPod, lines, log };
}

const UNSCHEDULABLE: PodObject["status"] = {
  phase: "Pending",
  conditions: [{
    type: "PodScheduled",
    status: "False",
    reason: "Unschedulable",
    message: "0/4 nodes are available: 4 node(s) didn't match Pod's node affinity/selector.",
  }],
};

Deno.test("waitForAgentJob() says why the pod cannot be scheduled at once, then keeps a heartbeat", async () => {
  const { fake, jobUid, lines, log } = scene(UNSCHEDULABLE);
  let now = 0;
  const error = await waitForAgentJob(
    {
      kube: fake.client,
      log,
      // Each reading of the clock is 250 ms of fake time: the heartbeat and the deadline are both
      // measured on it, so the wait ends after 30 fake seconds however slow or fast the machine.
      clock: () => (now += 250),
    },
    waitOptions(jobUid, { injectedSelector: "nvidia.com/gpu.present=true" }),
  ).then(() => undefined, (e: unknown) => e);
  const warnings = lines.filter((l) => l.includes("the agent pod cannot be scheduled"));
  assert.equal(warnings.length, 1, "said once, as soon as the scheduler gave the reason");
  assert.match(warnings[0] ?? "", /^WARN /);
  assert.match(warnings[0] ?? "", /didn't match Pod's node affinity\/selector/);
  assert.match(warnings[0] ?? "", /auto-targeted GPU nodes \(nvidia\.com\/gpu\.present=true\)/);
  const progress = lines.filter((l) => l.startsWith("waiting for the agent"));
  assert.ok(progress.length >= 2, `a heartbeat repeats the unchanged state:\n${lines.join("")}`);
  const elapsed = progress.map((l) => Number(/elapsed=(\d+)s/.exec(l)?.[1]));
  for (let i = 1; i < elapsed.length; i++) {
    assert.ok(
      (elapsed[i] ?? 0) - (elapsed[i - 1] ?? 0) <= 11,
      `no silence over 10 s: ${elapsed.join(",")}`,
    );
  }
  // It gave up when the fake clock passed the deadline, not when the real time did.
  assert.ok(Math.max(...elapsed) <= 30, `gave up at 30 s of the clock: ${elapsed.join(",")}`);
  assert.equal(exitCodeOf(error), 5);
  const text = formatError(error);
  assert.match(text, /did not finish within 30s \(unschedulable\)/);
  assert.match(text, /the pod could not be scheduled: 0\/4 nodes are available/);
  assert.match(text, /auto-targeted GPU nodes with node selector nvidia\.com\/gpu\.present=true/);
});

Deno.test("waitForAgentJob() ends on a failed image pull naming the injected selector, with no placement remedy", async () => {
  const { fake, jobUid, log } = scene({
    phase: "Pending",
    conditions: [{ type: "PodScheduled", status: "True" }],
    containerStatuses: [{
      name: "aicr",
      state: {
        waiting: {
          reason: "ImagePullBackOff",
          message: 'Back-off pulling image "ghcr.io/nvidia/aicr:nope"',
        },
      },
    }],
  }, "gpu-1");
  const error = await waitForAgentJob(
    { kube: fake.client, log },
    waitOptions(jobUid, { injectedSelector: "nvidia.com/gpu.present=true" }),
  ).then(() => undefined, (e: unknown) => e);
  assert.equal(exitCodeOf(error), 8);
  const text = formatError(error);
  assert.match(text, /the agent image could not be pulled \(ImagePullBackOff\)/);
  assert.match(text, /check image and imagePullSecret/);
  // The upstream documentation: "If the Job then fails, the error names the injected selector".
  assert.match(
    text,
    /the Job ran on gpu-1, chosen by the injected node selector nvidia\.com\/gpu\.present=true/,
  );
  assert.doesNotMatch(text, /auto-targeted|pass nodeSelector/);
});

/** Waits on a run whose agent container exited with this code on this node; the error. */
async function failedAgent(
  exitCode: number,
  node: string,
  options: { log?: string; extra?: Partial<Parameters<typeof waitForAgentJob>[1]> } = {},
): Promise<unknown> {
  const { fake, jobUid, log } = scene({
    phase: "Failed",
    containerStatuses: [{ name: "aicr", state: { terminated: { exitCode, reason: "Error" } } }],
  }, node);
  if (options.log !== undefined) fake.client.podLog = () => Promise.resolve(options.log ?? "");
  return await waitForAgentJob(
    { kube: fake.client, log },
    waitOptions(jobUid, options.extra),
  ).then(() => undefined, (e: unknown) => e);
}

Deno.test("waitForAgentJob() explains an agent that ran and failed, naming the injected selector without a placement remedy", async () => {
  const error = await failedAgent(4, "gpu-1", {
    extra: { injectedSelector: "nvidia.com/gpu.present=true" },
  });
  const text = formatError(error);
  assert.match(text, /the agent exited with code 4/);
  assert.match(text, /--- agent logs ---\nagent: reading \/proc\nagent: denied\n--- end logs ---/);
  assert.match(
    text,
    /the Job ran on gpu-1, chosen by the injected node selector nvidia\.com\/gpu\.present=true/,
  );
  assert.doesNotMatch(text, /auto-targeted|pass nodeSelector/);
});

Deno.test("waitForAgentJob() returns the node once the pod succeeded", async () => {
  const { fake, jobUid, log } = scene({ phase: "Succeeded" }, "gpu-2");
  const result = await waitForAgentJob({ kube: fake.client, log }, waitOptions(jobUid));
  assert.equal(result.nodeName, "gpu-2");
  // The pod as last read: the caller reads its agent's termination message from it.
  assert.equal(result.pod?.status?.phase, "Succeeded");
  assert.equal(result.pod?.spec?.nodeName, "gpu-2");
});

Deno.test("waitForAgentJob() ends at the agent's report line in its log, before the pod's status, and never relays it", async () => {
  const { fake, jobUid, lines, log } = scene(
    { phase: "Running", containerStatuses: [{ name: "aicr", state: { running: {} } }] },
    "gpu-2",
  );
  const report = '{"digest":"sha256:' + "a".repeat(64) +
    '","bytes":12,"version":"0.1.0","commit":"c"}';
  let closed = false;
  fake.client.followPodLog = () => {
    let release = () => {};
    const held = new Promise<void>((resolve) => (release = resolve));
    return Promise.resolve({
      close() {
        closed = true;
        release();
      },
      async *[Symbol.asyncIterator]() {
        yield "agent: collecting";
        // Text that only looks like a report (another run's nonce, or none): relayed, not taken.
        yield `aicr-agent-report 0000 ${report}`;
        yield `aicr-agent-report ${report}`;
        yield `aicr-agent-report n0nce ${report}`;
        // The container is still running: the stream stays open.
        await held;
      },
    });
  };
  const result = await waitForAgentJob(
    { kube: fake.client, log },
    waitOptions(jobUid, {
      pollMs: 60_000,
      reportNonce: "n0nce",
    }),
  );
  assert.equal(result.report, report);
  assert.equal(result.nodeName, "gpu-2");
  assert.equal(result.pod?.status?.phase, "Running", "returned before the pod's status said so");
  assert.ok(closed, "the log stream is closed when the wait ends");
  const relayed = lines.join("");
  assert.match(relayed, /agent: collecting/);
  assert.match(relayed, /aicr-agent-report 0000/);
  assert.doesNotMatch(relayed, /aicr-agent-report n0nce/);
});

Deno.test("waitForAgentJob() without a nonce takes no report line and waits for the pod's status", async () => {
  const { fake, jobUid, log, setPod } = scene(
    { phase: "Running", containerStatuses: [{ name: "aicr", state: { running: {} } }] },
    "gpu-2",
  );
  fake.client.followPodLog = () =>
    Promise.resolve({
      close() {},
      async *[Symbol.asyncIterator]() {
        yield 'aicr-agent-report n0nce {"digest":"x"}';
      },
    });
  setTimeout(() => setPod({ phase: "Succeeded" }, "gpu-2"), 30);
  const result = await waitForAgentJob({ kube: fake.client, log }, waitOptions(jobUid));
  assert.equal(result.report, undefined);
  assert.equal(result.pod?.status?.phase, "Succeeded");
});

Deno.test("createImagePullCheck() fails backoffs at once and ErrImagePull after its grace", () => {
  const failed = createImagePullCheck(15_000);
  assert.equal(failed("a", "ContainerCreating", 0), false);
  assert.equal(failed("a", "ErrImagePull", 1_000), false);
  assert.equal(failed("a", "ErrImagePull", 16_000), false, "15 s of grace, not yet over");
  assert.equal(failed("a", "ErrImagePull", 16_001), true);
  assert.equal(failed("b", "ErrImagePull", 16_001), false, "per pod");
  assert.equal(failed("b", undefined, 17_000), false, "a pull that recovered resets");
  assert.equal(failed("b", "ErrImagePull", 40_000), false);
  assert.equal(failed("c", "ImagePullBackOff", 0), true);
  assert.equal(failed("d", "InvalidImageName", 0), true);
});

Deno.test("unschedulableReason() reads the scheduler's message, and nothing for a scheduled pod", () => {
  const pod = { status: UNSCHEDULABLE } as PodObject;
  assert.match(unschedulableReason(pod) ?? "", /^0\/4 nodes are available/);
  assert.equal(
    unschedulableReason({ status: { conditions: [{ type: "PodScheduled", status: "True" }] } }),
    undefined,
  );
  assert.equal(unschedulableReason(undefined), undefined);
  const _typed: KubeObject = pod;
});

Deno.test("explainPullFailure() says what the kubelet's pull error means, naming the registry and the secret", () => {
  // The real kubelet's message from the real-kubelet lane with a wrong pull secret.
  const unauthorized =
    'Back-off pulling image "10.231.0.10:5443/aicr@sha256:8261": ErrImagePull: failed to pull and unpack image "10.231.0.10:5443/aicr@sha256:8261": failed to resolve reference "10.231.0.10:5443/aicr@sha256:8261": pulling from host 10.231.0.10:5443 failed with status code [manifests sha256:8261]: 401 Unauthorized';
  const render = (text: ReturnType<typeof explainPullFailure>) =>
    typeof text === "function" ? text((o) => `--${o}`) : text;
  assert.equal(
    render(explainPullFailure(unauthorized, ["aicr-registry"])),
    "  the registry 10.231.0.10:5443 rejected the credentials of the image pull secret 'aicr-registry': fix that Secret (kubectl get secret aicr-registry -o yaml)",
  );
  assert.match(
    render(explainPullFailure(unauthorized, [])) ?? "",
    /asks for credentials and the pod has no image pull secret: give one with --imagePullSecret/,
  );
  assert.match(
    render(
      explainPullFailure(
        "failed to resolve reference: x509: certificate signed by unknown authority",
        [],
      ),
    ) ?? "",
    /does not trust the certificate/,
  );
  assert.match(
    render(explainPullFailure('rpc error: ... "ghcr.io/x/aicr:1": not found', [])) ?? "",
    /^ {2}the registry has no such image: push it there/,
  );
  assert.equal(explainPullFailure("something else entirely", []), undefined);
});

Deno.test("waitForAgentJob() names NVIDIA's Go aicr from its log when it failed before writing (captured from the real binary)", async () => {
  // The last lines NVIDIA's Go aicr (built from its source, run as this Job's agent on the local
  // cluster) wrote: it applies its ConfigMap with a PATCH, which the run's Role does not grant.
  const red = (text: string) => `\u001b[31m${text}\u001b[0m`;
  const error = await failedAgent(8, "p5-h100-1", {
    log: [
      "\u001b[32m[agent] collecting GPU information via nvidia-smi\u001b[0m",
      red(
        `[agent] failed to serialize: error=[INTERNAL] failed to apply ConfigMap: configmaps "aicr-agent-snapshot-${RUN}" is forbidden: User "system:serviceaccount:${NS}:${JOB}" cannot patch resource "configmaps" in API group "" in the namespace "${NS}"`,
      ),
      red(
        `[agent] command failed: error=[INTERNAL] failed to serialize snapshot: [INTERNAL] failed to apply ConfigMap: configmaps "aicr-agent-snapshot-${RUN}" is forbidden exitCode=8`,
      ),
      "",
    ].join("\n"),
    extra: {
      build: {
        version: "0.2.0",
        commit: "abc1234",
        backend: "node-sea",
        imageRepository: "ghcr.io/aicr-run/aicr",
      },
    },
  });
  const text = formatError(error);
  assert.match(
    text,
    /^error: Cannot get a snapshot: the agent that ran is NVIDIA's Go aicr, not aicr 0\.2\.0 \(commit abc1234\) \(its log: '\[agent\] command failed: error=\[INTERNAL\] failed to serialize snapshot/,
  );
  assert.match(text, /push this binary's own image \('aicr image push REGISTRY\/REPO'\)/);
  assert.equal(exitCodeOf(error), 8);
});
