import assert from "node:assert/strict";
import { createFakeKube } from "../tests/fakes/kube.ts";
import { createLogger } from "../log.ts";
import { sweepRun, sweepSelector } from "./sweep.ts";

const RUN = "20260102-150405-0123456789abcdef";
const OTHER = "20260102-150405-fedcba9876543210";

function labels(runId: string, extra: Record<string, string> = {}) {
  return {
    "app.kubernetes.io/name": "aicr",
    "app.kubernetes.io/managed-by": "aicr",
    "app.kubernetes.io/component": "snapshot-agent",
    "aicr.run/run-id": runId,
    "aicr.run/invocation-id": "0123456789abcdef",
    ...extra,
  };
}

function capture() {
  const lines: string[] = [];
  return { lines, log: createLogger({ write: (t) => void lines.push(t) }) };
}

function seed() {
  const fake = createFakeKube();
  const ns = "gpu";
  fake.put("Job", { metadata: { name: `aicr-${RUN}`, namespace: ns, labels: labels(RUN) } });
  fake.put("ServiceAccount", {
    metadata: { name: `aicr-${RUN}`, namespace: ns, labels: labels(RUN) },
  });
  fake.put("ClusterRole", { metadata: { name: `aicr-node-reader-${RUN}`, labels: labels(RUN) } });
  // Not the run's: another run ID, and the run ID without managed-by=aicr.
  fake.put("Role", { metadata: { name: "other", namespace: ns, labels: labels(OTHER) } });
  fake.put("ServiceAccount", {
    metadata: { name: "hand-made", namespace: ns, labels: { "aicr.run/run-id": RUN } },
  });
  return { fake, ns };
}

Deno.test("sweepSelector() requires the run ID, name and managed-by labels", () => {
  assert.equal(
    sweepSelector(RUN),
    `aicr.run/run-id=${RUN},app.kubernetes.io/name=aicr,app.kubernetes.io/managed-by=aicr`,
  );
});

Deno.test("sweepRun() deletes the run's objects by UID, Job first, and nothing else", async () => {
  const { fake, ns } = seed();
  fake.put("ConfigMap", {
    metadata: { name: `aicr-agent-snapshot-${RUN}`, namespace: ns, labels: labels(RUN) },
  });
  // Labelled like aicr's ConfigMaps but not this run's: never swept.
  fake.put("ConfigMap", {
    metadata: {
      name: "aicr-snapshot",
      namespace: ns,
      labels: { "app.kubernetes.io/name": "aicr" },
    },
  });
  const { log, lines } = capture();
  const swept = await sweepRun({ kube: fake.client, log }, { runId: RUN, namespace: ns });
  assert.deepEqual(swept.map((o) => [o.kind, o.result]), [
    ["Job", "deleted"],
    ["ConfigMap", "deleted"],
    ["ClusterRole", "deleted"],
    ["ServiceAccount", "deleted"],
  ]);
  assert.deepEqual([...fake.objects.keys()].sort(), [
    "ConfigMap/gpu/aicr-snapshot",
    "Role/gpu/other",
    "ServiceAccount/gpu/hand-made",
  ]);
  assert.deepEqual(lines, []);
});

Deno.test("sweepRun() keeps a ConfigMap at the staging name without the run's labels, with the documented WARN", async (t) => {
  for (
    const [what, cmLabels] of [
      ["unlabelled", { team: "a" }],
      ["aicr's name label only", { "app.kubernetes.io/name": "aicr" }],
      ["another run's", labels(OTHER)],
    ] as const
  ) {
    await t.step(what, async () => {
      const { fake, ns } = seed();
      fake.put("ConfigMap", {
        metadata: { name: `aicr-agent-snapshot-${RUN}`, namespace: ns, labels: { ...cmLabels } },
      });
      const { log, lines } = capture();
      const swept = await sweepRun({ kube: fake.client, log }, { runId: RUN, namespace: ns });
      assert.equal(swept.at(-1)?.result, "kept");
      assert.equal(
        lines[0],
        `WARN cleanup left behind the ConfigMap at this run's staging name: it does not carry the run's labels, so aicr did not create it name=aicr-agent-snapshot-${RUN} objectRunID=${
          what === "another run's" ? OTHER : '""'
        }\n`,
      );
      assert.ok(fake.objects.has(`ConfigMap/${ns}/aicr-agent-snapshot-${RUN}`));
    });
  }
});

Deno.test("sweepRun() never deletes an object that replaced the one it read", async () => {
  const { fake, ns } = seed();
  const client = {
    ...fake.client,
    deleteIfUid: (...args: Parameters<typeof fake.client.deleteIfUid>) => {
      // Between the read and the delete, someone replaces the ServiceAccount.
      if (args[0] === "ServiceAccount" && args[2] === `aicr-${RUN}`) {
        fake.objects.delete(`ServiceAccount/${ns}/aicr-${RUN}`);
        fake.put("ServiceAccount", {
          metadata: { name: `aicr-${RUN}`, namespace: ns, labels: labels(RUN) },
        });
      }
      return fake.client.deleteIfUid(...args);
    },
  };
  const { log } = capture();
  const swept = await sweepRun({ kube: client, log }, { runId: RUN, namespace: ns });
  assert.equal(swept.find((o) => o.kind === "ServiceAccount")?.result, "gone");
  assert.ok(fake.objects.has(`ServiceAccount/${ns}/aicr-${RUN}`), "the replacement stays");
});

Deno.test("sweepRun() with dryRun deletes nothing", async () => {
  const { fake, ns } = seed();
  const before = fake.objects.size;
  const { log } = capture();
  const swept = await sweepRun({ kube: fake.client, log }, {
    runId: RUN,
    namespace: ns,
    dryRun: true,
  });
  assert.deepEqual(swept.map((o) => o.result), ["found", "found", "found"]);
  assert.equal(fake.objects.size, before);
});
