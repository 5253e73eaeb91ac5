/**
 * Helpers shared by the collectors: turning errors into source statuses and
 * building degraded subtypes.
 *
 * @module
 */
import { NotFoundError, PermissionError, TimeoutError, ToolError } from "../errors.ts";
import { sourceContext } from "../snapshot/mod.ts";
import type { ReadingMap, SourceStatus, Subtype } from "../snapshot/mod.ts";

/**
 * Classifies an error as a source status.
 *
 * @param error anything thrown by a reader
 * @returns `absent` (not found), `denied` (permission), `timeout`, or `failed`
 */
export function statusOf(error: unknown): SourceStatus {
  if (error instanceof NotFoundError) return "absent";
  if (error instanceof PermissionError) return "denied";
  if (error instanceof TimeoutError) return "timeout";
  // Other ToolErrors (e.g. kube/'s KubeApiError for a 403) carry their class in `code`.
  if (error instanceof ToolError) {
    if (error.code === "notFound") return "absent";
    if (error.code === "unauthorized") return "denied";
    if (error.code === "timeout") return "timeout";
  }
  if (error instanceof Error && error.name === "AbortError") return "timeout";
  return "failed";
}

/**
 * A one-line message for an error.
 *
 * @param error anything thrown
 * @returns its message
 */
export function messageOf(error: unknown): string {
  if (error instanceof ToolError || error instanceof Error) {
    return error.message.split("\n")[0] ?? "";
  }
  return String(error);
}

/**
 * Builds a subtype with a context.
 *
 * @param name subtype name
 * @param data readings
 * @param status source status
 * @param source where the data came from
 * @param message why the status is not ok
 * @returns the subtype
 */
export function subtype(
  name: string,
  data: ReadingMap,
  status: SourceStatus,
  source: string,
  message?: string,
): Subtype {
  return { subtype: name, data, context: sourceContext(status, source, message) };
}

/**
 * Throws a TimeoutError when a signal has aborted.
 *
 * @param signal the collection signal
 * @param what the collector or step, for the message
 * @throws {TimeoutError} when aborted
 */
export function throwIfAborted(signal: AbortSignal | undefined, what: string): void {
  if (signal?.aborted) throw new TimeoutError(`Cannot collect ${what}: the deadline passed`);
}

/**
 * Decodes bytes as strict UTF-8.
 *
 * @param bytes the bytes
 * @returns the text, or undefined when the bytes are not valid UTF-8
 */
export function decodeUtf8(bytes: Uint8Array): string | undefined {
  try {
    return new TextDecoder("utf-8", { fatal: true, ignoreBOM: true }).decode(bytes);
  } catch {
    return undefined;
  }
}
