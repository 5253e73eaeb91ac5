/**
 * `aicr snapshot`: deploy the run-scoped agent Job, wait, read the snapshot, deliver it
 * and clean up, exactly as the upstream v1.0.0 documentation describes. With
 * `AICR_AGENT_MODE=true` (inside the agent pod) it collects locally instead, and with
 * `--add-roles-to-service-account` it only renders RBAC manifests.
 *
 * @module
 */
import { randomBytes } from "node:crypto";
import { join, resolve } from "node:path";
import { tmpdir } from "node:os";
import { Command, Option } from "commander";
import { deliverSnapshot, hasGpu } from "../agent/mod.ts";
import { deploySnapshot, previewSnapshotRun, runFleetFetch } from "../controller/mod.ts";
import {
  createProjectionFileReader,
  mergeProjections,
  readProjections,
} from "../collectors/mod.ts";
import { InterruptedError, UsageError } from "../errors.ts";
import type { Logger } from "../log.ts";
import { checkOutputFile, writeFileAtomic } from "../io.ts";
import type { KubeClient } from "../kube/mod.ts";
import {
  autoTargetingAllowed,
  DEFAULT_JOB_NAME_PREFIX,
  DEFAULT_SERVICE_ACCOUNT_PREFIX,
  formatManifest,
  isNodeOs,
  isRunId,
  NODE_OS_FAMILIES,
} from "../manifests/mod.ts";
import {
  namingFlags,
  parseCount,
  parseNodeSelectors,
  parseResourceList,
  parseTimeout,
  parseTolerations,
} from "./_flags.ts";
import type { AgentJobKnobs, DeployOptions, DeployResult } from "../controller/mod.ts";
import {
  encodeSnapshot,
  findMeasurement,
  formatSnapshotTable,
  parseSnapshotTarget,
} from "../snapshot/mod.ts";
import type { Snapshot, SnapshotFormat, SnapshotTarget, Subtype } from "../snapshot/mod.ts";
import { buildInfo } from "../version.ts";
import {
  addImagePlatformsFlag,
  chooseAgentImage,
  platformArchitectures,
  warnAboutImage,
} from "./_image.ts";
import { addLocalAgentFlags, localAgentOptions, runLocalAgent } from "./agent.ts";
import type { LocalAgentFlags } from "./agent.ts";
import { writeProjectedConfigMap } from "./_projections.ts";
import { renderRolesForServiceAccount } from "./_render_roles.ts";
import { applySnapshotConfig } from "./_config.ts";
import type { CliDeps } from "./context.ts";
import { checkOutputNotFormat, refuseTemplate, snapshotFormatFlag } from "./_output.ts";
import { fleetFetchOptions } from "./_fetch.ts";
import {
  checkedNamespace,
  clusterDeps,
  commandLogger,
  connect,
  globalOptions,
  rejectRepeatedGlobal,
} from "./globals.ts";
import type { GlobalOptions } from "./globals.ts";

/** Flags of `aicr snapshot` (namespace and cluster come from the root's flags). */
interface SnapshotFlags extends LocalAgentFlags {
  image?: string;
  imagePlatforms?: string;
  imagePullSecret?: string[];
  jobName: string;
  serviceAccountName?: string;
  addRolesToServiceAccount?: string;
  nodeSelector?: string[];
  toleration?: string[];
  timeout: string;
  cleanup: boolean;
  privileged: string;
  runtimeClass?: string;
  os?: string;
  requests?: string;
  limits?: string;
  clusterConfig?: string;
  discoverNetwork: boolean;
  runId?: string;
  fromDaemonset: boolean;
  createNamespace: boolean;
  dryRun: boolean;
  offline: boolean;
  config?: string;
}

/** Single-value flags that may appear only once (upstream rejects duplicates). */
const SINGLE_VALUE_FLAGS = [
  "image",
  "image-platforms",
  "job-name",
  "service-account-name",
  "timeout",
  "max-nodes-per-entry",
  "runtime-class",
  "output",
  "format",
  "os",
];

function parseBoolFlag(flag: string): (value: string | undefined) => string {
  return (value) => {
    const v = value === undefined ? "true" : value.trim().toLowerCase();
    if (v !== "true" && v !== "false") {
      throw new UsageError(
        `Cannot use '${flag}' as it must be 'true' or 'false': current value is '${value}'`,
      );
    }
    return v;
  };
}

/** Adds the flags of a run (the Job's knobs, RBAC, waiting, outputs) to the command. */
function addSnapshotFlags(command: Command): Command {
  return addRunModeFlags(addAgentPodFlags(addAgentPlacementFlags(command)));
}

/** The agent's image, name, ServiceAccount and placement. */
function addAgentPlacementFlags(command: Command): Command {
  return addImagePlatformsFlag(
    command.addOption(
      new Option(
        "--image <ref>",
        "agent image (default: this build's own, ghcr.io/aicr-run/aicr:<version>; a source build has none)",
      )
        .env("AICR_IMAGE"),
    ),
  )
    .option("--image-pull-secret <name...>", "Secret for pulling the agent image (repeatable)")
    .option(
      "--job-name <prefix>",
      "Job name prefix; the run ID is always appended",
      DEFAULT_JOB_NAME_PREFIX,
    )
    .option(
      "--service-account-name <name>",
      "ServiceAccount the agent runs as: used verbatim if it exists in --namespace, otherwise a prefix (default: aicr)",
    )
    .option(
      "--add-roles-to-service-account <sa>",
      "write the RBAC granting the agent's permissions to <sa> into ./snapshot-rbac-<runID>/ and exit (no cluster contact)",
    )
    .option("--node-selector <key=value...>", "node selector (repeatable)")
    .option(
      "--toleration <key=value:effect...>",
      "toleration (repeatable; default: tolerate all taints)",
    );
}

/** How the agent's pod runs and how long the run waits for it. */
function addAgentPodFlags(command: Command): Command {
  return command
    .option("--timeout <duration>", "wait timeout", "5m")
    .option(
      "--no-cleanup",
      "keep the Job and RBAC for debugging (leaves the run's ClusterRole active)",
    )
    .addOption(
      new Option(
        "--privileged [bool]",
        "privileged agent (hostPID/Network/IPC, SYS_ADMIN); false for PSS-restricted",
      )
        .default("true").argParser(parseBoolFlag("--privileged")),
    )
    .addOption(
      new Option("--runtime-class <name>", "runtimeClassName for nvidia-smi without a GPU request")
        .env(
          "AICR_RUNTIME_CLASS",
        ),
    )
    .addOption(
      new Option("--os <family>", `node OS family (${NODE_OS_FAMILIES.join(", ")})`).env("AICR_OS"),
    )
    .addOption(
      new Option("--requests <list>", "container requests, e.g. cpu=1,memory=4Gi").env(
        "AICR_REQUESTS",
      ),
    )
    .addOption(
      new Option("--limits <list>", "container limits, e.g. cpu=2,memory=8Gi").env("AICR_LIMITS"),
    );
}

/** What the run does: network discovery, a pinned run ID, previews, a config file, the fleet. */
function addRunModeFlags(command: Command): Command {
  return command
    .addOption(
      new Option(
        "--cluster-config <path>",
        "k8s-launch-kit cluster-config.yaml (local agent mode only)",
      ).env(
        "AICR_CLUSTER_CONFIG_PATH",
      ),
    )
    .addOption(
      new Option(
        "--discover-network",
        "live network discovery (NOT read-only: widens RBAC with mutating rules)",
      )
        .default(false).env("AICR_DISCOVER_NETWORK"),
    )
    .option("--run-id <id>", "reuse this run ID (pinned CI runs); default: generated")
    .option(
      "--create-namespace",
      "create --namespace when it does not exist (labelled managed-by=aicr, kept after the run)",
      false,
    )
    .option(
      "--dry-run",
      "print the objects a run would create (ServiceAccount, Role, RoleBinding, ClusterRole, ClusterRoleBinding, staging ConfigMap, Job) in -t yaml|json; create nothing",
      false,
    )
    .option(
      "--config <file>",
      "an AICRConfig document (kind: AICRConfig) whose spec.snapshot sets what the flags set; flags win",
    )
    .option(
      "--offline",
      "with --dry-run: contact no cluster (the lookups' answers are assumed and listed)",
      false,
    )
    .option(
      "--from-daemonset",
      "read every node's snapshot from the installed DaemonSet instead (as 'aicr daemonset fetch': -o dir/, file or -)",
      false,
    );
}

/**
 * The `snapshot` command.
 *
 * @param deps CLI dependencies
 * @returns the command
 */
export function snapshotCommand(deps: CliDeps): Command {
  const command = new Command("snapshot").description(
    "deploy the aicr agent Job on a node, wait, and write its snapshot to stdout, a file or cm://<namespace>/<name>",
  );
  addSnapshotFlags(addLocalAgentFlags(command));
  const seen = new Map<string, number>();
  for (const flag of SINGLE_VALUE_FLAGS) {
    command.on(`option:${flag}`, () => {
      seen.set(flag, (seen.get(flag) ?? 0) + 1);
      if ((seen.get(flag) ?? 0) > 1) {
        throw new UsageError(`flag --${flag} can only be specified once`);
      }
    });
  }
  return command.action(namingFlags(async (flags: SnapshotFlags, cmd: Command) => {
    rejectRepeatedGlobal(cmd, "namespace");
    if (flags.config !== undefined) {
      await applySnapshotConfig(cmd, flags as unknown as Record<string, unknown>, {
        file: flags.config,
        cwd: deps.cwd,
        signal: deps.signal,
      });
    }
    const globals = globalOptions(cmd);
    const log = commandLogger(deps, globals, { prefixFromEnv: true });
    const context = { globals, log };
    if (flags.addRolesToServiceAccount !== undefined) {
      const namespace = checkedNamespace(globals);
      const target = flags.output === undefined ? undefined : parseSnapshotTarget(flags.output);
      if (target?.kind === "configmap" && target.ref.namespace !== namespace) {
        throw new UsageError(
          `Cannot grant writing '${flags.output}' as its namespace must match '--namespace' (the Role grants ConfigMaps only there): current value is '${namespace}'`,
        );
      }
      await renderRolesForServiceAccount(deps, {
        serviceAccount: flags.addRolesToServiceAccount,
        namespace,
        discoverNetwork: flags.discoverNetwork,
        ...(target?.kind === "configmap" ? { outputConfigMap: target.ref.name } : {}),
      });
      return;
    }
    rejectNetworkTopology(flags);
    if (flags.fromDaemonset) {
      const options = await fleetFetchOptions(deps, globals, {
        ...(flags.output !== undefined ? { output: flags.output } : {}),
      });
      await runFleetFetch(clusterDeps(deps, context), options);
      return;
    }
    if (deps.env("AICR_AGENT_MODE") === "true") {
      // Inside the agent pod: collect this node and write where the controller said.
      await runLocalAgent(deps, context, await localAgentOptions(deps, flags));
      return;
    }
    if (flags.offline && !flags.dryRun) {
      throw new UsageError("Cannot use '--offline' without '--dry-run': a run needs the cluster");
    }
    const options = await snapshotOptions(deps, globals, flags);
    warnAboutImage(log, flags);
    if (flags.dryRun) {
      await previewSnapshot(deps, context, options, { offline: flags.offline });
      return;
    }
    await runSnapshot(deps, context, options);
  }));
}

/**
 * `--dry-run`: the objects a run would create, from the same planning code as a run, on stdout
 * (or the `-o` file) as a YAML stream or a JSON `List`; the read-only lookups are logged.
 */
async function previewSnapshot(
  deps: CliDeps,
  context: { globals: GlobalOptions; log: Logger },
  options: SnapshotOptions,
  preview: { offline: boolean },
): Promise<void> {
  const { log } = context;
  if (options.target.kind === "configmap") {
    throw new UsageError(
      `Cannot write the dry run to '${options.output}': it prints manifests to stdout or a file`,
    );
  }
  const kube = preview.offline ? offlineClient() : connect(deps, context.globals);
  const planned = await previewSnapshotRun(
    {
      kube,
      log,
      now: deps.now,
      randomHex: () => randomBytes(8).toString("hex"),
    },
    deployOptions(deps, options),
    preview,
  );
  for (const lookup of planned.lookups) {
    log.info(preview.offline ? "dry run" : "dry run: read-only lookup", { request: lookup });
  }
  const text = options.format === "json"
    ? JSON.stringify(
      { apiVersion: "v1", kind: "List", items: planned.objects.map((o) => o.manifest) },
      null,
      2,
    ) + "\n"
    : planned.objects.map((o) => `---\n${formatManifest(o.manifest)}`).join("");
  if (options.target.kind === "file") {
    await writeFileAtomic(resolve(deps.cwd, options.target.path), text, 0o644, {
      what: "the dry run",
      signal: deps.signal,
    });
  } else deps.stdout.write(text);
  log.info("dry run: nothing was created", {
    namespace: options.namespace,
    objects: planned.objects.length,
    runID: planned.runId,
  });
}

/** A client for `--offline`: any call is a bug (an offline plan makes none). */
function offlineClient(): KubeClient {
  return new Proxy({} as KubeClient, {
    get(_target, property) {
      return () => {
        throw new Error(`Cannot call '${String(property)}' offline: a dry run made a cluster call`);
      };
    },
  });
}

/**
 * The NetworkTopology measurement (k8s-launch-kit discovery, or a cluster-config file)
 * is not implemented: rather than grant mutating RBAC or ignore a file, say so. Rendering
 * the discovery RBAC for review (`--add-roles-to-service-account`) still works.
 */
function rejectNetworkTopology(
  flags: Pick<SnapshotFlags, "discoverNetwork" | "clusterConfig">,
): void {
  if (flags.discoverNetwork) {
    throw new UsageError(
      "Cannot use '--discover-network': live k8s-launch-kit discovery (the NetworkTopology measurement) is not implemented in aicr, so the run would grant mutating RBAC for nothing",
      {
        details: [
          "review its RBAC with: aicr snapshot --add-roles-to-service-account <sa> --discover-network",
        ],
      },
    );
  }
  if (flags.clusterConfig !== undefined) {
    throw new UsageError(
      "Cannot use '--cluster-config': ingesting a k8s-launch-kit cluster-config.yaml (the NetworkTopology measurement) is not implemented in aicr",
    );
  }
}

function parseJobConfig(flags: SnapshotFlags): {
  job: AgentJobKnobs;
  autoTarget: boolean;
} {
  const nodeSelector = parseNodeSelectors(flags.nodeSelector ?? []);
  const tolerations = parseTolerations(flags.toleration ?? []);
  if (flags.os !== undefined && !isNodeOs(flags.os)) {
    throw new UsageError(
      `Cannot use '--os' as it must be one of ${
        NODE_OS_FAMILIES.join(", ")
      }: current value is '${flags.os}'`,
    );
  }
  if (flags.requireGpu && flags.runtimeClass !== undefined) {
    throw new UsageError(
      "Cannot use '--require-gpu' together with '--runtime-class': prefer --runtime-class, which gives nvidia-smi access without consuming a GPU",
    );
  }
  const format: SnapshotFormat = flags.format === "json" ? "json" : "yaml";
  const agentImage = chooseAgentImage(flags);
  const job = {
    image: agentImage.image,
    architectures: platformArchitectures(agentImage.platforms),
    jobNamePrefix: flags.jobName,
    format,
    privileged: flags.privileged !== "false",
    requireGpu: flags.requireGpu,
    nodeSelector,
    tolerations,
    imagePullSecrets: flags.imagePullSecret ?? [],
    maxNodesPerEntry: parseCount("--max-nodes-per-entry", flags.maxNodesPerEntry),
    discoverNetwork: flags.discoverNetwork,
    ...(flags.runtimeClass !== undefined ? { runtimeClass: flags.runtimeClass } : {}),
    ...(flags.os !== undefined && isNodeOs(flags.os) ? { os: flags.os } : {}),
    ...(flags.requests ? { requests: parseResourceList(flags.requests, "--requests") } : {}),
    ...(flags.limits ? { limits: parseResourceList(flags.limits, "--limits") } : {}),
  };
  return {
    job,
    autoTarget: autoTargetingAllowed({
      nodeSelector,
      requireGpu: flags.requireGpu,
      ...(flags.runtimeClass !== undefined ? { runtimeClass: flags.runtimeClass } : {}),
    }),
  };
}

/** One `aicr snapshot` run's options, parsed and checked from its flags. */
interface SnapshotOptions {
  /** The namespace (checked). */
  namespace: string;
  /** `--output`, parsed (a `cm://` names {@link namespace}). */
  target: SnapshotTarget;
  /** `--output` as given (for messages). */
  output: string | undefined;
  /** `--format` (the document's; yaml when rendering a table). */
  format: SnapshotFormat;
  /** `-t table`: render the snapshot as a table. */
  table: boolean;
  /** The agent Job's knobs. */
  job: AgentJobKnobs;
  /** Whether GPU auto-targeting may apply. */
  autoTarget: boolean;
  /** `--service-account-name`. */
  serviceAccountName?: string;
  /** `--discover-network`. */
  discoverNetwork: boolean;
  /** `--timeout`. */
  timeoutMs: number;
  /** `--no-cleanup`. */
  noCleanup: boolean;
  /** `--run-id`. */
  runId?: string;
  /** `--create-namespace`. */
  createNamespace: boolean;
  /** The controller-side projection files, read. */
  projections: Subtype[];
}

/**
 * Completes and validates every flag of a run before the cluster is contacted: projection files
 * are input too, so a bad one fails here, before anything is created.
 */
async function snapshotOptions(
  deps: CliDeps,
  globals: GlobalOptions,
  flags: SnapshotFlags,
): Promise<SnapshotOptions> {
  refuseTemplate(flags.template);
  const namespace = checkedNamespace(globals);
  const target = parseSnapshotTarget(
    checkOutputNotFormat(flags.output, { formats: ["yaml", "json", "table"] }),
  );
  const { format, table } = snapshotFormatFlag(flags.format, target);
  // The output file is checked before the cluster is touched: a folder, a path under a file or
  // an unwritable place fails now (exit 2), not after the run.
  if (target.kind === "file") await checkOutputFile(resolve(deps.cwd, target.path));
  if (target.kind === "configmap" && target.ref.namespace !== namespace) {
    throw new UsageError(
      `Cannot write the snapshot to '${flags.output}' as its namespace must match '--namespace' (the agent's Role grants ConfigMaps only there): current value is '${namespace}'`,
    );
  }
  if (flags.runId !== undefined && !isRunId(flags.runId)) {
    throw new UsageError(
      `Cannot use '--run-id' as it must be <YYYYMMDD-HHMMSS>-<16 hex>: current value is '${flags.runId}'`,
    );
  }
  const timeoutMs = parseTimeout(flags.timeout, "--timeout");
  const parsed = parseJobConfig(flags);
  const { autoTarget } = parsed;
  // Upstream passes `--debug` on to the agent with JSON logs: ["--debug", "--log-json", "snapshot", ...].
  const job = globals.debug ? { ...parsed.job, debug: true, logJson: true } : parsed.job;
  const projections = await readProjections(flags, createProjectionFileReader(deps.cwd));
  return {
    namespace,
    target,
    output: flags.output,
    format,
    table,
    job,
    autoTarget,
    ...(flags.serviceAccountName !== undefined
      ? { serviceAccountName: flags.serviceAccountName }
      : {}),
    discoverNetwork: flags.discoverNetwork,
    timeoutMs,
    noCleanup: !flags.cleanup,
    ...(flags.runId !== undefined ? { runId: flags.runId } : {}),
    createNamespace: flags.createNamespace,
    projections,
  };
}

/** The controller's options of a run (or of its preview), from the checked flags. */
function deployOptions(deps: CliDeps, options: SnapshotOptions): DeployOptions {
  const { target, projections } = options;
  return {
    namespace: options.namespace,
    job: options.job,
    serviceAccountPrefix: options.serviceAccountName ?? DEFAULT_SERVICE_ACCOUNT_PREFIX,
    ...(options.serviceAccountName !== undefined
      ? { serviceAccountName: options.serviceAccountName }
      : {}),
    ...(target.kind === "configmap" ? { output: target.ref } : {}),
    discoverNetwork: options.discoverNetwork,
    // Projections are merged into the user's ConfigMap by this process, not the agent.
    rewritesOutput: target.kind === "configmap" && projections.length > 0,
    timeoutMs: options.timeoutMs,
    noCleanup: options.noCleanup,
    autoTarget: options.autoTarget,
    ...(options.runId !== undefined ? { runId: options.runId } : {}),
    createNamespace: options.createNamespace,
    signal: deps.signal,
  };
}

async function runSnapshot(
  deps: CliDeps,
  context: { globals: GlobalOptions; log: Logger },
  options: SnapshotOptions,
): Promise<void> {
  const { log } = context;
  const { target, projections, format } = options;
  const started = deps.now().getTime();
  const kube = connect(deps, context.globals);
  let encoded = "";
  // Delivered as soon as the snapshot is read, while cleanup runs; deploySnapshot returns only
  // once cleanup is done and checked, and the closing line reports it.
  const deliver = async (result: DeployResult): Promise<void> => {
    const snapshot = mergeProjections(result.snapshot, projections);
    if (deps.signal.aborted) {
      // An interrupted run delivers nothing (no partial file); cleanup still runs.
      throw new InterruptedError(
        `Cannot deliver the snapshot: interrupted (${String(deps.signal.reason)})`,
      );
    }
    warnPlacementMismatch(snapshot, log);
    const version = buildInfo().version;
    encoded = options.table ? formatSnapshotTable(snapshot) : encodeSnapshot(snapshot, format);
    if (target.kind === "configmap") {
      // The agent wrote its document (in --format) itself; only projections need a rewrite.
      if (projections.length > 0) {
        await writeProjectedConfigMap({ kube, stdout: deps.stdout, now: deps.now }, {
          ref: target.ref,
          snapshot,
          encoded,
          format,
          version,
          projections,
          signal: deps.signal,
        });
      }
      log.info("snapshot saved to ConfigMap", { uri: options.output });
      return;
    }
    const where = await deliverSnapshot({ stdout: deps.stdout, now: deps.now }, {
      target,
      encoded,
      format,
      snapshot,
      version,
      signal: deps.signal,
    }).catch(async (error) => {
      // The snapshot is taken: it is not lost with the output that failed (an interrupted run
      // delivers nothing).
      if (target.kind === "file" && !(error instanceof InterruptedError)) {
        await keepSnapshot(deps, log, { result, encoded, format, error });
      }
      throw error;
    });
    if (target.kind === "file") log.info("snapshot saved to file", { path: where });
  };
  const result = await deploySnapshot({
    kube,
    log,
    stderr: deps.stderr,
    now: deps.now,
    randomHex: () => randomBytes(8).toString("hex"),
  }, { ...deployOptions(deps, options), deliver });
  if (deps.signal.aborted) {
    // Interrupted during cleanup, after delivery: cleanup ran; the exit code says so.
    throw new InterruptedError(
      `Cannot finish the snapshot run: interrupted (${String(deps.signal.reason)})`,
    );
  }
  logSummary(log, { result, encoded, started, now: deps.now });
}

/**
 * Keeps a taken snapshot whose output failed: a file in the temporary folder named after the run
 * (`aicr-snapshot-<runID>.<format>`), else stdout, and says where with a WARN.
 */
async function keepSnapshot(
  deps: CliDeps,
  log: Logger,
  kept: { result: DeployResult; encoded: string; format: string; error: unknown },
): Promise<void> {
  const reason = kept.error instanceof Error ? kept.error.message : String(kept.error);
  const fallback = join(tmpdir(), `aicr-snapshot-${kept.result.runId}.${kept.format}`);
  try {
    await writeFileAtomic(fallback, kept.encoded);
    log.warn("the output could not be written; the snapshot was saved here instead", {
      path: fallback,
      error: reason,
    });
  } catch {
    deps.stdout.write(kept.encoded.endsWith("\n") ? kept.encoded : kept.encoded + "\n");
    log.warn("the output could not be written; the snapshot was written to stdout instead", {
      error: reason,
    });
  }
}

/** The run's closing line: where it ran, what it delivered, what it cleaned, how long it took. */
function logSummary(
  log: Logger,
  run: { result: DeployResult; encoded: string; started: number; now: () => Date },
): void {
  log.info("snapshot complete", {
    node: run.result.nodeName ?? "",
    bytes: new TextEncoder().encode(run.encoded).length,
    cleaned: run.result.cleaned,
    seconds: ((run.now().getTime() - run.started) / 1000).toFixed(1),
    runID: run.result.runId,
  });
}

/**
 * Warns when a snapshot has no GPU data while the cluster has GPU-labelled nodes
 * (the agent probably landed on a CPU node).
 *
 * @param snapshot the snapshot
 * @param log the logger
 */
export function warnPlacementMismatch(snapshot: Snapshot, log: Logger): void {
  if (hasGpu(snapshot)) return;
  const labels = findMeasurement(snapshot, "NodeTopology")?.subtypes.find((s) =>
    s.subtype === "label"
  );
  const gpuLabels = Object.keys(labels?.data ?? {}).some((key) =>
    key.startsWith("nvidia.com/gpu.")
  );
  if (!gpuLabels) return;
  log.warn("snapshot has no GPU data but cluster topology shows GPU-capable nodes", {
    fix1: "--node-selector nvidia.com/gpu.present=true",
    fix2: "--require-gpu (needs the device plugin)",
    fix3: "--runtime-class nvidia",
  });
}
