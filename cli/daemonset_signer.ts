/**
 * `aicr daemonset signer`: the in-cluster signer of the daemons' serving certificates, run by
 * the install's Deployment (two replicas, one leader through the `<name>-signer` Lease). It
 * signs exactly what `install` and `fetch` sign (`csr/`), and runs until SIGTERM, which
 * releases the Lease (exit 0).
 *
 * @module
 */
import { randomBytes } from "node:crypto";
import { hostname } from "node:os";
import { Command } from "commander";
import { UsageError } from "../errors.ts";
import { DEFAULT_DAEMON_NAME, validateDaemonName } from "../manifests/mod.ts";
import { runSigner } from "../signer/mod.ts";
import type { SignerOptions } from "../signer/mod.ts";
import { parseDuration } from "./_flags.ts";
import type { CliDeps } from "./context.ts";
import { checkedNamespace, connect, defineAction } from "./globals.ts";
import type { GlobalOptions } from "./globals.ts";

/** Flags of `aicr daemonset signer`. */
interface SignerFlags {
  name: string;
  identity?: string;
  leaseDuration: string;
  renewDeadline: string;
  retryPeriod: string;
  resyncInterval: string;
}

/**
 * Completes and validates the signer's flags (kubectl's Complete → Validate).
 *
 * @param deps CLI dependencies (the environment, for the pod's name)
 * @param globals the root's flags (the namespace)
 * @param flags the signer's flags
 * @returns the options, without the signal
 * @throws {UsageError} for a bad value
 */
export function signerOptions(
  deps: CliDeps,
  globals: GlobalOptions,
  flags: SignerFlags,
): Omit<SignerOptions, "signal"> {
  const leaseDurationMs = parseDuration(flags.leaseDuration, "--lease-duration");
  const renewDeadlineMs = parseDuration(flags.renewDeadline, "--renew-deadline");
  const retryPeriodMs = parseDuration(flags.retryPeriod, "--retry-period");
  if (
    !(0 < retryPeriodMs && retryPeriodMs < renewDeadlineMs && renewDeadlineMs < leaseDurationMs)
  ) {
    throw new UsageError(
      `Cannot use '--retry-period' ${flags.retryPeriod}, '--renew-deadline' ${flags.renewDeadline} and '--lease-duration' ${flags.leaseDuration} as each must be above zero and shorter than the next`,
    );
  }
  const resyncMs = parseDuration(flags.resyncInterval, "--resync-interval");
  if (resyncMs < 1000) {
    throw new UsageError(
      `Cannot use '--resync-interval' as it must be at least 1s: current value is '${flags.resyncInterval}'`,
    );
  }
  if (leaseDurationMs % 1000 !== 0) {
    throw new UsageError(
      `Cannot use '--lease-duration' as the Lease counts whole seconds: current value is '${flags.leaseDuration}'`,
    );
  }
  // Unique per process: the pod's name (what `status` shows) and a random suffix.
  const pod = deps.env("POD_NAME") || hostname();
  return {
    namespace: checkedNamespace(globals),
    name: validateDaemonName(flags.name),
    identity: flags.identity ?? `${pod}_${randomBytes(4).toString("hex")}`,
    leaseDurationMs,
    renewDeadlineMs,
    retryPeriodMs,
    resyncMs,
  };
}

/**
 * The `daemonset signer` command.
 *
 * @param deps CLI dependencies
 * @returns the command
 */
export function signerCommand(deps: CliDeps): Command {
  const command = new Command("signer")
    .description(
      "sign the daemons' certificate requests in the cluster: one leader among the replicas through the <name>-signer Lease (run by the install's Deployment)",
    )
    .option("--name <name>", "the daemon's name (DaemonSet, ServiceAccount)", DEFAULT_DAEMON_NAME)
    .option(
      "--identity <id>",
      "this replica's Lease identity (default: $POD_NAME and a random suffix)",
    )
    .option("--lease-duration <duration>", "how long a leader's Lease stays valid unrenewed", "15s")
    .option(
      "--renew-deadline <duration>",
      "how long a leader keeps leading without renewing",
      "10s",
    )
    .option("--retry-period <duration>", "how often candidates try and the leader renews", "2s")
    .option(
      "--resync-interval <duration>",
      "how often the leader lists the requests without a watch event",
      "30s",
    );
  return defineAction(command, deps, async (flags: SignerFlags, { globals, log }) => {
    const options = signerOptions(deps, globals, flags);
    await runSigner(
      { kube: connect(deps, globals), log, now: deps.now },
      { ...options, signal: deps.signal },
    );
  }, { log: { prefixFromEnv: true } });
}
