import assert from "node:assert/strict";
import { formatTimestamp } from "./model.ts";

Deno.test("formatTimestamp: the UTC instant to the second, as toISOString without milliseconds", () => {
  const byIso = (date: Date) => date.toISOString().replace(/\.\d{3}Z$/, "Z");
  const fixed = [
    "2026-03-21T10:30:00.000Z",
    "2026-12-31T23:59:59.999Z",
    "2000-02-29T00:00:00.500Z",
    "0001-01-01T01:02:03.000Z",
    "9999-12-31T23:59:59.000Z",
  ].map((s) => new Date(s));
  // Years outside 0-9999 take toISOString's signed six-digit form.
  fixed.push(new Date(Date.UTC(10000, 0, 1)), new Date(Date.UTC(-1, 5, 6, 7, 8, 9)));
  let seed = 7;
  const random = () => (seed = (seed * 48271) % 0x7fffffff) / 0x7fffffff;
  const dates = [...fixed, ...Array.from({ length: 2000 }, () => new Date(random() * 4e12))];
  for (const date of dates) {
    assert.equal(formatTimestamp(date), byIso(date), String(date.getTime()));
  }
  assert.equal(formatTimestamp(new Date("2026-03-21T10:30:00.999Z")), "2026-03-21T10:30:00Z");
  assert.throws(() => formatTimestamp(new Date(NaN)), RangeError);
});
