import assert from "node:assert/strict";
import { Buffer } from "node:buffer";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { NotFoundError, PermissionError, ToolError } from "../errors.ts";
import { decodeUtf8, statusOf } from "./status.ts";
import { createHostReader } from "./host.ts";
import {
  collectOs,
  parseCmdline,
  parseModules,
  parseOsRelease,
  parseSysctlFile,
  readSysctl,
  splitPieces,
} from "./os.ts";
import type { HostReader } from "./types.ts";

const HOST = fileURLToPath(new URL("./testdata/host", import.meta.url));
const HOST_FALLBACK = fileURLToPath(new URL("./testdata/host-fallback", import.meta.url));

Deno.test("splitPieces() trims, and drops empty pieces and pieces starting with '#'", () => {
  assert.deepEqual(splitPieces("  a \n\n# c\n b#x \n  #d"), ["a", "b#x"]);
});

Deno.test("parseCmdline() splits on the first '=', gives key-only tokens '' and removes root", () => {
  assert.deepEqual(
    parseCmdline("BOOT_IMAGE=/boot/vmlinuz root=UUID=abc ro quiet a=1 a=2 opt=x=y\n"),
    { BOOT_IMAGE: "/boot/vmlinuz", ro: "", quiet: "", a: "2", opt: "x=y" },
  );
});

Deno.test("parseModules() keys each module name with true", () => {
  assert.deepEqual(parseModules("nvidia 1 0 - Live 0x0\nnvidia_uvm 2 0 - Live 0x0\n\n"), {
    nvidia: true,
    nvidia_uvm: true,
  });
});

Deno.test("parseOsRelease() trims quotes and skips comments, key-only lines and empty values", () => {
  assert.deepEqual(
    parseOsRelease(
      `NAME="Ubuntu"\n# x\nID=ubuntu\nKEY_ONLY\nEMPTY=""\nVERSION_ID='24.04'\nURL="a=b"\n`,
    ),
    { NAME: "Ubuntu", ID: "ubuntu", VERSION_ID: "24.04", URL: "a=b" },
  );
});

Deno.test("parseSysctlFile() keeps single values and splits multi-line key/value files", () => {
  assert.deepEqual(parseSysctlFile("/proc/sys/kernel/printk", "4\t4\t1\t7\n"), {
    "/proc/sys/kernel/printk": "4\t4\t1\t7",
  });
  assert.deepEqual(parseSysctlFile("/p/e", ""), { "/p/e": "" });
  assert.deepEqual(parseSysctlFile("/p/kv", "a 1\nb  2   3\n"), {
    "/p/kv/a": "1",
    "/p/kv/b": "2 3",
  });
  assert.deepEqual(parseSysctlFile("/p/mixed", "a 1\nsingle\n"), { "/p/mixed": "a 1\nsingle" });
  assert.deepEqual(parseSysctlFile("/p/one", "a 1\n"), { "/p/one": "a 1" });
});

Deno.test("readSysctl() walks the fixture tree without net, cdrom, symlinks, oversized or non-UTF-8 files", async () => {
  const { data, skipped, files } = await readSysctl(createHostReader({ root: HOST }));
  assert.deepEqual(data, {
    "/proc/sys/fs/binfmt_misc/status": "enabled",
    "/proc/sys/kernel/empty_value": "",
    "/proc/sys/kernel/mixed_lines": "Active / Total objects\nsingle",
    "/proc/sys/kernel/multi_kv/root_keys": "200 x",
    "/proc/sys/kernel/multi_kv/user_keys": "1000",
    "/proc/sys/kernel/pid_max": "4194304",
    "/proc/sys/kernel/printk": "4\t4\t1\t7",
    "/proc/sys/kernel/two_lines_plain": "first\nsecond",
    "/proc/sys/vm/swappiness": "60",
  });
  assert.equal(skipped, 2); // oversized and non_utf8
  assert.equal(files, 10);
});

Deno.test("createHostReader() readTexts() reads as readFile and a strict UTF-8 decode would", async () => {
  const dir = mkdtempSync(join(tmpdir(), "aicr-readtexts-"));
  try {
    const files: Record<string, Uint8Array | string> = {
      plain: "60\n",
      empty: "",
      bom: "\ufeffwith a BOM",
      replacement: "a real \ufffd is text",
      invalid: Uint8Array.of(0x61, 0xff, 0x62),
      // 600 two-byte characters: 1,200 bytes in 600 UTF-16 code units.
      wide: "\u00e9".repeat(600),
      narrow: "e".repeat(1000),
    };
    for (const [name, content] of Object.entries(files)) writeFileSync(join(dir, name), content);
    mkdirSync(join(dir, "a-directory"));
    const host = createHostReader({ root: dir });
    const paths = [...Object.keys(files), "a-directory", "missing"].map((name) => `/${name}`);
    const texts = await host.readTexts!(paths, 1000);
    const oneByOne = await Promise.all(
      paths.map((path) =>
        host.readFile(path, 1000).then((bytes) => decodeUtf8(bytes), () => undefined)
      ),
    );
    assert.deepEqual(texts, oneByOne);
    assert.deepEqual(texts, [
      "60\n",
      "",
      "\ufeffwith a BOM",
      "a real \ufffd is text",
      undefined,
      undefined,
      "e".repeat(1000),
      undefined,
      undefined,
    ]);
  } finally {
    rmSync(dir, { recursive: true });
  }
});

Deno.test("readSysctl() fails as a whole when a directory cannot be listed", async () => {
  const real = createHostReader({ root: HOST });
  const host: HostReader = {
    ...real,
    readDir: (path) =>
      path === "/proc/sys/vm"
        ? Promise.reject(new PermissionError("Cannot list '/proc/sys/vm': permission denied"))
        : real.readDir(path),
  };
  await assert.rejects(readSysctl(host), PermissionError);
  const m = await collectOs({ host });
  assert.deepEqual(m.subtypes[1], {
    subtype: "sysctl",
    data: {},
    context: {
      status: "denied",
      source: "/proc/sys",
      message: "Cannot list '/proc/sys/vm': permission denied",
    },
  });
});

Deno.test("collectOs() reads grub, sysctl, kmod and release from a host-root prefix", async () => {
  const m = await collectOs({ host: createHostReader({ root: HOST }) });
  assert.equal(m.type, "OS");
  assert.deepEqual(m.subtypes.map((s) => s.subtype), ["grub", "sysctl", "kmod", "release"]);
  assert.deepEqual(m.subtypes[0]?.data, {
    BOOT_IMAGE: "/boot/vmlinuz-6.8.0-1028-aws",
    ro: "",
    console: "ttyS0",
    "nvme_core.io_timeout": "4294967295",
    hugepages: "5128",
    numa_balancing: "disable",
    quiet: "",
    init_on_alloc: "0",
  });
  assert.deepEqual(m.subtypes[0]?.context, { status: "ok", source: "/proc/cmdline" });
  assert.equal(m.subtypes[1]?.context?.status, "ok");
  assert.match(m.subtypes[1]?.context?.message ?? "", /2 of 10 files skipped/);
  assert.deepEqual(m.subtypes[2]?.data, {
    nvidia_uvm: true,
    nvidia_drm: true,
    nvidia: true,
    overlay: true,
  });
  assert.deepEqual(m.subtypes[3]?.data, {
    PRETTY_NAME: "Ubuntu 24.04.1 LTS",
    NAME: "Ubuntu",
    VERSION_ID: "24.04",
    VERSION: "24.04.1 LTS (Noble Numbat)",
    VERSION_CODENAME: "noble",
    ID: "ubuntu",
    ID_LIKE: "debian",
    HOME_URL: "https://www.ubuntu.com/",
    UBUNTU_CODENAME: "noble",
  });
  assert.deepEqual(m.subtypes[3]?.context, { status: "ok", source: "/etc/os-release" });
});

Deno.test("collectOs() falls back to /usr/lib/os-release only when /etc/os-release does not exist", async () => {
  const m = await collectOs({ host: createHostReader({ root: HOST_FALLBACK }) });
  assert.deepEqual(m.subtypes[3]?.data, { ID: "fallback", NAME: "Fallback Linux" });
  assert.equal(m.subtypes[3]?.context?.source, "/usr/lib/os-release");
  // Missing sources are reported, not silently dropped.
  assert.deepEqual(m.subtypes[2]?.data, {});
  assert.equal(m.subtypes[2]?.context?.status, "absent");
  assert.equal(m.subtypes[1]?.context?.status, "absent");
  assert.deepEqual(m.subtypes[0]?.data, { ro: "" });
});

Deno.test("collectOs() says denied for an unreadable file and keeps the other subtypes", async () => {
  const real = createHostReader({ root: HOST });
  const host: HostReader = {
    ...real,
    readFile: (path, max) =>
      path === "/proc/modules"
        ? Promise.reject(new PermissionError("Cannot read '/proc/modules': permission denied"))
        : real.readFile(path, max),
  };
  const m = await collectOs({ host });
  assert.equal(m.subtypes[2]?.context?.status, "denied");
  assert.equal(m.subtypes[0]?.context?.status, "ok");
  assert.equal(m.subtypes[3]?.context?.status, "ok");
});

Deno.test("createHostReader() maps missing files to NotFoundError and bounds reads", async () => {
  const host = createHostReader({ root: HOST });
  await assert.rejects(host.readFile("/no/such/file"), NotFoundError);
  await assert.rejects(host.readFile("/proc/sys/kernel/oversized"), /larger than the bound/);
  const whole = await host.readFile("/proc/sys/kernel/oversized", 2 << 20);
  assert.equal(whole.length, (1 << 20) + 10);
  // Many 64 KiB chunks, each copied out of the one scratch buffer: the bytes are the file's.
  const onDisk = readFileSync(join(HOST, "proc/sys/kernel/oversized"));
  assert.deepEqual(Buffer.from(whole).equals(onDisk), true);
  // A later read leaves an earlier result as it was (no view of shared memory is returned).
  const first = await host.readFile("/etc/os-release");
  const firstCopy = Uint8Array.from(first);
  await host.readFile("/proc/sys/kernel/oversized", 2 << 20);
  assert.deepEqual(first, firstCopy);
  assert.equal(await host.exists("/etc/os-release"), true);
  assert.equal(await host.exists("/etc/nothing"), false);
  const entries = await host.readDir("/proc/sys/vm");
  assert.deepEqual(entries.find((e) => e.name === "link_to_pid_max"), {
    name: "link_to_pid_max",
    isFile: false,
    isDirectory: false,
    isSymlink: true,
  });
});

Deno.test("statusOf() classifies any ToolError by its code, not only by its class", () => {
  assert.equal(
    statusOf(new ToolError("Cannot list pods: forbidden", "unauthorized", 403)),
    "denied",
  );
  assert.equal(statusOf(new ToolError("Cannot get node: not found", "notFound", 404)), "absent");
  assert.equal(statusOf(new ToolError("Cannot list: deadline", "timeout", 504)), "timeout");
  assert.equal(
    statusOf(new ToolError("Cannot list: connection refused", "unavailable", 503)),
    "failed",
  );
  assert.equal(statusOf(new TypeError("bug")), "failed");
});

Deno.test("collectOs() says failed for a non-UTF-8 or oversized source file", async () => {
  const real = createHostReader({ root: HOST });
  const host: HostReader = {
    ...real,
    readFile: (path, max) =>
      path === "/proc/cmdline"
        ? real.readFile("/proc/sys/kernel/non_utf8", max)
        : path === "/etc/os-release"
        ? real.readFile("/proc/sys/kernel/oversized", max)
        : real.readFile(path, max),
  };
  const m = await collectOs({ host });
  assert.deepEqual(m.subtypes[0]?.data, {});
  assert.equal(m.subtypes[0]?.context?.status, "failed");
  assert.match(m.subtypes[0]?.context?.message ?? "", /not valid UTF-8/);
  assert.deepEqual(m.subtypes[3]?.data, {});
  assert.equal(m.subtypes[3]?.context?.status, "failed");
  assert.match(
    m.subtypes[3]?.context?.message ?? "",
    /larger than the bound: current limit is 1048576 bytes/,
  );
});
