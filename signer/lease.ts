/**
 * Leader election over one `coordination.k8s.io/v1` Lease, with client-go's semantics
 * (`leaderelection.LeaderElector`):
 *
 * - **Acquire**: a candidate reads the Lease every retry period; it takes it when nobody holds it
 *   (an empty `holderIdentity`, as after a release) or when the holder's record has not changed
 *   for the record's `leaseDurationSeconds`, measured on the candidate's own monotonic clock from
 *   the moment it first saw that record (never by comparing `renewTime` with its wall clock, so
 *   clock skew between nodes cannot steal a live lease). The write carries the resourceVersion
 *   read: of two candidates only one wins, the other gets 409.
 * - **Renew**: the leader writes `renewTime` every retry period. A leader that could not renew for
 *   the renew deadline (shorter than the lease's duration) stops leading before anyone else may
 *   take over: its work is aborted first.
 * - **Release**: on shutdown the leader stops its work, then writes an empty holder with a
 *   one-second duration, so a candidate takes over at its next retry rather than after the
 *   duration.
 * - **Take over**: a holder that died without releasing (SIGKILL, a lost node) keeps the Lease
 *   until its duration has passed unseen-renewed; then the next candidate acquires it and
 *   `leaseTransitions` counts one more.
 *
 * @module
 */
import { sleep } from "../io.ts";
import { KubeApiError } from "../kube/mod.ts";
import type { KubeClient, KubeObject } from "../kube/mod.ts";
import type { Logger } from "../log.ts";

/** The Lease's spec, as client-go writes it. */
export interface LeaseSpec {
  /** Who holds it; empty when released. */
  holderIdentity?: string;
  /** How long a record stays valid unrenewed. */
  leaseDurationSeconds?: number;
  /** When the holder acquired it (RFC 3339, microseconds). */
  acquireTime?: string;
  /** When the holder last renewed it. */
  renewTime?: string;
  /** How many times it changed hands. */
  leaseTransitions?: number;
}

/** A Lease object. */
export interface LeaseObject extends KubeObject {
  /** The record. */
  spec?: LeaseSpec;
}

/** Where the Lease lives: read it, write it pinned to the version read. */
export interface LeaseStore {
  /** Reads the Lease; undefined when it does not exist. */
  get(signal?: AbortSignal): Promise<LeaseObject | undefined>;
  /** Replaces it (the object carries the resourceVersion read: 409 when it changed since). */
  update(lease: LeaseObject, signal?: AbortSignal): Promise<LeaseObject>;
}

/**
 * The Lease of `namespace/name` through the API.
 *
 * @param kube the client (the signer's ServiceAccount: get and update on this one Lease)
 * @param namespace the Lease's namespace
 * @param name the Lease's name
 * @returns the store
 */
export function kubeLeaseStore(kube: KubeClient, namespace: string, name: string): LeaseStore {
  const path = `/apis/coordination.k8s.io/v1/namespaces/${encodeURIComponent(namespace)}/leases/${
    encodeURIComponent(name)
  }`;
  return {
    get: (signal) =>
      kube.get<LeaseObject>("Lease", namespace, name, {
        timeoutMs: 5000,
        retries: 0,
        ...(signal ? { signal } : {}),
      }),
    update: (lease, signal) =>
      kube.rest.json<LeaseObject>({
        method: "PUT",
        path,
        body: lease,
        idempotent: false,
        timeoutMs: 5000,
        retries: 0,
        ...(signal ? { signal } : {}),
      }),
  };
}

/** Timings, as client-go's defaults. */
export interface ElectionTimings {
  /** How long a record is valid unrenewed. @default 15000 */
  leaseDurationMs?: number;
  /** How long a leader keeps leading without a successful renew. @default 10000 */
  renewDeadlineMs?: number;
  /** How often candidates try and leaders renew. @default 2000 */
  retryPeriodMs?: number;
}

/** What {@link runLeaderElection} works with. */
export interface ElectionDeps {
  /** The Lease. */
  store: LeaseStore;
  /** The logger. */
  log: Logger;
  /** Wall clock, written into the record. */
  now: () => Date;
  /** Monotonic milliseconds, for expiry and deadlines. @default performance.now */
  clock?: () => number;
  /** Sleeps, resolving early on abort. @default io.ts sleep */
  sleep?: (ms: number, signal?: AbortSignal) => Promise<void>;
}

/** Options of {@link runLeaderElection}. */
export interface ElectionOptions extends ElectionTimings {
  /** This candidate's identity (unique per process). */
  identity: string;
  /** Ends the election: the leader stops its work and releases the Lease. */
  signal: AbortSignal;
  /** What the leader does, until its signal aborts (lost the Lease, or shutting down). */
  lead: (signal: AbortSignal) => Promise<void>;
  /** Called on each change of leader seen (its identity, empty when released). */
  onLeader?: (identity: string) => void;
}

/** The Lease's time format: RFC 3339 with microseconds (`metav1.MicroTime`). */
export function microTime(date: Date): string {
  return date.toISOString().replace(/\.(\d{3})Z$/, ".$1000Z");
}

/** The holder as a candidate last saw it, and when (monotonic). */
interface Observed {
  key: string;
  at: number;
  spec: LeaseSpec;
}

/** client-go's jitter: a retry period between 1 and 1.2 times the period. */
function jittered(ms: number): number {
  return ms * (1 + Math.random() * 0.2);
}

/**
 * Runs one candidate until `options.signal` aborts: acquires the Lease when it may, runs `lead`
 * while it holds it, renews it, steps down when a renew deadline passes, and releases it on the
 * way out.
 *
 * @param deps the Lease store, logger and clocks
 * @param options identity, timings, the work and the end signal
 * @returns when the signal aborted and the Lease was released (if held)
 */
export async function runLeaderElection(
  deps: ElectionDeps,
  options: ElectionOptions,
): Promise<void> {
  const election = new Election(deps, options);
  while (!options.signal.aborted) {
    if (!await election.acquire()) return;
    await election.leadUntilLost();
  }
}

/** One candidate's state. */
class Election {
  readonly #deps: ElectionDeps;
  readonly #options: ElectionOptions;
  readonly #clock: () => number;
  readonly #sleep: (ms: number, signal?: AbortSignal) => Promise<void>;
  readonly #durationMs: number;
  readonly #renewDeadlineMs: number;
  readonly #retryMs: number;
  #observed: Observed | undefined;
  #lease: LeaseObject | undefined;
  #saidMissing = false;

  constructor(deps: ElectionDeps, options: ElectionOptions) {
    this.#deps = deps;
    this.#options = options;
    this.#clock = deps.clock ?? (() => performance.now());
    this.#sleep = deps.sleep ?? sleep;
    const { leaseDurationMs = 15_000, renewDeadlineMs = 10_000, retryPeriodMs = 2_000 } = options;
    if (!(retryPeriodMs < renewDeadlineMs && renewDeadlineMs < leaseDurationMs)) {
      throw new RangeError(
        `Cannot elect a leader as the retry period must be shorter than the renew deadline, and that shorter than the lease duration: current values are ${retryPeriodMs}, ${renewDeadlineMs} and ${leaseDurationMs} ms`,
      );
    }
    this.#durationMs = leaseDurationMs;
    this.#renewDeadlineMs = renewDeadlineMs;
    this.#retryMs = retryPeriodMs;
  }

  /** Tries every retry period until it holds the Lease (true) or the election ends (false). */
  async acquire(): Promise<boolean> {
    const { signal } = this.#options;
    while (!signal.aborted) {
      if (await this.#tryAcquireOrRenew()) {
        this.#deps.log.info("signer: leading", { identity: this.#options.identity });
        return true;
      }
      await this.#sleep(jittered(this.#retryMs), signal);
    }
    return false;
  }

  /** Runs the work while renewing; steps down on a missed deadline; releases at the end. */
  async leadUntilLost(): Promise<void> {
    const { signal, identity } = this.#options;
    // Told to stop while the acquiring write was in flight: lead nothing, release at once.
    if (signal.aborted) return await this.#release();
    const leading = new AbortController();
    const stop = () => leading.abort(signal.reason);
    signal.addEventListener("abort", stop, { once: true });
    const work = this.#options.lead(leading.signal).catch((error) => {
      this.#deps.log.error("signer: the leader's work failed", { error: String(error) });
    }).finally(() => {
      if (!leading.signal.aborted) leading.abort(new Error("the leader's work ended"));
    });
    let renewed = this.#clock();
    while (!leading.signal.aborted) {
      await this.#sleep(this.#retryMs, leading.signal);
      if (leading.signal.aborted) break;
      if (await this.#tryAcquireOrRenew()) {
        renewed = this.#clock();
      } else if (this.#clock() - renewed >= this.#renewDeadlineMs || !this.#holds()) {
        this.#deps.log.warn("signer: lost the lease; stepping down", { identity });
        leading.abort(new Error("lost the lease"));
      }
    }
    signal.removeEventListener("abort", stop);
    await work;
    if (signal.aborted) await this.#release();
  }

  /** Whether the last record seen names this candidate. */
  #holds(): boolean {
    return this.#observed?.spec.holderIdentity === this.#options.identity;
  }

  /** Reads the Lease and, when it is free, expired or ours, writes this candidate's record. */
  async #tryAcquireOrRenew(): Promise<boolean> {
    const { identity, signal } = this.#options;
    let lease: LeaseObject | undefined;
    try {
      lease = await this.#deps.store.get(signal);
    } catch (error) {
      this.#deps.log.warn("signer: cannot read the lease", { error: errorLine(error) });
      return false;
    }
    if (!lease) {
      if (!this.#saidMissing) {
        this.#deps.log.error(
          "signer: the lease does not exist; the install creates it (reinstall, or aicr daemonset upgrade)",
        );
        this.#saidMissing = true;
      }
      return false;
    }
    this.#saidMissing = false;
    this.#lease = lease;
    const spec = lease.spec ?? {};
    this.#observe(spec);
    const holder = spec.holderIdentity ?? "";
    if (holder !== "" && holder !== identity && !this.#expired()) return false;
    const now = microTime(this.#deps.now());
    const mine = holder === identity;
    const next: LeaseSpec = {
      holderIdentity: identity,
      leaseDurationSeconds: Math.ceil(this.#durationMs / 1000),
      acquireTime: mine && spec.acquireTime ? spec.acquireTime : now,
      renewTime: now,
      leaseTransitions: (spec.leaseTransitions ?? 0) +
        (mine || holder === "" && !spec.acquireTime ? 0 : 1),
    };
    try {
      this.#lease = await this.#deps.store.update({ ...lease, spec: next }, signal);
      this.#observe(this.#lease.spec ?? next);
      return true;
    } catch (error) {
      if (!(error instanceof KubeApiError && error.status === 409)) {
        this.#deps.log.warn("signer: cannot write the lease", { error: errorLine(error) });
      }
      return false;
    }
  }

  /** Remembers a record the first time it is seen, with the monotonic time. */
  #observe(spec: LeaseSpec): void {
    const key = `${spec.holderIdentity ?? ""}\u0000${spec.renewTime ?? ""}\u0000${
      spec.leaseTransitions ?? 0
    }`;
    if (this.#observed?.key === key) return;
    const previous = this.#observed?.spec.holderIdentity;
    this.#observed = { key, at: this.#clock(), spec };
    if (previous !== (spec.holderIdentity ?? "")) {
      this.#options.onLeader?.(spec.holderIdentity ?? "");
    }
  }

  /** Whether the observed record outlived its duration unrenewed, on this candidate's clock. */
  #expired(): boolean {
    const seen = this.#observed;
    if (!seen) return false;
    const durationMs = (seen.spec.leaseDurationSeconds ?? this.#durationMs / 1000) * 1000;
    return this.#clock() - seen.at > durationMs;
  }

  /** Gives the Lease up: an empty holder, one second, so the next candidate takes it at once. */
  async #release(): Promise<void> {
    const lease = this.#lease;
    if (!lease || lease.spec?.holderIdentity !== this.#options.identity) return;
    const now = microTime(this.#deps.now());
    try {
      await this.#deps.store.update({
        ...lease,
        spec: {
          holderIdentity: "",
          leaseDurationSeconds: 1,
          acquireTime: now,
          renewTime: now,
          leaseTransitions: lease.spec?.leaseTransitions ?? 0,
        },
      });
      this.#deps.log.info("signer: released the lease", { identity: this.#options.identity });
    } catch (error) {
      this.#deps.log.warn("signer: cannot release the lease; it expires on its own", {
        error: errorLine(error),
      });
    }
  }
}

function errorLine(error: unknown): string {
  return error instanceof Error ? error.message.split("\n")[0] ?? "" : String(error);
}
