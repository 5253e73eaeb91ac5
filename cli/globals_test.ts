import assert from "node:assert/strict";
import { UnavailableError } from "../errors.ts";
import { fakeCli } from "../tests/fakes/cli.ts";
import type { CliDeps } from "./context.ts";
import { runCli } from "./mod.ts";

const RUN_ID = "20261205-184112-775bb76e7f383256";

/** A CLI whose connects record their options and then fail (no cluster here). */
function recordingCli() {
  const connects: Parameters<CliDeps["connectKube"]>[1][] = [];
  const fake = fakeCli({
    connectKube: (_source, options) => {
      connects.push(options);
      throw new UnavailableError("no cluster in unit tests");
    },
    contextNamespace: () => Promise.resolve({ context: "lab", namespace: "team-a" }),
  });
  return { ...fake, connectOptions: connects };
}

Deno.test("--request-timeout reaches every API connection, 0 included", async () => {
  for (const [value, ms] of [["2s", 2000], ["1m30s", 90_000], ["0", 0], ["250ms", 250]] as const) {
    const cli = recordingCli();
    const code = await runCli(
      ["--request-timeout", value, "cleanup", "--run-id", RUN_ID],
      cli.deps,
    );
    assert.equal(code, 6, cli.stderr());
    assert.equal(cli.connectOptions.length, 1);
    assert.equal(cli.connectOptions[0]?.requestTimeoutMs, ms, value);
  }
  const none = recordingCli();
  await runCli(["cleanup", "--run-id", RUN_ID], none.deps);
  assert.equal(none.connectOptions[0]?.requestTimeoutMs, undefined, "without it: no bound given");
});

Deno.test("--request-timeout that is no duration is exit 2 naming the flag and the fix, before any connect", async () => {
  for (const value of ["30", "abc", "-1s", "25h"]) {
    const cli = recordingCli();
    const code = await runCli(
      ["cleanup", "--run-id", RUN_ID, "--request-timeout", value],
      cli.deps,
    );
    assert.equal(code, 2, value);
    assert.match(cli.stderr(), /^error: Cannot parse '--request-timeout' as it must be /m);
    assert.match(cli.stderr(), new RegExp(`current value is '${value}'`));
    assert.equal(cli.connectOptions.length, 0, "nothing touched the cluster");
  }
  const bare = recordingCli();
  await runCli(["--request-timeout", "30", "cleanup", "--run-id", RUN_ID], bare.deps);
  assert.match(bare.stderr(), /a duration such as '90s', '5m' or '1h30m'/);
});

Deno.test("-q drops info lines and keeps the error; with --debug it is refused", async () => {
  const loud = recordingCli();
  assert.equal(await runCli(["cleanup", "--run-id", RUN_ID], loud.deps), 6);
  assert.match(loud.stderr(), /namespace from the kubeconfig context namespace=team-a/);

  for (const flag of ["-q", "--quiet"]) {
    const quiet = recordingCli();
    assert.equal(await runCli([flag, "cleanup", "--run-id", RUN_ID], quiet.deps), 6);
    assert.equal(quiet.stderr(), "error: no cluster in unit tests\n");
  }

  const both = recordingCli();
  assert.equal(await runCli(["-q", "--debug", "cleanup", "--run-id", RUN_ID], both.deps), 2);
  assert.match(both.stderr(), /^error: Cannot use '--quiet' with '--debug'/);
  assert.equal(both.connectOptions.length, 0);
});
