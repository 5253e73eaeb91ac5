/**
 * Waiting for the agent Job: its pod is found through the Job's UID (never by label
 * alone), progress goes to stderr, the agent's log is streamed, and a failure is
 * explained in one screen (unschedulable, image pull, exit code and log tail,
 * deadline). Watches only wake the loop early; state is always re-read, so a dropped
 * watch or a restarted API server costs latency, not correctness.
 *
 * @module
 */
import { AGENT_IDENTITY_FIX, describeSelf, upstreamLogLine } from "./agent_identity.ts";
import { buildInfo } from "../version.ts";
import type { BuildInfo } from "../version.ts";
import {
  type ErrorText,
  type OptionNamer,
  type OptionText,
  TimeoutError,
  ToolError,
} from "../errors.ts";
import { sleep } from "../io.ts";
import { agentReportOfLine } from "../manifests/mod.ts";
import type { KubeClient, KubeObject, LineStream } from "../kube/mod.ts";
import type { Logger } from "../log.ts";

/** A Job, as far as waiting reads it. */
interface JobObject extends KubeObject {
  status?: {
    conditions?: { type: string; status: string; reason?: string; message?: string }[];
    active?: number;
    succeeded?: number;
    failed?: number;
  };
}

/** A Pod, as far as waiting reads it. */
export interface PodObject extends KubeObject {
  spec?: { nodeName?: string; imagePullSecrets?: { name: string }[] };
  status?: {
    phase?: string;
    reason?: string;
    message?: string;
    conditions?: { type: string; status: string; reason?: string; message?: string }[];
    containerStatuses?: {
      name: string;
      state?: {
        waiting?: { reason?: string; message?: string };
        running?: { startedAt?: string };
        terminated?: { exitCode: number; reason?: string; message?: string };
      };
    }[];
  };
}

/** What waiting needs. */
export interface WaitDeps {
  /** The client. */
  kube: KubeClient;
  /** Logger; the agent's log lines are relayed through it. */
  log: Logger;
  /** Millisecond clock. */
  clock?: () => number;
}

/** Options for {@link waitForAgentJob}. */
export interface WaitOptions {
  /** Namespace. */
  namespace: string;
  /** Job name. */
  jobName: string;
  /** Job UID from its create. */
  jobUid: string;
  /** Run ID (narrows the pod list; ownership decides). */
  runId: string;
  /** Give up after this long. */
  timeoutMs: number;
  /** Selector injected by auto-targeting, named in failures. */
  injectedSelector?: string;
  /** Cancels the wait (SIGINT/SIGTERM). */
  signal?: AbortSignal;
  /** Re-read interval when no watch event arrives. @default 1000 */
  pollMs?: number;
  /** A progress line at least this often, changed or not. @default 10000 */
  heartbeatMs?: number;
  /** Called each time a read finds the Job's pod (cleanup then knows it existed). */
  onPod?: (pod: PodObject) => void;
  /** The build the agent must be, named when another program ran. @default this one */
  build?: BuildInfo;
  /**
   * The run's nonce: the agent's report line in its log (`aicr-agent-report <nonce> <json>`)
   * ends the wait as soon as it arrives, before the pod's status says the agent exited.
   */
  reportNonce?: string;
}

/** The agent Job failed: the one-screen explanation is the message and details. */
export class AgentJobError extends ToolError {
  /**
   * @param message the one-line reason
   * @param details further lines (conditions, log tail, hints)
   */
  constructor(message: string, details: readonly ErrorText[] = []) {
    super(message, "internal", 500, { details });
    this.name = "AgentJobError";
  }
}

/** Picks the run's pod: controlled by the Job's UID, not terminating, youngest first. */
export function selectAgentPod(pods: readonly PodObject[], jobUid: string): PodObject | undefined {
  return pods
    .filter((p) =>
      p.metadata?.ownerReferences?.some((o) => o.controller && o.kind === "Job" && o.uid === jobUid)
    )
    .filter((p) => !p.metadata?.deletionTimestamp)
    .sort((a, b) =>
      (b.metadata?.creationTimestamp ?? "").localeCompare(a.metadata?.creationTimestamp ?? "")
    )[0];
}

function condition(job: JobObject | undefined, type: string) {
  return job?.status?.conditions?.find((c) => c.type === type && c.status === "True");
}

/** Describes a pod's state in a few words, for progress lines. */
export function describePod(pod: PodObject | undefined): string {
  if (!pod) return "phase=NoPod";
  const phase = pod.status?.phase ?? "Unknown";
  const waiting = pod.status?.containerStatuses?.[0]?.state?.waiting?.reason;
  const node = pod.spec?.nodeName;
  return `phase=${phase}${waiting ? ` reason=${waiting}` : ""}${node ? ` node=${node}` : ""}`;
}

/** Image pull reasons that end a wait early (the kubelet keeps retrying, but a human must act). */
const IMAGE_FAILURES = new Set(["ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull"]);
/** How long the log stream may take to drain after the Job finished. */
const LOG_SETTLE_MS = 500;
/** How long `ErrImagePull` may persist before the wait ends. */
export const IMAGE_PULL_GRACE_MS = 15_000;
/** The longest a wait stays silent: a progress line at least this often. */
export const HEARTBEAT_MS = 10_000;

/**
 * Tells, pod by pod, when an image pull has failed for good: at once for `ImagePullBackOff`,
 * `InvalidImageName` and `ErrImageNeverPull`, after {@link IMAGE_PULL_GRACE_MS} of
 * `ErrImagePull` (one failed pull may be a registry hiccup the kubelet's retry fixes). Shared by
 * the agent Job's wait and the DaemonSet install's.
 *
 * @param graceMs how long `ErrImagePull` may last
 * @returns a check: the pod, its first container's waiting reason and the clock; true when failed
 */
export function createImagePullCheck(
  graceMs: number = IMAGE_PULL_GRACE_MS,
): (pod: string, reason: string | undefined, now: number) => boolean {
  const since = new Map<string, number>();
  return function imagePullFailed(pod, reason, now) {
    if (reason !== "ErrImagePull") since.delete(pod);
    else if (!since.has(pod)) since.set(pod, now);
    if (reason !== undefined && IMAGE_FAILURES.has(reason)) return true;
    const first = since.get(pod);
    return first !== undefined && now - first > graceMs;
  };
}

/**
 * The scheduler's verdict on a pod it could not place, as soon as it gives one.
 *
 * @param pod the pod
 * @returns the PodScheduled=False message (or reason), or undefined while schedulable
 */
export function unschedulableReason(pod: PodObject | undefined): string | undefined {
  const scheduled = pod?.status?.conditions?.find((c) => c.type === "PodScheduled");
  if (scheduled?.status !== "False") return undefined;
  return scheduled.message ?? scheduled.reason ?? "no reason given";
}

/**
 * Waits until the agent Job completes.
 *
 * @param deps client and logger
 * @param options Job identity, timeout, cancellation
 * @returns the node the agent ran on, its pod as last read (its termination message), and the
 *   agent's report when it came through its log first (its JSON, checked by the reader)
 * @throws {AgentJobError} when the Job fails, with the reason, exit code and log tail
 * @throws {TimeoutError} when the timeout passes, with what the pod was doing
 */
export async function waitForAgentJob(
  deps: WaitDeps,
  options: WaitOptions,
): Promise<{ nodeName: string | undefined; pod: PodObject | undefined; report?: string }> {
  const { kube } = deps;
  const clock = deps.clock ?? (() => Date.now());
  const { namespace, jobUid, runId, timeoutMs, pollMs = 1000 } = options;
  const imagePullFailed = createImagePullCheck();
  const started = clock();
  // The deadline is read on the clock (an injected one included); the timer only cuts a read
  // still in flight when the real time passes it.
  const deadline = AbortSignal.timeout(timeoutMs);
  const expired = () => deadline.aborted || clock() - started >= timeoutMs;
  const stop = new AbortController();
  const signals = [deadline, stop.signal, ...(options.signal ? [options.signal] : [])];
  const any = AbortSignal.any(signals);
  const { events, watches, agentLog, reportProgress } = observeRun(deps, options, {
    signal: any,
    started,
  });
  let pod: PodObject | undefined;
  try {
    while (true) {
      if (options.signal?.aborted) throw options.signal.reason;
      const seen = events.count;
      // The Job and its pods are read side by side; a failed pod read is retried next round.
      const podList = kube.list<PodObject>("Pod", namespace, {
        labelSelector: `aicr.run/run-id=${runId}`,
        signal: any,
      }).catch(() => undefined);
      const job = await readJob(deps, options, any);
      if (job !== "retry") {
        const pods = await podList;
        if (pods) pod = selectAgentPod(pods.items, jobUid);
        if (pod) options.onPod?.(pod);
        reportProgress(pod);
        if (pod && isStarted(pod)) await agentLog.follow(pod);
        // The agent's report in its log: it wrote its snapshot, and said so, from this pod.
        const report = agentLog.report();
        if (report !== undefined && pod?.spec?.nodeName) {
          return { nodeName: pod.spec.nodeName, pod, report };
        }
        // With backoffLimit 0 the Job's fate is its one pod's: a Succeeded pod (found by
        // the Job's UID) means the snapshot is written, without waiting for the Job
        // controller's batched Complete condition. A Failed pod fails the run the same way.
        if (condition(job, "Complete") || pod?.status?.phase === "Succeeded") {
          await agentLog.settle();
          return { nodeName: pod?.spec?.nodeName, pod };
        }
        const failed = failureOf(job, pod);
        if (failed) {
          await agentLog.settle();
          throw await explainFailure(kube, namespace, pod, {
            reason: failed.reason ?? "Failed",
            message: failed.message ?? "",
            ...(options.injectedSelector ? { injectedSelector: options.injectedSelector } : {}),
            build: options.build ?? buildInfo(),
          });
        }
        const waiting = pod?.status?.containerStatuses?.[0]?.state?.waiting;
        if (pod && imagePullFailed(pod.metadata?.name ?? "", waiting?.reason, clock())) {
          throw imagePullError(pod, options.injectedSelector);
        }
      }
      if (expired()) throw timeoutError(pod, timeoutMs, options.injectedSelector);
      if (events.count !== seen) continue;
      const pause = pauseUntilEvent(pollMs, any);
      events.wake = pause.wake;
      await pause.done;
      events.wake = undefined;
      if (options.signal?.aborted) throw options.signal.reason;
      if (expired()) throw timeoutError(pod, timeoutMs, options.injectedSelector);
    }
  } finally {
    stop.abort();
    agentLog.close();
    for (const w of await watches) w.close();
  }
}

/**
 * What a wait watches: the run's Job and pods (each event counted, and waking a paused round: one
 * that arrives while the state is being read means it is read again at once, not after the next
 * poll interval), the agent's log, and the progress lines.
 */
function observeRun(
  deps: WaitDeps,
  options: WaitOptions,
  context: { signal: AbortSignal; started: number },
) {
  const { namespace, jobName, runId, timeoutMs } = options;
  const events: { count: number; wake: (() => void) | undefined } = { count: 0, wake: undefined };
  const onEvent = () => {
    events.count++;
    events.wake?.();
  };
  const watches = startWatches(deps.kube, {
    namespace,
    jobName,
    runId,
    signal: context.signal,
    onEvent,
  });
  return {
    events,
    watches,
    agentLog: createLogFollower(deps.kube, namespace, deps.log, {
      signal: context.signal,
      // The report line wakes the loop as a watch event does.
      ...(options.reportNonce ? { reportNonce: options.reportNonce, onReport: onEvent } : {}),
    }),
    reportProgress: createProgressReporter(deps, {
      jobName,
      timeoutMs,
      heartbeatMs: options.heartbeatMs ?? HEARTBEAT_MS,
      started: context.started,
      ...(options.injectedSelector ? { injectedSelector: options.injectedSelector } : {}),
    }),
  };
}

/** What the progress reporter needs besides the logger and clock. */
interface ProgressContext {
  jobName: string;
  timeoutMs: number;
  heartbeatMs: number;
  started: number;
  injectedSelector?: string;
}

/**
 * Returns a function that logs the pod's progress: a line on every change and a heartbeat while
 * nothing changes (a wait never looks hung), and a warning when the pod becomes unschedulable.
 */
function createProgressReporter(
  deps: WaitDeps,
  context: ProgressContext,
): (pod: PodObject | undefined) => void {
  const { log } = deps;
  const clock = deps.clock ?? (() => Date.now());
  const { jobName, timeoutMs, heartbeatMs, started } = context;
  let lastProgress = "";
  let lastProgressAt = started;
  let lastUnschedulable: string | undefined;
  return (pod) => {
    const progress = describePod(pod);
    if (progress !== lastProgress || clock() - lastProgressAt >= heartbeatMs) {
      log.info("waiting for the agent", {
        job: jobName,
        ...Object.fromEntries(
          progress.split(" ").map((kv) => kv.split("=") as [string, string]),
        ),
        elapsed: `${Math.round((clock() - started) / 1000)}s`,
        timeout: `${Math.round(timeoutMs / 1000)}s`,
      });
      lastProgress = progress;
      lastProgressAt = clock();
    }
    const unschedulable = unschedulableReason(pod);
    if (unschedulable !== undefined && unschedulable !== lastUnschedulable) {
      // Said at once, not at the timeout: the scheduler knows now, and a new node (the
      // autoscaler) may still come, so the wait goes on.
      log.warn("the agent pod cannot be scheduled", {
        pod: pod?.metadata?.name ?? "",
        reason: unschedulable,
        remedy: placementRemedy(context.injectedSelector),
      });
    }
    lastUnschedulable = unschedulable;
  };
}

/** The Job's Failed condition, or the failure of its one pod (backoffLimit 0). */
function failureOf(
  job: JobObject | undefined,
  pod: PodObject | undefined,
): { reason?: string; message?: string } | undefined {
  return condition(job, "Failed") ??
    (pod?.status?.phase === "Failed"
      ? { reason: pod.status.reason ?? "PodFailed", message: pod.status.message ?? "" }
      : undefined);
}

/**
 * What the kubelet's pull error means, in one line, when it says: credentials refused, access
 * denied, no such image, an untrusted certificate, or a registry the node cannot reach.
 *
 * @param message the container's waiting message (the kubelet's words)
 * @param pullSecrets the pod's image pull secrets
 * @returns the line, or undefined for a message it does not recognise
 */
export function explainPullFailure(
  message: string | undefined,
  pullSecrets: readonly string[],
): ErrorText | undefined {
  const text = message ?? "";
  const host = /pulling from host (\S+) failed|failed to do request: \w+ "https?:\/\/([^/"]+)/.exec(
    text,
  );
  const named = host?.[1] ?? host?.[2];
  // "the registry" alone when the message names no host, never "the registry the registry".
  const registry = named ? ` ${named}` : "";
  const secrets = pullSecrets.map((s) => `'${s}'`).join(", ");
  if (/\b401\b|unauthorized|authentication required/i.test(text)) {
    if (pullSecrets.length === 0) {
      return (option) =>
        `  the registry${registry} asks for credentials and the pod has no image pull secret: give one with ${
          option("imagePullSecret")
        }`;
    }
    return `  the registry${registry} rejected the credentials of the image pull secret ${secrets}: fix that Secret (kubectl get secret ${
      pullSecrets[0]
    } -o yaml)`;
  }
  if (/\b403\b|forbidden|denied/i.test(text)) {
    return `  the registry${registry} refused access to the image with the credentials of ${
      secrets || "the node"
    }`;
  }
  if (/not found|manifest unknown|\b404\b/i.test(text)) {
    return `  the registry${registry} has no such image: push it there (aicr image push) or correct the reference`;
  }
  if (/x509|certificate/i.test(text)) {
    return `  the node does not trust the certificate of the registry${registry}: add its CA to the node's container runtime (containerd: certs.d/<host>/hosts.toml)`;
  }
  if (
    /no such host|i\/o timeout|connection refused|no route to host|network is unreachable/i.test(
      text,
    )
  ) {
    return `  the node cannot reach the registry${registry}: mirror the image into a registry the nodes reach`;
  }
  return undefined;
}

function imagePullError(pod: PodObject, injected: string | undefined): AgentJobError {
  const waiting = pod.status?.containerStatuses?.[0]?.state?.waiting;
  const meaning = explainPullFailure(
    waiting?.message,
    pod.spec?.imagePullSecrets?.map((s) => s.name) ?? [],
  );
  return new AgentJobError(
    `Cannot get a snapshot: the agent image could not be pulled (${waiting?.reason})`,
    [
      ...(waiting?.message ? [`  ${waiting.message}`] : []),
      ...(meaning ? [meaning] : []),
      (option) =>
        `  check ${option("image")} and ${
          option("imagePullSecret")
        }, or mirror the image for air-gapped clusters`,
      ...selectorFact(pod, injected),
    ],
  );
}

/** Sleeps up to `ms`; `wake()` (a watch event) or the signal ends the pause early. */
function pauseUntilEvent(ms: number, signal: AbortSignal): { done: Promise<void>; wake(): void } {
  const woken = new AbortController();
  return {
    done: sleep(ms, AbortSignal.any([signal, woken.signal])),
    wake: () => woken.abort(),
  };
}

/**
 * Re-reads the Job: "retry" when the read failed (aborted mid-read, the checks after the pause
 * say which: an absent answer must not read as "the Job was deleted").
 *
 * @throws {AgentJobError} when the Job is gone or another Job took its name
 */
async function readJob(
  deps: WaitDeps,
  options: WaitOptions,
  signal: AbortSignal,
): Promise<JobObject | "retry"> {
  const { namespace, jobName, jobUid } = options;
  const job = await deps.kube.get<JobObject>("Job", namespace, jobName, { signal }).catch(
    (e) => {
      if (!signal.aborted) {
        deps.log.debug("re-reading the Job failed; retrying", { error: String(e) });
      }
      return "retry" as const;
    },
  );
  if (job === "retry") return job;
  if (!job || job.metadata?.uid !== jobUid) {
    throw new AgentJobError(
      `Cannot get a snapshot: the agent Job '${namespace}/${jobName}' was deleted or replaced during the run`,
    );
  }
  return job;
}

/**
 * Streams the agent container's log to stderr once its pod has started, each line re-emitted
 * through the CLI's logger (its format, level and the `[agent]` prefix); best effort. The agent's
 * report line (with the run's nonce) is kept, not relayed.
 */
function createLogFollower(
  kube: KubeClient,
  namespace: string,
  log: Logger,
  options: { signal: AbortSignal; reportNonce?: string; onReport?: () => void },
): {
  follow(pod: PodObject): Promise<void>;
  settle(): Promise<void>;
  close(): void;
  report(): string | undefined;
} {
  let stream: LineStream | undefined;
  let pump: Promise<void> | undefined;
  const output: LogOutput = { open: true };
  if (options.reportNonce) {
    output.reportNonce = options.reportNonce;
    if (options.onReport) output.onReport = options.onReport;
  }
  return {
    async follow(pod) {
      if (stream) return;
      const opened = await openLog(kube, namespace, pod, options.signal);
      if (opened) {
        stream = opened;
        pump = pumpLog(opened, log, output);
      }
    },
    settle: () => settleLog(pump, stream),
    close() {
      // No agent log line lands after the wait is over (after the run's error or summary line).
      output.open = false;
      stream?.close();
    },
    report: () => output.report,
  };
}

/** Where relayed lines go, and the report line once seen. */
interface LogOutput {
  open: boolean;
  reportNonce?: string;
  onReport?: () => void;
  report?: string;
}

function isStarted(pod: PodObject): boolean {
  const state = pod.status?.containerStatuses?.[0]?.state;
  return Boolean(state?.running || state?.terminated);
}

async function openLog(
  kube: KubeClient,
  namespace: string,
  pod: PodObject,
  signal: AbortSignal,
): Promise<LineStream | undefined> {
  try {
    return await kube.followPodLog(namespace, pod.metadata?.name ?? "", {
      signal,
      container: "aicr",
    });
  } catch {
    // Log streaming is best effort; the log tail is fetched again on failure.
    return undefined;
  }
}

/** The component the agent pod's relayed lines carry (`[agent]`, `"component":"agent"`). */
const AGENT_LOG_SOURCE = "agent";

async function pumpLog(
  stream: LineStream,
  log: Logger,
  output: LogOutput,
): Promise<void> {
  try {
    for await (const line of stream) {
      if (!output.open) return;
      const report = output.reportNonce ? agentReportOfLine(line, output.reportNonce) : undefined;
      if (report === undefined) log.relay(line, AGENT_LOG_SOURCE);
      else if (output.report === undefined) {
        // The agent writes one; only the first is kept.
        output.report = report;
        output.onReport?.();
      }
    }
  } catch {
    // The stream ends when the pod does or the wait stops.
  }
}

async function settleLog(
  pump: Promise<void> | undefined,
  stream: LineStream | undefined,
): Promise<void> {
  if (!pump) return;
  // The kubelet ends a follow stream when the container exits; give it a moment to
  // deliver the last lines, then close it.
  const done = new AbortController();
  await Promise.race([pump, sleep(LOG_SETTLE_MS, done.signal)]);
  // A stream that ended first leaves no timer behind to hold the process open.
  done.abort();
  stream?.close();
}

/**
 * Names the selector auto-targeting injected, for every failed Job (the upstream documentation:
 * "If the Job then fails, the error names the injected selector"). When the pod never reached a
 * node, placement is the suspect and the line carries the remedy ({@link selectorHint}); when it
 * ran, the line states the fact only, since the selector did not cause a pull or exit failure.
 */
function selectorFact(pod: PodObject | undefined, injected: string | undefined): ErrorText[] {
  if (!pod?.spec?.nodeName) return selectorHint(injected);
  return injected
    ? [`  the Job ran on ${pod.spec.nodeName}, chosen by the injected node selector ${injected}`]
    : [];
}

/**
 * The auto-targeting hint, only for placement failures (unschedulable, never scheduled): on a
 * failed pull, a denied permission or a crash the selector is not the cause.
 */
function selectorHint(injected: string | undefined): ErrorText[] {
  return injected
    ? [
      (option) =>
        `  the run auto-targeted GPU nodes with node selector ${injected}; pass ${
          option("nodeSelector")
        } to choose nodes yourself`,
    ]
    : [];
}

function placementRemedy(injected: string | undefined): OptionText {
  return injected
    ? (option) =>
      `the run auto-targeted GPU nodes (${injected}); pass ${
        option("nodeSelector")
      } to choose nodes yourself`
    : checkPlacement;
}

function checkPlacement(option: OptionNamer): string {
  return `check ${option("nodeSelector")} and ${
    option("toleration")
  } against the nodes' labels and taints`;
}

function timeoutError(
  pod: PodObject | undefined,
  timeoutMs: number,
  injected: string | undefined,
): TimeoutError {
  const details: ErrorText[] = [`  last state: ${describePod(pod)}`];
  const unschedulable = unschedulableReason(pod);
  if (!pod) details.push("  no agent pod was created (check the Job's events and quotas)");
  else if (unschedulable !== undefined) {
    details.push(`  the pod could not be scheduled: ${unschedulable}`);
    details.push((option) => `  ${checkPlacement(option)}`);
  }
  // Placement is the suspect only when the pod never reached a node.
  details.push(...selectorFact(pod, injected));
  return new TimeoutError(
    `Cannot get a snapshot: the agent did not finish within ${Math.round(timeoutMs / 1000)}s${
      unschedulable !== undefined ? " (unschedulable)" : ""
    }`,
    { details },
  );
}

async function explainFailure(
  kube: KubeClient,
  namespace: string,
  pod: PodObject | undefined,
  failure: { reason: string; message: string; injectedSelector?: string; build: BuildInfo },
): Promise<AgentJobError> {
  const details: ErrorText[] = [];
  if (failure.message) details.push(`  ${failure.message}`);
  const terminated = pod?.status?.containerStatuses?.[0]?.state?.terminated;
  if (terminated) {
    details.push(
      `  container exit code ${terminated.exitCode}${
        terminated.reason ? ` (${terminated.reason})` : ""
      }`,
    );
  }
  let upstream: string | undefined;
  if (pod?.metadata?.name) {
    const tail = await kube.podLog(namespace, pod.metadata.name, {
      tailLines: 20,
      container: "aicr",
    })
      .catch(() => "");
    upstream = upstreamLogLine(tail);
    if (upstream) details.push(...AGENT_IDENTITY_FIX);
    if (tail.trim()) {
      details.push("--- agent logs ---", ...tail.trimEnd().split("\n"), "--- end logs ---");
    }
  }
  // A pod that ran failed for its own reasons (exit code, permissions, pull), not placement:
  // the injected selector is named as a fact, with the remedy only when placement failed.
  details.push(...selectorFact(pod, failure.injectedSelector));
  const image = (pod?.spec as { containers?: { image?: string }[] } | undefined)?.containers?.[0]
    ?.image;
  const what = upstream
    ? `the agent that ran is NVIDIA's Go aicr, not ${describeSelf(failure.build)} (its log: '${
      upstream.slice(0, 160)
    }'): the image '${image ?? "?"}' is not this build's`
    : failure.reason === "DeadlineExceeded"
    ? "the agent Job passed its activeDeadlineSeconds"
    : terminated
    ? `the agent exited with code ${terminated.exitCode}`
    : `the agent Job failed (${failure.reason})`;
  return new AgentJobError(`Cannot get a snapshot: ${what}`, details);
}

async function startWatches(
  kube: KubeClient,
  options: {
    namespace: string;
    jobName: string;
    runId: string;
    signal: AbortSignal;
    onEvent: () => void;
  },
): Promise<{ close(): void }[]> {
  const opened: { close(): void }[] = [];
  const specs = [
    { kind: "Job" as const, fieldSelector: `metadata.name=${options.jobName}` },
    { kind: "Pod" as const, labelSelector: `aicr.run/run-id=${options.runId}` },
  ];
  for (const spec of specs) {
    try {
      const watch = await kube.watch(spec.kind, options.namespace, {
        ...spec,
        signal: options.signal,
        timeoutSeconds: 300,
      });
      opened.push(watch);
      (async () => {
        try {
          for await (const _event of watch) options.onEvent();
        } catch {
          // A dropped watch only slows the loop down to its poll interval.
        }
      })();
    } catch {
      // No watch permission or a flaky connection: polling still works.
    }
  }
  return opened;
}
