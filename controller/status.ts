/**
 * `aicr daemonset status`: what an operator used to read from `kubectl get ds,csr`, in one
 * answer: the DaemonSet's counts and image, each node's daemon (Ready, image, version, its
 * certificate), the in-cluster signer (replicas, Lease holder), the daemons' pending and refused
 * certificate requests, and the cohort baselines. Read-only: it never contacts a daemon.
 *
 * Unhealthy (exit 9) when a targeted node's daemon is not Ready, the signer is installed with no
 * available replica or no leader, a live daemon without a certificate had its request refused, or
 * a live daemon's request has waited longer than {@link PENDING_TOO_LONG_MS}. A daemon running another version than this CLI is a warning, not a
 * failure (a rolling upgrade passes through it).
 *
 * @module
 */
import { EXTRA_POD_UID, extraValue, isDecided, listSignerCsrs } from "../csr/mod.ts";
import type { CsrObject } from "../csr/mod.ts";
import { IncompleteError, NotFoundError } from "../errors.ts";
import type { KubeClient, KubeObject } from "../kube/mod.ts";
import { resolve } from "node:path";
import { writeFileAtomic } from "../io.ts";
import type { Logger, TextWriter } from "../log.ts";
import { DEFAULT_DAEMON_NAME, serviceAccountUser } from "../manifests/mod.ts";
import { listBaselines } from "./baseline.ts";
import { daemonPods } from "./install.ts";
import { readSignerState } from "./signer_state.ts";
import { imageVersion, warnVersionSkew } from "./version_skew.ts";
import type { SignerState } from "./signer_state.ts";

/** A request waiting longer than this, for a live daemon, makes the install unhealthy. */
export const PENDING_TOO_LONG_MS = 120_000;

/** One node's daemon. */
export interface NodeStatus {
  /** The node. */
  node: string;
  /** The pod. */
  pod: string;
  /** The pod's UID (what its certificate requests name). */
  podUid?: string;
  /** Its Ready condition. */
  ready: boolean;
  /** Why not Ready. */
  detail?: string;
  /** The image it runs. */
  image?: string;
  /** The version its image's tag says (no leading `v`). */
  version?: string;
  /** Its certificate request: issued, pending, refused, or none yet. */
  certificate: "issued" | "pending" | "refused" | "none";
}

/** One daemon's certificate request that is not issued. */
export interface RequestStatus {
  /** The CSR's name. */
  name: string;
  /** The pod it is for. */
  podUid?: string;
  /** Whether that pod is one of the DaemonSet's live pods. */
  livePod: boolean;
  /** `Pending` (approved or not) or `Denied`/`Failed`. */
  state: "Pending" | "Denied" | "Failed";
  /** The refusal's reason, or `Approved` for a pending approved one. */
  reason?: string;
  /** The refusal's message. */
  message?: string;
  /** When it was made. */
  created?: string;
}

/** The whole answer. */
export interface DaemonSetStatus {
  /** Namespace. */
  namespace: string;
  /** The daemon's name. */
  name: string;
  /** This CLI's version. */
  cliVersion: string;
  /** The DaemonSet's counts and image. */
  daemonSet: {
    desired: number;
    ready: number;
    updated: number;
    available: number;
    image?: string;
    version?: string;
  };
  /** Each daemon. */
  nodes: NodeStatus[];
  /** The in-cluster signer (`installed: false` without one). */
  signer: SignerState;
  /** Requests not issued. */
  requests: RequestStatus[];
  /** How many requests of this install are issued. */
  issued: number;
  /** The cohort baselines (undefined when they cannot be read). */
  baselines?: { cohort: string; configMap: string; node: string; updated: string; trust: string }[];
  /** Versions other than this CLI's that daemons or the signer run. */
  versionSkew: string[];
  /** What makes the install unhealthy; empty when healthy. */
  problems: string[];
}

function versionOf(image: string | undefined): { version?: string } {
  const version = imageVersion(image);
  return version === undefined ? {} : { version };
}

function requestState(csr: CsrObject, live: ReadonlySet<string>): RequestStatus | undefined {
  if (csr.status?.certificate) return undefined;
  const podUid = extraValue(csr.spec?.extra, EXTRA_POD_UID);
  const refused = (csr.status?.conditions ?? []).find((c) =>
    (c.type === "Denied" || c.type === "Failed") && c.status !== "False"
  );
  const approved = (csr.status?.conditions ?? []).some((c) => c.type === "Approved");
  return {
    name: csr.metadata?.name ?? "",
    ...(podUid ? { podUid } : {}),
    livePod: podUid !== undefined && live.has(podUid),
    state: refused ? refused.type as "Denied" | "Failed" : "Pending",
    ...(refused?.reason ? { reason: refused.reason } : approved ? { reason: "Approved" } : {}),
    ...(refused?.message ? { message: refused.message } : {}),
    ...(csr.metadata?.creationTimestamp ? { created: csr.metadata.creationTimestamp } : {}),
  };
}

function certificateOf(uid: string | undefined, requests: readonly CsrObject[]) {
  const mine = requests.filter((c) => uid && extraValue(c.spec?.extra, EXTRA_POD_UID) === uid);
  if (mine.some((c) => c.status?.certificate)) return "issued" as const;
  if (mine.some((c) => !isDecided(c))) return "pending" as const;
  return mine.length > 0 ? "refused" as const : "none" as const;
}

/**
 * What makes an install unhealthy, pure.
 *
 * @param status the status read
 * @param now the clock reading
 * @returns one line per problem
 */
export function statusProblems(
  status: Omit<DaemonSetStatus, "problems">,
  now: Date,
): string[] {
  const problems: string[] = [];
  for (const node of status.nodes.filter((n) => !n.ready)) {
    problems.push(`daemon on ${node.node} not Ready (${node.detail ?? "unknown"})`);
  }
  const missing = status.daemonSet.desired - status.nodes.length;
  if (missing > 0) problems.push(`${missing} targeted node(s) have no daemon pod`);
  if (status.signer.installed && status.signer.available === 0) {
    problems.push(
      `signer: no available replica (${status.signer.ready}/${status.signer.desired} Ready)`,
    );
  } else if (status.signer.installed && !status.signer.leader) {
    problems.push("signer: no replica holds the Lease");
  }
  // A refusal matters while its daemon has no certificate; one beside an issued certificate
  // (a stray or hostile request with the pod's token) is listed, not a failure.
  const served = new Set(
    status.nodes.flatMap((n) => n.certificate === "issued" && n.podUid ? [n.podUid] : []),
  );
  for (const request of status.requests.filter((r) => r.livePod)) {
    if (request.state !== "Pending") {
      if (request.podUid && served.has(request.podUid)) continue;
      problems.push(
        `request ${request.name} ${request.state.toLowerCase()}: ${request.reason ?? ""} ${
          request.message ?? ""
        }`.trim(),
      );
    } else if (
      request.created && now.getTime() - Date.parse(request.created) > PENDING_TOO_LONG_MS
    ) {
      problems.push(
        `request ${request.name} pending for over ${
          PENDING_TOO_LONG_MS / 60_000
        } minutes (no signer signs it)`,
      );
    }
  }
  return problems;
}

/**
 * Reads the install's status.
 *
 * @param deps client, logger, clock
 * @param options namespace, daemon name, this CLI's version, a signal
 * @returns the status, its problems counted
 * @throws {NotFoundError} when the DaemonSet does not exist
 */
export async function readDaemonSetStatus(
  deps: { kube: KubeClient; log: Logger; now: () => Date },
  options: { namespace: string; name?: string; cliVersion: string; signal?: AbortSignal },
): Promise<DaemonSetStatus> {
  const { kube } = deps;
  const { namespace, name = DEFAULT_DAEMON_NAME, cliVersion } = options;
  const call = { namespace, name, ...(options.signal ? { signal: options.signal } : {}) };
  const ds = await kube.get<KubeObject>("DaemonSet", namespace, name, { timeoutMs: 10_000 });
  if (!ds) {
    throw new NotFoundError(
      `Cannot read the daemon's status: DaemonSet '${namespace}/${name}' does not exist (install it with aicr daemonset install -n ${namespace})`,
    );
  }
  const username = serviceAccountUser(namespace, name);
  const [listed, signer, requests, baselines] = await Promise.all([
    daemonPods(kube, call),
    readSignerState(kube, call),
    listSignerCsrs(kube, options.signal).then((all) =>
      all.filter((c) => c.spec?.username === username)
    ),
    listBaselines({ kube, log: deps.log }, { namespace, name }).catch(() => undefined),
  ]);
  const live = new Set(listed.pods.flatMap((p) => p.uid ?? []));
  const dsStatus = (ds.status ?? {}) as Record<string, number | undefined>;
  const dsImage = (ds.spec as { template?: { spec?: { containers?: { image?: string }[] } } })
    ?.template?.spec?.containers?.[0]?.image;
  const nodes: NodeStatus[] = listed.pods.map((p) => ({
    node: p.node,
    pod: p.pod,
    ...(p.uid ? { podUid: p.uid } : {}),
    ready: p.ready,
    ...(p.detail ? { detail: p.detail } : {}),
    ...(p.image ? { image: p.image } : {}),
    ...versionOf(p.image),
    certificate: certificateOf(p.uid, requests),
  }));
  const versions = new Set([
    ...nodes.flatMap((n) => n.version ?? []),
    ...(imageVersion(signer.image) ? [imageVersion(signer.image) as string] : []),
  ]);
  const status: Omit<DaemonSetStatus, "problems"> = {
    namespace,
    name,
    cliVersion,
    daemonSet: {
      desired: dsStatus.desiredNumberScheduled ?? 0,
      ready: dsStatus.numberReady ?? 0,
      updated: dsStatus.updatedNumberScheduled ?? 0,
      available: dsStatus.numberAvailable ?? 0,
      ...(dsImage ? { image: dsImage } : {}),
      ...versionOf(dsImage),
    },
    nodes,
    signer,
    requests: requests.flatMap((c) => requestState(c, live) ?? []),
    issued: requests.filter((c) => c.status?.certificate).length,
    ...(baselines
      ? {
        baselines: baselines.map((b) => ({
          cohort: b.cohort.key,
          configMap: b.configMap,
          node: b.node,
          updated: b.updated,
          trust: b.trust.state,
        })),
      }
      : {}),
    versionSkew: [...versions].filter((v) => v !== cliVersion).sort(),
  };
  return { ...status, problems: statusProblems(status, deps.now()) };
}

function ago(iso: string | undefined, now: Date): string {
  if (!iso) return "-";
  const seconds = Math.max(0, Math.round((now.getTime() - Date.parse(iso)) / 1000));
  return seconds < 120 ? `${seconds}s ago` : `${Math.round(seconds / 60)}m ago`;
}

function columns(rows: string[][]): string {
  const widths = rows[0]?.map((_, i) => Math.max(...rows.map((r) => (r[i] ?? "").length))) ?? [];
  return rows.map((r) => r.map((c, i) => c.padEnd(widths[i] ?? 0)).join("  ").trimEnd())
    .join("\n") + "\n";
}

/**
 * The status as a table, kubectl-style.
 *
 * @param status the status
 * @param now the clock reading (ages)
 * @returns the text
 */
export function formatStatusTable(status: DaemonSetStatus, now: Date): string {
  const ds = status.daemonSet;
  const lines = [
    `DaemonSet ${status.namespace}/${status.name}: ${ds.ready}/${ds.desired} Ready, ${ds.updated} updated, image ${
      ds.image ?? "-"
    } (this CLI: ${status.cliVersion})`,
    "",
    columns([
      ["NODE", "POD", "READY", "CERTIFICATE", "VERSION", "IMAGE"],
      ...status.nodes.map((n) => [
        n.node,
        n.pod,
        n.ready ? "true" : `false (${n.detail ?? "?"})`,
        n.certificate,
        n.version ?? "-",
        n.image ?? "-",
      ]),
    ]).trimEnd(),
    "",
  ];
  const s = status.signer;
  lines.push(
    s.installed
      ? `Signer: ${s.available}/${s.desired} available, leader ${s.leader?.pod ?? "(none)"}${
        s.leader
          ? ` (renewed ${ago(s.leader.renewTime, now)}, ${s.leader.transitions} transitions)`
          : ""
      }`
      : `Signer: not installed${s.unknown ? ` (${s.unknown})` : ""}; 'aicr daemonset fetch' signs`,
  );
  const refused = status.requests.filter((r) => r.state !== "Pending");
  const pending = status.requests.filter((r) => r.state === "Pending");
  lines.push(
    `Requests: ${status.issued} issued, ${pending.length} pending, ${refused.length} refused`,
  );
  for (const r of [...pending, ...refused]) {
    lines.push(
      `  ${r.name}  ${r.state}${r.reason ? ` ${r.reason}` : ""}${r.livePod ? "" : " (pod gone)"}  ${
        ago(r.created, now)
      }${r.message ? `  ${r.message}` : ""}`,
    );
  }
  lines.push(
    status.baselines === undefined
      ? "Baselines: cannot be read"
      : `Baselines: ${status.baselines.length}`,
  );
  for (const b of status.baselines ?? []) {
    lines.push(`  cohort ${b.cohort}  from ${b.node}  ${b.updated}  ${b.trust}`);
  }
  if (status.versionSkew.length > 0) {
    lines.push(
      `Version skew: daemons run ${status.versionSkew.join(", ")}, this CLI ${status.cliVersion}`,
    );
  }
  lines.push(
    status.problems.length === 0
      ? "Healthy"
      : `Unhealthy:\n${status.problems.map((p) => `  ${p}`).join("\n")}`,
  );
  return lines.join("\n") + "\n";
}

/** Options of {@link runStatus}. */
export interface StatusOptions {
  /** The daemon's namespace. */
  namespace: string;
  /** The daemon's name. */
  name: string;
  /** `table` or `json`. */
  format: "table" | "json";
  /** This CLI's version. */
  cliVersion: string;
  /** Where the answer goes: a file (relative to the working directory), or `-`/absent: stdout. */
  output?: string;
}

/**
 * Reads, writes and judges the status: a WARN on version skew, and an {@link IncompleteError}
 * (exit 9) naming each problem when the install is unhealthy (the answer is written first).
 *
 * @param deps client, logger, clock, signal
 * @param options namespace, name, format, version, where the answer goes
 * @returns when healthy
 * @throws {IncompleteError} when unhealthy
 * @throws {NotFoundError} when the daemon is not installed
 */
export async function runStatus(
  deps: {
    kube: KubeClient;
    log: Logger;
    now: () => Date;
    signal?: AbortSignal;
    stdout: TextWriter;
    cwd: string;
  },
  options: StatusOptions,
): Promise<void> {
  const status = await readDaemonSetStatus(deps, {
    namespace: options.namespace,
    name: options.name,
    cliVersion: options.cliVersion,
    ...(deps.signal ? { signal: deps.signal } : {}),
  });
  const text = options.format === "json"
    ? JSON.stringify({ apiVersion: "aicr.run/v1", kind: "DaemonSetStatus", ...status }, null, 2) +
      "\n"
    : formatStatusTable(status, deps.now());
  if (options.output === undefined || options.output === "-") deps.stdout.write(text);
  else {
    await writeFileAtomic(resolve(deps.cwd, options.output), text, 0o644, {
      what: "the status",
      ...(deps.signal ? { signal: deps.signal } : {}),
    });
  }
  warnVersionSkew(deps.log, status.versionSkew, options.cliVersion, options.namespace);
  if (status.problems.length > 0) {
    throw new IncompleteError(
      `The daemon '${options.namespace}/${options.name}' is unhealthy: ${status.problems.length} problem(s)`,
      { details: status.problems.map((p) => `  ${p}`) },
    );
  }
}
