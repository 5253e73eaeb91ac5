/**
 * The label sweep both modes clean up with when the ledger of a run is gone (`aicr cleanup`,
 * `aicr daemonset uninstall`): find objects by labels, kind by kind, and delete each pinned to
 * the UID just read, so an object that replaced it in between is never touched.
 *
 * @module
 */
import type { Logger } from "../log.ts";
import type { KubeClient, KubeObject } from "./client.ts";
import type { KindName } from "./resources.ts";

/** One object the sweep found. */
export interface SweptObject {
  /** Kind. */
  kind: KindName;
  /** Namespace, for namespaced kinds. */
  namespace?: string;
  /** Name. */
  name: string;
  /** The UID read at the sweep (deletes are pinned to it). */
  uid: string;
  /** `deleted`, `gone` (already, or replaced since the read), `kept`, `failed`, or `found` (dry run). */
  result: "deleted" | "gone" | "kept" | "failed" | "found";
  /** Why, for `kept` and `failed`. */
  detail?: string;
}

/** Options of {@link sweepObjects}. */
export interface SweepObjectsOptions {
  /** The label selector that finds the candidates. */
  selector: string;
  /** The namespace of the namespaced kinds. */
  namespace: string;
  /** Kinds to sweep, in deletion order. */
  kinds: readonly KindName[];
  /**
   * Whether a found object is to be swept, beyond the selector (e.g. a cluster-scoped object's
   * name naming this namespace). @default every object found
   */
  accept?: (kind: KindName, object: KubeObject) => boolean;
  /** Only list what would be deleted. */
  dryRun?: boolean;
  /** Per-call timeout. @default 30000 */
  timeoutMs?: number;
}

/**
 * Finds objects by labels, kind by kind in order, and deletes each pinned to the UID just read
 * (Jobs and DaemonSets in the background, so their pods follow). A delete that fails is logged
 * and reported, never thrown, so one object cannot keep the others.
 *
 * @param deps client and logger
 * @param options selector, namespace, kinds, filter, dry run
 * @returns one entry per object found
 * @throws {KubeApiError} when a list fails
 */
export async function sweepObjects(
  deps: { kube: KubeClient; log: Logger },
  options: SweepObjectsOptions,
): Promise<SweptObject[]> {
  const { kube, log } = deps;
  const { selector, namespace, dryRun = false, timeoutMs = 30_000, accept } = options;
  const out: SweptObject[] = [];
  for (const kind of options.kinds) {
    const items = await kube.listAll<KubeObject>(kind, namespace, {
      labelSelector: selector,
      timeoutMs,
    });
    const found = items.filter((o) =>
      o.metadata?.name && o.metadata.uid && (accept?.(kind, o) ?? true)
    );
    const results = await Promise.all(found.map(async (object): Promise<SweptObject> => {
      const name = object.metadata?.name ?? "";
      const uid = object.metadata?.uid ?? "";
      const ns = object.metadata?.namespace;
      const base = { kind, name, uid, ...(ns ? { namespace: ns } : {}) };
      if (dryRun) return { ...base, result: "found" };
      try {
        const result = await kube.deleteIfUid(kind, ns, name, uid, {
          timeoutMs,
          ...(kind === "Job" || kind === "DaemonSet" || kind === "Deployment"
            ? { propagationPolicy: "Background" as const }
            : {}),
        });
        return { ...base, result: result === "deleted" ? "deleted" : "gone" };
      } catch (error) {
        const detail = error instanceof Error ? error.message : String(error);
        log.warn("cleanup could not delete an object", { kind, name, error: detail });
        return { ...base, result: "failed", detail };
      }
    }));
    out.push(...results);
  }
  return out;
}
