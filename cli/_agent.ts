/**
 * The local collection's flags, shared by `aicr agent` and `aicr snapshot` (which collects
 * locally inside the agent pod, `AICR_AGENT_MODE=true`), parsed once into the agent's options.
 *
 * @module
 */
import { resolve } from "node:path";
import { Command, Option } from "commander";
import { createProjectionFileReader, readProjections } from "../collectors/mod.ts";
import { checkOutputFile } from "../io.ts";
import { AGENT_REPORT_ENV, AGENT_REPORT_NONCE_ENV } from "../manifests/mod.ts";
import { parseSnapshotTarget, resolveNodeName } from "../snapshot/mod.ts";
import type { CliDeps } from "./context.ts";
import { checkOutputNotFormat, refuseTemplate, snapshotFormatFlag } from "./_output.ts";
import { connectOptional } from "./globals.ts";
import type { VerbContext } from "./globals.ts";
import { addRedactFlags, redactorFromFlags } from "./_redact.ts";
import type { RedactFlags } from "./_redact.ts";
import type { LocalAgentDeps, LocalAgentOptions } from "../agent/mod.ts";
import type { ProjectionFiles } from "../collectors/mod.ts";
import { parseCount } from "./_flags.ts";

/** Flags of a local collection. */
export interface LocalAgentFlags extends ProjectionFiles, RedactFlags {
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
  return addRedactFlags(command)
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
  const redactor = await redactorFromFlags(flags, deps);
  const configMapUid = deps.env("AICR_CONFIGMAP_UID");
  const reportPath = deps.env(AGENT_REPORT_ENV);
  const reportNonce = deps.env(AGENT_REPORT_NONCE_ENV);
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
    ...(redactor ? { redactor } : {}),
    ...(configMapUid ? { configMapUid } : {}),
    ...(reportPath ? { reportPath } : {}),
    ...(reportNonce ? { reportNonce } : {}),
    nodeName: resolveNodeName(deps.env),
  };
}

/**
 * What a local collection needs from the CLI's dependencies and the verb's context.
 *
 * @param deps CLI dependencies
 * @param context the root's flags and the logger
 * @returns the agent's dependencies
 */
export function localAgentDeps(deps: CliDeps, context: VerbContext): LocalAgentDeps {
  return {
    connect: () => connectOptional(deps, context.globals, context.log),
    collectorDeps: deps.collectorDeps,
    stdout: deps.stdout,
    stderr: deps.stderr,
    now: deps.now,
    log: context.log,
    signal: deps.signal,
  };
}
