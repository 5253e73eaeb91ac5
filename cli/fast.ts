/**
 * The command lines the single executable answers before it loads the CLI: `aicr version` (with
 * `-t`/`--format` `text` or `json`) and `aicr --version`/`-v`, the exact forms a script or a
 * probe types. They print build information only, yet the CLI costs commander, every module the
 * verbs share and a code cache to read first (about half of `aicr version`'s time beyond an empty
 * Node start). Any other command line, with any other flag or value, goes to the CLI, which also
 * answers these (`deno run mod.ts version`, `aicr --debug version`): both print the same bytes, as
 * both print {@link versionText} (`fast_test.ts` holds them to it).
 *
 * The executable's loader (`scripts/build.ts`) runs this module's own small bundle first when the
 * first argument is one of {@link FAST_FIRST_ARGUMENTS}.
 *
 * @module
 */
import process from "node:process";
import { platformName, runtimeName } from "../runtime.ts";
import { fdWriter } from "../stdio.ts";
import { buildInfo, defaultImage, isSourceBuild } from "../version.ts";
import type { BuildInfo } from "../version.ts";

/** What `aicr version` reports. */
export interface VersionReport extends BuildInfo {
  /** The runtime, e.g. `node 24.22.3`. */
  runtime: string;
  /** `linux/amd64` or `linux/arm64`. */
  platform: string;
  /** The agent image this build deploys by default. */
  image: string;
}

/** The formats `aicr version` prints. */
export const VERSION_FORMATS: readonly string[] = ["text", "json"];

/**
 * This build's version report.
 *
 * @returns build information, runtime, platform and default image
 */
export function versionReport(): VersionReport {
  const build = buildInfo();
  return { ...build, runtime: runtimeName(), platform: platformName(), image: defaultImage(build) };
}

/**
 * What `aicr version` prints.
 *
 * @param report the report
 * @param format `text` or `json` (anything else is the caller's error to raise)
 * @returns the text, ending with a newline
 */
export function versionText(report: VersionReport, format: "text" | "json"): string {
  if (format === "json") return JSON.stringify(report, null, 2) + "\n";
  return `aicr ${report.version}\nbackend: ${report.backend}\ncommit: ${report.commit}\nruntime: ${report.runtime}\nplatform: ${report.platform}\nimage: ${report.image}${
    isSourceBuild(report) ? " (the release this source build is a development of)" : ""
  }\n`;
}

/** First arguments for which the loader tries {@link fastAnswer} before the CLI. */
export const FAST_FIRST_ARGUMENTS: readonly string[] = ["version", "--version", "-v"];

/**
 * The output of a command line answered without the CLI, or undefined for one the CLI must
 * answer.
 *
 * @param argv arguments after the program name
 * @returns what goes to stdout (the exit code is 0), or undefined
 */
export function fastAnswer(argv: readonly string[]): string | undefined {
  const [first, ...rest] = argv;
  if (first === "--version" || first === "-v") {
    return rest.length === 0 ? `${buildInfo().version}\n` : undefined;
  }
  if (first !== "version") return undefined;
  const format = formatOf(rest);
  return format === undefined ? undefined : versionText(versionReport(), format);
}

/** The format of `version`'s own arguments, when they are one of the plain forms. */
function formatOf(args: readonly string[]): "text" | "json" | undefined {
  let value: string | undefined;
  if (args.length === 0) value = "text";
  else if (args.length === 1 && args[0]?.startsWith("--format=")) value = args[0].slice(9);
  else if (args.length === 2 && (args[0] === "-t" || args[0] === "--format")) value = args[1];
  return value === "text" || value === "json" ? value : undefined;
}

/**
 * Answers a command line on this process's stdout when {@link fastAnswer} has its output: the
 * single executable's loader calls it before it loads the CLI.
 *
 * @param argv arguments after the program name. @default this process's
 * @returns whether it was answered (the exit code is 0); false: run the CLI
 */
export function answerFast(argv: readonly string[] = process.argv.slice(2)): boolean {
  const text = fastAnswer(argv);
  if (text === undefined) return false;
  fdWriter(1, () => process.stdout).write(text);
  return true;
}
