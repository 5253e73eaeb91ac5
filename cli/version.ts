/**
 * `aicr version`: version (no leading `v`), build backend, commit, runtime and platform.
 *
 * @module
 */
import { Command, Option } from "commander";
import { UsageError } from "../errors.ts";
import type { CliDeps } from "./context.ts";
import { checkOutputNotFormat } from "./_output.ts";
import { namingFlags } from "./_flags.ts";
import { VERSION_FORMATS, versionReport, versionText } from "./fast.ts";

/**
 * The `version` command.
 *
 * @param deps injected streams
 * @returns the command
 */
export function versionCommand(deps: CliDeps): Command {
  return new Command("version")
    .description("print version, build backend, commit, runtime and platform")
    .addOption(new Option("-t, --format <format>", "text or json").default("text"))
    // `-o` is where output goes on every verb; version writes only to stdout, so `-o json` is the
    // format habit and gets the message that names -t.
    .addOption(new Option("-o, --output <target>").hideHelp())
    .action(namingFlags((options: { format: string; output?: string }) => {
      checkOutputNotFormat(options.output, { formats: ["text", "json"] });
      if (options.output !== undefined) {
        throw new UsageError(
          `Cannot use '-o ${options.output}': 'aicr version' writes to stdout only; redirect it instead`,
        );
      }
      if (!VERSION_FORMATS.includes(options.format)) {
        throw new UsageError(
          `Cannot print version as '--format' must be 'text' or 'json': current value is '${options.format}'`,
        );
      }
      deps.stdout.write(versionText(versionReport(), options.format as "text" | "json"));
    }));
}
