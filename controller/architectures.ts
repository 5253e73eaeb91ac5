/**
 * Which GPU nodes an image can run on: the image's architectures against the nodes'
 * `kubernetes.io/arch` labels. The agent Job's auto-targeting and the DaemonSet's install read it
 * to say which nodes the pods' arch affinity leaves out, before anything is created.
 *
 * @module
 */
import { UsageError } from "../errors.ts";
import type { KubeClient } from "../kube/mod.ts";
import type { Logger } from "../log.ts";
import { ARCH_LABEL } from "../manifests/_pod.ts";

/** A node the image cannot run on. */
export interface LeftOutNode {
  name: string;
  /** Its `kubernetes.io/arch`, or `unlabelled`. */
  arch: string;
}

/** What {@link nodesByArchitecture} found. */
export interface ArchitectureSplit {
  /** Whether one node of the selector has one of the image's architectures. */
  usable: boolean;
  /** Nodes of the selector of another architecture (at most {@link LEFT_OUT_LIMIT}). */
  leftOut: LeftOutNode[];
  /** Whether more were left out than {@link leftOut} lists. */
  more: boolean;
}

/** How many left-out nodes are named. */
export const LEFT_OUT_LIMIT = 20;

/**
 * Lists, for a node selector, whether a node of the image's architectures exists and which nodes
 * are of another (two reads: `arch in (...)`, limit 1; `arch notin (...)`, which also takes a node
 * without the label, as the affinity does).
 *
 * @param kube the client
 * @param selector the nodes considered, e.g. `nvidia.com/gpu.present=true` (empty: every node)
 * @param architectures the image's architectures
 * @param options signal and per-read timeout
 * @returns usable or not, and the nodes left out
 */
export async function nodesByArchitecture(
  kube: KubeClient,
  selector: string,
  architectures: readonly string[],
  options: { signal?: AbortSignal; timeoutMs: number },
): Promise<ArchitectureSplit> {
  const set = architectures.join(",");
  const read = (expression: string, limit: number) =>
    kube.list("Node", undefined, {
      labelSelector: [selector, `${ARCH_LABEL} ${expression} (${set})`].filter(Boolean).join(","),
      limit,
      timeoutMs: options.timeoutMs,
      signal: options.signal
        ? AbortSignal.any([options.signal, AbortSignal.timeout(options.timeoutMs)])
        : AbortSignal.timeout(options.timeoutMs),
    });
  const [inSet, outside] = await Promise.all([
    read("in", 1),
    read("notin", LEFT_OUT_LIMIT),
  ]);
  return {
    usable: inSet.items.length > 0,
    leftOut: outside.items.map((node) => ({
      name: node.metadata?.name ?? "",
      arch: node.metadata?.labels?.[ARCH_LABEL] ?? "unlabelled",
    })),
    more: Boolean(outside.continue),
  };
}

/**
 * Names left-out nodes for a log line or an error: `p6-gb200-1 (arm64), ...`.
 *
 * @param split what {@link nodesByArchitecture} found
 * @returns the list
 */
export function describeLeftOut(split: ArchitectureSplit): string {
  return split.leftOut.map((n) => `${n.name} (${n.arch})`).join(", ") +
    (split.more ? ", and more" : "");
}

/** What {@link checkArchitectures} says the pods are and where they were meant to go. */
export interface ArchitectureCheck {
  /** The nodes considered (a label selector; empty: every node). */
  selector: string;
  /** The image's architectures. */
  architectures: readonly string[];
  /** The image, for the messages. */
  image: string;
  /** Whose pods: `the agent`, `the daemon`. */
  who: string;
  /** Which nodes, for the error: `GPU node`, `node the daemon targets`. */
  nodes: string;
  /** The warning when some are left out: `auto-targeting left out GPU nodes of ...`. */
  leftOut: string;
  /** Ends the reads. */
  signal?: AbortSignal;
  /** Per-read timeout. @default 5000 */
  timeoutMs?: number;
}

/**
 * Says, before anything is created, which nodes the pods' arch affinity leaves out: a warning
 * naming them when some node of the image's architectures remains, else a usage error (the pods
 * could run nowhere).
 *
 * @param kube the client
 * @param log where the warning goes
 * @param check the nodes, the image and whose pods
 * @returns what {@link nodesByArchitecture} found
 * @throws {UsageError} when every node considered is of an architecture the image lacks
 */
export async function checkArchitectures(
  kube: KubeClient,
  log: Logger,
  check: ArchitectureCheck,
): Promise<ArchitectureSplit> {
  const { selector, architectures, image, who, nodes, leftOut, signal } = check;
  const split = await nodesByArchitecture(kube, selector, architectures, {
    timeoutMs: check.timeoutMs ?? 5000,
    ...(signal ? { signal } : {}),
  });
  if (!split.usable && split.leftOut.length > 0) {
    throw new UsageError(
      `Cannot run ${who} on a ${nodes} as every ${nodes} is of an architecture the image '${image}' lacks (it has ${
        architectures.join(", ")
      }): ${describeLeftOut(split)}`,
      {
        details: [
          (option) =>
            `give an image that has their architecture with ${option("image")}, and say so with ${
              option("imagePlatforms")
            } (e.g. linux/amd64,linux/arm64)`,
        ],
      },
    );
  }
  if (split.leftOut.length > 0) {
    log.warn(leftOut, {
      nodes: describeLeftOut(split),
      image,
      architectures: architectures.join(","),
    });
  }
  return split;
}
