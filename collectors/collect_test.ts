import assert from "node:assert/strict";
import { chmod, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { NotFoundError, TimeoutError } from "../errors.ts";
import { NOOP_LOGGER } from "../log.ts";
import {
  createSnapshot,
  encodeSnapshot,
  encodeYamlWithLibrary,
  MEASUREMENT_TYPES,
  plainSnapshotDocument,
  SOURCE_STATUSES,
} from "../snapshot/mod.ts";
import type { Measurement } from "../snapshot/mod.ts";
import { collectMeasurements } from "./collect.ts";
import { createCommandRunner, createHostReader } from "./host.ts";
import { createSystemdBus } from "./dbus.ts";
import { parseOsRelease } from "./os.ts";
import { GPU_DETAIL_KEYS } from "./gpu.ts";
import { createFakeCluster, createRecordedCluster } from "./testdata/fake_cluster.ts";
import type { CollectorDeps, CommandRunner, HostReader, ListOptions, SystemdBus } from "./types.ts";
import { waitUntil } from "../tests/_wait.ts";

const H100 = fileURLToPath(
  new URL("../tests/fixtures/nvidia-smi-q-x.h100.xml", import.meta.url),
);
const HOST = fileURLToPath(new URL("./testdata/host", import.meta.url));

async function withFakeSmi(
  script: string,
  fn: (dir: string) => Promise<void>,
): Promise<void> {
  const dir = await mkdtemp(path.join(tmpdir(), "aicr-smi-"));
  try {
    const file = path.join(dir, "nvidia-smi");
    await writeFile(file, `#!/bin/sh\n${script}\n`);
    await chmod(file, 0o755);
    await fn(dir);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** Whether a process runs (a zombie awaiting its parent counts as gone). */
function isRunning(pid: number): boolean {
  try {
    const stat = Deno.readTextFileSync(`/proc/${pid}/stat`);
    return stat.slice(stat.lastIndexOf(")") + 2)[0] !== "Z";
  } catch {
    return false;
  }
}

function baseDeps(overrides: Partial<CollectorDeps> = {}): CollectorDeps {
  return {
    host: createHostReader({ root: HOST }),
    exec: createCommandRunner({ path: "/nonexistent" }),
    env: () => undefined,
    log: NOOP_LOGGER,
    ...overrides,
  };
}

function rawText(xml: string, tag: string): string | undefined {
  return new RegExp(`<${tag}>([^<]*)</${tag}>`).exec(xml)?.[1];
}

/** Raw text at a slash path inside an XML fragment, found with string search (not the parser). */
function rawPath(xml: string, path: string): string | undefined {
  const steps = path.split("/");
  let scope = xml;
  for (const step of steps.slice(0, -1)) {
    const start = scope.indexOf(`<${step}>`);
    if (start < 0) return undefined;
    const end = scope.indexOf(`</${step}>`, start);
    scope = scope.slice(start, end < 0 ? undefined : end);
  }
  const value = rawText(scope, steps[steps.length - 1] as string);
  return value === undefined ? undefined : value.trim();
}

function assertEveryContext(measurements: Measurement[]): void {
  for (const m of measurements) {
    for (const s of m.subtypes) {
      assert.ok(
        (SOURCE_STATUSES as readonly string[]).includes(s.context?.status ?? ""),
        `${m.type}.${s.subtype} has a status`,
      );
      assert.ok(s.context?.source, `${m.type}.${s.subtype} has a source`);
    }
  }
}

Deno.test("collectMeasurements() with a fake nvidia-smi on PATH matches the H100 fixture field by field", async () => {
  await withFakeSmi(`[ "$1 $2" = "-q -x" ] || exit 64\ncat '${H100}'`, async (dir) => {
    const { measurements, reports } = await collectMeasurements(
      baseDeps({ exec: createCommandRunner({ path: dir }) }),
      { only: ["gpu"] },
    );
    assert.equal(reports[0]?.status, "ok");
    const gpu = measurements[0];
    assert.equal(gpu?.type, "GPU");
    const xml = await readFile(H100, "utf8");
    const blocks = xml.split(/<gpu id="/).slice(1);
    const smi = gpu?.subtypes[0]?.data ?? {};
    assert.equal(smi.driver, rawText(xml, "driver_version"));
    assert.equal(smi["cuda-version"], rawText(xml, "cuda_version"));
    assert.equal(smi["gpu-count"], blocks.length);
    const upstream: [string, string][] = [
      ["gpu.model", "product_name"],
      ["gpu.product-architecture", "product_architecture"],
      ["gpu.display-mode", "display_mode"],
      ["gpu.display-active", "display_active"],
      ["gpu.persistence-mode", "persistence_mode"],
      ["gpu.addressing-mode", "addressing_mode"],
      ["gpu.vbios-version", "vbios_version"],
      ["gpu.gsp-firmware-version", "gsp_firmware_version"],
    ];
    for (const [key, tag] of upstream) {
      assert.equal(smi[key], rawText(blocks[0] as string, tag), key);
    }
    assert.equal(Object.keys(smi).length, 3 + upstream.length);
    blocks.forEach((block, i) => {
      const data = gpu?.subtypes.find((s) => s.subtype === `gpu-${i}`)?.data ?? {};
      // Every per-GPU key, against the fixture's own text.
      let present = 0;
      for (const [key, ...paths] of GPU_DETAIL_KEYS) {
        const want = paths.map((p) => rawPath(block, p)).find((v) => v !== undefined);
        assert.equal(data[key], want, `gpu-${i}.${key}`);
        if (want !== undefined) present++;
      }
      // The H100 document has every key but the older driver's `power.limit.enforced`.
      assert.equal(present, GPU_DETAIL_KEYS.length - 1);
      assert.equal(data["pci-bus-id"], block.slice(0, block.indexOf('"')));
      for (
        const [key, tag] of [["uuid", "uuid"], ["serial", "serial"], [
          "vbios-version",
          "vbios_version",
        ], ["model", "product_name"]]
      ) {
        assert.equal(data[key as string], rawText(block, tag as string), `gpu-${i}.${key}`);
      }
    });
    assert.deepEqual(gpu?.subtypes[1]?.data, { "NVIDIA H100 80GB HBM3": 8 });
    assertEveryContext(measurements);
  });
});

Deno.test("collectMeasurements() on this host reads real OS data and reports SystemD absent", async () => {
  const host = createHostReader({ root: "/" });
  const { measurements, reports } = await collectMeasurements({
    host,
    exec: createCommandRunner({ path: "/nonexistent" }),
    systemd: () =>
      createSystemdBus({
        privateSocket: "/run/systemd/private",
        systemSocket: "/run/dbus/system_bus_socket",
      }),
    env: () => undefined,
    log: NOOP_LOGGER,
  }, { only: ["os", "systemd", "gpu"] });
  assert.deepEqual(reports.map((r) => [r.collector, r.status]), [["gpu", "ok"], ["os", "ok"], [
    "systemd",
    "ok",
  ]]);
  const os = measurements.find((m) => m.type === "OS");
  const byName = Object.fromEntries((os?.subtypes ?? []).map((s) => [s.subtype, s]));
  const modulesText = await readFile("/proc/modules", "utf8").catch(() => undefined);
  if (modulesText === undefined) {
    // A kernel without module support (this sandbox boots with `nomodule`) has no /proc/modules:
    // the subtype must say so rather than look like "no modules loaded".
    assert.deepEqual(byName.kmod?.data, {});
    assert.equal(byName.kmod?.context?.status, "absent");
  } else {
    const modules = modulesText.split("\n").filter(Boolean).map((l) => l.split(" ")[0]);
    for (const name of modules) assert.equal(byName.kmod?.data[name as string], true, name);
    assert.equal(byName.kmod?.context?.status, "ok");
  }
  const pidMax = (await readFile("/proc/sys/kernel/pid_max", "utf8")).trim();
  assert.equal(byName.sysctl?.data["/proc/sys/kernel/pid_max"], pidMax);
  assert.equal(
    Object.keys(byName.sysctl?.data ?? {}).some((k) => k.startsWith("/proc/sys/net/")),
    false,
  );
  const release = parseOsRelease(await readFile("/etc/os-release", "utf8"));
  assert.ok(release.ID);
  assert.equal(byName.release?.data.ID, release.ID);
  assert.equal(byName.grub?.context?.status, "ok");
  assert.equal("root" in (byName.grub?.data ?? {}), false);
  const systemd = measurements.find((m) => m.type === "SystemD");
  assert.deepEqual(systemd?.subtypes.map((s) => [s.subtype, s.context?.status]), [[
    "status",
    "absent",
  ]]);
  const gpu = measurements.find((m) => m.type === "GPU");
  assert.deepEqual(gpu?.subtypes[0]?.data, { "gpu-count": 0 });
  assert.equal(gpu?.subtypes[0]?.context?.status, "absent");
  assertEveryContext(measurements);
});

/**
 * A meeting point: each collector's first read waits there until all five have arrived. Run one
 * after another, the first would wait for the others forever; so all five arriving proves they
 * overlapped, whatever the machine's speed. Waiting is bounded: after `timeoutMs` the read fails
 * naming who never came.
 */
function rendezvous(names: readonly string[], timeoutMs = 30_000) {
  const arrived = new Set<string>();
  let open!: () => void;
  const opened = new Promise<void>((resolve) => (open = resolve));
  return {
    arrived,
    async arrive(name: string): Promise<void> {
      arrived.add(name);
      if (names.every((n) => arrived.has(n))) open();
      let timer: ReturnType<typeof setTimeout> | undefined;
      const late = new Promise<never>((_, reject) => {
        timer = setTimeout(() => {
          const missing = names.filter((n) => !arrived.has(n));
          reject(new Error(`${name} waited ${timeoutMs} ms for ${missing.join(", ")} to start`));
        }, timeoutMs);
      });
      try {
        await Promise.race([opened, late]);
      } finally {
        clearTimeout(timer);
      }
    },
  };
}

Deno.test("collectMeasurements() runs all five concurrently and returns them in canonical order", async () => {
  const meet = rendezvous(["k8s", "gpu", "os", "systemd", "topology"]);
  const recorded = await createRecordedCluster();
  const cluster = {
    ...recorded,
    async serverVersion(signal?: AbortSignal) {
      await meet.arrive("k8s");
      return await recorded.serverVersion(signal);
    },
    async listNodes(options?: ListOptions) {
      await meet.arrive("topology");
      return await recorded.listNodes(options);
    },
  };
  const realHost = createHostReader({ root: HOST });
  const host: HostReader = {
    ...realHost,
    async readFile(path, maxBytes) {
      await meet.arrive("os");
      return await realHost.readFile(path, maxBytes);
    },
  };
  const realExec = createCommandRunner({ path: "/nonexistent" });
  const exec: CommandRunner = {
    async run(command, args, options) {
      await meet.arrive("gpu");
      return await realExec.run(command, args, options);
    },
  };
  const systemd: SystemdBus = {
    async getUnitProperties() {
      await meet.arrive("systemd");
      return {};
    },
    close: () => Promise.resolve(),
  };
  const { measurements, reports } = await collectMeasurements(
    baseDeps({
      cluster,
      host,
      exec,
      systemd,
      env: (name) => (name === "NODE_NAME" ? "gpu-node-1" : undefined),
    }),
  );
  assert.deepEqual(measurements.map((m) => m.type), [...MEASUREMENT_TYPES]);
  assert.deepEqual(reports.map((r) => r.collector), ["k8s", "gpu", "os", "systemd", "topology"]);
  for (const r of reports) assert.equal(r.status, "ok", `${r.collector}: ${r.error}`);
  assert.equal(meet.arrived.size, 5, "every collector was inside a read at the same time");
  const node = measurements[0]?.subtypes.find((s) => s.subtype === "node");
  assert.equal(node?.data["source-node"], "gpu-node-1");
  assertEveryContext(measurements);
});

Deno.test("collectMeasurements() with topologyScope node reads its own Node once for K8s and NodeTopology, and lists no node", async () => {
  const cluster = await createRecordedCluster();
  const { measurements, reports } = await collectMeasurements(
    baseDeps({ cluster, env: (name) => (name === "NODE_NAME" ? "gpu-node-1" : undefined) }),
    { only: ["k8s", "topology"], topologyScope: "node" },
  );
  for (const r of reports) assert.equal(r.status, "ok", `${r.collector}: ${r.error}`);
  const nodeCalls = cluster.calls.filter((c) => /Node/.test(c.method));
  assert.deepEqual(nodeCalls.map((c) => [c.method, c.args]), [["getNode", { name: "gpu-node-1" }]]);
  const topology = measurements.find((m) => m.type === "NodeTopology");
  assert.equal(topology?.subtypes[0]?.data.scope, "node");
  assert.equal(topology?.subtypes[0]?.data["node-count"], 1);
  // The default stays upstream's: one LIST of every node.
  const listed = await createRecordedCluster();
  await collectMeasurements(baseDeps({ cluster: listed }), { only: ["topology"] });
  assert.deepEqual(listed.calls.map((c) => c.method), ["listNodes"]);
});

Deno.test("collectMeasurements() gives a hanging collector its timeout status without holding up the rest", async () => {
  // Far beyond any deadline of the test: only the collector's own timeout can end this read.
  const cluster = createFakeCluster({ delayMs: 600_000 });
  const { measurements, reports } = await collectMeasurements(baseDeps({ cluster }), {
    only: ["os", "topology"],
    timeoutsMs: { topology: 50 },
  });
  assert.deepEqual(reports.map((r) => [r.collector, r.status]), [["os", "ok"], [
    "topology",
    "timeout",
  ]]);
  assert.match(reports[1]?.error ?? "", /did not finish within 50 ms/);
  const topology = measurements[1];
  assert.equal(topology?.type, "NodeTopology");
  for (const s of topology?.subtypes ?? []) assert.equal(s.context?.status, "timeout");
  assert.equal(measurements[0]?.subtypes[0]?.context?.status, "ok");
});

Deno.test("collectMeasurements() turns a collector that throws into a failed report and an empty measurement", async () => {
  const real = createHostReader({ root: HOST });
  const host: HostReader = { ...real, exists: () => Promise.reject(new Error("reader bug")) };
  const { measurements, reports } = await collectMeasurements(baseDeps({ host }), {
    only: ["gpu", "os"],
  });
  assert.deepEqual(reports.map((r) => [r.collector, r.status, r.error]), [
    ["gpu", "ok", undefined],
    ["os", "failed", "reader bug"],
  ]);
  assert.deepEqual(measurements[1]?.subtypes.map((s) => [s.subtype, s.context?.status]), [
    ["grub", "failed"],
    ["sysctl", "failed"],
    ["kmod", "failed"],
    ["release", "failed"],
  ]);
});

Deno.test("collectMeasurements() stops everything when its signal aborts", async () => {
  const controller = new AbortController();
  const cluster = createFakeCluster({ delayMs: 5_000 });
  setTimeout(() => controller.abort(), 20);
  const { reports } = await collectMeasurements(baseDeps({ cluster }), {
    only: ["k8s", "topology"],
    signal: controller.signal,
  });
  assert.deepEqual(reports.map((r) => r.status), ["timeout", "timeout"]);
  assert.match(reports[0]?.error ?? "", /cancelled/);
});

Deno.test("createCommandRunner() resolves on PATH, reports exit codes, and kills on timeout", async () => {
  await withFakeSmi(`echo out; echo err >&2; exit 3`, async (dir) => {
    const runner: CommandRunner = createCommandRunner({ path: `/nonexistent:${dir}` });
    const result = await runner.run("nvidia-smi", [], { timeoutMs: 5000 });
    assert.equal(result.exitCode, 3);
    assert.equal(new TextDecoder().decode(result.stdout), "out\n");
    assert.equal(result.stderr, "err\n");
    await assert.rejects(runner.run("no-such-tool", [], { timeoutMs: 1000 }), NotFoundError);
    await assert.rejects(
      runner.run("nvidia-smi", [], { timeoutMs: 1000, maxOutputBytes: 2 }),
      /too large/,
    );
  });
  // A wrapper script whose own child holds the output pipe: the timeout must kill the whole
  // tree, so the child is gone afterwards (not left to finish its 10 minutes).
  await withFakeSmi(`sleep 600 &\necho $! > "$(dirname "$0")/child.pid"\nwait`, async (dir) => {
    const runner = createCommandRunner({ path: dir });
    await assert.rejects(runner.run("nvidia-smi", [], { timeoutMs: 100 }), TimeoutError);
    const pid = Number((await readFile(path.join(dir, "child.pid"), "utf8")).trim());
    assert.ok(pid > 0, "the script recorded its child");
    await waitUntil(`the script's child ${pid} to be killed`, () => !isRunning(pid));
  });
});

Deno.test("a snapshot of this host with the fake H100 encodes byte for byte as the yaml library writes it", async () => {
  await withFakeSmi(`cat '${H100}'`, async (dir) => {
    const { measurements } = await collectMeasurements({
      host: createHostReader({ root: "/" }),
      exec: createCommandRunner({ path: dir }),
      env: () => undefined,
      log: NOOP_LOGGER,
    }, { only: ["gpu", "os", "topology"] });
    const snapshot = createSnapshot(measurements, {
      timestamp: new Date(0),
      version: "0.1.0",
      nodeName: "bench-h100",
    });
    // /proc/sys holds tabs (fs.dentry-state) and may hold multi-line values (kernel.core_modes):
    // the writer's library paths are taken on a real host too.
    assert.equal(encodeSnapshot(snapshot), encodeYamlWithLibrary(plainSnapshotDocument(snapshot)));
  });
});
