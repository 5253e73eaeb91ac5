/**
 * `--report FILE` (JSON, `-` for stdout) and `--junit FILE` (JUnit XML): the machine-readable
 * results of `daemonset fetch|install|uninstall` and `cleanup`. This module declares the flags
 * and checks the targets before anything acts; `controller/reported.ts` writes the documents
 * (`controller/report.ts`) whatever the verb's outcome.
 *
 * @module
 */
import { stat } from "node:fs/promises";
import { dirname, resolve } from "node:path";
import type { Command } from "commander";
import type { ReportTargets } from "../controller/mod.ts";
import { UsageError } from "../errors.ts";
import type { CliDeps } from "./context.ts";

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
