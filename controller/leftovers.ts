/**
 * `aicr cleanup` without a run ID: which runs left objects behind. A SIGKILLed `aicr snapshot`
 * never reaches its own cleanup, and its operator rarely kept the run ID it logged; this lists
 * every run whose labelled objects are still there (run ID, namespace, age, what is left) with the
 * exact command that sweeps each, and deletes nothing.
 *
 * @module
 */
import { KubeApiError } from "../kube/mod.ts";
import type { KindName, KubeClient, KubeObject } from "../kube/mod.ts";
import { ToolError } from "../errors.ts";
import { APP_NAME, LABEL_MANAGED_BY, LABEL_NAME, LABEL_RUN_ID } from "../manifests/mod.ts";
import type { ClusterRunDeps } from "./daemonset.ts";
import { runReported } from "./reported.ts";
import type { ReportTargets } from "./reported.ts";
import { SWEPT_KINDS } from "./sweep.ts";

/**
 * The selector of every run's objects: a run ID label, with aicr's name and managed-by (the three
 * labels `aicr cleanup --run-id` sweeps by, the run ID left open).
 */
export const LEFTOVER_SELECTOR =
  `${LABEL_RUN_ID},${LABEL_NAME}=${APP_NAME},${LABEL_MANAGED_BY}=${APP_NAME}`;

/** One object a run left. */
export interface LeftoverObject {
  /** Kind. */
  kind: KindName;
  /** Name. */
  name: string;
  /** Namespace, for namespaced kinds. */
  namespace?: string;
}

/** One run that left objects. */
export interface LeftoverRun {
  /** The run ID (its label's value). */
  runId: string;
  /** The namespace the run deployed into ("" when no object says). */
  namespace: string;
  /** When its oldest object left was created. */
  createdAt?: Date;
  /** What is left, in the sweep's deletion order. */
  objects: LeftoverObject[];
}

/** Options of {@link listLeftoverRuns}. */
export interface ListLeftoversOptions {
  /** Only this namespace's runs; every namespace when absent. */
  namespace?: string;
  /** Per-call timeout. @default 30000 */
  timeoutMs?: number;
}

/**
 * Lists the runs whose labelled objects are still in the cluster, oldest first. A run's namespace
 * is its namespaced objects', or else its ClusterRoleBinding's ServiceAccount's.
 *
 * @param kube the client
 * @param options the namespace (every one when absent) and the per-call timeout
 * @returns one entry per run, oldest first
 * @throws {KubeApiError} when a list fails
 */
export async function listLeftoverRuns(
  kube: Pick<KubeClient, "listAll">,
  options: ListLeftoversOptions = {},
): Promise<LeftoverRun[]> {
  const { namespace, timeoutMs = 30_000 } = options;
  const runs = new Map<string, LeftoverRun>();
  for (const kind of SWEPT_KINDS) {
    const items = await kube.listAll<KubeObject>(kind, namespace, {
      labelSelector: LEFTOVER_SELECTOR,
      timeoutMs,
    });
    for (const object of items) addObject(runs, kind, object);
  }
  const all = [...runs.values()].filter((run) =>
    namespace === undefined || run.namespace === namespace
  );
  return all.sort((a, b) =>
    (a.createdAt?.getTime() ?? 0) - (b.createdAt?.getTime() ?? 0) ||
    a.runId.localeCompare(b.runId)
  );
}

function addObject(runs: Map<string, LeftoverRun>, kind: KindName, object: KubeObject): void {
  const meta = object.metadata ?? {};
  const runId = meta.labels?.[LABEL_RUN_ID];
  if (!runId || !meta.name) return;
  const run = runs.get(runId) ?? { runId, namespace: "", objects: [] };
  runs.set(runId, run);
  run.objects.push({
    kind,
    name: meta.name,
    ...(meta.namespace ? { namespace: meta.namespace } : {}),
  });
  const subjects = (object as { subjects?: { namespace?: string }[] }).subjects;
  const namespace = meta.namespace ?? subjects?.find((s) => s.namespace)?.namespace;
  if (namespace && (!run.namespace || meta.namespace)) run.namespace = namespace;
  const created = meta.creationTimestamp ? new Date(meta.creationTimestamp) : undefined;
  if (created && !Number.isNaN(created.getTime())) {
    if (!run.createdAt || created < run.createdAt) run.createdAt = created;
  }
}

/**
 * An age as kubectl prints it: `45s`, `12m`, `5h`, `3d`.
 *
 * @param ms the age in milliseconds (negative counts as 0)
 * @returns the age
 */
export function formatAge(ms: number): string {
  const seconds = Math.max(0, Math.floor(ms / 1000));
  if (seconds < 120) return `${seconds}s`;
  const minutes = Math.floor(seconds / 60);
  if (minutes < 180) return `${minutes}m`;
  const hours = Math.floor(minutes / 60);
  if (hours < 48) return `${hours}h`;
  return `${Math.floor(hours / 24)}d`;
}

/** What is left, by kind in deletion order: `Job, Pod, ConfigMap (2), ...`. */
function whatIsLeft(objects: readonly LeftoverObject[]): string {
  const counts = new Map<string, number>();
  for (const o of objects) counts.set(o.kind, (counts.get(o.kind) ?? 0) + 1);
  return [...counts].map(([kind, n]) => n > 1 ? `${kind} (${n})` : kind).join(", ");
}

/** Options of {@link formatLeftoverRuns}. */
export interface FormatLeftoversOptions {
  /** Now, for the ages. */
  now: Date;
  /** The command line that sweeps one run (the CLI spells its flags). */
  cleanCommand: (run: LeftoverRun) => string;
}

/**
 * The listing: a table (run ID, namespace, age, what is left), then the command for each run.
 *
 * @param runs the runs, in order
 * @param options the clock and the command spelling
 * @returns the text (ends with a newline)
 */
export function formatLeftoverRuns(
  runs: readonly LeftoverRun[],
  options: FormatLeftoversOptions,
): string {
  const rows = [
    ["RUN ID", "NAMESPACE", "AGE", "LEFT"],
    ...runs.map((run) => [
      run.runId,
      run.namespace || "-",
      run.createdAt ? formatAge(options.now.getTime() - run.createdAt.getTime()) : "-",
      whatIsLeft(run.objects),
    ]),
  ];
  const widths = [0, 1, 2].map((i) => Math.max(...rows.map((r) => r[i]?.length ?? 0)));
  const lines = rows.map((r) =>
    r.map((cell, i) => i < 3 ? cell.padEnd(widths[i] ?? 0) : cell).join("  ")
  );
  return [
    ...lines,
    "",
    "Clean each with:",
    ...runs.map((run) => `  ${options.cleanCommand(run)}`),
    "",
  ].join("\n");
}

/** Options of {@link runLeftoverListing}. */
export interface LeftoverListingOptions {
  /** Only this namespace's runs; every namespace when absent. */
  namespace?: string;
  /** The namespace listed when the caller may not list every namespace. */
  fallbackNamespace: string;
  /** The command line that sweeps one run. */
  cleanCommand: (run: LeftoverRun) => string;
  /** Where the reports go. */
  reports: ReportTargets;
}

/**
 * `aicr cleanup` without a run ID: lists the runs that left objects on stdout (stderr when a
 * report goes to stdout) with the command that sweeps each, deletes nothing. Every namespace is read when the caller may list there; one
 * who may not gets the listing of the namespace it names.
 *
 * @param deps the cluster, logger, stdout and clock
 * @param options the namespace, the command spelling and the reports
 * @returns when no run left anything
 * @throws {ToolError} with code `leftovers` (exit 1) when a run left objects
 */
export async function runLeftoverListing(
  deps: Pick<
    ClusterRunDeps,
    "connect" | "log" | "stdout" | "stderr" | "now" | "signal" | "nameOption"
  >,
  options: LeftoverListingOptions,
): Promise<void> {
  const verb = { kind: "CleanupReport" as const, namespace: options.namespace ?? "" };
  await runReported(deps, { targets: options.reports, verb }, async () => {
    const runs = await listRuns(deps, options);
    const objects = runs.flatMap((run) =>
      run.objects.map((o) => ({ ...o, status: "found", detail: `run ${run.runId}` }))
    );
    const content = { nodes: [], objects };
    if (runs.length === 0) {
      deps.log.info("cleanup: no run left objects behind", {
        namespace: options.namespace ?? "(all)",
      });
      return { content };
    }
    // A report sent to stdout keeps stdout to itself: the table goes to stderr then.
    const { json, junit } = options.reports;
    const out = json === "-" || junit === "-" ? deps.stderr : deps.stdout;
    out.write(formatLeftoverRuns(runs, { now: deps.now(), cleanCommand: options.cleanCommand }));
    return {
      content,
      failure: new ToolError(
        `${runs.length} run(s) left objects behind: nothing was deleted; clean each with the command listed`,
        "leftovers",
      ),
    };
  });
}

/** Every namespace, or the named one when the caller may not list cluster-wide. */
async function listRuns(
  deps: Pick<ClusterRunDeps, "connect" | "log">,
  options: { namespace?: string; fallbackNamespace: string },
): Promise<LeftoverRun[]> {
  const kube = deps.connect();
  if (options.namespace !== undefined) {
    return await listLeftoverRuns(kube, { namespace: options.namespace });
  }
  try {
    return await listLeftoverRuns(kube);
  } catch (error) {
    if (!(error instanceof KubeApiError) || error.status !== 403) throw error;
    deps.log.warn("cleanup: cannot list every namespace, listing one", {
      namespace: options.fallbackNamespace,
      reason: error.message.split("\n")[0] ?? "",
    });
    return await listLeftoverRuns(kube, { namespace: options.fallbackNamespace });
  }
}
