import assert from "node:assert/strict";
import { imagePlatforms } from "./demo.ts";

Deno.test("step() puts what a preparation step prints on stderr, leaving stdout to the snapshot", async () => {
  const demo = new URL("./demo.ts", import.meta.url).href;
  const script = `import { step } from ${JSON.stringify(demo)};
await step("building", ["eval", "console.log('build log line'); console.log('export KUBECONFIG=/x')"]);
await Deno.stdout.write(new TextEncoder().encode("apiVersion: aicr.run/v1\\n"));`;
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["eval", script],
    stdout: "piped",
    stderr: "piped",
  }).output();
  const stdout = new TextDecoder().decode(out.stdout);
  const stderr = new TextDecoder().decode(out.stderr);
  assert.equal(out.code, 0, stderr);
  assert.equal(stdout, "apiVersion: aicr.run/v1\n");
  assert.match(stderr, /demo: building\nbuild log line\nexport KUBECONFIG=\/x\n/);
});

Deno.test("imagePlatforms() names the platforms built unless the caller named its own", () => {
  assert.deepEqual(imagePlatforms(["--image-platforms", "linux/arm64"]), []);
  const root = Deno.makeTempDirSync();
  try {
    assert.deepEqual(imagePlatforms([], root), ["--image-platforms", "linux/amd64"]);
  } finally {
    Deno.removeSync(root, { recursive: true });
  }
});
