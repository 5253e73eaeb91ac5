/**
 * Who may read a node's snapshot: bearer tokens are authenticated with a `TokenReview` and
 * the user is authorized with a `SubjectAccessReview`, as the kubelet does. This module holds
 * the interfaces the Kubernetes adapter (`kube/`) implements, the request attributes the
 * daemon asks about, and a caching wrapper (positive and negative decisions are kept
 * briefly, like the kubelet's webhook caches; errors are never cached).
 *
 * @module
 */
import type { AccessAttributes } from "../kube/mod.ts";
import { createHash } from "node:crypto";
import { ToolError } from "../errors.ts";
import { createReviewLimiter } from "./review_limit.ts";
import type { ReviewLimiter } from "./review_limit.ts";

/** A user as a `TokenReview` returns it (`status.user`). */
export interface UserInfo {
  /** User name, e.g. `system:serviceaccount:aicr:aicr-reader`. */
  username: string;
  /** UID, when the authenticator knows it. */
  uid?: string;
  /** Groups the user belongs to. */
  groups: string[];
  /** Extra attributes (scopes, pod names of bound tokens). */
  extra?: Record<string, string[]>;
}

/** The answer of a `TokenReview`. */
export interface TokenReviewResult {
  /** Whether the token is valid. */
  authenticated: boolean;
  /** The user, when authenticated. */
  user?: UserInfo;
}

/** Authenticates bearer tokens (implemented by `kube/` with `TokenReview`). */
export interface TokenAuthenticator {
  /**
   * Reviews a token.
   *
   * @param token the bearer token, without `Bearer `
   * @param signal aborts the review
   * @returns whether it is valid, and whose it is
   * @throws {ToolError} when the review itself fails (not for an invalid token)
   */
  review(token: string, signal?: AbortSignal): Promise<TokenReviewResult>;
}

/** Resource attributes of a `SubjectAccessReview`: the one access-review type, from `kube/`. */
export type { AccessAttributes } from "../kube/mod.ts";

/** Authorizes users (implemented by `kube/` with `SubjectAccessReview`). */
export interface AccessAuthorizer {
  /**
   * Asks whether a user may do something.
   *
   * @param user the authenticated user
   * @param attributes what they want to do
   * @param signal aborts the review
   * @returns whether it is allowed
   * @throws {ToolError} when the review itself fails (not for a denial)
   */
  allowed(user: UserInfo, attributes: AccessAttributes, signal?: AbortSignal): Promise<boolean>;
}

/** What the daemon's HTTP layer asks: both steps, cached. */
export interface RequestAuthorizer {
  /**
   * Authenticates a bearer token.
   *
   * @param token the token
   * @param request the caller's request: its signal, and its peer address (for the limit on
   *   reviews of new tokens, `review_limit.ts`)
   * @returns the user, or undefined when the token is not valid
   * @throws {RateLimitedError} when a new token would need a review over the limit (HTTP 429)
   */
  authenticate(
    token: string,
    request?: { signal?: AbortSignal; source?: string },
  ): Promise<UserInfo | undefined>;
  /**
   * Authorizes a user.
   *
   * @param user the user
   * @param attributes what they want to do
   * @param signal aborts the review
   * @returns whether it is allowed
   */
  authorize(user: UserInfo, attributes: AccessAttributes, signal?: AbortSignal): Promise<boolean>;
}

/** API group of the virtual snapshot resource. */
export const SNAPSHOT_API_GROUP = "aicr.run";
/** Name of the virtual snapshot resource. */
export const SNAPSHOT_RESOURCE = "snapshots";

/**
 * The attributes checked for `GET /v1/snapshot[/<type>]`: `get` on the virtual resource
 * `snapshots.aicr.run` named after the node. RBAC accepts rules for resources no API
 * serves, so a narrow ClusterRole grants snapshot reads without `nodes/proxy` (which would
 * also open the kubelet API, exec included).
 *
 * @param nodeName this daemon's node
 * @returns the attributes
 */
export function snapshotAttributes(nodeName: string): AccessAttributes {
  return { verb: "get", group: SNAPSHOT_API_GROUP, resource: SNAPSHOT_RESOURCE, name: nodeName };
}

/**
 * The attributes checked for `GET /metrics`: `get nodes/metrics` on the node, exactly what the
 * kubelet asks for its own `/metrics`, so existing Prometheus RBAC works unchanged.
 *
 * @param nodeName this daemon's node
 * @returns the attributes
 */
export function metricsAttributes(nodeName: string): AccessAttributes {
  return { verb: "get", group: "", resource: "nodes", subresource: "metrics", name: nodeName };
}

/** A missing or invalid bearer token (exit 4, HTTP 401). */
export class UnauthenticatedError extends ToolError {
  /** @param message what is wrong with the credentials */
  constructor(message: string) {
    super(message, "unauthorized", 401);
    this.name = "UnauthenticatedError";
  }
}

/** Options of {@link createCachingAuthorizer}. */
export interface CachingAuthorizerOptions {
  /** Clock in milliseconds. @default Date.now */
  clock?: () => number;
  /** How long a valid token is remembered. @default 120_000 */
  authenticatedTtlMs?: number;
  /** How long an invalid token is remembered. @default 30_000 */
  unauthenticatedTtlMs?: number;
  /** How long an allowed decision is remembered. @default 120_000 */
  allowedTtlMs?: number;
  /** How long a denied decision is remembered. @default 30_000 */
  deniedTtlMs?: number;
  /** Entries kept per cache (oldest dropped first). @default 1024 */
  maxEntries?: number;
  /** Bounds the reviews of tokens not cached. @default createReviewLimiter() on `clock` */
  limiter?: ReviewLimiter;
}

/** A bounded map with per-entry expiry; the oldest entry goes first when full. */
class TtlCache<V> {
  readonly #entries = new Map<string, { value: V; expiresAt: number }>();
  readonly #max: number;
  readonly #clock: () => number;

  constructor(max: number, clock: () => number) {
    this.#max = max;
    this.#clock = clock;
  }

  get(key: string): V | undefined {
    const entry = this.#entries.get(key);
    if (!entry) return undefined;
    if (entry.expiresAt <= this.#clock()) {
      this.#entries.delete(key);
      return undefined;
    }
    return entry.value;
  }

  set(key: string, value: V, ttlMs: number): void {
    if (ttlMs <= 0) return;
    this.#entries.delete(key);
    this.#entries.set(key, { value, expiresAt: this.#clock() + ttlMs });
    while (this.#entries.size > this.#max) {
      const oldest = this.#entries.keys().next().value;
      if (oldest === undefined) break;
      this.#entries.delete(oldest);
    }
  }

  get size(): number {
    return this.#entries.size;
  }
}

/**
 * Runs `work` once per key at a time: concurrent callers with the same key share one call.
 */
class SingleFlight<V> {
  readonly #inflight = new Map<string, Promise<V>>();

  has(key: string): boolean {
    return this.#inflight.has(key);
  }

  run(key: string, work: () => Promise<V>): Promise<V> {
    const existing = this.#inflight.get(key);
    if (existing) return existing;
    const promise = work().finally(() => this.#inflight.delete(key));
    this.#inflight.set(key, promise);
    return promise;
  }
}

function hashKey(text: string): string {
  return createHash("sha256").update(text).digest("base64");
}

function memoKey<T extends object>(compute: (value: T) => string): (value: T) => string {
  const keys = new WeakMap<T, string>();
  return (value) => {
    let key = keys.get(value);
    if (key === undefined) {
      key = compute(value);
      keys.set(value, key);
    }
    return key;
  };
}

function userKeyOf(user: UserInfo): string {
  return JSON.stringify([
    user.username,
    user.uid ?? "",
    [...user.groups].sort(),
    Object.entries(user.extra ?? {}).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)),
  ]);
}

function attributesKeyOf(attributes: AccessAttributes): string {
  return JSON.stringify([
    attributes.verb,
    attributes.group ?? "",
    attributes.resource,
    attributes.subresource ?? "",
    attributes.name ?? "",
  ]);
}

/**
 * Wraps an authenticator and an authorizer with bounded caches of their answers (the raw token
 * is never a key: its SHA-256 is) and shares concurrent identical reviews. A review that throws
 * is not cached, so an apiserver outage does not outlive itself.
 *
 * @param deps the token authenticator and the access authorizer
 * @param options time-to-live values, size bound and clock
 * @returns the request authorizer
 */
export function createCachingAuthorizer(
  deps: { authenticator: TokenAuthenticator; authorizer: AccessAuthorizer },
  options: CachingAuthorizerOptions = {},
): RequestAuthorizer {
  const {
    clock = Date.now,
    authenticatedTtlMs = 120_000,
    unauthenticatedTtlMs = 30_000,
    allowedTtlMs = 120_000,
    deniedTtlMs = 30_000,
    maxEntries = 1024,
  } = options;
  const limiter = options.limiter ?? createReviewLimiter({ clock });
  const users = new TtlCache<UserInfo | null>(maxEntries, clock);
  const decisions = new TtlCache<boolean>(maxEntries, clock);
  const userFlights = new SingleFlight<UserInfo | undefined>();
  const decisionFlights = new SingleFlight<boolean>();
  // Decision keys are computed once per object: the token cache hands out the same user object
  // until it expires, and each route checks one constant attributes object.
  const userKey = memoKey(userKeyOf);
  const attributesKey = memoKey(attributesKeyOf);
  return {
    // A shared review must not die with the first caller's request, so no caller's signal
    // reaches it; the adapter bounds each review with its own timeout.
    authenticate(token, request = {}) {
      const key = hashKey(token);
      const cached = users.get(key);
      if (cached !== undefined) return Promise.resolve(cached ?? undefined);
      // Only a review that will be sent is charged: a shared one in flight costs nothing.
      if (!userFlights.has(key)) {
        try {
          limiter.charge(request.source ?? "");
        } catch (error) {
          return Promise.reject(error);
        }
      }
      return userFlights.run(key, async () => {
        const result = await deps.authenticator.review(token);
        // guard: review-authenticated: a review that did not authenticate admits no user;
        // mutant: `result.authenticated && result.user` -> `result.user`
        const user = result.authenticated && result.user ? result.user : undefined;
        users.set(key, user ?? null, user ? authenticatedTtlMs : unauthenticatedTtlMs);
        return user;
      });
    },
    authorize(user, attributes) {
      const key = `${userKey(user)}\u0000${attributesKey(attributes)}`;
      const cached = decisions.get(key);
      if (cached !== undefined) return Promise.resolve(cached);
      return decisionFlights.run(key, async () => {
        const allowed = await deps.authorizer.allowed(user, attributes);
        decisions.set(key, allowed, allowed ? allowedTtlMs : deniedTtlMs);
        return allowed;
      });
    },
  };
}

/** The largest bearer token accepted (service-account JWTs are around 1 KiB). */
export const MAX_TOKEN_BYTES = 8 * 1024;

const BEARER_REGEXP = /^Bearer[ \t]+([^ \t]+)[ \t]*$/i;

/**
 * Extracts the bearer token of a request: `Authorization` first, then `X-Aicr-Authorization`
 * (the apiserver's proxy strips `Authorization` once it has authenticated the caller, so a
 * client going through it carries the daemon's token in the second header).
 *
 * @param headers the request headers (web `Headers`, or anything reading a header by name)
 * @returns the token
 * @throws {UnauthenticatedError} when neither header holds a well-formed bearer token
 */
export function bearerToken(headers: { get(name: string): string | null }): string {
  const value = headers.get("authorization") ?? headers.get("x-aicr-authorization");
  if (value === null) throw new UnauthenticatedError("Cannot authenticate: no bearer token");
  const match = BEARER_REGEXP.exec(value);
  const token = match?.[1];
  if (!token) {
    throw new UnauthenticatedError("Cannot authenticate: the credentials are not a bearer token");
  }
  // guard: token-size: an over-long token is refused before any review
  if (token.length > MAX_TOKEN_BYTES) {
    throw new UnauthenticatedError("Cannot authenticate: the bearer token is too long");
  }
  return token;
}

/**
 * Describes a denial the way the apiserver does.
 *
 * @param user the user
 * @param attributes what was asked
 * @returns e.g. `User "alice" cannot get resource "snapshots" in API group "aicr.run" ...`
 */
export function describeDenial(user: UserInfo, attributes: AccessAttributes): string {
  const resource = attributes.subresource
    ? `${attributes.resource}/${attributes.subresource}`
    : attributes.resource;
  const group = attributes.group ?? "";
  const name = attributes.name ? ` named "${attributes.name}"` : "";
  return `User "${user.username}" cannot ${attributes.verb} resource "${resource}" in API group "${group}"${name}`;
}
