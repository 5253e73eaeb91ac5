import assert from "node:assert/strict";
import { TimeoutError, UnavailableError } from "../errors.ts";
import { NOOP_LOGGER } from "../log.ts";
import { CollectionFailedError, RateLimitedError, SnapshotCache } from "./cache.ts";
import type { SnapshotCacheOptions } from "./cache.ts";
import type { CollectionOutcome } from "./metrics.ts";
import { fakeCollector } from "./_testing.ts";
import { waitUntil } from "../tests/_wait.ts";

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

function makeCache(options: SnapshotCacheOptions = {}) {
  const clock = { now: 1_000_000 };
  const collector = fakeCollector();
  const outcomes: CollectionOutcome[] = [];
  const cache = new SnapshotCache({
    collect: collector.collect,
    clock: () => clock.now,
    log: NOOP_LOGGER,
    onCollection: (o) => outcomes.push(o),
  }, options);
  return { cache, collector, clock, outcomes };
}

Deno.test("SnapshotCache.get() runs one collection for concurrent callers", async () => {
  const { cache, collector } = makeCache();
  collector.hold = true;
  const gets = Array.from({ length: 100 }, () => cache.get());
  await sleep(1);
  collector.release();
  const entries = await Promise.all(gets);
  assert.equal(collector.calls, 1);
  assert.equal(new Set(entries).size, 1);
  assert.equal(entries[0]?.generation, 1);
});

Deno.test("SnapshotCache.get() does not let a synchronous throw wedge the cache", async () => {
  let calls = 0;
  const cache = new SnapshotCache({
    collect: () => {
      calls += 1;
      throw new Error("sync boom");
    },
    clock: () => 0,
    log: NOOP_LOGGER,
  }, { failureBackoffMs: 0 });
  await assert.rejects(cache.get(), /sync boom/);
  assert.equal(cache.collecting, false);
  await assert.rejects(cache.get(), /sync boom/);
  assert.equal(calls, 2);
});

Deno.test("SnapshotCache.get() wraps plain failures as 503 and keeps ToolErrors", async () => {
  const { cache, collector, outcomes } = makeCache({ failureBackoffMs: 0 });
  collector.failWith = new Error("boom");
  const error = await cache.get().catch((e) => e);
  assert.ok(error instanceof UnavailableError);
  assert.equal(error.httpStatus, 503);
  collector.failWith = new TimeoutError("Cannot run nvidia-smi: timed out");
  const timeout = await cache.get().catch((e) => e);
  assert.ok(timeout instanceof TimeoutError);
  assert.deepEqual(outcomes.map((o) => o.ok), [false, false]);
});

Deno.test("SnapshotCache.get() serves the cached snapshot until it reaches the max age", async () => {
  const { cache, collector, clock } = makeCache({ maxAgeMs: 1_000 });
  const first = await cache.get();
  clock.now += 999;
  assert.equal(await cache.get(), first);
  clock.now += 1;
  const second = await cache.get();
  assert.notEqual(second, first);
  assert.equal(second.generation, 2);
  assert.equal(collector.calls, 2);
});

Deno.test("SnapshotCache.get() with fresh counts the interval from any collection start", async () => {
  const { cache, clock } = makeCache({ freshMinIntervalMs: 10_000 });
  await cache.get();
  clock.now += 2_500;
  const error = await cache.get({ fresh: true }).catch((e) => e);
  assert.ok(error instanceof RateLimitedError);
  assert.equal(error.httpStatus, 429);
  assert.equal(error.retryAfterSeconds, 8);
});

Deno.test("SnapshotCache.get() answers within the back-off with the last failure", async () => {
  const { cache, collector, clock } = makeCache({ failureBackoffMs: 5_000 });
  collector.failWith = new Error("boom");
  await assert.rejects(cache.get());
  clock.now += 4_999;
  const error = await cache.get().catch((e) => e);
  assert.ok(error instanceof CollectionFailedError);
  assert.equal(error.retryAfterSeconds, 1);
  assert.equal(collector.calls, 1);
});

Deno.test("SnapshotCache.get() stops one caller's wait on its signal, not the collection", async () => {
  const { cache, collector } = makeCache();
  collector.hold = true;
  const controller = new AbortController();
  const mine = cache.get({ signal: controller.signal });
  const other = cache.get();
  controller.abort(new Error("client left"));
  await assert.rejects(mine, /client left/);
  collector.release();
  assert.equal((await other).generation, 1);
  assert.equal(collector.signals[0]?.aborted, false);
});

Deno.test("SnapshotCache aborts a collection after collectTimeoutMs", async () => {
  const { cache, collector } = makeCache({ collectTimeoutMs: 50 });
  collector.hold = true;
  const error = await cache.get().catch((e) => e);
  assert.ok(error instanceof TimeoutError);
  assert.match(error.message, /no result after 50 ms/);
  assert.equal(collector.signals[0]?.aborted, true);
});

Deno.test("SnapshotCache.start() retries the first collection until it succeeds", async () => {
  const { cache, collector } = makeCache({ failureBackoffMs: 0, maxBootRetryMs: 0 });
  collector.failWith = new Error("not yet");
  cache.start();
  await sleep(1);
  assert.equal(cache.ready, false);
  collector.failWith = undefined;
  // The retry fires after 1 s (the floor of the back-off).
  await waitUntil("the retried first collection to succeed", () => cache.ready, { intervalMs: 20 });
  assert.equal(collector.calls, 2);
  await cache.close();
});

/** Records the timers set while it is installed that have neither fired nor been cleared. */
function trackTimers(): { live: Set<unknown>; restore(): void } {
  const live = new Set<unknown>();
  const realSet = globalThis.setTimeout;
  const realClear = globalThis.clearTimeout;
  globalThis.setTimeout = ((fn: (...args: unknown[]) => void, ms?: number, ...args: unknown[]) => {
    const id = realSet(() => {
      live.delete(id);
      fn(...args);
    }, ms);
    live.add(id);
    return id;
  }) as typeof setTimeout;
  globalThis.clearTimeout = ((id?: number) => {
    live.delete(id);
    realClear(id);
  }) as typeof clearTimeout;
  return {
    live,
    restore() {
      globalThis.setTimeout = realSet;
      globalThis.clearTimeout = realClear;
    },
  };
}

Deno.test("SnapshotCache.start() refreshes periodically when asked, and close() leaves no refresh due", async () => {
  const timers = trackTimers();
  try {
    const { cache, collector } = makeCache({ refreshIntervalMs: 20, maxAgeMs: 0 });
    cache.start();
    await waitUntil("three periodic collections", () => collector.calls >= 3);
    assert.ok(timers.live.size > 0, "a refresh is due while the cache runs");
    await cache.close();
    // Nothing is left to fire: no later refresh can start, however long one waits.
    assert.equal(timers.live.size, 0, "no timer left after close()");
    const calls = collector.calls;
    assert.equal(await cache.refresh(), false, "a refresh after close() is refused");
    assert.equal(collector.calls, calls, "and collects nothing");
  } finally {
    timers.restore();
  }
});

Deno.test("SnapshotCache.close() aborts a running collection and refuses new gets", async () => {
  const { cache, collector } = makeCache();
  collector.hold = true;
  const pending = cache.get();
  await cache.close();
  await assert.rejects(pending, /daemon is stopping/);
  assert.equal(collector.signals[0]?.aborted, true);
  await assert.rejects(cache.get(), /daemon is stopping/);
});

Deno.test("SnapshotCache rejects negative durations", () => {
  assert.throws(
    () => makeCache({ maxAgeMs: -1 }),
    /'maxAgeMs' must be a non-negative number: current value is -1/,
  );
});

Deno.test("CachedSnapshot.encode() memoizes per format and type", async () => {
  const { cache } = makeCache();
  const entry = await cache.get();
  const yaml = entry.encode("yaml");
  assert.equal(entry.encode("yaml"), yaml);
  const gpu = entry.encode("json", "GPU");
  assert.ok(gpu);
  assert.deepEqual(JSON.parse(gpu.body).measurements.map((m: { type: string }) => m.type), ["GPU"]);
  assert.notEqual(gpu.etag, yaml?.etag);
  assert.equal(entry.encode("yaml", "K8s"), undefined);
});
