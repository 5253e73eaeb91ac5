/**
 * The repository stands alone: no code, script, task or CI step reads a folder beside the checkout
 * (such as `../shared`), and the fixtures the tests read are inside the repository. `.ci/run`
 * proves the same end to end by running the README's two commands in a clone with no siblings.
 *
 * @module
 */
import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = dirname(dirname(fileURLToPath(import.meta.url)));
const SELF = "tests/hermetic_test.ts";

function trackedFiles(): string[] {
  const out = new Deno.Command("git", { args: ["ls-files", "-z"], cwd: ROOT, stdout: "piped" })
    .outputSync();
  assert.ok(out.success, "git ls-files failed");
  return new TextDecoder().decode(out.stdout).split("\0").filter((f) => f !== "");
}

Deno.test("no tracked code, script or CI step reaches outside the repository", () => {
  const outside = /\.\.\/(?:\.\.\/)*shared\b|AICR_SHARED_DIR/;
  const offenders = trackedFiles()
    .filter((f) => f !== SELF && !f.endsWith(".md") && existsSync(join(ROOT, f)))
    .filter((f) => outside.test(readFileSync(join(ROOT, f), "latin1")));
  assert.deepEqual(offenders, [], `files that read outside the repository: ${offenders}`);
});

Deno.test("the real captures and node profiles are in the repository", () => {
  const tracked = new Set(trackedFiles());
  for (
    const f of [
      "tests/fixtures/nvidia-smi-q-x.h100.xml",
      "tests/fixtures/node-profiles/p5-h100.yaml",
      "tests/fixtures/node-profiles/p6-gb200.yaml",
      "tests/fixtures/node-profiles/system-m7i.yaml",
    ]
  ) assert.ok(tracked.has(f), `${f} is not tracked`);
  assert.match(
    readFileSync(join(ROOT, "tests/fixtures/nvidia-smi-q-x.h100.xml"), "utf8"),
    /<product_name>NVIDIA H100 80GB HBM3<\/product_name>/,
  );
});
