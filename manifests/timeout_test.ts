import assert from "node:assert/strict";
import { UsageError } from "../errors.ts";
import { jobDeadlines } from "./job.ts";
import { checkTimeout, DEFAULT_TIMEOUT_MS, MAX_WAIT_MS } from "./timeout.ts";

Deno.test("checkTimeout() takes 0 as the default and any wait up to 24h, as the Job's deadlines do", () => {
  assert.equal(checkTimeout(0), DEFAULT_TIMEOUT_MS);
  for (const ms of [1, 1000, 90_500, MAX_WAIT_MS]) {
    assert.equal(checkTimeout(ms), ms);
    assert.ok(jobDeadlines(ms).activeDeadlineSeconds * 1000 > ms);
  }
  assert.equal(
    jobDeadlines(0).activeDeadlineSeconds,
    jobDeadlines(DEFAULT_TIMEOUT_MS).activeDeadlineSeconds,
  );
});

Deno.test("checkTimeout() refuses what is no wait, naming the option; the Job's deadlines refuse the same", () => {
  for (const ms of [-1, Number.NaN, Number.POSITIVE_INFINITY, MAX_WAIT_MS + 1]) {
    assert.throws(() => checkTimeout(ms, "collectTimeout"), (error: unknown) => {
      assert.ok(error instanceof UsageError);
      assert.match(
        error.message,
        /^Cannot use 'collectTimeout' as it must be a duration from 0 to 24h/,
      );
      return true;
    });
    assert.throws(() => jobDeadlines(ms), UsageError);
  }
});
