/**
 * aicr: capture, serve and compare what every GPU node really runs.
 *
 * This is the composition root: it reads the arguments and the environment, builds
 * the real dependencies, runs the CLI and sets the exit code. Library users import
 * the public API re-exported below.
 *
 * @module
 */
import process from "node:process";
import { hostname } from "node:os";
import { join } from "node:path";
import { runCli } from "./cli/mod.ts";
import type { CliDeps } from "./cli/mod.ts";
import { verbsFor } from "./cli/commands.ts";
import {
  createClusterReader,
  createCommandRunner,
  createHostReader,
  createSystemdBus,
  SYSTEM_BUS_SOCKET,
  SYSTEMD_PRIVATE_SOCKET,
} from "./collectors/mod.ts";
import { connectKube, readContextNamespace } from "./kube/mod.ts";
import { createLogger, logLevelFor, screenedWriter } from "./log.ts";
import { commandArgs } from "./runtime.ts";
import { fdWriter, outputQueued } from "./stdio.ts";

export * from "./snapshot/mod.ts";
export * from "./errors.ts";
export { buildInfo, defaultImage } from "./version.ts";
export type { BuildInfo } from "./version.ts";
export { runCli } from "./cli/mod.ts";

/**
 * Reads this process's environment. `HOSTNAME` falls back to the kernel's hostname: shells
 * set it without exporting it, so `aicr agent` on a host would otherwise name no node
 * (containers get it exported by their runtime).
 *
 * @param name the variable
 * @returns its value
 */
function processEnv(name: string): string | undefined {
  const value = process.env[name];
  if (value === undefined && name === "HOSTNAME") return hostname();
  return value;
}

/**
 * Builds the real dependencies from this process.
 *
 * @param signal aborted on SIGINT/SIGTERM
 * @returns the CLI dependencies
 */
export function processDeps(signal: AbortSignal): CliDeps {
  const stdout = fdWriter(1, () => process.stdout);
  // `--redact` screens everything said on stderr once the verb has its key.
  const stderr = screenedWriter(fdWriter(2, () => process.stderr));
  return {
    stdout,
    stderr,
    screenStderr: (screen) => stderr.screen(screen),
    env: processEnv,
    cwd: process.cwd(),
    now: () => new Date(),
    // Read when asked, so a run that never asks does not make the stream.
    get stdoutIsTerminal() {
      return Boolean(process.stdout.isTTY);
    },
    get stderrIsTerminal() {
      return Boolean(process.stderr.isTTY);
    },
    signal,
    connectKube: (source, options) => connectKube(source, (name) => process.env[name], options),
    contextNamespace: (source) => readContextNamespace(source, (name) => process.env[name]),
    collectorDeps: ({ kube, log, hostRoot }) => {
      const root = hostRoot ?? "/";
      return {
        host: createHostReader({ root }),
        exec: createCommandRunner(),
        // Connects lazily, so hosts without systemd pay nothing until the collector asks.
        systemd: () =>
          createSystemdBus({
            privateSocket: join(root, SYSTEMD_PRIVATE_SOCKET),
            systemSocket: join(root, SYSTEM_BUS_SOCKET),
          }),
        ...(kube ? { cluster: createClusterReader(kube) } : {}),
        env: processEnv,
        log,
      };
    },
    makeLogger: ({ debug, quiet, json, prefix, nameOption }) =>
      createLogger(stderr, {
        level: logLevelFor({ debug, quiet: quiet === true }),
        json,
        ...(prefix ? { prefix } : {}),
        ...(nameOption ? { nameOption } : {}),
        learnNames: (names) => stderr.learn(names),
      }),
  };
}

/**
 * Runs aicr as a program: arguments in, exit code out, SIGINT/SIGTERM abort the run
 * (which still cleans up) and a second signal is left to the default handler.
 *
 * @returns the exit code
 */
export async function main(): Promise<number> {
  const controller = new AbortController();
  const onSignal = (signal: NodeJS.Signals) => {
    controller.abort(new Error(`received ${signal}`));
    process.off("SIGINT", onSignal);
    process.off("SIGTERM", onSignal);
  };
  process.on("SIGINT", onSignal);
  process.on("SIGTERM", onSignal);
  try {
    return await runCli(commandArgs(), processDeps(controller.signal));
  } finally {
    process.off("SIGINT", onSignal);
    process.off("SIGTERM", onSignal);
  }
}

/**
 * Whether a finished command line may end the process at once, as `process.exit()` does, rather
 * than through Node's teardown (the environment's cleanup, the heap freed region by region: about
 * 1.5 ms of the agent's ~50 ms run, measured as paired runs on a fake 8x H100 node): only
 * `aicr agent`, whose run awaits all it starts (the node agent that every snapshot and every
 * scheduled run waits for), and only when all its output was written (none is queued in a stream).
 *
 * @param args the command line after the executable
 * @param queued whether output is still queued ({@link outputQueued})
 * @returns whether to exit now
 */
export function exitsAtOnce(args: readonly string[], queued: boolean = outputQueued()): boolean {
  const verbs = verbsFor(args);
  return verbs.length === 1 && verbs[0]?.name === "agent" && !queued;
}

if (import.meta.main) {
  const code = await main();
  process.exitCode = code;
  if (exitsAtOnce(commandArgs())) process.exit(code);
}
