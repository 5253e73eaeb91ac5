/**
 * The in-cluster signer as the CLI sees it: its Deployment's replicas and its Lease's holder.
 * `install` waits for a replica to be available, `fetch` leaves the signing to a running signer
 * (it still signs when none runs: installs made before the signer, or `--no-signer`), and
 * `status` reports the leader.
 *
 * @module
 */
import { KubeApiError } from "../kube/mod.ts";
import type { KubeClient, KubeObject } from "../kube/mod.ts";
import { signerName } from "../manifests/mod.ts";

/** The signer's Lease holder, as the Lease says. */
export interface SignerLeader {
  /** The holder's identity (`<pod>_<suffix>`), empty when released. */
  identity: string;
  /** The holder's pod (the identity's part before the last `_`). */
  pod: string;
  /** When it last renewed (RFC 3339). */
  renewTime?: string;
  /** The record's duration. */
  leaseDurationSeconds?: number;
  /** How many times the Lease changed hands. */
  transitions: number;
}

/** The signer's state. */
export interface SignerState {
  /** Whether its Deployment exists (false: an install without the signer). */
  installed: boolean;
  /** Replicas asked for. */
  desired: number;
  /** Replicas Ready. */
  ready: number;
  /** Replicas available (Ready long enough), each a candidate for the Lease. */
  available: number;
  /** The images its pod template runs. */
  image?: string;
  /** The Lease's holder, when someone holds it. */
  leader?: SignerLeader;
  /** Why the state is partial (a read the caller may not make). */
  unknown?: string;
}

interface DeploymentObject extends KubeObject {
  spec?: { replicas?: number; template?: { spec?: { containers?: { image?: string }[] } } };
  status?: { readyReplicas?: number; availableReplicas?: number };
}

interface LeaseObject extends KubeObject {
  spec?: {
    holderIdentity?: string;
    renewTime?: string;
    leaseDurationSeconds?: number;
    leaseTransitions?: number;
  };
}

function forbidden(error: unknown): boolean {
  return error instanceof KubeApiError && (error.status === 401 || error.status === 403);
}

/**
 * Reads the signer's Deployment and Lease.
 *
 * @param kube the client
 * @param options the daemon's namespace and name, a signal
 * @returns the state; `installed: false` when there is no Deployment
 * @throws {KubeApiError} when the API fails other than by refusing the reads
 */
export async function readSignerState(
  kube: KubeClient,
  options: { namespace: string; name: string; signal?: AbortSignal },
): Promise<SignerState> {
  const { namespace, name } = options;
  const call = { timeoutMs: 10_000, ...(options.signal ? { signal: options.signal } : {}) };
  let unknown: string | undefined;
  const [deployment, lease] = await Promise.all([
    kube.get<DeploymentObject>("Deployment", namespace, signerName(name), call).catch((error) => {
      if (!forbidden(error)) throw error;
      unknown = "the caller may not get deployments";
      return undefined;
    }),
    kube.get<LeaseObject>("Lease", namespace, signerName(name), call).catch((error) => {
      if (!forbidden(error)) throw error;
      unknown ??= "the caller may not get leases";
      return undefined;
    }),
  ]);
  const holder = lease?.spec?.holderIdentity ?? "";
  const image = deployment?.spec?.template?.spec?.containers?.[0]?.image;
  return {
    installed: deployment !== undefined,
    desired: deployment?.spec?.replicas ?? 0,
    ready: deployment?.status?.readyReplicas ?? 0,
    available: deployment?.status?.availableReplicas ?? 0,
    ...(image ? { image } : {}),
    ...(holder
      ? {
        leader: {
          identity: holder,
          pod: holder.includes("_") ? holder.slice(0, holder.lastIndexOf("_")) : holder,
          ...(lease?.spec?.renewTime ? { renewTime: lease.spec.renewTime } : {}),
          ...(lease?.spec?.leaseDurationSeconds !== undefined
            ? { leaseDurationSeconds: lease.spec.leaseDurationSeconds }
            : {}),
          transitions: lease?.spec?.leaseTransitions ?? 0,
        },
      }
      : {}),
    ...(unknown ? { unknown } : {}),
  };
}
