/**
 * The ledger of what one invocation created, with the UID the API server returned,
 * and the cleanup that deletes exactly those objects: every delete pinned to its UID
 * (`preconditions.uid`), a lost create response resolved by re-reading the object and
 * proving ownership by its labels, and a WARN for whatever cannot be proved.
 * Both Job mode and DaemonSet mode use it.
 *
 * @module
 */
import { ToolError } from "../errors.ts";
import type { Logger } from "../log.ts";
import type { KubeClient, KubeObject, NewObject } from "./client.ts";
import { KubeApiError } from "./errors.ts";
import { sleep } from "../io.ts";
import { RESOURCES } from "./resources.ts";
import type { KindName } from "./resources.ts";

/** One object this invocation created (or may have created). */
export interface LedgerEntry {
  /** Kind. */
  kind: KindName;
  /** Namespace, for namespaced kinds. */
  namespace?: string;
  /** Name. */
  name: string;
  /** UID the API server returned; absent while unconfirmed. */
  uid?: string;
  /** `confirmed` when the create answered; `unconfirmed` when its response was lost. */
  state: "confirmed" | "unconfirmed";
}

/** How the ledger proves an object is this invocation's. */
export interface OwnershipProof {
  /** Labels every created object carries; all must match (the invocation ID decides). */
  labels: Record<string, string>;
  /** Label key of the run ID, for the WARN line. */
  runIdLabel: string;
  /** Label key of the invocation ID, for the WARN line. */
  invocationIdLabel: string;
}

/** What happened to one entry at cleanup. */
export interface CleanupOutcome {
  /** The entry. */
  entry: LedgerEntry;
  /** `deleted`, `gone` (already), `kept` (not provably ours), or `failed`. */
  result: "deleted" | "gone" | "kept" | "failed";
  /** Why, for `kept` and `failed`. */
  detail?: string;
}

/** The WARN line for an object cleanup cannot prove this run created (upstream wording). */
export const UNPROVEN_OBJECT_WARNING =
  "cleanup left behind an object it cannot prove this run created; if it is a stale orphan of this run, remove it by hand";

/**
 * The one deletion order, for every kind aicr deletes (the ledger's cleanup, the sweep after a
 * killed run, the uninstall): the Job first (its pods go with it, then any pod left over), the
 * workloads before what they mount, bindings before roles, the ServiceAccount last.
 */
export const DELETE_ORDER: readonly KindName[] = [
  "Job",
  "Pod",
  "DaemonSet",
  "Deployment",
  "ServiceMonitor",
  "Service",
  "Secret",
  "ConfigMap",
  "Lease",
  "RoleBinding",
  "ClusterRoleBinding",
  "Role",
  "ClusterRole",
  "ServiceAccount",
];

/**
 * Whether a failed create may still have been applied by the server (its response was
 * lost): no answer at all, a timeout, or a server-side error. A definite 4xx answer
 * means nothing was created.
 *
 * @param error what the create threw
 * @returns true when the outcome is unknown
 */
export function isAmbiguousCreateFailure(error: unknown): boolean {
  if (error instanceof KubeApiError) return error.status === 0 || error.status >= 500;
  // Anything else (an abort mid-flight, a socket reset) leaves the outcome unknown too.
  return !(error instanceof ToolError);
}

/** Records creates and cleans up exactly what they made. */
export class Ledger {
  #entries: LedgerEntry[] = [];
  readonly #kube: KubeClient;
  readonly #proof: OwnershipProof;
  readonly #retries: number;
  readonly #sleep: (ms: number, signal?: AbortSignal) => Promise<void>;
  readonly #clock: () => number;

  /**
   * @param kube the client
   * @param proof the labels that prove ownership
   * @param options how often a create that provably did not land is sent again
   *   (default 4), the sleep between attempts and the clock cleanup's `until` is read on
   *   (epoch ms, `Date.now`), both injectable for tests
   */
  constructor(
    kube: KubeClient,
    proof: OwnershipProof,
    options: {
      retries?: number;
      sleep?: (ms: number, signal?: AbortSignal) => Promise<void>;
      clock?: () => number;
    } = {},
  ) {
    this.#kube = kube;
    this.#proof = proof;
    this.#retries = options.retries ?? 4;
    this.#sleep = options.sleep ?? sleep;
    this.#clock = options.clock ?? Date.now;
  }

  /** Everything recorded so far, in creation order. */
  get entries(): readonly LedgerEntry[] {
    return this.#entries;
  }

  /**
   * The confirmed UID of an object, if this invocation created it.
   *
   * @param kind the kind
   * @param name the name
   * @returns its UID
   */
  uidOf(kind: KindName, name: string): string | undefined {
    return this.#entries.find((e) => e.kind === kind && e.name === name && e.state === "confirmed")
      ?.uid;
  }

  /**
   * Creates an object and records it. The object's name is its idempotency key: the
   * API server never holds two objects of one name, so a create may be sent again
   * when the first one provably did not land, and an AlreadyExists after a retry is
   * resolved by proving the object is ours.
   *
   * - 429 (rate limited before the server handled it): sent again after `Retry-After`.
   * - An ambiguous failure (no answer, 5xx): the object is re-read. If it exists and
   *   carries this invocation's labels it is adopted as confirmed; if it is absent the
   *   create is sent again; if another invocation's object holds the name the
   *   original error is thrown. An entry that could not be resolved stays unconfirmed
   *   for cleanup.
   *
   * @param kind the kind
   * @param object the object (with the ownership labels)
   * @param options cancellation
   * @returns the created object
   * @throws {KubeApiError} when the create fails
   */
  async create(
    kind: KindName,
    object: NewObject,
    options: { signal?: AbortSignal } = {},
  ): Promise<KubeObject> {
    const name = object.metadata?.name ?? "";
    const namespace = RESOURCES[kind].namespaced ? object.metadata?.namespace : undefined;
    const base = { kind, name, ...(namespace ? { namespace } : {}) };
    let entry: LedgerEntry | undefined;
    for (let attempt = 0;; attempt++) {
      try {
        const created = await this.#kube.create(kind, object, options);
        const uid = created.metadata?.uid;
        const confirmed: LedgerEntry = uid
          ? { ...base, uid, state: "confirmed" }
          : { ...base, state: "unconfirmed" };
        if (entry) Object.assign(entry, confirmed);
        else this.#entries.push(confirmed);
        return created;
      } catch (error) {
        const retriesLeft = attempt < this.#retries && !options.signal?.aborted;
        if (error instanceof KubeApiError && error.status === 429) {
          // Refused before it was handled: nothing was created.
          if (!retriesLeft) throw error;
          await this.#sleep(this.#wait(error, attempt), options.signal);
          options.signal?.throwIfAborted();
          continue;
        }
        const alreadyExistsOnRetry = attempt > 0 && entry !== undefined &&
          error instanceof KubeApiError && error.isAlreadyExists;
        if (!isAmbiguousCreateFailure(error) && !alreadyExistsOnRetry) throw error;
        if (!entry) {
          entry = { ...base, state: "unconfirmed" };
          this.#entries.push(entry);
        }
        const live = await this.#kube.get(kind, namespace, name).catch(() => "unknown" as const);
        // guard: ledger-adopt-proof: a lost create's answer adopts only an object proven ours;
        // mutant: ` && this.#owns(live)` -> ``
        if (live !== "unknown" && live?.metadata?.uid && this.#owns(live)) {
          entry.uid = live.metadata.uid;
          entry.state = "confirmed";
          return live;
        }
        // Another invocation's object holds the name, or the re-read failed too.
        if (live !== undefined || !retriesLeft) throw error;
        await this.#sleep(this.#wait(error, attempt), options.signal);
        options.signal?.throwIfAborted();
      }
    }
  }

  #wait(error: unknown, attempt: number): number {
    const after = error instanceof KubeApiError ? error.retryAfterSeconds : undefined;
    return after !== undefined ? Math.min(after * 1000, 30_000) : 200 * 2 ** attempt;
  }

  #owns(object: KubeObject): boolean {
    const labels = object.metadata?.labels ?? {};
    // guard: ledger-owns: every label must match, the invocation ID included;
    // mutant: `every` -> `some`
    return Object.entries(this.#proof.labels).every(([k, v]) => labels[k] === v);
  }

  /**
   * Deletes every recorded object (or those `only` selects): confirmed ones by UID, unconfirmed
   * ones only after re-reading them and proving ownership by labels. Never deletes anything else.
   *
   * With `until`, an object whose delete failed because the API server did not answer (no
   * connection, 429, 5xx: restarting, its etcd down) is tried again, backing off from 250 ms to
   * 2 s (or as `Retry-After` says), until it answers or that time has come; then it is `failed`.
   * The ledger then does the retrying itself: each request is one attempt (the client's own
   * retries off), so none runs seconds past the deadline.
   *
   * @param options logger, until when an absent API server is waited for (epoch ms; cleanups
   *   may share one budget; default: once, with the client's own retries only), and which
   *   entries (default: all)
   * @returns one outcome per entry
   */
  async cleanup(
    options: {
      log: Logger;
      until?: number;
      only?: (entry: LedgerEntry) => boolean;
    },
  ): Promise<CleanupOutcome[]> {
    const { log, until, only = () => true } = options;
    const rank = (kind: KindName) => {
      const i = DELETE_ORDER.indexOf(kind);
      return i < 0 ? DELETE_ORDER.length : i;
    };
    const ordered = this.#entries.filter(only).sort((a, b) => rank(a.kind) - rank(b.kind));
    // The Job goes first so its pods stop before their permissions do; the rest fan out.
    const first = ordered.filter((e) => e.kind === "Job");
    const rest = ordered.filter((e) => e.kind !== "Job");
    const outcomes: CleanupOutcome[] = [];
    for (const group of [first, rest]) {
      outcomes.push(
        ...await Promise.all(
          group.map((entry) => this.#removeUntil(entry, log, until)),
        ),
      );
    }
    return outcomes;
  }

  /**
   * {@link Ledger.#remove}, again while the API server is away and the deadline allows; without
   * a deadline, once (with the client's own retries).
   */
  async #removeUntil(
    entry: LedgerEntry,
    log: Logger,
    deadline: number | undefined,
  ): Promise<CleanupOutcome> {
    if (deadline === undefined) return await this.#remove(entry, log);
    for (let attempt = 0;; attempt++) {
      const last = this.#clock() >= deadline;
      const outcome = await this.#remove(entry, log, last, { retries: 0 });
      if (outcome.result !== "failed" || last || !outcome.away) return outcome;
      const backoff = Math.max(Math.min(250 * 2 ** attempt, 2000), outcome.retryAfterMs ?? 0);
      const wait = Math.min(backoff, Math.max(0, deadline - this.#clock()));
      log.debug("cleanup: the API server is away; deleting again", {
        kind: entry.kind,
        name: entry.name,
        inMs: wait,
      });
      await this.#sleep(wait);
    }
  }

  async #remove(
    entry: LedgerEntry,
    log: Logger,
    warn = true,
    call: { retries?: number } = {},
  ): Promise<CleanupOutcome & { away?: boolean; retryAfterMs?: number }> {
    try {
      let uid = entry.uid;
      if (entry.state === "unconfirmed") {
        const live = await this.#kube.get(entry.kind, entry.namespace, entry.name, call);
        if (!live) return { entry, result: "gone" };
        // guard: ledger-delete-proof: an unconfirmed object is deleted only when proven ours
        if (!this.#owns(live) || !live.metadata?.uid) {
          const labels = live.metadata?.labels ?? {};
          log.warn(UNPROVEN_OBJECT_WARNING, {
            kind: entry.kind,
            name: entry.name,
            runID: this.#proof.labels[this.#proof.runIdLabel],
            objectRunID: labels[this.#proof.runIdLabel] ?? "",
            objectInvocationID: labels[this.#proof.invocationIdLabel] ?? "",
          });
          return {
            entry,
            result: "kept",
            detail: "labels do not prove this invocation created it",
          };
        }
        uid = live.metadata.uid;
      }
      if (!uid) return { entry, result: "kept", detail: "no UID recorded" };
      const result = await this.#kube.deleteIfUid(entry.kind, entry.namespace, entry.name, uid, {
        ...call,
        ...(entry.kind === "Job" || entry.kind === "DaemonSet" ||
            entry.kind === "Deployment"
          ? { propagationPolicy: "Background" as const }
          : {}),
      });
      // A UID conflict means another object now holds the name: ours is gone already.
      return { entry, result: result === "deleted" ? "deleted" : "gone" };
    } catch (error) {
      const detail = error instanceof Error ? error.message : String(error);
      const away = error instanceof KubeApiError && error.isRetryable;
      if (warn || !away) {
        log.warn("cleanup could not delete an object this run created", {
          kind: entry.kind,
          name: entry.name,
          error: detail,
        });
      }
      const after = error instanceof KubeApiError ? error.retryAfterSeconds : undefined;
      return {
        entry,
        result: "failed",
        detail,
        away,
        ...(after !== undefined ? { retryAfterMs: after * 1000 } : {}),
      };
    }
  }
}
