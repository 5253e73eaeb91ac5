/**
 * The cluster's NodeTopology, collected once per fleet fetch: each daemon reports its own Node
 * only (one GET), so the fetch lists the nodes once (pages of 500) and writes the fold once,
 * beside the node files (`_cluster-topology.yaml`) or as the stream's last document. Without it
 * every daemon listed every node on every collection and every snapshot carried every node's
 * labels: O(nodes²) bytes per fetch.
 *
 * The list is made **as the reader** (`aicr-reader`, whose ClusterRole holds `list nodes`:
 * `DAEMON_READER_RULES`): one TokenRequest for the API server's audience (10 minutes, kept in
 * this process), so whoever may fetch sees the topology every snapshot used to carry, whatever
 * their own RBAC says. An install from before the reader held `list nodes` is refused (403):
 * the fetch then lists with the caller's own credentials, and when that is refused too the
 * document says `denied` and the fetch warns (the node snapshots are unaffected).
 *
 * @module
 */
import { collectTopology, createClusterReader } from "../collectors/mod.ts";
import type { KubeClient } from "../kube/mod.ts";
import { ToolError } from "../errors.ts";
import type { Logger } from "../log.ts";
import { createSnapshot, TOPOLOGY_SCOPE_METADATA } from "../snapshot/mod.ts";
import type { Snapshot, SourceStatus, Subtype } from "../snapshot/mod.ts";

/** What the fetch learnt of the cluster's topology. */
export interface FleetTopology {
  /** The topology document (`topology-scope: cluster`, no source node, NodeTopology only). */
  document: Snapshot;
  /** Whether the list succeeded (`ok`), or why not. */
  status: SourceStatus;
  /** The nodes listed. */
  nodes: number;
  /** Whose permission listed them: the reader ServiceAccount, or the caller's own. */
  as: "reader" | "caller";
  /** Why, when not ok. */
  message?: string;
}

/** Options of {@link readClusterTopology}. */
export interface ClusterTopologyOptions {
  /** The daemon's namespace (the reader's). */
  namespace: string;
  /** The reader ServiceAccount. */
  reader: string;
  /** The version written into the document's metadata. */
  version: string;
  /** The document's timestamp. */
  now: Date;
  /** Aborts the calls. */
  signal?: AbortSignal;
}

const READER_TOKEN_SECONDS = 600;

/**
 * One TokenRequest for a ServiceAccount. It stores nothing, so it is sent again safely.
 *
 * @param kube the caller's client
 * @param options the ServiceAccount, the request's spec (audiences, expiry, binding) and signal
 * @returns the token
 * @throws {KubeApiError} as the API server answers
 * @throws {ToolError} when no token came back
 */
export async function requestServiceAccountToken(
  kube: KubeClient,
  options: {
    namespace: string;
    serviceAccount: string;
    spec: Record<string, unknown>;
    signal?: AbortSignal;
  },
): Promise<string> {
  const answer = await kube.rest.json<{ status?: { token?: string } }>({
    method: "POST",
    path: `/api/v1/namespaces/${options.namespace}/serviceaccounts/${options.serviceAccount}/token`,
    body: { apiVersion: "authentication.k8s.io/v1", kind: "TokenRequest", spec: options.spec },
    idempotent: true,
    timeoutMs: 10_000,
    ...(options.signal ? { signal: options.signal } : {}),
  });
  const token = answer.status?.token;
  if (!token) throw new ToolError("Cannot mint the reader token: the TokenRequest had no token");
  return token;
}

/**
 * Mints the reader's token for the API server's own audience (no node, no daemon accepts it).
 *
 * @returns the token
 * @throws {KubeApiError} when the caller may not create it
 * @throws {ToolError} when no token came back
 */
function mintReaderApiToken(
  kube: KubeClient,
  options: Pick<ClusterTopologyOptions, "namespace" | "reader" | "signal">,
): Promise<string> {
  return requestServiceAccountToken(kube, {
    namespace: options.namespace,
    serviceAccount: options.reader,
    spec: { expirationSeconds: READER_TOKEN_SECONDS },
    ...(options.signal ? { signal: options.signal } : {}),
  });
}

/**
 * Lists every node once, as the reader (or the caller, see the module doc), and folds the
 * cluster's NodeTopology into one document. Never throws: a failure is the result's status.
 *
 * @param deps the caller's client and logger
 * @param options the reader, version, timestamp and signal
 * @returns the topology and how it was read
 */
export async function readClusterTopology(
  deps: { kube: KubeClient; log: Logger },
  options: ClusterTopologyOptions,
): Promise<FleetTopology> {
  const { kube, log } = deps;
  const signal = options.signal ? { signal: options.signal } : {};
  let reader: KubeClient | undefined;
  if (kube.withBearerToken) {
    try {
      reader = kube.withBearerToken(await mintReaderApiToken(kube, options));
    } catch (error) {
      log.debug("cannot mint the reader's API token; listing nodes as the caller", {
        error: error instanceof Error ? error.message.split("\n")[0] ?? "" : String(error),
      });
    }
  }
  let as: FleetTopology["as"] = reader ? "reader" : "caller";
  let measurement = await collectTopology({ cluster: createClusterReader(reader ?? kube) }, signal);
  if (reader && statusOf(measurement) === "denied") {
    // An install from before the reader could list nodes: the caller's own RBAC may.
    log.debug("the reader may not list nodes (installed by an older aicr); listing as the caller");
    as = "caller";
    measurement = await collectTopology({ cluster: createClusterReader(kube) }, signal);
  }
  const document = createSnapshot([measurement], {
    timestamp: options.now,
    version: options.version,
    nodeName: "",
  });
  document.metadata[TOPOLOGY_SCOPE_METADATA] = "cluster";
  const summary = measurement.subtypes.find((s: Subtype) => s.subtype === "summary");
  const status = statusOf(measurement);
  const message = summary?.context?.message;
  return {
    document,
    status,
    nodes: Number(summary?.data["node-count"] ?? 0),
    as,
    ...(message ? { message } : {}),
  };
}

function statusOf(measurement: { subtypes: { context?: Record<string, string> }[] }): SourceStatus {
  return (measurement.subtypes[0]?.context?.status ?? "failed") as SourceStatus;
}
