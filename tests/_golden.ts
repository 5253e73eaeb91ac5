/**
 * Golden files: a rendered text compared byte for byte with a file kept in the repository.
 * Rewriting them is an explicit developer action, never part of a test run: with
 * `UPDATE_GOLDEN=1` the file is rewritten and the test still fails, so the new text is
 * reviewed (`git diff`) before a run without the variable can pass. `npm test` refuses to start
 * with the variable set.
 *
 * @module
 */
import assert from "node:assert/strict";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { fileURLToPath } from "node:url";

/**
 * Asserts that `actual` equals the golden file at `url`.
 *
 * @param url the golden file, e.g. `new URL("./testdata/job.yaml", import.meta.url)`
 * @param actual the text rendered now
 * @throws {AssertionError} when they differ; always after a rewrite under `UPDATE_GOLDEN=1`
 */
export function assertGolden(url: URL, actual: string): void {
  const path = fileURLToPath(url);
  if (Deno.env.get("UPDATE_GOLDEN") === "1") {
    const before = existsSync(path) ? readFileSync(path, "utf8") : undefined;
    writeFileSync(path, actual);
    assert.fail(
      `UPDATE_GOLDEN=1 rewrote ${path} (${before === actual ? "unchanged" : "changed"}): ` +
        "review it with git diff, then run the test again without UPDATE_GOLDEN",
    );
  }
  assert.ok(
    existsSync(path),
    `golden file ${path} is missing: create it with UPDATE_GOLDEN=1 and review it`,
  );
  assert.equal(actual, readFileSync(path, "utf8"), `golden ${path}`);
}
