import assert from "node:assert/strict";
import { DbusProtocolError, decodeValues, splitSignature } from "./dbus.ts";

/** A variant holding a variant ... `levels` deep, around the byte 42. */
function nestedVariants(levels: number): Uint8Array {
  const bytes: number[] = [];
  for (let i = 0; i < levels; i++) bytes.push(1, 0x76, 0); // signature "v"
  bytes.push(1, 0x79, 0, 42); // signature "y", then the byte
  return new Uint8Array(bytes);
}

function innermost(value: unknown): unknown {
  let v = value as { value?: unknown };
  while (typeof v === "object" && v !== null && "signature" in v) v = v.value as never;
  return v;
}

Deno.test("decodeValues() reads variants nested 64 deep, and refuses deeper ones from the bus", () => {
  assert.equal(innermost(decodeValues(nestedVariants(63), "v")[0]), 42);
  for (const levels of [64, 10_000]) {
    assert.throws(
      () => decodeValues(nestedVariants(levels), "v"),
      (e) => e instanceof DbusProtocolError && /it nests too deep/.test(e.message),
      `${levels} levels`,
    );
  }
});

Deno.test("splitSignature() splits complete types and refuses a signature nesting too deep", () => {
  assert.deepEqual(splitSignature("sa{sv}(ii)"), ["s", "a{sv}", "(ii)"]);
  assert.throws(
    () => splitSignature(`${"a".repeat(100)}y`),
    (e) => e instanceof DbusProtocolError && /nests too deep/.test(e.message),
  );
});
