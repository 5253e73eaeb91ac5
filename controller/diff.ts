/**
 * `aicr diff`'s run, from checked options: two snapshots compared (`--baseline`, `--target`), or
 * every node of a fleet against its cohort's majority (`--fleet`), read through an injected
 * loader (`sources.ts` for the real one), rendered, written, and the verb's outcome as an error:
 * drift with `failOnDrift`, or a fleet member that could not be read.
 *
 * @module
 */
import { resolve } from "node:path";
import { IncompleteError, InterruptedError, ToolError, UsageError } from "../errors.ts";
import type { TextWriter } from "../log.ts";
import { redactUrl } from "../redact.ts";
import {
  createFleetBuilder,
  diffSnapshots,
  encodeDocument,
  fleetDocument,
  formatTimestamp,
  loadSnapshot,
  readFleet,
  redactSnapshot,
  renderDiff,
  renderDiffHtml,
  renderFleetHtml,
  renderFleetTable,
} from "../snapshot/mod.ts";
import type { FleetSink, Redactor, SnapshotSourceLoader } from "../snapshot/mod.ts";

/** What a diff reads from and writes to. */
export interface DiffDeps {
  /** Reads the sources (and writes `output`). */
  loader: SnapshotSourceLoader;
  /** Standard output. */
  stdout: TextWriter;
  /** The working directory relative sources and the output are named from. */
  cwd: string;
  /** Clock (the HTML report's subtitle). */
  now: () => Date;
  /** SIGINT/SIGTERM: a fleet's read stops between two files, and before the report is made. */
  signal?: AbortSignal;
}

/** The output formats of a diff. */
export type DiffFormat = "table" | "yaml" | "json" | "html";

/** One diff's options, checked. */
export interface DiffOptions {
  /** The two sources compared, or undefined for a fleet. */
  pair?: { baseline: string; target: string };
  /** The fleet's sources (directories, streams or files); empty for a pair. */
  fleet: readonly string[];
  /** Drift is an error (exit 1, after the output is written). */
  failOnDrift: boolean;
  /** How the result is written. */
  format: DiffFormat;
  /** Where it is written: a file, or stdout when undefined or `-`. */
  output?: string;
  /** Reading paths left out (patterns). */
  ignore: readonly string[];
  /** Fleet HTML: every reading, not only differing ones. */
  allReadings: boolean;
  /** Fleet cohort keys (empty: the default cohort). */
  groupBy: readonly string[];
  /** Colour the table. */
  color: boolean;
  /** `--redact`: both snapshots redacted before they are compared; a fleet's report after. */
  redactor?: Redactor;
}

/**
 * Runs one diff: reads, compares, writes the result, then says how it ended.
 *
 * @param deps the loader, stdout, working directory and clock
 * @param options the checked options
 * @returns when there was no drift (or drift without `failOnDrift`)
 * @throws {ToolError} with code `drift` on drift with `failOnDrift`
 * @throws {IncompleteError} when a fleet member could not be read (the rest is compared)
 * @throws {UsageError} for unreadable or invalid sources, and an output that cannot be written
 */
export async function runDiff(deps: DiffDeps, options: DiffOptions): Promise<void> {
  const write = async (text: string) => {
    const output = options.output;
    if (output === undefined || output === "-") {
      deps.stdout.write(text);
      return;
    }
    try {
      await deps.loader.writeFile(resolve(deps.cwd, output), text);
    } catch (error) {
      // Already named (the path, or an interrupt while a pipe is unread).
      if (error instanceof ToolError) throw error;
      throw new UsageError(
        `Cannot write '${output}': ${error instanceof Error ? error.message : error}`,
        { cause: error },
      );
    }
  };
  if (options.pair) await diffPair(deps, { ...options, pair: options.pair }, write);
  else await diffFleet(deps, options, write);
}

/** Every node against its cohort's majority. */
async function diffFleet(
  deps: DiffDeps,
  options: DiffOptions,
  write: (text: string) => Promise<void>,
): Promise<void> {
  const { fleet } = options;
  const builder = createFleetBuilder({
    ignore: [...options.ignore],
    allReadings: options.allReadings,
    groupBy: [...options.groupBy],
  });
  // One snapshot at a time: the builder keeps each node's interned configuration (a few KiB),
  // never the parsed snapshots, so 10,000 nodes fit where 10,000 snapshots would not.
  // A directory's files in our own layout go straight into the builder, without a snapshot.
  // A file or document that cannot be read is an unreadable node of the report (exit 9 after the
  // output), and the rest is compared.
  const { redactor } = options;
  await readFleet(fleet, deps.loader, {
    cwd: deps.cwd,
    option: "fleet",
    ...(deps.signal ? { signal: deps.signal } : {}),
  }, redactor ? redactingSink(builder, redactor) : builder);
  throwIfInterrupted(deps.signal);
  const report = builder.finish();
  throwIfInterrupted(deps.signal);
  const format = options.format;
  // The members are redacted already (the report's nodes are tokens); what is left is what the
  // report adds: its sources.
  const redact = (text: string) => redactor ? redactor.text(text) : text;
  await write(redact(
    format === "html"
      ? renderFleetHtml(report, {
        allReadings: options.allReadings,
        subtitle: `${fleet.map(redactUrl).join(", ")} · ${formatTimestamp(deps.now())}`,
      })
      : format === "table"
      ? renderFleetTable(report, { color: options.color })
      : encodeDocument(fleetDocument(report), format),
  ));
  if (report.unreadable.length > 0) {
    throw new IncompleteError(
      `Cannot compare every snapshot of the fleet: ${report.unreadable.length} of ${
        report.unreadable.length + report.summary.nodes
      } could not be read (the report compares the others)`,
      {
        details: [
          ...report.unreadable.slice(0, 10).map((u) => redact(`  ${u.source}: ${u.reason}`)),
          ...(report.unreadable.length > 10
            ? [`  ... and ${report.unreadable.length - 10} more (listed in the report)`]
            : []),
        ],
      },
    );
  }
  if (options.failOnDrift && report.outliers.length > 0) {
    throw new ToolError(
      `drift detected: ${report.outliers.length} outlier node(s) found`,
      "drift",
    );
  }
}

/** The baseline against the target. */
async function diffPair(
  deps: DiffDeps,
  options: DiffOptions & { pair: { baseline: string; target: string } },
  write: (text: string) => Promise<void>,
): Promise<void> {
  const { cwd } = deps;
  const { baseline: baselineSource, target: targetSource } = options.pair;
  const loaded = await Promise.all([
    loadSnapshot(baselineSource, deps.loader, { cwd, option: "baseline" }),
    loadSnapshot(targetSource, deps.loader, { cwd, option: "target" }),
  ]);
  const { redactor } = options;
  const [baseline, target] = redactor
    ? [redactSnapshot(loaded[0], redactor), redactSnapshot(loaded[1], redactor)] as const
    : loaded;
  // The report names its sources as messages do: no URL credentials or query values, and with
  // --redact no name either (`fleet/<node>.yaml`), in the tokens of the snapshots' names.
  const source = (text: string) => redactor ? redactor.text(redactUrl(text)) : redactUrl(text);
  const result = diffSnapshots(baseline, target, {
    baselineSource: source(baselineSource),
    targetSource: source(targetSource),
    ignore: [...options.ignore],
  });
  const format = options.format;
  await write(
    format === "html"
      ? renderDiffHtml(result, { subtitle: formatTimestamp(deps.now()) })
      : renderDiff(result, format, { color: options.color }),
  );
  if (options.failOnDrift && result.summary.total > 0) {
    throw new ToolError(`drift detected: ${result.summary.total} change(s) found`, "drift");
  }
}

/**
 * A fleet sink that redacts each member before the builder sees it (so cohorts, outliers and
 * readings are made of tokens, as they would be from redacted snapshots), and each unreadable
 * member's name and source: a file's name is its node's. Members are parsed (no `addYaml`): the
 * builder's fast path would read the names it must not see.
 */
function redactingSink(sink: FleetSink, redactor: Redactor): FleetSink {
  return {
    add(member) {
      redactor.learn([member.node]);
      const snapshot = redactSnapshot(member.snapshot, redactor);
      sink.add({ node: redactor.text(member.node), snapshot });
    },
    ...(sink.unreadable
      ? {
        unreadable: (entry) => {
          redactor.learn([entry.node]);
          sink.unreadable?.({
            node: redactor.text(entry.node),
            source: redactor.text(entry.source),
            reason: redactor.text(entry.reason),
          });
        },
      }
      : {}),
  };
}

/** After a step the signal may have cut short: the interrupt (exit 130), nothing written. */
function throwIfInterrupted(signal: AbortSignal | undefined): void {
  if (signal?.aborted) {
    throw new InterruptedError(`Cannot compare the fleet: interrupted (${String(signal.reason)})`);
  }
}
