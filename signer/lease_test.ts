import assert from "node:assert/strict";
import { KubeApiError } from "../kube/mod.ts";
import { createLogger } from "../log.ts";
import { microTime, runLeaderElection } from "./lease.ts";
import type { LeaseObject, LeaseSpec, LeaseStore } from "./lease.ts";

/** Virtual time: sleeps wait for {@link VirtualTime.advance}; the clock never moves by itself. */
class VirtualTime {
  now = 0;
  #timers: { at: number; resolve: () => void }[] = [];
  readonly clock = (): number => this.now;
  readonly wall = (): Date => new Date(Date.UTC(2026, 11, 5) + this.now);
  readonly sleep = (ms: number, signal?: AbortSignal): Promise<void> =>
    new Promise((resolve) => {
      if (signal?.aborted) return resolve();
      const timer = { at: this.now + ms, resolve };
      this.#timers.push(timer);
      signal?.addEventListener("abort", () => {
        this.#timers = this.#timers.filter((t) => t !== timer);
        resolve();
      }, { once: true });
    });
  async advance(ms: number): Promise<void> {
    const end = this.now + ms;
    for (;;) {
      await settle();
      const due = this.#timers.filter((t) => t.at <= end).sort((a, b) => a.at - b.at)[0];
      if (!due) break;
      this.now = Math.max(this.now, due.at);
      this.#timers = this.#timers.filter((t) => t !== due);
      due.resolve();
    }
    this.now = end;
    await settle();
  }
}

async function settle(): Promise<void> {
  for (let i = 0; i < 10; i++) await new Promise((r) => setTimeout(r, 0));
}

/** The Lease in memory, with the API's optimistic concurrency (409 on a stale resourceVersion). */
function memoryLease(spec: LeaseSpec = {}, time?: VirtualTime) {
  let version = 1;
  const writes: { who: string; at: number }[] = [];
  let lease: LeaseObject = {
    metadata: { name: "aicr-daemon-signer", namespace: "aicr-system", resourceVersion: "1" },
    spec,
  };
  let failing = new Set<string>();
  const store = (who: string): LeaseStore => ({
    get: () =>
      failing.has(who)
        ? Promise.reject(new Error("connection refused"))
        : Promise.resolve(structuredClone(lease)),
    update: (next) => {
      if (failing.has(who)) return Promise.reject(new Error("connection refused"));
      if (next.metadata?.resourceVersion !== lease.metadata?.resourceVersion) {
        return Promise.reject(new KubeApiError("Cannot update: 409 Conflict", 409, "Conflict"));
      }
      version++;
      writes.push({ who, at: time?.now ?? 0 });
      lease = {
        ...structuredClone(next),
        metadata: { ...next.metadata, resourceVersion: `${version}` },
      };
      return Promise.resolve(structuredClone(lease));
    },
  });
  return {
    store,
    holder: () => lease.spec?.holderIdentity ?? "",
    spec: () => lease.spec ?? {},
    cut: (who: string) => void (failing = new Set([...failing, who])),
    lastWrite: (who: string) => writes.filter((w) => w.who === who).at(-1)?.at ?? -Infinity,
  };
}

const quiet = createLogger({ write: () => {} });

/** One candidate: its end signal, whether it leads now, and when its work started and stopped. */
function candidate(
  time: VirtualTime,
  lease: ReturnType<typeof memoryLease>,
  identity: string,
) {
  const stop = new AbortController();
  const state = { leading: false, starts: [] as number[], stops: [] as number[] };
  const done = runLeaderElection(
    {
      store: lease.store(identity),
      log: quiet,
      now: time.wall,
      clock: time.clock,
      sleep: time.sleep,
    },
    {
      identity,
      signal: stop.signal,
      leaseDurationMs: 15_000,
      renewDeadlineMs: 10_000,
      retryPeriodMs: 2_000,
      lead: async (signal) => {
        state.leading = true;
        state.starts.push(time.now);
        await new Promise<void>((resolve) => signal.addEventListener("abort", () => resolve()));
        state.leading = false;
        state.stops.push(time.now);
      },
    },
  );
  return { stop, state, done };
}

Deno.test("runLeaderElection() acquires a free Lease, renews it, and releases it on shutdown", async () => {
  const time = new VirtualTime();
  const lease = memoryLease();
  const a = candidate(time, lease, "a");
  await time.advance(1);
  assert.equal(a.state.leading, true);
  assert.equal(lease.holder(), "a");
  assert.equal(lease.spec().leaseDurationSeconds, 15);
  const firstRenew = lease.spec().renewTime;
  await time.advance(5_000);
  assert.notEqual(lease.spec().renewTime, firstRenew, "renewed while leading");
  assert.match(lease.spec().renewTime ?? "", /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/);
  assert.equal(microTime(new Date("2026-12-05T10:00:00.123Z")), "2026-12-05T10:00:00.123000Z");
  a.stop.abort();
  await time.advance(1);
  await a.done;
  assert.equal(a.state.leading, false);
  assert.equal(lease.holder(), "", "released: empty holder");
  assert.equal(lease.spec().leaseDurationSeconds, 1);
});

Deno.test("runLeaderElection() lets one of two lead; a release hands over at the next retry", async () => {
  const time = new VirtualTime();
  const lease = memoryLease();
  const a = candidate(time, lease, "a");
  await time.advance(1);
  const b = candidate(time, lease, "b");
  await time.advance(20_000);
  assert.equal(a.state.leading, true);
  assert.equal(b.state.leading, false, "b waits while a renews");
  const released = time.now;
  a.stop.abort();
  await time.advance(2_500);
  assert.equal(b.state.leading, true, "b took over within one retry period");
  assert.ok((b.state.starts[0] ?? Infinity) - released <= 2_400);
  assert.equal(lease.holder(), "b");
  assert.equal(lease.spec().leaseTransitions, 1);
  b.stop.abort();
  await time.advance(1);
  await Promise.all([a.done, b.done]);
});

Deno.test("runLeaderElection() takes a dead holder's Lease over only after its duration, on its own clock", async () => {
  const time = new VirtualTime();
  // A holder that died (SIGKILL): its record stays, renewTime far in the past on any wall clock.
  const lease = memoryLease({
    holderIdentity: "dead-pod_1234",
    leaseDurationSeconds: 15,
    acquireTime: "2020-01-01T00:00:00.000000Z",
    renewTime: "2020-01-01T00:00:00.000000Z",
    leaseTransitions: 3,
  });
  const b = candidate(time, lease, "b");
  await time.advance(14_000);
  assert.equal(
    b.state.leading,
    false,
    "not before the duration has passed since it saw the record",
  );
  await time.advance(4_000);
  assert.equal(b.state.leading, true, "taken over after the duration and one retry");
  assert.equal(lease.holder(), "b");
  assert.equal(lease.spec().leaseTransitions, 4);
  b.stop.abort();
  await time.advance(1);
  await b.done;
});

Deno.test("runLeaderElection() steps a leader that cannot renew down before anyone else may lead", async () => {
  const time = new VirtualTime();
  const lease = memoryLease({}, time);
  const a = candidate(time, lease, "a");
  await time.advance(1);
  const b = candidate(time, lease, "b");
  await time.advance(3_000);
  const cutAt = time.now;
  const lastRenew = lease.lastWrite("a");
  lease.cut("a"); // a's API connection is gone; its record stays in the Lease.
  await time.advance(30_000);
  const stoppedAt = a.state.stops[0] ?? Infinity;
  const bStartedAt = b.state.starts[0] ?? Infinity;
  assert.ok(
    stoppedAt - cutAt <= 12_000,
    `a stepped down within the renew deadline: ${stoppedAt - cutAt}`,
  );
  assert.ok(bStartedAt > stoppedAt, "b started after a stopped");
  // b counts the duration from when it saw a's last renewal, at most one retry after it.
  assert.ok(
    bStartedAt - lastRenew >= 15_000,
    `b waited for the Lease's duration: ${bStartedAt - lastRenew}`,
  );
  assert.equal(lease.holder(), "b");
  a.stop.abort();
  b.stop.abort();
  await time.advance(1);
  await Promise.all([a.done, b.done]);
});

Deno.test("runLeaderElection() refuses timings where the renew deadline is not inside the Lease's duration", async () => {
  const lease = memoryLease();
  await assert.rejects(
    runLeaderElection({ store: lease.store("a"), log: quiet, now: () => new Date() }, {
      identity: "a",
      signal: new AbortController().signal,
      leaseDurationMs: 10_000,
      renewDeadlineMs: 10_000,
      lead: () => Promise.resolve(),
    }),
    RangeError,
  );
});

Deno.test("runLeaderElection() that wins the Lease as it is told to stop leads nothing and releases", async () => {
  const time = new VirtualTime();
  const lease = memoryLease({}, time);
  const stop = new AbortController();
  let led = 0;
  const store = lease.store("a");
  // The shutdown arrives while the acquiring write is in flight.
  const slowStore: LeaseStore = {
    get: store.get,
    update: async (next, signal) => {
      const written = await store.update(next, signal);
      stop.abort();
      return written;
    },
  };
  const done = runLeaderElection(
    { store: slowStore, log: quiet, now: time.wall, clock: time.clock, sleep: time.sleep },
    {
      identity: "a",
      signal: stop.signal,
      lead: async (signal) => {
        led++;
        await new Promise<void>((resolve) => signal.addEventListener("abort", () => resolve()));
      },
    },
  );
  await time.advance(100);
  await done;
  assert.equal(lease.holder(), "", "released");
  assert.equal(led, 0, "led nothing");
});
