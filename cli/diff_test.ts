import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Command, CommanderError } from "commander";
import { exitCodeOf, formatError } from "../errors.ts";
import type { KubeClient } from "../kube/mod.ts";
import { NoKubeconfigError } from "../kube/mod.ts";
import { createFakeKube } from "../tests/fakes/kube.ts";
import { encodeSnapshot, MAX_DOCUMENT_BYTES } from "../snapshot/mod.ts";
import type { Snapshot } from "../snapshot/mod.ts";
import { makeNodeSnapshot, setReading } from "../snapshot/testdata/generate.ts";
import { makeMixedFleet } from "../snapshot/testdata/mixed_fleet.ts";
import { createFsSourceLoader } from "../controller/mod.ts";
import { diffCommand } from "./diff.ts";
import type { DiffDeps } from "./diff.ts";

const TESTDATA = new URL("../snapshot/testdata/", import.meta.url).pathname;
const FIXTURE = join(TESTDATA, "h100-gpu-node-1.yaml");
const CLUSTER = ["gpu-node-1", "gpu-node-2", "gpu-node-3"];

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

interface RunOptions {
  cwd?: string;
  stdin?: string;
  configMaps?: Record<string, Record<string, string>>;
  terminal?: boolean;
  /** Use the default loader with this cluster connection instead of the fake loader. */
  connectKube?: () => KubeClient;
}

/** Runs `aicr diff ...` the way cli/mod.ts runs a verb: errors mapped to exit codes once. */
async function run(args: string[], options: RunOptions = {}): Promise<Run> {
  let stdout = "";
  let stderr = "";
  const deps: DiffDeps = {
    stdout: { write: (t) => void (stdout += t) },
    stderr: { write: (t) => void (stderr += t) },
    env: () => undefined,
    cwd: options.cwd ?? TESTDATA,
    now: () => new Date("2026-04-02T08:00:00Z"),
    stdoutIsTerminal: options.terminal ?? false,
    ...(options.connectKube ? { connectKube: options.connectKube } : {}),
  };
  if (!options.connectKube) {
    deps.snapshotSources = () =>
      createFsSourceLoader({
        stdin: [new TextEncoder().encode(options.stdin ?? "")],
        readConfigMap: async (namespace, name) => {
          await Promise.resolve();
          return options.configMaps?.[`${namespace}/${name}`];
        },
      });
  }
  const out = {
    writeOut: (t: string) => void (stdout += t),
    writeErr: (t: string) => void (stderr += t),
  };
  const program = new Command("aicr").exitOverride().configureOutput(out);
  program.addCommand(diffCommand(deps).exitOverride().configureOutput(out));
  try {
    await program.parseAsync(["diff", ...args], { from: "user" });
    return { code: 0, stdout, stderr };
  } catch (error) {
    if (error instanceof CommanderError) {
      return { code: error.exitCode === 0 ? 0 : 2, stdout, stderr };
    }
    stderr += formatError(error) + "\n";
    return { code: exitCodeOf(error), stdout, stderr };
  }
}

function resnapshot(node = "gpu-node-1", boot = 9): Snapshot {
  return makeNodeSnapshot(node, {
    clusterNodes: CLUSTER,
    boot,
    timestamp: new Date("2026-04-02T08:00:00Z"),
  });
}

function withTemp<T>(fn: (dir: string) => Promise<T>): Promise<T> {
  const dir = mkdtempSync(join(tmpdir(), "aicr-diff-"));
  return fn(dir).finally(() => rmSync(dir, { recursive: true, force: true }));
}

Deno.test("aicr diff exits 0 with NO DRIFT for an unchanged node re-snapshotted after a reboot", async () => {
  await withTemp(async (dir) => {
    writeFileSync(join(dir, "after.yaml"), encodeSnapshot(resnapshot()));
    const r = await run(["--baseline", FIXTURE, "--target", "after.yaml", "--fail-on-drift"], {
      cwd: dir,
    });
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /NO CHANGES\n\nNO DRIFT\n$/);
    assert.equal(r.stderr, "");
  });
});

Deno.test("aicr diff --fail-on-drift exits 1 after writing the table of a driver upgrade", async () => {
  await withTemp(async (dir) => {
    writeFileSync(
      join(dir, "after.yaml"),
      encodeSnapshot(setReading(resnapshot(), "GPU.smi.driver", "570.124.06")),
    );
    const r = await run(["-b", FIXTURE, "--target", "after.yaml", "--fail-on-drift"], { cwd: dir });
    assert.equal(r.code, 1);
    assert.match(r.stdout, /CHANGES \(0 added, 0 removed, 1 modified\)/);
    assert.match(r.stdout, /MODIFIED {2}GPU\.smi\.driver {2}570\.86\.15 {2}570\.124\.06\n/);
    assert.match(r.stdout, /DRIFT DETECTED\n$/);
    assert.equal(r.stderr, "error: drift detected: 1 change(s) found\n");
    // Without --fail-on-drift, drift is still exit 0.
    assert.equal((await run(["-b", FIXTURE, "--target", "after.yaml"], { cwd: dir })).code, 0);
  });
});

Deno.test("aicr diff -t json reads the target from stdin and writes the typed result document", async () => {
  const target = setReading(resnapshot(), "OS.kmod.nvidia_fs", true);
  const r = await run(["-b", FIXTURE, "--target", "-", "-t", "json"], {
    stdin: encodeSnapshot(target, "json"),
  });
  assert.equal(r.code, 0, r.stderr);
  assert.deepEqual(JSON.parse(r.stdout), {
    baselineSource: FIXTURE,
    targetSource: "-",
    changes: [{ kind: "added", severity: "info", path: "OS.kmod.nvidia_fs", target: true }],
    summary: { added: 1, removed: 0, modified: 0, total: 1 },
    statusChanges: [],
  });
});

Deno.test("aicr diff reads cm:// sources by data.format, falling back to snapshot.yaml", async () => {
  const moved = setReading(
    resnapshot(),
    "NodeTopology.taint.nvidia.com/gpu",
    "NoSchedule||gpu-node-2,gpu-node-3",
  );
  const configMaps = {
    "gpu-operator/aicr-snapshot": {
      format: "json",
      "snapshot.json": encodeSnapshot(moved, "json"),
    },
    "gpu-operator/old": { "snapshot.yaml": readFileSync(FIXTURE, "utf8") },
  };
  const r = await run([
    "-b",
    "cm://gpu-operator/old",
    "--target",
    "cm://gpu-operator/aicr-snapshot",
    "-t",
    "yaml",
  ], {
    configMaps,
  });
  assert.equal(r.code, 0, r.stderr);
  assert.match(
    r.stdout,
    /^baselineSource: cm:\/\/gpu-operator\/old\ntargetSource: cm:\/\/gpu-operator\/aicr-snapshot\n/,
  );
  assert.match(r.stdout, /path: NodeTopology\.taint\.nvidia\.com\/gpu\n/);
  assert.match(r.stdout, /removed:\n {8}- gpu-node-1\n/);
});

Deno.test("aicr diff names a missing ConfigMap, file or snapshot key and exits 3", async () => {
  let r = await run(["-b", "cm://gpu-operator/nope", "--target", FIXTURE]);
  assert.equal(r.code, 3);
  assert.match(
    r.stderr,
    /^error: Cannot read snapshot 'cm:\/\/gpu-operator\/nope': ConfigMap not found\n/,
  );
  r = await run(["-b", "cm://gpu-operator/empty", "--target", FIXTURE], {
    configMaps: { "gpu-operator/empty": { format: "yaml" } },
  });
  assert.equal(r.code, 3);
  assert.match(r.stderr, /'cm:\/\/gpu-operator\/empty': ConfigMap has no snapshot data/);
  r = await run(["-b", "missing.yaml", "--target", FIXTURE]);
  assert.equal(r.code, 3);
  assert.match(r.stderr, /^error: Cannot read snapshot 'missing.yaml': no such file\n/);
});

const BAD_INPUTS: { name: string; file: string; want: RegExp }[] = [
  {
    name: "malformed YAML",
    file: "invalid-malformed.yaml",
    want: /Cannot parse snapshot 'invalid-malformed\.yaml' at line \d+/,
  },
  {
    name: "malformed JSON",
    file: "invalid-malformed.json",
    want: /Cannot parse snapshot 'invalid-malformed\.json'/,
  },
  {
    name: "a wrong apiVersion",
    file: "invalid-apiversion.yaml",
    want: /'invalid-apiversion\.yaml': field 'apiVersion' \(line 2\) must be one of/,
  },
  {
    name: "a wrong kind",
    file: "invalid-kind.yaml",
    want:
      /'invalid-kind\.yaml': field 'kind' \(line 1\) must be 'Snapshot': current value is 'ConfigMap'/,
  },
  {
    name: "an unknown measurement type",
    file: "invalid-measurement-type.yaml",
    want:
      /'invalid-measurement-type\.yaml': field 'measurements\[1\]\.type' \(line 9\) must be one of K8s, GPU, OS, SystemD, NodeTopology: current value is 'NetworkTopology'/,
  },
  {
    name: "a YAML alias bomb",
    file: "invalid-alias-bomb.yaml",
    want: /Cannot parse snapshot 'invalid-alias-bomb\.yaml': .*alias/i,
  },
];

for (const { name, file, want } of BAD_INPUTS) {
  Deno.test(`aicr diff rejects ${name} naming the input, with exit 2`, async () => {
    for (const args of [["-b", file, "--target", FIXTURE], ["-b", FIXTURE, "--target", file]]) {
      const r = await run(args);
      assert.equal(r.code, 2, r.stderr);
      assert.match(r.stderr, want);
      assert.equal(r.stdout, "");
    }
    const fleet = await run(["--fleet", file, FIXTURE]);
    assert.equal(fleet.code, 2);
    assert.match(fleet.stderr, want);
  });
}

Deno.test("aicr diff rejects a file over the size cap before reading it, with exit 2", async () => {
  await withTemp(async (dir) => {
    writeFileSync(join(dir, "huge.yaml"), "#".repeat(MAX_DOCUMENT_BYTES + 1));
    const r = await run(["-b", "huge.yaml", "--target", FIXTURE], { cwd: dir });
    assert.equal(r.code, 2);
    assert.match(
      r.stderr,
      /^error: Cannot read snapshot 'huge\.yaml': file is 16777217 bytes, over the 16777216-byte cap\n/,
    );
    const stdin = await run(["-b", FIXTURE, "--target", "-"], {
      stdin: " ".repeat(MAX_DOCUMENT_BYTES + 1),
    });
    assert.equal(stdin.code, 2);
    assert.match(stdin.stderr, /Cannot read snapshot '-': stdin exceeds the 16777216-byte cap/);
  });
});

Deno.test("aicr diff rejects bad flags with exit 2", async () => {
  const cases: [string[], RegExp][] = [
    [["--target", FIXTURE], /'--baseline' is required/],
    [["-b", FIXTURE], /'--target' is required/],
    [["-b", FIXTURE, "--target", FIXTURE, "--group-by", "none"], /'--group-by' without '--fleet'/],
    [["-b", FIXTURE, "--fleet", FIXTURE], /either '--baseline' with '--target', or '--fleet'/],
    [
      ["-b", FIXTURE, "--target", FIXTURE, "--ignore", "os.sysctl.*"],
      /pattern 'os\.sysctl\.\*': a path starts with a measurement type/,
    ],
    [["-b", FIXTURE, "--target", FIXTURE, "-o", "cm://ns/x"], /not a ConfigMap/],
    [["-b", "-", "--target", "-"], /only one of/],
    [["-b", FIXTURE, "--target", FIXTURE, "--all-readings"], /'--all-readings' without '--fleet'/],
    [["-b", "cm://nonamespace", "--target", FIXTURE], /'--baseline' value 'cm:\/\/nonamespace'/],
    [
      ["-b", FIXTURE, "--target", FIXTURE, "-o", "/nonexistent-dir/x/out.txt"],
      /^error: Cannot write '\/nonexistent-dir\/x\/out\.txt': /,
    ],
  ];
  for (const [args, want] of cases) {
    const r = await run(args);
    assert.equal(r.code, 2, args.join(" "));
    assert.match(r.stderr, want);
  }
  const r = await run(["-b", FIXTURE, "--target", FIXTURE, "-t", "xml"]);
  assert.equal(r.code, 2);
  assert.match(r.stderr, /Allowed choices are table, yaml, json, html/);
});

Deno.test("aicr diff --ignore and --no-default-ignores choose which readings count", async () => {
  await withTemp(async (dir) => {
    writeFileSync(
      join(dir, "after.yaml"),
      encodeSnapshot(setReading(resnapshot(), "K8s.image.aicr", "v1.0.1")),
    );
    const base = ["-b", FIXTURE, "--target", "after.yaml", "-t", "json"];
    const paths = async (extra: string[]) =>
      JSON.parse((await run([...base, ...extra], { cwd: dir })).stdout).changes.map((
        c: { path: string },
      ) => c.path);
    assert.deepEqual(await paths([]), ["K8s.image.aicr"]);
    assert.deepEqual(await paths(["--ignore", "K8s.image.*"]), []);
    const all = await paths(["--no-default-ignores"]);
    assert.ok(all.includes("OS.sysctl./proc/sys/kernel/random/boot_id"));
    assert.ok(all.includes("SystemD.kubelet.service.MainPID"));
  });
});

Deno.test("aicr diff colours the table only on a terminal", async () => {
  const r = await run(["-b", FIXTURE, "--target", FIXTURE], { terminal: true });
  assert.ok(r.stdout.includes("\x1b[32mNO DRIFT\x1b[0m"));
  assert.ok(!(await run(["-b", FIXTURE, "--target", FIXTURE])).stdout.includes("\x1b["));
});

function fleetSnapshots(): Snapshot[] {
  const nodes = Array.from({ length: 9 }, (_, i) => `gpu-node-${i + 1}`);
  return nodes.map((node, i) => {
    const s = makeNodeSnapshot(node, { clusterNodes: nodes, boot: i + 2 });
    if (node === "gpu-node-7") setReading(s, "GPU.smi.driver", "570.124.06");
    return s;
  });
}

Deno.test("aicr diff --fleet over a directory names the outlier and exits 1 with --fail-on-drift", async () => {
  await withTemp(async (dir) => {
    fleetSnapshots().forEach((s, i) =>
      writeFileSync(join(dir, `node-${i + 1}.yaml`), encodeSnapshot(s))
    );
    writeFileSync(join(dir, "README.txt"), "not a snapshot");
    const r = await run(["--fleet", ".", "--fail-on-drift"], { cwd: dir });
    assert.equal(r.code, 1, r.stderr);
    assert.match(r.stdout, /^FLEET \(9 nodes in 1 cohort, 1 outliers, 1 differences\)/);
    assert.match(
      r.stdout,
      /\n {2}gpu-node-7: GPU\.smi\.driver 570\.124\.06 \(cohort: 570\.86\.15 on 8 nodes\)\n/,
    );
    assert.equal(r.stderr, "error: drift detected: 1 outlier node(s) found\n");
  });
});

Deno.test("aicr diff --fleet reads a YAML stream from stdin, a JSON array and JSON lines alike", async () => {
  const snaps = fleetSnapshots();
  const yamlStream = snaps.map((s) => encodeSnapshot(s)).join("---\n");
  const jsonArray = "[\n" + snaps.map((s) => encodeSnapshot(s, "json").trimEnd()).join(",\n") +
    "\n]\n";
  const jsonLines =
    snaps.map((s) => JSON.stringify(JSON.parse(encodeSnapshot(s, "json")))).join("\n") + "\n";
  const docs: string[] = [];
  for (const stdin of [yamlStream, jsonArray, jsonLines]) {
    const r = await run(["--fleet", "-", "-t", "json"], { stdin });
    assert.equal(r.code, 0, r.stderr);
    docs.push(r.stdout);
  }
  assert.equal(docs[0], docs[1]);
  assert.equal(docs[0], docs[2]);
  const doc = JSON.parse(docs[0] as string);
  assert.deepEqual(doc.summary, {
    nodes: 9,
    cohorts: 1,
    singletons: 0,
    outliers: 1,
    differences: 1,
    unreadable: 0,
  });
  assert.deepEqual(doc.outliers, [{
    node: "gpu-node-7",
    cohort: "NVIDIA H100 80GB HBM3 ×8 · p5.48xlarge",
    differences: [{
      path: "GPU.smi.driver",
      kind: "modified",
      value: "570.124.06",
      fleet: "570.86.15",
      fleetNodes: 8,
    }],
  }]);
});

Deno.test("aicr diff --fleet -t html -o writes one self-contained page", async () => {
  await withTemp(async (dir) => {
    writeFileSync(
      join(dir, "fleet.yaml"),
      fleetSnapshots().map((s) => encodeSnapshot(s)).join("---\n"),
    );
    const r = await run(["--fleet", "fleet.yaml", "-t", "html", "-o", "report.html"], { cwd: dir });
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stdout, "");
    const html = readFileSync(join(dir, "report.html"), "utf8");
    assert.match(html, /^<!DOCTYPE html>/);
    assert.equal(html.match(/<td class="outlier"/g)?.length, 1);
    assert.ok(!/<script|<link|https?:\/\//i.test(html));
  });
});

Deno.test("aicr diff --fleet --group-by: cohorts from a label, one cohort with none, an unknown key is exit 2", async () => {
  await withTemp(async (dir) => {
    writeFileSync(
      join(dir, "fleet.yaml"),
      fleetSnapshots().map((s) => encodeSnapshot(s)).join("---\n"),
    );
    const json = async (args: string[]) => {
      const r = await run(["--fleet", "fleet.yaml", "-t", "json", ...args], { cwd: dir });
      assert.equal(r.code, 0, r.stderr);
      return JSON.parse(r.stdout);
    };
    const byLabel = await json(["--group-by", "node.kubernetes.io/instance-type"]);
    assert.deepEqual(byLabel.groupBy, ["node.kubernetes.io/instance-type"]);
    assert.deepEqual(byLabel.cohorts.map((c: { name: string }) => c.name), [
      "node.kubernetes.io/instance-type=p5.48xlarge",
    ]);
    const none = await json(["--group-by", "none"]);
    assert.deepEqual(none.groupBy, []);
    assert.equal(none.cohorts[0].name, "fleet");
    const bad = await run(["--fleet", "fleet.yaml", "--group-by", "example.com/rack"], {
      cwd: dir,
    });
    assert.equal(bad.code, 2);
    assert.match(
      bad.stderr,
      /^error: Cannot group by 'example\.com\/rack': no snapshot has a reading or node label 'example\.com\/rack'/,
    );
  });
});

Deno.test("aicr diff -b A --target B -t html writes one self-contained page of the changes", async () => {
  await withTemp(async (dir) => {
    // A real H100 node (the nvidia-smi capture), then the same node with eight GPUs capped.
    const before = makeMixedFleet({ "p5-h100": 1 })[0] as Snapshot;
    const after = structuredClone(before);
    for (let i = 0; i < 8; i++) setReading(after, `GPU.gpu-${i}.power.limit.current`, "500.00 W");
    setReading(after, "GPU.smi.driver", "570.124.06");
    writeFileSync(join(dir, "before.yaml"), encodeSnapshot(before));
    writeFileSync(join(dir, "after.yaml"), encodeSnapshot(after));
    const r = await run(["-b", "before.yaml", "--target", "after.yaml", "-t", "html"], {
      cwd: dir,
    });
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /^<!DOCTYPE html>/);
    assert.ok(!/<script|<link|https?:\/\//i.test(r.stdout));
    assert.match(r.stdout, /<span class="badge drift">DRIFT DETECTED<\/span>/);
    assert.deepEqual(
      [...r.stdout.matchAll(/<tr class="(\w+)" data-path="([^"]+)"/g)].map((m) =>
        `${m[1]} ${m[2]}`
      ),
      ["modified GPU.gpu-0..7.power.limit.current", "modified GPU.smi.driver"],
    );
  });
});

Deno.test("aicr diff --fleet names the stream document that is invalid", async () => {
  const good = encodeSnapshot(makeNodeSnapshot("gpu-node-1"));
  const stdin = `${good}---\n${good}---\n${
    readFileSync(join(TESTDATA, "invalid-kind.yaml"), "utf8")
  }`;
  const r = await run(["--fleet", "-", "-t", "json"], { stdin });
  // The two good nodes are compared; the bad document is an unreadable member (exit 9).
  assert.equal(r.code, 9, r.stderr);
  assert.match(
    r.stderr,
    /^error: Cannot compare every snapshot of the fleet: 1 of 3 could not be read/m,
  );
  assert.match(
    r.stderr,
    /^ {2}- \(document 3\): Cannot read snapshot '- \(document 3\)': field 'kind' \(line 1\) must be 'Snapshot'/m,
  );
  const doc = JSON.parse(r.stdout);
  assert.equal(doc.summary.nodes, 2);
  assert.deepEqual(doc.unreadable.map((u: { node: string }) => u.node), ["-#3"]);

  // Nothing readable: the document's error, exit 2, as before.
  const alone = await run(["--fleet", "-"], {
    stdin: readFileSync(join(TESTDATA, "invalid-kind.yaml"), "utf8"),
  });
  assert.equal(alone.code, 2);
  assert.match(alone.stderr, /^error: Cannot read snapshot '-'/m);
});

Deno.test("aicr diff reads cm:// through the cluster connection, connecting only when needed", async () => {
  const fake = createFakeKube();
  fake.put(
    "ConfigMap",
    {
      metadata: { name: "aicr-snapshot", namespace: "gpu-operator" },
      data: {
        format: "yaml",
        "snapshot.yaml": encodeSnapshot(setReading(resnapshot(), "OS.kmod.nvidia_fs", true)),
      },
    } as Parameters<typeof fake.put>[1],
  );
  let connects = 0;
  const connectKube = () => {
    connects++;
    return fake.client;
  };
  let r = await run(["-b", FIXTURE, "--target", "cm://gpu-operator/aicr-snapshot", "-t", "json"], {
    connectKube,
  });
  assert.equal(r.code, 0, r.stderr);
  assert.deepEqual(JSON.parse(r.stdout).changes.map((c: { path: string }) => c.path), [
    "OS.kmod.nvidia_fs",
  ]);
  assert.equal(connects, 1);
  r = await run(["-b", FIXTURE, "--target", "cm://gpu-operator/gone"], { connectKube });
  assert.equal(r.code, 3);
  assert.match(
    r.stderr,
    /^error: Cannot read snapshot 'cm:\/\/gpu-operator\/gone': ConfigMap not found\n/,
  );
  // Files alone never connect.
  r = await run(["-b", FIXTURE, "--target", FIXTURE], { connectKube });
  assert.equal(r.code, 0);
  assert.equal(connects, 2);
});

Deno.test("aicr diff names the cm:// source when there is no kubeconfig, with the kubeconfig exit code", async () => {
  const r = await run(["-b", FIXTURE, "--target", "cm://gpu-operator/aicr-snapshot"], {
    connectKube: () => {
      throw new NoKubeconfigError();
    },
  });
  assert.equal(r.code, 3);
  assert.match(
    r.stderr,
    /^error: Cannot read snapshot 'cm:\/\/gpu-operator\/aicr-snapshot'\n {2}caused by: Cannot find a kubeconfig/,
  );
  assert.match(r.stderr, /pass --kubeconfig <file> or set KUBECONFIG/);
});
