/**
 * Run by `codec_test.ts` with `--unstable-unsafe-proto` (Node's `__proto__` setter on):
 * parses, diffs and re-encodes snapshots holding a reading keyed `__proto__` and prints
 * what it saw as JSON.
 *
 * @module
 */
import { diffSnapshots, encodeSnapshot, parseSnapshot } from "../mod.ts";

const probe: Record<string, unknown> = {};
probe["__proto__"] = 5;
const setterPresent = Object.keys(probe).length === 0;

function yaml(value: number): string {
  return `kind: Snapshot\napiVersion: aicr.run/v1\nmeasurements:\n- type: OS\n  subtypes:\n  - subtype: sysctl\n    data:\n      "__proto__": ${value}\n      a: 1\n`;
}
function json(value: number): string {
  return `{"kind":"Snapshot","apiVersion":"aicr.run/v1","measurements":[{"type":"OS","subtypes":[{"subtype":"sysctl","data":{"__proto__":${value},"a":1}}]}]}`;
}

const out: Record<string, unknown> = { setterPresent };
for (const [format, make] of [["yaml", yaml], ["json", json]] as const) {
  const a = parseSnapshot(make(5));
  const b = parseSnapshot(make(6));
  out[format] = {
    keys: Object.keys(a.measurements[0]?.subtypes[0]?.data ?? {}),
    changes: diffSnapshots(a, b).changes.map((c) => `${c.kind} ${c.path}`),
  };
}
const again = parseSnapshot(encodeSnapshot(parseSnapshot(yaml(5))));
out.roundTrip = Object.keys(again.measurements[0]?.subtypes[0]?.data ?? {});
// deno-lint-ignore no-console
console.log(JSON.stringify(out));
