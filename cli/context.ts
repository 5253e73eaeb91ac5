/**
 * What every command receives: streams, environment, clock, cancellation and the
 * factories for real dependencies (built in the root `mod.ts`, faked in tests).
 *
 * @module
 */
import type { CollectorDeps } from "../collectors/mod.ts";
import type { ConnectionInfo, KubeClient, KubeConfigSource } from "../kube/mod.ts";
import type { OptionNamer } from "../errors.ts";
import type { Logger, TextScreen, TextWriter } from "../log.ts";

/** Dependencies of the CLI, injected by the composition root. */
export interface CliDeps {
  /** Standard output: documents only. */
  stdout: TextWriter;
  /** Standard error: logs, progress, errors. */
  stderr: TextWriter;
  /**
   * `--redact`: from now on every text on stderr (the logger's lines too) passes through the
   * screen. Absent where stderr is not screened (tests that read it whole).
   */
  screenStderr?: (screen: TextScreen) => void;
  /** Environment lookup. */
  env: (name: string) => string | undefined;
  /** Working directory for relative paths. */
  cwd: string;
  /** Clock. */
  now: () => Date;
  /** Whether stdout is a terminal (colour, progress). */
  stdoutIsTerminal: boolean;
  /** Whether stderr is a terminal (progress lines). */
  stderrIsTerminal: boolean;
  /** Aborted on SIGINT/SIGTERM. */
  signal: AbortSignal;
  /**
   * Makes the logger for a run (level and format come from global flags; `nameOption` names
   * the options the library's lines mention by their flags).
   */
  makeLogger: (
    options: {
      debug: boolean;
      /** `--quiet`: errors only. */
      quiet?: boolean;
      json: boolean;
      prefix?: string;
      nameOption?: OptionNamer;
    },
  ) => Logger;
  /** Connects to a cluster. @throws {NoKubeconfigError} when there is no kubeconfig */
  connectKube: (
    source: KubeConfigSource,
    options?: {
      onWarning?: (warning: string, object: string) => void;
      /** Ends every request that carries no signal of its own (SIGINT/SIGTERM). */
      signal?: AbortSignal;
      /** `--request-timeout` in milliseconds (0: no bound). */
      requestTimeoutMs?: number;
      /** Told each new connection to the API server and its protocol. */
      onConnect?: (info: ConnectionInfo) => void;
    },
  ) => KubeClient;
  /**
   * Reads the kubeconfig (no cluster contact) for its current context and that context's
   * namespace: the namespace a verb uses when `-n` is not given, as kubectl does.
   */
  contextNamespace?: (
    source: KubeConfigSource,
  ) => Promise<{ context: string; namespace: string | undefined }>;
  /** Builds the collectors' readers (host files, processes, systemd, the cluster). */
  collectorDeps: (options: { kube?: KubeClient; log: Logger; hostRoot?: string }) => CollectorDeps;
}
