/**
 * The in-cluster signer's lifecycle (`aicr daemonset signer`): one candidate of the install's
 * Lease ({@link runLeaderElection}); while it leads, it signs the daemons' pending certificate
 * requests (`csr/`, the decision the CLI's install and fetch use too) at once when a request
 * arrives (a watch on its signer's requests wakes it) and on a resync period (a dropped watch,
 * a pod whose IP came later). SIGTERM stops the pass between two requests, releases the Lease
 * and returns, so the other replica takes over at once.
 *
 * No request is lost to a leader's death: requests live in the API, the next leader lists them
 * all, and one approved without its certificate is signed after the same checks (`csr/`).
 *
 * @module
 */
import { listSignerCsrsWithVersion, signPendingCsrs } from "../csr/mod.ts";
import type { SignOutcome } from "../csr/mod.ts";
import { sleep } from "../io.ts";
import type { KubeClient } from "../kube/mod.ts";
import type { Logger } from "../log.ts";
import { DAEMON_CSR_SIGNER, signerName } from "../manifests/mod.ts";
import { kubeLeaseStore, runLeaderElection } from "./lease.ts";
import type { ElectionTimings, LeaseStore } from "./lease.ts";

/** What the signer works with. */
export interface SignerDeps {
  /** The signer's client (its ServiceAccount in the pod). */
  kube: KubeClient;
  /** The logger. */
  log: Logger;
  /** Wall clock. */
  now: () => Date;
  /** Monotonic milliseconds. @default performance.now */
  clock?: () => number;
  /** The Lease; @default the install's, through `kube` */
  leaseStore?: LeaseStore;
}

/** Options of {@link runSigner}. */
export interface SignerOptions extends ElectionTimings {
  /** The daemon's namespace. */
  namespace: string;
  /** The daemon's name. */
  name: string;
  /** This replica's identity in the Lease (its pod's name and a random suffix). */
  identity: string;
  /** How often the leader lists the requests without a watch event. @default 30000 */
  resyncMs?: number;
  /** SIGTERM: stop, release the Lease, return. */
  signal: AbortSignal;
}

/** A wake-up the watch rings and the pass loop waits for. */
interface Wake {
  ring(): void;
  wait(ms: number, signal: AbortSignal): Promise<void>;
}

function createWake(): Wake {
  let rung = false;
  let wakeUp: (() => void) | undefined;
  return {
    ring() {
      rung = true;
      wakeUp?.();
    },
    async wait(ms, signal) {
      if (rung) {
        rung = false;
        return;
      }
      const woken = new AbortController();
      wakeUp = () => woken.abort();
      await sleep(ms, AbortSignal.any([signal, woken.signal]));
      wakeUp = undefined;
      rung = false;
    },
  };
}

/**
 * Runs one replica of the signer until `options.signal` aborts.
 *
 * @param deps client, logger, clocks
 * @param options namespace, name, identity, timings, signal
 * @returns once stopped and the Lease released
 */
export async function runSigner(deps: SignerDeps, options: SignerOptions): Promise<void> {
  const { log } = deps;
  const { namespace, name, identity, signal } = options;
  log.info("signer: started", {
    namespace,
    daemon: name,
    signer: DAEMON_CSR_SIGNER,
    lease: `${namespace}/${signerName(name)}`,
    identity,
  });
  await runLeaderElection({
    store: deps.leaseStore ?? kubeLeaseStore(deps.kube, namespace, signerName(name)),
    log,
    now: deps.now,
    ...(deps.clock ? { clock: deps.clock } : {}),
  }, {
    identity,
    signal,
    ...(options.leaseDurationMs !== undefined ? { leaseDurationMs: options.leaseDurationMs } : {}),
    ...(options.renewDeadlineMs !== undefined ? { renewDeadlineMs: options.renewDeadlineMs } : {}),
    ...(options.retryPeriodMs !== undefined ? { retryPeriodMs: options.retryPeriodMs } : {}),
    onLeader: (holder) => {
      if (holder !== identity && holder !== "") log.info("signer: leader seen", { leader: holder });
    },
    lead: (leading) => signWhileLeading(deps, { ...options, signal: leading }),
  });
  log.info("signer: stopped", { identity });
}

/** The leader's loop: a pass now, then one per wake-up (a watch event) or resync period. */
async function signWhileLeading(deps: SignerDeps, options: SignerOptions): Promise<void> {
  const { signal, resyncMs = 30_000 } = options;
  const wake = createWake();
  const watching = watchRequests(deps, { signal, wake });
  let failures = 0;
  while (!signal.aborted) {
    try {
      report(
        deps.log,
        await signPendingCsrs(deps, {
          namespace: options.namespace,
          name: options.name,
          signal,
          mayWrite: () => !signal.aborted,
        }),
      );
      failures = 0;
    } catch (error) {
      if (signal.aborted) break;
      failures++;
      deps.log.warn("signer: a signing pass failed; trying again", {
        error: error instanceof Error ? error.message.split("\n")[0] ?? "" : String(error),
      });
      // Back off a failing API (1, 2, 4 ... 30 s), a watch event does not shorten it.
      await sleep(Math.min(30_000, 1000 * 2 ** (failures - 1)), signal);
      continue;
    }
    await wake.wait(resyncMs, signal);
  }
  await watching;
}

function report(log: Logger, outcome: SignOutcome): void {
  if (outcome.signed.length + outcome.denied.length + outcome.conflicts.length === 0) return;
  log.info("signer: pass done", {
    signed: outcome.signed.length,
    refused: outcome.denied.length,
    leftToAnother: outcome.conflicts.length,
  });
}

/**
 * Watches this signer's requests (from the list's version) and rings on every change; opens a
 * new watch when one ends, after a pause when it failed.
 */
async function watchRequests(
  deps: SignerDeps,
  options: { signal: AbortSignal; wake: Wake },
): Promise<void> {
  const { signal, wake } = options;
  while (!signal.aborted) {
    try {
      const { resourceVersion } = await listSignerCsrsWithVersion(deps.kube, signal);
      const watch = await deps.kube.watch("CertificateSigningRequest", undefined, {
        fieldSelector: `spec.signerName=${DAEMON_CSR_SIGNER}`,
        resourceVersion,
        timeoutSeconds: 300,
        signal,
      });
      signal.addEventListener("abort", () => watch.close(), { once: true });
      for await (const event of watch) {
        if (event.type === "ADDED" || event.type === "MODIFIED") wake.ring();
        if (event.type === "ERROR") break;
      }
    } catch (error) {
      if (signal.aborted) return;
      deps.log.debug("signer: the watch ended; the resync covers it", { error: String(error) });
      await sleep(2000, signal);
    }
  }
}
