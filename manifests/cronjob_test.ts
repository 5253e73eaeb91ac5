import assert from "node:assert/strict";
import { buildSnapshotCronJob, seriesConfigMapName, validateSeriesName } from "./cronjob.ts";

const BASE = {
  namespace: "aicr",
  name: "h100",
  schedule: "0 6 * * *",
  keepLast: 7,
  serviceAccountName: "h100",
  image: "ghcr.io/aicr-run/aicr:0.1.0",
  nodeSelector: { "kubernetes.io/hostname": "n1" },
};

Deno.test("buildSnapshotCronJob: the agent writes the series and prunes it; never doubled", () => {
  const cron = buildSnapshotCronJob(BASE);
  assert.equal(cron.spec.schedule, "0 6 * * *");
  assert.equal(cron.spec.concurrencyPolicy, "Forbid");
  const pod = cron.spec.jobTemplate.spec.template.spec;
  assert.equal(pod.serviceAccountName, "h100");
  assert.deepEqual(pod.containers[0]?.args, ["agent", "-o", "cm://aicr/h100", "--keep-last", "7"]);
  assert.deepEqual(pod.nodeSelector, { "kubernetes.io/hostname": "n1" });
  assert.equal(pod.restartPolicy, "Never");
});

Deno.test("buildSnapshotCronJob: restricted mode has no host namespaces; bad schedules are refused", () => {
  const pod = buildSnapshotCronJob({ ...BASE, privileged: false }).spec.jobTemplate.spec.template
    .spec;
  assert.equal(pod.hostPID, undefined);
  assert.equal(pod.containers[0]?.securityContext?.privileged, false);
  assert.throws(() => buildSnapshotCronJob({ ...BASE, schedule: "daily" }), /cron schedule/);
  assert.throws(() => validateSeriesName("x".repeat(53)), /at most 52/);
});

Deno.test("seriesConfigMapName: the run's UTC time, sortable", () => {
  assert.equal(
    seriesConfigMapName("h100", new Date("2026-12-05T06:00:09.123Z")),
    "h100-20261205-060009",
  );
});
