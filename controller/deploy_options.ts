/**
 * What one Job-mode run (`aicr snapshot`, {@link deploySnapshot} in `deploy.ts`) is given and
 * returns: its dependencies, its options and its result, and the one check every stage makes
 * for SIGINT/SIGTERM between its steps.
 *
 * @module
 */
import { InterruptedError } from "../errors.ts";
import type { KubeClient } from "../kube/mod.ts";
import type { Logger, TextWriter } from "../log.ts";
import type { AgentJobConfig } from "../manifests/mod.ts";
import type { ConfigMapRef, Snapshot } from "../snapshot/mod.ts";
import type { SnapshotDelivery } from "./deliver.ts";
import type { BuildInfo } from "../version.ts";

/** What a deployment needs. */
export interface DeployDeps {
  /** The client (the caller's kubeconfig identity). */
  kube: KubeClient;
  /**
   * The same identity with every request ending on SIGINT/SIGTERM, for the pre-flight reads and
   * the gate (nothing is written yet, so a signal there leaves nothing to clean up). @default kube
   */
  preflightKube?: KubeClient;
  /** Logger (stderr); the agent's streamed log is relayed through it. */
  log: Logger;
  /** Standard output: a delivery to stdout writes here (required for one). */
  stdout?: TextWriter;
  /** Clock. */
  now: () => Date;
  /** 16 random hex digits per call (run and invocation IDs). */
  randomHex: () => string;
}

/** The parts of the agent Job the user chooses; the run fills in the rest. */
export type AgentJobKnobs = Omit<
  AgentJobConfig,
  | "runId"
  | "invocationId"
  | "namespace"
  | "serviceAccountName"
  | "output"
  | "autoTargetGpu"
  | "timeoutMs"
>;

/** Options of one `aicr snapshot` run. */
export interface DeployOptions {
  /** `--namespace`. */
  namespace: string;
  /** The Job spec knobs (image, privileged, selectors, tolerations, resources, ...). */
  job: AgentJobKnobs;
  /** `--service-account-name`, when the user set it (exact-if-exists). */
  serviceAccountName?: string;
  /** The prefix when no existing ServiceAccount is used. */
  serviceAccountPrefix: string;
  /**
   * The user's `cm://` output, parsed and in {@link namespace} (the agent writes there
   * directly); absent for stdout and files (the agent stages the snapshot in a run-scoped
   * ConfigMap).
   */
  output?: ConfigMapRef;
  /** `--discover-network`. */
  discoverNetwork: boolean;
  /** `--timeout` in milliseconds. */
  timeoutMs: number;
  /** `--no-cleanup`: keep everything for debugging. */
  noCleanup: boolean;
  /** Whether auto-targeting may inject the GPU selector (none of the three flags set). */
  autoTarget: boolean;
  /** Reuse this run ID instead of generating one (pinned CI runs). */
  runId?: string;
  /** `--create-namespace`: create the namespace when it is absent (kept after the run). */
  createNamespace?: boolean;
  /** SIGINT/SIGTERM. */
  signal?: AbortSignal;
  /** The build the agent must be (`version.ts` `buildInfo`). @default this one */
  build?: BuildInfo;
  /**
   * Where the snapshot goes, delivered as soon as it is read, before cleanup starts; cleanup
   * still runs (and is verified) before {@link deploySnapshot} returns. A failed delivery is the
   * run's error, cleaned up like any other. Absent: the run only reads the snapshot.
   */
  delivery?: SnapshotDelivery;
}

/** What a deployment returns. */
export interface DeployResult {
  /** The run ID. */
  runId: string;
  /** The snapshot the agent wrote. */
  snapshot: Snapshot;
  /** Where the agent wrote it. */
  configMap: ConfigMapRef;
  /** The node it ran on. */
  nodeName: string | undefined;
  /** The selector auto-targeting injected, if any. */
  injectedSelector?: string;
  /** How many of the run's objects cleanup removed (0 with `noCleanup`). */
  cleaned: number;
  /** The bytes delivered, when the run delivered. */
  bytes?: number;
}

/** Throws the run's interrupt (exit 130) once a signal aborted it: each stage checks between steps. */
export function throwIfInterrupted(signal: AbortSignal | undefined): void {
  if (signal?.aborted) {
    throw new InterruptedError(
      `Cannot finish the snapshot run: interrupted (${String(signal.reason)})`,
    );
  }
}
