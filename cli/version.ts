/**
 * `aicr version`: version (no leading `v`), build backend, commit, runtime and platform.
 *
 * @module
 */
import { Command, Option } from "commander";
import { UsageError } from "../errors.ts";
import { platformName, runtimeName } from "../runtime.ts";
import { buildInfo, defaultImage, isSourceBuild } from "../version.ts";
import type { CliDeps } from "./context.ts";
import { checkOutputNotFormat } from "./_output.ts";
import { namingFlags } from "./_flags.ts";

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
      const build = buildInfo();
      const info = {
        ...build,
        runtime: runtimeName(),
        platform: platformName(),
        image: defaultImage(build),
      };
      if (options.format === "json") {
        deps.stdout.write(JSON.stringify(info, null, 2) + "\n");
        return;
      }
      if (options.format !== "text") {
        throw new UsageError(
          `Cannot print version as '--format' must be 'text' or 'json': current value is '${options.format}'`,
        );
      }
      deps.stdout.write(
        `aicr ${info.version}\nbackend: ${info.backend}\ncommit: ${info.commit}\nruntime: ${info.runtime}\nplatform: ${info.platform}\nimage: ${info.image}${
          isSourceBuild(build) ? " (the release this source build is a development of)" : ""
        }\n`,
      );
    }));
}
