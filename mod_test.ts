import assert from "node:assert/strict";
import { exitsAtOnce } from "./mod.ts";

Deno.test("exitsAtOnce ends aicr agent at once, and nothing else", () => {
  assert.equal(exitsAtOnce(["agent", "-o", "snapshot.yaml"], false), true);
  // The agent Job's command line: log flags first.
  assert.equal(exitsAtOnce(["--debug", "--log-json", "agent", "-o", "cm://ns/name"], false), true);
  assert.equal(exitsAtOnce(["--kubeconfig", "agent", "snapshot"], false), false);
  // Output still queued in a stream would be lost.
  assert.equal(exitsAtOnce(["agent"], true), false);
  // The CLI's own verbs end through Node's teardown: whatever they started has settled.
  assert.equal(exitsAtOnce(["snapshot", "-o", "snapshot.yaml"], false), false);
  assert.equal(exitsAtOnce(["daemon"], false), false);
  assert.equal(exitsAtOnce([], false), false);
});
