/**
 * Benchmark of the memory nvidia-smi output costs (figures only, no asserts): the real
 * H100 document grown to just under the 16 MiB bound with long per-GPU process lists (a
 * valid, very large output), parsed once as a whole element tree and once as the GPU
 * collector parses it (only the elements it reads are built). Heap retained after a full
 * GC, side by side in one process.
 *
 * ```sh
 * node_modules/.bin/deno run -A --v8-flags=--expose-gc bench/smi_memory_bench.ts
 * ```
 *
 * @module
 */
import { readFileSync } from "node:fs";
import { parseNvidiaSmi } from "../collectors/gpu.ts";
import { parseXml } from "../collectors/xml.ts";

const enc = new TextEncoder();
const out = (s: string) => Deno.stdout.writeSync(enc.encode(`${s}\n`));
const gc = (globalThis as { gc?: () => void }).gc ?? (() => {
  throw new Error("Cannot measure retained heap: run with --v8-flags=--expose-gc");
});

const fixture = readFileSync(
  new URL("../tests/fixtures/nvidia-smi-q-x.h100.xml", import.meta.url),
  "utf8",
);
const proc =
  "<process_info><gpu_instance_id>N/A</gpu_instance_id><compute_instance_id>N/A</compute_instance_id><pid>12345</pid><type>C</type><process_name>/usr/bin/python3 train.py</process_name><used_memory>1024 MiB</used_memory></process_info>\n";
const perGpu = Math.floor((15.5 * (1 << 20) - fixture.length) / 8 / proc.length);
const big = fixture.replace(
  /<processes>[\s\S]*?<\/processes>|<processes\/>/g,
  `<processes>${proc.repeat(perGpu)}</processes>`,
);

function retained(parse: () => unknown): number {
  gc();
  const before = Deno.memoryUsage().heapUsed;
  const kept = parse();
  gc();
  const after = Deno.memoryUsage().heapUsed;
  if (kept === undefined) throw new Error("nothing parsed");
  return (after - before) / (1 << 20);
}

out(`document: ${(big.length / (1 << 20)).toFixed(1)} MiB, ${perGpu} processes per GPU, 8 GPUs`);
const whole = retained(() => parseXml(big, { maxChars: 16 << 20 }));
const kept = retained(() => parseNvidiaSmi(big));
out(`whole element tree:  ${whole.toFixed(1)} MiB retained`);
out(`GPU collector parse: ${kept.toFixed(2)} MiB retained (${(kept / whole * 100).toFixed(2)} %)`);
