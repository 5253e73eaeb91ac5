import assert from "node:assert/strict";
import { UsageError } from "../errors.ts";
import {
  carriesRunLabels,
  componentSelector,
  daemonClusterRoleName,
  daemonLabels,
  daemonSelectorLabels,
  formatLabelSelector,
  isDns1123Label,
  isDns1123Subdomain,
  isInvocationId,
  isLabelKey,
  isLabelValue,
  isRunId,
  jobName,
  matchesLabels,
  MAX_PREFIX_LENGTH,
  newInvocationId,
  newRunId,
  nodeReaderName,
  rbacDirectoryName,
  renderedClusterRoleName,
  renderedLabels,
  renderedRoleName,
  runLabels,
  runScopedName,
  runSelector,
  serviceAccountRunName,
  serviceAccountUser,
  snapshotConfigMapLabels,
  stagingConfigMapName,
  toLabelValue,
  validateNamespace,
} from "./names.ts";

const RUN_ID = "20260103-103000-0123456789abcdef";
const INVOCATION_ID = "fedcba9876543210";

Deno.test("names: newRunId formats the UTC time and 16 hex digits into 32 characters", () => {
  // 23:59:58 on Dec 31 in UTC is already Jan 1 in UTC+1: the ID must not follow local time.
  const id = newRunId(new Date("2026-12-31T23:59:58.900Z"), () => "0123456789ABCDEF");
  assert.equal(id, "20261231-235958-0123456789abcdef");
  assert.equal(id.length, 32);
  assert.ok(isRunId(id));
});

Deno.test("names: newRunId pads single-digit months, days and times", () => {
  assert.equal(
    newRunId(new Date("2026-01-02T03:04:05Z"), () => "00000000000000ff"),
    "20260102-030405-00000000000000ff",
  );
});

Deno.test("names: newRunId refuses a random source that gives anything but 16 hex digits", () => {
  assert.throws(() => newRunId(new Date(0), () => "abc"), RangeError);
  assert.throws(() => newRunId(new Date(0), () => "0123456789abcdeg"), RangeError);
});

Deno.test("names: isRunId rejects near misses", () => {
  for (
    const bad of [
      "",
      "20260103-103000-0123456789abcde",
      "20260103-103000-0123456789ABCDEF",
      "2026013-103000-0123456789abcdef",
      "20260103103000-0123456789abcdef0",
      42,
    ]
  ) {
    assert.equal(isRunId(bad), false, String(bad));
  }
});

Deno.test("names: newInvocationId gives 16 hex digits and isInvocationId checks them", () => {
  const id = newInvocationId(() => INVOCATION_ID);
  assert.equal(id, INVOCATION_ID);
  assert.ok(isInvocationId(id));
  assert.equal(isInvocationId("xyz"), false);
  assert.throws(() => newInvocationId(() => "12"), RangeError);
});

Deno.test("names: run-scoped names follow the documented patterns", () => {
  assert.equal(jobName("aicr", RUN_ID), `aicr-${RUN_ID}`);
  assert.equal(serviceAccountRunName("aicr", RUN_ID), `aicr-${RUN_ID}`);
  assert.equal(nodeReaderName(RUN_ID), `aicr-node-reader-${RUN_ID}`);
  assert.equal(stagingConfigMapName(RUN_ID), `aicr-agent-snapshot-${RUN_ID}`);
  assert.equal(rbacDirectoryName(RUN_ID), `snapshot-rbac-${RUN_ID}`);
});

Deno.test("names: runScopedName cuts the prefix to 30 characters so the name fits 63", () => {
  const long = "a".repeat(40);
  const name = runScopedName(long, RUN_ID);
  assert.equal(MAX_PREFIX_LENGTH, 30);
  assert.equal(name, `${"a".repeat(30)}-${RUN_ID}`);
  assert.equal(name.length, 63);
  assert.ok(isDns1123Label(name));
});

Deno.test("names: runScopedName trims the dashes a cut leaves at the end of the prefix", () => {
  const prefix = `${"b".repeat(28)}---tail`;
  assert.equal(runScopedName(prefix, RUN_ID), `${"b".repeat(28)}-${RUN_ID}`);
  assert.equal(runScopedName("x-", RUN_ID), `x-${RUN_ID}`);
});

Deno.test("names: runScopedName names the option when the prefix cannot be part of a name", () => {
  assert.throws(
    () => serviceAccountRunName("My_SA", RUN_ID),
    (error: unknown) =>
      error instanceof UsageError &&
      error.message ===
        "Cannot use 'serviceAccountName' as a name prefix as it must be lowercase letters, digits or '-', starting with a letter or digit: current value is 'My_SA'",
  );
  assert.throws(() => jobName("-x", RUN_ID), /'jobName'/);
  assert.throws(() => jobName("", RUN_ID), UsageError);
  assert.throws(() => jobName("aicr", "not-a-run-id"), RangeError);
});

Deno.test("names: rendered grant names end in -rbac and join namespace and ServiceAccount on a dot", () => {
  assert.equal(renderedRoleName("irsa-snapshotter"), "aicr-agent-irsa-snapshotter-rbac");
  assert.equal(
    renderedClusterRoleName("gpu-operator", "irsa-snapshotter"),
    "aicr-agent-gpu-operator.irsa-snapshotter-rbac",
  );
  // A run-scoped name always ends in hex, so it can never end in "-rbac".
  assert.ok(!jobName("rbac", RUN_ID).endsWith("-rbac"));
});

Deno.test("names: rendered names refuse invalid ServiceAccount and namespace names", () => {
  assert.throws(
    () => renderedRoleName("Bad SA"),
    (error: unknown) =>
      error instanceof UsageError &&
      error.message.startsWith("Cannot use 'serviceAccount' as it must be") &&
      error.message.endsWith(": current value is 'Bad SA'"),
  );
  assert.throws(() => validateNamespace("namespace", "x".repeat(64)), UsageError);
  assert.equal(validateNamespace("namespace", "gpu-operator"), "gpu-operator");
});

Deno.test("names: DNS-1123 checks follow the Kubernetes rules", () => {
  assert.ok(isDns1123Label("a"));
  assert.ok(isDns1123Label("a-1"));
  assert.ok(!isDns1123Label("a."));
  assert.ok(!isDns1123Label("A"));
  assert.ok(!isDns1123Label("a-"));
  assert.ok(isDns1123Subdomain("a.b-c.d"));
  assert.ok(!isDns1123Subdomain("a..b"));
  assert.ok(!isDns1123Subdomain(`${"a".repeat(254)}`));
});

Deno.test("names: runLabels gives the five labels in order", () => {
  assert.deepEqual(runLabels({ runId: RUN_ID, invocationId: INVOCATION_ID }), {
    "app.kubernetes.io/name": "aicr",
    "app.kubernetes.io/managed-by": "aicr",
    "app.kubernetes.io/component": "snapshot-agent",
    "aicr.run/run-id": RUN_ID,
    "aicr.run/invocation-id": INVOCATION_ID,
  });
  assert.equal(
    runLabels({ runId: RUN_ID, invocationId: INVOCATION_ID, component: "daemon" })[
      "app.kubernetes.io/component"
    ],
    "daemon",
  );
  assert.throws(() => runLabels({ runId: RUN_ID, invocationId: "x" }), RangeError);
});

Deno.test("names: rendered objects carry no run, invocation or managed-by label", () => {
  assert.deepEqual(renderedLabels(), {
    "app.kubernetes.io/name": "aicr",
    "app.kubernetes.io/component": "snapshot-agent",
  });
});

Deno.test("names: the snapshot ConfigMap labels carry the agent version as a valid label value", () => {
  assert.deepEqual(snapshotConfigMapLabels("0.1.0-dev"), {
    "app.kubernetes.io/name": "aicr",
    "app.kubernetes.io/component": "Snapshot",
    "app.kubernetes.io/version": "0.1.0-dev",
  });
  assert.equal(toLabelValue("0.1.0+build.7"), "0.1.0-build.7");
  assert.equal(toLabelValue("-v1-"), "v1");
  assert.equal(toLabelValue("x".repeat(70)).length, 63);
});

Deno.test("names: selectors match the documented kubectl commands", () => {
  assert.equal(
    componentSelector(),
    "app.kubernetes.io/name=aicr,app.kubernetes.io/component=snapshot-agent",
  );
  assert.equal(
    componentSelector("daemon"),
    "app.kubernetes.io/name=aicr,app.kubernetes.io/component=daemon",
  );
  assert.equal(runSelector(RUN_ID), `app.kubernetes.io/name=aicr,aicr.run/run-id=${RUN_ID}`);
  assert.equal(formatLabelSelector({}), "");
});

Deno.test("names: ownership needs every run label, the invocation ID included", () => {
  const identity = { runId: RUN_ID, invocationId: INVOCATION_ID };
  const labels = runLabels(identity);
  assert.ok(carriesRunLabels({ ...labels, extra: "x" }, identity));
  assert.ok(
    !carriesRunLabels({ ...labels, "aicr.run/invocation-id": "0000000000000000" }, identity),
  );
  assert.ok(!carriesRunLabels(undefined, identity));
  assert.ok(matchesLabels({ a: "1" }, {}));
});

Deno.test("names: label keys and values follow the Kubernetes rules", () => {
  assert.ok(isLabelKey("nvidia.com/gpu.present"));
  assert.ok(isLabelKey("accelerator"));
  assert.ok(!isLabelKey("bad/prefix/x"));
  assert.ok(!isLabelKey("Bad_Prefix/x"));
  assert.ok(!isLabelKey(""));
  assert.ok(!isLabelKey("a".repeat(64)));
  assert.ok(isLabelValue(""));
  assert.ok(isLabelValue("nvidia-h100"));
  assert.ok(!isLabelValue("a=b"));
  assert.ok(!isLabelValue("-a"));
  assert.equal(serviceAccountUser("ns", "sa"), "system:serviceaccount:ns:sa");
});

Deno.test("names: daemon labels carry component daemon and the instance, run IDs only in pairs", () => {
  assert.deepEqual(daemonLabels({ name: "aicr-daemon" }), {
    "app.kubernetes.io/name": "aicr",
    "app.kubernetes.io/managed-by": "aicr",
    "app.kubernetes.io/component": "daemon",
    "app.kubernetes.io/instance": "aicr-daemon",
  });
  const tracked = daemonLabels({ name: "d", runId: RUN_ID, invocationId: INVOCATION_ID });
  assert.equal(tracked["aicr.run/run-id"], RUN_ID);
  assert.equal(tracked["app.kubernetes.io/component"], "daemon");
  assert.throws(() => daemonLabels({ name: "d", runId: RUN_ID }), RangeError);
  assert.deepEqual(daemonSelectorLabels("d"), {
    "app.kubernetes.io/name": "aicr",
    "app.kubernetes.io/component": "daemon",
    "app.kubernetes.io/instance": "d",
  });
  assert.equal(daemonClusterRoleName("ns", "aicr-daemon"), "aicr-daemon-ns.aicr-daemon");
  assert.throws(() => daemonClusterRoleName("ns", "Bad"), UsageError);
});

Deno.test("names: the daemon's objects are named from its namespace and name", async () => {
  const m = await import("./names.ts");
  assert.equal(m.daemonReaderName("aicr-daemon"), "aicr-reader");
  assert.equal(m.daemonReaderName("gpu"), "gpu-reader");
  assert.equal(
    m.daemonReaderClusterRoleName("ns", "aicr-daemon"),
    "aicr-snapshot-reader-ns.aicr-daemon",
  );
  assert.equal(m.daemonSignerSecretName("aicr-daemon"), "aicr-daemon-signer");
  assert.equal(m.daemonCaConfigMapName("aicr-daemon"), "aicr-daemon-ca");
  assert.equal(m.daemonNodeAudience("gpu-1"), "aicr-daemon:gpu-1");
  assert.equal(m.daemonSweepLabels("x")["app.kubernetes.io/managed-by"], "aicr");
});
