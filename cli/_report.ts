/**
 * `--report FILE` (JSON, `-` for stdout) and `--junit FILE` (JUnit XML): the machine-readable
 * results of `daemonset fetch|install|uninstall` and `cleanup`. This module declares the flags;
 * `controller/reported.ts` checks the targets before anything acts (`checkReportTargets`) and
 * writes the documents (`controller/report.ts`) whatever the verb's outcome.
 *
 * @module
 */
import type { Command } from "commander";

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
