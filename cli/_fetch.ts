/**
 * The fleet fetch's flags, shared by `aicr daemonset fetch` and `aicr snapshot --from-daemonset`,
 * parsed once into the controller's options.
 *
 * @module
 */
import {
  checkReportTargets,
  DEFAULT_MAX_ANSWER_BYTES,
  FLEET_TRANSPORTS,
  resolveFleetOutput,
} from "../controller/mod.ts";
import type { FleetFetchOptions, FleetTransport } from "../controller/mod.ts";
import { UsageError } from "../errors.ts";
import { DEFAULT_DAEMON_NAME, validateDaemonName } from "../manifests/mod.ts";
import { parseCount, parseTimeout } from "./_flags.ts";
import { redactorFromFlags } from "./_redact.ts";
import type { RedactFlags } from "./_redact.ts";
import { checkOutputNotFormat } from "./_output.ts";
import type { CliDeps } from "./context.ts";
import { checkedNamespace } from "./globals.ts";
import type { GlobalOptions } from "./globals.ts";

/** The fetch flags (`aicr daemonset fetch`, `aicr snapshot --from-daemonset`). */
export interface FleetFetchFlags extends RedactFlags {
  /** `--name`. @default "aicr-daemon" */
  name?: string;
  /** `--output`: a directory, a file or `-`. */
  output?: string;
  /** `--transport`. @default "auto" */
  transport?: string;
  /** `--concurrency`. @default "16" */
  concurrency?: string;
  /** `--timeout` per node. @default "30s" */
  timeout?: string;
  /** `--max-answer-bytes` per node. @default 16 MiB */
  maxAnswerBytes?: string;
  /** `--node` filter. */
  node?: string[];
  /** `--no-topology` (false): no cluster NodeTopology. @default true */
  topology?: boolean;
  /** `--report`: the JSON report's file, or `-`. */
  report?: string;
  /** `--junit`: the JUnit XML report's file, or `-`. */
  junit?: string;
}

/**
 * Completes and validates the fetch flags, before any cluster contact.
 *
 * @param deps CLI dependencies (the working directory)
 * @param globals the root's flags (the namespace)
 * @param input the fetch flags
 * @returns the typed options
 * @throws {UsageError} for a bad flag value
 */
export async function fleetFetchOptions(
  deps: CliDeps,
  globals: GlobalOptions,
  input: FleetFetchFlags,
): Promise<FleetFetchOptions> {
  const flags = {
    name: DEFAULT_DAEMON_NAME,
    transport: "auto",
    concurrency: "16",
    timeout: "30s",
    ...input,
  };
  const namespace = checkedNamespace(globals);
  const name = validateDaemonName(flags.name);
  if (!(FLEET_TRANSPORTS as readonly string[]).includes(flags.transport)) {
    throw new UsageError(
      `Cannot use '--transport' as it must be auto, direct or proxy: current value is '${flags.transport}'`,
    );
  }
  const concurrency = parseCount("--concurrency", flags.concurrency);
  if (concurrency < 1) {
    throw new UsageError(
      `Cannot use '--concurrency' as it must be at least 1: current value is '${flags.concurrency}'`,
    );
  }
  const timeoutMs = parseTimeout(flags.timeout, "--timeout");
  const maxAnswerBytes = parseCount(
    "--max-answer-bytes",
    flags.maxAnswerBytes ?? String(DEFAULT_MAX_ANSWER_BYTES),
  );
  if (maxAnswerBytes < 1024 || maxAnswerBytes > 1 << 30) {
    throw new UsageError(
      `Cannot use '--max-answer-bytes' as it must be from 1024 to 1073741824: current value is '${flags.maxAnswerBytes}'`,
    );
  }
  const redactor = await redactorFromFlags(flags, deps);
  const output = await resolveFleetOutput(checkOutputNotFormat(flags.output), deps.cwd);
  const reports = await checkReportTargets(deps.cwd, flags, {
    ...(output.kind === "stream" && output.path === undefined ? { stdoutTaken: "-o -" } : {}),
  });
  return {
    namespace,
    name,
    transport: flags.transport as FleetTransport,
    concurrency,
    timeoutMs,
    maxAnswerBytes,
    ...(flags.node?.length ? { nodes: flags.node } : {}),
    topology: flags.topology !== false,
    output,
    reports,
    ...(redactor ? { redactor } : {}),
  };
}
