/**
 * The daemon's snapshot cache: one collection at a time, shared by every request that needs
 * it (never N parallel `nvidia-smi` runs), a maximum age, a rate limit on forced refreshes, a
 * short back-off after a failure (which does not stick: the next request after it tries
 * again), a background first collection with retries, and optional periodic refresh.
 *
 * @module
 */
import { createHash } from "node:crypto";
import { TimeoutError, ToolError, UnavailableError } from "../errors.ts";
import type { Logger } from "../log.ts";
import { encodeSnapshot, YamlWriteCaches } from "../snapshot/mod.ts";
import type { MeasurementType, Snapshot, SnapshotFormat } from "../snapshot/mod.ts";
import type { CollectionOutcome, CollectorReport } from "./metrics.ts";

/** What one collection returns. */
export interface CollectResult {
  /** The snapshot. */
  snapshot: Snapshot;
  /** One report per collector. */
  reports: CollectorReport[];
}

/** Collects a snapshot of this node; aborted on timeout or shutdown. */
export type CollectFunction = (signal: AbortSignal) => Promise<CollectResult>;

/** An encoded representation of a cached snapshot. */
export interface EncodedSnapshot {
  /** The document text. */
  body: string;
  /** The same, UTF-8 encoded once. */
  bytes: Uint8Array<ArrayBuffer>;
  /** A strong ETag, quoted. */
  etag: string;
}

/** One successful collection, with its encodings computed once. */
export class CachedSnapshot {
  /** The snapshot. */
  readonly snapshot: Snapshot;
  /** Its collector reports. */
  readonly reports: readonly CollectorReport[];
  /** When the collection started (ms since the epoch). */
  readonly startedAt: number;
  /** When it ended (ms since the epoch); the cache age counts from here. */
  readonly collectedAt: number;
  /** 1 for the first successful collection, then 2, 3, ... */
  readonly generation: number;
  readonly #encodings = new Map<string, EncodedSnapshot | null>();
  readonly #yamlCaches: YamlWriteCaches | undefined;

  /**
   * @param result what the collection returned
   * @param times start, end and generation
   * @param yamlCaches what the YAML writer remembers across collections @default fresh ones
   */
  constructor(
    result: CollectResult,
    times: { startedAt: number; collectedAt: number; generation: number },
    yamlCaches?: YamlWriteCaches,
  ) {
    this.#yamlCaches = yamlCaches;
    this.snapshot = result.snapshot;
    this.reports = result.reports;
    this.startedAt = times.startedAt;
    this.collectedAt = times.collectedAt;
    this.generation = times.generation;
  }

  /**
   * Encodes the whole snapshot, or a document with only one measurement type (memoized).
   *
   * @param format yaml or json
   * @param type a measurement type, to keep only that measurement
   * @returns the body and its ETag, or undefined when the type is not in the snapshot
   */
  encode(format: SnapshotFormat, type?: MeasurementType): EncodedSnapshot | undefined {
    const key = `${format}:${type ?? ""}`;
    const memo = this.#encodings.get(key);
    if (memo !== undefined) return memo ?? undefined;
    let document: Snapshot | undefined = this.snapshot;
    if (type !== undefined) {
      const measurements = this.snapshot.measurements.filter((m) => m.type === type);
      document = measurements.length === 0 ? undefined : { ...this.snapshot, measurements };
    }
    let encoded: EncodedSnapshot | null = null;
    if (document) {
      const body = encodeSnapshot(document, format, {
        ...(this.#yamlCaches ? { yamlCaches: this.#yamlCaches } : {}),
      });
      const digest = createHash("sha256").update(body).digest("hex").slice(0, 32);
      encoded = { body, bytes: new TextEncoder().encode(body), etag: `"${digest}"` };
    }
    this.#encodings.set(key, encoded);
    return encoded ?? undefined;
  }
}

/** `?fresh=true` came too soon after the last collection (HTTP 429). */
export class RateLimitedError extends ToolError {
  /** Seconds until a forced collection is allowed. */
  readonly retryAfterSeconds: number;
  /**
   * @param message what was refused
   * @param retryAfterSeconds when to try again
   */
  constructor(message: string, retryAfterSeconds: number) {
    super(message, "rateLimited", 429);
    this.name = "RateLimitedError";
    this.retryAfterSeconds = retryAfterSeconds;
  }
}

/** The last collection failed and the back-off has not passed yet (HTTP 503). */
export class CollectionFailedError extends UnavailableError {
  /** Seconds until the next collection may be tried. */
  readonly retryAfterSeconds: number;
  /**
   * @param message what failed
   * @param options cause and when to try again
   */
  constructor(message: string, options: { cause?: unknown; retryAfterSeconds: number }) {
    super(message, options.cause === undefined ? {} : { cause: options.cause });
    this.name = "CollectionFailedError";
    this.retryAfterSeconds = options.retryAfterSeconds;
  }
}

/** Options of {@link SnapshotCache}. */
export interface SnapshotCacheOptions {
  /** A snapshot younger than this is served without collecting. @default 60_000 */
  maxAgeMs?: number;
  /** `?fresh=true` starts a collection at most this often (else 429). @default 10_000 */
  freshMinIntervalMs?: number;
  /** After a failed collection, requests get 503 for this long before one tries again. @default 5_000 */
  failureBackoffMs?: number;
  /** A collection running longer is aborted. @default 180_000 */
  collectTimeoutMs?: number;
  /** Collect in the background this often after the first success; 0 is off. @default 0 */
  refreshIntervalMs?: number;
  /** Longest wait between retries of the first collection (doubling from failureBackoffMs). @default 300_000 */
  maxBootRetryMs?: number;
}

/** Dependencies of {@link SnapshotCache}. */
export interface SnapshotCacheDeps {
  /** Collects one snapshot. */
  collect: CollectFunction;
  /** Clock in milliseconds since the epoch. */
  clock: () => number;
  /** Logger. */
  log: Logger;
  /** Called after every collection (metrics). */
  onCollection?: (outcome: CollectionOutcome) => void;
}

/** Options of {@link SnapshotCache.get}. */
export interface GetSnapshotOptions {
  /** Force a new collection (rate-limited). @default false */
  fresh?: boolean;
  /** Stops this caller's wait (not the shared collection). */
  signal?: AbortSignal;
}

function raceSignal<T>(promise: Promise<T>, signal: AbortSignal | undefined): Promise<T> {
  if (!signal) return promise;
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener("abort", onAbort, { once: true });
    promise.then(
      (value) => {
        signal.removeEventListener("abort", onAbort);
        resolve(value);
      },
      (error) => {
        signal.removeEventListener("abort", onAbort);
        reject(error);
      },
    );
  });
}

function seconds(ms: number): number {
  return Math.max(1, Math.ceil(ms / 1000));
}

/** The single-flight snapshot cache. */
export class SnapshotCache {
  readonly #deps: SnapshotCacheDeps;
  readonly #maxAgeMs: number;
  readonly #freshMinIntervalMs: number;
  readonly #failureBackoffMs: number;
  readonly #collectTimeoutMs: number;
  readonly #refreshIntervalMs: number;
  readonly #maxBootRetryMs: number;
  #latest: CachedSnapshot | undefined;
  #inflight: Promise<CachedSnapshot> | undefined;
  #controller: AbortController | undefined;
  #lastStartedAt: number | undefined;
  #lastFailure: { at: number; error: ToolError } | undefined;
  #started = 0;
  #timer: ReturnType<typeof setTimeout> | undefined;
  #closed = false;
  /** What the YAML writer remembers from collection to collection (most readings repeat). */
  readonly #yamlCaches = new YamlWriteCaches();

  /**
   * @param deps collect function, clock, logger and collection listener
   * @param options ages, intervals and timeouts
   * @throws {RangeError} when a duration is negative
   */
  constructor(deps: SnapshotCacheDeps, options: SnapshotCacheOptions = {}) {
    const {
      maxAgeMs = 60_000,
      freshMinIntervalMs = 10_000,
      failureBackoffMs = 5_000,
      collectTimeoutMs = 180_000,
      refreshIntervalMs = 0,
      maxBootRetryMs = 300_000,
    } = options;
    for (
      const [name, value] of Object.entries({
        maxAgeMs,
        freshMinIntervalMs,
        failureBackoffMs,
        collectTimeoutMs,
        refreshIntervalMs,
        maxBootRetryMs,
      })
    ) {
      if (!(value >= 0) || !Number.isFinite(value)) {
        throw new RangeError(
          `Cannot create snapshot cache as '${name}' must be a non-negative number: current value is ${value}`,
        );
      }
    }
    this.#deps = deps;
    this.#maxAgeMs = maxAgeMs;
    this.#freshMinIntervalMs = freshMinIntervalMs;
    this.#failureBackoffMs = failureBackoffMs;
    this.#collectTimeoutMs = collectTimeoutMs;
    this.#refreshIntervalMs = refreshIntervalMs;
    this.#maxBootRetryMs = maxBootRetryMs;
  }

  /** Whether a collection has succeeded (readiness). */
  get ready(): boolean {
    return this.#latest !== undefined;
  }

  /** The latest successful collection, however old. */
  get latest(): CachedSnapshot | undefined {
    return this.#latest;
  }

  /** How many collections have been started. */
  get collectionsStarted(): number {
    return this.#started;
  }

  /** Whether a collection is running. */
  get collecting(): boolean {
    return this.#inflight !== undefined;
  }

  /**
   * Returns a snapshot no older than the maximum age: the cached one, the running
   * collection's, or a new collection's. With `fresh`, joins a running collection or starts
   * one unless one started less than `freshMinIntervalMs` ago.
   *
   * @param options fresh and the caller's signal
   * @returns the snapshot entry
   * @throws {RateLimitedError} when `fresh` comes too soon
   * @throws {CollectionFailedError} when the last collection failed within the back-off
   * @throws {TimeoutError} when the collection ran out of time
   * @throws {UnavailableError} when the cache is closed
   */
  get(options: GetSnapshotOptions = {}): Promise<CachedSnapshot> {
    const { fresh = false, signal } = options;
    if (this.#closed) {
      return Promise.reject(
        new UnavailableError("Cannot collect snapshot: the daemon is stopping"),
      );
    }
    const now = this.#deps.clock();
    const latest = this.#latest;
    if (!fresh && latest && now - latest.collectedAt < this.#maxAgeMs) {
      return Promise.resolve(latest);
    }
    if (this.#inflight) return raceSignal(this.#inflight, signal);
    if (fresh && this.#lastStartedAt !== undefined) {
      const wait = this.#lastStartedAt + this.#freshMinIntervalMs - now;
      if (wait > 0) {
        return Promise.reject(
          new RateLimitedError(
            `Cannot collect a fresh snapshot: the last collection started ${
              now - this.#lastStartedAt
            } ms ago and the minimum interval is ${this.#freshMinIntervalMs} ms`,
            seconds(wait),
          ),
        );
      }
    }
    const failure = this.#lastFailure;
    if (!fresh && failure && now - failure.at < this.#failureBackoffMs) {
      return Promise.reject(
        new CollectionFailedError(failure.error.message, {
          cause: failure.error,
          retryAfterSeconds: seconds(failure.at + this.#failureBackoffMs - now),
        }),
      );
    }
    return raceSignal(this.#collect(), signal);
  }

  /**
   * Starts a collection, or joins the running one, for background use.
   *
   * @returns whether it succeeded (never rejects)
   */
  refresh(): Promise<boolean> {
    if (this.#closed) return Promise.resolve(false);
    return (this.#inflight ?? this.#collect()).then(() => true, () => false);
  }

  /**
   * Starts the background work: the first collection now, retried with doubling back-off
   * until one succeeds, then a refresh every `refreshIntervalMs` when set.
   */
  start(): void {
    let delay = Math.max(this.#failureBackoffMs, 1000);
    const run = async () => {
      this.#timer = undefined;
      const ok = await this.refresh();
      if (this.#closed) return;
      if (!this.ready) {
        this.#schedule(run, delay);
        delay = Math.min(delay * 2, Math.max(this.#maxBootRetryMs, 1000));
      } else if (this.#refreshIntervalMs > 0) {
        this.#schedule(run, this.#refreshIntervalMs);
      }
      if (!ok) this.#deps.log.debug("background collection failed");
    };
    void run();
  }

  #schedule(run: () => Promise<void>, delayMs: number): void {
    if (this.#closed) return;
    this.#timer = setTimeout(run, delayMs);
  }

  /**
   * Stops background work and aborts a running collection, then waits for it to settle.
   *
   * @returns when nothing of the cache runs any more
   */
  async close(): Promise<void> {
    this.#closed = true;
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#controller?.abort(
      new UnavailableError("Cannot collect snapshot: the daemon is stopping"),
    );
    await this.#inflight?.catch(() => undefined);
  }

  #collect(): Promise<CachedSnapshot> {
    const { collect, clock, log, onCollection } = this.#deps;
    const controller = new AbortController();
    const startedAt = clock();
    this.#controller = controller;
    this.#lastStartedAt = startedAt;
    this.#started += 1;
    const timeoutMs = this.#collectTimeoutMs;
    const timer = setTimeout(() => {
      controller.abort(
        new TimeoutError(`Cannot collect snapshot: no result after ${timeoutMs} ms`),
      );
    }, timeoutMs);
    log.debug("collection started", { collection: this.#started });
    const promise = (async () => {
      try {
        // Calling collect in a later microtask means even a synchronous throw settles after
        // the flight is registered; the race keeps a collector that ignores its signal from
        // holding the waiters past the timeout.
        const started = Promise.resolve().then(() => collect(controller.signal));
        const result = await raceSignal(started, controller.signal);
        const collectedAt = clock();
        const entry = new CachedSnapshot(result, {
          startedAt,
          collectedAt,
          generation: (this.#latest?.generation ?? 0) + 1,
        }, this.#yamlCaches);
        this.#latest = entry;
        this.#lastFailure = undefined;
        onCollection?.({
          ok: true,
          durationMs: collectedAt - startedAt,
          endedAt: collectedAt,
          reports: result.reports,
          snapshot: result.snapshot,
        });
        const failed = result.reports.filter((r) => r.status !== "ok").map((r) => r.collector);
        log.info("snapshot collected", {
          durationMs: collectedAt - startedAt,
          generation: entry.generation,
          failed: failed.length > 0 ? failed.join(",") : undefined,
        });
        return entry;
      } catch (caught) {
        const endedAt = clock();
        const error = caught instanceof ToolError ? caught : new UnavailableError(
          `Cannot collect snapshot: ${caught instanceof Error ? caught.message : String(caught)}`,
          { cause: caught },
        );
        this.#lastFailure = { at: endedAt, error };
        onCollection?.({ ok: false, durationMs: endedAt - startedAt, endedAt, reports: [] });
        log.warn("snapshot collection failed", { error: error.message });
        throw error;
      } finally {
        clearTimeout(timer);
        if (this.#controller === controller) this.#controller = undefined;
        this.#inflight = undefined;
      }
    })();
    this.#inflight = promise;
    return promise;
  }
}
