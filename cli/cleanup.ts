/**
 * `aicr cleanup --run-id <id>`: removes what a killed `aicr snapshot` left behind. The
 * objects are found by the run's labels and each is deleted pinned to the UID just read
 * (see `controller/sweep.ts`); the staging ConfigMap only once no Job of the run stands.
 * Without `--run-id` it deletes nothing: it lists the runs that left objects (every namespace,
 * or the one `-n` names) and the command that cleans each; exit 0 when none did, 1 when some did.
 *
 * @module
 */
import { Command } from "commander";
import { checkReportTargets, runCleanup, runLeftoverListing } from "../controller/mod.ts";
import type { LeftoverRun } from "../controller/mod.ts";
import { UsageError } from "../errors.ts";
import { isRunId } from "../manifests/mod.ts";
import type { CliDeps } from "./context.ts";
import { checkedNamespace, clusterDeps, defineAction } from "./globals.ts";
import type { GlobalOptions } from "./globals.ts";
import { addReportOptions } from "./_report.ts";

/** Flags of `aicr cleanup`. */
interface CleanupFlags {
  runId?: string;
  dryRun: boolean;
  report?: string;
}

/** `aicr cleanup`'s options, checked: one run to sweep, or the listing of every run. */
type CleanupOptions =
  | { runId: string; namespace: string; dryRun: boolean }
  | { runId?: undefined; namespace?: string; fallbackNamespace: string };

function cleanupOptions(
  flags: CleanupFlags,
  globals: GlobalOptions,
  namespaceGiven: boolean,
): CleanupOptions {
  const namespace = checkedNamespace(globals);
  if (flags.runId === undefined) {
    return namespaceGiven ? { namespace, fallbackNamespace: namespace } : {
      fallbackNamespace: namespace,
    };
  }
  if (!isRunId(flags.runId)) {
    throw new UsageError(
      `Cannot use '--run-id' as it must be <YYYYMMDD-HHMMSS>-<16 hex>: current value is '${flags.runId}'`,
      { details: ["run 'aicr cleanup' without --run-id to list the runs that left objects"] },
    );
  }
  return { runId: flags.runId, namespace, dryRun: flags.dryRun };
}

/** A word as a shell reads it back: bare when safe, else single-quoted. */
function shellWord(word: string): string {
  return /^[\w@%+=:,./-]+$/.test(word) ? word : `'${word.replace(/'/g, `'\\''`)}'`;
}

/** The command that sweeps one listed run, with the cluster flags this command line gave. */
function cleanCommandFor(globals: GlobalOptions): (run: LeftoverRun) => string {
  return (run) =>
    [
      "aicr",
      "cleanup",
      ...(globals.kubeconfig ? ["--kubeconfig", globals.kubeconfig] : []),
      ...(globals.context ? ["--context", globals.context] : []),
      ...(run.namespace ? ["-n", run.namespace] : []),
      "--run-id",
      run.runId,
    ].map(shellWord).join(" ");
}

/**
 * The `cleanup` command.
 *
 * @param deps CLI dependencies
 * @returns the command
 */
export function cleanupCommand(deps: CliDeps): Command {
  const command = new Command("cleanup")
    .description(
      "remove the objects a killed 'aicr snapshot' run left behind, found by its run ID labels and deleted by UID; without --run-id, list the runs that left objects",
    )
    .option(
      "--run-id <id>",
      "the run to clean (the killed run logged runID=...); without it: list every run that left objects (all namespaces, or -n's), delete nothing, exit 1 when some did",
    )
    .option("--dry-run", "only list what would be deleted", false);
  return defineAction(addReportOptions(command), deps, async (flags: CleanupFlags, context) => {
    const source = command.getOptionValueSourceWithGlobals("namespace");
    const options = cleanupOptions(flags, context.globals, source === "cli" || source === "env");
    const reports = await checkReportTargets(deps.cwd, flags);
    if (options.runId === undefined) {
      await runLeftoverListing(clusterDeps(deps, context, { interruptible: true }), {
        ...options,
        cleanCommand: cleanCommandFor(context.globals),
        reports,
      });
      return;
    }
    // Interrupted, a sweep stops where it is (exit 130); running it again removes the rest.
    await runCleanup(clusterDeps(deps, context, { interruptible: true }), { ...options, reports });
  });
}
