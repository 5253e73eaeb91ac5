/**
 * `aicr snapshot`: deploy the run-scoped agent Job, wait, read the snapshot, deliver it
 * and clean up, exactly as the upstream v1.0.0 documentation describes. With
 * `AICR_AGENT_MODE=true` (inside the agent pod) it collects locally instead, and with
 * `--add-roles-to-service-account` it only renders RBAC manifests.
 *
 * @module
 */
import { redactorFromFlags } from "./_redact.ts";
import { randomBytes } from "node:crypto";
import { resolve } from "node:path";
import { Command, Option } from "commander";
import { runLocalAgent } from "../agent/mod.ts";
import {
  previewSnapshot,
  renderRolesForServiceAccount,
  renderScheduledSnapshot,
  runFleetFetch,
  runSnapshot,
} from "../controller/mod.ts";
import { createProjectionFileReader, readProjections } from "../collectors/mod.ts";
import { UsageError } from "../errors.ts";
import { checkOutputFile } from "../io.ts";
import {
  autoTargetingAllowed,
  DEFAULT_JOB_NAME_PREFIX,
  DEFAULT_SERVICE_ACCOUNT_PREFIX,
  DEFAULT_TIMEOUT_MS,
  isNodeOs,
  isRunId,
  NODE_OS_FAMILIES,
} from "../manifests/mod.ts";
import {
  parseCount,
  parseNodeSelectors,
  parseResourceList,
  parseTimeout,
  parseTolerations,
} from "./_flags.ts";
import type { AgentJobKnobs, SnapshotRunOptions } from "../controller/mod.ts";
import { parseSnapshotTarget } from "../snapshot/mod.ts";
import type { SnapshotFormat } from "../snapshot/mod.ts";
import {
  addImagePlatformsFlag,
  chooseAgentImage,
  platformArchitectures,
  warnAboutImage,
} from "./_image.ts";
import { addLocalAgentFlags, localAgentDeps, localAgentOptions } from "./_agent.ts";
import type { LocalAgentFlags } from "./_agent.ts";
import { applySnapshotConfig } from "./_config.ts";
import type { CliDeps } from "./context.ts";
import { checkOutputNotFormat, refuseTemplate, snapshotFormatFlag } from "./_output.ts";
import { fleetFetchOptions } from "./_fetch.ts";
import {
  addScheduleFlags,
  refuseScheduleFlagsOnRun,
  scheduledSnapshotOptions,
} from "./_schedule.ts";
import type { ScheduleFlags } from "./_schedule.ts";
import { checkedNamespace, clusterDeps, defineAction, rejectRepeatedGlobal } from "./globals.ts";
import type { GlobalOptions, VerbContext } from "./globals.ts";

/** Flags of `aicr snapshot` (namespace and cluster come from the root's flags). */
interface SnapshotFlags extends LocalAgentFlags, ScheduleFlags {
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
  return addScheduleFlags(addRunModeFlags(addAgentPodFlags(addAgentPlacementFlags(command))));
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
    .option("--timeout <duration>", "wait timeout", `${DEFAULT_TIMEOUT_MS / 60_000}m`)
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
 * The help headings of `aicr snapshot`, in the order they print, by long flag: the Job verb's
 * own flags first; the files this CLI reads and merges; the other modes. A flag not listed stays
 * under "Options:".
 */
const SNAPSHOT_HELP_GROUPS: readonly (readonly [string, readonly string[]])[] = [
  ["Output Options:", [
    "--output",
    "--format",
    "--template",
    "--max-nodes-per-entry",
    "--redact",
    "--redact-key-file",
  ]],
  ["Agent Job Options:", [
    "--image",
    "--image-platforms",
    "--image-pull-secret",
    "--job-name",
    "--service-account-name",
    "--node-selector",
    "--toleration",
    "--require-gpu",
    "--runtime-class",
    "--privileged",
    "--os",
    "--requests",
    "--limits",
    "--timeout",
    "--no-cleanup",
    "--run-id",
    "--create-namespace",
  ]],
  ["Provider Data Options (files this CLI reads, merged into the K8s measurement):", [
    "--oke-addons",
    "--aks-gpu-pools",
    "--gke-gpu-pools",
  ]],
  ["Other Modes (each instead of a run):", [
    "--dry-run",
    "--offline",
    "--config",
    "--add-roles-to-service-account",
    "--from-daemonset",
    "--render-cronjob",
    "--schedule",
    "--keep-last",
    "--discover-network",
    "--cluster-config",
  ]],
];

/**
 * Flags only a local collection reads (`aicr agent`, or this verb inside the agent pod): hidden
 * from the Job verb's help, and refused on its command line, where they would change nothing.
 */
const LOCAL_COLLECTION_FLAGS: readonly string[] = ["--host-root", "--systemd-unit"];

/** Puts the Job verb's flags under their headings and hides the local-collection ones. */
function groupSnapshotHelp(command: Command): Command {
  const groupOf = new Map(
    SNAPSHOT_HELP_GROUPS.flatMap(([heading, flags]) => flags.map((flag) => [flag, heading])),
  );
  // Commander prints the groups in the order their first flag was added: add the order here.
  const order = SNAPSHOT_HELP_GROUPS.flatMap(([, flags]) => flags);
  const rank = (long: string | undefined) => {
    const at = order.indexOf(long ?? "");
    return at < 0 ? order.length : at;
  };
  // The array is commander's own (typed readonly); parsing does not depend on its order.
  (command.options as Option[]).sort((a, b) => rank(a.long) - rank(b.long));
  for (const option of command.options) {
    if (LOCAL_COLLECTION_FLAGS.includes(option.long ?? "")) option.hideHelp();
    const heading = groupOf.get(option.long ?? "");
    if (heading) option.helpGroup(heading);
  }
  return command.addHelpText(
    "after",
    `\nLocal collection flags (${LOCAL_COLLECTION_FLAGS.join(", ")}) belong to 'aicr agent'\n` +
      "(see aicr agent --help): the agent pod reads its own node.",
  );
}

/**
 * A local-collection flag typed on a Job run would change nothing (the pod reads its own node):
 * refused, naming the verb that takes it. Inside the agent pod they still work.
 */
function refuseLocalCollectionFlags(command: Command, deps: CliDeps): void {
  if (deps.env("AICR_AGENT_MODE") === "true") return;
  for (const option of command.options) {
    const long = option.long ?? "";
    if (!LOCAL_COLLECTION_FLAGS.includes(long)) continue;
    if (command.getOptionValueSource(option.attributeName()) !== "cli") continue;
    throw new UsageError(
      `Cannot use '${long}' with a Job run as the agent pod reads its own node: collect this host with 'aicr agent ${long} ...'`,
    );
  }
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
  groupSnapshotHelp(addSnapshotFlags(addLocalAgentFlags(command)));
  const seen = new Map<string, number>();
  for (const flag of SINGLE_VALUE_FLAGS) {
    command.on(`option:${flag}`, () => {
      seen.set(flag, (seen.get(flag) ?? 0) + 1);
      if ((seen.get(flag) ?? 0) > 1) {
        throw new UsageError(`flag --${flag} can only be specified once`);
      }
    });
  }
  return defineAction(
    command,
    deps,
    (flags: SnapshotFlags, context) => snapshotAction(deps, flags, context),
    {
      log: { prefixFromEnv: true },
      complete: async (cmd) => {
        rejectRepeatedGlobal(cmd, "namespace");
        refuseLocalCollectionFlags(cmd, deps);
        const flags = cmd.opts() as SnapshotFlags;
        if (flags.config === undefined) return;
        await applySnapshotConfig(cmd, flags as unknown as Record<string, unknown>, {
          file: flags.config,
          cwd: deps.cwd,
          signal: deps.signal,
        });
      },
    },
  );
}

/** The verb's one choice: which library call its flags ask for. */
async function snapshotAction(
  deps: CliDeps,
  flags: SnapshotFlags,
  context: VerbContext,
): Promise<void> {
  const { globals, log } = context;
  if (flags.addRolesToServiceAccount !== undefined) {
    await grantRoles(deps, flags, flags.addRolesToServiceAccount, checkedNamespace(globals));
    return;
  }
  rejectNetworkTopology(flags);
  if (flags.renderCronjob) {
    const { job, autoTarget } = parseJobConfig(flags);
    warnAboutImage(log, flags);
    await renderScheduledSnapshot(
      { stdout: deps.stdout, cwd: deps.cwd, log },
      scheduledSnapshotOptions(flags, {
        namespace: checkedNamespace(globals),
        job,
        autoTarget,
        signal: deps.signal,
      }),
    );
    return;
  }
  refuseScheduleFlagsOnRun(flags);
  if (flags.fromDaemonset) {
    const options = await fleetFetchOptions(deps, globals, {
      ...(flags.output !== undefined ? { output: flags.output } : {}),
      ...(flags.redact ? { redact: true } : {}),
      ...(flags.redactKeyFile !== undefined ? { redactKeyFile: flags.redactKeyFile } : {}),
    });
    await runFleetFetch(clusterDeps(deps, context), options);
    return;
  }
  if (deps.env("AICR_AGENT_MODE") === "true") {
    // Inside the agent pod: collect this node and write where the controller said.
    await runLocalAgent(localAgentDeps(deps, context), await localAgentOptions(deps, flags));
    return;
  }
  if (flags.offline && !flags.dryRun) {
    throw new UsageError("Cannot use '--offline' without '--dry-run': a run needs the cluster");
  }
  const options = await snapshotOptions(deps, globals, flags);
  warnAboutImage(log, flags);
  const run = clusterDeps(deps, context);
  if (flags.dryRun) {
    await previewSnapshot({ ...run, cwd: deps.cwd }, options, { offline: flags.offline });
    return;
  }
  await runSnapshot({
    ...run,
    kube: run.connect(),
    ...(run.connectInterruptible ? { preflightKube: run.connectInterruptible() } : {}),
  }, options);
}

/** `--add-roles-to-service-account`: print the Roles a standing account needs, touch nothing. */
async function grantRoles(
  deps: CliDeps,
  flags: SnapshotFlags,
  serviceAccount: string,
  namespace: string,
): Promise<void> {
  const target = flags.output === undefined ? undefined : parseSnapshotTarget(flags.output);
  if (target?.kind === "configmap" && target.ref.namespace !== namespace) {
    throw new UsageError(
      `Cannot grant writing '${flags.output}' as its namespace must match '--namespace' (the Role grants ConfigMaps only there): current value is '${namespace}'`,
    );
  }
  await renderRolesForServiceAccount({ ...deps, randomHex }, {
    serviceAccount,
    namespace,
    discoverNetwork: flags.discoverNetwork,
    ...(target?.kind === "configmap" ? { outputConfigMap: target.ref.name } : {}),
  });
}

function randomHex(): string {
  return randomBytes(8).toString("hex");
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

/**
 * Completes and validates every flag of a run before the cluster is contacted: projection files
 * are input too, so a bad one fails here, before anything is created.
 */
async function snapshotOptions(
  deps: CliDeps,
  globals: GlobalOptions,
  flags: SnapshotFlags,
): Promise<SnapshotRunOptions> {
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
  // `--log-json` goes on too, so the agent's relayed lines keep their fields; the CLI's logger
  // re-emits each line in its own format either way.
  const job = {
    ...parsed.job,
    ...(globals.debug ? { debug: true } : {}),
    ...(globals.debug || globals.logJson ? { logJson: true } : {}),
  };
  const projections = await readProjections(flags, createProjectionFileReader(deps.cwd));
  const redactor = await redactorFromFlags(flags, deps);
  return {
    namespace,
    job,
    serviceAccountPrefix: flags.serviceAccountName ?? DEFAULT_SERVICE_ACCOUNT_PREFIX,
    ...(flags.serviceAccountName !== undefined
      ? { serviceAccountName: flags.serviceAccountName }
      : {}),
    ...(target.kind === "configmap" ? { output: target.ref } : {}),
    discoverNetwork: flags.discoverNetwork,
    timeoutMs,
    noCleanup: !flags.cleanup,
    autoTarget,
    ...(flags.runId !== undefined ? { runId: flags.runId } : {}),
    createNamespace: flags.createNamespace,
    signal: deps.signal,
    delivery: {
      target,
      ...(flags.output !== undefined ? { output: flags.output } : {}),
      format,
      table,
      projections,
      ...(redactor ? { redactor } : {}),
    },
  };
}
