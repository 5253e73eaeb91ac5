/**
 * Running a verb with its reports written whatever its outcome (`--report`, `--junit`): the
 * documents `report.ts` builds go to their files or stdout before the verb's error is thrown, so
 * that error stays the last line on stderr and a failed verb's report says why.
 *
 * @module
 */
import { nameOptionsIn } from "../errors.ts";
import type { OptionNamer } from "../errors.ts";
import { writeFileAtomic } from "../io.ts";
import type { TextWriter } from "../log.ts";
import { buildReport, formatReportJson, formatReportJunit } from "./report.ts";
import type { ReportContent, ReportKind } from "./report.ts";

/** Where a verb's reports go (paths checked and resolved by the caller; `-` is stdout). */
export interface ReportTargets {
  /** The JSON report: a path, or `-` for stdout. */
  json?: string;
  /** The JUnit XML report: a path, or `-` for stdout. */
  junit?: string;
}

/** What {@link runReported} needs to know about the verb. */
export interface ReportedVerb {
  /** The report's kind. */
  kind: ReportKind;
  /** The namespace. */
  namespace: string;
  /** The daemon's name. */
  name?: string;
}

/** What writing the reports needs. */
export interface ReportedDeps {
  /** Clock (the report's start and end). */
  now: () => Date;
  /** Standard output, for a report sent to `-`. */
  stdout: TextWriter;
  /** Ends a report write that cannot go on (a pipe no one reads). */
  signal?: AbortSignal;
  /** Names options in the failure as the caller's error line names them. @default their names */
  nameOption?: OptionNamer;
}

/**
 * Runs a verb and writes its reports whatever the outcome: the body returns the report content
 * and the error the verb ends with (if any); a thrown error gives a report with no entries.
 *
 * @param deps clock, stdout and option namer
 * @param run where the reports go (nothing is written when empty) and the verb's kind, namespace
 *   and name
 * @param body the verb
 * @returns when the verb succeeded
 * @throws whatever the verb ends with, after the reports are written
 */
export async function runReported(
  deps: ReportedDeps,
  run: { targets: ReportTargets; verb: ReportedVerb },
  body: () => Promise<{ content: ReportContent; failure?: unknown }>,
): Promise<void> {
  const { targets, verb } = run;
  const startedAt = deps.now();
  let content: ReportContent = { nodes: [], objects: [] };
  let failure: unknown;
  try {
    const outcome = await body();
    content = outcome.content;
    failure = outcome.failure;
  } catch (error) {
    failure = error;
  }
  // The report names options as the error line does.
  if (deps.nameOption) nameOptionsIn(failure, deps.nameOption);
  if (targets.json !== undefined || targets.junit !== undefined) {
    const report = buildReport({
      ...verb,
      startedAt,
      finishedAt: deps.now(),
      content,
      ...(failure !== undefined ? { failure } : {}),
    });
    if (targets.json !== undefined) await writeTo(deps, targets.json, formatReportJson(report));
    if (targets.junit !== undefined) await writeTo(deps, targets.junit, formatReportJunit(report));
  }
  if (failure !== undefined) throw failure;
}

async function writeTo(deps: ReportedDeps, target: string, text: string): Promise<void> {
  if (target === "-") deps.stdout.write(text);
  else {
    await writeFileAtomic(target, text, 0o644, {
      what: "the report",
      ...(deps.signal ? { signal: deps.signal } : {}),
    });
  }
}
