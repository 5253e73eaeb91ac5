/**
 * `aicr cleanup --run-id <id>`: removes what a killed `aicr snapshot` left behind. The
 * objects are found by the run's labels and each is deleted pinned to the UID just read
 * (see `controller/sweep.ts`); the staging ConfigMap only once no Job of the run stands.
 *
 * @module
 */
import { Command } from "commander";
import { checkReportTargets, runCleanup } from "../controller/mod.ts";
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

/** `aicr cleanup`'s options, checked. */
interface CleanupOptions {
  runId: string;
  namespace: string;
  dryRun: boolean;
}

function cleanupOptions(flags: CleanupFlags, globals: GlobalOptions): CleanupOptions {
  const runId = flags.runId ?? "";
  if (!isRunId(runId)) {
    throw new UsageError(
      `Cannot use '--run-id' as it must be <YYYYMMDD-HHMMSS>-<16 hex>: current value is '${runId}'`,
    );
  }
  return { runId, namespace: checkedNamespace(globals), dryRun: flags.dryRun };
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
      "remove the objects a killed 'aicr snapshot' run left behind, found by its run ID labels and deleted by UID",
    )
    .requiredOption(
      "--run-id <id>",
      "the run ID the killed run logged (snapshot agent run: runID=...)",
    )
    .option("--dry-run", "only list what would be deleted", false);
  return defineAction(addReportOptions(command), deps, async (flags: CleanupFlags, context) => {
    const { runId, namespace, dryRun } = cleanupOptions(flags, context.globals);
    // Interrupted, a sweep stops where it is (exit 130); running it again removes the rest.
    await runCleanup(clusterDeps(deps, context, { interruptible: true }), {
      runId,
      namespace,
      dryRun,
      reports: await checkReportTargets(deps.cwd, flags),
    });
  });
}
