/**
 * `aicr agent`: collect a snapshot of this host (or, inside the agent pod, of its node)
 * and write it to stdout, a file or a ConfigMap. `aicr snapshot` does the same when
 * `AICR_AGENT_MODE=true`, as the upstream pod runs it.
 *
 * @module
 */
import { resolve } from "node:path";
import { Command, Option } from "commander";
import { deliverSnapshot, runAgent } from "../agent/mod.ts";
import type { AgentResult } from "../agent/mod.ts";
import {
  createProjectionFileReader,
  mergeProjections,
  readProjections,
} from "../collectors/mod.ts";
import { UsageError } from "../errors.ts";
import { checkOutputFile } from "../io.ts";
import type { Logger } from "../log.ts";
import { AGENT_REPORT_ENV } from "../manifests/mod.ts";
import { formatSnapshotTable, parseSnapshotTarget, resolveNodeName } from "../snapshot/mod.ts";
import type { Snapshot, SnapshotFormat, SnapshotTarget, Subtype } from "../snapshot/mod.ts";
import { buildInfo } from "../version.ts";
import type { CliDeps } from "./context.ts";
import { checkOutputNotFormat, refuseTemplate, snapshotFormatFlag } from "./_output.ts";
import { connectOptional, defineAction } from "./globals.ts";
import type { GlobalOptions } from "./globals.ts";
import type { ProjectionFiles } from "../collectors/mod.ts";
import { parseCount } from "./_flags.ts";

/** Flags of a local collection. */
export interface LocalAgentFlags extends ProjectionFiles {
  /** `--output`. */
  output?: string;
  /** `--format`. */
  format: string;
  /** `--template` (refused). */
  template?: string;
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
 * Adds the local-collection flags to a command.
 *
 * @param command the command
 * @returns the same command
 */
export function addLocalAgentFlags(command: Command): Command {
  return command
    .option("-o, --output <target>", "'-' (stdout), a file path, or cm://<namespace>/<name>")
    .addOption(
      new Option("-t, --format <format>", "yaml, json or table").default("yaml").env(
        "AICR_FORMAT",
      ),
    )
    .option(
      "--template <file>",
      "upstream's Go text/template output: not supported (use -t json and jq; see the error for why)",
    )
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

/** A local collection's options, parsed and checked from its flags. */
export interface LocalAgentOptions {
  /** `--output`, parsed. */
  target: SnapshotTarget;
  /** `--output` as given (for messages). */
  output: string | undefined;
  /** `--format` (the document's; yaml when rendering a table). */
  format: SnapshotFormat;
  /** `-t table`: render the snapshot as a table. */
  table: boolean;
  /** `--require-gpu`. */
  requireGpu: boolean;
  /** `--max-nodes-per-entry`. */
  maxNodesPerEntry: number;
  /** `--systemd-unit`. */
  systemdUnits: readonly string[];
  /** `--host-root`. */
  hostRoot?: string;
  /** The controller-side projection files, read. */
  projections: Subtype[];
  /**
   * `AICR_CONFIGMAP_UID` (set by `aicr snapshot` on its agent Job): the staging ConfigMap
   * the controller created; the snapshot goes into that object only.
   */
  configMapUid?: string;
  /**
   * `AICR_REPORT_PATH` (set on the agent Job): where the agent reports what it wrote into its
   * ConfigMap (the container's termination message file).
   */
  reportPath?: string;
}

/**
 * Completes and validates the local-collection flags: everything is parsed and every projection
 * file read before anything is collected.
 *
 * @param deps CLI dependencies (the working directory)
 * @param flags the local-collection flags
 * @returns the typed options
 * @throws {UsageError} for bad flag values or projection files
 */
export async function localAgentOptions(
  deps: CliDeps,
  flags: LocalAgentFlags,
): Promise<LocalAgentOptions> {
  refuseTemplate(flags.template);
  const target = parseSnapshotTarget(
    checkOutputNotFormat(flags.output, { formats: ["yaml", "json", "table"] }),
  );
  const { format, table } = snapshotFormatFlag(flags.format, target);
  const maxNodesPerEntry = parseCount("--max-nodes-per-entry", flags.maxNodesPerEntry);
  const projections = await readProjections(flags, createProjectionFileReader(deps.cwd));
  const configMapUid = deps.env("AICR_CONFIGMAP_UID");
  const reportPath = deps.env(AGENT_REPORT_ENV);
  // Checked before collection starts, so an output that cannot be written fails at once.
  if (target.kind === "file") await checkOutputFile(resolve(deps.cwd, target.path));
  return {
    target,
    output: flags.output,
    format,
    table,
    requireGpu: flags.requireGpu,
    maxNodesPerEntry,
    systemdUnits: flags.systemdUnit ?? [],
    ...(flags.hostRoot ? { hostRoot: flags.hostRoot } : {}),
    projections,
    ...(configMapUid ? { configMapUid } : {}),
    ...(reportPath ? { reportPath } : {}),
  };
}

/**
 * Collects and delivers a snapshot of this host.
 *
 * @param deps CLI dependencies
 * @param context the global options and the logger
 * @param options the checked local-collection options
 * @returns the agent result
 * @throws {UsageError} when a `cm://` output has no Kubernetes client
 */
export async function runLocalAgent(
  deps: CliDeps,
  context: { globals: GlobalOptions; log: Logger },
  options: LocalAgentOptions,
): Promise<AgentResult> {
  const { log } = context;
  const { target, projections } = options;
  const kube = connectOptional(deps, context.globals, log);
  if (target.kind === "configmap" && !kube) {
    throw new UsageError(
      `Cannot write to '--output' value '${options.output}': no Kubernetes client (pass --kubeconfig or run in a pod)`,
    );
  }
  const agentDeps = {
    collectors: deps.collectorDeps({
      log,
      ...(kube ? { kube } : {}),
      ...(options.hostRoot ? { hostRoot: options.hostRoot } : {}),
    }),
    // `-t table`: the document goes nowhere; the table of what it holds is delivered below.
    sink: {
      stdout: options.table ? { write: () => {} } : deps.stdout,
      now: deps.now,
      ...(kube ? { kube: () => kube } : {}),
    },
    log,
    now: deps.now,
    version: buildInfo().version,
  };
  const result = await runAgent(agentDeps, {
    target: options.table ? { kind: "stdout" } : target,
    format: options.format,
    requireGpu: options.requireGpu,
    nodeName: resolveNodeName(deps.env),
    collect: {
      maxNodesPerEntry: options.maxNodesPerEntry,
      ...(options.systemdUnits.length ? { systemdUnits: [...options.systemdUnits] } : {}),
    },
    signal: deps.signal,
    ...(options.configMapUid ? { configMapUid: options.configMapUid } : {}),
    ...(options.reportPath
      ? { report: { path: options.reportPath, commit: buildInfo().commit } }
      : {}),
    ...(projections.length > 0
      ? { transform: (snapshot: Snapshot) => mergeProjections(snapshot, projections) }
      : {}),
  });
  if (!options.table) return result;
  const destination = await deliverSnapshot({ stdout: deps.stdout, now: deps.now }, {
    target,
    encoded: formatSnapshotTable(result.snapshot),
    format: options.format,
    snapshot: result.snapshot,
    version: buildInfo().version,
    signal: deps.signal,
  });
  if (target.kind === "file") log.info("snapshot table saved to file", { path: destination });
  return { ...result, destination };
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
  return defineAction(command, deps, async (flags: LocalAgentFlags, { globals, log }) => {
    const options = await localAgentOptions(deps, flags);
    await runLocalAgent(deps, { globals, log }, options);
  }, { prefixFromEnv: true });
}
