import assert from "node:assert/strict";
import { gated } from "./_gated.ts";

Deno.test("gated() keeps a test that can run, and ignores one that cannot with the reason after its name", () => {
  const fn = () => {};
  assert.deepEqual(gated(undefined, { name: "runs", fn }), { name: "runs", fn });
  assert.deepEqual(gated("no containerd (install containerd)", { name: "needs containerd", fn }), {
    name: "needs containerd (skipped: no containerd (install containerd))",
    ignore: true,
    fn,
  });
});
