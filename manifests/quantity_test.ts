import assert from "node:assert/strict";
import { isQuantity, quantityValue } from "./quantity.ts";

Deno.test("quantity: quantities follow Kubernetes' grammar and compare by value", () => {
  for (const good of ["1", "0", "500m", "1.5", ".5", "4Gi", "2Ki", "1e3", "1E-2", "100M", "5n"]) {
    assert.ok(isQuantity(good), good);
  }
  for (const bad of ["", "1GB", "Gi", "-1", "1.2.3", "1 Gi", "1i"]) {
    assert.ok(!isQuantity(bad), bad);
  }
  assert.equal(quantityValue("500m"), 0.5);
  assert.equal(quantityValue("4Gi"), 4 * 2 ** 30);
  assert.equal(quantityValue("1e3"), 1000);
  assert.ok(quantityValue("4000m") === quantityValue("4"));
  assert.throws(() => quantityValue("x"), RangeError);
});
