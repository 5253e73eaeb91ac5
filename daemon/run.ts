/**
 * The daemon's whole lifecycle, from typed, already-checked options: connect (when a kubeconfig
 * exists), authorizers, the serving identity, the collect function (its factory injected, so the
 * node sides never import each other), the app served over HTTPS, the certificate files watched
 * for rotation, and the orderly stop once the signal aborts. `aicr daemon` parses its flags into
 * {@link DaemonOptions} and makes this one call.
 *
 * @module
 */
import type { KeyObject } from "node:crypto";
import { readFile } from "node:fs/promises";
import { resolve } from "node:path";
import { UsageError } from "../errors.ts";
import type { KubeClient } from "../kube/mod.ts";
import type { Logger } from "../log.ts";
import { processStats, useDaemonV8Flags } from "../runtime.ts";
import { buildInfo } from "../version.ts";
import { chainIssuer } from "../x509.ts";
import { createCachingAuthorizer } from "./auth.ts";
import type { AccessAuthorizer, RequestAuthorizer, TokenAuthenticator } from "./auth.ts";
import type { CollectFunction, SnapshotCacheOptions } from "./cache.ts";
import { createDaemon } from "./daemon.ts";
import { createServingIdentity } from "./identity.ts";
import { createKubeAuth } from "./kube_auth.ts";
import { serve, validateTls } from "./serve.ts";
import type { RunningServer } from "./serve.ts";
import { useLightWebClasses } from "./web.ts";

/** Options the collect factory receives. */
export interface MakeCollectOptions {
  /** Logger. */
  log: Logger;
  /** This node. */
  nodeName: string;
  /** A cluster client for the K8s and NodeTopology readings, when there is one. */
  kube?: KubeClient;
  /** Read host files under this directory. */
  hostRoot?: string;
  /** systemd units to read. */
  systemdUnits?: string[];
  /** Truncate NodeTopology node lists (0: no limit). */
  maxNodesPerEntry: number;
}

/** Options the auth factory receives. */
export interface MakeAuthOptions {
  /** Logger. */
  log: Logger;
  /** The daemon's cluster client (its ServiceAccount creates the reviews). */
  kube: KubeClient;
  /** Token audiences to require (empty: the API server's). */
  audiences: string[];
  /** The node tokens must be bound to (`requireNodeBoundToken`), when set. */
  boundNode?: string;
}

/** Builds the token authenticator and access authorizer. */
export type MakeAuth = (
  options: MakeAuthOptions,
) => { authenticator: TokenAuthenticator; authorizer: AccessAuthorizer };

/** What {@link runDaemon} needs. */
export interface DaemonRunDeps {
  /**
   * Connects to the cluster the process names, or returns undefined when there is no kubeconfig
   * (a host run with `insecureNoAuth`). Called once, after the daemon's V8 flags are set.
   */
  connect: () => KubeClient | undefined;
  /** Builds the collect function (the caller composes the collectors and the snapshot). */
  makeCollect: (options: MakeCollectOptions) => CollectFunction;
  /** Builds the authenticator and authorizer. @default createKubeAuth over the client */
  makeAuth?: MakeAuth;
  /** Logger. */
  log: Logger;
  /** Clock. */
  now: () => Date;
  /** Aborting it drains and stops the daemon. */
  signal: AbortSignal;
  /** The working directory the certificate files are named from. */
  cwd: string;
}

/** The daemon's options, parsed and checked (certificates read). */
export interface DaemonOptions {
  /** The address to bind. */
  listen: string;
  /** The port to bind. */
  port: number;
  /** The cache's periods. */
  cache: SnapshotCacheOptions;
  /** How long a stop waits for requests in flight. */
  drainTimeoutMs: number;
  /** How often the certificate files are read again (0: never). */
  tlsReloadMs: number;
  /** Truncate NodeTopology node lists (0: no limit). */
  maxNodesPerEntry: number;
  /** The certificate and key files, read (and checked) as the daemon starts; absent with `insecureHttp`. */
  tls?: { certFile: string; keyFile: string };
  /** Serve plain HTTP (local tests only). */
  insecureHttp: boolean;
  /** Serve everyone, without TokenReview and SubjectAccessReview (local tests only). */
  insecureNoAuth: boolean;
  /** This node. */
  nodeName: string;
  /** Token audiences the snapshot routes require (empty: the API server's). */
  tokenAudiences: string[];
  /** Read host files under this directory. */
  hostRoot?: string;
  /** systemd units to read. */
  systemdUnits: string[];
  /** Where the cohort's baseline is read; absent: no drift metric. */
  baseline?: { namespace: string; daemonName: string; intervalMs: number };
  /** This pod: named in its certificate request. */
  pod?: { name: string; uid: string };
  /** Snapshot tokens must be bound to this node. */
  requireNodeBoundToken: boolean;
  /** The serving certificate comes from the CSR API under this signer, for this pod IP. */
  csr?: { signerName: string; podIp: string };
}

/**
 * Reads the certificate and key files and checks that they are a pair.
 *
 * @param files the two files (relative to `cwd`)
 * @param cwd the working directory
 * @returns the PEM texts
 * @throws {UsageError} naming the option and the file that cannot be read or used
 */
async function readTlsFiles(
  files: { certFile: string; keyFile: string },
  cwd: string,
): Promise<{ cert: string; key: string }> {
  const read = async (option: "tlsCertFile" | "tlsKeyFile", path: string) => {
    try {
      return await readFile(resolve(cwd, path), "utf8");
    } catch (error) {
      throw new UsageError(
        (o) =>
          `Cannot read '${o(option)}' file '${path}': ${
            error instanceof Error ? error.message : String(error)
          }`,
        { cause: error },
      );
    }
  };
  const tls = {
    cert: await read("tlsCertFile", files.certFile),
    key: await read("tlsKeyFile", files.keyFile),
  };
  try {
    validateTls(tls);
  } catch (error) {
    throw new UsageError((o) =>
      `Cannot serve TLS with '${o("tlsCertFile")}' '${files.certFile}' and '${
        o("tlsKeyFile")
      }' '${files.keyFile}': ${(error as Error).message}`
    );
  }
  return tls;
}

/**
 * Re-reads the certificate and key files on an interval and hands changed, valid ones to the
 * server (a rotated Secret: the kubelet swaps the mounted files atomically, but the two reads
 * are not, so a half-rotated pair fails validation once and is taken on the next tick).
 */
function watchTls(
  server: RunningServer,
  files: { certFile: string; keyFile: string; cwd: string },
  options: { current: { cert: string; key: string }; intervalMs: number; log: Logger },
): { stop(): void } {
  let current = options.current;
  let busy = false;
  const timer = setInterval(async () => {
    if (busy) return;
    busy = true;
    try {
      const next = {
        cert: await readFile(resolve(files.cwd, files.certFile), "utf8"),
        key: await readFile(resolve(files.cwd, files.keyFile), "utf8"),
      };
      if (next.cert === current.cert && next.key === current.key) return;
      const info = server.setTls(next);
      current = next;
      options.log.info("TLS certificate reloaded", {
        subject: info.subject,
        notAfter: info.notAfter.toISOString(),
      });
    } catch (error) {
      options.log.warn("TLS certificate not reloaded; the previous one stays in use", {
        error: error instanceof Error ? error.message : String(error),
      });
    } finally {
      busy = false;
    }
  }, options.intervalMs);
  return { stop: () => clearInterval(timer) };
}

/**
 * The daemon's authorizers: snapshot reads with the dedicated token audience, /metrics with the
 * API server's own; none with `insecureNoAuth` (said loudly).
 *
 * @throws {UsageError} when authentication is on and there is no Kubernetes client
 */
function createAuthorizers(
  deps: DaemonRunDeps,
  kube: KubeClient | undefined,
  options: DaemonOptions,
): { auth?: RequestAuthorizer; metricsAuth?: RequestAuthorizer } {
  const { log } = deps;
  if (options.insecureNoAuth) {
    log.warn((option) =>
      `authentication is OFF (${
        option("insecureNoAuth")
      }): anyone who reaches the port reads this node's snapshot`
    );
    return {};
  }
  if (!kube) {
    throw new UsageError((option) =>
      `Cannot authenticate callers without a Kubernetes client: run in a pod, pass '${
        option("kubeconfig")
      }', or '${option("insecureNoAuth")}' for a local test`
    );
  }
  const makeAuth = deps.makeAuth ??
    ((options: MakeAuthOptions) =>
      createKubeAuth(options.kube, {
        audiences: options.audiences,
        ...(options.boundNode !== undefined ? { boundNode: options.boundNode } : {}),
      }));
  const clock = () => deps.now().getTime();
  const auth = createCachingAuthorizer(
    makeAuth({
      log,
      kube,
      audiences: options.tokenAudiences,
      ...(options.requireNodeBoundToken ? { boundNode: options.nodeName } : {}),
    }),
    { clock },
  );
  // /metrics takes tokens of the API server's own audience, as the kubelet does, so a stock
  // Prometheus can scrape it (still authorized with 'get nodes/metrics'); the snapshot keeps
  // the dedicated audience.
  const metricsAuth = options.tokenAudiences.length === 0
    ? auth
    : createCachingAuthorizer(makeAuth({ log, kube, audiences: [] }), { clock });
  return { auth, metricsAuth };
}

/**
 * The daemon's own serving identity with a CSR signer (`identity.ts`), else undefined.
 *
 * @throws {UsageError} when there is no Kubernetes client to send the request with
 */
function servingIdentity(
  deps: DaemonRunDeps,
  kube: KubeClient | undefined,
  options: DaemonOptions,
): ReturnType<typeof createServingIdentity> | undefined {
  if (!options.csr || !options.pod) return undefined;
  if (!kube) {
    throw new UsageError((option) =>
      `Cannot request a serving certificate ('${
        option("csrSigner")
      }') without a Kubernetes client: run in a pod or pass '${option("kubeconfig")}'`
    );
  }
  return createServingIdentity({ kube, log: deps.log, now: deps.now }, {
    signerName: options.csr.signerName,
    nodeName: options.nodeName,
    podName: options.pod.name,
    podUid: options.pod.uid,
    podIp: options.csr.podIp,
  });
}

/**
 * The daemon, assembled from the options: collect, auth, baseline reader and identity wired
 * into {@link createDaemon}.
 */
function assembleDaemon(
  deps: DaemonRunDeps,
  kube: KubeClient | undefined,
  options: DaemonOptions,
  trust: BaselineTrustAnchor,
): {
  daemon: ReturnType<typeof createDaemon>;
  identity: ReturnType<typeof servingIdentity>;
} {
  const { log } = deps;
  const { nodeName, baseline } = options;
  const { auth, metricsAuth } = createAuthorizers(deps, kube, options);
  const identity = servingIdentity(deps, kube, options);
  if (options.insecureHttp) {
    log.warn((option) => `serving plain HTTP (${option("insecureHttp")}): for local tests only`);
  }
  const collect = deps.makeCollect({
    log,
    nodeName,
    maxNodesPerEntry: options.maxNodesPerEntry,
    ...(kube ? { kube } : {}),
    ...(options.hostRoot ? { hostRoot: options.hostRoot } : {}),
    ...(options.systemdUnits.length ? { systemdUnits: options.systemdUnits } : {}),
  });
  if (baseline && !kube) {
    throw new UsageError((option) =>
      `Cannot read the cohort's baseline without a Kubernetes client: run in a pod, pass '${
        option("kubeconfig")
      }', or leave out '${option("baselineNamespace")}'`
    );
  }
  const daemon = createDaemon({
    ...(baseline && kube
      ? {
        baseline: {
          read: (name: string, signal: AbortSignal) =>
            kube.get("ConfigMap", baseline.namespace, name, { timeoutMs: 10_000, signal }),
          daemonName: baseline.daemonName,
          intervalMs: baseline.intervalMs,
          trust: trust.get,
        },
      }
      : {}),
    collect,
    auth,
    clock: () => deps.now().getTime(),
    log,
    build: buildInfo(),
    nodeName,
    metricsAuth,
    processStats,
    ...(identity ? { awaitingCertificate: identity.awaiting } : {}),
  }, options.cache);
  return { daemon, identity };
}

/**
 * Runs the daemon until `deps.signal` aborts, then drains and returns.
 *
 * @param deps the connection, the collect and auth factories, logger, clock, signal
 * @param options the checked options
 * @returns when the server has stopped and the last collection ended
 * @throws {UsageError} when callers are to be authenticated without a cluster
 */
export async function runDaemon(deps: DaemonRunDeps, options: DaemonOptions): Promise<void> {
  // The certificate files are input: a bad pair fails before anything connects or listens.
  const files = options.tls ? await readTlsFiles(options.tls, deps.cwd) : undefined;
  // This process serves only the daemon: under Node, its V8 flags and the small web classes.
  if (useDaemonV8Flags()) useLightWebClasses();
  const { log } = deps;
  const kube = deps.connect();
  const trust = createTrustAnchor();
  const { daemon, identity } = assembleDaemon(deps, kube, options, trust);
  const tls = files ?? identity?.placeholder;
  const server = await serve(daemon.app, {
    hostname: options.listen,
    port: options.port,
    ...(tls ? { tls } : { insecureHttp: true }),
    signal: deps.signal,
    log,
    drainTimeoutMs: options.drainTimeoutMs,
  });
  daemon.start();
  const asking = identity?.run((pair) => {
    server.setTls(pair);
    // Its signer put the install's CA after the leaf: baselines are verified with it from now.
    if (trust.takeFrom(pair.cert)) void daemon.baseline?.refresh();
  }, deps.signal);
  const reload = tls && options.tls && options.tlsReloadMs > 0
    ? watchTls(server, {
      certFile: options.tls.certFile,
      keyFile: options.tls.keyFile,
      cwd: deps.cwd,
    }, { current: tls, intervalMs: options.tlsReloadMs, log })
    : undefined;
  await server.finished;
  reload?.stop();
  await asking;
  await daemon.close();
  log.info("daemon stopped");
}

/** The install's CA as the daemon knows it, for verifying baselines. */
interface BaselineTrustAnchor {
  /** The CA's public key; undefined until the daemon holds its serving certificate. */
  get: () => KeyObject | undefined;
  /** Takes the CA from a served chain; true when it is new. */
  takeFrom(chain: string): boolean;
}

/**
 * The issuer of this daemon's own serving certificate: the one CA its signers sign with, and
 * the one that signs baselines. A chain without it (an older signer) leaves the last one known.
 */
function createTrustAnchor(): BaselineTrustAnchor {
  let key: KeyObject | undefined;
  let fingerprint = "";
  return {
    get: () => key,
    takeFrom(chain) {
      const issuer = chainIssuer(chain);
      if (!issuer || issuer.fingerprint256 === fingerprint) return false;
      key = issuer.publicKey;
      fingerprint = issuer.fingerprint256;
      return true;
    },
  };
}
