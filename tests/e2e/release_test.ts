/**
 * `deno task release` end to end on the built binaries: both binaries, the OCI archive of the
 * two-platform image, the SPDX 2.3 SBOM and SHA256SUMS. Checked by others' tools: `sha256sum -c`,
 * skopeo (the archive's index: linux/amd64 and linux/arm64), and the SPDX validator of the
 * `spdx-tools` PyPI package (pinned, tests/release/). And the promise of the design: the archive
 * `aicr image save --from` the release writes, from the binary alone, is the release's archive
 * byte for byte.
 */
import assert from "node:assert/strict";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createHash } from "node:crypto";
import { ensureBinary } from "./binary_harness.ts";
import { release } from "../../scripts/release.ts";
import { validateSpdx } from "../release/spdx.ts";

const AMD64 = await ensureBinary("amd64");
const ARM64 = await ensureBinary("arm64");

async function run(argv: string[], cwd: string): Promise<{ code: number; out: string }> {
  const out = await new Deno.Command(argv[0]!, {
    args: argv.slice(1),
    cwd,
    env: { HOME: Deno.env.get("HOME") ?? "/root", PATH: "/usr/bin:/bin" },
    clearEnv: true,
    stdout: "piped",
    stderr: "piped",
  }).output();
  return {
    code: out.code,
    out: new TextDecoder().decode(out.stdout) + new TextDecoder().decode(out.stderr),
  };
}

Deno.test("release: binaries, the image archive and the SBOM, checked by sha256sum, skopeo and an SPDX validator", async () => {
  const dir = await mkdtemp(join(tmpdir(), "aicr-release-"));
  try {
    const staged = await release({ binaries: { amd64: AMD64, arm64: ARM64 }, dir, log: () => {} });
    const v = staged.version;
    const sums = await run(["sha256sum", "-c", "SHA256SUMS"], dir);
    assert.equal(sums.code, 0, sums.out);
    for (
      const file of [
        `aicr-${v}-linux-amd64`,
        `aicr-${v}-linux-arm64`,
        `aicr-${v}.tar`,
        `aicr-${v}.spdx.json`,
      ]
    ) {
      assert.match(sums.out, new RegExp(`^${file.replace(/\./g, "\\.")}: OK$`, "m"));
    }
    const raw = await run(["skopeo", "inspect", "--raw", `oci-archive:${staged.archive}`], dir);
    assert.equal(raw.code, 0, raw.out);
    const index = JSON.parse(raw.out);
    assert.deepEqual(
      index.manifests.map((m: { platform: { architecture: string } }) => m.platform.architecture),
      ["amd64", "arm64"],
    );
    assert.equal(
      `sha256:${createHash("sha256").update(raw.out).digest("hex")}`,
      staged.image.digest,
    );

    // The operator's path: the binary alone, given the release folder, writes the same bytes.
    const again = join(dir, "again", "aicr.tar");
    const saved = await run([AMD64, "image", "save", "--from", dir, "-o", again], dir);
    assert.equal(saved.code, 0, saved.out);
    const digest = async (p: string) =>
      createHash("sha256").update(await readFile(p)).digest("hex");
    assert.equal(
      await digest(again),
      await digest(staged.archive),
      "aicr image save = the release's archive",
    );

    const validated = await validateSpdx(staged.sbom);
    assert.equal(validated.code, 0, validated.out);
    const sbom = JSON.parse(await readFile(staged.sbom, "utf8"));
    assert.equal(sbom.spdxVersion, "SPDX-2.3");
    const names = new Set(sbom.packages.map((p: { name: string }) => p.name));
    for (
      const name of [
        "libc6",
        "libstdc++6",
        "libgcc-s1",
        "base-files",
        "node",
        "hono",
        "yaml",
        "commander",
        "@kubernetes/client-node",
        "fflate",
      ]
    ) {
      assert.ok(names.has(name), `the SBOM lists ${name}`);
    }
    const binary = sbom.packages.find((p: { name: string }) => p.name === `aicr-${v}-linux-arm64`);
    assert.equal(binary.checksums[0].checksumValue, await digest(staged.binaries.arm64));
    // The backend the binaries report (the one the tests ran), and its runtime inside.
    assert.match(binary.sourceInfo, /built with the node-sea backend \(node 24\.\d+\.\d+\)/);
    assert.equal(
      JSON.parse(await readFile(join(dir, "build-info.json"), "utf8")).backend,
      "node-sea",
    );
    const debs = sbom.packages.filter((p: { name: string }) => p.name === "libc6");
    assert.deepEqual(
      debs.map((p: { externalRefs: { referenceLocator: string }[] }) =>
        /arch=(\w+)/.exec(p.externalRefs[0]!.referenceLocator)?.[1]
      ),
      ["amd64", "arm64"],
    );
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});
