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
  /**
   * Re-emits a line another aicr process logged (the agent pod's log, streamed by the CLI) in
   * this logger's format and level filter: a JSON line keeps its fields, a text line is parsed
   * for its level; either way it carries `source` as its prefix (`[agent]`) or `component`.
   */
  relay(line: string, source: string): void;
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
  /**
   * Takes the values of a line's node and host fields (`node=`, `nodes=`, `host=`) before the
   * line is written: `--redact` hides them in this line and every later one (a
   * {@link ScreenedWriter}'s `learn`).
   */
  learnNames?: (names: readonly string[]) => void;
}

/** What `--redact` does to a text: a node's or host's name, an address, a registry host out. */
export interface TextScreen {
  /** The text with each name it learnt, each address and each registry host replaced. */
  text(value: string): string;
  /** Takes names to replace in this text and every later one. */
  learn(names: Iterable<string>): void;
}

/** A writer that passes every text through a screen once one is set (`--redact`). */
export interface ScreenedWriter extends TextWriter {
  /** Sets the screen: every later write passes through it. */
  screen(screen: TextScreen): void;
  /** Hands names to the screen, once there is one. */
  learn(names: readonly string[]): void;
}

/**
 * Wraps a writer (the process's stderr): text passes as it is until {@link ScreenedWriter.screen}
 * sets a screen, then through it. A verb with `--redact` sets it as soon as it has read its key,
 * so its log lines, progress, tables and error messages name no node, host, address or registry.
 *
 * @param writer where the text goes
 * @returns the screened writer
 */
export function screenedWriter(writer: TextWriter): ScreenedWriter {
  let current: TextScreen | undefined;
  return {
    write: (text) => writer.write(current ? current.text(text) : text),
    screen: (screen) => void (current = screen),
    learn: (names) => current?.learn(names),
  };
}

/** Log fields whose values are node or host names (`nodes=a,b (arm64)` is a list). */
const NAME_FIELD_REGEXP = /^(node|nodes|source-node|host|hostname|servername)$/i;

function fieldNames(fields: LogFields): string[] {
  const names: string[] = [];
  for (const [key, value] of Object.entries(fields)) {
    if (typeof value !== "string" || !NAME_FIELD_REGEXP.test(key)) continue;
    for (const item of value.split(",")) names.push(item.replace(/\(.*\)/, "").trim());
  }
  return names;
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

/**
 * The level the root's flags ask for: `--debug` shows everything, `--quiet` errors only.
 *
 * @param flags `debug` and `quiet`
 * @returns the lowest level written
 */
export function logLevelFor(flags: { debug: boolean; quiet?: boolean }): LogLevel {
  return flags.debug ? "debug" : flags.quiet ? "error" : "info";
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
  const { nameOption = optionName, learnNames } = options;
  const min = RANK[level];
  function emit(lineLevel: LogLevel, text: LogText, given?: LogFields): void {
    if (RANK[lineLevel] < min) return;
    if (learnNames && given) learnNames(fieldNames(given));
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
  function relay(line: string, source: string): void {
    const relayed = parseLogLine(line, source);
    if (!relayed || RANK[relayed.level] < min) return;
    // The agent's own node= fields count as the CLI's (--redact).
    if (learnNames) learnNames(fieldNames(relayed.record as LogFields));
    const text = redactSecrets(relayed.msg);
    if (json) {
      const { time = now().toISOString(), ...rest } = relayed.record;
      writer.write(JSON.stringify({ time, level: relayed.level, msg: text, ...rest }) + "\n");
      return;
    }
    const fields: LogFields = {};
    for (const [key, value] of Object.entries(relayed.record)) {
      if (key === "component" || key === "time") continue;
      fields[key] = typeof value === "string"
        ? redactSecrets(value)
        : typeof value === "number" || typeof value === "boolean"
        ? value
        : JSON.stringify(value);
    }
    const component = String(relayed.record.component ?? source);
    writer.write(`[${component}] ${formatLogLine(relayed.level, text, fields)}\n`);
  }
  return {
    debug: (message, fields) => emit("debug", message, fields),
    info: (message, fields) => emit("info", message, fields),
    warn: (message, fields) => emit("warn", message, fields),
    error: (message, fields) => emit("error", message, fields),
    relay,
  };
}

/** One line another aicr process logged, parsed: its level, message and other fields. */
export interface ParsedLogLine {
  /** The line's level (`info` for a text line without a level word). */
  level: LogLevel;
  /** The message. */
  msg: string;
  /** The line's other fields (`component` always set, `time` when it had one). */
  record: Record<string, unknown>;
}

const TEXT_LINE_REGEXP = /^(?:\[([^\]\s]+)\] )?(?:(DEBUG|WARN|ERROR) )?(.*)$/s;

/**
 * Parses a line an aicr logger wrote, JSON or text (`[prefix] LEVEL message k=v`; the text's
 * fields stay in the message). Any other text (a runtime's own warning) is an info line.
 *
 * @param line one line, without its newline
 * @param source the component when the line names none, e.g. `agent`
 * @returns the parsed line, or undefined for an empty line
 */
export function parseLogLine(line: string, source: string): ParsedLogLine | undefined {
  const trimmed = line.replace(/\r$/, "");
  if (trimmed.trim() === "") return undefined;
  if (trimmed.startsWith("{")) {
    try {
      const parsed: unknown = JSON.parse(trimmed);
      if (parsed && typeof parsed === "object" && !Array.isArray(parsed)) {
        const { level, msg, ...rest } = parsed as Record<string, unknown>;
        if (typeof msg === "string") {
          return {
            level: isLevel(level) ? level : "info",
            msg,
            record: { ...rest, component: rest.component ?? source },
          };
        }
      }
    } catch {
      // Not JSON after all: a text line that starts with a brace.
    }
  }
  const [, prefix, word, message = ""] = TEXT_LINE_REGEXP.exec(trimmed) ?? [];
  return {
    level: word ? (word.toLowerCase() as LogLevel) : "info",
    msg: message,
    record: { component: prefix ?? source },
  };
}

function isLevel(value: unknown): value is LogLevel {
  return typeof value === "string" && value in RANK;
}

/**
 * A writer whose lines become info lines of `log`: text a library writes to stderr (a per-node
 * table) follows the logger's format and level, JSON with `--log-json`, nothing with `--quiet`.
 * A line is emitted once its newline is written.
 *
 * @param log the logger
 * @returns the writer
 */
export function logLineWriter(log: Logger): TextWriter {
  let pending = "";
  return {
    write(text) {
      const lines = (pending + text).split("\n");
      pending = lines.pop() ?? "";
      for (const line of lines) log.info(line);
    },
  };
}

/** A logger that drops everything (tests, library defaults). */
export const NOOP_LOGGER: Logger = {
  debug() {},
  info() {},
  warn() {},
  error() {},
  relay() {},
};
