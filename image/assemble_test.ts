import assert from "node:assert/strict";
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { gunzipSync } from "node:zlib";
import {
  type AssembledImage,
  assembleImage,
  buildReference,
  checkBinaries,
  IMAGE_LAYOUT,
} from "./assemble.ts";
import { writeArchive } from "./archive.ts";
import { buildBaseLayer } from "./base.ts";
import { digestOf } from "./digest.ts";
import { PLATFORMS } from "./oci.ts";
import { defaultCacheDir } from "./source.ts";
import { readTar } from "./tar.ts";

const cacheDir = defaultCacheDir((name) => Deno.env.get(name));

/** A stand-in binary: an ELF header of a machine, and a build's information somewhere inside. */
function fakeBinary(dir: string, name: string, machine: number, build?: string): string {
  const bytes = new Uint8Array(300_000);
  bytes.set([0x7f, 0x45, 0x4c, 0x46, 2, 1]);
  bytes[18] = machine;
  for (let i = 64; i < bytes.length; i++) bytes[i] = (i * 7919) % 251;
  if (build) bytes.set(new TextEncoder().encode(build), 200_000);
  const path = join(dir, name);
  writeFileSync(path, bytes);
  return path;
}

const BUILD =
  '{version:"0.9.0",commit:"abc1234",backend:"node-sea",imageRepository:"reg.example/team/aicr"}';

async function withImage(test: (image: AssembledImage, dir: string) => Promise<void>) {
  const dir = mkdtempSync(join(tmpdir(), "aicr-assemble-"));
  try {
    const binaries = [
      { platform: PLATFORMS["linux/arm64"]!, path: fakeBinary(dir, "arm", 0xb7, BUILD) },
      { platform: PLATFORMS["linux/amd64"]!, path: fakeBinary(dir, "x86", 0x3e, BUILD) },
    ];
    const build = await checkBinaries(binaries);
    assert.deepEqual(build, {
      version: "0.9.0",
      commit: "abc1234",
      backend: "node-sea",
      imageRepository: "reg.example/team/aicr",
    });
    assert.equal(buildReference(build), "reg.example/team/aicr:0.9.0");
    const image = await assembleImage(build, {
      binaries,
      cacheDir: join(dir, "cache"),
      base: (arch) => buildBaseLayer(arch, { cacheDir }),
    });
    try {
      await test(image, dir);
    } finally {
      await image.dispose();
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

Deno.test("assembleImage() makes one index over a manifest per platform, with the layout the pods assume", async () => {
  await withImage(async (image) => {
    const index = JSON.parse(new TextDecoder().decode(image.index.bytes));
    assert.deepEqual(
      index.manifests.map((m: { platform: unknown }) => m.platform),
      [{ os: "linux", architecture: "arm64", variant: "v8" }, {
        os: "linux",
        architecture: "amd64",
      }],
    );
    for (const p of image.platforms) {
      const config = JSON.parse(new TextDecoder().decode(p.config.bytes));
      assert.equal(config.architecture, p.platform.architecture);
      assert.equal(config.config.User, "65534:65534");
      assert.deepEqual(config.config.Entrypoint, ["/usr/local/bin/aicr"]);
      assert.deepEqual(config.config.Env, [...IMAGE_LAYOUT.env]);
      assert.ok(config.config.Env.includes("NVIDIA_DRIVER_CAPABILITIES=utility"));
      assert.equal(config.created, "1970-01-01T00:00:00Z");
      assert.equal(config.config.Labels["org.opencontainers.image.version"], "0.9.0");
      const manifest = JSON.parse(new TextDecoder().decode(p.manifest.bytes));
      assert.equal(manifest.config.digest, p.config.descriptor.digest);
      assert.deepEqual(config.rootfs.diff_ids[0], p.base.diffId);
      // The binary's layer: its folders, then the file at /usr/local/bin/aicr, executable, root's.
      let bytes = new Uint8Array(0);
      for await (const chunk of p.layers[1]!.read()) bytes = new Uint8Array([...bytes, ...chunk]);
      assert.equal(digestOf(bytes), manifest.layers[1].digest);
      const tar = new Uint8Array(gunzipSync(bytes));
      assert.equal(digestOf(tar), config.rootfs.diff_ids[1]);
      const members = readTar(tar);
      assert.deepEqual(members.map((m) => m.entry.path), [
        "usr/",
        "usr/local/",
        "usr/local/bin/",
        "usr/local/bin/aicr",
      ]);
      assert.equal(members[3]!.entry.mode, 0o755);
      assert.deepEqual(members[3]!.data, new Uint8Array(readFileSync(p.binary.path)));
    }
  });
});

Deno.test("assembleImage() and writeArchive() give the same bytes twice; the archive holds every blob", async () => {
  const digests: string[] = [];
  const archives: string[] = [];
  for (let i = 0; i < 2; i++) {
    await withImage(async (image, dir) => {
      digests.push(image.index.descriptor.digest);
      const out = join(dir, "a.tar");
      const written = await writeArchive(image, out, { reference: "reg.example/aicr:0.9.0" });
      archives.push(written.sha256);
      const members = readTar(new Uint8Array(readFileSync(out)));
      const names = members.map((m) => m.entry.path);
      assert.deepEqual(names.slice(0, 2), ["blobs/", "blobs/sha256/"]);
      assert.deepEqual(names.slice(-2), ["index.json", "oci-layout"]);
      for (
        const m of members.filter((m) =>
          m.entry.path.startsWith("blobs/sha256/") && m.entry.type === "file"
        )
      ) {
        assert.equal(
          digestOf(m.data),
          `sha256:${m.entry.path.slice(13)}`,
          "a blob's name is its digest",
        );
      }
      const layout = JSON.parse(
        new TextDecoder().decode(members.find((m) => m.entry.path === "index.json")!.data),
      );
      assert.equal(layout.manifests[0].digest, image.index.descriptor.digest);
      assert.equal(
        layout.manifests[0].annotations["io.containerd.image.name"],
        "reg.example/aicr:0.9.0",
      );
    });
  }
  assert.equal(digests[0], digests[1]);
  assert.equal(archives[0], archives[1]);
});

Deno.test({
  name: "writeArchive() to a device writes into it, never renames over it (-o /dev/null)",
  // A character device of its own (the null device's numbers) in a scratch folder: creating one
  // needs root, as CI runs; were the device renamed over, only this copy would be lost.
  ignore: Deno.uid() !== 0,
  async fn() {
    await withImage(async (image, dir) => {
      const device = join(dir, "null");
      const made = await new Deno.Command("mknod", { args: ["-m", "666", device, "c", "1", "3"] })
        .output();
      assert.ok(made.success, new TextDecoder().decode(made.stderr));
      const written = await writeArchive(image, device, { reference: "reg.example/aicr:0.9.0" });
      assert.ok(written.bytes > 0);
      assert.ok(Deno.lstatSync(device).isCharDevice, "the device is still a device");
      assert.deepEqual(readdirSync(dir).filter((n) => n.endsWith(".tmp")), [], "no temp left");
    });
  },
});

Deno.test("checkBinaries() refuses a binary of another machine, a non-ELF, a non-aicr and two builds", async () => {
  const dir = mkdtempSync(join(tmpdir(), "aicr-check-"));
  try {
    const amd = PLATFORMS["linux/amd64"]!;
    const arm = PLATFORMS["linux/arm64"]!;
    const script = join(dir, "script");
    writeFileSync(script, "#!/bin/sh\necho hi\n" + BUILD);
    await assert.rejects(
      checkBinaries([{ platform: arm, path: fakeBinary(dir, "x", 0x3e, BUILD) }]),
      /as the linux\/arm64 binary: it is an ELF for amd64/,
    );
    await assert.rejects(
      checkBinaries([{ platform: amd, path: script }]),
      /not a 64-bit Linux ELF/,
    );
    await assert.rejects(
      checkBinaries([{ platform: amd, path: fakeBinary(dir, "y", 0x3e) }]),
      /it is not an aicr build/,
    );
    await assert.rejects(
      checkBinaries([
        { platform: amd, path: fakeBinary(dir, "a", 0x3e, BUILD) },
        { platform: arm, path: fakeBinary(dir, "b", 0xb7, BUILD.replace("abc1234", "def5678")) },
      ]),
      /Cannot build one image from two builds/,
    );
    await assert.rejects(
      checkBinaries([{ platform: amd, path: join(dir, "missing") }]),
      /Cannot read the binary/,
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
