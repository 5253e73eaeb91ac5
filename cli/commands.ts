/**
 * The verbs the CLI registers, in help order, each loaded only when a command line needs it: a
 * command line that names one verb (`aicr agent ...`) evaluates that verb's code alone, so the agent
 * and the daemon never evaluate the Kubernetes controller, Hono or the diff code they do not use;
 * root help and unknown verbs load them all. The binary also holds a bundle of `aicr agent` alone
 * (`scripts/build.ts`, defining `__AICR_AGENT_ONLY__`), whose registry is that one verb: no other
 * verb's code is in it at all, so an agent's start compiles less.
 *
 * @module
 */
import type { Command } from "commander";
import type { CliDeps } from "./context.ts";

/** A verb's factory. */
export type CommandFactory = (deps: CliDeps) => Command;

/** A verb: its name and how to load its factory. */
export interface Verb {
  /** The verb as typed (`snapshot`). */
  name: string;
  /** Loads the verb's module and returns its factory. */
  load: () => Promise<CommandFactory>;
}

declare global {
  /** True in the agent's own bundle (an esbuild define): its registry is `agent` alone. */
  var __AICR_AGENT_ONLY__: boolean | undefined;
}

/** `aicr agent`. */
const AGENT_VERB: Verb = {
  name: "agent",
  load: async () => (await import("./agent.ts")).agentCommand,
};

/**
 * Every verb, in help order; in the agent's own bundle, `agent` alone (the define makes the other
 * branch dead code, so the bundler leaves the other verbs' modules out).
 */
export const VERBS: readonly Verb[] = globalThis.__AICR_AGENT_ONLY__ ? [AGENT_VERB] : [
  { name: "snapshot", load: async () => (await import("./snapshot.ts")).snapshotCommand },
  AGENT_VERB,
  { name: "cleanup", load: async () => (await import("./cleanup.ts")).cleanupCommand },
  { name: "diff", load: async () => (await import("./diff.ts")).diffCommand },
  { name: "daemon", load: async () => (await import("./daemon.ts")).daemonCommand },
  { name: "daemonset", load: async () => (await import("./daemonset.ts")).daemonsetCommand },
  { name: "image", load: async () => (await import("./image.ts")).imageCommand },
  { name: "version", load: async () => (await import("./version.ts")).versionCommand },
];

/** Root flags that take a value as the next word (see `globals.ts`). */
const ROOT_FLAGS_WITH_VALUE = new Set(["-k", "--kubeconfig", "--context", "-n", "--namespace"]);

/**
 * The verbs a command line needs: the one it names, or every verb when it names none that is known
 * (root help, `help <verb>`, a typo that commander answers with its suggestions).
 *
 * @param argv arguments after the program name
 * @returns the verbs to register, in help order
 */
export function verbsFor(argv: readonly string[]): readonly Verb[] {
  for (let i = 0; i < argv.length; i++) {
    const word = argv[i] ?? "";
    if (word === "--") break;
    if (word.startsWith("-")) {
      if (ROOT_FLAGS_WITH_VALUE.has(word)) i++;
      continue;
    }
    // The completion scripts' hidden verb needs no other verb (a shell waits on it).
    if (word === "__complete") return [];
    const verb = VERBS.find((v) => v.name === word);
    return verb ? [verb] : VERBS;
  }
  return VERBS;
}
