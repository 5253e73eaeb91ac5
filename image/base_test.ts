/**
 * The real base layers, built from the pinned Debian packages (fetched from the mirror apt uses
 * here into the cache folder on the first run, then read from it, each checked by its SHA256).
 */
import assert from "node:assert/strict";
import { defaultCacheDir } from "./source.ts";
import { ARCH_PATHS, type BaseLayer, buildBaseLayer, RUNTIME_NEEDED } from "./base.ts";
import { BASE_ARCHITECTURES, BASE_PACKAGES } from "./base_packages.ts";
import { digestOf } from "./digest.ts";
import { readElf } from "./elf.ts";
import { readTar, type TarMember } from "./tar.ts";
import { gunzipSync } from "node:zlib";
import { posix } from "node:path";

const cacheDir = defaultCacheDir((name) => Deno.env.get(name));
const layers = new Map<string, BaseLayer>();
async function layer(arch: (typeof BASE_ARCHITECTURES)[number]): Promise<BaseLayer> {
  if (!layers.has(arch)) layers.set(arch, await buildBaseLayer(arch, { cacheDir }));
  return layers.get(arch)!;
}

function members(base: BaseLayer): Map<string, TarMember> {
  const tar = new Uint8Array(gunzipSync(base.bytes));
  assert.equal(digestOf(tar), base.diffId, "the diff_id is the uncompressed tar's digest");
  return new Map(readTar(tar).map((m) => [m.entry.path.replace(/\/$/, ""), m]));
}

for (const arch of BASE_ARCHITECTURES) {
  Deno.test(`buildBaseLayer(${arch}) holds the runtime's libraries, their needs and the loader, and nothing to run a shell`, async () => {
    const base = await layer(arch);
    const files = members(base);
    const { triplet, interpreter } = ARCH_PATHS[arch];
    const resolve = (path: string): TarMember | undefined => {
      for (let hops = 0; hops < 8; hops++) {
        const m = files.get(path);
        if (m?.entry.type !== "symlink") return m;
        const link = m.entry.linkname!;
        path = link.startsWith("/") ? link.slice(1) : posix.join(posix.dirname(path), link);
      }
      return undefined;
    };
    assert.equal(resolve(interpreter.slice(1))?.entry.type, "file", interpreter);
    const libs = [...RUNTIME_NEEDED];
    for (let i = 0; i < libs.length; i++) {
      const file = resolve(`lib/${triplet}/${libs[i]}`) ?? resolve(`usr/lib/${triplet}/${libs[i]}`);
      assert.ok(file, `${arch}: ${libs[i]} is in the base`);
      const info = readElf(file.data);
      assert.equal(info?.architecture, arch, `${libs[i]} is an ${arch} ELF`);
      for (const n of info!.needed) if (!libs.includes(n)) libs.push(n);
    }
    for (const shell of ["bin/sh", "bin/bash", "usr/bin/sh", "bin/busybox"]) {
      assert.equal(files.get(shell), undefined, shell);
    }
    assert.match(
      new TextDecoder().decode(files.get("etc/passwd")!.data),
      /^nobody:x:65534:65534:/m,
    );
    assert.equal(files.get("tmp")!.entry.mode, 0o1777);
    assert.match(
      new TextDecoder().decode(resolve("etc/os-release")!.data),
      /VERSION_CODENAME=bookworm/,
    );
    for (const pkg of BASE_PACKAGES[arch]) {
      const control = new TextDecoder().decode(
        files.get(`var/lib/dpkg/status.d/${pkg.name}`)!.data,
      );
      assert.ok(control.startsWith(`Package: ${pkg.name}\n`), pkg.name);
      assert.ok(control.includes(`\nVersion: ${pkg.version}\n`), `${pkg.name} ${pkg.version}`);
    }
    for (const m of files.values()) {
      assert.deepEqual([m.entry.uid, m.entry.gid, m.entry.mtime], [0, 0, 0], m.entry.path);
    }
    const paths = [...files.keys()];
    assert.deepEqual(paths, [...paths].sort(), "entries are in path order");
  });
}

Deno.test("buildBaseLayer() gives the same digest every time", async () => {
  const first = await layer("amd64");
  const again = await buildBaseLayer("amd64", { cacheDir });
  assert.equal(again.digest, first.digest);
  assert.equal(again.diffId, first.diffId);
});
