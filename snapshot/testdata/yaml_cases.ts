/**
 * Test support: scalars and keys that YAML reads as something else or that need quoting, and
 * random snapshots made of them, for the YAML writer's and reader's byte-for-byte tests.
 *
 * @module
 */
import { setOwn } from "../model.ts";
import type { Reading, Snapshot } from "../model.ts";

/** Strings YAML 1.1 and 1.2 read as something else, or that need quoting or escapes. */
export const TRICKY: string[] = [
  "",
  " ",
  "yes",
  "No",
  "ON",
  "off",
  "y",
  "n",
  "~",
  "null",
  "Null",
  "true",
  "False",
  " lead",
  "trail ",
  "a: b",
  "a:b",
  "a #b",
  "#x",
  "- x",
  "-",
  "?",
  "? x",
  ":x",
  "1.0",
  "1e3",
  "0x1F",
  "0o7",
  "017",
  "0b101",
  "1_000",
  "1:30",
  "190:20:30",
  "2026-03-21",
  "2026-03-21T10:30:00Z",
  "2026-3-1 1:2:3",
  ".inf",
  "-.Inf",
  ".nan",
  "+1",
  "-1",
  "0",
  "a\tb",
  "\t",
  "a\nb",
  "a\n",
  "\n",
  "'q'",
  '"dq"',
  "it's",
  'say "hi"',
  "back\\slash",
  "{x}",
  "[x]",
  "x]",
  "a,b",
  "&a",
  "*a",
  "!tag",
  "%x",
  "@x",
  "`x",
  "|",
  ">",
  "é and ü",
  "日本",
  "🚀",
  "\u0000",
  "\u0007bell",
  "\u007f",
  "\u0085",
  "\u00a0nbsp",
  "\u2028",
  "\ufeffbom",
  "x".repeat(5000),
  "word ".repeat(300),
  "=",
  "<<",
  "---",
  "...",
  "--- x",
  "a  b",
  "/proc/sys/fs/dentry-state",
  "12345\t0\t0\t0",
  "BOOT_IMAGE=/vmlinuz root=UUID=1 ro quiet splash iommu=pt",
];

export const READINGS: Reading[] = [
  ...TRICKY,
  0,
  -0,
  1,
  -1,
  1.5,
  0.1,
  1e21,
  1e-7,
  123456789012,
  Number.MAX_SAFE_INTEGER,
  NaN,
  Infinity,
  -Infinity,
  2n ** 70n,
  -(2n ** 64n),
  true,
  false,
  null,
];

/** Multi-line in YAML (a block scalar, or an explicit key over 1,024 characters). */
export const multiLine = (s: string): boolean => /[\n\u0085\u2028]/.test(s) || s.length > 1024;

export function tricky(options: { singleLine?: boolean } = {}): Snapshot {
  const keep = (v: Reading) => !options.singleLine || typeof v !== "string" || !multiLine(v);
  const data: Record<string, Reading> = {};
  READINGS.filter(keep).forEach((value, i) => data[`k${i}`] = value);
  const keyed: Record<string, Reading> = {};
  for (const key of [...TRICKY, "__proto__", "1", "10", "2", "x".repeat(2000)].filter(keep)) {
    setOwn(keyed, key, 1);
  }
  return {
    kind: "Snapshot",
    apiVersion: "aicr.run/v1",
    metadata: { "source-node": "yes", timestamp: "2026-03-21T10:30:00Z", version: "1.0" },
    measurements: [
      { type: "OS", subtypes: [{ subtype: "sysctl", data }] },
      {
        type: "K8s",
        subtypes: [
          { subtype: "server", data: keyed, context: { status: "ok", "a: b": "no" } },
          { subtype: "empty", data: {} },
        ],
      },
      { type: "GPU", subtypes: [] },
    ],
  } as unknown as Snapshot;
}

/** More strings the direct path decides: indicators, document markers, quotes, breaks. */
export const MORE: string[] = [
  "a:",
  "a :",
  "-a",
  "?a",
  "&x",
  ",x",
  "---x",
  "... x",
  "...x",
  "multi\n\nline\n\n",
  "\nlead break",
  "  indented\nlines",
  "line \nspace",
  "line\n space",
  "x\n#y",
  "tab\tand\nbreak and a longer line so the quoted string folds",
  "00000000:04:00.0",
  "12.8",
  "08",
  "1:20:30.5",
  "2026-01-01 00:00:00.5 +01:00",
  "constructor",
];

/** A small deterministic generator (mulberry32). */
function random(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export function randomSnapshot(seed: number): Snapshot {
  const next = random(seed);
  const strings = [...TRICKY, ...MORE];
  const pick = <T>(items: readonly T[]): T => items[Math.floor(next() * items.length)] as T;
  const metadata: Record<string, string> = {
    timestamp: "2026-03-21T10:30:00Z",
    version: pick(["0.1.0", "1.0", "yes", "dev\nbuild"]),
    "source-node": pick(strings),
  };
  if (next() < 0.3) setOwn(metadata, pick(strings), pick(strings));
  const types = ["K8s", "GPU", "OS", "SystemD", "NodeTopology"] as const;
  return {
    kind: "Snapshot",
    apiVersion: "aicr.run/v1",
    metadata: metadata as Snapshot["metadata"],
    measurements: types.filter(() => next() < 0.8).map((type) => ({
      type,
      subtypes: Array.from({ length: Math.floor(next() * 4) }, () => {
        const data: Record<string, Reading> = {};
        const n = Math.floor(next() * 8);
        for (let i = 0; i < n; i++) setOwn(data, pick(strings), pick([...strings, ...READINGS]));
        const context: Record<string, string> = {};
        if (next() < 0.5) context.status = pick(["ok", "absent", "failed"]);
        if (next() < 0.3) setOwn(context, "message", pick(strings));
        return {
          subtype: pick(["smi", "sysctl", "containerd.service", ...strings.slice(0, 40)]),
          data,
          ...(Object.keys(context).length > 0 ? { context } : {}),
        };
      }),
    })),
  };
}
