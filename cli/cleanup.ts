/**
 * `aicr cleanup --run-id <id>`: removes what a killed `aicr snapshot` left behind. The
 * objects are found by the run's labels and each is deleted pinned to the UID just read
 * (see `controller/sweep.ts`); the staging ConfigMap only once no Job of the run stands.
 *
 * @module
 */
import { Command } from "commander";
import { cleanupReportContent, sweepRun } from "../controller/mod.ts";
import { ToolError, UsageError } from "../errors.ts";
import { isRunId } from "../manifests/mod.ts";
import type { CliDeps } from "./context.ts";
import { checkedNamespace, commandLogger, connect, globalOptions } from "./globals.ts";
import type { GlobalOptions } from "./globals.ts";
import { addReportOptions, reportTargets, runReported } from "./_report.ts";
import { namingFlags } from "./_flags.ts";

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
  return addReportOptions(command)
    .action(namingFlags(async (flags: CleanupFlags, cmd: Command) => {
      const globals = globalOptions(cmd);
      const log = commandLogger(deps, globals);
      const { runId, namespace, dryRun } = cleanupOptions(flags, globals);
      const targets = await reportTargets(deps, flags);
      await runReported(deps, targets, { kind: "CleanupReport", namespace }, async () => {
        const swept = await sweepRun({ kube: connect(deps, globals), log }, {
          runId,
          namespace,
          dryRun,
        });
        for (const o of swept) {
          log.info(o.result === "found" ? "would delete" : o.result, {
            kind: o.kind,
            name: o.namespace ? `${o.namespace}/${o.name}` : o.name,
            uid: o.uid,
            ...(o.detail ? { detail: o.detail } : {}),
          });
        }
        const content = cleanupReportContent(swept, runId);
        const left = swept.filter((o) => o.result === "kept" || o.result === "failed");
        if (left.length > 0) {
          return {
            content,
            failure: new ToolError(
              `Cannot finish the cleanup of run ${runId}: ${left.length} object(s) left behind (see the WARN lines above)`,
              "internal",
            ),
          };
        }
        log.info(swept.length === 0 ? "cleanup: nothing of the run was found" : "cleanup: done", {
          runID: runId,
          namespace,
          deleted: swept.filter((o) => o.result === "deleted").length,
          ...(dryRun ? { dryRun: "true" } : {}),
        });
        return { content };
      });
    }));
}
