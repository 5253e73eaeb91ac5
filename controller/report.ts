/**
 * Machine-readable results of the verbs that act on many nodes or objects (`daemonset fetch`,
 * `install`, `uninstall`, `cleanup`): one JSON document per run with one entry per node and per
 * object and its status, so a CI job reads `.nodes[] | select(.status != "ok")` instead of
 * scraping stderr; and JUnit XML (one test case per node) for CI systems that show test reports.
 * Pure: results in, documents out; the CLI decides where they go.
 *
 * @module
 */
import { exitCodeOf } from "../errors.ts";
import type { SweptObject } from "../kube/mod.ts";
import type { FleetResult } from "./fleet.ts";
import type { InstallResult } from "./install.ts";
import type { UninstallResult } from "./uninstall.ts";

/** The report's kind: which verb wrote it. */
export type ReportKind =
  | "DaemonSetFetchReport"
  | "DaemonSetInstallReport"
  | "DaemonSetUninstallReport"
  | "CleanupReport";

/** One node's entry. */
export interface NodeEntry {
  /** The node. */
  node: string;
  /** What happened: `ok`, `not-ready`, `unreachable`, `denied`, `timed-out`, `too-large`, `wrong-identity`, `wrong-build` (fetch); `ready`, `not-ready` (install). */
  status: string;
  /** The pod that served it, when there is one. */
  pod?: string;
  /** Why, when not ok. */
  detail?: string;
  /** How it was reached (fetch). */
  transport?: string;
  /** How long it took, in seconds (fetch). */
  seconds?: number;
}

/** One object's entry. */
export interface ObjectEntry {
  /** Its kind. */
  kind: string;
  /** Its namespace, for namespaced kinds. */
  namespace?: string;
  /** Its name. */
  name: string;
  /** Its UID (what deletes were pinned to). */
  uid?: string;
  /** `created` (install), `deleted`, `gone`, `kept`, `failed`, `found` (dry run), `remaining`. */
  status: string;
  /** Why, for `kept` and `failed`. */
  detail?: string;
}

/** What a verb's result contributes to its report. */
export interface ReportContent {
  /** One entry per node (fetch, install). */
  nodes: NodeEntry[];
  /** One entry per object (install, uninstall, cleanup). */
  objects: ObjectEntry[];
  /** The run ID, when the verb has one. */
  runId?: string;
}

/** One verb's report. */
export interface Report {
  /** Always `aicr.run/v1`. */
  apiVersion: "aicr.run/v1";
  /** Which verb. */
  kind: ReportKind;
  /** Where and when. */
  metadata: {
    /** The namespace acted in. */
    namespace: string;
    /** The daemon's name (DaemonSet verbs). */
    name?: string;
    /** The run ID (install, cleanup). */
    runId?: string;
    /** When the verb started (RFC 3339). */
    startedAt: string;
    /** When it finished. */
    finishedAt: string;
    /** How long it took. */
    seconds: number;
  };
  /** The outcome as the exit code says it. */
  result: {
    /** `ok` exactly when the exit code is 0. */
    status: "ok" | "failed";
    /** The process's exit code. */
    exitCode: number;
    /** The error line, when failed. */
    error?: string;
    /** Counts per status, nodes and objects apart (`nodes.ok`, `objects.deleted`, ...). */
    counts: Record<string, number>;
  };
  /** One entry per node. */
  nodes: NodeEntry[];
  /** One entry per object. */
  objects: ObjectEntry[];
}

/**
 * The nodes of a fleet fetch, one entry each, and the cluster's NodeTopology when the fetch
 * listed it (one object of kind `NodeTopology`, name `cluster`: `ok` or why not).
 *
 * @param fleet the fetch result
 * @returns the report content
 */
export function fleetReportContent(fleet: FleetResult): ReportContent {
  const topology = fleet.topology;
  return {
    nodes: fleet.results.map((r) => ({
      node: r.node,
      status: r.status,
      ...(r.pod ? { pod: r.pod } : {}),
      ...(r.error ? { detail: r.error } : {}),
      ...(r.transport ? { transport: r.transport } : {}),
      seconds: Math.round(r.durationMs) / 1000,
    })),
    objects: topology
      ? [{
        kind: "NodeTopology",
        name: "cluster",
        status: topology.status,
        detail: topology.status === "ok"
          ? `${topology.nodes} nodes, listed as the ${topology.as}`
          : topology.message ?? topology.status,
      }]
      : [],
  };
}

/**
 * An install's created objects and its targeted nodes' pods.
 *
 * @param result the install result
 * @returns the report content
 */
export function installReportContent(result: InstallResult): ReportContent {
  return {
    runId: result.runId,
    objects: result.created.map((e) => ({
      kind: e.kind,
      ...(e.namespace ? { namespace: e.namespace } : {}),
      name: e.name,
      ...(e.uid ? { uid: e.uid } : {}),
      status: "created",
    })),
    nodes: result.pods.map((p) => ({
      node: p.node,
      status: p.ready ? "ready" : "not-ready",
      pod: p.pod,
      ...(p.ready ? {} : { detail: p.unschedulable ?? p.detail ?? "" }),
    })),
  };
}

function sweptEntries(swept: readonly SweptObject[]): ObjectEntry[] {
  return swept.map((o) => ({
    kind: o.kind,
    ...(o.namespace ? { namespace: o.namespace } : {}),
    name: o.name,
    uid: o.uid,
    status: o.result,
    ...(o.detail ? { detail: o.detail } : {}),
  }));
}

/**
 * An uninstall's swept objects, and what remained at the end.
 *
 * @param result the uninstall result
 * @returns the report content
 */
export function uninstallReportContent(result: UninstallResult): ReportContent {
  return {
    nodes: [],
    objects: [
      ...sweptEntries(result.swept),
      ...result.remaining.map((ref) => {
        const [kind = "", name = ""] = ref.split("/");
        return { kind, name, status: "remaining" };
      }),
    ],
  };
}

/**
 * A cleanup's swept objects.
 *
 * @param swept what the sweep found and did
 * @param runId the run it cleaned
 * @returns the report content
 */
export function cleanupReportContent(swept: readonly SweptObject[], runId: string): ReportContent {
  return { runId, nodes: [], objects: sweptEntries(swept) };
}

/** Options of {@link buildReport}. */
export interface BuildReportOptions {
  /** Which verb. */
  kind: ReportKind;
  /** The namespace. */
  namespace: string;
  /** The daemon's name. */
  name?: string;
  /** When the verb started. */
  startedAt: Date;
  /** When it finished. */
  finishedAt: Date;
  /** What the result holds (empty when the verb failed before it had one). */
  content: ReportContent;
  /** The error the verb ends with, if any. */
  failure?: unknown;
}

function count(values: readonly string[], prefix: string): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const value of values) {
    counts[`${prefix}.${value}`] = (counts[`${prefix}.${value}`] ?? 0) + 1;
  }
  return counts;
}

/**
 * Builds one verb's report: its entries, counts, timing and the exit code it ends with.
 *
 * @param options verb, namespace, timing, content, failure
 * @returns the report
 */
export function buildReport(options: BuildReportOptions): Report {
  const { content, failure } = options;
  const exitCode = failure === undefined ? 0 : exitCodeOf(failure);
  const runId = content.runId;
  return {
    apiVersion: "aicr.run/v1",
    kind: options.kind,
    metadata: {
      namespace: options.namespace,
      ...(options.name ? { name: options.name } : {}),
      ...(runId ? { runId } : {}),
      startedAt: options.startedAt.toISOString(),
      finishedAt: options.finishedAt.toISOString(),
      seconds: Math.round(options.finishedAt.getTime() - options.startedAt.getTime()) / 1000,
    },
    result: {
      status: exitCode === 0 ? "ok" : "failed",
      exitCode,
      ...(failure !== undefined
        ? { error: failure instanceof Error ? failure.message : String(failure) }
        : {}),
      counts: {
        ...count(content.nodes.map((n) => n.status), "nodes"),
        ...count(content.objects.map((o) => o.status), "objects"),
      },
    },
    nodes: content.nodes,
    objects: content.objects,
  };
}

/**
 * The report as JSON text (two-space indent, one trailing newline).
 *
 * @param report the report
 * @returns the text
 */
export function formatReportJson(report: Report): string {
  return JSON.stringify(report, null, 2) + "\n";
}

function xml(text: string): string {
  return text.replace(
    /[&<>"']/g,
    (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&apos;" })[c] ?? c,
  )
    // XML 1.0 forbids most control characters, even escaped.
    // deno-lint-ignore no-control-regex
    .replace(/[\u0000-\u0008\u000b\u000c\u000e-\u001f]/g, "");
}

/**
 * The report as JUnit XML: one test suite, one test case per node (`ok` and `ready` pass, any
 * other status fails with the status as its type and the detail as its message). A verb that
 * failed before it reached any node gets one failing case named after the verb.
 *
 * @param report the report
 * @returns the XML text
 */
export function formatReportJunit(report: Report): string {
  const suite = `aicr ${report.kind.replace(/Report$/, "")}`;
  const cases = report.nodes.map((n) => ({
    name: n.node,
    seconds: n.seconds ?? 0,
    failure: n.status === "ok" || n.status === "ready"
      ? undefined
      : { type: n.status, message: n.detail ?? n.status },
  }));
  if (cases.length === 0 && report.result.status === "failed") {
    cases.push({
      name: report.kind,
      seconds: report.metadata.seconds,
      failure: { type: `exit-${report.result.exitCode}`, message: report.result.error ?? "" },
    });
  }
  const failures = cases.filter((c) => c.failure).length;
  const lines = [
    `<?xml version="1.0" encoding="UTF-8"?>`,
    `<testsuites name="aicr" tests="${cases.length}" failures="${failures}" time="${report.metadata.seconds}">`,
    `  <testsuite name="${
      xml(suite)
    }" tests="${cases.length}" failures="${failures}" errors="0" time="${report.metadata.seconds}" timestamp="${report.metadata.startedAt}">`,
    ...cases.map((c) =>
      c.failure
        ? `    <testcase classname="${xml(report.metadata.namespace)}" name="${
          xml(c.name)
        }" time="${c.seconds}">\n      <failure type="${xml(c.failure.type)}" message="${
          xml(c.failure.message)
        }"/>\n    </testcase>`
        : `    <testcase classname="${xml(report.metadata.namespace)}" name="${
          xml(c.name)
        }" time="${c.seconds}"/>`
    ),
    `  </testsuite>`,
    `</testsuites>`,
  ];
  return lines.join("\n") + "\n";
}
