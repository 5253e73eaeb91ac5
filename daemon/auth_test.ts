import assert from "node:assert/strict";
import {
  bearerToken,
  createCachingAuthorizer,
  describeDenial,
  MAX_TOKEN_BYTES,
  metricsAttributes,
  snapshotAttributes,
  UnauthenticatedError,
} from "./auth.ts";
import type { AccessAuthorizer, TokenAuthenticator, UserInfo } from "./auth.ts";
import { fakeKubeAuth } from "./_testing.ts";
import { RateLimitedError } from "./cache.ts";
import { createReviewLimiter } from "./review_limit.ts";

const READER: UserInfo = { username: "reader", groups: ["system:authenticated"] };

Deno.test("bearerToken() reads Authorization, then X-Aicr-Authorization", () => {
  assert.equal(bearerToken(new Headers({ authorization: "Bearer abc" })), "abc");
  assert.equal(bearerToken(new Headers({ authorization: "bearer  abc " })), "abc");
  assert.equal(bearerToken(new Headers({ "x-aicr-authorization": "Bearer xyz" })), "xyz");
  assert.equal(
    bearerToken(new Headers({ authorization: "Bearer a", "x-aicr-authorization": "Bearer b" })),
    "a",
  );
});

Deno.test("bearerToken() throws a 401 error for missing, malformed or oversized tokens", () => {
  for (
    const headers of [
      new Headers(),
      new Headers({ authorization: "Basic abc" }),
      new Headers({ authorization: "Bearer" }),
      new Headers({ authorization: "Bearer a b" }),
      new Headers({ authorization: `Bearer ${"a".repeat(MAX_TOKEN_BYTES + 1)}` }),
    ]
  ) {
    assert.throws(
      () => bearerToken(headers),
      (e) => e instanceof UnauthenticatedError && e.httpStatus === 401,
    );
  }
});

Deno.test("createCachingAuthorizer() caches valid tokens for 2 minutes and invalid ones for 30 s", async () => {
  const clock = { now: 0 };
  const kube = fakeKubeAuth();
  const auth = createCachingAuthorizer(kube, { clock: () => clock.now });
  assert.equal((await auth.authenticate("token-reader"))?.username, "reader");
  assert.equal(await auth.authenticate("bad"), undefined);
  clock.now += 29_999;
  await auth.authenticate("token-reader");
  await auth.authenticate("bad");
  assert.equal(kube.reviews, 2);
  clock.now += 1;
  await auth.authenticate("bad");
  assert.equal(kube.reviews, 3);
  clock.now = 120_000;
  await auth.authenticate("token-reader");
  assert.equal(kube.reviews, 4);
});

Deno.test("createCachingAuthorizer() caches allowed for 2 minutes and denied for 30 s", async () => {
  const clock = { now: 0 };
  const kube = fakeKubeAuth();
  const auth = createCachingAuthorizer(kube, { clock: () => clock.now });
  const other: UserInfo = { username: "other", groups: [] };
  assert.equal(await auth.authorize(READER, snapshotAttributes("n1")), true);
  assert.equal(await auth.authorize(other, snapshotAttributes("n1")), false);
  assert.equal(await auth.authorize(READER, metricsAttributes("n1")), false, "other attributes");
  clock.now = 29_999;
  await auth.authorize(other, snapshotAttributes("n1"));
  assert.equal(kube.checks.length, 3);
  clock.now = 30_000;
  await auth.authorize(other, snapshotAttributes("n1"));
  assert.equal(kube.checks.length, 4);
  clock.now = 119_999;
  await auth.authorize(READER, snapshotAttributes("n1"));
  assert.equal(kube.checks.length, 4);
});

Deno.test("createCachingAuthorizer() keys decisions on groups too", async () => {
  const kube = fakeKubeAuth();
  const auth = createCachingAuthorizer(kube);
  await auth.authorize(READER, snapshotAttributes("n1"));
  await auth.authorize({ ...READER, groups: ["system:masters"] }, snapshotAttributes("n1"));
  await auth.authorize({ ...READER, groups: [...READER.groups] }, snapshotAttributes("n1"));
  assert.equal(kube.checks.length, 2);
});

Deno.test("createCachingAuthorizer() shares concurrent identical reviews", async () => {
  let reviews = 0;
  let release = () => {};
  const gate = new Promise<void>((resolve) => (release = resolve));
  const authenticator: TokenAuthenticator = {
    async review() {
      reviews += 1;
      await gate;
      return { authenticated: true, user: READER };
    },
  };
  const authorizer: AccessAuthorizer = { allowed: () => Promise.resolve(true) };
  const auth = createCachingAuthorizer({ authenticator, authorizer });
  const all = Array.from({ length: 50 }, () => auth.authenticate("t"));
  release();
  const users = await Promise.all(all);
  assert.equal(reviews, 1);
  assert.ok(users.every((u) => u?.username === "reader"));
});

Deno.test("createCachingAuthorizer() does not cache a review that failed", async () => {
  let calls = 0;
  const auth = createCachingAuthorizer({
    authenticator: {
      review() {
        calls += 1;
        return calls === 1
          ? Promise.reject(new Error("apiserver down"))
          : Promise.resolve({ authenticated: true, user: READER });
      },
    },
    authorizer: { allowed: () => Promise.resolve(true) },
  });
  await assert.rejects(auth.authenticate("t"), /apiserver down/);
  assert.equal((await auth.authenticate("t"))?.username, "reader");
  assert.equal(calls, 2);
});

Deno.test("createCachingAuthorizer() keeps at most maxEntries decisions", async () => {
  const kube = fakeKubeAuth();
  const auth = createCachingAuthorizer(kube, { maxEntries: 2 });
  for (const name of ["a", "b", "c"]) await auth.authorize(READER, snapshotAttributes(name));
  await auth.authorize(READER, snapshotAttributes("c"));
  await auth.authorize(READER, snapshotAttributes("b"));
  assert.equal(kube.checks.length, 3, "b and c are still cached");
  await auth.authorize(READER, snapshotAttributes("a"));
  assert.equal(kube.checks.length, 4, "a was dropped");
});

Deno.test("describeDenial() reads like the apiserver's message", () => {
  assert.equal(
    describeDenial(READER, metricsAttributes("gpu-1")),
    'User "reader" cannot get resource "nodes/metrics" in API group "" named "gpu-1"',
  );
});

Deno.test("createCachingAuthorizer() limits reviews of new tokens per source: known and shared ones cost nothing", async () => {
  const kube = fakeKubeAuth();
  const auth = createCachingAuthorizer(kube, {
    clock: () => 0,
    limiter: createReviewLimiter({
      perSource: { burst: 3, perSecond: 0.1 },
      overall: { burst: 100, perSecond: 100 },
      clock: () => 0,
    }),
  });
  const from = (source: string) => ({ source });
  assert.equal((await auth.authenticate("token-reader", from("10.0.0.9")))?.username, "reader");
  // Three concurrent requests with one new token: one review, one charge.
  await Promise.all([1, 2, 3].map(() => auth.authenticate("bogus-0", from("10.0.0.9"))));
  assert.equal(kube.reviews, 2);
  await auth.authenticate("bogus-1", from("10.0.0.9"));
  const limited = await auth.authenticate("bogus-2", from("10.0.0.9")).catch((e) => e);
  assert.ok(limited instanceof RateLimitedError, String(limited));
  assert.equal(limited.httpStatus, 429);
  assert.equal(kube.reviews, 3, "the limited token was not reviewed");
  // Cached answers still come, for this source too; another source still gets reviews.
  assert.equal((await auth.authenticate("token-reader", from("10.0.0.9")))?.username, "reader");
  assert.equal(await auth.authenticate("bogus-1", from("10.0.0.9")), undefined);
  assert.equal(await auth.authenticate("bogus-3", from("10.0.0.10")), undefined);
  assert.equal(kube.reviews, 4);
});

Deno.test("createCachingAuthorizer() admits no user from a review that did not authenticate, even one naming a user", async () => {
  const auth = createCachingAuthorizer({
    authenticator: {
      review: () => Promise.resolve({ authenticated: false, user: READER }),
    },
    authorizer: { allowed: () => Promise.resolve(true) },
  });
  assert.equal(await auth.authenticate("a-token"), undefined);
  assert.equal(await auth.authenticate("a-token"), undefined, "and remembers it so");
});
