import assert from "node:assert/strict";
import { ToolError } from "../errors.ts";
import { KubeApiError } from "../kube/mod.ts";
import type { KubeClient } from "../kube/mod.ts";
import { snapshotAttributes } from "./auth.ts";
import { boundToNode, createKubeAuth } from "./kube_auth.ts";

type Reviews = Pick<KubeClient, "tokenReview" | "subjectAccessReview">;

function fakeKube(calls: unknown[]): Reviews {
  return {
    tokenReview(token, options) {
      calls.push({ token, options });
      return Promise.resolve(
        token === "good"
          ? { authenticated: true, user: { username: "alice", groups: ["g"] } }
          : { authenticated: false, error: "invalid bearer token" },
      );
    },
    subjectAccessReview(user, attributes, options) {
      calls.push({ user, attributes, options });
      return Promise.resolve({ allowed: user.username === "alice" });
    },
  };
}

Deno.test("createKubeAuth() maps TokenReview answers and passes audiences and a timeout", async () => {
  const calls: unknown[] = [];
  const { authenticator } = createKubeAuth(fakeKube(calls), {
    audiences: ["aicr-daemon"],
    timeoutMs: 3_000,
  });
  assert.deepEqual(await authenticator.review("good"), {
    authenticated: true,
    user: { username: "alice", groups: ["g"] },
  });
  assert.deepEqual(await authenticator.review("bad"), { authenticated: false });
  assert.deepEqual(calls[0], {
    token: "good",
    options: { timeoutMs: 3_000, audiences: ["aicr-daemon"] },
  });
});

Deno.test("createKubeAuth() asks SubjectAccessReview with the daemon's attributes", async () => {
  const calls: unknown[] = [];
  const { authorizer } = createKubeAuth(fakeKube(calls));
  const user = { username: "alice", groups: ["g"] };
  assert.equal(await authorizer.allowed(user, snapshotAttributes("n1")), true);
  assert.equal(
    await authorizer.allowed({ username: "bob", groups: [] }, snapshotAttributes("n1")),
    false,
  );
  assert.deepEqual(calls[0], {
    user,
    attributes: { verb: "get", group: "aicr.run", resource: "snapshots", name: "n1" },
    options: { timeoutMs: 10_000 },
  });
});

Deno.test("createKubeAuth() answers 500, not 403, when the daemon itself may not create reviews", async () => {
  const refused = () =>
    Promise.reject(new KubeApiError("Cannot POST tokenreviews: 403 Forbidden", 403, "Forbidden"));
  const { authenticator, authorizer } = createKubeAuth({
    tokenReview: refused,
    subjectAccessReview: refused,
  });
  for (
    const call of [
      () => authenticator.review("t"),
      () =>
        authorizer.allowed({ username: "u", groups: [] }, {
          verb: "get",
          resource: "snapshots",
          group: "aicr.run",
        }),
    ]
  ) {
    await assert.rejects(call(), (error: unknown) => {
      assert.ok(error instanceof ToolError);
      assert.equal(error.httpStatus, 500);
      assert.match(error.message, /system:auth-delegator/);
      return true;
    });
  }
});

Deno.test("createKubeAuth() with boundNode accepts only tokens bound to this node", async () => {
  const extraOf: Record<string, Record<string, string[]> | undefined> = {
    mine: { "authentication.kubernetes.io/node-name": ["gpu-a"] },
    other: { "authentication.kubernetes.io/node-name": ["gpu-b"] },
    twice: { "authentication.kubernetes.io/node-name": ["gpu-a", "gpu-b"] },
    unbound: undefined,
  };
  const kube: Reviews = {
    tokenReview(token) {
      const extra = extraOf[token];
      return Promise.resolve({
        authenticated: true,
        user: { username: "reader", groups: [], ...(extra ? { extra } : {}) },
      });
    },
    subjectAccessReview: () => Promise.resolve({ allowed: true }),
  };
  const { authenticator } = createKubeAuth(kube, { boundNode: "gpu-a" });
  assert.equal((await authenticator.review("mine")).authenticated, true);
  for (const token of ["other", "twice", "unbound"]) {
    assert.deepEqual(await authenticator.review(token), { authenticated: false }, token);
  }
  assert.equal(boundToNode({ extra: extraOf.mine ?? {} }, "gpu-a"), true);
  assert.equal(boundToNode({}, "gpu-a"), false);
});
