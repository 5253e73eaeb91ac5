/**
 * The aicr command line: a thin dispatcher over commander. Each verb lives in its own
 * module and exports a factory `xCommand(deps)`; this module maps every error to its
 * exit code in one place.
 *
 * ```ts ignore
 * const code = await runCli(["version"], deps);
 * ```
 *
 * @module
 */
import { Command, CommanderError } from "commander";
import {
  EXIT_CODE_HELP,
  EXIT_CODES,
  exitCodeOf,
  formatError,
  formatErrorJson,
  InterruptedError,
  ToolError,
  UsageError,
} from "../errors.ts";
import { buildInfo } from "../version.ts";
import type { CliDeps } from "./context.ts";
import { VERBS, verbsFor } from "./commands.ts";
import {
  addGlobalOptions,
  logJsonRequested,
  useContextNamespace,
  useLogEnvironment,
  useVerbContext,
} from "./globals.ts";
import { COMPLETE_VERB, completeValuesCommand, completionCommand } from "./completion.ts";
import { examplesHelp } from "./_examples.ts";
import { withFlagNames } from "./_flags.ts";

export type { CliDeps } from "./context.ts";

/**
 * Builds the root command with the verbs a command line needs registered (every verb when no
 * command line is given): each verb's code is loaded only then.
 *
 * @param deps injected streams and factories
 * @param argv the command line it will parse (arguments after the program name)
 * @returns the commander program (not yet parsed)
 */
export async function createProgram(deps: CliDeps, argv?: readonly string[]): Promise<Command> {
  const verbs = argv ? verbsFor(argv) : VERBS;
  const factories = await Promise.all(verbs.map((verb) => verb.load()));
  const writeErr = errorWriter(deps, argv !== undefined && logJsonRequested(argv, deps.env));
  const program = new Command("aicr")
    .description("Capture, serve and compare what every GPU node really runs")
    .version(buildInfo().version, "-v, --version", "print the version (without a leading v)")
    .addHelpText("after", `\nExit codes:\n${EXIT_CODE_HELP.map((l) => `  ${l}`).join("\n")}\n`)
    .showHelpAfterError("(run with --help for usage)")
    .configureOutput({
      writeOut: (text) => deps.stdout.write(text),
      writeErr,
      outputError: (text, write) => write(text),
    })
    .exitOverride();
  addGlobalOptions(program);
  useLogEnvironment(program, deps);
  useContextNamespace(program, deps);
  useVerbContext(program, deps);
  const commands = [
    ...factories.map((factory) => factory(deps)),
    // Small and always there: it builds the full program itself when it runs.
    completionCommand(deps, () => createProgram(deps)),
  ];
  // Only the two writers: spreading deps would read its lazy getters (stdoutIsTerminal makes
  // process.stdout, a stream and its modules, a few ms of every run's start).
  const withErr = { stdout: deps.stdout, writeErr };
  for (const command of commands) {
    applyDefaults(command, withErr, command.name());
    program.addCommand(command);
  }
  // The completion scripts' own verb: hidden, small, always there.
  program.addCommand(applyDefaults(completeValuesCommand(deps), withErr, COMPLETE_VERB), {
    hidden: true,
  });
  return program;
}

/**
 * Where commander writes its errors (and the usage hint after one): stderr as is, or with
 * `--log-json` each line as a JSON error line, so every stderr line is JSON.
 */
function errorWriter(deps: CliDeps, json: boolean): (text: string) => void {
  if (!json) return (text) => deps.stderr.write(text);
  return (text) => {
    for (const line of text.split("\n")) {
      const msg = line.trim().replace(/^error: /, "");
      if (msg === "") continue;
      const time = deps.now().toISOString();
      deps.stderr.write(JSON.stringify({ time, level: "error", msg }) + "\n");
    }
  };
}

function applyDefaults(
  command: Command,
  deps: Pick<CliDeps, "stdout"> & { writeErr: (text: string) => void },
  path: string,
): Command {
  command.exitOverride().configureHelp({ showGlobalOptions: true }).configureOutput({
    writeOut: (text) => deps.stdout.write(text),
    writeErr: deps.writeErr,
    outputError: (text, write) => write(text),
  });
  const examples = examplesHelp(path);
  if (examples) command.addHelpText("after", examples);
  for (const sub of command.commands) applyDefaults(sub, deps, `${path} ${sub.name()}`);
  return command;
}

/**
 * Runs the CLI once.
 *
 * @param argv arguments after the program name
 * @param deps injected streams and factories
 * @returns the process exit code
 */
export async function runCli(argv: readonly string[], deps: CliDeps): Promise<number> {
  try {
    const program = await createProgram(deps, argv);
    await program.parseAsync([...argv], { from: "user" });
    return EXIT_CODES.ok;
  } catch (error) {
    if (error instanceof CommanderError) {
      // Help and --version end through exitOverride with exit code 0.
      if (error.exitCode === 0) return EXIT_CODES.ok;
      // commander already printed its message; the exit code is ours.
      return new UsageError(error.message).exitCode;
    }
    const failure = withFlagNames(interruptedBy(deps.signal, error));
    deps.stderr.write(
      (logJsonRequested(argv, deps.env)
        ? formatErrorJson(failure, deps.now())
        : formatError(failure)) + "\n",
    );
    return exitCodeOf(failure);
  }
}

/**
 * A failure the run's SIGINT/SIGTERM caused (a request it cancelled rejects with the signal's
 * reason, which a library error may wrap as its cause) is the interrupt it is: exit 130, never
 * internal (8) nor the wrapper's own code.
 */
function interruptedBy(signal: AbortSignal, error: unknown): unknown {
  if (!signal.aborted || error instanceof InterruptedError) return error;
  if (error instanceof ToolError && !causedBy(error, signal.reason)) return error;
  return new InterruptedError(`Cannot finish: interrupted (${String(signal.reason)})`, {
    ...(error instanceof ToolError ? { cause: error } : {}),
  });
}

/** Whether `reason` is the error or one of its causes (a bounded walk). */
function causedBy(error: unknown, reason: unknown): boolean {
  let at: unknown = error;
  for (let depth = 0; depth < 16 && at !== undefined && at !== null; depth++) {
    if (at === reason) return true;
    at = (at as { cause?: unknown }).cause;
  }
  return false;
}
