import assert from "node:assert/strict";
import { collapsePerGpu, formatGpuRange } from "./per_gpu.ts";

Deno.test("formatGpuRange() writes runs of GPU indices as ranges", () => {
  assert.equal(formatGpuRange([0, 1, 2, 3, 4, 5, 6, 7]), "0..7");
  assert.equal(formatGpuRange([0, 1, 2, 5, 6]), "0..2,5..6");
  assert.equal(formatGpuRange([4]), "4");
  assert.equal(formatGpuRange([1, 3]), "1,3");
});

Deno.test("collapsePerGpu() shows the same reading on several GPUs once, and keeps the rest apart", () => {
  const items = [
    ["GPU.gpu-0.ecc.current", "Disabled"],
    ["GPU.gpu-0.power.limit.current", "500.00 W"],
    ["GPU.gpu-1.power.limit.current", "500.00 W"],
    ["GPU.gpu-2.power.limit.current", "450.00 W"],
    ["GPU.gpu-3.power.limit.current", "500.00 W"],
    ["GPU.smi.driver", "570.124.06"],
  ] as const;
  const entries = collapsePerGpu(items, { path: (i) => i[0], same: (a, b) => a[1] === b[1] });
  assert.deepEqual(entries.map((e) => [e.path, e.items.length, e.gpus]), [
    ["GPU.gpu-0.ecc.current", 1, undefined],
    ["GPU.gpu-0..1,3.power.limit.current", 3, [0, 1, 3]],
    ["GPU.gpu-2.power.limit.current", 1, undefined],
    ["GPU.smi.driver", 1, undefined],
  ]);
});
