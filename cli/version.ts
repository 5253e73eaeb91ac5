/**
 * `aicr version`: version (no leading `v`), build backend, commit and runtime.
 *
 * @module
 */
import { Command } from "commander";
import { UsageError } from "../errors.ts";
import { runtimeName } from "../runtime.ts";
import { buildInfo } from "../version.ts";
import type { CliDeps } from "./context.ts";

/**
 * The `version` command.
 *
 * @param deps injected streams
 * @returns the command
 */
export function versionCommand(deps: CliDeps): Command {
  return new Command("version")
    .description("print version, build backend, commit and runtime")
    .option("-o, --output <format>", "text or json", "text")
    .action((options: { output: string }) => {
      const info = { ...buildInfo(), runtime: runtimeName() };
      if (options.output === "json") {
        deps.stdout.write(JSON.stringify(info, null, 2) + "\n");
        return;
      }
      if (options.output !== "text") {
        throw new UsageError(
          `Cannot print version as '--output' must be 'text' or 'json': current value is '${options.output}'`,
        );
      }
      deps.stdout.write(
        `aicr ${info.version}\nbackend: ${info.backend}\ncommit: ${info.commit}\nruntime: ${info.runtime}\n`,
      );
    });
}
