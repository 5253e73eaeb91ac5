import assert from "node:assert/strict";
import { exitCodeOf, formatError } from "../errors.ts";
import { KubeConfig } from "./_client_node.ts";
import { KubeApiError } from "./errors.ts";
import { createRestClient } from "./rest.ts";

/** A kubeconfig for a loopback API server, with a named context and user. */
function loopbackConfig(port: number): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: "lab", server: `http://127.0.0.1:${port}`, skipTLSVerify: true }],
    users: [{ name: "alice", token: "expired-token" }],
    contexts: [{ name: "lab-admin", cluster: "lab", user: "alice", namespace: "team-a" }],
    currentContext: "lab-admin",
  });
  return kc;
}

Deno.test("rest: a 401 says the credentials were rejected, whose, and how to refresh them", async () => {
  const seen: string[] = [];
  await using server = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen: () => {} },
    (req) => {
      seen.push(`${req.method} ${new URL(req.url).pathname} ${req.headers.get("authorization")}`);
      return Response.json({
        kind: "Status",
        apiVersion: "v1",
        status: "Failure",
        message: "Unauthorized",
        reason: "Unauthorized",
        code: 401,
      }, { status: 401 });
    },
  );
  const rest = createRestClient(loopbackConfig(server.addr.port), { retries: 0 });
  const error = await rest.json({
    method: "POST",
    path: "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
    body: {},
  }).then(() => undefined, (e: unknown) => e);
  assert.ok(error instanceof KubeApiError);
  assert.equal(error.status, 401);
  assert.equal(exitCodeOf(error), 4);
  const text = formatError(error);
  assert.match(
    text,
    /^error: Cannot POST \/apis\/authorization\.k8s\.io\/v1\/selfsubjectaccessreviews: 401 Unauthorized: the API server rejected the credentials \(invalid or expired\)/,
  );
  assert.match(
    text,
    /kubeconfig user 'alice' \(context 'lab-admin'\): they are invalid or expired/,
  );
  assert.match(text, /refresh them with the command that wrote them/);
  assert.match(text, /kubectl --context lab-admin auth whoami/);
  assert.deepEqual(seen, [
    "POST /apis/authorization.k8s.io/v1/selfsubjectaccessreviews Bearer expired-token",
  ]);
  assert.equal(rest.defaultNamespace, "team-a");
});

Deno.test("rest: a 403 keeps the server's own message and no credential hint", async () => {
  await using server = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen: () => {} },
    () =>
      Response.json({
        kind: "Status",
        message: 'pods is forbidden: User "alice" cannot list resource "pods"',
        reason: "Forbidden",
        code: 403,
      }, { status: 403 }),
  );
  const rest = createRestClient(loopbackConfig(server.addr.port), { retries: 0 });
  const error = await rest.json({ method: "GET", path: "/api/v1/namespaces/x/pods" }).then(
    () => undefined,
    (e: unknown) => e,
  );
  assert.ok(error instanceof KubeApiError);
  assert.equal(exitCodeOf(error), 4);
  const text = formatError(error);
  assert.match(text, /403 Forbidden: pods is forbidden: User "alice" cannot list/);
  assert.doesNotMatch(text, /credentials/);
});
