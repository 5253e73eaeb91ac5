/**
 * The daemons' alert rules and Grafana dashboard, as data: the one source of the shipped rules
 * file, the chart's PrometheusRule and the dashboard JSON (`scripts/chart.ts` writes them into
 * `charts/aicr/`; `promtool test rules` tests every alert, `tests/chart/`).
 *
 * Every expression reads series the daemon exports (`daemon/metrics.ts`) or Prometheus' own `up`,
 * narrowed to the daemons' scrape job (`job="aicr-daemon"` by default: the ServiceMonitor names the
 * job after the Service, which is the daemon's name; a plain scrape config names it so too). The
 * `node` label comes from the scrape's relabelling of `__meta_kubernetes_pod_node_name`, as the
 * ServiceMonitor and the documented scrape configs do.
 *
 * @module
 */

/** One alerting rule, as a Prometheus rules file holds it. */
export interface AlertRule {
  /** The alert's name. */
  alert: string;
  /** PromQL: a series per firing alert. */
  expr: string;
  /** How long the expression must hold before the alert fires. */
  for: string;
  /** Static labels (severity). */
  labels: Record<string, string>;
  /** Summary and description (Prometheus templates: `{{ $labels.node }}`, `{{ $value }}`). */
  annotations: Record<string, string>;
}

/** A Prometheus rules file: `groups` of rules. */
export interface RuleFile {
  /** The groups. */
  groups: { name: string; rules: AlertRule[] }[];
}

/** Options of {@link daemonAlertRules}. */
export interface AlertRuleOptions {
  /** The scrape job of the daemons (the daemon's name under a ServiceMonitor). @default "aicr-daemon" */
  job?: string;
  /**
   * Every `for` replaced by this duration: for tests that watch an alert fire on a real
   * Prometheus without waiting out the shipped durations (same expressions).
   */
  forOverride?: string;
}

/** The alerts' names, in the rules file's order. */
export const DAEMON_ALERTS = [
  "AicrNodeDrift",
  "AicrBaselineUnreadable",
  "AicrDaemonDown",
  "AicrDaemonVersionSkew",
  "AicrCollectionsFailing",
] as const;

/** The job selector of the default install. */
export const DEFAULT_SCRAPE_JOB = "aicr-daemon";

/**
 * The daemons' alert rules: drift from the cohort's baseline, a baseline that cannot be read, a
 * daemon down, more than one version in one install, and collections that only fail.
 *
 * @param options the scrape job, and a `for` override for tests
 * @returns the rules file
 */
export function daemonAlertRules(options: AlertRuleOptions = {}): RuleFile {
  const job = `job="${options.job ?? DEFAULT_SCRAPE_JOB}"`;
  const rule = (r: AlertRule): AlertRule => ({ ...r, for: options.forOverride ?? r.for });
  const fetchHint = "aicr daemonset fetch -n {{ $labels.namespace }} --node {{ $labels.node }}";
  return {
    groups: [{
      name: "aicr-daemon",
      rules: [
        rule({
          alert: "AicrNodeDrift",
          // One series per node, cohort and measurement type; 0 while the node matches.
          expr: `aicr_drift_readings{${job}} > 0`,
          for: "10m",
          labels: { severity: "warning" },
          annotations: {
            summary:
              "Node {{ $labels.node }} differs from its cohort's baseline in {{ $value }} {{ $labels.measurement }} readings",
            description:
              `The node's snapshot no longer matches the baseline of cohort {{ $labels.cohort }}. See what changed: ${fetchHint} -o node.yaml && aicr daemonset baseline get -n {{ $labels.namespace }} --cohort {{ $labels.cohort }} > base.yaml && aicr diff -b base.yaml --target node.yaml. If the change is intended, set the baseline again (aicr daemonset baseline set --from-node {{ $labels.node }}).`,
          },
        }),
        rule({
          alert: "AicrBaselineUnreadable",
          // ok and missing (no baseline set for the cohort) are not failures; any other state is.
          expr: `aicr_baseline_info{${job},state!~"ok|missing"} == 1`,
          for: "15m",
          labels: { severity: "warning" },
          annotations: {
            summary:
              "Node {{ $labels.node }} cannot read its baseline {{ $labels.configmap }}: {{ $labels.state }}",
            description:
              "Drift is not measured on this node while its cohort's baseline cannot be read or trusted (malformed, wrong-cohort, untrusted: not signed by the install's CA as it is, forbidden: the daemon's Role or RoleBinding changed, unreachable). The daemon's log says why (baseline <state>).",
          },
        }),
        rule({
          alert: "AicrDaemonDown",
          expr: `up{${job}} == 0`,
          for: "5m",
          labels: { severity: "warning" },
          annotations: {
            summary: "The aicr daemon on node {{ $labels.node }} cannot be scraped",
            description:
              "Prometheus cannot scrape {{ $labels.instance }}: the daemon is down or not Ready, or refuses the scrape (Prometheus' ServiceAccount needs get on nodes/metrics; TLS needs the CA of ConfigMap <name>-ca).",
          },
        }),
        rule({
          alert: "AicrDaemonVersionSkew",
          // More than one version among one install's daemons: a rollout stuck half-way, or a
          // pod whose image was changed by hand.
          expr:
            `count by (namespace) (count by (namespace, version) (aicr_build_info{${job}})) > 1`,
          for: "30m",
          labels: { severity: "warning" },
          annotations: {
            summary:
              "aicr daemons in namespace {{ $labels.namespace }} run {{ $value }} different versions",
            description:
              "The daemons of one install run more than one aicr version for 30 minutes: a rolling update is stuck or a pod was changed by hand. See the versions: count by (version) (aicr_build_info).",
          },
        }),
        rule({
          alert: "AicrCollectionsFailing",
          // Failures and no success in the window (a daemon collecting only on request has
          // neither and stays quiet).
          expr:
            `increase(aicr_collections_total{${job},result="failure"}[30m]) > 0 unless ignoring(result) increase(aicr_collections_total{${job},result="success"}[30m]) > 0`,
          for: "15m",
          labels: { severity: "warning" },
          annotations: {
            summary: "The aicr daemon on node {{ $labels.node }} fails every snapshot collection",
            description:
              "Every collection of the last 30 minutes failed; the daemon serves its last good snapshot, if any. Its log and aicr_collector_errors_total{collector} name the collector.",
          },
        }),
      ],
    }],
  };
}

/** One Grafana panel target. */
interface Target {
  expr: string;
  legendFormat?: string;
  refId: string;
  format?: "time_series" | "table";
  instant?: boolean;
}

/** Options of {@link daemonDashboard}. */
export interface DashboardOptions {
  /** The scrape job of the daemons. @default "aicr-daemon" */
  job?: string;
}

/** The dashboard's uid (stable, so an import replaces it). */
export const DASHBOARD_UID = "aicr-daemon";

/**
 * The daemons' Grafana dashboard: drift per node and measurement, baseline states, daemons up,
 * versions, collection durations, request rates and the daemons' memory. One `datasource`
 * variable and a `namespace` variable; no panel plugin beyond Grafana's own.
 *
 * @param options the scrape job
 * @returns the dashboard model (Grafana's JSON)
 */
export function daemonDashboard(options: DashboardOptions = {}): Record<string, unknown> {
  const job = options.job ?? DEFAULT_SCRAPE_JOB;
  return {
    uid: DASHBOARD_UID,
    title: "aicr daemons",
    description: "Drift, baselines, versions and health of the aicr snapshot daemons",
    tags: ["aicr"],
    timezone: "browser",
    schemaVersion: 39,
    version: 1,
    editable: true,
    refresh: "1m",
    time: { from: "now-6h", to: "now" },
    templating: { list: dashboardVariables(job) },
    annotations: { list: [] },
    panels: dashboardPanels(`job="${job}",namespace=~"$namespace"`),
  };
}

const DATASOURCE = { type: "prometheus", uid: "${datasource}" };

/** The dashboard's variables: the data source and the namespaces with daemons. */
function dashboardVariables(job: string): Record<string, unknown>[] {
  const query = `label_values(aicr_build_info{job="${job}"}, namespace)`;
  return [
    {
      name: "datasource",
      label: "Data source",
      type: "datasource",
      query: "prometheus",
      current: {},
      hide: 0,
    },
    {
      name: "namespace",
      label: "Namespace",
      type: "query",
      datasource: DATASOURCE,
      query: { query, refId: "namespace" },
      definition: query,
      includeAll: true,
      multi: true,
      allValue: ".*",
      current: {},
      refresh: 2,
      hide: 0,
    },
  ];
}

/** The panels, each reading the daemons' series narrowed by `sel`. */
function dashboardPanels(sel: string): Record<string, unknown>[] {
  let id = 0;
  const panel = (
    title: string,
    type: "timeseries" | "table" | "stat",
    grid: { x: number; y: number; w: number; h: number },
    targets: Omit<Target, "refId">[],
    extra: Record<string, unknown> = {},
  ) => ({
    id: ++id,
    title,
    type,
    datasource: DATASOURCE,
    gridPos: grid,
    targets: targets.map((t, i) => ({
      datasource: DATASOURCE,
      ...t,
      refId: String.fromCharCode(65 + i),
    })),
    ...extra,
  });
  const unit = (u: string) => ({ fieldConfig: { defaults: { unit: u }, overrides: [] } });
  const table = { format: "table" as const, instant: true };
  return [
    panel("Nodes drifting from their cohort's baseline", "stat", { x: 0, y: 0, w: 6, h: 4 }, [
      { expr: `count(sum by (node) (aicr_drift_readings{${sel}}) > 0) or vector(0)` },
    ]),
    panel("Daemons up", "stat", { x: 6, y: 0, w: 6, h: 4 }, [
      { expr: `sum(up{${sel}})`, legendFormat: "up" },
      { expr: `count(up{${sel}})`, legendFormat: "targets" },
    ]),
    panel("Baselines not readable", "stat", { x: 12, y: 0, w: 6, h: 4 }, [
      { expr: `count(aicr_baseline_info{${sel},state!~"ok|missing"} == 1) or vector(0)` },
    ]),
    panel("Versions running", "stat", { x: 18, y: 0, w: 6, h: 4 }, [
      { expr: `count(count by (version) (aicr_build_info{${sel}}))` },
    ]),
    panel("Drift readings per node and measurement", "timeseries", { x: 0, y: 4, w: 12, h: 8 }, [
      { expr: `aicr_drift_readings{${sel}} > 0`, legendFormat: "{{node}} {{measurement}}" },
    ]),
    panel("Baseline state per node", "table", { x: 12, y: 4, w: 12, h: 8 }, [
      { expr: `aicr_baseline_info{${sel}} == 1`, ...table },
    ]),
    panel("Node facts and versions", "table", { x: 0, y: 12, w: 24, h: 8 }, [
      {
        expr: `aicr_node_info{${sel}} * on (instance) group_left (version) aicr_build_info{${sel}}`,
        ...table,
      },
    ]),
    panel("Collection duration", "timeseries", { x: 0, y: 20, w: 12, h: 8 }, [
      { expr: `aicr_collection_duration_seconds{${sel}}`, legendFormat: "{{node}}" },
    ], unit("s")),
    panel("Requests per second by route", "timeseries", { x: 12, y: 20, w: 12, h: 8 }, [
      {
        expr: `sum by (route, code) (rate(aicr_http_requests_total{${sel}}[5m]))`,
        legendFormat: "{{route}} {{code}}",
      },
    ], unit("reqps")),
    panel("Daemon memory (resident)", "timeseries", { x: 0, y: 28, w: 12, h: 8 }, [
      { expr: `process_resident_memory_bytes{${sel}}`, legendFormat: "{{node}}" },
    ], unit("bytes")),
    panel("Collector errors", "timeseries", { x: 12, y: 28, w: 12, h: 8 }, [
      {
        expr: `sum by (collector) (increase(aicr_collector_errors_total{${sel}}[1h]))`,
        legendFormat: "{{collector}}",
      },
    ]),
  ];
}
