/**
 * Scheduled snapshots: a CronJob whose pod runs `aicr agent -o cm://<ns>/<name> --keep-last N`,
 * so each run writes the ConfigMap `<name>-<UTC yyyymmdd-hhmmss>` labelled
 * `aicr.run/series=<name>` and prunes the series to its newest N (`sink/series.ts`). Rendered by
 * `aicr snapshot --render-cronjob`; the pod is the agent Job's (placement, privileges, resources).
 *
 * @module
 */
import { UsageError } from "../errors.ts";
import { formatConfigMapUri } from "../snapshot/mod.ts";
import { agentPodParts } from "./_pod.ts";
import type { PodOptions } from "./_pod.ts";
import { jobDeadlines } from "./job.ts";
import { APP_NAME, isDns1123Label, LABEL_NAME, snapshotConfigMapLabels } from "./names.ts";
import type { Labels } from "./names.ts";
import type { ObjectMeta, PodSpec, ResourceRequirements } from "./types.ts";

/** The label that names a snapshot's series on its ConfigMap. */
export const SERIES_LABEL = "aicr.run/series";

/** The component label of the rendered CronJob's objects. */
const COMPONENT_SCHEDULED = "scheduled-snapshot";

/** A CronJob's name is at most 52 characters (the controller appends 11 for its Jobs). */
const MAX_SERIES_NAME = 52;

/** The scheduled agent's resources: the Job's (upstream §3.1), by mode. */
const PRIVILEGED_RESOURCES: ResourceRequirements = {
  requests: { cpu: "1", memory: "4Gi", "ephemeral-storage": "2Gi" },
  limits: { cpu: "2", memory: "8Gi", "ephemeral-storage": "4Gi" },
};
const RESTRICTED_RESOURCES: ResourceRequirements = {
  requests: { cpu: "100m", memory: "256Mi", "ephemeral-storage": "256Mi" },
  limits: { cpu: "500m", memory: "512Mi", "ephemeral-storage": "512Mi" },
};

/**
 * Checks a series name: a DNS-1123 label short enough to name the CronJob.
 *
 * @param name the name
 * @returns the name
 * @throws {UsageError} when it is not
 */
export function validateSeriesName(name: string): string {
  if (!isDns1123Label(name) || name.length > MAX_SERIES_NAME) {
    throw new UsageError(
      (option) =>
        `Cannot use '${
          option("jobName")
        }' as the scheduled snapshots' name: it must be a DNS-1123 label of at most ${MAX_SERIES_NAME} characters: current value is '${name}'`,
    );
  }
  return name;
}

/**
 * The ConfigMap one scheduled run writes: `<series>-<UTC yyyymmdd-hhmmss>`.
 *
 * @param series the series name
 * @param at the run's time
 * @returns the ConfigMap's name
 */
export function seriesConfigMapName(series: string, at: Date): string {
  const stamp = at.toISOString().replace(/[-:]/g, "").replace("T", "-").slice(0, 15);
  return `${series}-${stamp}`;
}

/**
 * The labels of a series' ConfigMap: a snapshot ConfigMap's plus {@link SERIES_LABEL}.
 *
 * @param series the series name
 * @param version the agent's version
 * @returns the labels
 */
export function seriesConfigMapLabels(series: string, version: string): Labels {
  return { ...snapshotConfigMapLabels(version), [SERIES_LABEL]: series };
}

/**
 * The labels of the rendered objects (CronJob, ServiceAccount, RBAC): name, component, instance.
 * No managed-by label: they are the user's to apply and delete, never swept by `aicr cleanup`.
 *
 * @param series the series name
 * @returns the labels
 */
export function scheduledLabels(series: string): Labels {
  return {
    [LABEL_NAME]: APP_NAME,
    "app.kubernetes.io/component": COMPONENT_SCHEDULED,
    "app.kubernetes.io/instance": series,
  };
}

/** A `batch/v1` CronJob manifest. */
export interface CronJobManifest {
  /** `batch/v1`. */
  apiVersion: "batch/v1";
  /** `CronJob`. */
  kind: "CronJob";
  /** Metadata. */
  metadata: ObjectMeta;
  /** Spec. */
  spec: {
    /** Cron schedule. */
    schedule: string;
    /** Time zone of the schedule. */
    timeZone?: string;
    /** `Forbid`: a slow run is never doubled. */
    concurrencyPolicy: "Forbid";
    /** A missed run starts late at most this long. */
    startingDeadlineSeconds: number;
    /** Finished Jobs kept. */
    successfulJobsHistoryLimit: number;
    /** Failed Jobs kept. */
    failedJobsHistoryLimit: number;
    /** The Job each run creates. */
    jobTemplate: {
      metadata: { labels: Labels };
      spec: {
        backoffLimit: number;
        activeDeadlineSeconds: number;
        ttlSecondsAfterFinished: number;
        template: { metadata: { labels: Labels }; spec: PodSpec };
      };
    };
  };
}

/** What {@link buildSnapshotCronJob} needs, already parsed and checked. */
export interface SnapshotCronJobConfig extends PodOptions {
  /** The namespace of the CronJob and of its ConfigMaps. */
  namespace: string;
  /** The CronJob's, ServiceAccount's and series' name. */
  name: string;
  /** Cron schedule (`0 6 * * *`). */
  schedule: string;
  /** IANA time zone of the schedule; absent: the controller manager's. */
  timeZone?: string;
  /** How many snapshots the series keeps. */
  keepLast: number;
  /** The ServiceAccount the pod runs as. */
  serviceAccountName: string;
  /** `--format json`: the ConfigMaps hold `snapshot.json`. */
  format?: "yaml" | "json";
  /** Fail the run unless the node has a GPU (and, privileged, request one). */
  requireGpu?: boolean;
}

/**
 * Builds the CronJob: each run one agent pod on the selected node, writing the series.
 *
 * @param config the checked configuration
 * @returns the CronJob manifest
 * @throws {UsageError} when a value cannot go into it (names, image, resources, schedule)
 */
export function buildSnapshotCronJob(config: SnapshotCronJobConfig): CronJobManifest {
  const { namespace, privileged = true, requireGpu = false } = config;
  const name = validateSeriesName(config.name);
  if (config.schedule.trim().split(/\s+/).length !== 5 && !config.schedule.startsWith("@")) {
    throw new UsageError(
      (option) =>
        `Cannot use '${
          option("schedule")
        }' as it must be a cron schedule of five fields ('0 6 * * *') or a macro ('@daily'): current value is '${config.schedule}'`,
    );
  }
  const labels = scheduledLabels(name);
  const pod = agentPodParts(config, {
    defaults: privileged ? PRIVILEGED_RESOURCES : RESTRICTED_RESOURCES,
    gpu: privileged && requireGpu,
    logPrefix: "agent",
  });
  const uri = formatConfigMapUri({ namespace, name });
  return {
    apiVersion: "batch/v1",
    kind: "CronJob",
    metadata: { name, namespace, labels },
    spec: {
      schedule: config.schedule,
      ...(config.timeZone !== undefined ? { timeZone: config.timeZone } : {}),
      concurrencyPolicy: "Forbid",
      startingDeadlineSeconds: 600,
      successfulJobsHistoryLimit: 1,
      failedJobsHistoryLimit: 3,
      jobTemplate: {
        metadata: { labels: { ...labels } },
        spec: {
          backoffLimit: 1,
          ...jobDeadlines(0),
          template: {
            metadata: { labels: { ...labels } },
            spec: {
              serviceAccountName: config.serviceAccountName,
              restartPolicy: "Never",
              ...pod.host,
              ...pod.placement,
              securityContext: pod.podSecurityContext,
              containers: [{
                name: "aicr",
                image: pod.container.image,
                command: ["aicr"],
                args: [
                  "agent",
                  "-o",
                  uri,
                  "--keep-last",
                  String(config.keepLast),
                  ...(config.format === "json" ? ["--format", "json"] : []),
                  ...(requireGpu ? ["--require-gpu"] : []),
                ],
                env: pod.env,
                resources: pod.container.resources,
                securityContext: pod.container.securityContext,
                volumeMounts: pod.container.volumeMounts,
              }],
              volumes: pod.volumes,
            },
          },
        },
      },
    },
  };
}
