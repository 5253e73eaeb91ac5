/**
 * The DaemonSet mode's verbs, run from checked options: install (and how an install that is not
 * ready ends), the render written out, uninstall (every object swept, and what is left), and the
 * fleet fetch (each snapshot written as it arrives, the status table, the fleet's outcome); each
 * with its closing log line and its reports (`reported.ts`). `aicr daemonset` parses its flags
 * and makes one of these calls; `aicr snapshot --from-daemonset` makes the fetch.
 *
 * @module
 */
import { readFile } from "node:fs/promises";
import { resolve } from "node:path";
import { InterruptedError, TimeoutError, ToolError, UsageError } from "../errors.ts";
import type { OptionNamer } from "../errors.ts";
import type { Redactor } from "../snapshot/mod.ts";
import { writeFileAtomic } from "../io.ts";
import type { KubeClient } from "../kube/mod.ts";
import type { Logger, TextWriter } from "../log.ts";
import { DEFAULT_DAEMON_NAME, formatManifest } from "../manifests/mod.ts";
import { fetchFleet, fleetError, formatFleetTable } from "./fleet.ts";
import type { FleetResult, FleetTransport } from "./fleet.ts";
import { createFleetWriter } from "./fleet_writer.ts";
import type { FleetOutput } from "./fleet_writer.ts";
import { installDaemonSet } from "./install.ts";
import type { InstallOptions } from "./install.ts";
import { makeDaemonCa, renderDaemonSet } from "./render.ts";
import type { RenderOptions } from "./render.ts";
import { caCertificateFromFile, caFromSecretFile } from "./render_ca.ts";
import type { RenderCa } from "./render_ca.ts";
import { fleetReportContent, installReportContent, uninstallReportContent } from "./report.ts";
import { runReported } from "./reported.ts";
import type { ReportTargets } from "./reported.ts";
import { uninstallDaemonSet } from "./uninstall.ts";
import { upgradeDaemonSet } from "./upgrade.ts";
import type { UpgradeOptions } from "./upgrade.ts";

/** What the verbs need: the cluster (connected on first use), streams, clock, signal. */
export interface ClusterRunDeps {
  /** Connects to the cluster (called when the verb first needs it). */
  connect: () => KubeClient;
  /**
   * The same cluster, every request ending on SIGINT/SIGTERM: for what a verb reads and checks
   * before it writes anything (nothing to clean up yet). @default {@link ClusterRunDeps.connect}
   */
  connectInterruptible?: () => KubeClient;
  /** Logger. */
  log: Logger;
  /** Standard output (reports sent to `-`, a stream fetch). */
  stdout: TextWriter;
  /** Standard error (the fetch's status table). */
  stderr: TextWriter;
  /** Clock. */
  now: () => Date;
  /** 16 random hex digits per call (run and invocation IDs). */
  randomHex: () => string;
  /** Aborted on SIGINT/SIGTERM. */
  signal: AbortSignal;
  /** Names options in errors and reports as the caller shows them. @default their names */
  nameOption?: OptionNamer;
}

/** A duration as written: `2m`, `1m30s`, `45s`, `1.5s`. */
function formatDuration(ms: number): string {
  const hours = Math.floor(ms / 3_600_000);
  const minutes = Math.floor((ms % 3_600_000) / 60_000);
  const seconds = (ms % 60_000) / 1000;
  const parts = [
    hours > 0 ? `${hours}h` : "",
    minutes > 0 ? `${minutes}m` : "",
    seconds > 0 || ms === 0 ? `${Number(seconds.toFixed(3))}s` : "",
  ];
  return parts.join("");
}

function secondsSince(deps: ClusterRunDeps, started: number): string {
  return ((deps.now().getTime() - started) / 1000).toFixed(1);
}

/**
 * Installs the daemon and waits for it (unless `noWait`), with its reports.
 *
 * @param deps cluster, logger, streams, clock, randomness, signal
 * @param options the install's options and where its reports go
 * @returns when the daemon serves on every targeted node
 * @throws {TimeoutError} when pods are not Ready in time (the install stays)
 */
export async function runInstall(
  deps: ClusterRunDeps,
  options: Omit<InstallOptions, "signal"> & { reports: ReportTargets },
): Promise<void> {
  const { log } = deps;
  const { reports, ...install } = options;
  const started = deps.now().getTime();
  const verb = {
    kind: "DaemonSetInstallReport" as const,
    namespace: install.namespace,
    ...(install.name ? { name: install.name } : {}),
  };
  await runReported(deps, { targets: reports, verb }, async () => {
    const result = await installDaemonSet({
      kube: deps.connect(),
      ...(deps.connectInterruptible ? { preflightKube: deps.connectInterruptible() } : {}),
      log,
      now: deps.now,
      randomHex: deps.randomHex,
    }, { ...install, signal: deps.signal });
    const content = installReportContent(result);
    if (!result.ready) {
      const waiting = result.pods.filter((p) => !p.ready);
      const signer = result.signer && result.signer.available === 0 ? result.signer : undefined;
      return {
        content,
        failure: new TimeoutError(
          `Cannot confirm the daemon is serving: ${waiting.length} of ${result.desired} pods are not Ready${
            signer ? ", and no signer replica is available," : ""
          } after ${formatDuration(install.timeoutMs ?? 120_000)}`,
          {
            details: [
              ...waiting.map((p) => `  ${p.node}: ${p.pod} ${p.unschedulable ?? p.detail ?? ""}`),
              ...(signer
                ? [
                  `  signer: ${signer.ready}/${signer.desired} replicas ready${
                    signer.unknown ? ` (${signer.unknown})` : ""
                  }`,
                ]
                : []),
              `  it stays installed; remove it with: aicr daemonset uninstall -n ${install.namespace}`,
            ],
          },
        ),
      };
    }
    log.info("daemon ready", {
      namespace: install.namespace,
      nodes: result.pods.length,
      ...(result.signer ? { signer: result.signer.leader?.pod ?? "(electing)" } : {}),
      objects: result.created.length,
      seconds: secondsSince(deps, started),
      runID: result.runId,
    });
    return { content };
  });
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

/** The CA of a render: kept from a file (`caSecret`, `existingCa`), or new. */
async function readRenderCa(
  deps: { cwd: string; now(): Date },
  from: {
    caSecret?: string | undefined;
    existingCa?: string | undefined;
    name?: string | undefined;
  },
): Promise<RenderCa> {
  if (from.caSecret && from.existingCa) {
    throw new UsageError((o) => `Cannot use '${o("caSecret")}' together with '${o("existingCa")}'`);
  }
  const name = from.name ?? DEFAULT_DAEMON_NAME;
  const read = async (option: "caSecret" | "existingCa", path: string) => {
    try {
      return await readFile(resolve(deps.cwd, path), "utf8");
    } catch (error) {
      throw new UsageError((o) =>
        `Cannot read '${o(option)}' file '${path}': ${(error as Error).message.split("\n")[0]}`
      );
    }
  };
  if (from.caSecret) {
    return caFromSecretFile(await read("caSecret", from.caSecret), { path: from.caSecret, name });
  }
  if (from.existingCa) {
    return caCertificateFromFile(await read("existingCa", from.existingCa), {
      path: from.existingCa,
      name,
    });
  }
  return makeDaemonCa({ now: deps.now() });
}

/**
 * Renders the install and writes it: stdout, or a file (private when it holds the CA key).
 *
 * @param deps logger, stdout and the working directory
 * @param options the render's options, its CA, format and output, and where its CA came from
 * @returns when it is written
 */
export async function writeRender(
  deps: { log: Logger; stdout: TextWriter; cwd: string; signal: AbortSignal; now(): Date },
  options: Omit<RenderOptions, "ca"> & {
    format: "yaml" | "json";
    output?: string;
    /** The CA Secret of an earlier render (a file), kept. */
    caSecret?: string;
    /** The CA's certificate only (a file): no Secret is rendered. */
    existingCa?: string;
  },
): Promise<void> {
  const { log } = deps;
  const { format, output, caSecret, existingCa, ...rest } = options;
  const caFrom = caSecret ? "secret" : existingCa ? "certificate" : "new";
  const caFile = caSecret ?? existingCa;
  const ca = await readRenderCa(deps, { caSecret, existingCa, name: rest.name });
  const render = { ...rest, ca };
  const text = formatRendered(renderDaemonSet(render).objects, format);
  if (output === undefined || output === "-") deps.stdout.write(text);
  else {
    await writeFileAtomic(resolve(deps.cwd, output), text, render.ca.caKey ? 0o600 : 0o644, {
      what: "the manifests",
      signal: deps.signal,
    });
  }
  if (render.service !== false && !render.serviceMonitor) {
    log.info((option) =>
      `render: the Service carries prometheus.io/scrape annotations (${
        option("serviceMonitor")
      } renders a ServiceMonitor instead)`
    );
  }
  const name = render.name ?? DEFAULT_DAEMON_NAME;
  if (caFrom === "secret") {
    log.info((option) => `render: the CA of ${option("caSecret")} is kept`, { file: caFile });
  } else if (caFrom === "certificate") {
    log.info(
      "render: no CA Secret rendered; the daemons' certificates are signed once Secret <name>-signer holds the CA (tls.crt, tls.key)",
      { secret: `${render.namespace}/${name}-signer` },
    );
  } else {
    log.warn((option) =>
      `the rendered Secret holds a freshly made CA key: keep the output private; re-render with ${
        option("caSecret")
      } <this output> to keep the CA`
    );
  }
}

/**
 * Upgrades the daemon in place and waits for the rolling update; a failed one is rolled back
 * (see `upgrade.ts`).
 *
 * @param deps cluster, logger, clock, randomness, signal
 * @param options what the daemon is (the install's flags) and the wait's bound
 * @returns when every daemon (and the signer) runs the new image
 * @throws {DaemonUpgradeError} when the rollout failed and was rolled back
 */
export async function runUpgrade(
  deps: ClusterRunDeps,
  options: Omit<UpgradeOptions, "signal">,
): Promise<void> {
  const started = deps.now().getTime();
  const result = await upgradeDaemonSet({
    kube: deps.connect(),
    ...(deps.connectInterruptible ? { preflightKube: deps.connectInterruptible() } : {}),
    log: deps.log,
    now: deps.now,
    randomHex: deps.randomHex,
  }, { ...options, signal: deps.signal });
  deps.log.info("upgrade done", {
    namespace: options.namespace,
    from: result.fromImage,
    to: result.toImage,
    created: result.applied.filter((a) => a.change === "created").length,
    updated: result.applied.filter((a) => a.change === "updated").length,
    seconds: secondsSince(deps, started),
  });
}

/**
 * Uninstalls the daemon, logging each object swept, with its reports.
 *
 * @param deps cluster, logger, streams, clock
 * @param options namespace, name, wait, dry run and where the reports go
 * @returns when nothing of the install is left
 * @throws {ToolError} naming what remains
 */
export async function runUninstall(
  deps: ClusterRunDeps,
  options: { namespace: string; name: string; timeoutMs: number; dryRun: boolean } & {
    reports: ReportTargets;
  },
): Promise<void> {
  const { log } = deps;
  const { namespace, name, timeoutMs, dryRun, reports } = options;
  const started = deps.now().getTime();
  const verb = { kind: "DaemonSetUninstallReport" as const, namespace, name };
  await runReported(deps, { targets: reports, verb }, async () => {
    const result = await uninstallDaemonSet({ kube: deps.connect(), log, now: deps.now }, {
      namespace,
      name,
      timeoutMs,
      dryRun,
    });
    for (const o of result.swept) {
      log.info(o.result === "found" ? "would delete" : o.result, {
        kind: o.kind,
        name: o.namespace ? `${o.namespace}/${o.name}` : o.name,
        uid: o.uid,
      });
    }
    for (const csr of result.csrs) {
      log.info(dryRun ? "would delete" : "deleted", {
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
    if (dryRun) {
      // A dry run found what an uninstall would delete: say so, never "uninstalled".
      log.info(
        result.swept.length === 0
          ? "dry run: nothing is installed, nothing would be deleted"
          : "dry run: the uninstall would delete these objects; nothing was deleted",
        { namespace, name, objects: result.swept.length, csrs: result.csrs.length },
      );
      return { content };
    }
    log.info(result.swept.length === 0 ? "uninstall: nothing was installed" : "uninstalled", {
      namespace,
      name,
      deleted: result.swept.filter((o) => o.result === "deleted").length,
      seconds: secondsSince(deps, started),
    });
    return { content };
  });
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
  /** `--redact`: each snapshot, and its file's name, redacted before it is written. */
  redactor?: Redactor;
}

/** A fetch's result as `--redact` shows it: each node by its token, each error's text redacted. */
function redactFleetResult(fleet: FleetResult, redactor: Redactor): FleetResult {
  redactor.learn(fleet.results.map((r) => r.node));
  const { topology } = fleet;
  return {
    ...fleet,
    results: fleet.results.map((r) => ({
      ...r,
      node: redactor.text(r.node),
      ...(r.error !== undefined ? { error: redactor.text(r.error) } : {}),
    })),
    ...(topology?.message !== undefined
      ? { topology: { ...topology, message: redactor.text(topology.message) } }
      : {}),
  };
}

/**
 * Fetches every node's snapshot from the installed daemons, writes them, prints the status table
 * on stderr, and throws the fleet's error when some node was not ok.
 *
 * @param deps cluster, logger, streams, clock, signal
 * @param options the checked fetch options
 * @returns when everything was written and every node was ok
 * @throws {ToolError} from {@link fleetError} when some node failed
 */
export async function runFleetFetch(
  deps: ClusterRunDeps,
  options: FleetFetchOptions,
): Promise<void> {
  const { log } = deps;
  const { output, reports, redactor, ...fetch } = options;
  const started = deps.now().getTime();
  const verb = {
    kind: "DaemonSetFetchReport" as const,
    namespace: options.namespace,
    name: options.name,
  };
  await runReported(deps, { targets: reports, verb }, async () => {
    // Each snapshot is written as it arrives and dropped: memory is bounded by the answers in
    // flight (the concurrency), not the fleet.
    const writer = createFleetWriter(output, deps.stdout, {
      signal: deps.signal,
      ...(redactor ? { redactor } : {}),
    });
    let fleet: Awaited<ReturnType<typeof fetchFleet>>;
    let written: string[];
    try {
      // Reads and token requests only, nothing to clean up: a signal ends every request.
      const kube = (deps.connectInterruptible ?? deps.connect)();
      fleet = await fetchFleet({ kube, log, now: deps.now }, {
        ...fetch,
        signal: deps.signal,
        onResult: writer.put,
      });
      // Once per fetch, not in every node's snapshot (each daemon reports its own Node).
      if (fleet.topology) await writer.putTopology(fleet.topology.document);
      written = await writer.close();
    } catch (error) {
      await writer.abort();
      // A read the signal cut short is the interrupt it is (exit 130), not its own failure
      // (a missing CA, say, when the CA's read was cut).
      if (deps.signal.aborted && !(error instanceof InterruptedError)) {
        throw new InterruptedError(
          `Cannot fetch every node's snapshot: interrupted (${String(deps.signal.reason)})`,
          { cause: error },
        );
      }
      throw error;
    }
    // With --redact the table, the reports and the error name each node by its token.
    if (redactor) fleet = redactFleetResult(fleet, redactor);
    deps.stderr.write(formatFleetTable(fleet.results));
    log.info("fleet fetched", {
      nodes: fleet.results.length,
      ok: fleet.results.filter((r) => r.status === "ok").length,
      transport: fleet.transport,
      seconds: secondsSince(deps, started),
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
