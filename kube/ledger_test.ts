import assert from "node:assert/strict";
import { createFakeKube } from "../tests/fakes/kube.ts";
import { createLogger } from "../log.ts";
import { KubeApiError } from "./errors.ts";
import { isAmbiguousCreateFailure, Ledger, UNPROVEN_OBJECT_WARNING } from "./ledger.ts";

const PROOF = {
  labels: { "aicr.run/run-id": "run-1", "aicr.run/invocation-id": "inv-1" },
  runIdLabel: "aicr.run/run-id",
  invocationIdLabel: "aicr.run/invocation-id",
};

function capture() {
  const lines: string[] = [];
  return { lines, log: createLogger({ write: (t) => lines.push(t) }) };
}

function role(name: string, labels: Record<string, string> = PROOF.labels) {
  return { metadata: { name, namespace: "ns", labels } };
}

Deno.test("Ledger.cleanup() deletes what it created, pinned to the UIDs, Job first", async () => {
  const fake = createFakeKube();
  const ledger = new Ledger(fake.client, PROOF);
  await ledger.create("Role", role("r"));
  await ledger.create("Job", role("j"));
  const { log } = capture();
  const outcomes = await ledger.cleanup({ log });
  assert.deepEqual(outcomes.map((o) => [o.entry.kind, o.result]), [["Job", "deleted"], [
    "Role",
    "deleted",
  ]]);
  assert.equal(fake.objects.size, 0);
  const deletes = fake.calls.filter((c) => c.method === "delete").map((c) => c.kind);
  assert.deepEqual(deletes, ["Job", "Role"]);
});

Deno.test("Ledger.cleanup() never deletes an object that replaced ours at the same name", async () => {
  const fake = createFakeKube();
  const ledger = new Ledger(fake.client, PROOF);
  await ledger.create("Role", role("r"));
  // Someone deletes our Role and another invocation creates its own at the name.
  fake.objects.clear();
  fake.put("Role", role("r", { "aicr.run/run-id": "run-1", "aicr.run/invocation-id": "other" }));
  const { log } = capture();
  const [outcome] = await ledger.cleanup({ log });
  assert.equal(outcome?.result, "gone");
  assert.equal(fake.objects.size, 1, "the other invocation's Role stays");
});

Deno.test("Ledger.create() adopts an object whose create response was lost, by its labels", async () => {
  const fake = createFakeKube();
  const ledger = new Ledger(fake.client, PROOF);
  fake.loseNextCreateResponse("ServiceAccount");
  const created = await ledger.create("ServiceAccount", role("sa"));
  assert.ok(created.metadata?.uid);
  assert.equal(ledger.entries[0]?.state, "confirmed");
  const { log } = capture();
  await ledger.cleanup({ log });
  assert.equal(fake.objects.size, 0);
});

Deno.test("Ledger.cleanup() keeps an unproven object and prints the documented WARN", async () => {
  const fake = createFakeKube();
  // Our create's response is lost and the object at that name is not ours.
  fake.put("Role", role("r", { "aicr.run/run-id": "run-0", "aicr.run/invocation-id": "inv-0" }));
  const failing = new Ledger({
    ...fake.client,
    create: () => Promise.reject(new KubeApiError("lost", 0, "ConnectionFailure")),
  }, PROOF);
  await assert.rejects(failing.create("Role", role("r")), /lost/);
  assert.equal(failing.entries[0]?.state, "unconfirmed");
  const { lines, log } = capture();
  const [outcome] = await failing.cleanup({ log });
  assert.equal(outcome?.result, "kept");
  assert.equal(fake.objects.size, 1);
  assert.equal(
    lines[0],
    `WARN ${UNPROVEN_OBJECT_WARNING} kind=Role name=r runID=run-1 objectRunID=run-0 objectInvocationID=inv-0\n`,
  );
});

Deno.test("isAmbiguousCreateFailure() separates lost responses from definite refusals", () => {
  assert.equal(isAmbiguousCreateFailure(new KubeApiError("x", 0, "ConnectionFailure")), true);
  assert.equal(isAmbiguousCreateFailure(new KubeApiError("x", 503, "ServiceUnavailable")), true);
  assert.equal(isAmbiguousCreateFailure(new KubeApiError("x", 409, "AlreadyExists")), false);
  assert.equal(isAmbiguousCreateFailure(new KubeApiError("x", 403, "Forbidden")), false);
});

/**
 * A client whose `method` fails with these errors in turn (undefined: the fake answers), then
 * reaches the fake; with `forever`, the last one stays.
 */
function withFailures(
  fake: ReturnType<typeof createFakeKube>,
  method: "create" | "deleteIfUid",
  failures: (KubeApiError | undefined)[],
  options: { forever?: boolean } = {},
) {
  let sent = 0;
  const real = fake.client[method] as (...args: unknown[]) => Promise<unknown>;
  return {
    get sent() {
      return sent;
    },
    client: {
      ...fake.client,
      [method]: (...args: unknown[]) => {
        sent++;
        const next = options.forever && failures.length === 1 ? failures[0] : failures.shift();
        return next ? Promise.reject(next) : real.apply(fake.client, args);
      },
    } as typeof fake.client,
  };
}

Deno.test("Ledger.create() sends a create again after a 429 (refused, so not applied)", async () => {
  const fake = createFakeKube();
  const flaky = withFailures(fake, "create", [
    new KubeApiError("slow down", 429, "TooManyRequests", { retryAfterSeconds: 1 }),
  ]);
  const waits: number[] = [];
  const ledger = new Ledger(flaky.client, PROOF, {
    sleep: (ms) => (waits.push(ms), Promise.resolve()),
  });
  const created = await ledger.create("Role", role("r"));
  assert.ok(created.metadata?.uid);
  assert.equal(flaky.sent, 2);
  assert.deepEqual(waits, [1000], "Retry-After is honoured");
  assert.equal(ledger.entries.length, 1);
  assert.equal(ledger.entries[0]?.state, "confirmed");
});

Deno.test("Ledger.create() after a 503 re-reads first and only re-creates a name that is free", async () => {
  const fake = createFakeKube();
  const flaky = withFailures(fake, "create", [
    new KubeApiError("unavailable", 503, "ServiceUnavailable"),
  ]);
  const ledger = new Ledger(flaky.client, PROOF, { sleep: () => Promise.resolve() });
  await ledger.create("Role", role("r"));
  assert.equal(flaky.sent, 2);
  assert.equal(fake.objects.size, 1);
  assert.equal(ledger.entries.length, 1);
  assert.equal(ledger.entries[0]?.state, "confirmed");

  // Another invocation's object at the name: the 503 is reported, nothing is re-sent.
  const other = createFakeKube();
  other.put("Role", role("r", { "aicr.run/run-id": "run-1", "aicr.run/invocation-id": "other" }));
  const flaky2 = withFailures(other, "create", [
    new KubeApiError("unavailable", 503, "ServiceUnavailable"),
  ]);
  const ledger2 = new Ledger(flaky2.client, PROOF, { sleep: () => Promise.resolve() });
  await assert.rejects(ledger2.create("Role", role("r")), /unavailable/);
  assert.equal(flaky2.sent, 1);
  assert.equal(ledger2.entries[0]?.state, "unconfirmed");
});

Deno.test("Ledger.cleanup() deletes again while the API server is away (restarting), until its deadline", async () => {
  const fake = createFakeKube();
  const away = () => new KubeApiError("connect ECONNREFUSED", 0, "ConnectionFailure");
  const flaky = withFailures(fake, "deleteIfUid", [
    away(),
    new KubeApiError("etcd down", 503, "x"),
    undefined,
  ], { forever: true });
  const waits: number[] = [];
  const ledger = new Ledger(flaky.client, PROOF, {
    sleep: (ms) => (waits.push(ms), Promise.resolve()),
  });
  await ledger.create("Job", role("j"));
  const { lines, log } = capture();
  const [outcome] = await ledger.cleanup({ log, until: Date.now() + 30_000 });
  assert.equal(outcome?.result, "deleted");
  assert.equal(flaky.sent, 3);
  assert.deepEqual(waits, [250, 500], "backing off");
  assert.equal(fake.objects.size, 0);
  assert.ok(!lines.some((l) => l.includes("WARN")), lines.join("\n"));
});

Deno.test("Ledger.cleanup() within a deadline retries by itself: every request one attempt, Retry-After kept", async () => {
  const fake = createFakeKube();
  const sent: unknown[] = [];
  const real = fake.client.deleteIfUid.bind(fake.client);
  let failures = [
    new KubeApiError("connect ECONNREFUSED", 0, "ConnectionFailure"),
    new KubeApiError("slow down", 429, "TooManyRequests", { retryAfterSeconds: 5 }),
  ];
  const client = {
    ...fake.client,
    deleteIfUid: (...args: Parameters<typeof real>) => {
      sent.push(args[4]?.retries);
      const next = failures.shift();
      return next ? Promise.reject(next) : real(...args);
    },
  };
  const waits: number[] = [];
  const ledger = new Ledger(client, PROOF, { sleep: (ms) => (waits.push(ms), Promise.resolve()) });
  await ledger.create("Job", role("j"));
  await ledger.create("Role", role("r"));
  const { log } = capture();
  const outcomes = await ledger.cleanup({ log, until: Date.now() + 30_000 });
  assert.deepEqual(outcomes.map((o) => o.result), ["deleted", "deleted"]);
  // The client's own retries (seconds of backoff each) would outlive the deadline.
  assert.deepEqual(sent, [0, 0, 0, 0], "each delete is one attempt");
  assert.deepEqual(waits, [250, 5000], "backing off, Retry-After honoured");

  // Without a deadline, the client's own retries stand.
  failures = [];
  sent.length = 0;
  const unbounded = new Ledger(client, PROOF);
  await unbounded.create("Role", role("r2"));
  await unbounded.cleanup({ log });
  assert.deepEqual(sent, [undefined]);
});

Deno.test("Ledger.cleanup() gives up at its deadline with the WARN, and never retries a refusal", async () => {
  const fake = createFakeKube();
  const flaky = withFailures(
    fake,
    "deleteIfUid",
    [new KubeApiError("gone away", 0, "ConnectionFailure")],
    { forever: true },
  );
  // The deadline and the sleeps on one fake clock: the same attempts however slow the machine.
  let now = 0;
  const ledger = new Ledger(flaky.client, PROOF, {
    clock: () => now,
    sleep: (ms) => Promise.resolve(void (now += ms)),
  });
  await ledger.create("Job", role("j"));
  const { lines, log } = capture();
  const [outcome] = await ledger.cleanup({ log, until: 300 });
  assert.equal(outcome?.result, "failed");
  // At 0, at 250 (the first back-off), and at 300: the back-off cut to the deadline, the last.
  assert.equal(flaky.sent, 3);
  assert.equal(now, 300);
  assert.equal(lines.filter((l) => l.includes("WARN cleanup could not delete")).length, 1);

  const refused = createFakeKube();
  const forbidden = withFailures(
    refused,
    "deleteIfUid",
    [new KubeApiError("forbidden", 403, "Forbidden")],
    { forever: true },
  );
  const ledger2 = new Ledger(forbidden.client, PROOF);
  await ledger2.create("Role", role("r"));
  const [kept] = await ledger2.cleanup({ log, until: Date.now() + 30_000 });
  assert.equal(kept?.result, "failed");
  assert.equal(forbidden.sent, 1, "a refusal is final");
});
