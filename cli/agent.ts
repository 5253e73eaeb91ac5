/**
 * `aicr agent`: collect a snapshot of this host (or, inside the agent pod, of its node)
 * and write it to stdout, a file or a ConfigMap. `aicr snapshot` does the same when
 * `AICR_AGENT_MODE=true`, as the upstream pod runs it.
 *
 * @module
 */
import { Command, Option } from "commander";
import { runAgent } from "../agent/mod.ts";
import type { AgentResult } from "../agent/mod.ts";
import { mergeProjections } from "../collectors/mod.ts";
import { UsageError } from "../errors.ts";
import { NoKubeconfigError } from "../kube/mod.ts";
import type { KubeClient } from "../kube/mod.ts";
import type { Logger } from "../log.ts";
import { isSnapshotFormat, parseSnapshotTarget, resolveNodeName } from "../snapshot/mod.ts";
import type { Snapshot } from "../snapshot/mod.ts";
import { buildInfo } from "../version.ts";
import type { CliDeps, GlobalFlags } from "./context.ts";
import { createProjectionFileReader, readProjections } from "./_projections.ts";
import type { ProjectionFlags } from "./_projections.ts";

/** Flags of a local collection. */
export interface LocalAgentFlags extends ProjectionFlags {
  /** `--output`. */
  output?: string;
  /** `--format`. */
  format: string;
  /** `--kubeconfig`. */
  kubeconfig?: string;
  /** `--require-gpu`. */
  requireGpu: boolean;
  /** `--max-nodes-per-entry`. */
  maxNodesPerEntry: string;
  /** `--systemd-unit` (repeatable). */
  systemdUnit?: string[];
  /** `--host-root`. */
  hostRoot?: string;
}

/**
 * Reads the global flags of the root command.
 *
 * @param command any subcommand
 * @returns `--debug` and `--log-json`
 */
export function globalFlags(command: Command): GlobalFlags {
  const opts = command.optsWithGlobals() as { debug?: boolean; logJson?: boolean };
  return { debug: opts.debug === true, logJson: opts.logJson === true };
}

/**
 * Parses a non-negative integer flag.
 *
 * @param flag the flag name
 * @param value its value
 * @returns the number
 * @throws {UsageError} when it is not a non-negative integer
 */
export function parseCount(flag: string, value: string): number {
  if (!/^\d+$/.test(value.trim())) {
    throw new UsageError(
      `Cannot use '${flag}' as it must be a non-negative integer: current value is '${value}'`,
    );
  }
  return Number(value);
}

/**
 * Adds the local-collection flags to a command.
 *
 * @param command the command
 * @returns the same command
 */
export function addLocalAgentFlags(command: Command): Command {
  return command
    .option("-o, --output <target>", "'-' (stdout), a file path, or cm://<namespace>/<name>")
    .addOption(
      new Option("-t, --format <format>", "yaml or json").default("yaml").env("AICR_FORMAT"),
    )
    .option("-k, --kubeconfig <path>", "kubeconfig for the K8s and NodeTopology readings")
    .addOption(
      new Option("--require-gpu", "fail unless nvidia-smi reports at least one GPU")
        .default(false).env("AICR_REQUIRE_GPU"),
    )
    .addOption(
      new Option("--max-nodes-per-entry <n>", "truncate NodeTopology node lists (0: no limit)")
        .default("0").env("AICR_MAX_NODES_PER_ENTRY"),
    )
    .option(
      "--systemd-unit <unit...>",
      "systemd units to read (default: containerd, docker, kubelet)",
    )
    .addOption(
      new Option("--host-root <dir>", "read host files under this directory (fixture trees)")
        .env("AICR_HOST_ROOT"),
    )
    // Controller-side projections: read by the CLI, never sent into the agent pod.
    .option(
      "--oke-addons <path>",
      "'oci ce cluster list-addons --cluster-id <id> --all --output json' dump, merged into K8s.oke-addons",
    )
    .addOption(
      new Option(
        "--aks-gpu-pools <path>",
        "'az aks nodepool list -o json' dump, merged into K8s.aks-gpu-pools",
      )
        .env("AICR_AKS_GPU_POOLS_PATH"),
    )
    .option(
      "--gke-gpu-pools <path>",
      "'gcloud container node-pools list --cluster <c> --format=json' dump, merged into K8s.gke-gpu-pools",
    );
}

function connectOptional(
  deps: CliDeps,
  kubeconfig: string | undefined,
  log: Logger,
): KubeClient | undefined {
  try {
    return deps.connectKube(kubeconfig ? { kubeconfig } : {});
  } catch (error) {
    if (error instanceof NoKubeconfigError) {
      log.debug("no Kubernetes client: K8s and NodeTopology readings will be empty", {
        reason: error.message,
      });
      return undefined;
    }
    throw error;
  }
}

/**
 * Collects and delivers a snapshot of this host.
 *
 * @param deps CLI dependencies
 * @param flags the local-collection flags
 * @param log the logger
 * @returns the agent result
 * @throws {UsageError} for bad flag values or projection files (read before collecting)
 */
export async function runLocalAgent(
  deps: CliDeps,
  flags: LocalAgentFlags,
  log: Logger,
): Promise<AgentResult> {
  if (!isSnapshotFormat(flags.format)) {
    throw new UsageError(
      `Cannot use '--format' as it must be 'yaml' or 'json': current value is '${flags.format}'`,
    );
  }
  const target = parseSnapshotTarget(flags.output);
  const maxNodesPerEntry = parseCount("--max-nodes-per-entry", flags.maxNodesPerEntry);
  const projections = await readProjections(flags, createProjectionFileReader(deps.cwd));
  const kube = connectOptional(deps, flags.kubeconfig, log);
  if (target.kind === "configmap" && !kube) {
    throw new UsageError(
      `Cannot write to '--output' value '${flags.output}': no Kubernetes client (pass --kubeconfig or run in a pod)`,
    );
  }
  const version = buildInfo().version;
  const agentDeps = {
    collectors: deps.collectorDeps({
      log,
      ...(kube ? { kube } : {}),
      ...(flags.hostRoot ? { hostRoot: flags.hostRoot } : {}),
    }),
    sink: { stdout: deps.stdout, now: deps.now, ...(kube ? { kube: () => kube } : {}) },
    log,
    now: deps.now,
    version,
  };
  const options = {
    target,
    format: flags.format,
    requireGpu: flags.requireGpu,
    nodeName: resolveNodeName(deps.env),
    collect: {
      maxNodesPerEntry,
      ...(flags.systemdUnit?.length ? { systemdUnits: flags.systemdUnit } : {}),
    },
    signal: deps.signal,
  };
  return await runAgent(agentDeps, {
    ...options,
    ...(projections.length > 0
      ? { transform: (snapshot: Snapshot) => mergeProjections(snapshot, projections) }
      : {}),
  });
}

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
  return command.action(async (flags: LocalAgentFlags, cmd: Command) => {
    const global = globalFlags(cmd);
    const log = deps.makeLogger({
      debug: global.debug,
      json: global.logJson,
      ...(deps.env("AICR_LOG_PREFIX") ? { prefix: deps.env("AICR_LOG_PREFIX") as string } : {}),
    });
    await runLocalAgent(deps, flags, log);
  });
}
