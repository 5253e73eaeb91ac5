/**
 * DaemonSet mode, the fleet fetch: every targeted node's snapshot from its daemon, concurrently
 * with a bound, each node with its own status (ok, not ready, unreachable, denied, timed out).
 *
 * The design is daemon/README.md's "How the CLI reaches the daemons" and "Per-node identity":
 * pending daemon certificate requests are signed first (by the in-cluster signer, or here through
 * `csr/` when none runs and the caller may), and daemons about to turn Ready are waited for
 * (`fleet_signing.ts`); then, per node and within the same concurrency bound, one TokenRequest token for the reader
 * ServiceAccount with that node's audience (`aicr-daemon:<node>`) bound to that Node object
 * (10 minutes), so the user's own credential never reaches a node and no daemon can replay
 * what it received to another; then either **direct** (`https://<podIP>:<port>`, the
 * certificate verified against the install's CA and required to name the node asked), or the
 * API server's **pod proxy** (token in `X-Aicr-Authorization`, because the proxy drops
 * `Authorization`). Either way the snapshot's `source-node` must be the node asked: a mismatch
 * is that node's `wrong-identity`. `auto` tries direct on one pod and falls back to the proxy
 * for all when that pod cannot be reached.
 *
 * @module
 */
import { Buffer } from "node:buffer";
import { request as httpsRequest } from "node:https";
import { checkServerIdentity } from "node:tls";
import type { PeerCertificate } from "node:tls";
import { mapConcurrent, sleep as sleepFor } from "../io.ts";
import {
  IncompleteError,
  InterruptedError,
  NotFoundError,
  PermissionError,
  TimeoutError,
  ToolError,
} from "../errors.ts";
import { KubeApiError, ResponseTooLargeError } from "../kube/mod.ts";
import type { KubeClient, KubeObject } from "../kube/mod.ts";
import type { Logger } from "../log.ts";
import {
  daemonCaConfigMapName,
  daemonNodeAudience,
  daemonReaderName,
  DEFAULT_DAEMON_NAME,
} from "../manifests/mod.ts";
import { encodeSnapshot, parseSnapshot } from "../snapshot/mod.ts";
import type { Snapshot } from "../snapshot/mod.ts";
import type { Toleration } from "../manifests/mod.ts";
import { buildInfo } from "../version.ts";
import type { BuildInfo } from "../version.ts";
import {
  agentBuildOf,
  AgentIdentityError,
  checkAgentBuild,
  foreignDaemonMessage,
  isForeignDaemonExit,
} from "./agent_identity.ts";
import { readClusterTopology, requestServiceAccountToken } from "./fleet_topology.ts";
import type { FleetTopology } from "./fleet_topology.ts";
import { daemonPods } from "./install.ts";
import { signAndAwaitReady } from "./fleet_signing.ts";
import { imageVersion, warnVersionSkew } from "./version_skew.ts";
import type { DaemonPlacement, DaemonPodState } from "./install.ts";

/** One node's outcome. */
export type NodeStatus =
  | "ok"
  | "wrong-build"
  | "not-ready"
  | "unreachable"
  | "denied"
  | "timed-out"
  | "too-large"
  | "wrong-identity"
  | "interrupted";

/** The largest answer one daemon may send by default: one snapshot document's cap (16 MiB). */
export const DEFAULT_MAX_ANSWER_BYTES = 16 * 1024 * 1024;

/** A daemon's answer grew past the bound: the node's own failure (`too-large`). */
export class AnswerTooLargeError extends Error {
  /** @param maxBytes the bound */
  constructor(maxBytes: number) {
    super(`the answer exceeds the ${maxBytes}-byte bound (--max-answer-bytes); reading stopped`);
    this.name = "AnswerTooLargeError";
  }
}

/** How the CLI reaches the daemons. */
export type FleetTransport = "auto" | "direct" | "proxy";

/** Every transport value, for flag validation. */
export const FLEET_TRANSPORTS: readonly FleetTransport[] = ["auto", "direct", "proxy"];

/** One node's result. */
export interface NodeResult {
  /** The node. */
  node: string;
  /** The daemon pod asked. */
  pod: string;
  /** What happened. */
  status: NodeStatus;
  /** The snapshot, when `ok`. */
  snapshot?: Snapshot;
  /** Why, when not `ok`. */
  error?: string;
  /** How it was reached. */
  transport?: "direct" | "proxy";
  /** How long the node took, in milliseconds. */
  durationMs: number;
}

/** One HTTP answer. */
export interface HttpAnswer {
  /** Status code. */
  status: number;
  /** `Retry-After` seconds, when given. */
  retryAfterSeconds?: number;
  /** The body. */
  body: string;
  /** The daemon's build, from its `X-Aicr-Version` and `X-Aicr-Commit` headers. */
  build?: { version?: string; commit?: string };
}

/** Options of one direct request. */
export interface DirectRequest {
  /** `https://<ip>:<port>/v1/snapshot`. */
  url: string;
  /** The CA to trust (PEM). */
  ca: string;
  /** The node: the name the certificate must carry (and the TLS server name). */
  servername: string;
  /** The bearer token. */
  token: string;
  /** Give up connecting after this long. */
  connectTimeoutMs: number;
  /** Aborts the request (the per-node deadline). */
  signal: AbortSignal;
  /** Stop reading (and fail with {@link AnswerTooLargeError}) past this many bytes. @default 16 MiB */
  maxBytes?: number;
}

/** A direct HTTPS GET; rejects with a `code`-carrying error when no answer came. */
export type DirectGet = (request: DirectRequest) => Promise<HttpAnswer>;

/** What a fetch needs. */
export interface FleetDeps {
  /** The client (the caller's kubeconfig identity). */
  kube: KubeClient;
  /** Logger. */
  log: Logger;
  /** The direct transport. @default node:https */
  directGet?: DirectGet;
  /** Milliseconds clock. @default performance.now */
  clock?: () => number;
  /** Sleep (429 retry). @default setTimeout */
  sleep?: (ms: number, signal?: AbortSignal) => Promise<void>;
  /** Wall clock, for the certificates signed on the way. @default new Date() */
  now?: () => Date;
  /** The build every daemon must be. @default this binary's */
  build?: BuildInfo;
}

/** Options of {@link fetchFleet}. */
export interface FleetOptions {
  /** The daemon's namespace. */
  namespace: string;
  /** The daemon's name. @default "aicr-daemon" */
  name?: string;
  /** `--transport`. @default "auto" */
  transport?: FleetTransport;
  /** Nodes asked at once. @default 16 */
  concurrency?: number;
  /** Per-node deadline. @default 30000 */
  timeoutMs?: number;
  /** Direct connect timeout (also what `auto` waits before falling back). @default 2000 */
  connectTimeoutMs?: number;
  /** The largest answer read from one daemon (streamed, then cut). @default 16 MiB */
  maxAnswerBytes?: number;
  /** Only these nodes. @default every node with a daemon pod */
  nodes?: readonly string[];
  /** SIGINT/SIGTERM. */
  signal?: AbortSignal;
  /**
   * Takes each asked node's result as soon as it is known (the snapshot with it, when ok), with
   * the node's position in name order. When given, the returned results carry no snapshots:
   * the fetch keeps a small summary per node and memory stays bounded by the answers in flight
   * (see `createFleetWriter`). A rejection ends the fetch after the nodes in flight.
   */
  onResult?: (result: NodeResult, position: number) => Promise<void>;
  /**
   * List the nodes once, as the reader, for the cluster's NodeTopology (each daemon reports its
   * own Node only; see `fleet_topology.ts`). @default true
   */
  topology?: boolean;
}

/** What a fetch returns. */
export interface FleetResult {
  /** One result per node, sorted by node name. */
  results: NodeResult[];
  /** The transport used. */
  transport: "direct" | "proxy";
  /** Targeted (or asked-for) nodes with no daemon pod, reported as not ready. */
  missingPods: number;
  /** The cluster's NodeTopology, listed once (absent with `topology: false`). */
  topology?: FleetTopology;
}

const TOKEN_SECONDS = 600;

/**
 * Mints the reader's token for one node (TokenRequest, audience `aicr-daemon:<node>`, bound
 * to that Node object, 10 minutes): only that node's daemon accepts it. (Bound to the node,
 * not the daemon's pod: the API server binds a token only to a pod of the same ServiceAccount,
 * and the reader is not the daemon's.)
 *
 * @param kube the client
 * @param options namespace, reader ServiceAccount and the node
 * @returns the token
 * @throws {PermissionError} when the caller may not create `serviceaccounts/token` for it
 * @throws {NotFoundError} when the reader ServiceAccount does not exist
 */
export async function mintReaderToken(
  kube: KubeClient,
  options: {
    namespace: string;
    serviceAccount: string;
    node: string;
    /**
     * Whether the API server binds tokens to Nodes (Kubernetes 1.31+); set to false when it
     * refuses, so the rest of the fetch asks without. @default { supported: true }
     */
    nodeBinding?: { supported: boolean };
    signal?: AbortSignal;
  },
): Promise<string> {
  const { namespace, serviceAccount, node } = options;
  const binding = options.nodeBinding ?? { supported: true };
  const ask = (bound: boolean) =>
    requestServiceAccountToken(kube, {
      namespace,
      serviceAccount,
      spec: {
        audiences: [daemonNodeAudience(node)],
        expirationSeconds: TOKEN_SECONDS,
        // Bound to the node (a token cannot be bound to a pod of another ServiceAccount).
        ...(bound ? { boundObjectRef: { apiVersion: "v1", kind: "Node", name: node } } : {}),
      },
      ...(options.signal ? { signal: options.signal } : {}),
    });
  try {
    // What this request asked: nodes fetched at once may all be refused before one learns.
    const bound = binding.supported;
    try {
      return await ask(bound);
    } catch (error) {
      // Before 1.31 the API server cannot bind a token to a Node (400/422 naming the kind):
      // the per-node audience alone still keeps one node's token from opening another.
      if (!bound || !refusesNodeBinding(error)) throw error;
      binding.supported = false;
      return await ask(false);
    }
  } catch (error) {
    if (error instanceof KubeApiError && (error.status === 401 || error.status === 403)) {
      throw new PermissionError(
        `Cannot mint a token for ServiceAccount '${namespace}/${serviceAccount}': the caller lacks 'create serviceaccounts/token' on it`,
        { cause: error },
      );
    }
    if (error instanceof KubeApiError && error.isNotFound) {
      throw new NotFoundError(
        `Cannot mint a token for ServiceAccount '${namespace}/${serviceAccount}' bound to node '${node}': ${
          error.message.replace(/^Cannot [A-Z]+ \S+: /, "")
        } (is the daemon installed, and the node still there?)`,
        { cause: error, details: [`  install it: aicr daemonset install -n ${namespace}`] },
      );
    }
    throw error;
  }
}

function refusesNodeBinding(error: unknown): boolean {
  return error instanceof KubeApiError && (error.status === 400 || error.status === 422) &&
    /boundObjectRef|kind|Node/i.test(error.message);
}

/**
 * Reads the CA certificate the installer published.
 *
 * @param kube the client
 * @param options namespace and daemon name
 * @returns the PEM
 * @throws {NotFoundError} when the ConfigMap or its key is missing
 */
export async function readDaemonCa(
  kube: KubeClient,
  options: { namespace: string; name: string },
): Promise<string> {
  const cmName = daemonCaConfigMapName(options.name);
  const cm = await kube.get<KubeObject & { data?: Record<string, string> }>(
    "ConfigMap",
    options.namespace,
    cmName,
    { timeoutMs: 10_000 },
  );
  const ca = cm?.data?.["ca.crt"];
  if (!ca) {
    throw new NotFoundError(
      `Cannot verify the daemons as ConfigMap '${options.namespace}/${cmName}' holds no 'ca.crt': is the daemon installed?`,
      { details: [`  install it: aicr daemonset install -n ${options.namespace}`] },
    );
  }
  return ca;
}

/**
 * The real direct transport: node:https, the install's CA as the only trust anchor, and the
 * certificate must name the node asked (its DNS SAN), whatever IP answered.
 *
 * @param req URL, CA, server name, token, timeouts
 * @returns the answer
 */
export function nodeDirectGet(req: DirectRequest): Promise<HttpAnswer> {
  const maxBytes = req.maxBytes ?? DEFAULT_MAX_ANSWER_BYTES;
  return new Promise((resolve, reject) => {
    const r = httpsRequest(req.url, {
      method: "GET",
      ca: req.ca,
      servername: req.servername,
      checkServerIdentity: (_host: string, cert: PeerCertificate) =>
        checkServerIdentity(req.servername, cert),
      // JSON, not YAML: a 33 KB snapshot parses in under 1 ms as JSON and in ~25 ms as YAML.
      headers: { authorization: `Bearer ${req.token}`, accept: "application/json" },
      agent: false,
      signal: req.signal,
    }, (res) => {
      clearTimeout(connectTimer);
      const chunks: Buffer[] = [];
      let size = 0;
      const declared = Number(res.headers["content-length"] ?? 0);
      // guard: fleet-declared-size: an answer declaring more than the bound is refused unread
      if (declared > maxBytes) {
        r.destroy();
        reject(new AnswerTooLargeError(maxBytes));
        return;
      }
      res.on("data", (chunk: Buffer) => {
        size += chunk.length;
        // guard: fleet-streamed-size: an answer streaming past the bound is cut
        if (size > maxBytes) {
          // Streamed and cut: one huge answer costs at most the bound, never the whole fetch.
          r.destroy();
          reject(new AnswerTooLargeError(maxBytes));
          return;
        }
        chunks.push(chunk);
      });
      res.on("error", reject);
      res.on("end", () => {
        const header = res.headers["retry-after"];
        const seconds = typeof header === "string" && /^\d+$/.test(header)
          ? Number(header)
          : undefined;
        resolve({
          status: res.statusCode ?? 0,
          body: Buffer.concat(chunks).toString("utf8"),
          ...daemonBuildOf(res.headers),
          ...(seconds !== undefined ? { retryAfterSeconds: seconds } : {}),
        });
      });
    });
    const connectTimer = setTimeout(() => {
      r.destroy(Object.assign(new Error(`connect timed out after ${req.connectTimeoutMs} ms`), {
        code: "ECONNECTTIMEOUT",
      }));
    }, req.connectTimeoutMs);
    // Only connecting is bounded here: a daemon may take long to answer (a cold collection),
    // which the per-node deadline (the signal) bounds.
    r.on("socket", (socket) => {
      if (!socket.connecting) clearTimeout(connectTimer);
      else socket.once("connect", () => clearTimeout(connectTimer));
    });
    r.on("error", (error) => {
      clearTimeout(connectTimer);
      reject(error);
    });
    r.end();
  });
}

/**
 * The daemon's build from its answer's `X-Aicr-Version` and `X-Aicr-Commit` headers, sent
 * directly or through the API server's pod proxy (which passes them on).
 */
function daemonBuildOf(
  headers: Record<string, string | string[] | undefined>,
): Pick<HttpAnswer, "build"> {
  const version = headers["x-aicr-version"];
  const commit = headers["x-aicr-commit"];
  if (typeof version !== "string" && typeof commit !== "string") return {};
  return {
    build: {
      ...(typeof version === "string" ? { version } : {}),
      ...(typeof commit === "string" ? { commit } : {}),
    },
  };
}

function statusMessage(body: string): string {
  try {
    const parsed = JSON.parse(body) as { message?: unknown };
    if (typeof parsed.message === "string") return parsed.message;
  } catch {
    // Not a Status body.
  }
  return body.trim().slice(0, 200);
}

type Outcome = Pick<NodeResult, "status" | "snapshot" | "error">;

function fromAnswer(answer: HttpAnswer, node: string, build: BuildInfo): Outcome {
  const { status, body } = answer;
  if (status === 200) {
    let snapshot: Snapshot;
    try {
      snapshot = parseSnapshot(body, { source: `daemon on ${node}` });
    } catch (error) {
      return { status: "unreachable", error: `invalid snapshot: ${(error as Error).message}` };
    }
    const source = snapshot.metadata["source-node"];
    if (source !== node) {
      // Whoever answered speaks for another node: nothing of it is kept.
      return {
        status: "wrong-identity",
        error: `the snapshot describes node '${source}', not '${node}'`,
      };
    }
    try {
      // The daemon says its build in its answer's headers and its snapshot's metadata.
      checkAgentBuild(agentBuildOf(snapshot, JSON.stringify(answer.build ?? {})), build, "", {
        what: `node '${node}''s snapshot`,
        who: "the daemon",
      });
    } catch (error) {
      if (!(error instanceof AgentIdentityError)) throw error;
      return {
        status: "wrong-build",
        error: error.message.replace(/: the image '' is/, ": its image is"),
      };
    }
    return { status: "ok", snapshot };
  }
  const message = `HTTP ${status}: ${statusMessage(body)}`;
  if (status === 401 || status === 403) return { status: "denied", error: message };
  if (status === 504) return { status: "timed-out", error: message };
  if (status === 503) {
    // The API server's proxy says this when it cannot reach the pod; the daemon when it has no data.
    return /error trying to reach service|dial tcp|connection refused/i.test(message)
      ? { status: "unreachable", error: message }
      : { status: "not-ready", error: message };
  }
  return { status: "unreachable", error: message };
}

/**
 * TLS verification failures: the peer is not a daemon of this install speaking for this node
 * (another node's certificate, another CA's, or the self-signed placeholder of a daemon whose
 * request is not signed yet).
 */
const IDENTITY_ERROR_CODES = new Set([
  "ERR_TLS_CERT_ALTNAME_INVALID",
  "DEPTH_ZERO_SELF_SIGNED_CERT",
  "SELF_SIGNED_CERT_IN_CHAIN",
  "UNABLE_TO_VERIFY_LEAF_SIGNATURE",
  "UNABLE_TO_GET_ISSUER_CERT",
  "UNABLE_TO_GET_ISSUER_CERT_LOCALLY",
  "CERT_SIGNATURE_FAILURE",
  "CERT_UNTRUSTED",
  "CERT_NOT_YET_VALID",
  "CERT_HAS_EXPIRED",
]);

function fromError(error: unknown, deadline: AbortSignal, signal?: AbortSignal): Outcome {
  const message = error instanceof Error ? error.message : String(error);
  // SIGINT/SIGTERM ended the node's fetch: neither the node's timeout nor its fault.
  if (signal?.aborted) {
    return { status: "interrupted", error: `interrupted (${String(signal.reason)})` };
  }
  if (error instanceof AnswerTooLargeError || error instanceof ResponseTooLargeError) {
    return { status: "too-large", error: message };
  }
  const code = (error as { code?: unknown } | null)?.code;
  if (typeof code === "string" && IDENTITY_ERROR_CODES.has(code)) {
    return {
      status: "wrong-identity",
      error: `the daemon's certificate does not prove this node (${code}): ${message}`,
    };
  }
  if (deadline.aborted || /timed out/i.test(message)) {
    return { status: "timed-out", error: message };
  }
  return { status: "unreachable", error: message };
}

function isConnectFailure(outcome: Outcome): boolean {
  return outcome.status === "unreachable" && !/^HTTP \d/.test(outcome.error ?? "") ||
    outcome.status === "timed-out" && /connect timed out/.test(outcome.error ?? "");
}

/**
 * The `auto` transport: one ready pod is fetched directly; when that cannot connect, the fleet
 * is fetched through the API server's pod proxy. A probe that connected keeps its result (at
 * its index in `results`).
 *
 * @returns the transport for the rest of the fleet
 */
async function probeDirect(
  sorted: readonly DaemonPodState[],
  results: NodeResult[],
  deps: {
    fetchNode: (pod: DaemonPodState, via: "direct" | "proxy") => Promise<NodeResult>;
    log: Logger;
  },
): Promise<"direct" | "proxy"> {
  const probeIndex = sorted.findIndex((p) => p.ready && p.ip && p.port !== undefined);
  if (probeIndex < 0) return "direct";
  const first = await deps.fetchNode(sorted[probeIndex] as DaemonPodState, "direct");
  if (isConnectFailure(first)) {
    deps.log.info("daemons not reachable directly; using the API server's pod proxy", {
      node: first.node,
      error: first.error ?? "",
    });
    return "proxy";
  }
  results[probeIndex] = first;
  return "direct";
}

/**
 * Fetches every targeted node's snapshot. Never throws for one node's failure: each node gets
 * its status. Throws only when nothing can be asked (no CA, no token, no pods readable).
 *
 * @param deps client, logger, transport, clock
 * @param options namespace, name, transport, bounds, node filter, signal
 * @returns one result per node and the transport used
 * @throws {NotFoundError} when the daemon is not installed
 * @throws {PermissionError} when the reader token cannot be minted
 */
export async function fetchFleet(deps: FleetDeps, options: FleetOptions): Promise<FleetResult> {
  const { kube, log } = deps;
  const {
    name = DEFAULT_DAEMON_NAME,
    transport = "auto",
    concurrency = 16,
    timeoutMs = 30_000,
    connectTimeoutMs = 2000,
    maxAnswerBytes = DEFAULT_MAX_ANSWER_BYTES,
    signal,
    namespace,
  } = options;
  const clock = deps.clock ?? (() => performance.now());
  // Late joiners' certificates: signed by the signer, or here; those about to be Ready awaited.
  const wanted = options.nodes ? new Set(options.nodes) : undefined;
  const call = { namespace, name, ...(signal ? { signal } : {}) };
  await signAndAwaitReady(deps, { ...call, timeoutMs, ...(wanted ? { nodes: wanted } : {}) });
  const [ca, listed] = await Promise.all([
    transport === "proxy" ? Promise.resolve("") : readDaemonCa(kube, { namespace, name }),
    daemonPods(kube, call),
  ]);
  warnVersionSkew(log, skewOf(listed.pods, buildInfo().version), buildInfo().version, namespace);
  const pods = listed.pods.filter((p) => p.node !== "" && (!wanted || wanted.has(p.node)));
  const missing = await missingNodes(deps, listed, wanted);
  const node: NodeFetch = {
    kube,
    namespace,
    ca,
    reader: daemonReaderName(name),
    nodeBinding: { supported: true },
    connectTimeoutMs,
    timeoutMs,
    maxAnswerBytes,
    directGet: deps.directGet ?? nodeDirectGet,
    clock,
    sleep: deps.sleep ?? sleepFor,
    ...(signal ? { signal } : {}),
    build: deps.build ?? buildInfo(),
  };
  const fetchNode = (pod: DaemonPodState, via: "direct" | "proxy") =>
    fetchNodeSnapshot(node, pod, via);
  // Once per fetch, beside the nodes: the daemons report their own Node only.
  const topology = options.topology === false
    ? undefined
    : startClusterTopology(deps, { namespace, reader: node.reader, ...(signal ? { signal } : {}) });
  const sorted = [...pods].sort((a, b) => a.node.localeCompare(b.node));
  const results: NodeResult[] = new Array(sorted.length);
  const via = transport === "auto"
    ? await probeDirect(sorted, results, { fetchNode, log })
    : transport;
  const settle = async (index: number, result: NodeResult) => {
    if (!options.onResult) return void (results[index] = result);
    await options.onResult(result, index);
    const { snapshot: _handedOver, ...summary } = result;
    results[index] = summary;
  };
  const rest = sorted.map((pod, index) => ({ pod, index })).filter(({ index }) =>
    results[index] === undefined
  );
  const probed = results.findIndex((r) => r !== undefined);
  if (probed >= 0) await settle(probed, results[probed] as NodeResult);
  log.debug("fetching the fleet", { nodes: sorted.length, transport: via, concurrency });
  await mapConcurrent(rest, concurrency, async ({ pod, index }) => {
    await settle(index, await fetchNode(pod, via));
  });
  if (!node.nodeBinding.supported) {
    log.warn(
      "the API server cannot bind tokens to a Node (before 1.31): each reader token carries only its node's audience",
    );
  }
  const absent = absentResults(missing, wanted !== undefined);
  const cluster = await topology;
  return {
    results: [...results, ...absent].sort((a, b) => a.node.localeCompare(b.node)),
    transport: via,
    missingPods: missing.length,
    ...(cluster ? { topology: cluster } : {}),
  };
}

/** Lists the cluster's NodeTopology once, and warns when it cannot (the nodes are kept). */
async function startClusterTopology(
  deps: FleetDeps,
  options: { namespace: string; reader: string; signal?: AbortSignal },
): Promise<FleetTopology> {
  const topology = await readClusterTopology({ kube: deps.kube, log: deps.log }, {
    ...options,
    version: buildInfo().version,
    now: (deps.now ?? (() => new Date()))(),
  });
  if (topology.status !== "ok") {
    deps.log.warn(
      "cannot list the nodes for the cluster's NodeTopology; the node snapshots are kept",
      {
        status: topology.status,
        error: topology.message ?? "",
        remedy:
          `grant 'list nodes' to ServiceAccount ${options.namespace}/${options.reader} (reinstall the daemon) or to the caller`,
      },
    );
  }
  return topology;
}

/** Targeted nodes without a daemon pod, each its own not-ready result. */
function absentResults(missing: readonly string[], asked: boolean): NodeResult[] {
  return missing.map((node): NodeResult => ({
    node,
    pod: "",
    status: "not-ready",
    error: asked
      ? "no daemon pod on this node (not targeted, or not scheduled yet)"
      : "no daemon pod on this node yet",
    durationMs: 0,
  }));
}

/** The versions other than `version` the daemons' images say. */
function skewOf(pods: readonly DaemonPodState[], version: string): string[] {
  return [...new Set(pods.flatMap((p) => imageVersion(p.image) ?? []))].filter((v) =>
    v !== version
  );
}

/** Targeted nodes that have no daemon pod: the asked-for ones, or those the placement targets. */
async function missingNodes(
  deps: FleetDeps,
  listed: Awaited<ReturnType<typeof daemonPods>>,
  wanted: Set<string> | undefined,
): Promise<string[]> {
  const { kube, log } = deps;
  const withPod = new Set(listed.pods.map((p) => p.node));
  const missingCount = Math.max(0, (listed.desired ?? 0) - listed.pods.length);
  return wanted
    ? [...wanted].filter((node) => !withPod.has(node))
    : missingCount > 0 && listed.placement
    ? await targetedNodes(kube, listed.placement).then(
      (nodes) => nodes.filter((node) => !withPod.has(node)),
      (error) => {
        log.warn("targeted nodes without a daemon pod (cannot list nodes to name them)", {
          count: missingCount,
          error: error instanceof Error ? error.message.split("\n")[0] : String(error),
        });
        return [];
      },
    )
    : [];
}

/** What fetching one node needs. */
interface NodeFetch {
  kube: KubeClient;
  namespace: string;
  ca: string;
  /** The reader ServiceAccount a token is minted for, per node. */
  reader: string;
  /** Whether the API server binds tokens to Nodes (learnt on the first refusal). */
  nodeBinding: { supported: boolean };
  connectTimeoutMs: number;
  timeoutMs: number;
  maxAnswerBytes: number;
  directGet: DirectGet;
  clock: () => number;
  sleep: (ms: number, signal?: AbortSignal) => Promise<void>;
  signal?: AbortSignal;
  /** The build every daemon must be. */
  build: BuildInfo;
}

async function askDirect(
  ctx: NodeFetch,
  pod: DaemonPodState,
  deadline: AbortSignal,
  token: string,
): Promise<HttpAnswer> {
  const { ca, connectTimeoutMs } = ctx;
  const host = pod.ip?.includes(":") ? `[${pod.ip}]` : pod.ip;
  return await ctx.directGet({
    url: `https://${host}:${pod.port}/v1/snapshot`,
    ca,
    servername: pod.node,
    token,
    connectTimeoutMs,
    signal: deadline,
    maxBytes: ctx.maxAnswerBytes,
  });
}

async function askProxy(
  ctx: NodeFetch,
  pod: DaemonPodState,
  deadline: AbortSignal,
  token: string,
): Promise<HttpAnswer> {
  const { kube, namespace, timeoutMs } = ctx;
  let build: Pick<HttpAnswer, "build"> = {};
  try {
    const body = await kube.rest.text({
      method: "GET",
      path: `/api/v1/namespaces/${namespace}/pods/https:${pod.pod}:${pod.port}/proxy/v1/snapshot`,
      headers: { "X-Aicr-Authorization": `Bearer ${token}` },
      // One attempt: a node's answer is its status, retried only on 429 below.
      idempotent: false,
      timeoutMs: timeoutMs,
      signal: deadline,
      maxResponseBytes: ctx.maxAnswerBytes,
      onHeaders: (headers) => void (build = daemonBuildOf(headers)),
    });
    return { status: 200, body, ...build };
  } catch (error) {
    if (error instanceof KubeApiError && error.status !== 0) {
      const message = error.message.replace(/^Cannot GET \S+: \d+ (\w+: )?/, "");
      return {
        status: error.status,
        body: JSON.stringify({ message }),
        ...(error.retryAfterSeconds !== undefined
          ? { retryAfterSeconds: error.retryAfterSeconds }
          : {}),
      };
    }
    throw error;
  }
}

/** Fetches one node's snapshot, once more after a 429 within its deadline; never throws. */
async function fetchNodeSnapshot(
  ctx: NodeFetch,
  pod: DaemonPodState,
  via: "direct" | "proxy",
): Promise<NodeResult> {
  const { clock, timeoutMs, signal } = ctx;
  const started = clock();
  const done = (outcome: Outcome): NodeResult => ({
    node: pod.node,
    pod: pod.pod,
    ...outcome,
    transport: via,
    durationMs: Math.round(clock() - started),
  });
  if (!pod.ready && pod.exited && isForeignDaemonExit(pod.exited.line)) {
    return done({ status: "wrong-build", error: foreignDaemonMessage(pod) });
  }
  if (!pod.ready || !pod.ip || pod.port === undefined) {
    return done({
      status: "not-ready",
      error: `pod ${pod.pod} is not Ready${pod.detail ? ` (${pod.detail})` : ""}`,
    });
  }
  // A timer of its own, cleared when the node is done: an AbortSignal.timeout() that a request
  // still listens to keeps the process alive until it fires, after a SIGTERM too.
  const timeout = new AbortController();
  const timer = setTimeout(
    () => timeout.abort(new DOMException(`timed out after ${timeoutMs} ms`, "TimeoutError")),
    timeoutMs,
  );
  const deadline = AbortSignal.any([timeout.signal, ...(signal ? [signal] : [])]);
  try {
    return await askNode(ctx, pod, {
      via,
      deadline,
      timeoutMs,
      done,
      ...(signal ? { signal } : {}),
    });
  } finally {
    clearTimeout(timer);
  }
}

/** The token, then the daemon's answer (once more after a 429), within the node's deadline. */
async function askNode(
  ctx: NodeFetch,
  pod: DaemonPodState,
  options: {
    via: "direct" | "proxy";
    deadline: AbortSignal;
    timeoutMs: number;
    signal?: AbortSignal;
    done: (outcome: Outcome) => NodeResult;
  },
): Promise<NodeResult> {
  const { via, deadline, timeoutMs, signal, done } = options;
  const { sleep } = ctx;
  const ask = via === "direct" ? askDirect : askProxy;
  let token: string;
  try {
    token = await mintReaderToken(ctx.kube, {
      namespace: ctx.namespace,
      serviceAccount: ctx.reader,
      node: pod.node,
      nodeBinding: ctx.nodeBinding,
      signal: deadline,
    });
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    return error instanceof PermissionError || error instanceof NotFoundError
      ? done({ status: "denied", error: `no reader token: ${message}` })
      : done(fromError(error, deadline, signal));
  }
  try {
    let answer = await ask(ctx, pod, deadline, token);
    if (answer.status === 429) {
      // `?fresh` rate limit: once, after the daemon's Retry-After, within the deadline.
      await sleep(Math.min((answer.retryAfterSeconds ?? 1) * 1000, timeoutMs), deadline);
      answer = await ask(ctx, pod, deadline, token);
    }
    return done(fromAnswer(answer, pod.node, ctx.build));
  } catch (error) {
    return done(fromError(error, deadline, signal));
  }
}

/**
 * The tolerations the DaemonSet controller adds to every daemon pod (so node conditions do not
 * keep a daemon off its node).
 */
const DAEMONSET_TOLERATIONS: readonly Toleration[] = [
  { key: "node.kubernetes.io/not-ready", operator: "Exists", effect: "NoExecute" },
  { key: "node.kubernetes.io/unreachable", operator: "Exists", effect: "NoExecute" },
  { key: "node.kubernetes.io/disk-pressure", operator: "Exists", effect: "NoSchedule" },
  { key: "node.kubernetes.io/memory-pressure", operator: "Exists", effect: "NoSchedule" },
  { key: "node.kubernetes.io/pid-pressure", operator: "Exists", effect: "NoSchedule" },
  { key: "node.kubernetes.io/unschedulable", operator: "Exists", effect: "NoSchedule" },
  { key: "node.kubernetes.io/network-unavailable", operator: "Exists", effect: "NoSchedule" },
];

/** A node taint. */
interface Taint {
  key: string;
  value?: string;
  effect: string;
}

function tolerated(tolerations: readonly Toleration[], taint: Taint): boolean {
  return tolerations.some((t) => {
    if (t.effect !== undefined && t.effect !== taint.effect) return false;
    if (t.operator === "Exists") return t.key === undefined || t.key === taint.key;
    return t.key === taint.key && (t.value ?? "") === (taint.value ?? "");
  });
}

/**
 * The nodes a DaemonSet targets: its node selector matches and every NoSchedule/NoExecute taint
 * is tolerated (with the controller's own tolerations added).
 *
 * @param kube the client
 * @param placement the DaemonSet's node selector and tolerations
 * @returns the node names
 * @throws {KubeApiError} when nodes cannot be listed
 */
async function targetedNodes(kube: KubeClient, placement: DaemonPlacement): Promise<string[]> {
  const selector = Object.entries(placement.nodeSelector).map(([k, v]) => `${k}=${v}`).join(",");
  const nodes = await kube.listAll("Node", undefined, {
    ...(selector ? { labelSelector: selector } : {}),
    timeoutMs: 10_000,
  });
  const tolerations = [...placement.tolerations, ...DAEMONSET_TOLERATIONS];
  return nodes.filter((node) => {
    const taints = ((node.spec as { taints?: Taint[] } | undefined)?.taints ?? [])
      .filter((t) => t.effect === "NoSchedule" || t.effect === "NoExecute");
    return taints.every((taint) => tolerated(tolerations, taint));
  }).map((node) => node.metadata?.name ?? "").filter((name) => name !== "");
}

/**
 * One multi-document YAML stream of the ok nodes' snapshots (what `aicr diff --fleet` reads).
 *
 * @param results the fetch results
 * @returns the stream text (empty when no node was ok)
 */
export function fleetStream(results: readonly NodeResult[]): string {
  return results.flatMap((r) => r.snapshot ? [`---\n${encodeSnapshot(r.snapshot, "yaml")}`] : [])
    .join("");
}

/**
 * The per-node status table (stderr).
 *
 * @param results the fetch results
 * @returns the table, one line per node after the header
 */
export function formatFleetTable(results: readonly NodeResult[]): string {
  const rows = [
    ["NODE", "STATUS", "TRANSPORT", "TIME", "DETAIL"],
    ...results.map((r) => [
      r.node,
      r.status,
      r.transport ?? "",
      `${(r.durationMs / 1000).toFixed(2)}s`,
      (r.error ?? "").split("\n")[0] ?? "",
    ]),
  ];
  const widths = [0, 0, 0, 0];
  for (const row of rows) {
    for (let i = 0; i < 4; i++) widths[i] = Math.max(widths[i] as number, (row[i] ?? "").length);
  }
  return rows.map((row) =>
    row.map((cell, i) => (i < 4 ? cell.padEnd(widths[i] ?? 0) : cell)).join("  ").trimEnd()
  ).join("\n") + "\n";
}

/**
 * The error a fetch ends with when some node was not ok: a permission error (exit 4) when
 * every failure is a denial, a timeout (exit 5) when every one timed out, otherwise incomplete
 * (exit 9: not Ready or unreachable daemons; the API itself answered, so never 6). Undefined
 * when every node is ok (and at least one was asked).
 *
 * @param fleet the fetch result
 * @returns the error, or undefined
 */
export function fleetError(fleet: FleetResult): ToolError | undefined {
  const failed = fleet.results.filter((r) => r.status !== "ok");
  if (fleet.results.length === 0) {
    return new NotFoundError("Cannot fetch the fleet: no daemon pod runs on a targeted node");
  }
  if (failed.length === 0) return undefined;
  const interrupted = failed.find((r) => r.status === "interrupted");
  if (interrupted) {
    // Exit 130 as every verb on SIGINT/SIGTERM; what was fetched before it is written.
    return new InterruptedError(
      `Cannot fetch every node's snapshot: ${interrupted.error ?? "interrupted"}`,
    );
  }
  const message =
    `Cannot fetch every node's snapshot: ${failed.length} of ${fleet.results.length} nodes failed (${
      [...new Set(failed.map((r) => r.status))].join(", ")
    })`;
  if (failed.every((r) => r.status === "denied")) return new PermissionError(message);
  if (failed.every((r) => r.status === "timed-out")) return new TimeoutError(message);
  const notReady = failed.filter((r) => r.status === "not-ready").length;
  return new IncompleteError(message, {
    details: notReady > 0
      ? [
        `  ${notReady} node(s) have no Ready daemon pod: wait and fetch again, or see why with 'kubectl describe pod' on the pods named above`,
      ]
      : [],
  });
}
