import assert from "node:assert/strict";
import { exitCodeOf, NotFoundError } from "../errors.ts";
import { createFakeKube } from "../tests/fakes/kube.ts";
import { KubeApiError } from "./errors.ts";
import { checkNamespace, namespaceNames } from "./namespace.ts";

Deno.test("checkNamespace() passes for an existing namespace and refuses a missing one (exit 3)", async () => {
  const fake = createFakeKube();
  fake.put("Namespace", { metadata: { name: "gpu-operator" } });
  await checkNamespace(fake.client, "gpu-operator");
  const error = await checkNamespace(fake.client, "gpu-opreator").catch((e) => e);
  assert.ok(error instanceof NotFoundError);
  assert.equal(exitCodeOf(error), 3);
  assert.equal(error.message, "Cannot deploy into namespace 'gpu-opreator': it does not exist");
  assert.ok(error.details.some((d) => d.includes("kubectl create namespace gpu-opreator")));
});

Deno.test("checkNamespace() lets a caller who may not read namespaces through, and rethrows the rest", async () => {
  const fake = createFakeKube();
  fake.client.get = () =>
    Promise.reject(
      new KubeApiError("Cannot GET /api/v1/namespaces/x: 403 Forbidden", 403, "Forbidden"),
    );
  await checkNamespace(fake.client, "x");
  fake.client.get = () =>
    Promise.reject(new KubeApiError("Cannot reach Kubernetes API server", 0, "ConnectionFailure"));
  await assert.rejects(
    checkNamespace(fake.client, "x"),
    (e) => e instanceof KubeApiError && e.status === 0,
  );
});

Deno.test("namespaceNames() lists once, sorted, with the caller's timeout and no retries", async () => {
  const asked: unknown[] = [];
  const names = await namespaceNames({
    listAll: <T>(kind: string, namespace: string | undefined, options?: unknown) => {
      asked.push({ kind, namespace, options });
      return Promise.resolve(
        [{ metadata: { name: "team-b" } }, { metadata: { name: "default" } }, {}] as T[],
      );
    },
  }, { timeoutMs: 2000 });
  assert.deepEqual(names, ["default", "team-b"]);
  assert.deepEqual(asked, [{
    kind: "Namespace",
    namespace: undefined,
    options: { timeoutMs: 2000, retries: 0 },
  }]);
});
