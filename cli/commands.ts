/**
 * The list of verbs the CLI registers, in help order, with the small adapters that
 * hand each verb the dependencies it asks for.
 *
 * @module
 */
import type { Command } from "commander";
import type { KubeObject } from "../kube/mod.ts";
import { createFsSourceLoader } from "./_sources.ts";
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

function diffWithConfigMaps(deps: CliDeps): Command {
  return diffCommand({
    ...deps,
    snapshotSources: ({ kubeconfig }) =>
      createFsSourceLoader({
        // Connects only when a cm:// source is read.
        readConfigMap: async (namespace, name) => {
          const kube = deps.connectKube(kubeconfig ? { kubeconfig } : {});
          const cm = await kube.get<KubeObject & { data?: Record<string, string> }>(
            "ConfigMap",
            namespace,
            name,
          );
          return cm ? cm.data ?? {} : undefined;
        },
      }),
  });
}

/** Every verb, in help order. */
export const COMMAND_FACTORIES: readonly CommandFactory[] = [
  snapshotCommand,
  agentCommand,
  cleanupCommand,
  diffWithConfigMaps,
  daemonCommand,
  daemonsetCommand,
  versionCommand,
];
