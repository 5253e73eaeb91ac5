/**
 * One node of the fleet fetch: its reader token (audience `aicr-daemon:<node>`, bound to its
 * Node), the daemon's answer directly or through the API server's pod proxy (once more after a
 * 429), within the node's own deadline, and that answer or failure turned into the node's
 * status. Never throws for the node's failure.
 *
 * @module
 */
import { NotFoundError, PermissionError } from "../errors.ts";
import { KubeApiError, ResponseTooLargeError } from "../kube/mod.ts";
import type { KubeClient } from "../kube/mod.ts";
import { daemonNodeAudience } from "../manifests/mod.ts";
import { parseSnapshot } from "../snapshot/mod.ts";
import type { Snapshot } from "../snapshot/mod.ts";
import type { BuildInfo } from "../version.ts";
import {
  agentBuildOf,
  AgentIdentityError,
  checkAgentBuild,
  foreignDaemonMessage,
  isForeignDaemonExit,
} from "./agent_identity.ts";
import { AnswerTooLargeError, daemonBuildOf } from "./fleet_transport.ts";
import type { DirectGet, HttpAnswer } from "./fleet_transport.ts";
import { requestServiceAccountToken } from "./fleet_topology.ts";
import type { DaemonPodState } from "./install.ts";

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

/** Whether a node's outcome says its daemon could not be connected to (not that it answered). */
export function isConnectFailure(outcome: Outcome): boolean {
  return outcome.status === "unreachable" && !/^HTTP \d/.test(outcome.error ?? "") ||
    outcome.status === "timed-out" && /connect timed out/.test(outcome.error ?? "");
}

/** What fetching one node needs. */
export interface NodeFetch {
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
export async function fetchNodeSnapshot(
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
