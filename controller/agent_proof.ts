/**
 * Job mode delivers only what the agent of this run wrote. The agent reports the digest of the
 * snapshot text it put into the ConfigMap through its container's termination message, which only
 * the kubelet writes into the pod's status (`manifests/agent_report.ts`); the CLI compares it with
 * the text it read, and the snapshot's `source-node` with the node the pod ran on. A ConfigMap
 * writer who replaced the snapshot between the agent's write and the CLI's read (it needs only
 * `patch configmaps` in the namespace and the run ID) is refused, naming both sides.
 *
 * @module
 */
import { UntrustedSnapshotError } from "../errors.ts";
import type { KubeClient } from "../kube/mod.ts";
import { AgentReportError, digestText, parseAgentReport } from "../manifests/mod.ts";
import type { AgentReport } from "../manifests/mod.ts";
import type { Snapshot } from "../snapshot/mod.ts";
import { AgentIdentityError, describeBuild } from "./agent_identity.ts";
import type { BuildInfo } from "../version.ts";
import type { PodObject } from "./wait.ts";

/** The agent's container in the Job's pod. */
const AGENT_CONTAINER = "aicr";

/**
 * The agent's termination message as the kubelet reported it, reading the pod again when the one
 * the wait saw last does not show the container terminated yet (a Job's Complete condition can
 * come before the pod's last status in a list).
 *
 * @param kube the client
 * @param pod the pod the wait read last
 * @param signal cancels the read
 * @returns the pod as read (terminated when it could be) and its agent's message, if any
 */
export async function readAgentTermination(
  kube: KubeClient,
  pod: PodObject | undefined,
  signal?: AbortSignal,
): Promise<{ pod: PodObject | undefined; message: string | undefined }> {
  let current = pod;
  const terminated = (p: PodObject | undefined) =>
    p?.status?.containerStatuses?.find((c) => c.name === AGENT_CONTAINER)?.state?.terminated;
  if (!terminated(current) && current?.metadata?.name && current.metadata.namespace) {
    current = await kube.get<PodObject>(
      "Pod",
      current.metadata.namespace,
      current.metadata.name,
      signal ? { signal } : {},
    ) ?? current;
  }
  return { pod: current, message: terminated(current)?.message };
}

/** What {@link verifyAgentSnapshot} compares. */
export interface AgentSnapshotRead {
  /** The ConfigMap's snapshot text, exactly as read. */
  text: string;
  /** That text, parsed. */
  snapshot: Snapshot;
  /** Where it was read, `cm://ns/name`. */
  uri: string;
  /** The agent's pod (its node). */
  pod: PodObject | undefined;
  /** Its container's termination message. */
  message: string | undefined;
}

/**
 * Proves the snapshot read is the one this run's agent wrote: the agent's report (its termination
 * message) parses, names the digest and size of the text read, and the snapshot's `source-node`
 * is the node the agent's pod ran on.
 *
 * @param read the text and snapshot read, the pod and its termination message
 * @param self this CLI's build and the image the run deployed (named when no report came)
 * @returns the agent's report
 * @throws {AgentIdentityError} when the agent reported nothing (the program that ran is not this
 *   build's agent), exit 8 as another program
 * @throws {UntrustedSnapshotError} when the report is malformed, or the digest or the node differs
 *   (exit 10)
 */
export function verifyAgentSnapshot(
  read: AgentSnapshotRead,
  self: { build: BuildInfo; image: string },
): AgentReport {
  let report: AgentReport;
  try {
    report = parseAgentReport(read.message);
  } catch (error) {
    if (!(error instanceof AgentReportError)) throw error;
    if (error.absent) {
      throw new AgentIdentityError(
        `Cannot use the snapshot as the agent that ran is not ${
          describeBuild(self.build)
        }: it reported nothing of what it wrote (${error.message}): the image '${self.image}' is not this build's`,
      );
    }
    throw new UntrustedSnapshotError(
      `Cannot trust the snapshot in '${read.uri}': the agent's report of what it wrote is unreadable: ${error.message}`,
      { cause: error },
    );
  }
  const { digest, bytes } = digestText(read.text);
  if (digest !== report.digest || bytes !== report.bytes) {
    throw new UntrustedSnapshotError(
      `Cannot trust the snapshot in '${read.uri}': it is not what the agent wrote (read ${digest}, ${bytes} bytes; the agent reported ${report.digest}, ${report.bytes} bytes)`,
      {
        details: [
          "  something else wrote that ConfigMap after the agent: check who may patch ConfigMaps in the namespace",
        ],
      },
    );
  }
  const node = read.pod?.spec?.nodeName;
  const source = read.snapshot.metadata?.["source-node"];
  if (node === undefined || source !== node) {
    throw new UntrustedSnapshotError(
      `Cannot trust the snapshot in '${read.uri}': its source-node is '${
        source ?? ""
      }' but the agent's pod ran on node '${node ?? ""}'`,
    );
  }
  return report;
}
