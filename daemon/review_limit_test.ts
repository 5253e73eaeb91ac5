import assert from "node:assert/strict";
import { RateLimitedError } from "./cache.ts";
import { createReviewLimiter } from "./review_limit.ts";

Deno.test("createReviewLimiter() lets a source spend its burst, then one review per refill, with Retry-After", () => {
  const clock = { now: 0 };
  const limiter = createReviewLimiter({
    perSource: { burst: 3, perSecond: 0.5 },
    overall: { burst: 100, perSecond: 100 },
    clock: () => clock.now,
  });
  for (let i = 0; i < 3; i++) limiter.charge("10.0.0.9");
  assert.throws(() => limiter.charge("10.0.0.9"), (e) => {
    assert.ok(e instanceof RateLimitedError);
    assert.equal(e.httpStatus, 429);
    assert.equal(e.retryAfterSeconds, 2);
    return true;
  });
  // Another source is not held back by the first.
  limiter.charge("10.0.0.10");
  clock.now += 1999;
  assert.throws(() => limiter.charge("10.0.0.9"), RateLimitedError);
  clock.now += 1;
  limiter.charge("10.0.0.9");
  assert.throws(() => limiter.charge("10.0.0.9"), RateLimitedError);
});

Deno.test("createReviewLimiter() bounds many sources together with the overall bucket", () => {
  const clock = { now: 0 };
  const limiter = createReviewLimiter({
    perSource: { burst: 5, perSecond: 1 },
    overall: { burst: 10, perSecond: 1 },
    clock: () => clock.now,
  });
  for (let i = 0; i < 10; i++) limiter.charge(`10.0.1.${i}`);
  assert.throws(() => limiter.charge("10.0.1.200"), /Cannot review another new bearer token now/);
  clock.now += 1000;
  limiter.charge("10.0.1.200");
});

Deno.test("createReviewLimiter() remembers a bounded number of sources", () => {
  const limiter = createReviewLimiter({
    perSource: { burst: 1, perSecond: 0.001 },
    overall: { burst: 1e9, perSecond: 1e9 },
    maxSources: 2,
    clock: () => 0,
  });
  limiter.charge("a");
  limiter.charge("b");
  limiter.charge("c"); // "a" forgotten: the map holds 2
  assert.throws(() => limiter.charge("c"), RateLimitedError);
  limiter.charge("a"); // a fresh bucket again (the overall bucket still bounds that)
});
