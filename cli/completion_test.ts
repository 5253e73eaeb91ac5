import assert from "node:assert/strict";
import { fakeCli } from "../tests/fakes/cli.ts";
import { runCli } from "./mod.ts";
import { completeInBash } from "../tests/_bash_completion.ts";
import { createFakeKube } from "../tests/fakes/kube.ts";
import { KubeApiError } from "../kube/mod.ts";

const harness = () => fakeCli();

async function script(shell: string): Promise<string> {
  const h = harness();
  assert.equal(await runCli(["completion", shell], h.deps), 0, shell);
  return h.stdout();
}

/** Runs the bash completion for a command line (the last word is the one being completed). */
async function complete(
  bashScript: string,
  words: string[],
  options: { cwd?: string; stderr?: string[] } = {},
): Promise<string[]> {
  const got = await completeInBash(bashScript, words, options);
  options.stderr?.push(got.stderr);
  return got.words.sort();
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

/** A stand-in `aicr` for the completion's namespace call: records its arguments, then acts. */
async function fakeAicr(dir: string, body: string): Promise<string> {
  const path = `${dir}/aicr`;
  await Deno.writeTextFile(path, `#!/bin/bash\necho "$*" >> "${dir}/calls"\n${body}\n`);
  await Deno.chmod(path, 0o755);
  return path;
}

Deno.test("completion bash: after -n the cluster's namespaces, never verbs; the call gets --kubeconfig and --context", async () => {
  const bash = await script("bash");
  const dir = await Deno.makeTempDir();
  try {
    const aicr = await fakeAicr(dir, 'printf "kube-system\\nteam-a\\nteam-b\\n"');
    assert.deepEqual(await complete(bash, [aicr, "-n", ""]), ["kube-system", "team-a", "team-b"]);
    assert.deepEqual(
      await complete(bash, [
        aicr,
        "--kubeconfig",
        "/tmp/kc",
        "--context",
        "lab",
        "snapshot",
        "-n",
        "team-",
      ]),
      ["team-a", "team-b"],
    );
    assert.deepEqual(await complete(bash, [aicr, "daemonset", "fetch", "--namespace", "k"]), [
      "kube-system",
    ]);
    const calls = (await Deno.readTextFile(`${dir}/calls`)).trim().split("\n");
    assert.deepEqual(calls, [
      "__complete namespaces",
      "__complete namespaces --kubeconfig /tmp/kc --context lab",
      "__complete namespaces",
    ]);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("completion bash: a namespace call that fails or hangs offers nothing, says nothing, and ends", async () => {
  const bash = await script("bash");
  const dir = await Deno.makeTempDir();
  try {
    const failing = await fakeAicr(dir, 'echo "error: no cluster" >&2; exit 6');
    const stderr: string[] = [];
    assert.deepEqual(await complete(bash, [failing, "-n", ""], { stderr }), []);
    assert.deepEqual(stderr, [""]);
    // A cluster that never answers: the shell's timeout ends the call (3 s), nothing offered.
    const hanging = await fakeAicr(dir, "exec sleep 60");
    const guard = setTimeout(() => assert.fail("the completion did not end"), 20_000);
    try {
      assert.deepEqual(await complete(bash, [hanging, "snapshot", "-n", ""], { stderr }), []);
    } finally {
      clearTimeout(guard);
    }
    assert.deepEqual(stderr, ["", ""]);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("completion bash: file flags complete paths, folder flags folders, other value flags nothing", async () => {
  const bash = await script("bash");
  const dir = await Deno.makeTempDir();
  try {
    await Deno.writeTextFile(`${dir}/before.yaml`, "");
    await Deno.writeTextFile(`${dir}/after.yaml`, "");
    await Deno.mkdir(`${dir}/fleet`);
    const cwd = { cwd: dir };
    // Files after -b/--baseline, not the diff's flags (as before).
    assert.deepEqual(await complete(bash, ["aicr", "diff", "--baseline", ""], cwd), [
      "after.yaml",
      "before.yaml",
      "fleet",
    ]);
    assert.deepEqual(await complete(bash, ["aicr", "diff", "-b", "be"], cwd), ["before.yaml"]);
    for (
      const words of [
        ["aicr", "snapshot", "-o", "a"],
        ["aicr", "--kubeconfig", "a"],
        ["aicr", "snapshot", "--config", "a"],
        ["aicr", "daemonset", "baseline", "set", "-f", "a"],
        ["aicr", "diff", "--target", "a"],
      ]
    ) assert.deepEqual(await complete(bash, words, cwd), ["after.yaml"], words.join(" "));
    assert.deepEqual(await complete(bash, ["aicr", "image", "save", "--from", ""], cwd), ["fleet"]);
    // A value only the user knows: neither verbs nor flags.
    for (
      const words of [
        ["aicr", "snapshot", "--image", ""],
        ["aicr", "--context", ""],
        ["aicr", "daemonset", "install", "--name", ""],
        ["aicr", "snapshot", "--timeout", "-"],
      ]
    ) assert.deepEqual(await complete(bash, words, cwd), [], words.join(" "));
    // After the value, verbs and flags again.
    assert.deepEqual(await complete(bash, ["aicr", "-n", "x", "da"]), ["daemon", "daemonset"]);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("completion fish: namespaces from the cluster (bounded), files for file flags, no files for the rest", async () => {
  const fish = await script("fish");
  assert.match(
    fish,
    /complete -c aicr -l namespace -s n -x -a '\(timeout 3 aicr __complete namespaces 2>\/dev\/null\)'/,
  );
  assert.match(fish, /-n '__fish_seen_subcommand_from diff' -l baseline -s b -r -F /);
  assert.match(fish, /-l kubeconfig -s k -r -F /);
  assert.match(fish, /-n '__fish_seen_subcommand_from snapshot' -l image -x -d /);
  assert.match(fish, /-l from -x -a '\(__fish_complete_directories\)'/);
  assert.doesNotMatch(fish, /__complete'/, "the hidden verb is not offered");
});

Deno.test("aicr __complete namespaces prints the cluster's namespaces; without a cluster nothing, exit 0", async () => {
  const fake = createFakeKube();
  for (const name of ["team-b", "default", "team-a"]) fake.put("Namespace", { metadata: { name } });
  const seen: unknown[] = [];
  const h = fakeCli({
    connectKube: (source) => {
      seen.push(source);
      return fake.client;
    },
  });
  assert.equal(
    await runCli(["__complete", "namespaces", "--kubeconfig", "/kc", "--context", "lab"], h.deps),
    0,
  );
  assert.equal(h.stdout(), "default\nteam-a\nteam-b\n");
  assert.deepEqual(seen, [{ kubeconfig: "/kc", context: "lab" }]);
  assert.deepEqual(fake.calls.map((c) => `${c.method} ${c.kind}`), ["list Namespace"]);

  const down = fakeCli({
    connectKube: () => {
      throw new KubeApiError("Cannot reach Kubernetes API server", 0, "ConnectionFailure");
    },
  });
  assert.equal(await runCli(["__complete", "namespaces"], down.deps), 0);
  assert.equal(down.stdout(), "");
  assert.equal(down.stderr(), "");
  // Hidden from the help and from the scripts' verbs.
  const help = harness();
  assert.equal(await runCli(["--help"], help.deps), 0);
  assert.doesNotMatch(help.stdout(), /__complete/);
});

Deno.test("completion bash: --request-timeout and -q/--quiet everywhere; no verb after the timeout", async () => {
  const bash = await script("bash");
  for (const words of [["aicr", "--"], ["aicr", "snapshot", "--"], ["aicr", "diff", "--"]]) {
    const flags = await complete(bash, words);
    for (const flag of ["--request-timeout", "--quiet"]) {
      assert.ok(flags.includes(flag), `${flag} after ${words.join(" ")}: ${flags.join(" ")}`);
    }
  }
  assert.ok((await complete(bash, ["aicr", "-"])).includes("-q"));
  // The timeout takes a value: no verb or flag is offered for it.
  const after = await complete(bash, ["aicr", "--request-timeout", ""]);
  assert.ok(!after.includes("snapshot"), after.join(" "));
  // After it and its value, the verbs come back.
  assert.ok(
    (await complete(bash, ["aicr", "--request-timeout", "30s", "sn"])).includes("snapshot"),
  );
});
