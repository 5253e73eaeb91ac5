import assert from "node:assert/strict";
import { wholeNumberAt } from "./template.ts";

Deno.test("wholeNumberAt() finds a number only where it stands whole", () => {
  assert.equal(wholeNumberAt("--replicas=9", "9"), 11);
  assert.equal(wholeNumberAt("96Mi", "9"), -1);
  assert.equal(wholeNumberAt("19 then 9", "9"), 8);
  assert.equal(wholeNumberAt("https://host:47123/metrics", "47123"), 13);
  assert.equal(wholeNumberAt("471234", "47123"), -1);
});
