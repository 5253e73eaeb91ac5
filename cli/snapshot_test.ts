import assert from "node:assert/strict";
import { NOOP_LOGGER } from "../log.ts";
import { NoKubeconfigError } from "../kube/mod.ts";
import type { CliDeps } from "./context.ts";
import { runCli } from "./mod.ts";

function fakeDeps(): { deps: CliDeps; out: string[]; err: string[]; connects: number[] } {
  const out: string[] = [];
  const err: string[] = [];
  const connects: number[] = [];
  const deps: CliDeps = {
    stdout: { write: (t) => out.push(t) },
    stderr: { write: (t) => err.push(t) },
    env: () => undefined,
    cwd: "/nonexistent-cwd",
    now: () => new Date("2026-12-02T00:00:00Z"),
    stdoutIsTerminal: false,
    stderrIsTerminal: false,
    signal: new AbortController().signal,
    makeLogger: () => NOOP_LOGGER,
    connectKube: () => {
      connects.push(1);
      throw new Error("the cluster must not be contacted for bad input");
    },
    collectorDeps: () => {
      throw new Error("nothing is collected for bad input");
    },
  };
  return { deps, out, err, connects };
}

const BAD_INPUT: { name: string; args: string[]; message: RegExp }[] = [
  {
    name: "a repeated single-value flag",
    args: ["-n", "a", "-n", "b"],
    message: /flag --namespace can only be specified once/,
  },
  {
    name: "a cm:// output in another namespace",
    args: ["-n", "a", "-o", "cm://b/x"],
    message: /namespace must match '--namespace'/,
  },
  {
    name: "a malformed cm:// output",
    args: ["-o", "cm://only-namespace"],
    message: /'cm:\/\/<namespace>\/<name>'/,
  },
  { name: "a malformed toleration", args: ["--toleration", "key=value"], message: /--toleration/ },
  {
    name: "a toleration with a lower-case effect",
    args: ["--toleration", "k=v:noschedule"],
    message: /--toleration/,
  },
  {
    name: "a malformed node selector",
    args: ["--node-selector", "novalue"],
    message: /--node-selector/,
  },
  { name: "a malformed resource list", args: ["--requests", "cpu=lots"], message: /--requests/ },
  { name: "a malformed timeout", args: ["--timeout", "5 minutes"], message: /--timeout/ },
  {
    name: "an unknown --os",
    args: ["--os", "windows"],
    message: /'--os' as it must be one of ubuntu, rhel, cos, amazonlinux, ol, talos/,
  },
  {
    name: "--require-gpu with --runtime-class",
    args: ["--require-gpu", "--runtime-class", "nvidia"],
    message: /prefer --runtime-class/,
  },
  {
    name: "an unknown format",
    args: ["--format", "wide"],
    message: /'--format' as it must be 'yaml', 'json' or 'table'/,
  },
  {
    name: "a namespace that is not a DNS label",
    args: ["-n", "Not_Valid"],
    message: /--namespace/,
  },
  {
    name: "--privileged with a non-boolean value",
    args: ["--privileged=maybe"],
    message: /'--privileged' as it must be 'true' or 'false'/,
  },
  {
    name: "--discover-network, which is not implemented",
    args: ["--discover-network"],
    message: /live k8s-launch-kit discovery .* is not implemented/,
  },
  {
    name: "--cluster-config, which is not implemented",
    args: ["--cluster-config", "c.yaml"],
    message: /--cluster-config/,
  },
  {
    name: "--host-root, which only a local collection reads",
    args: ["--host-root", "/srv/fixture"],
    message: /Cannot use '--host-root' with a Job run .*'aicr agent --host-root \.\.\.'/,
  },
  {
    name: "--systemd-unit, which only a local collection reads",
    args: ["--systemd-unit", "crio"],
    message: /Cannot use '--systemd-unit' with a Job run/,
  },
];

for (const { name, args, message } of BAD_INPUT) {
  Deno.test(`aicr snapshot rejects ${name} with exit 2 before contacting the cluster`, async () => {
    const { deps, err, connects } = fakeDeps();
    const code = await runCli(["snapshot", ...args], deps);
    assert.equal(code, 2, err.join(""));
    assert.match(err.join(""), message);
    assert.equal(connects.length, 0);
  });
}

Deno.test("aicr snapshot --help lists the documented flags and the exit codes", async () => {
  const { deps, out } = fakeDeps();
  assert.equal(await runCli(["snapshot", "--help"], deps), 0);
  const help = out.join("");
  for (
    const flag of [
      "--kubeconfig",
      "--namespace",
      "--image",
      "--image-pull-secret",
      "--job-name",
      "--service-account-name",
      "--add-roles-to-service-account",
      "--node-selector",
      "--toleration",
      "--timeout",
      "--no-cleanup",
      "--privileged",
      "--require-gpu",
      "--runtime-class",
      "--os",
      "--requests",
      "--limits",
      "--cluster-config",
      "--oke-addons",
      "--aks-gpu-pools",
      "--gke-gpu-pools",
      "--discover-network",
      "--output",
      "--format",
    ]
  ) assert.ok(help.includes(flag), `help lacks ${flag}`);
});

Deno.test("aicr snapshot refuses a cm:// in another namespace than --namespace, in these words", async () => {
  // Was a manifests/job.ts test; the CLI now parses -o once and checks it against -n itself.
  const { deps, err, connects } = fakeDeps();
  const code = await runCli(["snapshot", "-o", "cm://gpu-operator/aicr-snapshot"], deps);
  assert.equal(code, 2);
  assert.match(
    err.join(""),
    /^error: Cannot write the snapshot to 'cm:\/\/gpu-operator\/aicr-snapshot' as its namespace must match '--namespace' \(the agent's Role grants ConfigMaps only there\): current value is 'default'\n/,
  );
  assert.equal(connects.length, 0);
});

Deno.test("aicr snapshot --add-roles-to-service-account refuses a namespace that is not a DNS label", async () => {
  // Was a manifests/names.ts test (renderedClusterRoleName); the CLI checks -n once.
  const { deps, err, connects } = fakeDeps();
  const code = await runCli(
    ["snapshot", "--add-roles-to-service-account", "sa", "-n", "a.b"],
    deps,
  );
  assert.equal(code, 2);
  assert.match(err.join(""), /'--namespace'/);
  assert.equal(connects.length, 0);
});

Deno.test("global flags are declared once on the root and reach every verb, before or after it", async () => {
  for (
    const args of [
      ["-n", "Not_Valid", "snapshot"],
      ["snapshot", "--namespace", "Not_Valid"],
      ["cleanup", "--run-id", "20260102-150405-0123456789abcdef", "-n", "Not_Valid"],
      ["daemonset", "uninstall", "-n", "Not_Valid"],
      ["daemonset", "fetch", "-n", "Not_Valid"],
    ]
  ) {
    const { deps, err, connects } = fakeDeps();
    assert.equal(await runCli(args, deps), 2, args.join(" "));
    assert.match(err.join(""), /'--namespace' as it must be a DNS-1123 label/, args.join(" "));
    assert.equal(connects.length, 0);
  }
});

/** The flags listed under each heading of a help text (a heading ends with ':'). */
function helpGroups(help: string): Map<string, string[]> {
  const groups = new Map<string, string[]>();
  let heading = "";
  for (const line of help.split("\n")) {
    if (/^\S.*:$/.test(line)) heading = line;
    const flag = /^ {2}(?:-\w, )?(--[\w-]+)/.exec(line)?.[1];
    if (flag && heading) groups.set(heading, [...(groups.get(heading) ?? []), flag]);
  }
  return groups;
}

Deno.test("aicr snapshot --help groups the Job verb's flags and hides the local-collection ones", async () => {
  const { deps, out } = fakeDeps();
  assert.equal(await runCli(["snapshot", "--help"], deps), 0);
  const help = out.join("");
  const groups = helpGroups(help);
  assert.deepEqual([...groups.keys()], [
    "Output Options:",
    "Agent Job Options:",
    "Provider Data Options (files this CLI reads, merged into the K8s measurement):",
    "Other Modes (each instead of a run):",
    "Options:",
    "Global Options:",
  ]);
  for (const flag of ["--image", "--node-selector", "--timeout", "--privileged", "--run-id"]) {
    assert.ok(groups.get("Agent Job Options:")?.includes(flag), flag);
  }
  assert.deepEqual(groups.get("Output Options:")?.slice(0, 2), ["--output", "--format"]);
  assert.deepEqual(
    groups.get("Provider Data Options (files this CLI reads, merged into the K8s measurement):"),
    ["--oke-addons", "--aks-gpu-pools", "--gke-gpu-pools"],
  );
  assert.deepEqual(groups.get("Options:"), ["--help"]);
  const listed = [...groups.values()].flat();
  for (const flag of ["--host-root", "--systemd-unit"]) {
    assert.ok(!listed.includes(flag), `${flag} is not a Job flag`);
  }
  // They are named once, pointing at the verb that takes them.
  assert.match(
    help,
    /Local collection flags \(--host-root, --systemd-unit\) belong to 'aicr agent'/,
  );

  const agent = fakeDeps();
  assert.equal(await runCli(["agent", "--help"], agent.deps), 0);
  const agentFlags = [...helpGroups(agent.out.join("")).values()].flat();
  for (const flag of ["--host-root", "--systemd-unit"]) assert.ok(agentFlags.includes(flag), flag);
});

Deno.test("aicr snapshot inside the agent pod still takes --host-root and --systemd-unit", async () => {
  const { deps, err } = fakeDeps();
  const hosts: (string | undefined)[] = [];
  const code = await runCli(["snapshot", "--host-root", "/srv/fixture", "--systemd-unit", "crio"], {
    ...deps,
    env: (name) => name === "AICR_AGENT_MODE" ? "true" : undefined,
    connectKube: () => {
      throw new NoKubeconfigError();
    },
    collectorDeps: ({ hostRoot }) => {
      hosts.push(hostRoot);
      throw new Error("collection reached");
    },
  });
  assert.notEqual(code, 2, err.join(""));
  assert.doesNotMatch(err.join(""), /with a Job run/);
  assert.deepEqual(hosts, ["/srv/fixture"], err.join(""));
});
