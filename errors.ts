/**
 * The one error hierarchy of aicr. Every error a user can meet is a {@link ToolError}
 * with an exit code (for the CLI) and an HTTP status (for the daemon); only `cli/`
 * turns errors into exit codes and only `daemon/` turns them into responses.
 *
 * @module
 */

/** Exit codes, one table for the whole tool (documented in `--help` and the README). */
export const EXIT_CODES = {
  /** Success. */
  ok: 0,
  /** `aicr diff --fail-on-drift` found drift (like `kubectl diff`). */
  drift: 1,
  /** Invalid input: flags, files, documents. */
  usage: 2,
  /** Something asked for does not exist. */
  notFound: 3,
  /** The caller or the agent lacks a permission. */
  unauthorized: 4,
  /** A deadline passed. */
  timeout: 5,
  /** The Kubernetes API server (or a service aicr depends on) could not be reached. */
  unavailable: 6,
  /** The API asked us to slow down and retries ran out. */
  rateLimited: 7,
  /** A bug or an unexpected failure. */
  internal: 8,
  /**
   * The API answered, but some targeted nodes gave no result: their daemon pod is not Ready or
   * could not be reached (`aicr daemonset fetch`; the other nodes' snapshots are written).
   */
  incomplete: 9,
  /** A conflicting object or directory already exists (upstream maps CONFLICT to 2). */
  conflict: 2,
  /** Interrupted by SIGINT or SIGTERM (after cleanup ran). */
  interrupted: 130,
} as const;

/** Name of one exit code in {@link EXIT_CODES}. */
export type ExitCodeName = keyof typeof EXIT_CODES;

/** One line per exit code, for `--help` and the README. */
export const EXIT_CODE_HELP: readonly string[] = [
  "0  success",
  "1  drift found (aicr diff --fail-on-drift)",
  "2  invalid input (flags, files, documents), or a conflict (CONFLICT)",
  "3  not found",
  "4  permission denied (pre-flight gate, RBAC), or credentials rejected (401)",
  "5  timeout",
  "6  the Kubernetes API server cannot be reached",
  "7  rate limited",
  "8  internal error (also: the agent Job failed, an image could not be pulled)",
  "9  incomplete: some nodes gave no snapshot (daemon pod not Ready or unreachable)",
  "130  interrupted (cleanup ran)",
];

/** Options for {@link ToolError}. */
export interface ToolErrorOptions {
  /** The error this one wraps. */
  cause?: unknown;
  /** Extra lines shown under the message (hints, lists). */
  details?: readonly string[];
}

/** Base of every error aicr reports to a user. */
export class ToolError extends Error {
  /** Which row of {@link EXIT_CODES} this error exits with. */
  readonly code: ExitCodeName;
  /** HTTP status the daemon answers with. */
  readonly httpStatus: number;
  /** Extra lines shown under the message. */
  readonly details: readonly string[];

  /**
   * @param message the message, std grammar: action, colon, state
   * @param code the exit code name
   * @param httpStatus the HTTP status for the daemon
   * @param options cause and details
   */
  constructor(
    message: string,
    code: ExitCodeName = "internal",
    httpStatus = 500,
    options: ToolErrorOptions = {},
  ) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = "ToolError";
    this.code = code;
    this.httpStatus = httpStatus;
    this.details = options.details ?? [];
  }

  /** The numeric exit code. */
  get exitCode(): number {
    return EXIT_CODES[this.code];
  }
}

/** Invalid flags, files or documents (exit 2, HTTP 400). */
export class UsageError extends ToolError {
  /** @param message what is wrong and how to fix it */
  constructor(message: string, options: ToolErrorOptions = {}) {
    super(message, "usage", 400, options);
    this.name = "UsageError";
  }
}

/** Something asked for does not exist (exit 3, HTTP 404). */
export class NotFoundError extends ToolError {
  /** @param message what was not found */
  constructor(message: string, options: ToolErrorOptions = {}) {
    super(message, "notFound", 404, options);
    this.name = "NotFoundError";
  }
}

/** A permission is missing (exit 4, HTTP 403). */
export class PermissionError extends ToolError {
  /** @param message what is missing */
  constructor(message: string, options: ToolErrorOptions = {}) {
    super(message, "unauthorized", 403, options);
    this.name = "PermissionError";
  }
}

/** A deadline passed (exit 5, HTTP 504). */
export class TimeoutError extends ToolError {
  /** @param message what timed out */
  constructor(message: string, options: ToolErrorOptions = {}) {
    super(message, "timeout", 504, options);
    this.name = "TimeoutError";
  }
}

/** A service could not be reached (exit 6, HTTP 503). */
export class UnavailableError extends ToolError {
  /** @param message what could not be reached */
  constructor(message: string, options: ToolErrorOptions = {}) {
    super(message, "unavailable", 503, options);
    this.name = "UnavailableError";
  }
}

/** An object or directory already exists, or a precondition failed (exit 2, HTTP 409). */
export class ConflictError extends ToolError {
  /** @param message what conflicts */
  constructor(message: string, options: ToolErrorOptions = {}) {
    super(message, "conflict", 409, options);
    this.name = "ConflictError";
  }
}

/**
 * Some targeted nodes gave no result although the API answered: not Ready or unreachable
 * daemons (exit 9, HTTP 502).
 */
export class IncompleteError extends ToolError {
  /** @param message which nodes and why */
  constructor(message: string, options: ToolErrorOptions = {}) {
    super(message, "incomplete", 502, options);
    this.name = "IncompleteError";
  }
}

/** The run was interrupted by a signal (exit 130). */
export class InterruptedError extends ToolError {
  /** @param message which signal */
  constructor(message: string, options: ToolErrorOptions = {}) {
    super(message, "interrupted", 499, options);
    this.name = "InterruptedError";
  }
}

/**
 * The exit code for any thrown value: a {@link ToolError}'s own, otherwise internal (8).
 *
 * @param error anything thrown
 * @returns the process exit code
 */
export function exitCodeOf(error: unknown): number {
  return error instanceof ToolError ? error.exitCode : EXIT_CODES.internal;
}

/**
 * Renders an error for a terminal: the message, its details, and the chain of causes.
 *
 * @param error anything thrown
 * @returns one or more lines, without a trailing newline
 */
export function formatError(error: unknown): string {
  const lines: string[] = [];
  let current: unknown = error;
  let depth = 0;
  while (current !== undefined && depth < 5) {
    const message = current instanceof Error ? current.message : String(current);
    lines.push(depth === 0 ? `error: ${message}` : `  caused by: ${message}`);
    if (current instanceof ToolError) {
      for (const detail of current.details) lines.push(detail);
    }
    current = current instanceof Error ? current.cause : undefined;
    depth++;
  }
  return lines.join("\n");
}
