/**
 * `aicr snapshot`'s run from its options (`deploy.ts`'s one shape): the run itself, which
 * delivers its snapshot and cleans up, then its closing line; or, for `--dry-run`, the objects a
 * run would create, written as a YAML stream or a JSON `List`, with the read-only lookups logged.
 *
 * @module
 */
import { resolve } from "node:path";
import { InterruptedError, UsageError } from "../errors.ts";
import { writeFileAtomic } from "../io.ts";
import type { KubeClient } from "../kube/mod.ts";
import type { TextWriter } from "../log.ts";
import { formatManifest } from "../manifests/mod.ts";
import { deploySnapshot, previewSnapshotRun } from "./deploy.ts";
import type { DeployDeps, DeployOptions } from "./deploy.ts";
import type { SnapshotDelivery } from "./deliver.ts";

/** A run's options with where its snapshot goes. */
export type SnapshotRunOptions = DeployOptions & { delivery: SnapshotDelivery };

/**
 * Runs one snapshot: deploy, wait, read, deliver, clean up, and the closing line (where it ran,
 * what it delivered, what it cleaned, how long it took).
 *
 * @param deps client, logger, streams, clock, randomness
 * @param options the run's options
 * @returns when the snapshot is delivered and cleanup is done
 * @throws {InterruptedError} when a signal came during cleanup (cleanup ran)
 */
export async function runSnapshot(
  deps: DeployDeps & { stdout: TextWriter },
  options: SnapshotRunOptions,
): Promise<void> {
  const started = deps.now().getTime();
  const result = await deploySnapshot(deps, options);
  if (options.signal?.aborted) {
    // Interrupted during cleanup, after delivery: cleanup ran; the exit code says so.
    throw new InterruptedError(
      `Cannot finish the snapshot run: interrupted (${String(options.signal.reason)})`,
    );
  }
  deps.log.info("snapshot complete", {
    node: result.nodeName ?? "",
    bytes: result.bytes ?? 0,
    cleaned: result.cleaned,
    seconds: ((deps.now().getTime() - started) / 1000).toFixed(1),
    runID: result.runId,
  });
}

/** A client for an offline preview: any call is a bug (an offline plan makes none). */
function offlineClient(): KubeClient {
  return new Proxy({} as KubeClient, {
    get(_target, property) {
      return () => {
        throw new Error(`Cannot call '${String(property)}' offline: a dry run made a cluster call`);
      };
    },
  });
}

/**
 * The dry run: the objects a run would create, from the same planning code as a run, on stdout
 * (or the output file) as a YAML stream or a JSON `List`; the read-only lookups are logged.
 *
 * @param deps client (connected when not offline), logger, stdout, clock, randomness, directory
 * @param options the run's options
 * @param preview whether no cluster is contacted (the lookups' answers are assumed)
 * @returns when the listing is written
 * @throws {UsageError} when the output is a ConfigMap
 */
export async function previewSnapshot(
  deps: Omit<DeployDeps, "stderr" | "kube"> & {
    connect: () => KubeClient;
    stdout: TextWriter;
    cwd: string;
  },
  options: SnapshotRunOptions,
  preview: { offline: boolean },
): Promise<void> {
  const { log } = deps;
  const { target, format } = options.delivery;
  if (target.kind === "configmap") {
    throw new UsageError(
      `Cannot write the dry run to '${options.delivery.output}': it prints manifests to stdout or a file`,
    );
  }
  const kube = preview.offline ? offlineClient() : deps.connect();
  const planned = await previewSnapshotRun({ ...deps, kube }, options, preview);
  for (const lookup of planned.lookups) {
    log.info(preview.offline ? "dry run" : "dry run: read-only lookup", { request: lookup });
  }
  const text = format === "json"
    ? JSON.stringify(
      { apiVersion: "v1", kind: "List", items: planned.objects.map((o) => o.manifest) },
      null,
      2,
    ) + "\n"
    : planned.objects.map((o) => `---\n${formatManifest(o.manifest)}`).join("");
  if (target.kind === "file") {
    await writeFileAtomic(resolve(deps.cwd, target.path), text, 0o644, {
      what: "the dry run",
      ...(options.signal ? { signal: options.signal } : {}),
    });
  } else deps.stdout.write(text);
  log.info("dry run: nothing was created", {
    namespace: options.namespace,
    objects: planned.objects.length,
    runID: planned.runId,
  });
}
