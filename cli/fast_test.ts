import assert from "node:assert/strict";
import { fakeCli } from "../tests/fakes/cli.ts";
import { runCli } from "./mod.ts";
import { FAST_FIRST_ARGUMENTS, fastAnswer } from "./fast.ts";

/** What the full CLI prints for a command line, and its exit code. */
async function viaCli(argv: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const cli = fakeCli();
  const code = await runCli(argv, cli.deps);
  return { code, stdout: cli.stdout(), stderr: cli.stderr() };
}

const ANSWERED = [
  ["version"],
  ["version", "-t", "json"],
  ["version", "-t", "text"],
  ["version", "--format", "json"],
  ["version", "--format", "text"],
  ["version", "--format=json"],
  ["version", "--format=text"],
  ["--version"],
  ["-v"],
];

Deno.test("fastAnswer prints what the CLI prints for each command line it answers", async () => {
  for (const argv of ANSWERED) {
    const fast = fastAnswer(argv);
    assert.notEqual(fast, undefined, `answered: ${argv.join(" ")}`);
    const full = await viaCli(argv);
    assert.deepEqual(
      { code: full.code, stdout: full.stdout, stderr: full.stderr },
      { code: 0, stdout: fast, stderr: "" },
      argv.join(" "),
    );
  }
});

Deno.test("fastAnswer leaves every other command line to the CLI", async () => {
  const others = [
    [],
    ["version", "-t", "yaml"],
    ["version", "-o", "json"],
    ["version", "--help"],
    ["version", "json"],
    ["version", "-tjson"],
    ["version", "-t"],
    ["version", "-t", "json", "-t", "text"],
    ["--version", "version"],
    ["-v", "--debug"],
    ["--debug", "version"],
    ["agent"],
    ["help", "version"],
  ];
  for (const argv of others) assert.equal(fastAnswer(argv), undefined, argv.join(" "));
  // The loader tries it only for these first words; each answers at least one form.
  for (const first of FAST_FIRST_ARGUMENTS) {
    assert.ok(ANSWERED.some((argv) => argv[0] === first), first);
  }
  // A form it leaves alone still works through the CLI.
  assert.equal((await viaCli(["--debug", "version", "-t", "json"])).code, 0);
  assert.equal((await viaCli(["version", "-t", "yaml"])).code, 2);
});
