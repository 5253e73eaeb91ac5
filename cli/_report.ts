/**
 * `--report FILE` (JSON, `-` for stdout) and `--junit FILE` (JUnit XML): the machine-readable
 * results of `daemonset fetch|install|uninstall` and `cleanup`. The documents are built in
 * `controller/report.ts`; this module declares the flags, checks the targets before anything
 * acts, and writes them whatever the verb's outcome (a failed verb's report says why), before its
 * error line, which stays the last line on stderr.
 *
 * @module
 */
import { stat } from "node:fs/promises";
import { dirname, resolve } from "node:path";
import type { Command } from "commander";
import { buildReport, formatReportJson, formatReportJunit } from "../controller/mod.ts";
import type { ReportContent, ReportKind } from "../controller/mod.ts";
import { UsageError } from "../errors.ts";
import { writeFileAtomic } from "../io.ts";
import type { CliDeps } from "./context.ts";
import { withFlagNames } from "./_flags.ts";

/** Where a verb's reports go (checked). */
export interface ReportTargets {
  /** The JSON report: a path, or `-` for stdout. */
  json?: string;
  /** The JUnit XML report: a path, or `-` for stdout. */
  junit?: string;
}

/**
 * Declares `--report` (and `--junit` where the verb has nodes to test).
 *
 * @param command the verb
 * @param options whether the verb offers JUnit
 * @returns the same command
 */
export function addReportOptions(command: Command, options: { junit?: boolean } = {}): Command {
  command.option(
    "--report <file|->",
    "write a JSON report (one entry per node or object, with its status) to a file, or - for stdout",
  );
  if (options.junit) {
    command.option(
      "--junit <file|->",
      "write a JUnit XML report (one test case per node) to a file, or - for stdout",
    );
  }
  return command;
}

async function checkTarget(deps: CliDeps, flag: string, value: string): Promise<string> {
  if (value === "-") return value;
  if (value.trim() === "") {
    throw new UsageError(
      `Cannot use '${flag}' as it must be a file path or '-': current value is ''`,
    );
  }
  const path = resolve(deps.cwd, value);
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
 * Checks the report flags before the verb contacts the cluster: a path must be a file in an
 * existing directory; at most one document may go to stdout, and none when the verb's own output
 * goes there.
 *
 * @param deps CLI dependencies (working directory)
 * @param flags `--report`, `--junit`
 * @param options whether the verb's own output goes to stdout
 * @returns the checked targets (paths resolved)
 * @throws {UsageError} naming the flag and the fix
 */
export async function reportTargets(
  deps: CliDeps,
  flags: { report?: string; junit?: string },
  options: { stdoutTaken?: string } = {},
): Promise<ReportTargets> {
  const onStdout = [
    ...(options.stdoutTaken ? [options.stdoutTaken] : []),
    ...(flags.report === "-" ? ["--report -"] : []),
    ...(flags.junit === "-" ? ["--junit -"] : []),
  ];
  if (onStdout.length > 1) {
    throw new UsageError(
      `Cannot write ${onStdout.join(" and ")} to stdout together: send all but one to a file`,
    );
  }
  return {
    ...(flags.report !== undefined
      ? { json: await checkTarget(deps, "--report", flags.report) }
      : {}),
    ...(flags.junit !== undefined
      ? { junit: await checkTarget(deps, "--junit", flags.junit) }
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

/**
 * Runs a verb and writes its reports whatever the outcome: the body returns the report content
 * and the error the verb ends with (if any); a thrown error gives a report with no entries.
 *
 * @param deps CLI dependencies (clock, stdout)
 * @param targets where the reports go (nothing is written when empty)
 * @param verb kind, namespace, name
 * @param body the verb
 * @returns when the verb succeeded
 * @throws whatever the verb ends with, after the reports are written
 */
export async function runReported(
  deps: CliDeps,
  targets: ReportTargets,
  verb: ReportedVerb,
  body: () => Promise<{ content: ReportContent; failure?: unknown }>,
): Promise<void> {
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
  // The report names flags as the error line does.
  withFlagNames(failure);
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

async function writeTo(deps: CliDeps, target: string, text: string): Promise<void> {
  if (target === "-") deps.stdout.write(text);
  else await writeFileAtomic(target, text, 0o644, { what: "the report", signal: deps.signal });
}
