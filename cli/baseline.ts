/**
 * `aicr daemonset baseline set|get|list|delete`: the per-cohort baselines the daemons compare
 * their node with (`aicr_drift_readings`). One ConfigMap per cohort in the daemon's namespace;
 * see `controller/baseline.ts` and `daemon/README.md`.
 *
 * @module
 */
import { Command } from "commander";
import {
  deleteBaselines,
  fetchNodeSnapshot,
  formatBaselineTable,
  getBaseline,
  listBaselines,
  setBaseline,
} from "../controller/mod.ts";
import { UsageError } from "../errors.ts";
import { DEFAULT_DAEMON_NAME, validateDaemonName } from "../manifests/mod.ts";
import { loadSnapshot } from "../snapshot/mod.ts";
import type { Snapshot } from "../snapshot/mod.ts";
import { createFsSourceLoader, createKubeConfigMapReader } from "../controller/mod.ts";
import type { CliDeps } from "./context.ts";
import { checkedNamespace, connect, defineAction } from "./globals.ts";

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
  return defineAction(command, deps, async (flags: SetFlags, { globals, log }) => {
    const namespace = checkedNamespace(globals);
    const name = validateDaemonName(flags.name);
    if ((flags.file === undefined) === (flags.fromNode === undefined)) {
      throw new UsageError(
        "Cannot set a baseline as exactly one of '-f/--file' and '--from-node' must be given",
      );
    }
    // Connected on first use: a bad file is refused before any cluster contact.
    let client: ReturnType<typeof connect> | undefined;
    const kubeClient = () => (client ??= connect(deps, globals));
    let load: () => Promise<Snapshot>;
    let source: string;
    if (flags.file !== undefined) {
      // Bad input is refused before any cluster contact.
      const snapshot = await loadSnapshot(
        flags.file,
        createFsSourceLoader({ readConfigMap: createKubeConfigMapReader(kubeClient) }),
        { cwd: deps.cwd, option: "file" },
      );
      load = () => Promise.resolve(snapshot);
      source = `file ${flags.file}`;
    } else {
      const node = flags.fromNode as string;
      load = () =>
        fetchNodeSnapshot({ kube: kubeClient(), log }, {
          namespace,
          name,
          node,
          signal: deps.signal,
        });
      source = `node ${node}`;
    }
    const record = await setBaseline({ kube: kubeClient(), log, now: deps.now }, {
      namespace,
      name,
      load,
      source,
      fromNode: flags.fromNode !== undefined,
      ...(flags.cohort !== undefined ? { cohort: flags.cohort } : {}),
    });
    deps.stdout.write(formatBaselineTable([record]));
  });
}

function getCommand(deps: CliDeps): Command {
  const command = named(new Command("get"))
    .description("print a cohort's baseline snapshot (YAML)")
    .option("--cohort <name|key>", "the cohort (may be left out when only one has a baseline)");
  return defineAction(command, deps, async (flags: GetFlags, { globals, log }) => {
    const namespace = checkedNamespace(globals);
    const name = validateDaemonName(flags.name);
    const { record, text } = await getBaseline({ kube: connect(deps, globals), log }, {
      namespace,
      name,
      ...(flags.cohort !== undefined ? { cohort: flags.cohort } : {}),
    });
    log.info("baseline", {
      cohort: record.cohort.name,
      key: record.cohort.key,
      source: record.source,
      updated: record.updated,
    });
    deps.stdout.write(text.endsWith("\n") ? text : `${text}\n`);
  });
}

function listCommand(deps: CliDeps): Command {
  const command = named(new Command("list"))
    .description("list the cohorts that have a baseline");
  return defineAction(command, deps, async (flags: GetFlags, { globals, log }) => {
    const records = await listBaselines({ kube: connect(deps, globals), log }, {
      namespace: checkedNamespace(globals),
      name: validateDaemonName(flags.name),
    });
    deps.stdout.write(formatBaselineTable(records));
  });
}

function deleteCommand(deps: CliDeps): Command {
  const command = named(new Command("delete"))
    .description("delete a cohort's baseline (--cohort) or every baseline (--all)")
    .option("--cohort <name|key>", "the cohort whose baseline goes")
    .option("--all", "every baseline of this daemon", false);
  return defineAction(command, deps, async (flags: DeleteFlags, { globals, log }) => {
    const namespace = checkedNamespace(globals);
    const name = validateDaemonName(flags.name);
    if (flags.all === (flags.cohort !== undefined)) {
      throw new UsageError(
        "Cannot delete baselines as exactly one of '--cohort' and '--all' must be given",
      );
    }
    const deleted = await deleteBaselines({ kube: connect(deps, globals), log }, {
      namespace,
      name,
      all: flags.all,
      ...(flags.cohort !== undefined ? { cohort: flags.cohort } : {}),
    });
    deps.stdout.write(formatBaselineTable(deleted));
  });
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
