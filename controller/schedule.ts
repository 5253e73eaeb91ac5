/**
 * Scheduled snapshots (`aicr snapshot --render-cronjob`): the CronJob that runs the agent on a
 * schedule and keeps the last N snapshots of its node as ConfigMaps, with its ServiceAccount and
 * least RBAC, rendered for `kubectl apply -f` or GitOps. Nothing is contacted.
 *
 * @module
 */
import { resolve } from "node:path";
import { writeFileAtomic } from "../io.ts";
import type { Logger, TextWriter } from "../log.ts";
import {
  buildSnapshotCronJob,
  formatManifest,
  scheduledLabels,
  SERIES_LABEL,
  validateSeriesName,
} from "../manifests/mod.ts";
import type { SnapshotCronJobConfig } from "../manifests/mod.ts";
import { scheduledRbacObjects } from "../rbac/mod.ts";
import type { SnapshotTarget } from "../snapshot/mod.ts";
import { UsageError } from "../errors.ts";

/** Once a day, at midnight in the controller manager's time zone. */
const DEFAULT_SCHEDULE = "0 0 * * *";
/** A week of daily snapshots. */
const DEFAULT_KEEP_LAST = 7;

/** Where the rendered objects go. */
export interface ScheduleOutput {
  /** A file (relative to `cwd`), stdout; a ConfigMap is refused. */
  target: SnapshotTarget;
  /** `yaml` (a stream) or `json` (one `List`); anything else is refused. */
  format: string;
}

/** The options of scheduled snapshots (`--render-cronjob`). */
export interface ScheduledSnapshotOptions
  extends Omit<SnapshotCronJobConfig, "serviceAccountName" | "schedule" | "keepLast"> {
  /** Cron schedule. @default "0 0 * * *" */
  schedule?: string;
  /** Snapshots kept. @default 7 */
  keepLast?: number;
  /** Render the Namespace too (`--create-namespace`). */
  createNamespace: boolean;
  /** Where the objects go. */
  output: ScheduleOutput;
  /** Cancels the write. */
  signal?: AbortSignal;
}

/**
 * The objects of scheduled snapshots, in apply order: the Namespace (when asked), the
 * ServiceAccount, Role, RoleBinding, ClusterRole, ClusterRoleBinding, then the CronJob.
 *
 * @param options the checked options
 * @returns the manifests
 * @throws {UsageError} when a value cannot go into them
 */
export function scheduledSnapshotObjects(options: ScheduledSnapshotOptions): object[] {
  const name = validateSeriesName(options.name);
  const labels = scheduledLabels(name);
  const rbac = scheduledRbacObjects({ namespace: options.namespace, name, labels });
  const cronJob = buildSnapshotCronJob({
    ...options,
    schedule: options.schedule ?? DEFAULT_SCHEDULE,
    keepLast: options.keepLast ?? DEFAULT_KEEP_LAST,
    serviceAccountName: name,
  });
  return [
    ...(options.createNamespace
      ? [{
        apiVersion: "v1",
        kind: "Namespace",
        metadata: { name: options.namespace, labels: { ...labels } },
      }]
      : []),
    rbac.serviceAccount,
    rbac.role,
    rbac.roleBinding,
    rbac.clusterRole,
    rbac.clusterRoleBinding,
    cronJob,
  ];
}

/**
 * Renders scheduled snapshots to a file or stdout, and says how to run one now and compare two.
 *
 * @param deps stdout, the working folder and the logger
 * @param options the checked options
 * @throws {UsageError} when a value cannot go into the objects, or the file cannot be written
 */
export async function renderScheduledSnapshot(
  deps: { stdout: TextWriter; cwd: string; log: Logger },
  options: ScheduledSnapshotOptions,
): Promise<void> {
  const { target, format } = options.output;
  if (target.kind === "configmap") {
    throw new UsageError((option) =>
      `Cannot write the CronJob to a ConfigMap: '${
        option("output")
      }' is the manifest file (or - for stdout); the snapshots go to ConfigMaps '<name>-<time>' in the namespace`
    );
  }
  if (format !== "yaml" && format !== "json") {
    throw new UsageError((option) =>
      `Cannot use '${
        option("format")
      }' as the CronJob is rendered as yaml or json: current value is '${format}'`
    );
  }
  const objects = scheduledSnapshotObjects(options);
  const text = format === "json"
    ? JSON.stringify({ apiVersion: "v1", kind: "List", items: objects }, null, 2) + "\n"
    : objects.map((o) => `---\n${formatManifest(o)}`).join("");
  if (target.kind === "file") {
    await writeFileAtomic(resolve(deps.cwd, target.path), text, 0o644, {
      what: "the CronJob",
      ...(options.signal ? { signal: options.signal } : {}),
    });
  } else deps.stdout.write(text);
  const ns = options.namespace;
  deps.log.info("rendered scheduled snapshots: nothing was created", {
    namespace: ns,
    cronjob: options.name,
    schedule: options.schedule ?? DEFAULT_SCHEDULE,
    keepLast: options.keepLast ?? DEFAULT_KEEP_LAST,
    runNow: `kubectl -n ${ns} create job ${options.name}-now --from=cronjob/${options.name}`,
    list: `kubectl -n ${ns} get configmaps -l ${SERIES_LABEL}=${options.name}`,
  });
}
