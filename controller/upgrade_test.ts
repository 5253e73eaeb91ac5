import assert from "node:assert/strict";
import { ConflictError, NotFoundError, UsageError } from "../errors.ts";
import { createLogger } from "../log.ts";
import { createFakeKube } from "../tests/fakes/kube.ts";
import {
  daemonSetRolledOut,
  deploymentRolledOut,
  restorable,
  upgradeDaemonSet,
} from "./upgrade.ts";

Deno.test("daemonSetRolledOut() waits for the controller to see the new generation and every node to run it", () => {
  const ds = (generation: number, status: Record<string, number>) => ({
    metadata: { generation },
    status,
  });
  const done = {
    observedGeneration: 3,
    desiredNumberScheduled: 2,
    updatedNumberScheduled: 2,
    numberAvailable: 2,
  };
  assert.equal(daemonSetRolledOut(ds(3, done)), true);
  // The controller has not read the new template yet: its counts are the old one's.
  assert.equal(daemonSetRolledOut(ds(4, done)), false);
  assert.equal(daemonSetRolledOut(ds(3, { ...done, updatedNumberScheduled: 1 })), false);
  assert.equal(daemonSetRolledOut(ds(3, { ...done, numberAvailable: 1 })), false);
  assert.equal(daemonSetRolledOut(ds(3, { ...done, numberUnavailable: 1 })), false);
  assert.equal(daemonSetRolledOut(undefined), false);
});

Deno.test("deploymentRolledOut() waits until no replica of the old template is left", () => {
  const deployment = (status: Record<string, number>) => ({
    metadata: { generation: 2 },
    spec: { replicas: 2 },
    status: { observedGeneration: 2, ...status },
  });
  assert.equal(
    deploymentRolledOut(deployment({ replicas: 2, updatedReplicas: 2, availableReplicas: 2 })),
    true,
  );
  // A surge replica of the new template beside two old ones.
  assert.equal(
    deploymentRolledOut(deployment({ replicas: 3, updatedReplicas: 1, availableReplicas: 2 })),
    false,
  );
  // New ones up, an old one still terminating.
  assert.equal(
    deploymentRolledOut(deployment({ replicas: 3, updatedReplicas: 2, availableReplicas: 2 })),
    false,
  );
});

Deno.test("restorable() keeps an object's intent and drops what the server keeps", () => {
  const object = {
    apiVersion: "apps/v1",
    kind: "DaemonSet",
    metadata: {
      name: "aicr-daemon",
      namespace: "aicr-system",
      labels: { a: "1" },
      annotations: { b: "2" },
      uid: "u",
      resourceVersion: "7",
      managedFields: [{ manager: "aicr" }],
      creationTimestamp: "2026-12-05T00:00:00Z",
    },
    spec: { template: { spec: { containers: [{ image: "aicr:0.1.0" }] } } },
    status: { numberReady: 2 },
  };
  assert.deepEqual(restorable(object), {
    apiVersion: "apps/v1",
    kind: "DaemonSet",
    metadata: {
      name: "aicr-daemon",
      namespace: "aicr-system",
      labels: { a: "1" },
      annotations: { b: "2" },
    },
    spec: { template: { spec: { containers: [{ image: "aicr:0.1.0" }] } } },
  });
});

function world(labels?: Record<string, string>) {
  const fake = createFakeKube();
  if (labels) {
    fake.put("DaemonSet", { metadata: { name: "aicr-daemon", namespace: "aicr-system", labels } });
  }
  let n = 0;
  return {
    fake,
    deps: {
      kube: fake.client,
      log: createLogger({ write: () => {} }),
      now: () => new Date("2026-12-05T12:00:00Z"),
      randomHex: () => (++n).toString(16).padStart(16, "0"),
    },
  };
}

const OPTIONS = { namespace: "aicr-system", image: "aicr:0.2.0" };

Deno.test("upgradeDaemonSet() of nothing installed is not found and names install, nothing written", async () => {
  const { fake, deps } = world();
  const error = await upgradeDaemonSet(deps, OPTIONS).catch((e) => e);
  assert.ok(error instanceof NotFoundError, String(error));
  assert.match(error.message, /it is not installed/);
  assert.match(String(error.details), /aicr daemonset install -n aicr-system/);
  assert.equal(fake.calls.filter((c) => c.method !== "get").length, 0);
});

Deno.test("upgradeDaemonSet() refuses a Helm release, naming helm upgrade, nothing written", async () => {
  const { fake, deps } = world({
    "app.kubernetes.io/name": "aicr",
    "app.kubernetes.io/component": "daemon",
    "app.kubernetes.io/instance": "aicr-daemon",
    "app.kubernetes.io/managed-by": "Helm",
  });
  const error = await upgradeDaemonSet(deps, OPTIONS).catch((e) => e);
  assert.ok(error instanceof ConflictError, String(error));
  assert.match(error.message, /managed by 'Helm', not by aicr/);
  assert.match(String(error.details), /helm upgrade/);
  assert.equal(fake.calls.filter((c) => c.method !== "get").length, 0);
});

Deno.test("upgradeDaemonSet() refuses a corrupted install-settings annotation, exit 2, nothing written", async () => {
  const { fake, deps } = world();
  fake.put("DaemonSet", {
    metadata: {
      name: "aicr-daemon",
      namespace: "aicr-system",
      labels: {
        "app.kubernetes.io/name": "aicr",
        "app.kubernetes.io/component": "daemon",
        "app.kubernetes.io/instance": "aicr-daemon",
        "app.kubernetes.io/managed-by": "aicr",
      },
      annotations: { "aicr.run/install-settings": '{"port":"9443","hostPath":"/"}' },
    },
  });
  const settings = {
    kinds: { port: "string" as const },
    defaults: { port: "8443" },
    flags: { port: "8443" },
    given: [],
    toOptions: () => OPTIONS,
  };
  const error = await upgradeDaemonSet(deps, { ...OPTIONS, settings }).catch((e) => e);
  assert.ok(error instanceof UsageError, String(error));
  assert.equal(error.exitCode, 2);
  assert.match(error.message, /'aicr-system\/aicr-daemon'.*'aicr\.run\/install-settings'/);
  assert.match(error.message, /'hostPath' is not a setting this build knows/);
  assert.equal(fake.calls.filter((c) => c.method !== "get").length, 0);
});
