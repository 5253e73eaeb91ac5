/**
 * `aicr daemonset baseline set|get|list|delete` run from checked options: where `set` reads its
 * snapshot (a file, stdin or `cm://`, read before any cluster contact; or a node's daemon), and
 * what each prints. The rules themselves are `baseline.ts`.
 *
 * @module
 */
import type { Snapshot } from "../snapshot/mod.ts";
import { loadSnapshot } from "../snapshot/mod.ts";
import {
  deleteBaselines,
  fetchNodeSnapshot,
  formatBaselineTable,
  getBaseline,
  listBaselines,
  setBaseline,
} from "./baseline.ts";
import type { ClusterRunDeps } from "./daemonset.ts";
import { createFsSourceLoader, createKubeConfigMapReader } from "./sources.ts";

/** What the baseline verbs need: the cluster (connected on first use), streams, clock. */
export type BaselineRunDeps =
  & Pick<ClusterRunDeps, "connect" | "log" | "stdout" | "now" | "signal">
  & { cwd: string };

/** Which daemon's baselines: its namespace and name, both checked. */
export interface BaselineRunScope {
  /** The daemon's namespace. */
  namespace: string;
  /** The daemon's name. */
  name: string;
}

/** Where `set` takes its snapshot from: exactly one of a source and a node. */
export type BaselineSetOptions = BaselineRunScope & {
  /** The cohort it is meant for, by name or key. */
  cohort?: string;
} & ({ file: string; fromNode?: undefined } | { fromNode: string; file?: undefined });

/**
 * Stores a snapshot as its cohort's baseline and prints the stored record. A file (or stdin, or
 * a `cm://` source) is read and checked before any other cluster contact.
 *
 * @param deps cluster, logger, stdout, clock, signal, working directory
 * @param options the daemon, the source or node, the cohort named
 * @returns when it is stored and printed
 */
export async function runBaselineSet(
  deps: BaselineRunDeps,
  options: BaselineSetOptions,
): Promise<void> {
  const { namespace, name, log } = { ...options, log: deps.log };
  let client: ReturnType<typeof deps.connect> | undefined;
  const kube = () => (client ??= deps.connect());
  let load: () => Promise<Snapshot>;
  let source: string;
  if (options.file !== undefined) {
    // Bad input is refused before any cluster contact.
    const snapshot = await loadSnapshot(
      options.file,
      createFsSourceLoader({ readConfigMap: createKubeConfigMapReader(kube) }),
      { cwd: deps.cwd, option: "file" },
    );
    load = () => Promise.resolve(snapshot);
    source = `file ${options.file}`;
  } else {
    const node = options.fromNode;
    load = () =>
      fetchNodeSnapshot({ kube: kube(), log }, { namespace, name, node, signal: deps.signal });
    source = `node ${node}`;
  }
  const record = await setBaseline({ kube: kube(), log, now: deps.now }, {
    namespace,
    name,
    load,
    source,
    fromNode: options.fromNode !== undefined,
    ...(options.cohort !== undefined ? { cohort: options.cohort } : {}),
  });
  deps.stdout.write(formatBaselineTable([record]));
}

/**
 * Prints a cohort's baseline snapshot (YAML on stdout, its record logged).
 *
 * @param deps cluster, logger, stdout
 * @param options the daemon and the cohort (may be left out when only one has a baseline)
 * @returns when it is printed
 */
export async function runBaselineGet(
  deps: BaselineRunDeps,
  options: BaselineRunScope & { cohort?: string },
): Promise<void> {
  const { record, text } = await getBaseline({ kube: deps.connect(), log: deps.log }, options);
  deps.log.info("baseline", {
    cohort: record.cohort.name,
    key: record.cohort.key,
    source: record.source,
    updated: record.updated,
  });
  deps.stdout.write(text.endsWith("\n") ? text : `${text}\n`);
}

/**
 * Prints the cohorts that have a baseline.
 *
 * @param deps cluster, logger, stdout
 * @param options the daemon
 * @returns when the table is printed
 */
export async function runBaselineList(
  deps: BaselineRunDeps,
  options: BaselineRunScope,
): Promise<void> {
  const records = await listBaselines({ kube: deps.connect(), log: deps.log }, options);
  deps.stdout.write(formatBaselineTable(records));
}

/**
 * Deletes one cohort's baseline or all of them, and prints what went.
 *
 * @param deps cluster, logger, stdout
 * @param options the daemon, and the cohort or `all`
 * @returns when the table of the deleted is printed
 */
export async function runBaselineDelete(
  deps: BaselineRunDeps,
  options: BaselineRunScope & { all: boolean; cohort?: string },
): Promise<void> {
  const deleted = await deleteBaselines({ kube: deps.connect(), log: deps.log }, options);
  deps.stdout.write(formatBaselineTable(deleted));
}
