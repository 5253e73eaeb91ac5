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
import { randomBytes } from "node:crypto";
import { readFile, stat } from "node:fs/promises";
import { resolve } from "node:path";
import { Command, Option } from "commander";
import {
  caCertificateFromFile,
  caFromSecretFile,
  createFleetWriter,
  DEFAULT_MAX_ANSWER_BYTES,
  fetchFleet,
  FLEET_TRANSPORTS,
  fleetError,
  fleetReportContent,
  formatFleetTable,
  installDaemonSet,
  installReportContent,
  makeDaemonCa,
  renderDaemonSet,
  uninstallDaemonSet,
  uninstallReportContent,
} from "../controller/mod.ts";
import type { DaemonSetOptions, FleetOutput, FleetTransport, RenderCa } from "../controller/mod.ts";
import { TimeoutError, ToolError, UsageError } from "../errors.ts";
import { writeFileAtomic } from "../io.ts";
import type { Logger } from "../log.ts";
import { checkOutputFile, checkOutputFolder } from "../io.ts";
import {
  DEFAULT_DAEMON_NAME,
  DEFAULT_DAEMON_PORT,
  formatManifest,
  isNodeOs,
  NODE_OS_FAMILIES,
  validateDaemonName,
} from "../manifests/mod.ts";
import {
  namingFlags,
  parseCount,
  parseDuration,
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
import { addReportOptions, reportTargets, runReported } from "./_report.ts";
import { checkOutputNotFormat } from "./_output.ts";
import type { ReportTargets } from "./_report.ts";
import { baselineCommand } from "./baseline.ts";
import { signerCommand } from "./daemonset_signer.ts";
import type { CliDeps } from "./context.ts";
import { checkedNamespace, commandLogger, connect, globalOptions } from "./globals.ts";
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
  return {
    namespace,
    name,
    port,
    image: agentImage.image,
    architectures: platformArchitectures(agentImage.platforms),
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
    extraArgs: [
      "--baseline-interval",
      `${parseDuration(flags.baselineInterval, "--baseline-interval") / 1000}s`,
    ],
  };
}

async function fleetOutput(value: string | undefined, cwd: string): Promise<FleetOutput> {
  if (value === undefined || value === "-") return { kind: "stream", path: undefined };
  const path = resolve(cwd, value);
  const info = await stat(path).catch(() => undefined);
  // Checked before the cluster is contacted: a path that cannot be made or written fails now
  // (exit 2), not after every node was asked.
  if (value.endsWith("/") || info?.isDirectory()) {
    await checkOutputFolder(path);
    return { kind: "directory", path };
  }
  await checkOutputFile(path, { what: "snapshots" });
  return { kind: "stream", path };
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
  return addReportOptions(command)
    .action(namingFlags(async (flags: InstallOnlyFlags, cmd: Command) => {
      const globals = globalOptions(cmd);
      const log = commandLogger(deps, globals);
      warnAboutImage(log, flags);
      const options = {
        ...daemonOptions(flags, globals),
        // Left undefined, the install asks discovery whether the CRD exists.
        ...(flags.serviceMonitor ? {} : { serviceMonitor: false }),
      };
      const timeoutMs = parseTimeout(flags.timeout, "--timeout");
      const targets = await reportTargets(deps, flags);
      const started = deps.now().getTime();
      await runReported(deps, targets, {
        kind: "DaemonSetInstallReport",
        namespace: options.namespace,
        ...(options.name ? { name: options.name } : {}),
      }, async () => {
        const result = await installDaemonSet({
          kube: connect(deps, globals),
          log,
          now: deps.now,
          randomHex: () => randomBytes(8).toString("hex"),
        }, {
          ...options,
          timeoutMs,
          noWait: !flags.wait,
          createNamespace: flags.createNamespace === true,
          signal: deps.signal,
        });
        const content = installReportContent(result);
        if (!result.ready) {
          return {
            content,
            failure: new TimeoutError(
              `Cannot confirm the daemon is serving: ${
                result.pods.filter((p) => !p.ready).length
              } of ${result.desired} pods are not Ready after ${flags.timeout}`,
              {
                details: [
                  ...result.pods.filter((p) => !p.ready).map((p) =>
                    `  ${p.node}: ${p.pod} ${p.unschedulable ?? p.detail ?? ""}`
                  ),
                  `  it stays installed; remove it with: aicr daemonset uninstall -n ${options.namespace}`,
                ],
              },
            ),
          };
        }
        log.info("daemon ready", {
          namespace: options.namespace,
          nodes: result.pods.length,
          objects: result.created.length,
          seconds: ((deps.now().getTime() - started) / 1000).toFixed(1),
          runID: result.runId,
        });
        return { content };
      });
    }));
}

function renderCommand(deps: CliDeps): Command {
  return placement(common(new Command("render")))
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
    )
    .action(namingFlags(async (flags: RenderFlags, cmd: Command) => {
      const globals = globalOptions(cmd);
      const log = commandLogger(deps, globals);
      warnAboutImage(log, flags);
      const options = {
        ...daemonOptions(flags, globals),
        serviceMonitor: flags.service !== false && flags.serviceMonitor === true,
      };
      const format = flags.format.trim().toLowerCase();
      if (format !== "yaml" && format !== "json") {
        throw new UsageError(
          `Cannot use '--format' as it must be 'yaml' or 'json': current value is '${flags.format}'`,
        );
      }
      const output = checkOutputNotFormat(flags.output, { formats: ["yaml", "json"] });
      const ca = await renderCa(deps, flags, options.name ?? DEFAULT_DAEMON_NAME);
      const text = formatRendered(renderDaemonSet({ ...options, ca }).objects, format);
      if (output === undefined || output === "-") deps.stdout.write(text);
      else {
        await writeFileAtomic(resolve(deps.cwd, output), text, ca.caKey ? 0o600 : 0o644, {
          what: "the manifests",
          signal: deps.signal,
        });
      }
      if (options.service !== false && !options.serviceMonitor) {
        log.info(
          "render: the Service carries prometheus.io/scrape annotations (--service-monitor renders a ServiceMonitor instead)",
        );
      }
      if (flags.caSecret) {
        log.info("render: the CA of --ca-secret is kept", { file: flags.caSecret });
      } else if (flags.existingCa) {
        log.info(
          "render: no CA Secret rendered; the daemons' certificates are signed once Secret <name>-signer holds the CA (tls.crt, tls.key)",
          { secret: `${options.namespace}/${options.name ?? DEFAULT_DAEMON_NAME}-signer` },
        );
      } else {
        log.warn(
          "the rendered Secret holds a freshly made CA key: keep the output private; re-render with --ca-secret <this output> to keep the CA",
        );
      }
    }));
}

/** The CA of a render: kept from a file (--ca-secret, --existing-ca), or new. */
async function renderCa(deps: CliDeps, flags: RenderFlags, name: string): Promise<RenderCa> {
  if (flags.caSecret && flags.existingCa) {
    throw new UsageError("Cannot use '--ca-secret' together with '--existing-ca'");
  }
  const read = async (flag: string, path: string) => {
    try {
      return await readFile(resolve(deps.cwd, path), "utf8");
    } catch (error) {
      throw new UsageError(
        `Cannot read '${flag}' file '${path}': ${(error as Error).message.split("\n")[0]}`,
      );
    }
  };
  if (flags.caSecret) {
    return caFromSecretFile(await read("--ca-secret", flags.caSecret), {
      path: flags.caSecret,
      name,
    });
  }
  if (flags.existingCa) {
    return caCertificateFromFile(await read("--existing-ca", flags.existingCa), {
      path: flags.existingCa,
      name,
    });
  }
  return makeDaemonCa({ now: deps.now() });
}

/** The rendered objects as one YAML stream, or one JSON `List` (what kubectl prints for many). */
function formatRendered(
  objects: readonly { manifest: unknown }[],
  format: "yaml" | "json",
): string {
  if (format === "json") {
    return JSON.stringify(
      { apiVersion: "v1", kind: "List", items: objects.map((o) => o.manifest) },
      null,
      2,
    ) + "\n";
  }
  return objects.map((o) => `---\n${formatManifest(o.manifest)}`).join("");
}

function uninstallCommand(deps: CliDeps): Command {
  const command = common(new Command("uninstall"))
    .description(
      "remove the daemon: every object with its labels, deleted by UID, then checks none is left",
    )
    .option("--timeout <duration>", "how long to wait for the pods to go", "1m")
    .option("--dry-run", "only list what would be deleted", false);
  return addReportOptions(command)
    .action(namingFlags(async (flags: UninstallFlags, cmd: Command) => {
      const globals = globalOptions(cmd);
      const log = commandLogger(deps, globals);
      const namespace = checkedNamespace(globals);
      const name = validateDaemonName(flags.name);
      const timeoutMs = parseTimeout(flags.timeout, "--timeout");
      const targets = await reportTargets(deps, flags);
      const started = deps.now().getTime();
      await runReported(
        deps,
        targets,
        { kind: "DaemonSetUninstallReport", namespace, name },
        async () => {
          const kube = connect(deps, globals);
          const result = await uninstallDaemonSet({ kube, log, now: deps.now }, {
            namespace,
            name,
            timeoutMs,
            dryRun: flags.dryRun,
          });
          for (const o of result.swept) {
            log.info(o.result === "found" ? "would delete" : o.result, {
              kind: o.kind,
              name: o.namespace ? `${o.namespace}/${o.name}` : o.name,
              uid: o.uid,
            });
          }
          for (const csr of result.csrs) {
            log.info(flags.dryRun ? "would delete" : "deleted", {
              kind: "CertificateSigningRequest",
              name: csr,
            });
          }
          const content = uninstallReportContent(result);
          if (result.remaining.length > 0) {
            return {
              content,
              failure: new ToolError(
                `Cannot finish the uninstall of '${namespace}/${name}': ${result.remaining.length} object(s) remain (${
                  result.remaining.join(", ")
                })`,
                "internal",
              ),
            };
          }
          log.info(result.swept.length === 0 ? "uninstall: nothing was installed" : "uninstalled", {
            namespace,
            name,
            deleted: result.swept.filter((o) => o.result === "deleted").length,
            seconds: ((deps.now().getTime() - started) / 1000).toFixed(1),
          });
          return { content };
        },
      );
    }));
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
  return addReportOptions(command, { junit: true })
    .action(namingFlags(async (flags: FetchFlags, cmd: Command) => {
      const globals = globalOptions(cmd);
      const log = commandLogger(deps, globals);
      const options = await fleetFetchOptions(deps, globals, flags);
      await runFleetFetch(deps, { globals, log }, options);
    }));
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
    .addCommand(renderCommand(deps))
    .addCommand(baselineCommand(deps))
    .addCommand(signerCommand(deps));
}

/** The fetch flags (`aicr daemonset fetch`, `aicr snapshot --from-daemonset`). */
export interface FleetFetchFlags {
  /** `--name`. @default "aicr-daemon" */
  name?: string;
  /** `--output`: a directory, a file or `-`. */
  output?: string;
  /** `--transport`. @default "auto" */
  transport?: string;
  /** `--concurrency`. @default "16" */
  concurrency?: string;
  /** `--timeout` per node. @default "30s" */
  timeout?: string;
  /** `--max-answer-bytes` per node. @default 16 MiB */
  maxAnswerBytes?: string;
  /** `--node` filter. */
  node?: string[];
  /** `--no-topology` (false): no cluster NodeTopology. @default true */
  topology?: boolean;
  /** `--report`: the JSON report's file, or `-`. */
  report?: string;
  /** `--junit`: the JUnit XML report's file, or `-`. */
  junit?: string;
}

/** A fleet fetch's options, parsed and checked. */
export interface FleetFetchOptions {
  /** The daemon's namespace. */
  namespace: string;
  /** The daemon's name. */
  name: string;
  /** How to reach the daemons. */
  transport: FleetTransport;
  /** Nodes asked at once (at least 1). */
  concurrency: number;
  /** Per-node deadline. */
  timeoutMs: number;
  /** The largest answer read from one daemon. */
  maxAnswerBytes: number;
  /** Only these nodes. */
  nodes?: string[];
  /** List the nodes once for the cluster's NodeTopology. */
  topology: boolean;
  /** Where the snapshots go. */
  output: FleetOutput;
  /** Where the reports go. */
  reports: ReportTargets;
}

/**
 * Completes and validates the fetch flags, before any cluster contact.
 *
 * @param deps CLI dependencies (the working directory)
 * @param globals the root's flags (the namespace)
 * @param input the fetch flags
 * @returns the typed options
 * @throws {UsageError} for a bad flag value
 */
export async function fleetFetchOptions(
  deps: CliDeps,
  globals: GlobalOptions,
  input: FleetFetchFlags,
): Promise<FleetFetchOptions> {
  const flags = {
    name: DEFAULT_DAEMON_NAME,
    transport: "auto",
    concurrency: "16",
    timeout: "30s",
    ...input,
  };
  const namespace = checkedNamespace(globals);
  const name = validateDaemonName(flags.name);
  if (!(FLEET_TRANSPORTS as readonly string[]).includes(flags.transport)) {
    throw new UsageError(
      `Cannot use '--transport' as it must be auto, direct or proxy: current value is '${flags.transport}'`,
    );
  }
  const concurrency = parseCount("--concurrency", flags.concurrency);
  if (concurrency < 1) {
    throw new UsageError(
      `Cannot use '--concurrency' as it must be at least 1: current value is '${flags.concurrency}'`,
    );
  }
  const timeoutMs = parseTimeout(flags.timeout, "--timeout");
  const maxAnswerBytes = parseCount(
    "--max-answer-bytes",
    flags.maxAnswerBytes ?? String(DEFAULT_MAX_ANSWER_BYTES),
  );
  if (maxAnswerBytes < 1024 || maxAnswerBytes > 1 << 30) {
    throw new UsageError(
      `Cannot use '--max-answer-bytes' as it must be from 1024 to 1073741824: current value is '${flags.maxAnswerBytes}'`,
    );
  }
  const output = await fleetOutput(checkOutputNotFormat(flags.output), deps.cwd);
  const reports = await reportTargets(deps, flags, {
    ...(output.kind === "stream" && output.path === undefined ? { stdoutTaken: "-o -" } : {}),
  });
  return {
    namespace,
    name,
    transport: flags.transport as FleetTransport,
    concurrency,
    timeoutMs,
    maxAnswerBytes,
    ...(flags.node?.length ? { nodes: flags.node } : {}),
    topology: flags.topology !== false,
    output,
    reports,
  };
}

/**
 * Fetches every node's snapshot from the installed daemons, writes them, prints the status table
 * on stderr, and throws the fleet's error when some node was not ok.
 *
 * @param deps CLI dependencies
 * @param context the root's flags and the logger
 * @param options the checked fetch options
 * @returns when everything was written and every node was ok
 * @throws {ToolError} from {@link fleetError} when some node failed
 */
export async function runFleetFetch(
  deps: CliDeps,
  context: { globals: GlobalOptions; log: Logger },
  options: FleetFetchOptions,
): Promise<void> {
  const { log } = context;
  const { output, reports, ...fetch } = options;
  const started = deps.now().getTime();
  await runReported(deps, reports, {
    kind: "DaemonSetFetchReport",
    namespace: options.namespace,
    name: options.name,
  }, async () => {
    // Each snapshot is written as it arrives and dropped: memory is bounded by the answers in
    // flight (--concurrency), not the fleet.
    const writer = createFleetWriter(output, deps.stdout, { signal: deps.signal });
    let fleet: Awaited<ReturnType<typeof fetchFleet>>;
    let written: string[];
    try {
      fleet = await fetchFleet({ kube: connect(deps, context.globals), log, now: deps.now }, {
        ...fetch,
        signal: deps.signal,
        onResult: writer.put,
      });
      // Once per fetch, not in every node's snapshot (each daemon reports its own Node).
      if (fleet.topology) await writer.putTopology(fleet.topology.document);
      written = await writer.close();
    } catch (error) {
      await writer.abort();
      throw error;
    }
    deps.stderr.write(formatFleetTable(fleet.results));
    log.info("fleet fetched", {
      nodes: fleet.results.length,
      ok: fleet.results.filter((r) => r.status === "ok").length,
      transport: fleet.transport,
      seconds: ((deps.now().getTime() - started) / 1000).toFixed(1),
      ...(written.length > 0 && output.kind === "directory" ? { directory: output.path } : {}),
      ...(output.kind === "stream" && output.path ? { file: output.path } : {}),
      ...(fleet.topology
        ? {
          topology: fleet.topology.status === "ok"
            ? `${fleet.topology.nodes} nodes (listed as the ${fleet.topology.as})`
            : fleet.topology.status,
        }
        : {}),
    });
    const failure = fleetError(fleet);
    return { content: fleetReportContent(fleet), ...(failure ? { failure } : {}) };
  });
}
