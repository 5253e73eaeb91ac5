import assert from "node:assert/strict";
import { UsageError } from "../errors.ts";
import { createLogger } from "../log.ts";
import { parse as parseYaml, parseAllDocuments } from "yaml";
import type { CliDeps } from "./context.ts";
import { createProgram } from "./mod.ts";
import { recordedSettingFlags } from "./daemonset.ts";

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

Deno.test("daemonset render: one YAML stream of the nineteen objects, without contacting a cluster", async () => {
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
    "ServiceAccount",
    "ClusterRole",
    "ClusterRoleBinding",
    "Role",
    "RoleBinding",
    "Secret",
    "ConfigMap",
    "DaemonSet",
    "Lease",
    "Deployment",
    "Service",
  ]);
  const signer = docs.find((d) => d.kind === "Deployment");
  assert.equal(signer.spec.template.spec.containers[0].image, "example.com/aicr:v1");
  assert.deepEqual(signer.spec.template.spec.containers[0].args.slice(0, 6), [
    "daemonset",
    "signer",
    "--namespace",
    "gpu-ops",
    "--name",
    "aicr-daemon",
  ]);
  assert.equal(signer.spec.replicas, 2);
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

async function renderIn(cwd: string, args: string[]): Promise<string> {
  const h = harness();
  await run({ ...h.deps, cwd }, ["render", "--image", "example.com/aicr:v1", ...args]);
  assert.equal(h.connects(), 0);
  return h.stdout();
}

Deno.test("daemonset render: -o writes the file (private with a CA key), -t json is one v1 List", async () => {
  const dir = await Deno.makeTempDir();
  try {
    assert.equal(await renderIn(dir, ["-o", "aicr.yaml"]), "");
    const written = await Deno.readTextFile(`${dir}/aicr.yaml`);
    assert.ok(written.includes("kind: DaemonSet"));
    assert.equal((await Deno.stat(`${dir}/aicr.yaml`)).mode! & 0o777, 0o600, "the CA key is in it");
    const list = JSON.parse(await renderIn(dir, ["-t", "json"]));
    assert.equal(list.kind, "List");
    assert.deepEqual(
      list.items.map((o: { kind: string }) => o.kind),
      parseAllDocuments(written).map((d) => d.toJS().kind),
    );
    await assert.rejects(
      renderIn(dir, ["-t", "toml"]),
      /'--format' as it must be 'yaml' or 'json'/,
    );
    await assert.rejects(renderIn(dir, ["-o", "json"]), /-t\/--format/);
    // Both at once: the List goes to the file, nothing to stdout.
    assert.equal(await renderIn(dir, ["-o", "aicr.json", "-t", "json"]), "");
    const fromFile = JSON.parse(await Deno.readTextFile(`${dir}/aicr.json`));
    assert.equal(fromFile.kind, "List");
    assert.deepEqual(
      fromFile.items.map((o: { kind: string }) => o.kind),
      list.items.map((o: { kind: string }) => o.kind),
    );
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("daemonset render --ca-secret: a re-render from the last output is byte for byte the same", async () => {
  const dir = await Deno.makeTempDir();
  try {
    await renderIn(dir, ["-o", "first.yaml"]);
    await renderIn(dir, ["-o", "second.yaml", "--ca-secret", "first.yaml"]);
    // In place, as a GitOps repository re-renders.
    await renderIn(dir, ["-o", "first.yaml", "--ca-secret", "first.yaml"]);
    const first = await Deno.readTextFile(`${dir}/first.yaml`);
    assert.equal(await Deno.readTextFile(`${dir}/second.yaml`), first);
    // A fresh render makes another CA: the flag is what keeps it.
    assert.notEqual(await renderIn(dir, []), first);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("daemonset render --existing-ca: no Secret, the ConfigMap holds the certificate; bad CAs refused", async () => {
  const dir = await Deno.makeTempDir();
  const openssl = (...args: string[]) =>
    new Deno.Command("openssl", { args, cwd: dir, stdout: "null", stderr: "null" }).outputSync();
  try {
    const docs = parseAllDocuments(await renderIn(dir, [])).map((d) => d.toJS());
    const caCert: string = docs.find((d) => d.kind === "ConfigMap").data["ca.crt"];
    await Deno.writeTextFile(`${dir}/ca.crt`, caCert);
    const kept = parseAllDocuments(await renderIn(dir, ["--existing-ca", "ca.crt"])).map((d) =>
      d.toJS()
    );
    assert.equal(kept.filter((d) => d.kind === "Secret").length, 0);
    assert.equal(kept.find((d) => d.kind === "ConfigMap").data["ca.crt"], caCert);
    assert.ok(!JSON.stringify(kept).includes("PRIVATE KEY"));
    // The CA ConfigMap as kubectl gives it works too.
    await Deno.writeTextFile(
      `${dir}/cm.yaml`,
      `apiVersion: v1\nkind: ConfigMap\nmetadata: {name: aicr-daemon-ca}\ndata:\n  ca.crt: ${
        JSON.stringify(caCert)
      }\n`,
    );
    assert.ok((await renderIn(dir, ["--existing-ca", "cm.yaml"])).includes("aicr-daemon-ca"));

    const secret = docs.find((d) => d.kind === "Secret");
    const keyPem = atob(secret.data["tls.key"]);
    await Deno.writeTextFile(`${dir}/both.pem`, caCert + keyPem);
    openssl(
      "req",
      "-x509",
      "-newkey",
      "rsa:2048",
      "-nodes",
      "-keyout",
      "rsa.key",
      "-out",
      "rsa.crt",
      "-days",
      "1",
      "-subj",
      "/CN=rsa",
    );
    openssl("ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", "ec.key");
    openssl(
      "req",
      "-new",
      "-x509",
      "-key",
      "ec.key",
      "-out",
      "leaf.crt",
      "-days",
      "1",
      "-subj",
      "/CN=leaf",
      "-addext",
      "basicConstraints=critical,CA:FALSE",
    );
    const otherKey = Deno.readTextFileSync(`${dir}/ec.key`);
    await Deno.writeTextFile(
      `${dir}/mismatch.yaml`,
      `apiVersion: v1\nkind: Secret\nmetadata: {name: aicr-daemon-signer}\ndata:\n  tls.crt: ${
        btoa(caCert)
      }\n  tls.key: ${btoa(otherKey)}\n`,
    );
    for (
      const [args, message] of [
        [["--existing-ca", "both.pem"], /holds a private key/],
        [["--existing-ca", "rsa.crt"], /must be ECDSA P-256/],
        [["--existing-ca", "leaf.crt"], /is not a CA/],
        [["--existing-ca", "missing.crt"], /Cannot read '--existing-ca' file 'missing.crt'/],
        [["--ca-secret", "ca.crt"], /holds no Secret 'aicr-daemon-signer'/],
        [["--ca-secret", "mismatch.yaml"], /'tls.key' does not belong to its 'tls.crt'/],
        [["--ca-secret", "mismatch.yaml", "--existing-ca", "ca.crt"], /together/],
      ] as const
    ) {
      await assert.rejects(renderIn(dir, [...args]), (error: unknown) => {
        assert.ok(error instanceof UsageError, `${args.join(" ")}: ${error}`);
        assert.match((error as Error).message, message);
        return true;
      });
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("daemonset render offers none of install's flags (it waits for nothing and asks no cluster)", async () => {
  for (
    const flag of [
      "--timeout=1m",
      "--no-wait",
      "--create-namespace",
      "--report=-",
      "--no-service-monitor",
    ]
  ) {
    await assert.rejects(renderIn("/", [flag]), /unknown option/, flag);
  }
});

Deno.test("daemonset render: --no-signer leaves the signer out, --signer-replicas sets its replicas", async () => {
  const without = harness();
  await run(without.deps, ["render", "-n", "gpu-ops", "--no-signer"]);
  const kinds = parseAllDocuments(without.stdout()).map((d) => d.toJS().kind);
  assert.equal(kinds.length, 12);
  assert.ok(!kinds.includes("Deployment") && !kinds.includes("Lease"));
  const three = harness();
  await run(three.deps, ["render", "-n", "gpu-ops", "--signer-replicas", "3"]);
  const signer = parseAllDocuments(three.stdout()).map((d) => d.toJS()).find((d) =>
    d.kind === "Deployment"
  );
  assert.equal(signer.spec.replicas, 3);
  await assert.rejects(
    run(harness().deps, ["render", "-n", "gpu-ops", "--signer-replicas", "0"]),
    /--signer-replicas' as it must be a whole number from 1 to 10/,
  );
});

Deno.test("daemonset render: the DaemonSet records every flag that shapes the objects, bar the image", async () => {
  const h = harness();
  await run(h.deps, [
    "render",
    "--image",
    "example.com/aicr:v1",
    "--port",
    "9443",
    "--node-selector",
    "pool=gpu",
    "--toleration",
    "gpu:NoSchedule",
    "--baseline-interval",
    "30s",
    "--priority-class-name",
    "gpu-infra",
    "--no-signer",
  ]);
  const ds = parseAllDocuments(h.stdout()).map((d) => d.toJS()).find((d) => d.kind === "DaemonSet");
  const recorded = JSON.parse(ds.metadata.annotations["aicr.run/install-settings"]);
  assert.deepEqual(recorded, {
    allNodes: false,
    baselineInterval: "30s",
    nodeSelector: ["pool=gpu"],
    port: "9443",
    priorityClassName: "gpu-infra",
    privileged: "true",
    service: true,
    serviceMonitor: false,
    signer: false,
    signerReplicas: "2",
    toleration: ["gpu:NoSchedule"],
  });
  // Read off install's own flag declarations: each one of what the daemon is, none hand-listed.
  const install = (await createProgram(h.deps)).commands.find((c) => c.name() === "daemonset")!
    .commands.find((c) => c.name() === "install")!;
  const shaping = install.options.map((o) => o.attributeName()).filter((k) =>
    !["name", "image", "imagePlatforms", "timeout", "wait", "createNamespace"].includes(k) &&
    !/^report|^junit/.test(k)
  );
  for (const key of shaping) {
    assert.ok(
      key in recorded ||
        ["imagePullSecret", "runtimeClass", "os", "requests", "limits", "nodeAffinity"]
          .includes(key),
      `install's --${key} is recorded`,
    );
  }
});

Deno.test("docs/daemonset.md names exactly the flags an install records for its upgrade", async () => {
  const text = await Deno.readTextFile(new URL("../docs/daemonset.md", import.meta.url));
  const start = text.indexOf("flag that shapes the objects:");
  const end = text.indexOf("`upgrade` reads them back", start);
  assert.ok(start >= 0 && end > start, "the paragraph listing the recorded flags is in the doc");
  const named = [...text.slice(start, end).matchAll(/`(--[a-z][a-z-]*)`/g)].map((m) => m[1]);
  assert.deepEqual([...named].sort(), recordedSettingFlags().sort());
});
