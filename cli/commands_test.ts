import assert from "node:assert/strict";
import { fakeCli } from "../tests/fakes/cli.ts";
import type { CliDeps } from "./context.ts";
import { VERBS, verbsFor } from "./commands.ts";
import { runCli } from "./mod.ts";

function names(argv: string[]): string[] {
  return verbsFor(argv).map((v) => v.name);
}

Deno.test("verbsFor: a command line that names a verb loads that verb alone", () => {
  assert.deepEqual(names(["agent", "-o", "snapshot.yaml"]), ["agent"]);
  assert.deepEqual(names(["--debug", "version"]), ["version"]);
  assert.deepEqual(names(["--kubeconfig", "agent", "snapshot"]), ["snapshot"]);
  assert.deepEqual(names(["-k", "kc", "-n", "daemon", "diff"]), ["diff"]);
  assert.deepEqual(names(["--context=x", "-nfoo", "daemonset", "fetch"]), ["daemonset"]);
});

Deno.test("verbsFor: root help, help <verb>, unknown verbs and '--' load every verb", () => {
  const all = VERBS.map((v) => v.name);
  for (const argv of [[], ["--help"], ["help", "agent"], ["agnet"], ["--", "agent"], ["-n"]]) {
    assert.deepEqual(names(argv), all, argv.join(" "));
  }
});

function deps(): { deps: CliDeps; out: () => string; err: () => string } {
  const fake = fakeCli();
  return { deps: fake.deps, out: fake.stdout, err: fake.stderr };
}

Deno.test("runCli: a verb's help and errors read the same whether one verb or all are loaded", async () => {
  for (const verb of VERBS) {
    const one = deps();
    assert.equal(await runCli([verb.name, "--help"], one.deps), 0);
    const all = deps();
    // `help <verb>` makes the CLI load every verb, then prints the same help.
    assert.equal(await runCli(["help", verb.name], all.deps), 0);
    assert.equal(one.out(), all.out(), verb.name);
    assert.match(one.out(), new RegExp(`^Usage: aicr ${verb.name} `));
  }
  const one = deps();
  assert.equal(await runCli(["version", "--bogus"], one.deps), 2);
  assert.match(one.err(), /unknown option '--bogus'/);
  const root = deps();
  assert.equal(await runCli(["--help"], root.deps), 0);
  for (const verb of VERBS) assert.match(root.out(), new RegExp(`\\n  ${verb.name} `));
});
