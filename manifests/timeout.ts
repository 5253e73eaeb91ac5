/**
 * The one timeout contract of a run: what a `--timeout` may be once it is a number, which the
 * CLI holds a parsed flag to and the Job's deadlines rely on. A timeout is milliseconds, finite,
 * from 0 to {@link MAX_WAIT_MS}; 0 means the default ({@link DEFAULT_TIMEOUT_MS}). Every other
 * duration flag shares the same ceiling: a longer wait is no wait.
 *
 * @module
 */
import { UsageError } from "../errors.ts";

/** The longest wait any duration option accepts: 24 h (timers and Job deadlines stay in range). */
export const MAX_WAIT_MS = 24 * 3_600_000;

/** A run's timeout when none is given: 5 minutes. */
export const DEFAULT_TIMEOUT_MS = 300_000;

/**
 * Holds a timeout to the contract.
 *
 * @param timeoutMs the timeout, milliseconds (0: the default)
 * @param option the option it came from, named in the error
 * @returns the timeout to wait, milliseconds (the default for 0)
 * @throws {UsageError} naming the option when the value is negative, not finite, or over 24 h
 */
export function checkTimeout(timeoutMs: number, option = "timeout"): number {
  if (!Number.isFinite(timeoutMs) || timeoutMs < 0 || timeoutMs > MAX_WAIT_MS) {
    throw new UsageError(
      (name) =>
        `Cannot use '${
          name(option)
        }' as it must be a duration from 0 to 24h: current value is '${timeoutMs}ms'`,
    );
  }
  return timeoutMs === 0 ? DEFAULT_TIMEOUT_MS : timeoutMs;
}
