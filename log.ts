/**
 * A levelled, structured logger that writes `LEVEL message key=value ...` lines to an
 * injected writer (stderr in the CLI), keeping stdout clean for snapshots.
 *
 * @module
 */
import { optionName, type OptionNamer, type OptionText } from "./errors.ts";
import { redactSecrets } from "./redact.ts";

/** Log levels, most verbose first. */
export type LogLevel = "debug" | "info" | "warn" | "error";

/** One field value; text that names options is rendered by the logger's namer. */
export type LogValue = string | number | boolean | bigint | OptionText;

/** Structured fields of one log line. */
export type LogFields = Record<string, LogValue | undefined>;

/** A message: plain, or naming options (the CLI's logger names their flags). */
export type LogText = string | OptionText;

/** A logger. */
export interface Logger {
  /** Verbose detail, shown with `--debug`. */
  debug(message: LogText, fields?: LogFields): void;
  /** Progress an operator wants to see. */
  info(message: LogText, fields?: LogFields): void;
  /** Something is off but the run goes on. */
  warn(message: LogText, fields?: LogFields): void;
  /** Something failed. */
  error(message: LogText, fields?: LogFields): void;
}

/** Where log text goes. */
export interface TextWriter {
  /** Writes text as is (callers add newlines). */
  write(text: string): void;
}

/** Options for {@link createLogger}. */
export interface LoggerOptions {
  /** Lowest level written. @default "info" */
  level?: LogLevel;
  /** Prefix for every line, e.g. `[agent]`. */
  prefix?: string;
  /** Write JSON lines instead of text. @default false */
  json?: boolean;
  /** Clock for JSON lines. */
  now?: () => Date;
  /** How messages name options (the CLI gives flags). @default the option's own name */
  nameOption?: OptionNamer;
}

/**
 * The text of a message or field value, naming options with `name`.
 *
 * @param text plain text, or text naming options
 * @param name the namer @default the option's own name
 * @returns the text
 */
export function renderLogText(text: LogText, name: OptionNamer = optionName): string {
  return typeof text === "function" ? text(name) : text;
}

const RANK: Record<LogLevel, number> = { debug: 0, info: 1, warn: 2, error: 3 };
const BARE_VALUE_REGEXP = /^[A-Za-z0-9_.:/@+,=-]*$/;

/**
 * Formats one field value: bare when safe, double-quoted otherwise.
 *
 * @param value the value
 * @returns the text after `key=`
 */
export function formatFieldValue(value: LogValue): string {
  const text = typeof value === "function" ? renderLogText(value) : String(value);
  return text !== "" && BARE_VALUE_REGEXP.test(text) ? text : JSON.stringify(text);
}

/**
 * Formats a text log line without its trailing newline.
 *
 * @param level the level (info lines carry no level word)
 * @param message the message
 * @param fields the fields
 * @returns `WARN message k=v`, or `message k=v` for info
 */
export function formatLogLine(level: LogLevel, message: LogText, fields: LogFields = {}): string {
  const parts: string[] = [];
  if (level !== "info") parts.push(level.toUpperCase());
  parts.push(renderLogText(message));
  for (const [key, value] of Object.entries(fields)) {
    if (value !== undefined) parts.push(`${key}=${formatFieldValue(value)}`);
  }
  return parts.join(" ");
}

/**
 * Creates a logger writing to `writer`.
 *
 * @param writer where lines go
 * @param options level, prefix and format
 * @returns the logger
 */
export function createLogger(writer: TextWriter, options: LoggerOptions = {}): Logger {
  const { level = "info", prefix, json = false, now = () => new Date() } = options;
  const { nameOption = optionName } = options;
  const min = RANK[level];
  function emit(lineLevel: LogLevel, text: LogText, given?: LogFields): void {
    if (RANK[lineLevel] < min) return;
    // No line carries a URL's credentials or query values (redact.ts).
    const message = redactSecrets(renderLogText(text, nameOption));
    const fields = given && Object.fromEntries(
      Object.entries(given).map(([key, value]) => {
        const shown = typeof value === "function" ? renderLogText(value, nameOption) : value;
        return [key, typeof shown === "string" ? redactSecrets(shown) : shown];
      }),
    );
    if (json) {
      const record: Record<string, unknown> = {
        time: now().toISOString(),
        level: lineLevel,
        msg: message,
      };
      for (const [key, value] of Object.entries(fields ?? {})) {
        if (value !== undefined) record[key] = typeof value === "bigint" ? value.toString() : value;
      }
      if (prefix) record.component = prefix;
      writer.write(JSON.stringify(record) + "\n");
      return;
    }
    const line = formatLogLine(lineLevel, message, fields);
    writer.write((prefix ? `[${prefix}] ` : "") + line + "\n");
  }
  return {
    debug: (message, fields) => emit("debug", message, fields),
    info: (message, fields) => emit("info", message, fields),
    warn: (message, fields) => emit("warn", message, fields),
    error: (message, fields) => emit("error", message, fields),
  };
}

/** A logger that drops everything (tests, library defaults). */
export const NOOP_LOGGER: Logger = {
  debug() {},
  info() {},
  warn() {},
  error() {},
};
