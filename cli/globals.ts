/**
 * The flags every verb shares, declared once on the root program and inherited (as kubectl's
 * `--kubeconfig`, `--context` and `-n`): the cluster to talk to, the namespace, and logging. This
 * module is also the one connect path, and the root's pre-action that reads those flags and makes
 * a verb's logger once, before its action ({@link defineAction}).
 *
 * ```ts ignore
 * return defineAction(command, deps, async (flags, context) => {
 *   await runCleanup(clusterDeps(deps, context), cleanupOptions(flags, context.globals));
 * });
 * ```
 *
 * @module
 */
import { Option } from "commander";
import type { Command } from "commander";
import { UsageError } from "../errors.ts";
import { NoKubeconfigError } from "../kube/mod.ts";
import type { KubeClient, KubeConfigSource } from "../kube/mod.ts";
import { type Logger, logLineWriter } from "../log.ts";
import type { ClusterRunDeps } from "../controller/mod.ts";
import { validateNamespace } from "../manifests/mod.ts";
import type { CliDeps } from "./context.ts";
import { randomBytes } from "node:crypto";
import { flagOf, namingFlags, parseRequestTimeout, withFlagNames } from "./_flags.ts";

/** The root's flags, as every command reads them. */
export interface GlobalOptions {
  /** `-k, --kubeconfig`. */
  kubeconfig?: string;
  /** `--context`. */
  context?: string;
  /**
   * `-n, --namespace` (not yet checked; see {@link checkedNamespace}); without it, the current
   * kubeconfig context's namespace (see {@link useContextNamespace}). @default "default"
   */
  namespace: string;
  /** `--debug`. */
  debug: boolean;
  /** `--log-json`. */
  logJson: boolean;
  /** `-q, --quiet`: only errors on stderr (and the result). */
  quiet: boolean;
  /**
   * `--request-timeout`, in milliseconds: how long one API request may take; 0 for no bound.
   * Without it each request keeps its own bound (30 s of silence by default).
   */
  requestTimeoutMs?: number;
}

/** How often each root flag was given on one command line (the root counts them). */
const FLAG_COUNTS = new WeakMap<Command, Map<string, number>>();

/**
 * Declares the root's flags on the program, once; every subcommand inherits them.
 *
 * @param program the root command
 * @returns the same command
 */
export function addGlobalOptions(program: Command): Command {
  program
    .option(
      "-k, --kubeconfig <path>",
      "kubeconfig (default: KUBECONFIG, ~/.kube/config, in-cluster)",
    )
    .option("--context <name>", "kubeconfig context")
    .addOption(
      new Option("-n, --namespace <ns>", "the namespace to work in").default("default").env(
        "AICR_NAMESPACE",
      ),
    )
    .option("--debug", "verbose logs on stderr; passed on to the agent Job (env AICR_DEBUG)", false)
    .option("--log-json", "logs as JSON lines (env AICR_LOG_JSON)", false)
    .option(
      "-q, --quiet",
      "only errors on stderr (and the result): no info or warning lines",
      false,
    )
    .option(
      "--request-timeout <duration>",
      "how long one Kubernetes API request may take, e.g. 30s; 0 for no bound (default: 30s of silence)",
    );
  const counts = new Map<string, number>();
  FLAG_COUNTS.set(program, counts);
  for (const name of ["kubeconfig", "context", "namespace"]) {
    program.on(`option:${name}`, () => counts.set(name, (counts.get(name) ?? 0) + 1));
  }
  return program;
}

function rootOf(command: Command): Command {
  let root = command;
  while (root.parent) root = root.parent;
  return root;
}

/**
 * Reads the root's flags from any command.
 *
 * @param command the running command
 * @returns the global options
 */
export function globalOptions(command: Command): GlobalOptions {
  const opts = command.optsWithGlobals() as Partial<Record<string, unknown>>;
  const text = (value: unknown) => typeof value === "string" ? value : undefined;
  const kubeconfig = text(opts.kubeconfig);
  const context = text(opts.context);
  const requestTimeout = text(opts.requestTimeout);
  const globals: GlobalOptions = {
    ...(kubeconfig !== undefined ? { kubeconfig } : {}),
    ...(context !== undefined ? { context } : {}),
    namespace: text(opts.namespace) ?? "default",
    debug: opts.debug === true,
    logJson: opts.logJson === true,
    quiet: opts.quiet === true,
    ...(requestTimeout !== undefined
      ? { requestTimeoutMs: parseRequestTimeout(requestTimeout) }
      : {}),
  };
  if (globals.quiet && globals.debug) {
    throw new UsageError(
      "Cannot use '--quiet' with '--debug': one drops the lines the other asks for: give one of them",
    );
  }
  return globals;
}

/**
 * The options every API connection takes from the root's flags: `--request-timeout`.
 *
 * @param globals the global options
 * @returns the request bound, when given
 */
export function requestOptions(globals: GlobalOptions): { requestTimeoutMs?: number } {
  return globals.requestTimeoutMs !== undefined
    ? { requestTimeoutMs: globals.requestTimeoutMs }
    : {};
}

/** Verbs that act in a namespace: without `-n`, theirs follows the kubeconfig context. */
const NAMESPACED_VERBS = new Set([
  "snapshot",
  "cleanup",
  "daemonset install",
  "daemonset fetch",
  "daemonset uninstall",
  "daemonset render",
]);

function verbPath(command: Command): string {
  const names: string[] = [];
  for (let c: Command | null = command; c?.parent; c = c.parent) names.unshift(c.name());
  return names.join(" ");
}

/**
 * The namespace default follows kubectl: `--namespace` (or `AICR_NAMESPACE`), else the current
 * kubeconfig context's namespace, else `default`. Registered once on the root; before a
 * namespaced verb runs it reads the kubeconfig (a file, no cluster contact) and, when `-n` was
 * not given and the context names a namespace, puts it in place, saying so on stderr.
 *
 * @param program the root command
 * @param deps CLI dependencies (the kubeconfig reader, the logger)
 */
export function useContextNamespace(program: Command, deps: CliDeps): void {
  program.hook("preAction", async (_root, action) => {
    if (!deps.contextNamespace || !NAMESPACED_VERBS.has(verbPath(action))) return;
    const source = action.getOptionValueSourceWithGlobals("namespace");
    if (source === "cli" || source === "env") return;
    const globals = globalOptions(action);
    const found = await deps.contextNamespace(kubeConfigSource(globals)).catch(() => undefined);
    if (!found?.namespace) return;
    program.setOptionValueWithSource("namespace", found.namespace, "config");
    // Said by the verb's own logger: inside the agent pod that line carries `[agent]` too.
    commandLogger(deps, globals, LOG_OPTIONS.get(action)).info(
      "namespace from the kubeconfig context",
      {
        namespace: found.namespace,
        context: found.context,
      },
    );
  });
}

/** Truthy environment values, as upstream's boolean flags read them. */
const TRUE_VALUES = new Set(["1", "true", "yes", "on"]);

/**
 * `AICR_DEBUG` and `AICR_LOG_JSON` set `--debug` and `--log-json` when the flags are not given
 * (upstream's environment variables; `1`, `true`, `yes` or `on`, any case). Registered once on
 * the root, read before any verb runs.
 *
 * @param program the root command
 * @param deps CLI dependencies (the environment)
 */
export function useLogEnvironment(program: Command, deps: CliDeps): void {
  program.hook("preAction", () => {
    for (const [option, variable] of [["debug", "AICR_DEBUG"], ["logJson", "AICR_LOG_JSON"]]) {
      const key = option as string;
      if (program.getOptionValueSource(key) === "cli") continue;
      const value = deps.env(variable as string)?.trim().toLowerCase();
      if (value !== undefined && TRUE_VALUES.has(value)) {
        program.setOptionValueWithSource(key, true, "env");
      }
    }
  });
}

/**
 * Whether a command line asks for JSON logs (`--log-json` before any `--`, or `AICR_LOG_JSON`),
 * read without parsing it: how a failure to parse it is still said as JSON.
 *
 * @param argv the arguments after the program name
 * @param env environment lookup
 * @returns whether stderr is JSON lines
 */
export function logJsonRequested(
  argv: readonly string[],
  env: (name: string) => string | undefined,
): boolean {
  const end = argv.indexOf("--");
  if ((end < 0 ? argv : argv.slice(0, end)).includes("--log-json")) return true;
  const value = env("AICR_LOG_JSON")?.trim().toLowerCase();
  return value !== undefined && TRUE_VALUES.has(value);
}

/**
 * Refuses a root flag given more than once (upstream `aicr snapshot` rejects duplicates).
 *
 * @param command the running command
 * @param name the flag's long name without dashes
 * @throws {UsageError} when it was given twice or more
 */
export function rejectRepeatedGlobal(command: Command, name: string): void {
  if ((FLAG_COUNTS.get(rootOf(command))?.get(name) ?? 0) > 1) {
    throw new UsageError(`flag --${name} can only be specified once`);
  }
}

/**
 * The namespace, checked: a DNS-1123 label.
 *
 * @param globals the global options
 * @returns the namespace
 * @throws {UsageError} naming `--namespace` when it is not a DNS-1123 label
 */
export function checkedNamespace(globals: GlobalOptions): string {
  return validateNamespace("namespace", globals.namespace);
}

/**
 * The kubeconfig source the global flags name.
 *
 * @param globals the global options
 * @returns `--kubeconfig` and `--context`, when given
 */
export function kubeConfigSource(globals: GlobalOptions): KubeConfigSource {
  return {
    ...(globals.kubeconfig ? { kubeconfig: globals.kubeconfig } : {}),
    ...(globals.context ? { context: globals.context } : {}),
  };
}

/**
 * Connects to the cluster the global flags name: the one connect path of the CLI.
 *
 * @param deps CLI dependencies
 * @param globals the global options
 * @param options `interruptible`: every request ends on SIGINT/SIGTERM (only for a verb that
 *   has nothing to clean up after the signal)
 * @returns the client
 * @throws {NoKubeconfigError} when there is no kubeconfig
 */
export function connect(
  deps: CliDeps,
  globals: GlobalOptions,
  options: { interruptible?: boolean } = {},
): KubeClient {
  let log: Logger | undefined;
  return deps.connectKube(kubeConfigSource(globals), {
    ...requestOptions(globals),
    // A verb with nothing to clean up: SIGINT/SIGTERM cancels the request in flight.
    ...(options.interruptible ? { signal: deps.signal } : {}),
    // Each Warning header of the API server becomes a WARN line naming the object.
    onWarning: (warning, object) => {
      log ??= commandLogger(deps, globals);
      log.warn("the API server warned about a request", { object, warning });
    },
    onConnect: ({ server, protocol }) => {
      log ??= commandLogger(deps, globals);
      log.debug("connected to the API server", { server, protocol });
    },
  });
}

/**
 * Connects when a kubeconfig exists, for commands that can work without a cluster (`aicr agent`
 * on a host, `aicr daemon --insecure-no-auth`).
 *
 * @param deps CLI dependencies
 * @param globals the global options
 * @param log where "no client" is noted (debug)
 * @returns the client, or undefined when there is no kubeconfig
 */
export function connectOptional(
  deps: CliDeps,
  globals: GlobalOptions,
  log: Logger,
): KubeClient | undefined {
  try {
    return connect(deps, globals);
  } catch (error) {
    if (error instanceof NoKubeconfigError) {
      log.debug("no Kubernetes client: K8s and NodeTopology readings will be empty", {
        reason: withFlagNames(error).message,
      });
      return undefined;
    }
    throw error;
  }
}

/**
 * Makes a command's logger from the global flags: the one place a logger is made.
 *
 * @param deps CLI dependencies
 * @param globals the global options
 * @param options a fixed prefix, or the `AICR_LOG_PREFIX` environment variable (agent pods)
 * @returns the logger
 */
export function commandLogger(
  deps: CliDeps,
  globals: GlobalOptions,
  options: { prefix?: string; prefixFromEnv?: boolean } = {},
): Logger {
  const prefix = options.prefix ??
    (options.prefixFromEnv ? deps.env("AICR_LOG_PREFIX") || undefined : undefined);
  return deps.makeLogger({
    debug: globals.debug,
    quiet: globals.quiet,
    json: globals.logJson,
    ...(prefix ? { prefix } : {}),
    nameOption: flagOf,
  });
}

/** What a verb's action receives besides its flags: the root's flags and the one logger. */
export interface VerbContext {
  /** The root's flags, as this command line set them. */
  globals: GlobalOptions;
  /** The command's logger. */
  log: Logger;
}

/** How a verb's logger is made (a fixed prefix, or `AICR_LOG_PREFIX` in agent pods). */
export type VerbLogOptions = { prefix?: string; prefixFromEnv?: boolean };

/** Each running command's context, made once by the root's pre-action. */
const CONTEXTS = new WeakMap<Command, VerbContext>();
/** Each verb's logger options, declared with its action. */
const LOG_OPTIONS = new WeakMap<Command, VerbLogOptions>();
/** Each verb's completion of its flags before its context is made (a config file). */
const COMPLETIONS = new WeakMap<Command, (command: Command) => Promise<void>>();

function makeContext(deps: CliDeps, command: Command): VerbContext {
  const globals = globalOptions(command);
  return { globals, log: commandLogger(deps, globals, LOG_OPTIONS.get(command)) };
}

/**
 * Registered once on the root, after the hooks that fill the root's flags from the environment
 * and the kubeconfig: before the verb runs, its root flags are read and its logger made, once.
 *
 * @param program the root command
 * @param deps CLI dependencies
 */
export function useVerbContext(program: Command, deps: CliDeps): void {
  program.hook("preAction", async (_root, action) => {
    await COMPLETIONS.get(action)?.(action);
    CONTEXTS.set(action, makeContext(deps, action));
  });
}

/** How a verb's context is made: its logger, and what completes its flags first. */
export interface VerbSetup {
  /** How the verb's logger is made. */
  log?: VerbLogOptions;
  /**
   * Completes the flags before the root's flags are read (a config file may set the namespace):
   * runs in the root's pre-action, its errors named as the action's.
   */
  complete?: (command: Command) => Promise<void>;
}

/**
 * Declares a verb's action: the flags commander parsed and the context the root made come in,
 * every error it ends with names flags ({@link namingFlags}). A verb parsed on its own (a test
 * of one command) makes its context at that moment. A verb's positional arguments are the
 * command's `processedArgs`.
 *
 * @param command the verb
 * @param deps CLI dependencies
 * @param action builds the verb's options and makes its one library call
 * @param setup how the verb's logger is made, and what completes its flags first
 * @returns the same command
 */
export function defineAction<F>(
  command: Command,
  deps: CliDeps,
  action: (flags: F, context: VerbContext, command: Command) => unknown,
  setup: VerbSetup = {},
): Command {
  LOG_OPTIONS.set(command, setup.log ?? {});
  const complete = setup.complete;
  if (complete) COMPLETIONS.set(command, namingFlags(complete));
  // Commander passes the positional arguments first, then the flags and the command.
  return command.action(namingFlags(async (...args: unknown[]) => {
    const flags = args.at(-2) as F;
    const cmd = args.at(-1) as Command;
    let context = CONTEXTS.get(cmd);
    if (!context) {
      await COMPLETIONS.get(cmd)?.(cmd);
      CONTEXTS.set(cmd, context = makeContext(deps, cmd));
    }
    return action(flags, context, cmd);
  }));
}

/**
 * What the cluster verbs' library calls need, from the CLI's dependencies and the verb's
 * context: the cluster the root's flags name (connected on first use), streams, clock, signal.
 *
 * @param deps CLI dependencies
 * @param context the root's flags and the logger
 * @param options `interruptible`: SIGINT/SIGTERM ends every request (a verb with nothing to
 *   clean up after the signal: the baseline verbs, `cleanup`, whose re-run sweeps the rest)
 * @returns the verbs' dependencies
 */
export function clusterDeps(
  deps: CliDeps,
  context: VerbContext,
  options: { interruptible?: boolean } = {},
): ClusterRunDeps {
  let kube: ReturnType<typeof connect> | undefined;
  let interruptible: ReturnType<typeof connect> | undefined;
  return {
    connect: () => (kube ??= connect(deps, context.globals, options)),
    // Over the same connection as `connect`'s client where the client can say so.
    connectInterruptible: () => {
      kube ??= connect(deps, context.globals, options);
      if (options.interruptible) return kube;
      return interruptible ??= kube.withSignal?.(deps.signal) ??
        connect(deps, context.globals, { interruptible: true });
    },
    log: context.log,
    stdout: deps.stdout,
    // What the library writes to stderr (a per-node table) follows --log-json and --quiet.
    stderr: logLineWriter(context.log),
    now: deps.now,
    randomHex: () => randomBytes(8).toString("hex"),
    signal: deps.signal,
    nameOption: flagOf,
  };
}
