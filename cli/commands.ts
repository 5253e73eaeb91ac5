/**
 * The list of verbs the CLI registers, in help order.
 *
 * @module
 */
import type { Command } from "commander";
import { agentCommand } from "./agent.ts";
import { cleanupCommand } from "./cleanup.ts";
import type { CliDeps } from "./context.ts";
import { daemonCommand } from "./daemon.ts";
import { daemonsetCommand } from "./daemonset.ts";
import { diffCommand } from "./diff.ts";
import { snapshotCommand } from "./snapshot.ts";
import { versionCommand } from "./version.ts";

/** A verb's factory. */
export type CommandFactory = (deps: CliDeps) => Command;

/** Every verb, in help order. */
export const COMMAND_FACTORIES: readonly CommandFactory[] = [
  snapshotCommand,
  agentCommand,
  cleanupCommand,
  diffCommand,
  daemonCommand,
  daemonsetCommand,
  versionCommand,
];
