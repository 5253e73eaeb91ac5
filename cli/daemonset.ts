/**
 * `aicr daemonset install|uninstall|render|fetch`: the DaemonSet mode's controller side. Install
 * runs the same pre-flight gate and ledger as `aicr snapshot` and places the daemon like the Job
 * (GPU nodes by default); fetch reads every node's snapshot from its daemon, concurrently, into
 * a directory of `<node>.yaml` or one multi-document YAML stream (`aicr diff --fleet` reads
 * both), with a per-node status table on stderr. See `daemon/README.md`.
 *
 * Exit codes of `fetch`: 0 when every node is ok; 4 when every failed node was denied, 5 when
 * every failed node timed out, 9 otherwise (some not Ready or unreachable: incomplete); 3 when no daemon pod
 * runs on a targeted node. The ok nodes' snapshots are written either way.
 *
 * @module
 */
import { addRedactFlags } from "./_redact.ts";
import { Command, Option } from "commander";
import {
  checkReportTargets,
  DEFAULT_MAX_ANSWER_BYTES,
  pickSettings,
  runFleetFetch,
  runInstall,
  runStatus,
  runUninstall,
  runUpgrade,
  writeRender,
} from "../controller/mod.ts";
import type {
  DaemonSetOptions,
  InstallSettings,
  SettingKind,
  UpgradeSettings,
} from "../controller/mod.ts";
import { UsageError } from "../errors.ts";
import {
  DEFAULT_DAEMON_NAME,
  DEFAULT_DAEMON_PORT,
  DEFAULT_SIGNER_REPLICAS,
  isNodeOs,
  NODE_OS_FAMILIES,
  requiredNodeAffinity,
  validateDaemonName,
} from "../manifests/mod.ts";
import {
  parseCount,
  parseDuration,
  parseNodeRequirements,
  parseNodeSelectors,
  parseResourceList,
  parseTimeout,
  parseTolerations,
} from "./_flags.ts";
import {
  addImagePlatformsFlag,
  chooseAgentImage,
  platformArchitectures,
  warnAboutImage,
} from "./_image.ts";
import { addReportOptions } from "./_report.ts";
import { fleetFetchOptions } from "./_fetch.ts";
import { checkOutputNotFormat } from "./_output.ts";
import { buildInfo } from "../version.ts";
import { baselineCommand } from "./baseline.ts";
import { signerCommand } from "./daemonset_signer.ts";
import type { CliDeps } from "./context.ts";
import { checkedNamespace, clusterDeps, defineAction } from "./globals.ts";
import type { GlobalOptions } from "./globals.ts";

/** Flags every subcommand shares (namespace and cluster come from the root's flags). */
interface CommonFlags {
  name: string;
}

/** Flags of install and render. */
interface InstallFlags extends CommonFlags {
  image?: string;
  imagePlatforms?: string;
  imagePullSecret?: string[];
  nodeSelector?: string[];
  toleration?: string[];
  allNodes: boolean;
  port: string;
  privileged: string;
  runtimeClass?: string;
  os?: string;
  requests?: string;
  limits?: string;
  service: boolean;
  baselineInterval: string;
  signer: boolean;
  signerReplicas: string;
  priorityClassName?: string;
  nodeAffinity?: string[];
}

/** Flags of install only. */
interface InstallOnlyFlags extends InstallFlags {
  timeout: string;
  wait: boolean;
  report?: string;
  createNamespace?: boolean;
  serviceMonitor: boolean;
}

/** Flags of render only. */
interface RenderFlags extends InstallFlags {
  output?: string;
  format: string;
  serviceMonitor?: boolean;
  caSecret?: string;
  existingCa?: string;
}

/** Flags of fetch. */
interface FetchFlags extends CommonFlags {
  output?: string;
  transport: string;
  concurrency: string;
  timeout: string;
  node?: string[];
  topology: boolean;
  report?: string;
  junit?: string;
  redact?: boolean;
  redactKeyFile?: string;
}

/** Flags of uninstall. */
interface UninstallFlags extends CommonFlags {
  timeout: string;
  dryRun: boolean;
  report?: string;
}

function common(command: Command): Command {
  return command
    .option("--name <name>", "the daemon's name (DaemonSet, ServiceAccount)", DEFAULT_DAEMON_NAME);
}

/** The flags of what the daemon is: install and render both take them. */
function placement(command: Command): Command {
  return addImagePlatformsFlag(
    command.addOption(
      new Option(
        "--image <ref>",
        "daemon image (default: this build's own, ghcr.io/aicr-run/aicr:<version>; a source build has none)",
      )
        .env("AICR_IMAGE"),
    ),
  )
    .option("--image-pull-secret <name...>", "Secret for pulling the image (repeatable)")
    .option(
      "--node-selector <key=value...>",
      "node selector (repeatable; default: nvidia.com/gpu.present=true)",
    )
    .option("--all-nodes", "every node, not only GPU nodes", false)
    .option(
      "--toleration <key=value:effect...>",
      "toleration (repeatable; default: tolerate all taints)",
    )
    .option("--port <port>", "port the daemons serve on", String(DEFAULT_DAEMON_PORT))
    .option("--privileged <bool>", "privileged pods (host namespaces), as aicr snapshot", "true")
    .option("--runtime-class <name>", "runtimeClassName for nvidia-smi without a GPU request")
    .option("--os <family>", `node OS family (${NODE_OS_FAMILIES.join(", ")})`)
    .option("--requests <list>", "container requests, e.g. cpu=100m,memory=256Mi")
    .option("--limits <list>", "container limits, e.g. cpu=1,memory=1Gi")
    .option(
      "--no-service",
      "no headless Service <name> over the daemon pods (for Prometheus discovery)",
    )
    .option(
      "--baseline-interval <duration>",
      "how often each daemon re-reads its cohort's baseline (aicr daemonset baseline set)",
      "60s",
    )
    .option(
      "--no-signer",
      "no in-cluster signer: only 'aicr daemonset install' and 'fetch' sign the daemons' certificates",
    )
    .option(
      "--signer-replicas <n>",
      "replicas of the in-cluster signer (one leads through its Lease)",
      String(DEFAULT_SIGNER_REPLICAS),
    )
    .option(
      "--priority-class-name <name>",
      "priorityClassName of the daemon's and the signer's pods (default: none, the cluster's default priority)",
    )
    .option(
      "--node-affinity <requirement...>",
      "required node label requirement, all must hold (repeatable): 'key in (a,b)', 'key notin (a,b)', 'key=value', 'key!=value', 'key', '!key'",
    );
}

/** The flags only an install has: it waits, and asks the cluster for the ServiceMonitor CRD. */
function installOnly(command: Command): Command {
  return command
    .option("--timeout <duration>", "how long install waits for the pods to be Ready", "2m")
    .option("--no-wait", "do not wait for the pods")
    .option(
      "--no-service-monitor",
      "no ServiceMonitor, even where the monitoring.coreos.com/v1 CRD exists",
    );
}

/** Install's flags that do not shape the objects, or that an upgrade moves (the image). */
const UNRECORDED = new Set(["image", "imagePlatforms", "timeout", "wait"]);

/**
 * The settings an install records on its DaemonSet (`aicr.run/install-settings`) and an upgrade
 * reuses: every flag install declares for what the daemon is, bar {@link UNRECORDED}; read off
 * the flags' own declarations, so a new one is recorded with no list to keep.
 */
function recordedSettings(): { kinds: Record<string, SettingKind>; defaults: InstallSettings } {
  const { command, options } = recordedOptions();
  const kinds: Record<string, SettingKind> = {};
  for (const option of options) {
    const key = option.attributeName();
    kinds[key] = option.variadic
      ? "strings"
      : option.required || option.optional
      ? "string"
      : "boolean";
  }
  return { kinds, defaults: pickSettings(kinds, command.opts()) };
}

/** A command with install's flags (defaults unparsed), and those of them an install records. */
function recordedOptions(): { command: Command; options: Option[] } {
  const command = installOnly(placement(new Command()));
  const options = command.options.filter((option) => !UNRECORDED.has(option.attributeName()));
  return { command, options };
}

/**
 * The long flags whose values an install records and an upgrade keeps, in declaration order
 * (`docs/daemonset.md` names them; a test holds that list to this one).
 *
 * @returns the flags, e.g. `--port`
 */
export function recordedSettingFlags(): string[] {
  return recordedOptions().options.map((option) => option.long ?? option.flags);
}

/** What the install's and the upgrade's flags (or settings) make: the daemon, its ServiceMonitor. */
function installOptions(flags: InstallOnlyFlags, globals: GlobalOptions): DaemonSetOptions {
  return {
    ...daemonOptions(flags, globals),
    // Left undefined, the install asks discovery whether the CRD exists.
    ...(flags.serviceMonitor ? {} : { serviceMonitor: false }),
  };
}

/** The upgrade's settings: the command line's, and which of them it gives. */
function upgradeSettings(
  flags: InstallOnlyFlags,
  globals: GlobalOptions,
  command: Command,
): UpgradeSettings<DaemonSetOptions> {
  const { kinds, defaults } = recordedSettings();
  return {
    kinds,
    defaults,
    flags: pickSettings(kinds, flags as unknown as Record<string, unknown>),
    given: Object.keys(kinds).filter((k) =>
      ["cli", "env"].includes(command.getOptionValueSource(k) ?? "")
    ),
    linked: [["allNodes", "nodeSelector"]],
    // The settings alone, none of the command line's: what is not in them is unset.
    toOptions: (settings) => {
      const rest = Object.fromEntries(Object.entries(flags).filter(([k]) => !(k in kinds)));
      return installOptions({ ...rest, ...settings } as unknown as InstallOnlyFlags, globals);
    },
  };
}

function daemonOptions(flags: InstallFlags, globals: GlobalOptions): DaemonSetOptions {
  const namespace = checkedNamespace(globals);
  const name = validateDaemonName(flags.name);
  const port = parseCount("--port", flags.port);
  if (port < 1 || port > 65_535) {
    throw new UsageError(
      `Cannot use '--port' as it must be a whole number from 1 to 65535: current value is '${flags.port}'`,
    );
  }
  const privileged = flags.privileged.trim().toLowerCase();
  if (privileged !== "true" && privileged !== "false") {
    throw new UsageError(
      `Cannot use '--privileged' as it must be 'true' or 'false': current value is '${flags.privileged}'`,
    );
  }
  if (flags.os !== undefined && !isNodeOs(flags.os)) {
    throw new UsageError(
      `Cannot use '--os' as it must be one of ${
        NODE_OS_FAMILIES.join(", ")
      }: current value is '${flags.os}'`,
    );
  }
  const nodeSelector = parseNodeSelectors(flags.nodeSelector ?? []);
  if (flags.allNodes && Object.keys(nodeSelector).length > 0) {
    throw new UsageError("Cannot use '--all-nodes' together with '--node-selector'");
  }
  const agentImage = chooseAgentImage(flags);
  const architectures = platformArchitectures(agentImage.platforms);
  const affinity = requiredNodeAffinity({
    architectures,
    requirements: parseNodeRequirements(flags.nodeAffinity ?? []),
  });
  return {
    namespace,
    name,
    port,
    image: agentImage.image,
    architectures,
    ...(flags.nodeAffinity?.length && affinity ? { affinity } : {}),
    ...(flags.priorityClassName !== undefined
      ? { priorityClassName: flags.priorityClassName }
      : {}),
    privileged: privileged === "true",
    nodeSelector,
    allNodes: flags.allNodes,
    tolerations: parseTolerations(flags.toleration ?? []),
    imagePullSecrets: flags.imagePullSecret ?? [],
    ...(flags.runtimeClass !== undefined ? { runtimeClass: flags.runtimeClass } : {}),
    ...(flags.os !== undefined && isNodeOs(flags.os) ? { os: flags.os } : {}),
    ...(flags.requests ? { requests: parseResourceList(flags.requests, "--requests") } : {}),
    ...(flags.limits ? { limits: parseResourceList(flags.limits, "--limits") } : {}),
    service: flags.service,
    signer: flags.signer,
    signerReplicas: signerReplicas(flags.signerReplicas),
    extraArgs: [
      "--baseline-interval",
      `${parseDuration(flags.baselineInterval, "--baseline-interval") / 1000}s`,
    ],
  };
}

function signerReplicas(value: string): number {
  const replicas = parseCount("--signer-replicas", value);
  if (replicas < 1 || replicas > 10) {
    throw new UsageError(
      `Cannot use '--signer-replicas' as it must be a whole number from 1 to 10: current value is '${value}'`,
    );
  }
  return replicas;
}

function installCommand(deps: CliDeps): Command {
  const command = installOnly(placement(common(new Command("install"))))
    .description(
      "install the daemon: gate, ServiceAccounts and RBAC, TLS Secret and CA ConfigMap, DaemonSet; wait for its pods",
    );
  command.option(
    "--create-namespace",
    "create --namespace when it does not exist (labelled managed-by=aicr, kept after uninstall)",
    false,
  );
  return defineAction(
    addReportOptions(command),
    deps,
    async (flags: InstallOnlyFlags, { globals, log }) => {
      warnAboutImage(log, flags);
      await runInstall(clusterDeps(deps, { globals, log }), {
        ...installOptions(flags, globals),
        installSettings: pickSettings(recordedSettings().kinds, { ...flags }),
        timeoutMs: parseTimeout(flags.timeout, "--timeout"),
        noWait: !flags.wait,
        createNamespace: flags.createNamespace === true,
        reports: await checkReportTargets(deps.cwd, flags),
      });
    },
  );
}

function renderCommand(deps: CliDeps): Command {
  const command = placement(common(new Command("render")))
    .description(
      "write the objects install creates (kubectl apply -f, kustomize, GitOps); nothing is contacted",
    )
    .option("-o, --output <file>", "where the manifests go (default: stdout)")
    .option("-t, --format <format>", "yaml (one stream) or json (a v1 List)", "yaml")
    .option(
      "--service-monitor",
      "also a prometheus-operator ServiceMonitor (instead of the Service's scrape annotations)",
    )
    .option(
      "--ca-secret <file>",
      "reuse the CA Secret in this file (an earlier render's output, or the Secret <name>-signer as YAML)",
    )
    .option(
      "--existing-ca <file>",
      "the CA's certificate only (PEM or ConfigMap <name>-ca): no Secret is rendered, <name>-signer must exist",
    );
  return defineAction(command, deps, async (flags: RenderFlags, { globals, log }) => {
    warnAboutImage(log, flags);
    const options = {
      ...daemonOptions(flags, globals),
      serviceMonitor: flags.service !== false && flags.serviceMonitor === true,
      installSettings: pickSettings(recordedSettings().kinds, {
        ...flags,
        serviceMonitor: flags.serviceMonitor === true,
      }),
    };
    const format = flags.format.trim().toLowerCase();
    if (format !== "yaml" && format !== "json") {
      throw new UsageError(
        `Cannot use '--format' as it must be 'yaml' or 'json': current value is '${flags.format}'`,
      );
    }
    const output = checkOutputNotFormat(flags.output, { formats: ["yaml", "json"] });
    await writeRender({
      log,
      stdout: deps.stdout,
      cwd: deps.cwd,
      signal: deps.signal,
      now: deps.now,
    }, {
      ...options,
      format,
      ...(output !== undefined ? { output } : {}),
      ...(flags.caSecret !== undefined ? { caSecret: flags.caSecret } : {}),
      ...(flags.existingCa !== undefined ? { existingCa: flags.existingCa } : {}),
    });
  });
}

function uninstallCommand(deps: CliDeps): Command {
  const command = common(new Command("uninstall"))
    .description(
      "remove the daemon: every object with its labels, deleted by UID, then checks none is left",
    )
    .option("--timeout <duration>", "how long to wait for the pods to go", "1m")
    .option("--dry-run", "only list what would be deleted", false);
  return defineAction(
    addReportOptions(command),
    deps,
    async (flags: UninstallFlags, { globals, log }) => {
      // Nothing to clean up after a signal: every request ends at once; a re-run finishes.
      await runUninstall(clusterDeps(deps, { globals, log }, { interruptible: true }), {
        namespace: checkedNamespace(globals),
        name: validateDaemonName(flags.name),
        timeoutMs: parseTimeout(flags.timeout, "--timeout"),
        dryRun: flags.dryRun,
        reports: await checkReportTargets(deps.cwd, flags),
      });
    },
  );
}

function upgradeCommand(deps: CliDeps): Command {
  const command = placement(common(new Command("upgrade")))
    .description(
      "upgrade the install in place to this build's image (or --image), server-side applied; every flag not given keeps the install's value (recorded on its DaemonSet, annotation aicr.run/install-settings), a flag given overrides it; CA, Lease and baselines kept; a failed rolling update is rolled back",
    )
    .option("--timeout <duration>", "how long the rolling update may take", "5m")
    .option(
      "--no-service-monitor",
      "no ServiceMonitor, even where the monitoring.coreos.com/v1 CRD exists",
    );
  return defineAction(
    command,
    deps,
    async (flags: InstallOnlyFlags, { globals, log }, cmd) => {
      warnAboutImage(log, flags);
      await runUpgrade(clusterDeps(deps, { globals, log }), {
        ...installOptions(flags, globals),
        settings: upgradeSettings(flags, globals, cmd),
        timeoutMs: parseTimeout(flags.timeout, "--timeout"),
      });
    },
  );
}

/** Flags of status. */
interface StatusFlags extends CommonFlags {
  output?: string;
  format: string;
}

function statusCommand(deps: CliDeps): Command {
  const command = common(new Command("status"))
    .description(
      "the install's health: each node's daemon (Ready, version, certificate), the signer's leader, pending or refused requests, baselines; exit 9 when unhealthy",
    )
    .option("-o, --output <file>", "where the answer goes (default: stdout)")
    .option("-t, --format <format>", "table or json", "table");
  return defineAction(command, deps, async (flags: StatusFlags, { globals, log }) => {
    const format = flags.format.trim().toLowerCase();
    if (format !== "table" && format !== "json") {
      throw new UsageError(
        `Cannot use '--format' as it must be 'table' or 'json': current value is '${flags.format}'`,
      );
    }
    const output = checkOutputNotFormat(flags.output, { formats: ["table", "json"] });
    // A read only: SIGINT/SIGTERM ends its requests at once.
    const cluster = clusterDeps(deps, { globals, log }, { interruptible: true });
    await runStatus({
      kube: cluster.connect(),
      log,
      now: deps.now,
      signal: deps.signal,
      stdout: deps.stdout,
      cwd: deps.cwd,
    }, {
      namespace: checkedNamespace(globals),
      name: validateDaemonName(flags.name),
      format,
      cliVersion: buildInfo().version,
      ...(output !== undefined ? { output } : {}),
    });
  });
}

function fetchCommand(deps: CliDeps): Command {
  const command = common(new Command("fetch"))
    .description(
      "fetch every node's snapshot from its daemon, concurrently, with a status per node",
    )
    .option(
      "-o, --output <dir|file|->",
      "a directory (existing, or ending in /) gets <node>.yaml each; a file or - one YAML stream",
    )
    .option(
      "--transport <mode>",
      "auto (direct, else the API server's pod proxy), direct or proxy",
      "auto",
    )
    .option("--concurrency <n>", "nodes asked at once", "16")
    .option("--timeout <duration>", "per-node deadline", "30s")
    .option(
      "--max-answer-bytes <n>",
      "largest answer read from one daemon (streamed and cut; that node fails as too-large)",
      String(DEFAULT_MAX_ANSWER_BYTES),
    )
    .option("--node <name...>", "only these nodes (repeatable)")
    .option(
      "--no-topology",
      "do not list the nodes for the cluster's NodeTopology (written once: _cluster-topology.yaml, or the stream's last document)",
    );
  return defineAction(
    addRedactFlags(addReportOptions(command, { junit: true })),
    deps,
    async (flags: FetchFlags, { globals, log }) => {
      await runFleetFetch(
        clusterDeps(deps, { globals, log }),
        await fleetFetchOptions(deps, globals, flags),
      );
    },
  );
}

/**
 * The `daemonset` command and its subcommands.
 *
 * @param deps CLI dependencies
 * @returns the command
 */
export function daemonsetCommand(deps: CliDeps): Command {
  return new Command("daemonset")
    .description(
      "install, fetch from, or remove the aicr DaemonSet (one HTTPS daemon per node; see daemon/README.md)",
    )
    .addCommand(installCommand(deps))
    .addCommand(fetchCommand(deps))
    .addCommand(uninstallCommand(deps))
    .addCommand(upgradeCommand(deps))
    .addCommand(renderCommand(deps))
    .addCommand(baselineCommand(deps))
    .addCommand(statusCommand(deps))
    .addCommand(signerCommand(deps));
}
