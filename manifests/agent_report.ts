/**
 * The agent's report of what it wrote, through a channel only the kubelet writes: its container's
 * termination message. The agent Job's container names the file (`terminationMessagePath`, policy
 * `File`); the agent writes one small JSON object there once its snapshot is in the ConfigMap:
 *
 * ```json
 * {"digest":"sha256:…","bytes":123456,"version":"0.1.0","commit":"3c5f0d2…"}
 * ```
 *
 * The kubelet reads the file after the container exits (its last 4096 bytes) into the pod's
 * `status.containerStatuses[].state.terminated.message`, which no ConfigMap writer can change. The
 * CLI compares the digest with what it read from the ConfigMap, so a snapshot another writer put
 * there between the agent's write and the CLI's read is refused; `version` and `commit` say which
 * build the agent is.
 *
 * The same report also goes, once, to the container's log, as the last line the agent writes on
 * its stderr: `aicr-agent-report <nonce> <json>` ({@link formatAgentReportLine}). The kubelet only
 * reads the termination message after it has noticed the container's exit and reports it with the
 * pod's status (about 2 s later on a real kubelet); the log line reaches the CLI as soon as it is
 * written. The log is as much the container's own as its termination message (no ConfigMap writer
 * can add to it); the nonce, a random value the CLI puts in the Job's environment
 * ({@link AGENT_REPORT_NONCE_ENV}) for this run only, keeps a line that merely looks like a report
 * (node text the agent logged, say) from being taken for one.
 *
 * @module
 */
import { createHash } from "node:crypto";
import { ToolError } from "../errors.ts";

/** Where the agent's container writes its report (the kubelet's default path). */
export const AGENT_REPORT_PATH = "/dev/termination-log";

/** The environment variable that tells the agent where to write its report. */
export const AGENT_REPORT_ENV = "AICR_REPORT_PATH";

/** The environment variable that carries the run's nonce for the report's log line. */
export const AGENT_REPORT_NONCE_ENV = "AICR_REPORT_NONCE";

/** What starts the report's log line, before the nonce. */
const REPORT_LINE_PREFIX = "aicr-agent-report ";

/** The most a termination message holds (the kubelet keeps the last 4096 bytes of the file). */
export const AGENT_REPORT_MAX_BYTES = 4096;

/** What the agent says it wrote, and which build it is. */
export interface AgentReport {
  /** `sha256:<64 hex>` of the UTF-8 bytes of the snapshot text it wrote into the ConfigMap. */
  digest: string;
  /** How many bytes that text is. */
  bytes: number;
  /** The agent's version (`aicr version`). */
  version: string;
  /** The agent's commit (`unknown` for a source run). */
  commit: string;
}

const DIGEST_REGEXP = /^sha256:[0-9a-f]{64}$/;
/** Version and commit: short printable words, nothing a message could be forged with. */
const WORD_REGEXP = /^[0-9A-Za-z][0-9A-Za-z.+_-]{0,63}$/;

/**
 * The digest of a text as the report carries it: SHA-256 of its UTF-8 bytes.
 *
 * @param text the snapshot text, exactly as stored in the ConfigMap
 * @returns `sha256:<64 hex>` and the byte count
 */
export function digestText(text: string): { digest: string; bytes: number } {
  const bytes = new TextEncoder().encode(text);
  return {
    digest: `sha256:${createHash("sha256").update(bytes).digest("hex")}`,
    bytes: bytes.length,
  };
}

/**
 * The report as the agent writes it: one line of JSON, well under {@link AGENT_REPORT_MAX_BYTES}.
 *
 * @param report what was written and by which build
 * @returns the JSON text
 */
export function formatAgentReport(report: AgentReport): string {
  return JSON.stringify({
    digest: report.digest,
    bytes: report.bytes,
    version: report.version,
    commit: report.commit,
  });
}

/**
 * The report as the agent writes it to its log: the prefix, the run's nonce, the JSON.
 *
 * @param nonce the run's nonce ({@link AGENT_REPORT_NONCE_ENV})
 * @param report what was written and by which build
 * @returns the line, without its newline
 */
export function formatAgentReportLine(nonce: string, report: AgentReport): string {
  return `${REPORT_LINE_PREFIX}${nonce} ${formatAgentReport(report)}`;
}

/**
 * The report's JSON in one line of the agent's log, when the line is the report of the run with
 * this nonce; parsed and checked later as the termination message is ({@link parseAgentReport}).
 *
 * @param line one log line
 * @param nonce the run's nonce
 * @returns the JSON text, or undefined for any other line
 */
export function agentReportOfLine(line: string, nonce: string): string | undefined {
  const head = `${REPORT_LINE_PREFIX}${nonce} `;
  if (nonce === "" || !line.startsWith(head)) return undefined;
  const json = line.slice(head.length).trimEnd();
  return json.startsWith("{") ? json : undefined;
}

/** The agent's report cannot be read: absent (another program ran) or malformed. */
export class AgentReportError extends ToolError {
  /** No report at all: the program that ran wrote none (another program, or an older build). */
  readonly absent: boolean;

  /**
   * @param message what is wrong with it
   * @param absent whether there was no report at all
   */
  constructor(message: string, absent: boolean) {
    super(message, "untrusted", 502);
    this.name = "AgentReportError";
    this.absent = absent;
  }
}

/**
 * Reads an agent's report from its container's termination message: bounded, strict JSON with
 * exactly the fields of {@link AgentReport}, each checked. Nothing else in the message is trusted.
 *
 * @param message `state.terminated.message` of the agent's container (undefined when absent)
 * @returns the report
 * @throws {AgentReportError} when it is absent (`absent` set: the program that ran wrote none),
 *   too large, not JSON, or a field is missing or malformed
 */
export function parseAgentReport(message: string | undefined): AgentReport {
  if (message === undefined || message.trim() === "") {
    throw new AgentReportError("its container's termination message is empty", true);
  }
  if (new TextEncoder().encode(message).length > AGENT_REPORT_MAX_BYTES) {
    throw new AgentReportError(
      `its container's termination message is over ${AGENT_REPORT_MAX_BYTES} bytes`,
      false,
    );
  }
  let value: unknown;
  try {
    value = JSON.parse(message);
  } catch {
    throw new AgentReportError("its container's termination message is not JSON", false);
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw new AgentReportError(
      "its container's termination message is not a JSON object",
      false,
    );
  }
  const fields = value as Record<string, unknown>;
  const known = ["digest", "bytes", "version", "commit"];
  const unknown = Object.keys(fields).filter((k) => !known.includes(k));
  if (unknown.length > 0) {
    throw new AgentReportError(
      `its report has unknown fields: ${
        unknown.slice(0, 5).map((k) => JSON.stringify(k)).join(", ")
      }`,
      false,
    );
  }
  const { digest, bytes, version, commit } = fields;
  if (typeof digest !== "string" || !DIGEST_REGEXP.test(digest)) {
    throw new AgentReportError("its report's 'digest' is not sha256:<64 hex>", false);
  }
  if (typeof bytes !== "number" || !Number.isSafeInteger(bytes) || bytes < 0) {
    throw new AgentReportError("its report's 'bytes' is not a whole number", false);
  }
  if (typeof version !== "string" || !WORD_REGEXP.test(version)) {
    throw new AgentReportError("its report's 'version' is missing or malformed", false);
  }
  if (typeof commit !== "string" || !WORD_REGEXP.test(commit)) {
    throw new AgentReportError("its report's 'commit' is missing or malformed", false);
  }
  return { digest, bytes, version, commit };
}
