import assert from "node:assert/strict";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { imageRepository, pullImage, testWorldImages } from "./images.ts";
import { otherBuildReason, writeBuildRecord } from "../../scripts/build_record.ts";

const QEMU = { command: "/usr/bin/qemu-aarch64-static", args: ["-L", "/usr/aarch64-linux-gnu"] };
const emulatorFor = (arch: string) => (arch === "arm64" ? QEMU : undefined);

Deno.test("kubelet images: only what the test world publishes is pulled; anything else fails as on a real node", async () => {
  const dir = await mkdtemp(join(tmpdir(), "aicr-images-"));
  try {
    const amd = join(dir, "aicr");
    const arm = join(dir, "aicr-linux-arm64");
    const upstream = join(dir, "notaicr");
    for (const file of [amd, arm, upstream]) await writeFile(file, "");
    const catalog = testWorldImages({
      defaultImage: "ghcr.io/aicr-run/aicr:0.2.0",
      aicr: { amd64: amd, arm64: arm },
      notAicr: { image: "ghcr.io/nvidia/aicr:v0.11.1", path: upstream },
      extra: { "registry.test:5000/aicr": amd, "my/busybox": "host" },
    });
    const pull = (image: string, arch = "amd64") => pullImage(catalog, image, arch, emulatorFor);
    assert.deepEqual(pull("ghcr.io/aicr-run/aicr:0.2.0"), { target: { kind: "exe", path: amd } });
    assert.deepEqual(pull("ghcr.io/aicr-run/aicr:0.2.0", "arm64"), {
      target: { kind: "exe", path: arm, emulator: QEMU },
    });
    assert.deepEqual(pull("aicr:dev"), { target: { kind: "exe", path: amd } });
    assert.deepEqual(pull("ghcr.io/nvidia/aicr:v0.11.1"), {
      target: { kind: "exe", path: upstream },
    });
    assert.deepEqual(pull("registry.test:5000/aicr@sha256:ab"), {
      target: { kind: "exe", path: amd },
    });
    assert.deepEqual(pull("docker.io/library/busybox:1.36"), { target: { kind: "host" } });
    // Foreign references: NVIDIA's other tags, another release of ours, any other repository.
    for (const image of ["ghcr.io/nvidia/aicr:latest", "ghcr.io/aicr-run/aicr:0.1.0", "x/aicr:1"]) {
      const pulled = pull(image);
      assert.ok("error" in pulled, image);
      assert.match(pulled.error, /failed to resolve reference ".*": .*: not found$/);
    }
    // NVIDIA's stand-in is amd64 only: an arm64 node finds no platform for it.
    const arm64 = pull("ghcr.io/nvidia/aicr:v0.11.1", "arm64");
    assert.ok("error" in arm64);
    assert.match(arm64.error, /no match for platform in manifest \(linux\/arm64\): not found/);
    // Without the arm64 binary built, this build's image lacks linux/arm64.
    await rm(arm);
    assert.ok("error" in pull("ghcr.io/aicr-run/aicr:0.2.0", "arm64"));
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

Deno.test("kubelet images: imageRepository() drops the tag and the digest, not a registry port", () => {
  assert.equal(imageRepository("registry.test:5000/aicr:1"), "registry.test:5000/aicr");
  assert.equal(imageRepository("registry.test:5000/aicr@sha256:ab"), "registry.test:5000/aicr");
  assert.equal(imageRepository("aicr"), "aicr");
});

Deno.test("kubelet images: an arm64 binary left from another build is refused, naming the rebuild", async () => {
  const dir = await mkdtemp(join(tmpdir(), "aicr-images-"));
  try {
    const amd = join(dir, "aicr");
    const arm = join(dir, "aicr-linux-arm64");
    for (const file of [amd, arm]) await writeFile(file, "");
    const catalog = testWorldImages({
      defaultImage: "ghcr.io/aicr-run/aicr:0.2.0",
      aicr: { amd64: amd, arm64: arm },
      otherBuild: (path) => path === amd ? undefined : otherBuildReason(path, amd),
    });
    const pull = (arch: string) => pullImage(catalog, "aicr:dev", arch, emulatorFor);
    const record = (bundleSha256: string, commit: string, arch: string) => ({
      version: "0.2.0",
      commit,
      platform: `linux/${arch}`,
      bundleSha256,
    });
    // No records (AICR_BIN built elsewhere): nothing to compare, both are pulled.
    assert.ok("target" in pull("arm64"));
    await writeBuildRecord(amd, record("b".repeat(64), "2222222", "amd64"));
    // The binary under test has a record, the arm64 one none: built before records, refused.
    const unrecorded = pull("arm64");
    assert.ok("error" in unrecorded);
    assert.match(unrecorded.error, /no build record.*--arch all'$/);
    await writeBuildRecord(arm, record("a".repeat(64), "1111111", "arm64"));
    const stale = pull("arm64");
    assert.ok("error" in stale);
    assert.match(
      stale.error,
      /aicr-linux-arm64 is another build than aicr under test \(commit 1111111; aicr is commit 2222222\): rebuild it with 'deno run -A scripts\/build\.ts --arch arm64'$/,
    );
    assert.ok("target" in pull("amd64"), "the binary under test is always pulled");
    // Rebuilt from the same tree: the same bundle, pulled.
    await writeBuildRecord(arm, record("b".repeat(64), "2222222", "arm64"));
    assert.deepEqual(pull("arm64"), { target: { kind: "exe", path: arm, emulator: QEMU } });
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});
