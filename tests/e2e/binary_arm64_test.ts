/**
 * The linux/arm64 binary (`dist/aicr-linux-arm64`, or `$AICR_BIN_LINUX_ARM64`; built by
 * `scripts/build.ts --arch arm64` first when missing or older than the sources), run under
 * `qemu-aarch64-static` beside this host's amd64 binary: `version`, `agent` on a fake 8x GB200
 * and a fake 8x H100 node (the test world's `p6-gb200` and `p5-h100` profiles' `nvidia-smi`, host
 * files from the collectors' fixture tree) giving the same snapshot as the amd64 binary's, and
 * `daemon` answering a request. What qemu-user cannot show (a real Grace CPU, its page size, a
 * real NVIDIA driver) is not claimed here: the runtime, the code caches and every line of aicr's
 * code run as arm64 instructions.
 *
 * On an arm64 host the roles swap (the amd64 binary runs under qemu-x86_64-static).
 */
import assert from "node:assert/strict";
import { chmod, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseNvidiaSmi } from "../../collectors/mod.ts";
import { findEmulator, hostArch } from "../../scripts/node_base.ts";
import { parseSnapshot } from "../../snapshot/mod.ts";
import type { Snapshot } from "../../snapshot/mod.ts";
import {
  loadProfiles,
  NVIDIA_SMI_XML_NAME,
  nvidiaSmiScript,
  nvidiaSmiXml,
} from "../kubelet/profiles.ts";
import {
  assertQuiet,
  describeRun,
  ensureBinary,
  freePort,
  PACKAGE_VERSION,
  REPO_ROOT,
  spawnAicr,
} from "./binary_harness.ts";
import { commandLine } from "../../scripts/node_base.ts";
import type { Ran } from "./binary_harness.ts";

const HOST = hostArch();
const OTHER = HOST === "amd64" ? "arm64" : "amd64";
const arm = { bin: await ensureBinary("arm64"), emulator: findEmulator("arm64") };
const amd = { bin: await ensureBinary("amd64"), emulator: findEmulator("amd64") };
const HOST_ROOT = join(REPO_ROOT, "collectors", "testdata", "host");

/** Runs one binary with exactly `env`, under its emulator when it is not this host's. */
async function run(
  which: typeof arm,
  args: readonly string[],
  env: Record<string, string> = {},
): Promise<Ran> {
  const line = commandLine(which.emulator, which.bin, args);
  const out = await new Deno.Command(line.command, {
    args: line.args,
    cwd: tmpdir(),
    env,
    clearEnv: true,
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).output();
  const text = new TextDecoder();
  return {
    code: out.code,
    stdout: text.decode(out.stdout),
    stderr: text.decode(out.stderr),
    argv: [line.command, ...line.args],
  };
}

/** A folder holding a profile's fake `nvidia-smi` and the XML it prints. */
async function fakeNode(profileName: string): Promise<{ dir: string; xml: string }> {
  const gpu = loadProfiles().get(profileName)?.gpu;
  assert.ok(gpu, `profile ${profileName} has GPUs`);
  const dir = await mkdtemp(join(tmpdir(), `aicr-${profileName}-`));
  const xml = nvidiaSmiXml(gpu);
  await writeFile(join(dir, NVIDIA_SMI_XML_NAME), xml);
  await writeFile(join(dir, "nvidia-smi"), nvidiaSmiScript(gpu));
  await chmod(join(dir, "nvidia-smi"), 0o755);
  return { dir, xml };
}

/** The snapshot without what differs between any two runs (the time it was taken). */
function comparable(snapshot: Snapshot): Snapshot {
  const { timestamp: _, ...metadata } = snapshot.metadata;
  return { ...snapshot, metadata: metadata as Snapshot["metadata"] };
}

Deno.test(`binary arm64: \`aicr version\` under qemu reports this build and platform linux/arm64 (host ${HOST}, ${OTHER} emulated)`, async () => {
  const [armRan, amdRan] = [
    await run(arm, ["version", "--format", "json"]),
    await run(amd, ["version", "--format", "json"]),
  ];
  assert.equal(armRan.code, 0, describeRun(armRan));
  assert.equal(amdRan.code, 0, describeRun(amdRan));
  const armInfo = JSON.parse(armRan.stdout) as Record<string, string>;
  const amdInfo = JSON.parse(amdRan.stdout) as Record<string, string>;
  assert.equal(armInfo.platform, "linux/arm64");
  assert.equal(amdInfo.platform, "linux/amd64");
  assert.equal(armInfo.version, PACKAGE_VERSION);
  assert.equal(armInfo.backend, "node-sea");
  // One build: same version, commit, backend and Node, two architectures.
  for (const key of ["version", "commit", "backend", "runtime"]) {
    assert.equal(armInfo[key], amdInfo[key], `${key} of both binaries`);
  }
  assertQuiet(armRan.stderr, "arm64 version");
});

for (const profile of ["p6-gb200", "p5-h100"]) {
  Deno.test(`binary arm64: \`aicr agent\` on a fake ${profile} node under qemu gives the amd64 binary's snapshot`, async () => {
    const node = await fakeNode(profile);
    try {
      const env = { PATH: `${node.dir}:/usr/sbin:/usr/bin:/sbin:/bin`, NODE_NAME: `${profile}-1` };
      const args = ["agent", "--host-root", HOST_ROOT, "--require-gpu"];
      const armRan = await run(arm, args, env);
      const amdRan = await run(amd, args, env);
      assert.equal(armRan.code, 0, describeRun(armRan));
      assert.equal(amdRan.code, 0, describeRun(amdRan));
      assertQuiet(armRan.stderr, "arm64 agent");
      const armSnap = parseSnapshot(armRan.stdout);
      const amdSnap = parseSnapshot(amdRan.stdout);
      const gpu = armSnap.measurements.find((m) => m.type === "GPU");
      const want = parseNvidiaSmi(node.xml).map((s) => ({ subtype: s.subtype, data: s.data }));
      assert.deepEqual(gpu?.subtypes.map((s) => ({ subtype: s.subtype, data: s.data })), want);
      assert.equal(armSnap.metadata["source-node"], `${profile}-1`);
      // Every reading comes from the fixture tree and the fake nvidia-smi, none from the CPU the
      // binary runs on, so nothing architecture-specific is left to differ.
      assert.deepEqual(comparable(armSnap), comparable(amdSnap));
    } finally {
      await rm(node.dir, { recursive: true, force: true });
    }
  });
}

Deno.test("binary arm64: `aicr daemon` under qemu answers /v1/snapshot, then stops on SIGTERM", async () => {
  const node = await fakeNode("p6-gb200");
  const port = freePort();
  const child = spawnAicr(
    arm.bin,
    [
      "daemon",
      "--insecure-http",
      "--insecure-no-auth",
      "--listen",
      "127.0.0.1",
      "--port",
      String(port),
      "--node-name",
      "p6-gb200-1",
    ],
    node.dir,
    arm.emulator,
  );
  const stderr = new Response(child.stderr).text();
  try {
    let status = 0;
    let body = "";
    // qemu-user starts the arm64 Node in about a second here; allow a loaded machine 60 s.
    for (let i = 0; i < 600 && status !== 200; i++) {
      try {
        const response = await fetch(`http://127.0.0.1:${port}/v1/snapshot`);
        status = response.status;
        body = await response.text();
      } catch {
        await new Promise((done) => setTimeout(done, 100));
      }
    }
    assert.equal(status, 200, `GET /v1/snapshot: ${status} ${body.slice(0, 300)}`);
    const snapshot = parseSnapshot(body);
    assert.equal(snapshot.metadata["source-node"], "p6-gb200-1");
    assert.equal(snapshot.metadata.version, PACKAGE_VERSION);
  } finally {
    child.kill("SIGTERM");
    const status = await child.status;
    await rm(node.dir, { recursive: true, force: true });
    const log = await stderr;
    assert.equal(status.code, 0, `daemon exit on SIGTERM: ${log.slice(-1000)}`);
    assertQuiet(log, "arm64 daemon");
  }
});
