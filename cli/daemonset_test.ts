import assert from "node:assert/strict";
import { UsageError } from "../errors.ts";
import { createLogger } from "../log.ts";
import { parse as parseYaml, parseAllDocuments } from "yaml";
import type { CliDeps } from "./context.ts";
import { createProgram } from "./mod.ts";

/** A document that is not a Snapshot (the fixture `aicr diff` refuses too). */
const MALFORMED = new URL("../snapshot/testdata/invalid-kind.yaml", import.meta.url).pathname;

function harness(): { deps: CliDeps; stdout: () => string; connects: () => number } {
  let out = "";
  let connects = 0;
  const deps: CliDeps = {
    stdout: { write: (text) => void (out += text) },
    stderr: { write: () => {} },
    env: () => undefined,
    cwd: "/",
    now: () => new Date("2026-12-02T18:00:00Z"),
    stdoutIsTerminal: false,
    stderrIsTerminal: false,
    signal: new AbortController().signal,
    makeLogger: () => createLogger({ write: () => {} }),
    connectKube: () => {
      connects++;
      throw new Error("the cluster must not be contacted");
    },
    collectorDeps: () => {
      throw new Error("no collectors here");
    },
  };
  return { deps, stdout: () => out, connects: () => connects };
}

/** Runs `aicr daemonset ...` through the root program, which declares -n and the cluster flags. */
async function run(deps: CliDeps, args: string[]): Promise<void> {
  await (await createProgram(deps)).parseAsync(["daemonset", ...args], { from: "user" });
}

Deno.test("daemonset render: one YAML stream of the twelve objects, without contacting a cluster", async () => {
  const h = harness();
  await run(h.deps, [
    "render",
    "-n",
    "gpu-ops",
    "--image",
    "example.com/aicr:v1",
    "--port",
    "9443",
  ]);
  const docs = parseAllDocuments(h.stdout()).map((d) => d.toJS());
  assert.deepEqual(docs.map((d) => d.kind), [
    "ServiceAccount",
    "ClusterRole",
    "ClusterRoleBinding",
    "Role",
    "RoleBinding",
    "ServiceAccount",
    "ClusterRole",
    "ClusterRoleBinding",
    "Secret",
    "ConfigMap",
    "DaemonSet",
    "Service",
  ]);
  const ds = docs.find((d) => d.kind === "DaemonSet");
  assert.equal(ds.metadata.namespace, "gpu-ops");
  assert.equal(ds.spec.template.spec.containers[0].image, "example.com/aicr:v1");
  assert.equal(ds.spec.template.spec.containers[0].ports[0].containerPort, 9443);
  assert.deepEqual(ds.spec.template.spec.nodeSelector, { "nvidia.com/gpu.present": "true" });
  assert.equal(h.connects(), 0);
  assert.ok(parseYaml(h.stdout().split("---\n")[1] ?? ""), "each document parses alone");
});

Deno.test("daemonset: bad flags are usage errors before any cluster contact", async () => {
  for (
    const [args, message] of [
      [["install", "--port", "70000"], /'--port' as it must be a whole number from 1 to 65535/],
      [["install", "--all-nodes", "--node-selector", "a=b"], /'--all-nodes' together/],
      [["install", "-n", "Bad_NS"], /'--namespace' as it must be a DNS-1123 label/],
      [["install", "--privileged", "maybe"], /'--privileged' as it must be 'true' or 'false'/],
      [
        ["fetch", "--transport", "carrier-pigeon"],
        /'--transport' as it must be auto, direct or proxy/,
      ],
      [["fetch", "--concurrency", "0"], /'--concurrency' as it must be at least 1/],
      [["uninstall", "--name", "UPPER"], /Cannot name the daemon/],
      [
        ["fetch", "-o", "-", "--report", "-"],
        /Cannot write -o - and --report - to stdout together/,
      ],
      [["fetch", "--report", "-", "--junit", "-"], /--report - and --junit - to stdout together/],
      [["install", "--report", "/nonexistent-dir/r.json"], /its directory does not exist/],
      [["uninstall", "--report", "/"], /Cannot write the report to '\/' as it is a directory/],
      [["baseline", "set"], /exactly one of '-f\/--file' and '--from-node'/],
      [["baseline", "set", "-f", "a.yaml", "--from-node", "n"], /exactly one of/],
      [["baseline", "delete"], /exactly one of '--cohort' and '--all'/],
      [
        ["baseline", "set", "-f", MALFORMED],
        /field 'kind' \(line 1\) must be 'Snapshot': current value is 'ConfigMap'/,
      ],
    ] as const
  ) {
    const h = harness();
    await assert.rejects(run(h.deps, [...args]), (error: unknown) => {
      assert.ok(error instanceof UsageError, `${args.join(" ")}: ${error}`);
      assert.match((error as Error).message, message);
      return true;
    });
    assert.equal(h.connects(), 0, args.join(" "));
  }
});
