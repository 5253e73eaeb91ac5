/**
 * `--redact` and its key, for every verb that writes snapshots (`snapshot`, `agent`,
 * `daemonset fetch`, `diff`). The key is read from `--redact-key-file <path>` or, without it,
 * from `AICR_REDACT_KEY`; there is no default key: a key made up per run would give other
 * tokens each run (no diff across redacted snapshots), and a fixed one would let anyone hash
 * guesses (every IPv4 address) back to names.
 *
 * @module
 */
import { readFile } from "node:fs/promises";
import { resolve } from "node:path";
import type { Command } from "commander";
import { UsageError } from "../errors.ts";
import { createRedactor } from "../snapshot/mod.ts";
import type { Redactor } from "../snapshot/mod.ts";
import type { CliDeps } from "./context.ts";

/** The `--redact` flags. */
export interface RedactFlags {
  /** `--redact`. */
  redact?: boolean;
  /** `--redact-key-file`. */
  redactKeyFile?: string;
}

/** The environment variable that holds the key when no key file is named. */
export const REDACT_KEY_ENV = "AICR_REDACT_KEY";

/**
 * Adds `--redact` and `--redact-key-file` to a command.
 *
 * @param command the command
 * @returns the same command
 */
export function addRedactFlags(command: Command): Command {
  return command
    .option(
      "--redact",
      `replace hostnames, node names, IPs and registry hosts by keyed tokens (key: --redact-key-file or ${REDACT_KEY_ENV})`,
    )
    .option("--redact-key-file <path>", "the --redact key (at least 16 bytes; kept secret)");
}

/**
 * The redactor the flags ask for, its key read; none without `--redact`.
 *
 * @param flags the verb's flags
 * @param deps the environment and working directory
 * @returns the redactor, or undefined
 * @throws {UsageError} when `--redact` has no key, or the key is unreadable or too short
 */
export async function redactorFromFlags(
  flags: RedactFlags,
  deps: Pick<CliDeps, "env" | "cwd" | "screenStderr">,
): Promise<Redactor | undefined> {
  if (!flags.redact) {
    if (flags.redactKeyFile !== undefined) {
      throw new UsageError("Cannot use '--redact-key-file' without '--redact': add '--redact'");
    }
    return undefined;
  }
  let key: string | Uint8Array | undefined = deps.env(REDACT_KEY_ENV);
  if (flags.redactKeyFile !== undefined) {
    const path = resolve(deps.cwd, flags.redactKeyFile);
    try {
      key = new Uint8Array(await readFile(path));
    } catch (error) {
      throw new UsageError(
        `Cannot read '--redact-key-file' '${flags.redactKeyFile}': ${(error as Error).message}`,
        { cause: error },
      );
    }
  }
  if (key === undefined || key.length === 0) {
    throw new UsageError(
      `Cannot use '--redact' without a key: pass '--redact-key-file <path>' or set ${REDACT_KEY_ENV}`,
      {
        details: [
          "  keep one key for every snapshot you want to compare: the same key gives the same tokens",
          "  make one with: head -c 32 /dev/urandom | base64 > aicr-redact.key",
        ],
      },
    );
  }
  let redactor: Redactor;
  try {
    redactor = createRedactor(key);
  } catch (error) {
    throw new UsageError(`Cannot use the '--redact' key: ${(error as Error).message}`);
  }
  // What is shared may be the log too: stderr names nothing the snapshot hides, in the same
  // tokens (the names each snapshot and log line teaches the redactor).
  deps.screenStderr?.(redactor);
  return redactor;
}
