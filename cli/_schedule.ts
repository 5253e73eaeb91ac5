/**
 * `aicr snapshot --render-cronjob`: its flags, parsed once into the options of
 * `renderScheduledSnapshot` (controller/schedule.ts), which renders and writes.
 *
 * @module
 */
import type { Command } from "commander";
import type { AgentJobKnobs, ScheduledSnapshotOptions } from "../controller/mod.ts";
import { UsageError } from "../errors.ts";
import { DEFAULT_JOB_NAME_PREFIX } from "../manifests/mod.ts";
import { parseSnapshotTarget } from "../snapshot/mod.ts";
import { parseKeepLast } from "./_flags.ts";

/** The series' name when `--job-name` is left at its default. */
const DEFAULT_SCHEDULED_NAME = "aicr-snapshot";

/** The flags `--render-cronjob` reads beside the Job's. */
export interface ScheduleFlags {
  /** `--render-cronjob`. */
  renderCronjob: boolean;
  /** `--schedule`. */
  schedule?: string;
  /** `--keep-last`. */
  keepLast?: string;
  /** `--job-name` (the CronJob's and the series' name). */
  jobName: string;
  /** `--output`. */
  output?: string;
  /** `--format`. */
  format: string;
  /** `--create-namespace`. */
  createNamespace: boolean;
  /** Flags a rendered CronJob has no use for. */
  dryRun: boolean;
  fromDaemonset: boolean;
  serviceAccountName?: string;
  runId?: string;
}

/**
 * Adds `--render-cronjob`, `--schedule` and `--keep-last`.
 *
 * @param command the `snapshot` command
 * @returns the same command
 */
export function addScheduleFlags(command: Command): Command {
  return command
    .option(
      "--render-cronjob",
      "print a CronJob (with its ServiceAccount and least RBAC) that snapshots the selected node on --schedule and keeps the last --keep-last as ConfigMaps <job-name>-<time>; create nothing",
      false,
    )
    .option("--schedule <cron>", "with --render-cronjob: when (default: '0 0 * * *')")
    .option("--keep-last <n>", "with --render-cronjob: snapshots kept (default: 7)");
}

/**
 * Completes and validates `--render-cronjob`'s flags.
 *
 * @param flags the parsed flags
 * @param context the checked namespace and the Job's knobs (placement, image, privileges)
 * @returns the options of `renderScheduledSnapshot`
 * @throws {UsageError} for a flag that has no meaning here or a bad value
 */
export function scheduledSnapshotOptions(
  flags: ScheduleFlags,
  context: { namespace: string; job: AgentJobKnobs; autoTarget: boolean; signal: AbortSignal },
): ScheduledSnapshotOptions {
  const refused = [
    ["--dry-run", flags.dryRun],
    ["--from-daemonset", flags.fromDaemonset],
    ["--service-account-name", flags.serviceAccountName !== undefined],
    ["--run-id", flags.runId !== undefined],
  ].filter(([, set]) => set).map(([flag]) => flag);
  if (refused.length > 0) {
    throw new UsageError(
      `Cannot use ${
        refused.map((f) => `'${f}'`).join(", ")
      } with '--render-cronjob': it renders a CronJob with its own ServiceAccount and creates nothing`,
    );
  }
  const { job } = context;
  const nodeSelector = context.autoTarget
    ? { "nvidia.com/gpu.present": "true" }
    : job.nodeSelector ?? {};
  return {
    ...job,
    nodeSelector,
    namespace: context.namespace,
    name: flags.jobName === DEFAULT_JOB_NAME_PREFIX ? DEFAULT_SCHEDULED_NAME : flags.jobName,
    ...(flags.schedule !== undefined ? { schedule: flags.schedule } : {}),
    ...(flags.keepLast !== undefined ? { keepLast: parseKeepLast(flags.keepLast) } : {}),
    createNamespace: flags.createNamespace,
    output: { target: parseSnapshotTarget(flags.output), format: flags.format },
    signal: context.signal,
  };
}

/**
 * Refuses `--schedule` and `--keep-last` on a run: they only shape a rendered CronJob.
 *
 * @param flags the parsed flags
 * @throws {UsageError} when one is set without `--render-cronjob`
 */
export function refuseScheduleFlagsOnRun(flags: ScheduleFlags): void {
  for (const [flag, value] of [["--schedule", flags.schedule], ["--keep-last", flags.keepLast]]) {
    if (value !== undefined) {
      throw new UsageError(
        `Cannot use '${flag}' without '--render-cronjob': it shapes the rendered CronJob, not a run`,
      );
    }
  }
}
