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

/** Deletion order: the Job first (its pods go with it), bindings before roles. */
const DELETE_ORDER: readonly KindName[] = [
  "Job",
  "DaemonSet",
  "Service",
  "Secret",
  "ConfigMap",
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

  /**
   * @param kube the client
   * @param proof the labels that prove ownership
   */
  constructor(kube: KubeClient, proof: OwnershipProof) {
    this.#kube = kube;
    this.#proof = proof;
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
   * Creates an object and records it. When the response is lost, the object is
   * re-read: if it exists and carries this invocation's labels it is adopted as
   * confirmed; otherwise it stays unconfirmed for cleanup to resolve, and the
   * original error is thrown.
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
    try {
      const created = await this.#kube.create(kind, object, options);
      const uid = created.metadata?.uid;
      this.#entries.push(
        uid ? { ...base, uid, state: "confirmed" } : { ...base, state: "unconfirmed" },
      );
      return created;
    } catch (error) {
      if (!isAmbiguousCreateFailure(error)) throw error;
      const entry: LedgerEntry = { ...base, state: "unconfirmed" };
      this.#entries.push(entry);
      const live = await this.#kube.get(kind, namespace, name).catch(() => undefined);
      if (live?.metadata?.uid && this.#owns(live)) {
        entry.uid = live.metadata.uid;
        entry.state = "confirmed";
        return live;
      }
      throw error;
    }
  }

  #owns(object: KubeObject): boolean {
    const labels = object.metadata?.labels ?? {};
    return Object.entries(this.#proof.labels).every(([k, v]) => labels[k] === v);
  }

  /**
   * Deletes every recorded object: confirmed ones by UID, unconfirmed ones only after
   * re-reading them and proving ownership by labels. Never deletes anything else.
   *
   * @param options logger and cancellation
   * @returns one outcome per entry
   */
  async cleanup(options: { log: Logger; signal?: AbortSignal }): Promise<CleanupOutcome[]> {
    const { log } = options;
    const rank = (kind: KindName) => {
      const i = DELETE_ORDER.indexOf(kind);
      return i < 0 ? DELETE_ORDER.length : i;
    };
    const ordered = [...this.#entries].sort((a, b) => rank(a.kind) - rank(b.kind));
    // The Job goes first so its pods stop before their permissions do; the rest fan out.
    const first = ordered.filter((e) => e.kind === "Job");
    const rest = ordered.filter((e) => e.kind !== "Job");
    const outcomes: CleanupOutcome[] = [];
    for (const group of [first, rest]) {
      outcomes.push(...await Promise.all(group.map((entry) => this.#remove(entry, log))));
    }
    return outcomes;
  }

  async #remove(entry: LedgerEntry, log: Logger): Promise<CleanupOutcome> {
    try {
      let uid = entry.uid;
      if (entry.state === "unconfirmed") {
        const live = await this.#kube.get(entry.kind, entry.namespace, entry.name);
        if (!live) return { entry, result: "gone" };
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
        ...(entry.kind === "Job" || entry.kind === "DaemonSet"
          ? { propagationPolicy: "Background" as const }
          : {}),
      });
      // A UID conflict means another object now holds the name: ours is gone already.
      return { entry, result: result === "deleted" ? "deleted" : "gone" };
    } catch (error) {
      const detail = error instanceof Error ? error.message : String(error);
      log.warn("cleanup could not delete an object this run created", {
        kind: entry.kind,
        name: entry.name,
        error: detail,
      });
      return { entry, result: "failed", detail };
    }
  }
}
