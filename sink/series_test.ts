import assert from "node:assert/strict";
import type { KubeObject } from "../kube/mod.ts";
import { olderThanKept } from "./series.ts";

function cm(name: string, created: string): KubeObject {
  return { metadata: { name, uid: `uid-${name}`, creationTimestamp: created } };
}

Deno.test("olderThanKept: keeps the newest N with the one just written, deletes the rest oldest first", () => {
  const members = [
    cm("s-20261203-060000", "2026-12-03T06:00:00Z"),
    cm("s-20261205-060000", "2026-12-05T06:00:00Z"),
    cm("s-20261201-060000", "2026-12-01T06:00:00Z"),
    cm("s-20261204-060000", "2026-12-04T06:00:00Z"),
  ];
  const doomed = olderThanKept(members, 2, "s-20261205-060000").map((o) => o.metadata?.name);
  assert.deepEqual(doomed, ["s-20261201-060000", "s-20261203-060000"]);
  assert.deepEqual(olderThanKept(members, 10, "s-20261205-060000"), []);
});

Deno.test("olderThanKept: never the one just written, even when the clock put it first", () => {
  const members = [
    cm("s-new", "2026-12-01T00:00:00Z"),
    cm("s-old", "2026-12-05T00:00:00Z"),
  ];
  assert.deepEqual(olderThanKept(members, 1, "s-new").map((o) => o.metadata?.name), ["s-old"]);
});
