/**
 * `aicr agent`: collect a snapshot of this host (or, inside the agent pod, of its node)
 * and write it to stdout, a file or a ConfigMap. `aicr snapshot` does the same when
 * `AICR_AGENT_MODE=true`, as the upstream pod runs it.
 *
 * @module
 */
import { Command } from "commander";
import { UsageError } from "../errors.ts";
import { runLocalAgent } from "../agent/mod.ts";
import type { CliDeps } from "./context.ts";
import { addLocalAgentFlags, localAgentDeps, localAgentOptions } from "./_agent.ts";
import type { LocalAgentFlags } from "./_agent.ts";
import { defineAction } from "./globals.ts";
import { parseKeepLast } from "./_flags.ts";

/**
 * The `agent` command.
 *
 * @param deps CLI dependencies
 * @returns the command
 */
export function agentCommand(deps: CliDeps): Command {
  const command = new Command("agent").description(
    "collect a snapshot of this node (GPU, OS, SystemD, K8s, NodeTopology) and write it out",
  );
  addLocalAgentFlags(command).option(
    "--keep-last <n>",
    "-o cm://<ns>/<name> names a series: write <name>-<UTC yyyymmdd-hhmmss> and delete the series' older ConfigMaps beyond the newest n (scheduled snapshots)",
  );
  return defineAction(
    command,
    deps,
    async (flags: LocalAgentFlags & { keepLast?: string }, context) => {
      const options = await localAgentOptions(deps, flags);
      if (flags.keepLast !== undefined && options.target.kind !== "configmap") {
        throw new UsageError(
          `Cannot use '--keep-last' without '-o cm://<namespace>/<name>': it keeps a series of ConfigMaps: current output is '${
            flags.output ?? "-"
          }'`,
        );
      }
      await runLocalAgent(localAgentDeps(deps, context), {
        ...options,
        ...(flags.keepLast !== undefined ? { keepLast: parseKeepLast(flags.keepLast) } : {}),
      });
    },
    { log: { prefixFromEnv: true } },
  );
}
