/**
 * The reliability suite's figures: each case appends one JSON line to
 * `$AICR_RELIABILITY_REPORT` (default `<repo>/.cluster-runs/reliability.jsonl`), and
 * {@link summarize} folds them into the totals `deno task reliability:summary` prints.
 * A case that runs again replaces its earlier line (the latest per `key` counts).
 *
 * @module
 */
import { appendFileSync, existsSync, mkdirSync, readFileSync } from "node:fs";
import { dirname } from "node:path";
import { fileURLToPath } from "node:url";

/** The figures of one case. */
export interface Figures {
  /** Faults the proxy (or a test's own hand) injected. */
  faultsInjected?: number;
  /** Of those, faults the run survived (clean end: success, or a clear failure and no debris). */
  faultsSurvived?: number;
  /** Concurrent runs held against one namespace. */
  concurrentRuns?: number;
  /** Bad inputs tried. */
  badInputs?: number;
  /**
   * Of those, handled as specified: refused with a clear message, a non-zero exit and
   * the cluster unchanged, or (hostile node input) degraded to the documented reading.
   */
  badInputsRefused?: number;
  /** Objects left behind by the case's runs. */
  leftovers?: number;
  /** Permissions the agent held beyond the spec's rules. */
  overGrants?: number;
  /** Access questions asked to prove least privilege. */
  accessReviews?: number;
  /** Real control-plane components killed (SIGKILL) and started again mid-run. */
  realRestarts?: number;
  /**
   * Attempts to speak for another node or reuse another node's credentials (DaemonSet mode:
   * a rogue server with another node's certificate, a replayed reader token, a certificate
   * request from another identity or naming another node).
   */
  identityAttacks?: number;
  /** Of those, refused: the fetch marked the node, the daemon said 401, nothing was signed. */
  identityAttacksRefused?: number;
}

/** One line of the report. */
export interface ReportLine extends Figures {
  /** `file: case`, unique per case. */
  key: string;
  /** When. */
  at: string;
}

/** Where the report goes. */
export function reportPath(): string {
  return Deno.env.get("AICR_RELIABILITY_REPORT") ??
    fileURLToPath(new URL("../../.cluster-runs/reliability.jsonl", import.meta.url));
}

/**
 * Appends one case's figures.
 *
 * @param key `file: case`
 * @param figures the figures
 */
export function record(key: string, figures: Figures): void {
  const path = reportPath();
  mkdirSync(dirname(path), { recursive: true });
  const line: ReportLine = { key, at: new Date().toISOString(), ...figures };
  appendFileSync(path, JSON.stringify(line) + "\n");
}

/** Totals over the latest line of every case. */
export interface Totals extends Required<Figures> {
  /** Cases reported. */
  cases: number;
}

/**
 * Folds report lines into totals (the latest line per key counts).
 *
 * @param text the JSON-lines report
 * @returns the totals
 */
export function summarize(text: string): Totals {
  const latest = new Map<string, ReportLine>();
  for (const raw of text.split("\n")) {
    if (!raw.trim()) continue;
    try {
      const line = JSON.parse(raw) as ReportLine;
      if (typeof line.key === "string") latest.set(line.key, line);
    } catch {
      // A torn line from an interrupted run: skip it.
    }
  }
  const totals: Totals = {
    cases: latest.size,
    faultsInjected: 0,
    faultsSurvived: 0,
    concurrentRuns: 0,
    badInputs: 0,
    badInputsRefused: 0,
    leftovers: 0,
    overGrants: 0,
    accessReviews: 0,
    realRestarts: 0,
    identityAttacks: 0,
    identityAttacksRefused: 0,
  };
  for (const line of latest.values()) {
    for (const k of Object.keys(totals) as (keyof Totals)[]) {
      if (k === "cases") continue;
      totals[k] += Number(line[k] ?? 0);
    }
  }
  return totals;
}

/**
 * Reads the report file and renders the totals as text.
 *
 * @param path the report file
 * @returns the summary text
 */
export function summaryText(path: string = reportPath()): string {
  const totals = summarize(existsSync(path) ? readFileSync(path, "utf8") : "");
  return [
    `reliability summary (${totals.cases} cases, ${path})`,
    `  faults injected:        ${totals.faultsInjected}`,
    `  faults survived:        ${totals.faultsSurvived}`,
    `  concurrent runs held:   ${totals.concurrentRuns}`,
    `  bad inputs tried:       ${totals.badInputs} (handled as specified: ${totals.badInputsRefused})`,
    `  access reviews asked:   ${totals.accessReviews}`,
    `  real restarts:          ${totals.realRestarts} (kube-apiserver or etcd killed -9 mid-run)`,
    `  identity attacks tried: ${totals.identityAttacks} (refused: ${totals.identityAttacksRefused})`,
    `  objects left behind:    ${totals.leftovers} (goal: 0)`,
    `  over-grants found:      ${totals.overGrants} (goal: 0)`,
  ].join("\n");
}
