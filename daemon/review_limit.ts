/**
 * A bound on the TokenReviews a daemon sends for tokens it has not seen. Known tokens (valid or
 * not) are answered from the authorizer's cache and cost nothing; a review already in flight
 * for the same token is shared. Each distinct new token costs one review at the API server, so
 * without a bound anyone who reaches the port could make every daemon of the fleet review as
 * many bogus tokens as it can send (the kubelet and kube-rbac-proxy cache reviews the same way
 * and bound nothing more; a per-source limit closes that).
 *
 * Two token buckets: one per source address (by default 20 at once, then 2 a second), and one
 * for the daemon as a whole (100 at once, then 20 a second), so neither one client nor many can
 * push the reviews past what the API server is asked for by every node's kubelet. A request over
 * either is answered 429 with `Retry-After`, before any review; the bucket is not charged then.
 * Callers through the API server's pod proxy share its address, and so one bucket: the API
 * server authenticated them already, and a fetch brings one new token per node.
 *
 * @module
 */
import { RateLimitedError } from "./cache.ts";

/** One token bucket's size and refill. */
export interface BucketLimit {
  /** Reviews allowed at once (the bucket's size). */
  burst: number;
  /** Reviews added back per second. */
  perSecond: number;
}

/** Options of {@link createReviewLimiter}. */
export interface ReviewLimitOptions {
  /** Per source address. @default { burst: 20, perSecond: 2 } */
  perSource?: BucketLimit;
  /** For the whole daemon. @default { burst: 100, perSecond: 20 } */
  overall?: BucketLimit;
  /** Source addresses remembered (the least recently seen forgotten first). @default 4096 */
  maxSources?: number;
  /** Clock in milliseconds. @default Date.now */
  clock?: () => number;
}

/** The default per-source bucket. */
export const DEFAULT_PER_SOURCE_LIMIT: BucketLimit = { burst: 20, perSecond: 2 };
/** The default whole-daemon bucket. */
export const DEFAULT_OVERALL_LIMIT: BucketLimit = { burst: 100, perSecond: 20 };

/** Charges reviews of new tokens to their source. */
export interface ReviewLimiter {
  /**
   * Charges one review to `source` and to the daemon.
   *
   * @param source the peer address (`""` when unknown)
   * @throws {RateLimitedError} (HTTP 429, with the seconds to wait) when either bucket is empty
   */
  charge(source: string): void;
}

interface Bucket {
  tokens: number;
  at: number;
}

function refill(bucket: Bucket, limit: BucketLimit, now: number): void {
  const elapsed = Math.max(0, now - bucket.at) / 1000;
  bucket.tokens = Math.min(limit.burst, bucket.tokens + elapsed * limit.perSecond);
  bucket.at = now;
}

function waitSeconds(bucket: Bucket, limit: BucketLimit): number {
  return Math.max(1, Math.ceil((1 - bucket.tokens) / limit.perSecond));
}

/**
 * Makes the limiter of one daemon.
 *
 * @param options the buckets, how many sources are remembered, the clock
 * @returns the limiter
 */
export function createReviewLimiter(options: ReviewLimitOptions = {}): ReviewLimiter {
  const perSource = options.perSource ?? DEFAULT_PER_SOURCE_LIMIT;
  const overallLimit = options.overall ?? DEFAULT_OVERALL_LIMIT;
  const maxSources = options.maxSources ?? 4096;
  const clock = options.clock ?? Date.now;
  const sources = new Map<string, Bucket>();
  const overall: Bucket = { tokens: overallLimit.burst, at: clock() };
  return {
    charge(source) {
      const now = clock();
      let bucket = sources.get(source);
      if (bucket) sources.delete(source); // re-inserted below: the map stays in order of use
      else bucket = { tokens: perSource.burst, at: now };
      sources.set(source, bucket);
      while (sources.size > maxSources) {
        const oldest = sources.keys().next().value;
        if (oldest === undefined) break;
        sources.delete(oldest);
      }
      refill(bucket, perSource, now);
      refill(overall, overallLimit, now);
      // guard: token-review-limit: reviews of unseen tokens are bounded per source and overall
      if (bucket.tokens < 1) {
        const wait = waitSeconds(bucket, perSource);
        throw new RateLimitedError(
          `Cannot review another new bearer token from this address now: retry in ${wait}s`,
          wait,
        );
      }
      if (overall.tokens < 1) {
        const wait = waitSeconds(overall, overallLimit);
        throw new RateLimitedError(
          `Cannot review another new bearer token now: retry in ${wait}s`,
          wait,
        );
      }
      bucket.tokens -= 1;
      overall.tokens -= 1;
    },
  };
}
