/**
 * No function of the house is longer than {@link MAX_LINES} lines (declaration to closing brace,
 * nested functions counted in their parent too), outside tests, benchmarks and build scripts,
 * except the ones listed below with their reason. Functions are found by `tests/_source_scan.ts`
 * on deno fmt-formatted code.
 *
 * @module
 */
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { functionSpans } from "./_source_scan.ts";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const MAX_LINES = 80;
const SKIP_DIRS = new Set([
  "node_modules",
  "dist",
  "coverage",
  ".git",
  "tests",
  "bench",
  "scripts",
]);

/** `file:function` over the limit, and why it stays whole for now. */
const ALLOWED: Readonly<Record<string, string>> = {};

function walk(dir: string, out: string[]): string[] {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    if (entry.name.startsWith(".") || SKIP_DIRS.has(entry.name)) continue;
    const path = join(dir, entry.name);
    if (entry.isDirectory()) {
      if (entry.name !== "testdata") walk(path, out);
    } else if (entry.name.endsWith(".ts") && !entry.name.endsWith("_test.ts")) {
      out.push(relative(ROOT, path));
    }
  }
  return out;
}

const SPANS = walk(ROOT, []).flatMap((file) =>
  functionSpans(readFileSync(join(ROOT, file), "utf8")).map((span) => ({ file, ...span }))
);

Deno.test("functions: none over 80 lines outside tests, but the listed exceptions", () => {
  const long = SPANS.filter((s) => s.lines > MAX_LINES)
    .map((s) => `${s.file}:${s.name}`)
    .filter((key) => !(key in ALLOWED));
  assert.deepEqual(long, []);
});

Deno.test("functions: every listed exception is still over 80 lines (the list shrinks as they are split)", () => {
  const over = new Set(SPANS.filter((s) => s.lines > MAX_LINES).map((s) => `${s.file}:${s.name}`));
  assert.deepEqual(Object.keys(ALLOWED).filter((key) => !over.has(key)), []);
});

Deno.test("functions: the scanner measures a known function (a broken scanner would pass)", () => {
  assert.ok(SPANS.length > 500, `only ${SPANS.length} functions found`);
  const source = [
    "export async function f(",
    "  a: { b: string },",
    "): Promise<{ c: number }> {",
    "  const g = (x: number) => {",
    "    return { x };",
    "  };",
    "  return { c: g(1).x };",
    "}",
    "function h(): { stop(): void } {",
    "  return { stop() {} };",
    "}",
  ].join("\n");
  assert.deepEqual(functionSpans(source).map((s) => [s.name, s.start, s.lines]), [
    ["f", 1, 8],
    ["g", 4, 3],
    ["h", 9, 3],
  ]);
});

Deno.test("functions: a head with a function type among its parameters is measured too", () => {
  const source = [
    "class K {",
    "  run(install: (pair: Pair) => void): Promise<void> {",
    "    return go(install);",
    "  }",
    "}",
    "const m = (f: (x: number) => string): string => {",
    "  return f(1);",
    "};",
  ].join("\n");
  assert.deepEqual(functionSpans(source).map((s) => [s.name, s.start, s.lines]), [
    ["run", 2, 3],
    ["m", 6, 3],
  ]);
});
