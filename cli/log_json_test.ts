import assert from "node:assert/strict";
import { runCli } from "./mod.ts";
import { logJsonRequested } from "./globals.ts";
import { fakeCli } from "../tests/fakes/cli.ts";

/** Every non-empty line of `text` parsed as JSON (throws naming the first line that is not). */
function jsonLines(text: string): Record<string, unknown>[] {
  return text.split("\n").filter((line) => line !== "").map((line) => {
    try {
      return JSON.parse(line) as Record<string, unknown>;
    } catch {
      throw new Error(`not a JSON line: ${line}\n--- all of stderr:\n${text}`);
    }
  });
}

Deno.test("runCli() with --log-json says a failed verb's error as one JSON line", async () => {
  const cli = fakeCli();
  const code = await runCli(["--log-json", "snapshot", "-n", "Bad_NS"], cli.deps);
  assert.equal(code, 2);
  const [line, ...rest] = jsonLines(cli.stderr());
  assert.deepEqual(rest, []);
  assert.equal(line?.level, "error");
  assert.equal(line?.exitCode, 2);
  assert.match(String(line?.msg), /^Cannot use '--namespace' as it must be a DNS-1123 label/);
  assert.equal(cli.connects(), 0);
});

Deno.test("runCli() with AICR_LOG_JSON says commander's own errors as JSON", async () => {
  const cli = fakeCli({ env: (name) => name === "AICR_LOG_JSON" ? "true" : undefined });
  const code = await runCli(["snapshot", "--bogus"], cli.deps);
  assert.equal(code, 2);
  const lines = jsonLines(cli.stderr());
  assert.deepEqual(lines.map((l) => l.msg), ["unknown option '--bogus'"]);
  assert.ok(lines.every((l) => l.level === "error"));
});

Deno.test("runCli() without --log-json keeps text errors", async () => {
  const cli = fakeCli();
  assert.equal(await runCli(["snapshot", "--bogus"], cli.deps), 2);
  assert.equal(cli.stderr(), "error: unknown option '--bogus'\n");
});

Deno.test("logJsonRequested() reads --log-json before '--' and AICR_LOG_JSON", () => {
  const none = () => undefined;
  assert.equal(logJsonRequested(["diff", "--log-json"], none), true);
  assert.equal(logJsonRequested(["diff", "--", "--log-json"], none), false);
  assert.equal(logJsonRequested(["diff"], (n) => n === "AICR_LOG_JSON" ? "YES" : undefined), true);
  assert.equal(logJsonRequested(["diff"], (n) => n === "AICR_LOG_JSON" ? "0" : undefined), false);
});
