/**
 * The CLI's dependencies for unit tests: streams captured as text, no cluster (a connect is
 * counted and fails), no collectors, a fixed clock.
 *
 * @module
 */
import type { CliDeps } from "../../cli/context.ts";
import { createLogger, logLevelFor } from "../../log.ts";

/** The fake and what it captured. */
export interface FakeCli {
  /** The dependencies to pass to `runCli`. */
  deps: CliDeps;
  /** Standard output so far. */
  stdout(): string;
  /** Standard error (and the logs) so far. */
  stderr(): string;
  /** How often a command tried to connect to a cluster. */
  connects(): number;
}

/**
 * Makes the fake.
 *
 * @param overrides dependencies to replace (a working directory, a kubeconfig reader, ...)
 * @returns the dependencies and their captures
 */
export function fakeCli(overrides: Partial<CliDeps> = {}): FakeCli {
  let out = "";
  let err = "";
  let connects = 0;
  const deps: CliDeps = {
    stdout: { write: (text) => void (out += text) },
    stderr: { write: (text) => void (err += text) },
    env: () => undefined,
    cwd: "/",
    now: () => new Date("2026-12-02T18:00:00Z"),
    stdoutIsTerminal: false,
    stderrIsTerminal: false,
    signal: new AbortController().signal,
    makeLogger: ({ debug, quiet, json, nameOption }) =>
      createLogger({ write: (text) => void (err += text) }, {
        level: logLevelFor({ debug, quiet: quiet === true }),
        json,
        now: () => new Date("2026-12-02T18:00:00Z"),
        ...(nameOption ? { nameOption } : {}),
      }),
    connectKube: () => {
      connects++;
      throw new Error("the cluster must not be contacted");
    },
    collectorDeps: () => {
      throw new Error("no collectors here");
    },
    ...overrides,
  };
  return { deps, stdout: () => out, stderr: () => err, connects: () => connects };
}
