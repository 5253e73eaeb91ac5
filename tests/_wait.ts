/**
 * Deadlines for tests that wait. A test never loops or awaits without one: when what it waits
 * for does not come, it fails saying what it waited for, instead of hanging the run. A deadline
 * guards against a hang; it is not a claim about speed, so it is generous (30 s by default).
 *
 * @module
 */

/** Options of {@link waitUntil}. */
export interface WaitOptions {
  /** Give up after this long. @default 30_000 */
  timeoutMs?: number;
  /** Time between checks. @default 10 */
  intervalMs?: number;
}

/**
 * Checks `condition` until it holds.
 *
 * @param what what is awaited, for the error ("the first collection to land")
 * @param condition the check; a throw counts as "not yet" and is quoted on timeout
 * @param options deadline and interval
 * @throws {Error} `Timed out after N ms waiting for <what>` when the deadline passes
 */
export async function waitUntil(
  what: string,
  condition: () => boolean | Promise<boolean>,
  options: WaitOptions = {},
): Promise<void> {
  const { timeoutMs = 30_000, intervalMs = 10 } = options;
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      if (await condition()) return;
    } catch (error) {
      last = error;
    }
    if (Date.now() >= deadline) {
      throw new Error(
        `Timed out after ${timeoutMs} ms waiting for ${what}${last ? `: ${last}` : ""}`,
      );
    }
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
}

/**
 * Awaits `promise`, failing when it has not settled by the deadline.
 *
 * @param what what is awaited, for the error
 * @param promise the promise
 * @param timeoutMs give up after this long (default 30 s)
 * @returns its value
 * @throws {Error} `Timed out after N ms waiting for <what>`, or the promise's own rejection
 */
export async function withDeadline<T>(
  what: string,
  promise: Promise<T>,
  timeoutMs = 30_000,
): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new Error(`Timed out after ${timeoutMs} ms waiting for ${what}`)),
      timeoutMs,
    );
  });
  try {
    return await Promise.race([promise, late]);
  } finally {
    clearTimeout(timer);
  }
}
