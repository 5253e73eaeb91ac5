/**
 * The fetch's certificate step, before any daemon is asked:
 *
 * - When the install's in-cluster signer runs (a replica available and a Lease holder), the
 *   signing is its job: the fetch only lists the requests. When none runs (an install made
 *   before the signer, `--no-signer`, or the signer scaled away), the fetch signs them itself,
 *   through the same decision (`csr/`), as it always did.
 * - Then it waits, within the per-node deadline, for the daemons that are about to turn Ready:
 *   Running and not Ready, holding a request that is signed or being signed, or started less
 *   than a minute ago and not asking yet. A daemon serves its certificate on its next poll and
 *   the kubelet marks it Ready on its next readiness probe, a few seconds after the signature: a
 *   fetch that went on at once reported those nodes `not-ready` (exit 9) although nothing was
 *   wrong. While it waits it signs again (when it is the signer), so a request sent meanwhile is
 *   signed too.
 *
 * @module
 */
import {
  EXTRA_POD_UID,
  extraValue,
  isDecided,
  listSignerCsrs,
  signPendingCsrs,
} from "../csr/mod.ts";
import type { CsrObject } from "../csr/mod.ts";
import { InterruptedError, UsageError } from "../errors.ts";
import { sleep as sleepFor } from "../io.ts";
import type { KubeClient } from "../kube/mod.ts";
import type { Logger } from "../log.ts";
import { serviceAccountUser } from "../manifests/mod.ts";
import { daemonPods } from "./install.ts";
import type { DaemonPodState } from "./install.ts";
import { readSignerState } from "./signer_state.ts";

/** A daemon started this recently without a request yet is about to send one. */
const FRESH_POD_MS = 60_000;

/** What the certificate step works with. */
export interface SigningDeps {
  /** The caller's client. */
  kube: KubeClient;
  /** The logger. */
  log: Logger;
  /** Wall clock. @default new Date() */
  now?: () => Date;
  /** Sleep between polls. @default io.ts sleep */
  sleep?: (ms: number, signal?: AbortSignal) => Promise<void>;
}

/** Which pods' requests are signed or being signed. */
export interface SigningState {
  /** Who signs: the in-cluster signer, this fetch, or nobody (the caller may not). */
  by: "signer" | "fetch" | "nobody";
  /** Pod UIDs whose request is issued or will be (not refused). */
  coming: Set<string>;
  /** Pod UIDs that sent a request at all (refused ones included). */
  asked: Set<string>;
}

function stateOf(
  by: SigningState["by"],
  requests: readonly CsrObject[],
  refusedNow: ReadonlySet<string> = new Set(),
): SigningState {
  const coming = new Set<string>();
  const asked = new Set<string>();
  for (const csr of requests) {
    const uid = extraValue(csr.spec?.extra, EXTRA_POD_UID);
    if (!uid) continue;
    asked.add(uid);
    const refused = refusedNow.has(csr.metadata?.name ?? "") ||
      (isDecided(csr) && !csr.status?.certificate);
    if (!refused && by !== "nobody") coming.add(uid);
  }
  return { by, coming, asked };
}

/**
 * Signs the daemons' pending requests unless the in-cluster signer runs; says once when the
 * caller cannot.
 *
 * @param deps client, logger, clock
 * @param options the daemon's namespace and name, a signal, and whether to stay quiet about a
 *   refusal already said
 * @returns who signs and which pods' certificates are coming
 */
export async function signOrLeaveToSigner(
  deps: SigningDeps,
  options: { namespace: string; name: string; signal?: AbortSignal; quiet?: boolean },
): Promise<SigningState> {
  const { kube, log } = deps;
  const { namespace, name, signal } = options;
  const call = { namespace, name, ...(signal ? { signal } : {}) };
  const signer = await readSignerState(kube, call).catch(() => undefined);
  if (signer && signer.available > 0 && signer.leader) {
    log.debug("the in-cluster signer signs the daemons' certificates", {
      leader: signer.leader.pod,
    });
    const username = serviceAccountUser(namespace, name);
    const requests = await listSignerCsrs(kube, signal).catch(() => []);
    return stateOf("signer", requests.filter((c) => c.spec?.username === username));
  }
  try {
    const outcome = await signPendingCsrs({ kube, log, now: deps.now ?? (() => new Date()) }, call);
    if (outcome.signed.length > 0) {
      log.info("signed the certificates of daemons that joined since the install", {
        nodes: outcome.signed.join(","),
      });
    }
    return stateOf("fetch", outcome.requests, new Set(outcome.denied.map((d) => d.csr)));
  } catch (error) {
    // A kubeconfig that cannot be loaded or a signal is the run's error, not a signing one.
    if (error instanceof UsageError || error instanceof InterruptedError) throw error;
    if (!options.quiet) {
      log.warn("cannot sign pending daemon certificate requests; those daemons stay unproven", {
        error: error instanceof Error ? error.message.split("\n")[0] ?? "" : String(error),
      });
    }
    return { by: "nobody", coming: new Set(), asked: new Set() };
  }
}

/** Whether a daemon is about to turn Ready: Running, not Ready, certificate coming or fresh. */
function aboutToBeReady(pod: DaemonPodState, signing: SigningState, now: number): boolean {
  if (pod.ready || pod.uid === undefined || (pod.detail ?? "Running") !== "Running") return false;
  if (signing.coming.has(pod.uid)) return true;
  const started = pod.startedAt ? Date.parse(pod.startedAt) : Number.NaN;
  return signing.by !== "nobody" && !signing.asked.has(pod.uid) && now - started < FRESH_POD_MS;
}

/**
 * Signs (or leaves it to the signer), then waits at most `timeoutMs` for the daemons about to
 * turn Ready, signing again while it waits. Returns at once when there are none.
 *
 * @param deps client, logger, clock, sleep
 * @param options namespace, name, the nodes asked for, the bound, a signal
 * @returns who signed, and the nodes still about to turn Ready at the end (empty when all did)
 */
export async function signAndAwaitReady(
  deps: SigningDeps,
  options: {
    namespace: string;
    name: string;
    nodes?: ReadonlySet<string>;
    timeoutMs: number;
    pollMs?: number;
    signal?: AbortSignal;
  },
): Promise<{ by: SigningState["by"]; waiting: string[] }> {
  const { nodes, pollMs = 1000 } = options;
  const sleep = deps.sleep ?? sleepFor;
  const now = deps.now ?? (() => new Date());
  const until = now().getTime() + options.timeoutMs;
  const call = {
    namespace: options.namespace,
    name: options.name,
    ...(options.signal ? { signal: options.signal } : {}),
  };
  let signing = await signOrLeaveToSigner(deps, call);
  let said = false;
  for (;;) {
    const listed = await daemonPods(deps.kube, call).catch(() => undefined);
    const at = now().getTime();
    const waiting = (listed?.pods ?? []).filter((p) =>
      (!nodes || nodes.has(p.node)) && aboutToBeReady(p, signing, at)
    ).map((p) => p.node);
    if (waiting.length === 0 || at >= until || options.signal?.aborted) {
      return { by: signing.by, waiting };
    }
    if (!said) {
      deps.log.info("waiting for daemons about to turn Ready (their certificate is coming)", {
        nodes: waiting.join(","),
        by: signing.by,
        timeout: `${Math.round(options.timeoutMs / 1000)}s`,
      });
      said = true;
    }
    await sleep(pollMs, options.signal);
    signing = await signOrLeaveToSigner(deps, { ...call, quiet: true });
  }
}
