/**
 * The read stage of a Job-mode run: the snapshot the agent wrote, read back from its ConfigMap
 * and validated, side by side with the agent's report (its pod's termination message), and
 * proved to be what this build's agent reported writing before anything is delivered.
 *
 * @module
 */
import { NotFoundError } from "../errors.ts";
import type { KubeClient, KubeObject } from "../kube/mod.ts";
import { formatConfigMapUri, parseSnapshot, snapshotFromConfigMapData } from "../snapshot/mod.ts";
import type { ConfigMapRef, Snapshot } from "../snapshot/mod.ts";
import { agentBuildOf, checkAgentBuild } from "./agent_identity.ts";
import { readAgentTermination, verifyAgentSnapshot } from "./agent_proof.ts";
import { throwIfInterrupted } from "./deploy_options.ts";
import type { DeployDeps, DeployOptions } from "./deploy_options.ts";
import { buildInfo } from "../version.ts";

/**
 * The read stage: the agent's report (the line its log carried, or its pod's termination message)
 * and the snapshot, side by side; before anything is delivered, the agent that ran must be this
 * build, and what was read must be what it reported writing, on its own node.
 */
export async function readProvenSnapshot(
  deps: DeployDeps,
  options: DeployOptions,
  from: {
    output: ConfigMapRef;
    pod: Parameters<typeof readAgentTermination>[1];
    /** The report's JSON from the agent's log line, when it came first. */
    report?: string;
  },
): Promise<Snapshot> {
  const { kube, log } = deps;
  const { output } = from;
  const [{ pod, message }, { snapshot, text }] = await Promise.all([
    from.report !== undefined
      ? { pod: from.pod, message: from.report }
      : readAgentTermination(kube, from.pod, options.signal),
    readSnapshot(kube, output, options.signal),
  ]);
  throwIfInterrupted(options.signal);
  log.debug("snapshot read", {
    configMap: formatConfigMapUri(output),
    report: from.report !== undefined ? "log" : "termination message",
  });
  const build = options.build ?? buildInfo();
  checkAgentBuild(agentBuildOf(snapshot, message), build, options.job.image);
  verifyAgentSnapshot(
    { text, snapshot, uri: formatConfigMapUri(output), pod, message },
    { build, image: options.job.image },
  );
  return snapshot;
}

/**
 * Reads and validates the snapshot the agent staged in a ConfigMap.
 *
 * @param kube the client
 * @param ref where
 * @param signal cancels the read (SIGINT/SIGTERM)
 * @returns the snapshot, and its text exactly as read (the agent's report digests it)
 * @throws {NotFoundError} when the ConfigMap or its snapshot key is missing
 * @throws {UsageError} when the document is invalid (e.g. an older agent's apiVersion)
 */
export async function readSnapshot(
  kube: KubeClient,
  ref: ConfigMapRef,
  signal?: AbortSignal,
): Promise<{ snapshot: Snapshot; text: string }> {
  const uri = formatConfigMapUri(ref);
  const cm = await kube.get<KubeObject & { data?: Record<string, string> }>(
    "ConfigMap",
    ref.namespace,
    ref.name,
    signal ? { signal } : {},
  );
  if (!cm) {
    throw new NotFoundError(
      `Cannot read the snapshot from '${uri}': the agent finished but wrote no ConfigMap`,
      {
        details: [
          (option) =>
            `read the agent's log above; rerun with ${option("noCleanup")} to inspect the Job`,
        ],
      },
    );
  }
  const text = snapshotFromConfigMapData(cm.data);
  if (text === undefined) {
    throw new NotFoundError(
      `Cannot read the snapshot from '${uri}': ConfigMap has no snapshot data`,
    );
  }
  return { snapshot: parseSnapshot(text, { source: uri }), text };
}
