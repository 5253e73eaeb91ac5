import assert from "node:assert/strict";
import { mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createCommandRunner, createHostReader } from "../collectors/mod.ts";
import { InterruptedError, NotFoundError } from "../errors.ts";
import { NOOP_LOGGER } from "../log.ts";
import { parseSnapshot } from "../snapshot/mod.ts";
import { collectSnapshot, REQUIRE_GPU_MESSAGE, runAgent } from "./run.ts";
import type { AgentDeps } from "./run.ts";
import { digestText, parseAgentReport } from "../manifests/mod.ts";
import { createFakeKube } from "../tests/fakes/kube.ts";

const FIXTURE = new URL("../tests/fixtures/nvidia-smi-q-x.h100.xml", import.meta.url);

async function hostTree(): Promise<string> {
  const root = await mkdtemp(join(tmpdir(), "aicr-agent-host-"));
  await Deno.mkdir(join(root, "proc/sys/kernel"), { recursive: true });
  await Deno.mkdir(join(root, "etc"), { recursive: true });
  await writeFile(join(root, "proc/cmdline"), "BOOT_IMAGE=/vmlinuz root=/dev/sda1 ro quiet\n");
  await writeFile(join(root, "proc/modules"), "nvidia 1 0 - Live 0x0\noverlay 2 0 - Live 0x0\n");
  await writeFile(join(root, "proc/sys/kernel/pid_max"), "4194304\n");
  await writeFile(join(root, "etc/os-release"), 'ID=ubuntu\nVERSION_ID="24.04"\n');
  return root;
}

async function fakeSmiPath(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), "aicr-agent-path-"));
  const script = join(dir, "nvidia-smi");
  await writeFile(script, `#!/bin/sh\ncat '${FIXTURE.pathname}'\n`, { mode: 0o755 });
  return dir;
}

function deps(root: string, path: string, out: string[]): AgentDeps {
  const now = () => new Date("2026-12-02T10:00:00Z");
  return {
    collectors: {
      host: createHostReader({ root }),
      exec: createCommandRunner({ path }),
      env: () => undefined,
      log: NOOP_LOGGER,
    },
    sink: { stdout: { write: (t) => out.push(t) }, now },
    log: NOOP_LOGGER,
    now,
    version: "0.1.0",
  };
}

Deno.test("runAgent() writes a valid snapshot of a host tree with the GPU of a fake nvidia-smi", async () => {
  const root = await hostTree();
  const path = await fakeSmiPath();
  try {
    const out: string[] = [];
    const result = await runAgent(deps(root, path, out), {
      target: { kind: "stdout" },
      nodeName: "gpu-node-1",
      requireGpu: true,
      collect: { only: ["gpu", "os"] },
    });
    const snapshot = parseSnapshot(out.join(""));
    assert.equal(snapshot.metadata["source-node"], "gpu-node-1");
    assert.equal(snapshot.metadata.timestamp, "2026-12-02T10:00:00Z");
    const smi = snapshot.measurements.find((m) => m.type === "GPU")?.subtypes.find((s) =>
      s.subtype === "smi"
    );
    assert.equal(smi?.data["gpu-count"], 8);
    assert.equal(smi?.data.driver, "570.86.15");
    const grub = snapshot.measurements.find((m) => m.type === "OS")?.subtypes.find((s) =>
      s.subtype === "grub"
    );
    assert.equal(grub?.data.root, undefined, "root= is removed from the cmdline");
    assert.equal(result.destination, "stdout");
  } finally {
    await rm(root, { recursive: true, force: true });
    await rm(path, { recursive: true, force: true });
  }
});

Deno.test("collectSnapshot() says topology-scope: node in the metadata when its NodeTopology is the node's own (the daemon), and nothing in Job mode", async () => {
  const root = await hostTree();
  try {
    const d = deps(root, "/nonexistent", []);
    const own = await collectSnapshot(d, {
      nodeName: "gpu-node-1",
      collect: { only: ["topology"], topologyScope: "node" },
    });
    assert.equal(own.snapshot.metadata["topology-scope"], "node");
    const topology = own.snapshot.measurements[0];
    assert.equal(topology?.subtypes[0]?.data.scope, "node");
    const job = await collectSnapshot(d, {
      nodeName: "gpu-node-1",
      collect: { only: ["topology"] },
    });
    assert.equal(job.snapshot.metadata["topology-scope"], undefined);
    assert.equal(job.snapshot.measurements[0]?.subtypes[0]?.data.scope, undefined);
  } finally {
    await rm(root, { recursive: true, force: true });
  }
});

Deno.test("runAgent() with requireGpu and no nvidia-smi fails with exit 3 and leaves no file", async () => {
  const root = await hostTree();
  const empty = await mkdtemp(join(tmpdir(), "aicr-agent-empty-"));
  try {
    const file = join(empty, "snap.yaml");
    await assert.rejects(
      runAgent(deps(root, empty, []), {
        target: { kind: "file", path: file },
        nodeName: "cpu-1",
        requireGpu: true,
        collect: { only: ["gpu"] },
      }),
      (error: unknown) => {
        assert.ok(error instanceof NotFoundError);
        assert.equal(error.exitCode, 3);
        assert.equal(error.message, REQUIRE_GPU_MESSAGE);
        return true;
      },
    );
    assert.deepEqual(await readdir(empty), [], "no empty or partial file");
  } finally {
    await rm(root, { recursive: true, force: true });
    await rm(empty, { recursive: true, force: true });
  }
});

Deno.test("runAgent() interrupted mid-collection delivers nothing and fails with exit 130", async () => {
  const root = await hostTree();
  const dir = await mkdtemp(join(tmpdir(), "aicr-agent-slow-"));
  try {
    // An nvidia-smi that takes its time: the signal lands while the GPU is collected.
    await writeFile(join(dir, "nvidia-smi"), "#!/bin/sh\nsleep 20\n", { mode: 0o755 });
    const out: string[] = [];
    const file = join(dir, "snap.yaml");
    const interrupt = new AbortController();
    const timer = setTimeout(() => interrupt.abort(new Error("received SIGTERM")), 100);
    await assert.rejects(
      runAgent(deps(root, dir, out), {
        target: { kind: "file", path: file },
        nodeName: "gpu-1",
        collect: { only: ["gpu", "os"] },
        signal: interrupt.signal,
      }),
      (error: unknown) => {
        assert.ok(error instanceof InterruptedError, String(error));
        assert.equal(error.exitCode, 130);
        assert.equal(
          error.message,
          "Cannot finish the snapshot: interrupted (Error: received SIGTERM)",
        );
        return true;
      },
    );
    clearTimeout(timer);
    assert.deepEqual(out, [], "nothing on stdout");
    assert.deepEqual((await readdir(dir)).sort(), ["nvidia-smi"], "no file, no temporary");
  } finally {
    await rm(root, { recursive: true, force: true });
    await rm(dir, { recursive: true, force: true });
  }
});

Deno.test("runAgent() writes a file atomically in the requested format", async () => {
  const root = await hostTree();
  const dir = await mkdtemp(join(tmpdir(), "aicr-agent-out-"));
  try {
    const file = join(dir, "nested", "snap.json");
    await runAgent(deps(root, dir, []), {
      target: { kind: "file", path: file },
      format: "json",
      nodeName: "n",
      collect: { only: ["os"] },
    });
    const text = await readFile(file, "utf8");
    assert.equal(JSON.parse(text).kind, "Snapshot");
    assert.deepEqual(await readdir(join(dir, "nested")), ["snap.json"], "no temporary file left");
  } finally {
    await rm(root, { recursive: true, force: true });
    await rm(dir, { recursive: true, force: true });
  }
});

Deno.test("runAgent() into a ConfigMap reports the digest of the text it stored, its version and commit, in the report file", async () => {
  const root = await hostTree();
  const dir = await mkdtemp(join(tmpdir(), "aicr-agent-report-"));
  try {
    const fake = createFakeKube();
    const stored: Record<string, string>[] = [];
    fake.client.applyConfigMap = (_ns, _name, body) => {
      stored.push(body.data);
      return Promise.resolve({});
    };
    const report = join(dir, "termination-log");
    await writeFile(report, "");
    const base = deps(root, dir, []);
    await runAgent({ ...base, sink: { ...base.sink, kube: () => fake.client } }, {
      target: { kind: "configmap", ref: { namespace: "ns", name: "out" } },
      format: "json",
      nodeName: "n",
      collect: { only: ["os"] },
      report: { path: report, commit: "3c5f0d2" },
    });
    const text = stored[0]?.["snapshot.json"];
    assert.ok(text, "the snapshot went into the ConfigMap");
    assert.deepEqual(parseAgentReport(await readFile(report, "utf8")), {
      ...digestText(text),
      version: "0.1.0",
      commit: "3c5f0d2",
    });
  } finally {
    await rm(root, { recursive: true, force: true });
    await rm(dir, { recursive: true, force: true });
  }
});
