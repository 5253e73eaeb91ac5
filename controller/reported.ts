/**
 * Running a verb with its reports written whatever its outcome (`--report`, `--junit`): the
 * documents `report.ts` builds go to their files or stdout before the verb's error is thrown, so
 * that error stays the last line on stderr and a failed verb's report says why.
 *
 * @module
 */
import { stat } from "node:fs/promises";
import { dirname, resolve } from "node:path";
import { nameOptionsIn, UsageError } from "../errors.ts";
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

/** A report's file checked before anything runs: not a directory, in a folder that exists. */
async function checkReportTarget(
  cwd: string,
  option: "report" | "junit",
  value: string,
): Promise<string> {
  if (value === "-") return value;
  if (value.trim() === "") {
    throw new UsageError((o) =>
      `Cannot use '${o(option)}' as it must be a file path or '-': current value is ''`
    );
  }
  const path = resolve(cwd, value);
  const [self, parent] = await Promise.all([
    stat(path).catch(() => undefined),
    stat(dirname(path)).catch(() => undefined),
  ]);
  if (self?.isDirectory()) {
    throw new UsageError(
      `Cannot write the report to '${value}' as it is a directory: name a file, or '-' for stdout`,
    );
  }
  if (!parent?.isDirectory()) {
    throw new UsageError(
      `Cannot write the report to '${value}' as its directory does not exist: current value is '${
        dirname(path)
      }'`,
    );
  }
  return path;
}

/**
 * Checks where the reports go before the verb contacts anything: at most one thing on stdout,
 * each file writable in an existing folder.
 *
 * @param cwd the working directory
 * @param asked the JSON report's and the JUnit report's file, or `-`
 * @param options what else already writes to stdout (as the user wrote it, e.g. `-o -`)
 * @returns the absolute paths, or `-`
 * @throws {UsageError} naming the option and the value
 */
export async function checkReportTargets(
  cwd: string,
  asked: { report?: string; junit?: string },
  options: { stdoutTaken?: string } = {},
): Promise<ReportTargets> {
  const onStdout = (o: OptionNamer) => [
    ...(options.stdoutTaken ? [options.stdoutTaken] : []),
    ...(asked.report === "-" ? [`${o("report")} -`] : []),
    ...(asked.junit === "-" ? [`${o("junit")} -`] : []),
  ];
  if (onStdout((o) => o).length > 1) {
    throw new UsageError((o) =>
      `Cannot write ${onStdout(o).join(" and ")} to stdout together: send all but one to a file`
    );
  }
  return {
    ...(asked.report !== undefined
      ? { json: await checkReportTarget(cwd, "report", asked.report) }
      : {}),
    ...(asked.junit !== undefined
      ? { junit: await checkReportTarget(cwd, "junit", asked.junit) }
      : {}),
  };
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
