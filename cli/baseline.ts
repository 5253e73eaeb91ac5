/**
 * `aicr daemonset baseline set|get|list|delete`: the per-cohort baselines the daemons compare
 * their node with (`aicr_drift_readings`). One ConfigMap per cohort in the daemon's namespace;
 * see `controller/baseline.ts` and `daemon/README.md`.
 *
 * @module
 */
import { Command } from "commander";
import {
  runBaselineDelete,
  runBaselineGet,
  runBaselineList,
  runBaselineSet,
} from "../controller/mod.ts";
import type { BaselineRunDeps, BaselineRunScope } from "../controller/mod.ts";
import { UsageError } from "../errors.ts";
import { DEFAULT_DAEMON_NAME, validateDaemonName } from "../manifests/mod.ts";
import type { CliDeps } from "./context.ts";
import { checkedNamespace, clusterDeps, defineAction } from "./globals.ts";
import type { GlobalOptions, VerbContext } from "./globals.ts";

interface SetFlags {
  name: string;
  file?: string;
  fromNode?: string;
  cohort?: string;
}

interface GetFlags {
  name: string;
  cohort?: string;
}

interface DeleteFlags extends GetFlags {
  all: boolean;
}

function named(command: Command): Command {
  return command.option(
    "--name <name>",
    "the daemon's name (its baselines are ConfigMaps <name>-baseline-<cohort key>)",
    DEFAULT_DAEMON_NAME,
  );
}

function setCommand(deps: CliDeps): Command {
  const command = named(new Command("set"))
    .description(
      "store a snapshot as its cohort's baseline (from a file, or fetched from a node's daemon)",
    )
    .option("-f, --file <path>", "the snapshot: a file, - for stdin, or cm://<namespace>/<name>")
    .option("--from-node <node>", "fetch the snapshot from this node's daemon")
    .option(
      "--cohort <name|key>",
      "the cohort it is meant for: refused unless the snapshot belongs to it",
    );
  return defineAction(command, deps, async (flags: SetFlags, context) => {
    const namespace = checkedNamespace(context.globals);
    const name = validateDaemonName(flags.name);
    const from = flags.file !== undefined
      ? { file: flags.file }
      : flags.fromNode !== undefined
      ? { fromNode: flags.fromNode }
      : undefined;
    if (!from || (flags.file !== undefined && flags.fromNode !== undefined)) {
      throw new UsageError(
        "Cannot set a baseline as exactly one of '-f/--file' and '--from-node' must be given",
      );
    }
    await runBaselineSet(baselineDeps(deps, context), {
      namespace,
      name,
      ...from,
      ...(flags.cohort !== undefined ? { cohort: flags.cohort } : {}),
    });
  });
}

function getCommand(deps: CliDeps): Command {
  const command = named(new Command("get"))
    .description("print a cohort's baseline snapshot (YAML)")
    .option("--cohort <name|key>", "the cohort (may be left out when only one has a baseline)");
  return defineAction(command, deps, async (flags: GetFlags, context) => {
    await runBaselineGet(baselineDeps(deps, context), {
      ...scope(flags, context.globals),
      ...(flags.cohort !== undefined ? { cohort: flags.cohort } : {}),
    });
  });
}

function listCommand(deps: CliDeps): Command {
  const command = named(new Command("list"))
    .description("list the cohorts that have a baseline");
  return defineAction(command, deps, async (flags: GetFlags, context) => {
    await runBaselineList(baselineDeps(deps, context), scope(flags, context.globals));
  });
}

function deleteCommand(deps: CliDeps): Command {
  const command = named(new Command("delete"))
    .description("delete a cohort's baseline (--cohort) or every baseline (--all)")
    .option("--cohort <name|key>", "the cohort whose baseline goes")
    .option("--all", "every baseline of this daemon", false);
  return defineAction(command, deps, async (flags: DeleteFlags, context) => {
    const checked = scope(flags, context.globals);
    if (flags.all === (flags.cohort !== undefined)) {
      throw new UsageError(
        "Cannot delete baselines as exactly one of '--cohort' and '--all' must be given",
      );
    }
    await runBaselineDelete(baselineDeps(deps, context), {
      ...checked,
      all: flags.all,
      ...(flags.cohort !== undefined ? { cohort: flags.cohort } : {}),
    });
  });
}

/** The daemon the baselines belong to: the root's namespace and `--name`, checked. */
function scope(flags: { name: string }, globals: GlobalOptions): BaselineRunScope {
  return { namespace: checkedNamespace(globals), name: validateDaemonName(flags.name) };
}

/** The library's dependencies: the cluster the root's flags name, streams, clock. */
function baselineDeps(deps: CliDeps, context: VerbContext): BaselineRunDeps {
  // The baseline verbs create nothing to clean up: a signal ends the request in flight.
  return { ...clusterDeps(deps, context, { interruptible: true }), cwd: deps.cwd };
}

/**
 * The `daemonset baseline` command and its subcommands.
 *
 * @param deps CLI dependencies
 * @returns the command
 */
export function baselineCommand(deps: CliDeps): Command {
  return new Command("baseline")
    .description(
      "per-cohort baselines the daemons compare their node with (aicr_drift_readings)",
    )
    .addCommand(setCommand(deps))
    .addCommand(getCommand(deps))
    .addCommand(listCommand(deps))
    .addCommand(deleteCommand(deps));
}
