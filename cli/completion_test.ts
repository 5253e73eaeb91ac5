import assert from "node:assert/strict";
import { fakeCli } from "../tests/fakes/cli.ts";
import { runCli } from "./mod.ts";

const harness = () => fakeCli();

async function script(shell: string): Promise<string> {
  const h = harness();
  assert.equal(await runCli(["completion", shell], h.deps), 0, shell);
  return h.stdout();
}

/** Runs the bash completion for a command line (the last word is the one being completed). */
async function complete(bashScript: string, words: string[]): Promise<string[]> {
  const program = [
    bashScript,
    `COMP_WORDS=(${words.map((w) => `'${w}'`).join(" ")})`,
    `COMP_CWORD=${words.length - 1}`,
    "_aicr_complete",
    'printf "%s\\n" "${COMPREPLY[@]}"',
  ].join("\n");
  const out = await new Deno.Command("bash", { args: ["-c", program], stdout: "piped" }).output();
  assert.equal(out.code, 0);
  return new TextDecoder().decode(out.stdout).split("\n").filter(Boolean).sort();
}

Deno.test("completion bash: verbs, nested verbs, flags and the values of --os and --format", async () => {
  const bash = await script("bash");
  assert.deepEqual(await complete(bash, ["aicr", "da"]), ["daemon", "daemonset"]);
  assert.deepEqual(
    await complete(bash, ["aicr", "daemonset", ""]).then((w) =>
      w.filter((x) => !x.startsWith("-"))
    ),
    ["baseline", "fetch", "install", "render", "signer", "status", "uninstall", "upgrade"],
  );
  assert.deepEqual(await complete(bash, ["aicr", "snapshot", "--os", ""]), [
    "amazonlinux",
    "cos",
    "ol",
    "rhel",
    "talos",
    "ubuntu",
  ]);
  assert.deepEqual(await complete(bash, ["aicr", "snapshot", "-t", ""]), ["json", "table", "yaml"]);
  assert.deepEqual(await complete(bash, ["aicr", "diff", "--format", ""]), [
    "html",
    "json",
    "table",
    "yaml",
  ]);
  const fetchFlags = await complete(bash, ["aicr", "-n", "x", "daemonset", "fetch", "--"]);
  for (const flag of ["--report", "--junit", "--transport", "--context", "--namespace"]) {
    assert.ok(fetchFlags.includes(flag), `${flag} in ${fetchFlags.join(" ")}`);
  }
  assert.deepEqual(await complete(bash, ["aicr", "daemonset", "fetch", "--transport", "p"]), [
    "proxy",
  ]);
});

Deno.test("completion zsh and fish: the bash script through bashcompinit, native fish lines", async () => {
  const zsh = await script("zsh");
  assert.match(zsh, /^#compdef aicr\n/);
  assert.match(zsh, /autoload -U \+X bashcompinit && bashcompinit/);
  assert.match(zsh, /complete -F _aicr_complete aicr/);
  const fish = await script("fish");
  assert.match(fish, /complete -c aicr -f -n '__fish_use_subcommand' -a 'snapshot'/);
  assert.match(fish, /complete -c aicr -f -n '__fish_seen_subcommand_from daemonset' -a 'fetch'/);
  assert.match(
    fish,
    /complete -c aicr -n '__fish_seen_subcommand_from snapshot' -l os -x -a 'ubuntu rhel cos amazonlinux ol talos'/,
  );
  assert.match(fish, /-l format -s t -x -a 'table yaml json html'/);
});

Deno.test("completion: an unknown shell is exit 2; every verb's help has Examples", async () => {
  const h = harness();
  assert.equal(await runCli(["completion", "tcsh"], h.deps), 2);
  for (
    const verb of [
      ["snapshot"],
      ["agent"],
      ["cleanup"],
      ["diff"],
      ["daemon"],
      ["daemonset"],
      ["daemonset", "install"],
      ["daemonset", "fetch"],
      ["daemonset", "uninstall"],
      ["daemonset", "render"],
      ["completion"],
      ["version"],
    ]
  ) {
    const help = harness();
    assert.equal(await runCli([...verb, "--help"], help.deps), 0, verb.join(" "));
    assert.match(help.stdout(), /\nExamples:\n {2}\S/, verb.join(" "));
    assert.match(help.stdout(), new RegExp(`aicr ${verb.join(" ")}`), verb.join(" "));
  }
});
