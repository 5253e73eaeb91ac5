/**
 * The one error hierarchy of aicr. Every error a user can meet is a {@link ToolError}
 * with an exit code (for the CLI) and an HTTP status (for the daemon); only `cli/`
 * turns errors into exit codes and only `daemon/` turns them into responses.
 *
 * @module
 */
import { redactSecrets } from "./redact.ts";

/**
 * The one table of exit codes: each row's code and the line `--help` prints for it. Rows that
 * share a code (usage and conflict) print as one line.
 */
export const EXIT_CODE_TABLE = {
  /** Success. */
  ok: { code: 0, help: "success" },
  /** `aicr diff --fail-on-drift` found drift (like `kubectl diff`). */
  drift: { code: 1, help: "drift found (aicr diff --fail-on-drift)" },
  /** `aicr cleanup` without `--run-id` found runs that left objects (like `grep`: found is 1). */
  leftovers: { code: 1, help: "runs left objects behind (aicr cleanup without --run-id)" },
  /** Invalid input: flags, files, documents. */
  usage: { code: 2, help: "invalid input (flags, files, documents)" },
  /** A conflicting object or directory already exists (upstream maps CONFLICT to 2). */
  conflict: { code: 2, help: "a conflict (CONFLICT)" },
  /** Something asked for does not exist. */
  notFound: { code: 3, help: "not found" },
  /** The caller or the agent lacks a permission. */
  unauthorized: {
    code: 4,
    help: "permission denied (pre-flight gate, RBAC), or credentials rejected (401)",
  },
  /** A deadline passed. */
  timeout: { code: 5, help: "timeout" },
  /** The Kubernetes API server (or a service aicr depends on) could not be reached. */
  unavailable: {
    code: 6,
    help: "the Kubernetes API server or an image registry cannot be reached (or answers wrongly)",
  },
  /** The API asked us to slow down and retries ran out. */
  rateLimited: { code: 7, help: "rate limited" },
  /** A bug or an unexpected failure. */
  internal: {
    code: 8,
    help: "internal error (also: the agent Job failed, an image could not be pulled)",
  },
  /**
   * The API answered, but some targeted nodes gave no result: their daemon pod is not Ready or
   * could not be reached (`aicr daemonset fetch`; the other nodes' snapshots are written).
   */
  incomplete: {
    code: 9,
    help:
      "incomplete: some nodes gave no snapshot (daemon pod not Ready or unreachable), or aicr diff --fleet could not read some (listed as unreadable, the rest compared)",
  },
  /**
   * The snapshot read is not what the run's agent says it wrote (replaced or forged between the
   * agent's write and the CLI's read, or from another node), or the agent said nothing.
   */
  untrusted: {
    code: 10,
    help: "untrusted: the snapshot read is not the one this run's agent reported writing",
  },
  /**
   * A snapshot or baseline source given as an `http(s)://` URL could not be fetched: the name did
   * not resolve, the connection was refused or cut, TLS failed, no answer in time, or the server
   * answered an error status (404 is {@link EXIT_CODE_TABLE.notFound}). Never the API server's.
   */
  urlSource: {
    code: 11,
    help:
      "a snapshot or baseline URL cannot be fetched (DNS, connection, TLS, timeout, HTTP status)",
  },
  /** Interrupted by SIGINT or SIGTERM (after cleanup ran). */
  interrupted: { code: 130, help: "interrupted (cleanup ran)" },
} as const;

/** Name of one exit code in {@link EXIT_CODE_TABLE}. */
export type ExitCodeName = keyof typeof EXIT_CODE_TABLE;

/** Exit codes by name, from {@link EXIT_CODE_TABLE}. */
export const EXIT_CODES: { readonly [K in ExitCodeName]: (typeof EXIT_CODE_TABLE)[K]["code"] } =
  Object.fromEntries(
    Object.entries(EXIT_CODE_TABLE).map(([name, row]) => [name, row.code]),
  ) as { readonly [K in ExitCodeName]: (typeof EXIT_CODE_TABLE)[K]["code"] };

/** One line per exit code, for `--help` and the README, derived from {@link EXIT_CODE_TABLE}. */
export const EXIT_CODE_HELP: readonly string[] = exitCodeHelp();

function exitCodeHelp(): string[] {
  const byCode = new Map<number, string[]>();
  for (const row of Object.values(EXIT_CODE_TABLE)) {
    byCode.set(row.code, [...(byCode.get(row.code) ?? []), row.help]);
  }
  return [...byCode.entries()].sort(([a], [b]) => a - b).map(([code, helps]) =>
    `${code}  ${helps.join(", or ")}`
  );
}

/**
 * Names a typed option in a message. Below `cli/` no message spells a flag: it names the option
 * through a namer, and the CLI renders it with its own (`image` becomes `--image`, see
 * `cli/_flags.ts`); everyone else sees the option's name.
 */
export type OptionNamer = (option: string) => string;

/** Message text that names typed options through an {@link OptionNamer}. */
export type OptionText = (name: OptionNamer) => string;

/** A message, or a line of details: plain text, or text that names options. */
export type ErrorText = string | OptionText;

/**
 * The namer outside the CLI: an option is called by its own name.
 *
 * @param option the option's name
 * @returns the same name
 */
export function optionName(option: string): string {
  return option;
}

/** Options for {@link ToolError}. */
export interface ToolErrorOptions {
  /** The error this one wraps. */
  cause?: unknown;
  /** Extra lines shown under the message (hints, lists). */
  details?: readonly ErrorText[];
}

/** Base of every error aicr reports to a user. */
export class ToolError extends Error {
  /** Which row of {@link EXIT_CODES} this error exits with. */
  readonly code: ExitCodeName;
  /** HTTP status the daemon answers with. */
  readonly httpStatus: number;
  readonly #message: ErrorText;
  readonly #details: readonly ErrorText[];
  #renderedDetails: readonly string[];

  /**
   * @param message the message, std grammar: action, colon, state
   * @param code the exit code name
   * @param httpStatus the HTTP status for the daemon
   * @param options cause and details
   */
  constructor(
    message: ErrorText,
    code: ExitCodeName = "internal",
    httpStatus = 500,
    options: ToolErrorOptions = {},
  ) {
    super(
      renderText(message, optionName),
      options.cause === undefined ? undefined : { cause: options.cause },
    );
    this.name = "ToolError";
    this.code = code;
    this.httpStatus = httpStatus;
    this.#message = message;
    this.#details = options.details ?? [];
    this.#renderedDetails = this.#details.map((line) => renderText(line, optionName));
  }

  /** Extra lines shown under the message. */
  get details(): readonly string[] {
    return this.#renderedDetails;
  }

  /**
   * Renders the message and details again, naming options with `name`: how the CLI puts its
   * flag names into an error the library raised.
   *
   * @param name the namer, e.g. option to flag
   */
  nameOptions(name: OptionNamer): void {
    this.message = renderText(this.#message, name);
    this.#renderedDetails = this.#details.map((line) => renderText(line, name));
  }

  /** The numeric exit code. */
  get exitCode(): number {
    return EXIT_CODES[this.code];
  }
}

function renderText(text: ErrorText, name: OptionNamer): string {
  return typeof text === "string" ? text : text(name);
}

/**
 * Names options with `name` in an error and in the errors it wraps (`cause`, a few deep): the
 * messages a library raised, rendered for whoever shows them.
 *
 * @param error anything thrown
 * @param name the namer, e.g. option to flag
 * @returns the same value
 */
export function nameOptionsIn<T>(error: T, name: OptionNamer): T {
  let current: unknown = error;
  for (let depth = 0; current instanceof Error && depth < 5; depth++) {
    if (current instanceof ToolError) current.nameOptions(name);
    current = current.cause;
  }
  return error;
}

/** Invalid flags, files or documents (exit 2, HTTP 400). */
export class UsageError extends ToolError {
  /** @param message what is wrong and how to fix it */
  constructor(message: ErrorText, options: ToolErrorOptions = {}) {
    super(message, "usage", 400, options);
    this.name = "UsageError";
  }
}

/** Something asked for does not exist (exit 3, HTTP 404). */
export class NotFoundError extends ToolError {
  /** @param message what was not found */
  constructor(message: ErrorText, options: ToolErrorOptions = {}) {
    super(message, "notFound", 404, options);
    this.name = "NotFoundError";
  }
}

/** A permission is missing (exit 4, HTTP 403). */
export class PermissionError extends ToolError {
  /** @param message what is missing */
  constructor(message: ErrorText, options: ToolErrorOptions = {}) {
    super(message, "unauthorized", 403, options);
    this.name = "PermissionError";
  }
}

/** A deadline passed (exit 5, HTTP 504). */
export class TimeoutError extends ToolError {
  /** @param message what timed out */
  constructor(message: ErrorText, options: ToolErrorOptions = {}) {
    super(message, "timeout", 504, options);
    this.name = "TimeoutError";
  }
}

/** A service could not be reached (exit 6, HTTP 503). */
export class UnavailableError extends ToolError {
  /** @param message what could not be reached */
  constructor(message: ErrorText, options: ToolErrorOptions = {}) {
    super(message, "unavailable", 503, options);
    this.name = "UnavailableError";
  }
}

/** An object or directory already exists, or a precondition failed (exit 2, HTTP 409). */
export class ConflictError extends ToolError {
  /** @param message what conflicts */
  constructor(message: ErrorText, options: ToolErrorOptions = {}) {
    super(message, "conflict", 409, options);
    this.name = "ConflictError";
  }
}

/**
 * Some targeted nodes gave no result although the API answered: not Ready or unreachable
 * daemons; or some members of a fleet could not be read for `aicr diff --fleet` (exit 9, HTTP 502).
 */
export class IncompleteError extends ToolError {
  /** @param message which nodes and why */
  constructor(message: ErrorText, options: ToolErrorOptions = {}) {
    super(message, "incomplete", 502, options);
    this.name = "IncompleteError";
  }
}

/**
 * What was read cannot be trusted as the run's own: the agent's report of what it wrote does not
 * match it, names another node, or is missing (exit 10, HTTP 502).
 */
export class UntrustedSnapshotError extends ToolError {
  /** @param message what does not match, naming both sides */
  constructor(message: ErrorText, options: ToolErrorOptions = {}) {
    super(message, "untrusted", 502, options);
    this.name = "UntrustedSnapshotError";
  }
}

/**
 * A snapshot or baseline URL could not be fetched (exit 11, HTTP 502): the message names the URL
 * (credentials and query values redacted) and what failed (DNS, refused, TLS, timeout, status).
 */
export class UrlSourceError extends ToolError {
  /** @param message the URL and what failed */
  constructor(message: ErrorText, options: ToolErrorOptions = {}) {
    super(message, "urlSource", 502, options);
    this.name = "UrlSourceError";
  }
}

/** The run was interrupted by a signal (exit 130). */
export class InterruptedError extends ToolError {
  /** @param message which signal */
  constructor(message: ErrorText, options: ToolErrorOptions = {}) {
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

/** One line of an error as shown: its message, a detail line, or a cause; redacted. */
interface ShownLine {
  kind: "message" | "detail" | "cause";
  text: string;
}

function shownError(error: unknown): ShownLine[] {
  const lines: ShownLine[] = [];
  let current: unknown = error;
  for (let depth = 0; current !== undefined && depth < 5; depth++) {
    const message = redactSecrets(current instanceof Error ? current.message : String(current));
    // A cause whose text the lines above already carry (a wrapper that quotes it) is said once.
    const said = depth > 0 && lines.some((line) => line.text.includes(message.trim()));
    if (!said) lines.push({ kind: depth === 0 ? "message" : "cause", text: message });
    if (current instanceof ToolError) {
      for (const detail of current.details) {
        lines.push({ kind: "detail", text: redactSecrets(detail) });
      }
    }
    current = current instanceof Error ? current.cause : undefined;
  }
  return lines;
}

/**
 * Renders an error for a terminal: the message, its details, and the chain of causes, with
 * every URL's credentials and query values redacted.
 *
 * @param error anything thrown
 * @returns one or more lines, without a trailing newline
 */
export function formatError(error: unknown): string {
  return shownError(error).map(({ kind, text }) =>
    kind === "message" ? `error: ${text}` : kind === "cause" ? `  caused by: ${text}` : text
  ).join("\n");
}

/**
 * Renders an error as one JSON log line (`--log-json`): `level` error, `msg`, the detail lines
 * and causes as arrays, and the exit code, redacted as {@link formatError}.
 *
 * @param error anything thrown
 * @param now the line's time
 * @returns one JSON line, without a trailing newline
 */
export function formatErrorJson(error: unknown, now: Date): string {
  const lines = shownError(error);
  const of = (kind: ShownLine["kind"]) =>
    lines.filter((line) => line.kind === kind).map((line) => line.text.trim());
  const [details, causes] = [of("detail"), of("cause")];
  return JSON.stringify({
    time: now.toISOString(),
    level: "error",
    msg: of("message")[0] ?? "",
    ...(details.length > 0 ? { details } : {}),
    ...(causes.length > 0 ? { causes } : {}),
    exitCode: exitCodeOf(error),
  });
}
