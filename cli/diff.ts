/**
 * `aicr diff`: drift between two snapshots, or across a fleet.
 *
 * ```text
 * aicr diff --baseline A --target B [--fail-on-drift] [-t table|yaml|json|html] [-o FILE]
 * aicr diff --fleet SRC... [--group-by KEY]... [--fail-on-drift] [-t table|yaml|json|html] [-o FILE]
 * ```
 *
 * A source is a file, `-` (stdin) or `cm://namespace/name`; a fleet source may also be a
 * directory of snapshot files or a stream of many (YAML `---` documents, a JSON array or
 * JSON lines). Exit codes as `kubectl diff`: 0 no drift (or drift without
 * `--fail-on-drift`), 1 drift with `--fail-on-drift`, above 1 for errors.
 *
 * @module
 */
import { addRedactFlags, redactorFromFlags } from "./_redact.ts";
import type { RedactFlags } from "./_redact.ts";
import { Command, Option } from "commander";
import { resolve } from "node:path";
import { UsageError } from "../errors.ts";
import { checkOutputFile } from "../io.ts";
import {
  DEFAULT_IGNORE_PATTERNS,
  FLEET_FORMATS,
  FLEET_IDENTITY_IGNORE_PATTERNS,
  GPU_MODEL_PATH,
  GROUP_BY_NONE,
  INSTANCE_TYPE_LABELS,
  isMeasurementType,
  MEASUREMENT_TYPES,
  NODE_POOL_LABELS,
} from "../snapshot/mod.ts";
import { createFsSourceLoader, createKubeConfigMapReader, runDiff } from "../controller/mod.ts";
import type { DiffFormat, DiffOptions } from "../controller/mod.ts";
import type { SnapshotSourceLoader } from "../snapshot/mod.ts";
import type { CliDeps } from "./context.ts";
import { globalOptions, kubeConfigSource, requestOptions } from "./globals.ts";
import type { GlobalOptions } from "./globals.ts";
import { checkOutputNotFormat } from "./_output.ts";
import type { KubeConfigSource } from "../kube/mod.ts";
import { namingFlags } from "./_flags.ts";

/**
 * Dependencies of `aicr diff`: the parts of {@link CliDeps} it uses, plus where snapshots
 * are read from.
 */
export interface DiffDeps extends
  Pick<
    CliDeps,
    "stdout" | "stderr" | "env" | "cwd" | "now" | "stdoutIsTerminal" | "screenStderr"
  > {
  /** Connects to a cluster, for `cm://` sources (only when one is given). */
  connectKube?: CliDeps["connectKube"];
  /** SIGINT/SIGTERM: a long fleet comparison stops, and so does a write into a pipe. */
  signal?: AbortSignal;
  /**
   * Makes the snapshot loader (files, stdin, ConfigMaps), replacing the default one
   * (node:fs, the process's stdin, ConfigMaps through {@link DiffDeps.connectKube}).
   */
  snapshotSources?: (options: KubeConfigSource) => SnapshotSourceLoader;
}

interface DiffFlags extends RedactFlags {
  baseline?: string;
  target?: string;
  fleet?: string[];
  failOnDrift: boolean;
  format: string;
  output?: string;
  ignore: string[];
  defaultIgnores: boolean;
  allReadings: boolean;
  groupBy: string[];
}

const HELP_AFTER = `
Sources: a file, '-' (stdin) or 'cm://namespace/name' (reads data.format, default yaml,
then snapshot.<format>, falling back to snapshot.yaml/.json). --fleet also takes a
directory (its *.yaml, *.yml, *.json files) or a stream of many snapshots (YAML '---'
documents, a JSON array, or JSON lines, e.g. the DaemonSet fleet fetch).

Comparison: measurement -> subtype -> key, by path '<Type>.<subtype>.<key>'. metadata
(timestamp, version, node) never counts; subtype context (status, source) is not a
reading, and status changes are listed apart. Readings the schema types as strings
(grub, sysctl, release, K8s, GPU smi except gpu-count) compare as text, so 5128 equals
"5128"; ints (gpu-count, topology counts) and bools (kmod) by meaning; everything else
(SystemD's D-Bus typed values) by type and value. NodeTopology node lists compare as sets.

Fleet: nodes are first split into cohorts of nodes that should be alike, and each node
is compared with the majority of its cohort only. The default cohort is the GPU model and
count (${GPU_MODEL_PATH}, GPU.smi.gpu-count), plus, when the NodeTopology readings carry
them, the instance type (${INSTANCE_TYPE_LABELS.join(", ")}) and node pool
(${NODE_POOL_LABELS.join(", ")}). --group-by KEY (repeatable) replaces it: a reading path
('${GPU_MODEL_PATH}') or a node label ('node.kubernetes.io/instance-type'); a key no snapshot
has is an error. --group-by ${GROUP_BY_NONE} compares the whole fleet as one cohort. A cohort of
one node has nothing to compare with and is reported as such, not as drift.
Within a cohort, nodes are grouped by identical configuration per measurement type; the
largest group is the reference (ties: the group of the first node by name) and every other
node is an outlier, listed with the readings where it differs. Identity readings are always
left out in a fleet: ${FLEET_IDENTITY_IGNORE_PATTERNS.join(", ")}.

--ignore PATTERN (repeatable) leaves out paths; '*' matches any characters, '?' one.
Default ignores (volatile readings; turn off with --no-default-ignores):
${DEFAULT_IGNORE_PATTERNS.map((p) => `  ${p}`).join("\n")}

Exit codes: 0 no drift, or drift without --fail-on-drift; 1 drift with --fail-on-drift
(after the output is written); 2 invalid input (flags, malformed or invalid snapshot,
over the size cap, alias bomb); 3 a file or ConfigMap not found, or no kubeconfig for a
cm:// source; 4 reading the ConfigMap is forbidden; 6 Kubernetes unavailable; 9 (--fleet)
some snapshots could not be read or compared (corrupt, invalid or over the 16 MiB cap): they
are listed as unreadable in the report, which compares every other node, and the exit comes
after the output is written.
`;

function collect(value: string, previous: string[]): string[] {
  return [...previous, value];
}

/**
 * The `diff` command.
 *
 * @param deps injected streams, environment and snapshot loader
 * @returns the command
 */
export function diffCommand(deps: DiffDeps): Command {
  return addRedactFlags(new Command("diff"))
    .description("compare two snapshots, or a fleet of them, and report drift")
    .option(
      "-b, --baseline <source>",
      "the reference snapshot: a file, -, cm://<namespace>/<name> or an http(s):// URL (TLS verified, 30 s)",
    )
    .option("--target <source>", "the snapshot checked against the baseline (same forms)")
    .option("--fleet <sources...>", "compare many snapshots: directories, streams or files")
    .option("--fail-on-drift", "exit 1 when drift is found", false)
    .addOption(
      new Option("-t, --format <format>", "output format").choices([...FLEET_FORMATS]).default(
        "table",
      ),
    )
    .option("-o, --output <file>", "write to a file instead of stdout")
    .option("--ignore <pattern>", "leave out readings whose path matches (repeatable)", collect, [])
    .option("--no-default-ignores", "also compare the volatile readings ignored by default")
    .option("--all-readings", "fleet html: show every reading, not only differing ones", false)
    .option(
      "--group-by <key>",
      `fleet cohort key, repeatable: a reading path or node label; '${GROUP_BY_NONE}' for one cohort`,
      collect,
      [],
    )
    .addHelpText("after", HELP_AFTER)
    .action(namingFlags(async (flags: DiffFlags, cmd: Command) => {
      // The root's --kubeconfig and --context name the cluster of cm:// sources.
      const { loader, options } = diffOptions(deps, flags, globalOptions(cmd));
      const redactor = await redactorFromFlags(flags, deps);
      // Checked before anything is read: a path that cannot be written fails now (exit 2), not
      // after a long comparison.
      if (options.output !== undefined && options.output !== "-") {
        await checkOutputFile(resolve(deps.cwd, options.output), {
          what: "",
          createFolders: false,
        });
      }
      await runDiff({
        loader,
        stdout: deps.stdout,
        cwd: deps.cwd,
        now: deps.now,
        ...(deps.signal ? { signal: deps.signal } : {}),
      }, redactor ? { ...options, redactor } : options);
    }));
}

/** Validates the combination of flags before anything is read (exit 2 on a bad one). */
function validateDiffFlags(flags: DiffFlags): void {
  const fleet = flags.fleet ?? [];
  const pair = flags.baseline !== undefined || flags.target !== undefined;
  if (fleet.length > 0 && pair) {
    throw new UsageError(
      "Cannot compare snapshots: use either '--baseline' with '--target', or '--fleet'",
    );
  }
  if (fleet.length === 0) {
    if (flags.baseline === undefined) {
      throw new UsageError("Cannot compare snapshots: '--baseline' is required (or use '--fleet')");
    }
    if (flags.target === undefined) {
      throw new UsageError("Cannot compare snapshots: '--target' is required");
    }
    if (flags.baseline === "-" && flags.target === "-") {
      throw new UsageError(
        "Cannot compare snapshots: only one of '--baseline' and '--target' can be '-'",
      );
    }
    if (flags.allReadings) {
      throw new UsageError(
        "Cannot use '--all-readings' without '--fleet': it is a fleet html option",
      );
    }
    if (flags.groupBy.length > 0) {
      throw new UsageError(
        "Cannot use '--group-by' without '--fleet': cohorts are a fleet option",
      );
    }
  }
  checkOutputNotFormat(flags.output, { formats: FLEET_FORMATS });
  if (flags.output?.startsWith("cm://")) {
    throw new UsageError(
      `Cannot write diff to '${flags.output}': output goes to a file or stdout, not a ConfigMap`,
    );
  }
}

/**
 * Completes the diff's options from its flags (checked first: exit 2 before anything is read)
 * and builds its loader: the injected one, or the real readers with ConfigMaps through the
 * cluster the root's flags name, connected only when a `cm://` source is read.
 */
function diffOptions(deps: DiffDeps, flags: DiffFlags, globals: GlobalOptions): {
  loader: SnapshotSourceLoader;
  options: DiffOptions;
} {
  validateDiffFlags(flags);
  for (const pattern of flags.ignore) validateIgnore(pattern);
  const connect = deps.connectKube;
  const kubeconfig = kubeConfigSource(globals);
  const loader = deps.snapshotSources ? deps.snapshotSources(kubeconfig) : createFsSourceLoader({
    // A read only: SIGINT/SIGTERM ends the ConfigMap requests at once.
    ...(connect
      ? {
        readConfigMap: createKubeConfigMapReader(() =>
          connect(kubeconfig, {
            ...requestOptions(globals),
            ...(deps.signal ? { signal: deps.signal } : {}),
          })
        ),
      }
      : {}),
    ...(deps.signal ? { signal: deps.signal } : {}),
  });
  const fleet = flags.fleet ?? [];
  return {
    loader,
    options: {
      ...(fleet.length === 0
        ? { pair: { baseline: flags.baseline as string, target: flags.target as string } }
        : {}),
      fleet,
      failOnDrift: flags.failOnDrift,
      format: flags.format as DiffFormat,
      ...(flags.output !== undefined ? { output: flags.output } : {}),
      ignore: [...(flags.defaultIgnores ? DEFAULT_IGNORE_PATTERNS : []), ...flags.ignore],
      allReadings: flags.allReadings,
      groupBy: flags.groupBy,
      color: flags.output === undefined && deps.stdoutIsTerminal &&
        deps.env("NO_COLOR") === undefined,
    },
  };
}

function validateIgnore(pattern: string): void {
  const head = pattern.split(".")[0] ?? "";
  if (head.includes("*") || head.includes("?") || isMeasurementType(head)) return;
  throw new UsageError(
    `Cannot use '--ignore' pattern '${pattern}': a path starts with a measurement type (${
      MEASUREMENT_TYPES.join(", ")
    }) or a wildcard`,
  );
}
