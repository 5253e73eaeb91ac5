import assert from "node:assert/strict";
import { Buffer } from "node:buffer";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ToolError, UsageError } from "../errors.ts";
import { KubeApiError, NoKubeconfigError } from "../kube/mod.ts";
import type { KubeClient } from "../kube/mod.ts";
import { createLogger } from "../log.ts";
import { processDeps } from "../mod.ts";
import {
  createSnapshot,
  encodeSnapshot,
  findSubtype,
  MAX_DOCUMENT_BYTES,
  parseSnapshot,
} from "../snapshot/mod.ts";
import { createFakeKube } from "../tests/fakes/kube.ts";
import { runCli } from "./mod.ts";
import type { CliDeps } from "./mod.ts";
import { createProjectionFileReader, readProjections } from "../collectors/mod.ts";
import { writeProjectedConfigMap } from "../controller/mod.ts";

const TESTDATA = new URL("../collectors/testdata/projections/", import.meta.url).pathname;
const ROOT = new URL("../", import.meta.url).pathname;

function withTemp<T>(fn: (dir: string) => Promise<T>): Promise<T> {
  const dir = mkdtempSync(join(tmpdir(), "aicr-projections-"));
  return fn(dir).finally(() => rmSync(dir, { recursive: true, force: true }));
}

/** A reader over an in-memory tree; a missing path fails like node:fs does. */
function memoryReader(files: Record<string, string>, log: string[] = []) {
  return async (path: string): Promise<string> => {
    await Promise.resolve();
    log.push(path);
    const text = files[path];
    if (text === undefined) {
      throw Object.assign(new Error(`ENOENT: no such file or directory, open '${path}'`), {
        code: "ENOENT",
      });
    }
    return text;
  };
}

const OKE = '{"data": [{"name": "NvidiaGpuPlugin", "lifecycle-state": "ACTIVE"}]}';
const AKS = '[{"name": "gpu", "vmSize": "Standard_NC24ads_A100_v4"}]';
const GKE = '[{"name": "cpu", "config": {"machineType": "e2-medium"}}]';

Deno.test("readProjections() reads no file when no projection flag is set", async () => {
  const log: string[] = [];
  assert.deepEqual(await readProjections({}, memoryReader({}, log)), []);
  assert.deepEqual(log, []);
});

Deno.test("readProjections() returns one subtype per flag, in OKE, AKS, GKE order", async () => {
  const got = await readProjections(
    { gkeGpuPools: "g.json", okeAddons: "o.json", aksGpuPools: "a.json" },
    memoryReader({ "o.json": OKE, "a.json": AKS, "g.json": GKE }),
  );
  assert.deepEqual(got.map((s) => [s.subtype, s.context?.source]), [
    ["oke-addons", "--oke-addons o.json"],
    ["aks-gpu-pools", "--aks-gpu-pools a.json"],
    ["gke-gpu-pools", "--gke-gpu-pools g.json"],
  ]);
  assert.equal(got[0]?.data["nvidia-gpu-plugin"], "active");
  assert.equal(got[1]?.data["gpu-driver"], "install");
  assert.equal(got[2]?.data["gpu-driver-installation"], "absent");
});

interface FailureCase {
  name: string;
  flags: Parameters<typeof readProjections>[0];
  files: Record<string, string>;
  want: RegExp;
}

const FAILURES: FailureCase[] = [
  {
    name: "a missing file names the flag and the path",
    flags: { aksGpuPools: "/nonexistent" },
    files: {},
    want: /^Cannot read '--aks-gpu-pools' file '\/nonexistent': no such file$/,
  },
  {
    name: "an empty path is refused before any read",
    flags: { gkeGpuPools: " " },
    files: {},
    want: /^Cannot read '--gke-gpu-pools' as it must name a file: current value is ''$/,
  },
  {
    name: "a file that is not the expected JSON keeps the projection's message",
    flags: { okeAddons: "o.json" },
    files: { "o.json": AKS },
    want:
      /^Cannot read '--oke-addons' file 'o\.json' as '\[0\]\.lifecycle-state' must be a non-empty string/,
  },
  {
    name: "with two bad files, the first in flag order is reported",
    flags: { gkeGpuPools: "missing.json", okeAddons: "bad.json" },
    files: { "bad.json": "{" },
    want: /^Cannot read '--oke-addons' file 'bad\.json' as it must be the JSON object/,
  },
];

for (const { name, flags, files, want } of FAILURES) {
  Deno.test(`readProjections(): ${name} (UsageError, exit 2)`, async () => {
    await assert.rejects(readProjections(flags, memoryReader(files)), (error: unknown) => {
      assert.ok(error instanceof UsageError, String(error));
      assert.equal(error.exitCode, 2);
      assert.match(error.message, want);
      return true;
    });
  });
}

Deno.test("createProjectionFileReader() resolves against cwd and decodes UTF-8 and UTF-16 files", async () => {
  await withTemp(async (dir) => {
    writeFileSync(join(dir, "utf8.json"), "\uFEFF" + GKE);
    // What PowerShell's '>' writes: a UTF-16LE byte order mark, then UTF-16LE.
    writeFileSync(
      join(dir, "utf16.json"),
      Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from(AKS, "utf16le")]),
    );
    const got = await readProjections(
      { aksGpuPools: "utf16.json", gkeGpuPools: join(dir, "utf8.json") },
      createProjectionFileReader(dir),
    );
    assert.equal(got[0]?.data["gpu-pools"], "gpu");
    assert.equal(got[1]?.data["pool-count"], 1);
  });
});

Deno.test("createProjectionFileReader() stops reading past maxBytes", async () => {
  await withTemp(async (dir) => {
    writeFileSync(join(dir, "big.json"), "[" + " ".repeat(300) + "]");
    await assert.rejects(
      readProjections({ aksGpuPools: "big.json" }, createProjectionFileReader(dir, 100)),
      /^UsageError: Cannot read '--aks-gpu-pools' file 'big\.json': it is larger than 100 bytes$/,
    );
    await assert.rejects(
      readProjections({ aksGpuPools: "." }, createProjectionFileReader(dir)),
      /^UsageError: Cannot read '--aks-gpu-pools' file '\.': it is a directory$/,
    );
  });
});

interface CliRun {
  code: number;
  stdout: string;
  stderr: string;
  kubeCalls: number;
}

/** Runs the real CLI in-process with this process's readers but no cluster. */
async function runAicr(args: string[], cwd: string): Promise<CliRun> {
  let stdout = "";
  let stderr = "";
  let kubeCalls = 0;
  const controller = new AbortController();
  const stderrWriter = { write: (t: string) => void (stderr += t) };
  const deps: CliDeps = {
    ...processDeps(controller.signal),
    stdout: { write: (t) => void (stdout += t) },
    stderr: stderrWriter,
    env: () => undefined,
    cwd,
    connectKube: () => {
      kubeCalls++;
      throw new NoKubeconfigError();
    },
    makeLogger: ({ debug, json }) =>
      createLogger(stderrWriter, { level: debug ? "debug" : "info", json }),
  };
  const code = await runCli(args, deps);
  return { code, stdout, stderr, kubeCalls };
}

Deno.test({
  name: "aicr agent --aks-gpu-pools merges the projection into the printed snapshot",
  async fn() {
    await withTemp(async (root) => {
      const run = await runAicr([
        "agent",
        "--aks-gpu-pools",
        "valid-aks-gpu-pools-mixed.json",
        "--host-root",
        root,
      ], TESTDATA);
      assert.equal(run.code, 0, run.stderr);
      const snapshot = parseSnapshot(run.stdout);
      const aks = findSubtype(snapshot, "K8s", "aks-gpu-pools");
      assert.equal(aks?.data["gpu-driver"], "mixed");
      assert.equal(aks?.data["gpua100.gpu-driver"], "install");
      assert.equal(aks?.data["gpuh100.gpu-driver"], "none");
      assert.deepEqual(aks?.context, {
        source: "--aks-gpu-pools valid-aks-gpu-pools-mixed.json",
        status: "ok",
      });
      assert.deepEqual(snapshot.measurements.map((m) => m.type)[0], "K8s");
    });
  },
});

Deno.test({
  name: "aicr agent writes all three projections to a JSON file",
  async fn() {
    await withTemp(async (root) => {
      const out = join(root, "out", "snap.json");
      const run = await runAicr([
        "agent",
        "--oke-addons",
        "valid-oke-addons.json",
        "--aks-gpu-pools",
        "valid-aks-gpu-pools-legacy.json",
        "--gke-gpu-pools",
        "valid-gke-gpu-pools-disabled.json",
        "--format",
        "json",
        "-o",
        out,
        "--host-root",
        root,
      ], TESTDATA);
      assert.equal(run.code, 0, run.stderr);
      assert.equal(run.stdout, "");
      const snapshot = parseSnapshot(await Deno.readTextFile(out));
      assert.equal(findSubtype(snapshot, "K8s", "oke-addons")?.data["nvidia-gpu-plugin"], "active");
      assert.equal(findSubtype(snapshot, "K8s", "aks-gpu-pools")?.data["gpu-driver"], "none");
      assert.equal(
        findSubtype(snapshot, "K8s", "gke-gpu-pools")?.data["gpu-driver-installation"],
        "installation-disabled",
      );
    });
  },
});

Deno.test("aicr agent with a bad projection file exits 2 before collecting anything", async () => {
  await withTemp(async (root) => {
    const run = await runAicr([
      "agent",
      "--gke-gpu-pools",
      "invalid-gke-gpu-pools-yaml.txt",
      "--host-root",
      root,
    ], TESTDATA);
    assert.equal(run.code, 2, run.stderr);
    assert.equal(run.stdout, "");
    assert.equal(run.kubeCalls, 0);
    assert.match(
      run.stderr,
      /error: Cannot read '--gke-gpu-pools' file 'invalid-gke-gpu-pools-yaml\.txt' as it must be the JSON array/,
    );
  });
});

// '/nonexistent' is a real directory on some hosts (nobody's home), so the missing file
// is made missing for sure: a name in a fresh, empty temporary directory.
Deno.test("aicr snapshot reads projections before the cluster: a missing file exits 2 naming the flag", async () => {
  await withTemp(async (dir) => {
    const missing = join(dir, "pools.json");
    const run = await runAicr([
      "snapshot",
      "--aks-gpu-pools",
      missing,
      "--kubeconfig",
      join(dir, "kubeconfig"),
    ], TESTDATA);
    assert.equal(run.code, 2, run.stderr);
    assert.equal(run.kubeCalls, 0, "the cluster is never contacted");
    assert.equal(run.stdout, "");
    assert.ok(
      run.stderr.startsWith(
        `error: Cannot read '--aks-gpu-pools' file '${missing}': no such file\n`,
      ),
      run.stderr,
    );
  });
});

Deno.test("aicr snapshot as a process: a missing projection file exits 2 and names no kubeconfig", async () => {
  await withTemp(async (dir) => {
    const { code, stdout, stderr } = await new Deno.Command(Deno.execPath(), {
      args: [
        "run",
        "-A",
        "mod.ts",
        "snapshot",
        "--aks-gpu-pools",
        join(dir, "nonexistent"),
        "--kubeconfig",
        join(dir, "missing-config"),
      ],
      cwd: ROOT,
      stdout: "piped",
      stderr: "piped",
    }).output();
    const err = new TextDecoder().decode(stderr);
    assert.equal(code, 2, err);
    assert.equal(new TextDecoder().decode(stdout), "");
    assert.match(err, /^error: Cannot read '--aks-gpu-pools' file '.*\/nonexistent': no such file/);
    assert.doesNotMatch(err, /kubeconfig|missing-config/i);
  });
});

interface Applied {
  namespace: string;
  name: string;
  content: { labels: Record<string, string>; data: Record<string, string> };
}

/** A client whose applyConfigMap records its calls, or fails with `failure`. */
function applyRecorder(failure?: Error): { kube: KubeClient; applied: Applied[] } {
  const applied: Applied[] = [];
  const kube: KubeClient = {
    ...createFakeKube().client,
    applyConfigMap: async (namespace, name, content) => {
      await Promise.resolve();
      if (failure) throw failure;
      applied.push({ namespace, name, content });
      return { metadata: { name, namespace } };
    },
  };
  return { kube, applied };
}

async function mergedFixture() {
  const projections = await readProjections(
    { aksGpuPools: "valid-aks-gpu-pools-mixed.json" },
    createProjectionFileReader(TESTDATA),
  );
  const snapshot = createSnapshot([{ type: "K8s", subtypes: projections }], {
    timestamp: new Date("2026-06-01T00:00:00Z"),
    version: "1.0.0",
    nodeName: "gpu-1",
  });
  return { projections, snapshot, encoded: encodeSnapshot(snapshot, "json") };
}

const WRITTEN_AT = new Date("2026-06-01T00:05:00Z");

Deno.test("writeProjectedConfigMap() applies the merged document in the user's format", async () => {
  const { projections, snapshot, encoded } = await mergedFixture();
  const { kube, applied } = applyRecorder();
  let stdout = "";
  await writeProjectedConfigMap(
    { kube, stdout: { write: (t) => void (stdout += t) }, now: () => WRITTEN_AT },
    {
      ref: { namespace: "gpu-operator", name: "aicr-snapshot" },
      snapshot,
      encoded,
      format: "json",
      version: "1.0.0",
      projections,
    },
  );
  assert.equal(stdout, "");
  assert.equal(applied.length, 1);
  assert.equal(applied[0]?.namespace, "gpu-operator");
  assert.equal(applied[0]?.name, "aicr-snapshot");
  assert.deepEqual(applied[0]?.content.data, {
    "snapshot.json": encoded,
    format: "json",
    timestamp: "2026-06-01T00:05:00Z",
  });
  assert.equal(applied[0]?.content.labels["app.kubernetes.io/name"], "aicr");
});

Deno.test("writeProjectedConfigMap() keeps the merged snapshot on stdout when the write is denied", async () => {
  const { projections, snapshot, encoded } = await mergedFixture();
  const denied = new KubeApiError(
    'Cannot PATCH /api/v1/namespaces/ns/configmaps/snap: 403 Forbidden: configmaps "snap" is forbidden',
    403,
    "Forbidden",
  );
  const { kube } = applyRecorder(denied);
  let stdout = "";
  await assert.rejects(
    writeProjectedConfigMap(
      { kube, stdout: { write: (t) => void (stdout += t) }, now: () => WRITTEN_AT },
      {
        ref: { namespace: "ns", name: "snap" },
        snapshot,
        encoded,
        format: "json",
        version: "1",
        projections,
      },
    ),
    (error: unknown) => {
      assert.ok(error instanceof ToolError);
      assert.equal(error.exitCode, denied.exitCode);
      assert.equal(error.cause, denied);
      assert.equal(
        error.message,
        "Cannot write the snapshot with its projections to 'cm://ns/snap': Cannot PATCH /api/v1/namespaces/ns/configmaps/snap: 403 Forbidden: configmaps \"snap\" is forbidden",
      );
      assert.deepEqual(error.details, [
        "the ConfigMap keeps the agent's snapshot without K8s.aks-gpu-pools; the merged snapshot was written to stdout",
      ]);
      return true;
    },
  );
  assert.equal(stdout, encoded.endsWith("\n") ? encoded : encoded + "\n");
  assert.equal(
    findSubtype(parseSnapshot(stdout), "K8s", "aks-gpu-pools")?.data["gpu-driver"],
    "mixed",
  );
});

Deno.test("writeProjectedConfigMap() refuses a document too large for a ConfigMap without writing it", async () => {
  const { projections, snapshot } = await mergedFixture();
  const { kube, applied } = applyRecorder();
  const encoded = "x".repeat(MAX_DOCUMENT_BYTES + 1);
  let stdout = "";
  await assert.rejects(
    writeProjectedConfigMap(
      { kube, stdout: { write: (t) => void (stdout += t) }, now: () => WRITTEN_AT },
      {
        ref: { namespace: "ns", name: "snap" },
        snapshot,
        encoded,
        format: "yaml",
        version: "1",
        projections,
      },
    ),
    (error: unknown) => {
      assert.ok(error instanceof ToolError);
      assert.equal(error.exitCode, 2);
      assert.match(
        error.message,
        /^Cannot write the snapshot with its projections to 'cm:\/\/ns\/snap': /,
      );
      return true;
    },
  );
  assert.equal(applied.length, 0);
  assert.equal(stdout.length, encoded.length + 1);
});
