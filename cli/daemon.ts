/**
 * `aicr daemon`: serve this node's snapshot over HTTPS (the DaemonSet mode). Collections are
 * cached and shared; callers are authenticated with TokenReview and authorized with
 * SubjectAccessReview (`get snapshots.aicr.run` on the node); SIGTERM drains in-flight
 * requests and exits 0. See `daemon/README.md`.
 *
 * @module
 */
import { isIP } from "node:net";
import { Command, Option } from "commander";
import { createNodeCollect } from "../agent/mod.ts";
import { runDaemon } from "../daemon/mod.ts";
import type { DaemonOptions, DaemonRunDeps, MakeAuth } from "../daemon/mod.ts";
import { UsageError } from "../errors.ts";
import { DEFAULT_DAEMON_NAME, validateDaemonName, validateNamespace } from "../manifests/mod.ts";
import { parseCount, parseDuration } from "./_flags.ts";
import { resolveNodeName } from "../snapshot/mod.ts";
import { buildInfo } from "../version.ts";
import { connectOptional, defineAction } from "./globals.ts";
import type { CliDeps } from "./context.ts";

/** Factories of the daemon's real dependencies; each has a default built from {@link CliDeps}. */
export interface DaemonFactories {
  /** Builds the collect function. @default the agent's node collect over `deps.collectorDeps` */
  makeCollect?: DaemonRunDeps["makeCollect"];
  /** Builds the token authenticator and access authorizer. @default createKubeAuth(kube) */
  makeAuth?: MakeAuth;
}

/** Dependencies of the daemon command. */
export type DaemonCommandDeps = CliDeps & DaemonFactories;

/** Flags of `aicr daemon`. */
export interface DaemonFlags {
  /** `--listen`. */
  listen: string;
  /** `--port`. */
  port: string;
  /** `--tls-cert-file`. */
  tlsCertFile?: string;
  /** `--tls-key-file`. */
  tlsKeyFile?: string;
  /** `--insecure-http`. */
  insecureHttp: boolean;
  /** `--insecure-no-auth`. */
  insecureNoAuth: boolean;
  /** `--max-age`. */
  maxAge: string;
  /** `--fresh-min-interval`. */
  freshMinInterval: string;
  /** `--refresh-interval`. */
  refreshInterval: string;
  /** `--collect-timeout`. */
  collectTimeout: string;
  /** `--drain-timeout`. */
  drainTimeout: string;
  /** `--tls-reload-interval`. */
  tlsReloadInterval: string;
  /** `--node-name`. */
  nodeName?: string;
  /** `--token-audience` (repeatable). */
  tokenAudience?: string[];
  /** `--host-root`. */
  hostRoot?: string;
  /** `--systemd-unit` (repeatable). */
  systemdUnit?: string[];
  /** `--max-nodes-per-entry`. */
  maxNodesPerEntry: string;
  /** `--baseline-namespace`. */
  baselineNamespace?: string;
  /** `--baseline-name`. */
  baselineName: string;
  /** `--baseline-interval`. */
  baselineInterval: string;
  /** `--csr-signer`. */
  csrSigner?: string;
  /** `--pod-name`. */
  podName?: string;
  /** `--pod-uid`. */
  podUid?: string;
  /** `--pod-ip`. */
  podIp?: string;
  /** `--require-node-bound-token`. */
  requireNodeBoundToken?: boolean;
}

function parsePort(value: string): number {
  const port = parseCount("--port", value);
  if (port > 65_535) {
    throw new UsageError(
      `Cannot use '--port' as it must be at most 65535: current value is '${value}'`,
    );
  }
  return port;
}

/**
 * Completes and validates the daemon's flags: durations, port, certificate flags and node
 * name, before anything listens (the daemon reads the certificate files as it starts).
 *
 * @param deps CLI dependencies (environment, working directory)
 * @param flags the parsed flags
 * @returns the typed options
 * @throws {UsageError} for bad flags
 */
export function daemonOptions(deps: DaemonCommandDeps, flags: DaemonFlags): DaemonOptions {
  const port = parsePort(flags.port);
  const cacheOptions = {
    maxAgeMs: parseDuration(flags.maxAge, "--max-age"),
    freshMinIntervalMs: parseDuration(flags.freshMinInterval, "--fresh-min-interval"),
    refreshIntervalMs: parseDuration(flags.refreshInterval, "--refresh-interval"),
    collectTimeoutMs: parseDuration(flags.collectTimeout, "--collect-timeout"),
  };
  const drainTimeoutMs = parseDuration(flags.drainTimeout, "--drain-timeout");
  const tlsReloadMs = parseDuration(flags.tlsReloadInterval, "--tls-reload-interval");
  const maxNodesPerEntry = parseCount("--max-nodes-per-entry", flags.maxNodesPerEntry);
  if (cacheOptions.collectTimeoutMs === 0) {
    throw new UsageError(
      "Cannot use '--collect-timeout' as it must be positive: current value is '0'",
    );
  }
  const identity = podIdentity(flags);
  if (identity.csr && (flags.tlsCertFile || flags.tlsKeyFile || flags.insecureHttp)) {
    throw new UsageError(
      "Cannot use '--csr-signer' with '--tls-cert-file', '--tls-key-file' or '--insecure-http': the certificate comes from one place",
    );
  }
  // With --csr-signer the serving certificate comes from the CSR API once the daemon runs.
  const tls = identity.csr ? undefined : tlsFlags(flags);
  const nodeName = flags.nodeName ?? resolveNodeName(deps.env);
  if (!nodeName) {
    throw new UsageError(
      "Cannot run the daemon as the node name is unknown: set '--node-name' or NODE_NAME",
    );
  }
  const baseline = baselineFlags(flags);
  return {
    ...(baseline ? { baseline } : {}),
    listen: flags.listen,
    port,
    cache: cacheOptions,
    drainTimeoutMs,
    tlsReloadMs,
    maxNodesPerEntry,
    ...(tls ? { tls } : {}),
    insecureHttp: flags.insecureHttp,
    insecureNoAuth: flags.insecureNoAuth,
    nodeName,
    tokenAudiences: flags.tokenAudience ?? [],
    ...(flags.hostRoot ? { hostRoot: flags.hostRoot } : {}),
    systemdUnits: flags.systemdUnit ?? [],
    ...identity,
    requireNodeBoundToken: flags.requireNodeBoundToken ?? false,
  };
}

/** The certificate and key files (the daemon reads them as it starts); absent with `--insecure-http`. */
function tlsFlags(flags: DaemonFlags): DaemonOptions["tls"] {
  if (flags.tlsCertFile || flags.tlsKeyFile) {
    if (!flags.tlsCertFile || !flags.tlsKeyFile) {
      throw new UsageError(
        "Cannot serve TLS as '--tls-cert-file' and '--tls-key-file' go together: only one is set",
      );
    }
    return { certFile: flags.tlsCertFile, keyFile: flags.tlsKeyFile };
  } else if (!flags.insecureHttp) {
    throw new UsageError(
      "Cannot serve as '--tls-cert-file' and '--tls-key-file' are not set: pass them, or '--insecure-http' for a local test",
    );
  }
  return undefined;
}

/** Where the cohort's baseline is read (`--baseline-namespace`), or undefined: no drift metric. */
function baselineFlags(flags: DaemonFlags): DaemonOptions["baseline"] {
  const intervalMs = parseDuration(flags.baselineInterval, "--baseline-interval");
  if (flags.baselineNamespace === undefined) return undefined;
  validateNamespace("baselineNamespace", flags.baselineNamespace);
  validateDaemonName(flags.baselineName);
  return { namespace: flags.baselineNamespace, daemonName: flags.baselineName, intervalMs };
}

/**
 * The pod's identity flags: `--pod-name` and `--pod-uid` go together; `--csr-signer` needs
 * them and `--pod-ip` (the certificate's IP).
 *
 * @throws {UsageError} when one of a pair is missing
 */
function podIdentity(flags: DaemonFlags): Pick<DaemonOptions, "pod" | "csr"> {
  if ((flags.podName === undefined) !== (flags.podUid === undefined)) {
    throw new UsageError(
      "Cannot use '--pod-name' and '--pod-uid' apart: they go together, only one is set",
    );
  }
  const pod = flags.podName && flags.podUid
    ? { name: flags.podName, uid: flags.podUid }
    : undefined;
  if (flags.csrSigner === undefined) return pod ? { pod } : {};
  if (!pod || !flags.podIp || isIP(flags.podIp) === 0) {
    throw new UsageError(
      `Cannot request a serving certificate from '--csr-signer' '${flags.csrSigner}': it needs '--pod-name', '--pod-uid' and '--pod-ip' (an IP address; current value is '${
        flags.podIp ?? ""
      }')`,
    );
  }
  return { pod, csr: { signerName: flags.csrSigner, podIp: flags.podIp } };
}

/**
 * The `daemon` command.
 *
 * @param deps CLI dependencies, optionally with factories of the collect and auth pieces
 * @returns the command
 */
export function daemonCommand(deps: DaemonCommandDeps): Command {
  const command = new Command("daemon")
    .description("serve this node's snapshot over HTTPS (DaemonSet mode; see daemon/README.md)");
  return defineAction(
    addDaemonFlags(command),
    deps,
    async (flags: DaemonFlags, { globals, log }) => {
      const options = daemonOptions(deps, flags);
      await runDaemon({
        connect: () => connectOptional(deps, globals, log),
        makeCollect: deps.makeCollect ??
          createNodeCollect({ ...deps, version: buildInfo().version }),
        ...(deps.makeAuth ? { makeAuth: deps.makeAuth } : {}),
        log,
        now: deps.now,
        signal: deps.signal,
        cwd: deps.cwd,
      }, options);
    },
    { log: { prefix: "daemon" } },
  );
}

/** The daemon's flags, declared. */
function addDaemonFlags(command: Command): Command {
  return command
    .addOption(new Option("--listen <address>", "address to bind").default("0.0.0.0"))
    .addOption(new Option("--port <port>", "port to bind").default("8443").env("AICR_DAEMON_PORT"))
    .addOption(
      new Option("--tls-cert-file <path>", "PEM certificate (chain) to serve").env(
        "AICR_TLS_CERT_FILE",
      ),
    )
    .addOption(
      new Option("--tls-key-file <path>", "PEM private key of the certificate").env(
        "AICR_TLS_KEY_FILE",
      ),
    )
    .option("--insecure-http", "serve plain HTTP (UNSAFE: local tests only)", false)
    .option(
      "--insecure-no-auth",
      "serve everyone without TokenReview/SubjectAccessReview (UNSAFE: local tests only)",
      false,
    )
    .option("--max-age <duration>", "serve a cached snapshot younger than this", "60s")
    .option("--fresh-min-interval <duration>", "allow ?fresh=true at most this often", "10s")
    .option("--refresh-interval <duration>", "collect in the background this often (0: off)", "0")
    .option("--collect-timeout <duration>", "abort a collection running longer", "3m")
    .option(
      "--drain-timeout <duration>",
      "on SIGTERM, wait this long for in-flight requests",
      "10s",
    )
    .option(
      "--tls-reload-interval <duration>",
      "re-read the certificate files this often, for rotated Secrets (0: never)",
      "1m",
    )
    .option("--node-name <name>", "this node (default: NODE_NAME, KUBERNETES_NODE_NAME, HOSTNAME)")
    .option(
      "--token-audience <audience...>",
      "require these token audiences (default: the API server's)",
    )
    .addOption(
      new Option("--host-root <dir>", "read host files under this directory").env("AICR_HOST_ROOT"),
    )
    .option(
      "--systemd-unit <unit...>",
      "systemd units to read (default: containerd, docker, kubelet)",
    )
    .addOption(
      new Option("--max-nodes-per-entry <n>", "truncate NodeTopology node lists (0: no limit)")
        .default("0").env("AICR_MAX_NODES_PER_ENTRY"),
    )
    .addOption(
      new Option(
        "--baseline-namespace <namespace>",
        "read this node's cohort baseline (aicr daemonset baseline set) from this namespace and export aicr_drift_readings (default: off)",
      ).env("AICR_BASELINE_NAMESPACE"),
    )
    .option(
      "--baseline-name <name>",
      "the daemon install whose baselines to read (ConfigMaps <name>-baseline-<cohort key>)",
      DEFAULT_DAEMON_NAME,
    )
    .option("--baseline-interval <duration>", "read the baseline again this often", "60s")
    .option(
      "--csr-signer <signer>",
      "get the serving certificate from the CSR API under this signer (key made in memory)",
    )
    .option("--pod-name <name>", "this pod's name (with --csr-signer)")
    .option("--pod-uid <uid>", "this pod's UID (with --csr-signer)")
    .option(
      "--require-node-bound-token",
      "accept snapshot tokens only when bound to this node (TokenRequest boundObjectRef Node)",
    )
    .option("--pod-ip <ip>", "this pod's IP, named in the requested certificate");
}
