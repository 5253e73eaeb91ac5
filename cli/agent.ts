/**
 * `aicr agent`: collect a snapshot of this host (or, inside the agent pod, of its node)
 * and write it to stdout, a file or a ConfigMap. `aicr snapshot` does the same when
 * `AICR_AGENT_MODE=true`, as the upstream pod runs it.
 *
 * @module
 */
import { Command } from "commander";
import { runLocalAgent } from "../agent/mod.ts";
import type { CliDeps } from "./context.ts";
import { addLocalAgentFlags, localAgentDeps, localAgentOptions } from "./_agent.ts";
import type { LocalAgentFlags } from "./_agent.ts";
import { defineAction } from "./globals.ts";

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
  addLocalAgentFlags(command);
  return defineAction(command, deps, async (flags: LocalAgentFlags, context) => {
    await runLocalAgent(localAgentDeps(deps, context), await localAgentOptions(deps, flags));
  }, { log: { prefixFromEnv: true } });
}
