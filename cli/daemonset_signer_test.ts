import assert from "node:assert/strict";
import { fakeCli } from "../tests/fakes/cli.ts";
import { runCli } from "./mod.ts";
import { signerOptions } from "./daemonset_signer.ts";

const GLOBALS = { namespace: "aicr-system" } as Parameters<typeof signerOptions>[1];
const FLAGS = {
  name: "aicr-daemon",
  leaseDuration: "15s",
  renewDeadline: "10s",
  retryPeriod: "2s",
  resyncInterval: "30s",
};

Deno.test("daemonset signer: its Lease identity is the pod's name and a random suffix, client-go's timings", () => {
  const cli = fakeCli({
    env: (name) => (name === "POD_NAME" ? "aicr-daemon-signer-5d8-x7k2p" : undefined),
  });
  const options = signerOptions(cli.deps, GLOBALS, FLAGS);
  assert.match(options.identity, /^aicr-daemon-signer-5d8-x7k2p_[0-9a-f]{8}$/);
  assert.notEqual(options.identity, signerOptions(cli.deps, GLOBALS, FLAGS).identity);
  assert.equal(options.namespace, "aicr-system");
  assert.deepEqual(
    [options.leaseDurationMs, options.renewDeadlineMs, options.retryPeriodMs, options.resyncMs],
    [15_000, 10_000, 2_000, 30_000],
  );
});

Deno.test("daemonset signer: timings out of order, a zero retry or a fractional Lease are exit 2 before any contact", async () => {
  for (
    const [args, message] of [
      [["--renew-deadline", "20s"], /each must be above zero and shorter than the next/],
      [["--retry-period", "0"], /above zero/],
      [["--lease-duration", "15500ms"], /whole seconds/],
      [["--resync-interval", "10ms"], /at least 1s/],
      [["--name", "Bad_Name"], /DNS-1123 label/],
    ] as const
  ) {
    const cli = fakeCli();
    const code = await runCli(["daemonset", "signer", "-n", "aicr-system", ...args], cli.deps);
    assert.equal(code, 2, `${args.join(" ")}: ${cli.stderr()}`);
    assert.match(cli.stderr(), message);
    assert.equal(cli.connects(), 0);
  }
});
