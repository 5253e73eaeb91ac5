import assert from "node:assert/strict";
import { parseAllDocuments } from "yaml";
import { fakeCli } from "../tests/fakes/cli.ts";
import { runCli } from "./mod.ts";

function harness(contextNamespace: string | undefined) {
  const reads: string[] = [];
  const fake = fakeCli({
    contextNamespace: (source) => {
      reads.push(source.context ?? "(current)");
      return Promise.resolve({ context: source.context ?? "lab", namespace: contextNamespace });
    },
  });
  return { ...fake, reads };
}

const PREVIEW = ["snapshot", "--dry-run", "--offline"];

function namespaces(stdout: string): string[] {
  return [
    ...new Set(
      parseAllDocuments(stdout).map((d) => d.toJS().metadata.namespace).filter(Boolean),
    ),
  ];
}

Deno.test("namespace: without -n a namespaced verb uses the kubeconfig context's, and says so", async () => {
  const h = harness("team-a");
  assert.equal(await runCli([...PREVIEW, "--context", "lab-a"], h.deps), 0, h.stderr());
  assert.deepEqual(namespaces(h.stdout()), ["team-a"]);
  assert.deepEqual(h.reads, ["lab-a"]);
  assert.match(h.stderr(), /namespace from the kubeconfig context namespace=team-a context=lab-a/);
});

Deno.test("namespace: -n and AICR_NAMESPACE win over the context; no context namespace is default", async () => {
  const flagged = harness("team-a");
  assert.equal(await runCli([...PREVIEW, "-n", "team-b"], flagged.deps), 0);
  assert.deepEqual(namespaces(flagged.stdout()), ["team-b"]);
  assert.deepEqual(flagged.reads, [], "the kubeconfig is not even read");
  // commander reads AICR_NAMESPACE from the process environment.
  Deno.env.set("AICR_NAMESPACE", "team-c");
  try {
    const fromEnv = harness("team-a");
    assert.equal(await runCli(PREVIEW, fromEnv.deps), 0);
    assert.deepEqual(namespaces(fromEnv.stdout()), ["team-c"]);
  } finally {
    Deno.env.delete("AICR_NAMESPACE");
  }
  const none = harness(undefined);
  assert.equal(await runCli(PREVIEW, none.deps), 0);
  assert.deepEqual(namespaces(none.stdout()), ["default"]);
  assert.doesNotMatch(none.stderr(), /namespace from the kubeconfig context/);
});

Deno.test("namespace: verbs without a namespace never read the kubeconfig", async () => {
  const h = harness("team-a");
  assert.equal(await runCli(["version"], h.deps), 0);
  assert.deepEqual(h.reads, []);
});
