/**
 * The list of verbs the CLI registers, in help order.
 *
 * @module
 */
import type { Command } from "commander";
import type { CliDeps } from "./context.ts";
import { agentCommand } from "./agent.ts";
import { versionCommand } from "./version.ts";

/** A verb's factory. */
export type CommandFactory = (deps: CliDeps) => Command;

/** Every verb, in help order. */
export const COMMAND_FACTORIES: readonly CommandFactory[] = [agentCommand, versionCommand];
