/**
 * The user documentation against the code, without a cluster: the README's exit-code table is the
 * one table of `errors.ts`, every relative link of a user page resolves, and every runnable marker
 * marks a block (the blocks themselves run in `tests/e2e/docs_test.ts`).
 */
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { EXIT_CODE_HELP } from "../errors.ts";
import { exitCodeRows, relativeLinks, ROOT, runnableBlocks, userPages } from "./_docs.ts";

Deno.test("docs: the README's exit codes are errors.ts's table, row for row", () => {
  const rows = exitCodeRows("README.md");
  assert.ok(rows.length > 5, "the table was read");
  assert.deepEqual(
    rows,
    EXIT_CODE_HELP.map((line) => line.replace(/^(\d+)\s+/, "$1  ")),
    "regenerate the README's table from EXIT_CODE_TABLE (errors.ts)",
  );
});

Deno.test("docs: every relative link of the user pages and the moved pages resolves", () => {
  const pages = [...userPages(), "bench/README.md", "tests/README.md"];
  const broken = pages.flatMap((page) =>
    relativeLinks(page).filter((target) => !existsSync(join(ROOT, dirname(page), target)))
      .map((target) => `${page} -> ${target}`)
  );
  assert.deepEqual(broken, []);
});

Deno.test("docs: each runnable marker marks an sh block, and the README has some", () => {
  const blocks = userPages().flatMap(runnableBlocks);
  assert.ok(blocks.filter((b) => b.page === "README.md").length >= 3);
  for (const block of blocks) {
    assert.ok(block.script.trim().length > 0, `${block.page}:${block.line}`);
  }
});

Deno.test("docs: the README keeps the two commands .ci/run runs, first", () => {
  const text = Deno.readTextFileSync(join(ROOT, "README.md"));
  const first = text.slice(
    text.indexOf("```sh\n") + 6,
    text.indexOf("\n```", text.indexOf("```sh")),
  );
  assert.deepEqual(first.split("\n").filter((l) => l.startsWith("npm ci")), [
    "npm ci && npx deno task demo",
    "npm ci && npm test",
  ]);
});
