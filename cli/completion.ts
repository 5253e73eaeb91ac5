/**
 * `aicr completion bash|zsh|fish`: shell completion for every verb, its flags and the values of
 * the flags that take a fixed set (`--os`, `-t/--format`, `--transport`, `--privileged`, ...).
 * The scripts are generated from the commander program itself, so a new flag completes without
 * anyone editing a script. zsh loads the bash script through `bashcompinit`, as kubectl's own
 * zsh completion once did; fish gets native `complete` lines.
 *
 * @module
 */
import { Command } from "commander";
import type { Option } from "commander";
import { UsageError } from "../errors.ts";
import { NODE_OS_FAMILIES } from "../manifests/mod.ts";
import { namespaceNames } from "../kube/mod.ts";
import type { CliDeps } from "./context.ts";
import { connect, globalOptions } from "./globals.ts";

/** The shells `aicr completion` writes for. */
export const COMPLETION_SHELLS = ["bash", "zsh", "fish"] as const;

/** One flag, as completion needs it. */
export interface FlagSpec {
  /** `-t`, when it has one. */
  short?: string;
  /** `--format`. */
  long: string;
  /** Whether it takes a value. */
  takesValue: boolean;
  /** The values it takes, when they are a fixed set. */
  values?: readonly string[];
  /** What its value names, when completion can offer it: files, folders, the cluster's namespaces. */
  valueKind?: ValueKind;
  /** Its help line. */
  description: string;
}

/** What a flag's value names, for completion. */
export type ValueKind = "file" | "dir" | "namespace";

/**
 * Flag value names (`<path>`, `<dir|file|->`, ...) that name a file or a folder, and those that
 * name a namespace: the one rule that says which flags complete files and which namespaces.
 */
const VALUE_KINDS: Readonly<Record<string, ValueKind>> = {
  "path": "file",
  "file": "file",
  "file|-": "file",
  "dir|file|-": "file",
  "source": "file",
  "sources...": "file",
  "target": "file",
  "dir": "dir",
  "ns": "namespace",
  "namespace": "namespace",
};

/** The hidden verb the completion scripts call for values from the cluster. */
export const COMPLETE_VERB = "__complete";

/** How long `__complete namespaces` waits for the API server: a shell is waiting. */
const NAMESPACES_TIMEOUT_MS = 2000;

/** What the shell scripts give the whole call, the binary's start and the kubeconfig's included. */
const SHELL_TIMEOUT_SECONDS = 3;

/** One verb (or the root), as completion needs it. */
export interface VerbSpec {
  /** The words that name it (`["daemonset", "fetch"]`; `[]` for the root). */
  path: string[];
  /** Its help line. */
  description: string;
  /** Its own flags. */
  flags: FlagSpec[];
  /** Its subcommands' names. */
  subcommands: string[];
}

/**
 * Values of flags that take a fixed set but do not declare it to commander (keyed by
 * `<verb path> <long flag>`, or the long flag alone for every verb).
 */
const VALUE_HINTS: Readonly<Record<string, readonly string[]>> = {
  "--os": NODE_OS_FAMILIES,
  "--privileged": ["true", "false"],
  "--transport": ["auto", "direct", "proxy"],
  "snapshot --format": ["yaml", "json", "table"],
  "agent --format": ["yaml", "json", "table"],
  "version --format": ["text", "json"],
};

function flagSpec(option: Option, path: string[]): FlagSpec | undefined {
  if (!option.long || option.hidden) return undefined;
  const takesValue = option.required || option.optional;
  const values = option.argChoices ??
    VALUE_HINTS[`${path.join(" ")} ${option.long}`] ?? VALUE_HINTS[option.long];
  const argument = /[<[]([^>\]]+)[>\]]/.exec(option.flags)?.[1] ?? "";
  const valueKind = takesValue && !values ? VALUE_KINDS[argument] : undefined;
  return {
    ...(option.short ? { short: option.short } : {}),
    long: option.long,
    takesValue,
    ...(takesValue && values ? { values } : {}),
    ...(valueKind ? { valueKind } : {}),
    description: option.description,
  };
}

/**
 * Reads every verb, flag and fixed value from a program.
 *
 * @param program the root command with every verb registered
 * @returns the root first, then every verb depth-first
 */
export function describeProgram(program: Command): VerbSpec[] {
  const out: VerbSpec[] = [];
  const visit = (command: Command, path: string[]) => {
    const visible = command.commands.filter((c) => c.name() !== COMPLETE_VERB);
    out.push({
      path,
      description: command.description(),
      flags: command.options.flatMap((o) => flagSpec(o, path) ?? []),
      subcommands: visible.map((c) => c.name()),
    });
    for (const sub of visible) visit(sub, [...path, sub.name()]);
  };
  visit(program, []);
  return out;
}

function words(spec: VerbSpec): string[] {
  return [
    ...spec.subcommands,
    ...spec.flags.flatMap((f) => [f.long, ...(f.short ? [f.short] : [])]),
    "--help",
  ];
}

function quote(text: string): string {
  return `'${text.replace(/'/g, `'\\''`)}'`;
}

/** Every spelling of the flags that match, across the program (`--namespace`, `-n`, ...). */
function flagWords(verbs: readonly VerbSpec[], match: (flag: FlagSpec) => boolean): string[] {
  return [
    ...new Set(
      verbs.flatMap((v) => v.flags).filter(match)
        .flatMap((f) => [f.long, ...(f.short ? [f.short] : [])]),
    ),
  ];
}

/**
 * The bash function that prints the cluster's namespaces: the binary's hidden verb with the
 * command line's `--kubeconfig` and `--context`, bounded by `timeout` where it exists, stderr
 * and stdin closed, so a slow or unreachable cluster never holds the shell and says nothing.
 */
function bashNamespaces(): string[] {
  return [
    "_aicr_namespaces() {",
    `  local args=(${COMPLETE_VERB} namespaces)`,
    '  [[ -n "$1" ]] && args+=(--kubeconfig "${1/#\\~/$HOME}")',
    '  [[ -n "$2" ]] && args+=(--context "$2")',
    "  if command -v timeout >/dev/null 2>&1; then",
    `    timeout -k 1 ${SHELL_TIMEOUT_SECONDS} "\${COMP_WORDS[0]}" "\${args[@]}" 2>/dev/null </dev/null`,
    "  else",
    '    "${COMP_WORDS[0]}" "${args[@]}" 2>/dev/null </dev/null',
    "  fi",
    "}",
  ];
}

/**
 * The bash completion script (zsh runs it through `bashcompinit`): verbs and flags by where the
 * command line is; after a flag that takes a value, only that value (its fixed set, the cluster's
 * namespaces, files or folders, or nothing), never a verb or a flag.
 *
 * @param verbs the program's verbs (root first)
 * @returns the script
 */
export function bashCompletion(verbs: readonly VerbSpec[]): string {
  const root = verbs[0];
  const globals = root?.flags ?? [];
  const globalWords = globals.flatMap((f) => [f.long, ...(f.short ? [f.short] : [])]);
  const paths = verbs.filter((v) => v.path.length > 0).map((v) => `/${v.path.join("/")}`);
  const valueCases = verbs.flatMap((v) =>
    [...v.flags, ...(v.path.length > 0 ? globals : [])].flatMap((f) => {
      const values = f.values;
      return values
        ? [f.long, ...(f.short ? [f.short] : [])].map((flag) =>
          `    ${quote(`/${v.path.join("/")}|${flag}`)}) values=${quote(values.join(" "))} ;;`
        )
        : [];
    })
  );
  const wordCases = verbs.map((v) =>
    `    ${quote(`/${v.path.join("/")}`)}) words=${
      quote([...words(v), ...(v.path.length > 0 ? globalWords : [])].join(" "))
    } ;;`
  );
  const among = (flags: string[]) => `case " ${flags.join(" ")} " in *" $prev "*)`;
  return [
    "# bash completion for aicr (generated by 'aicr completion bash')",
    ...bashNamespaces(),
    "_aicr_complete() {",
    '  local cur="${COMP_WORDS[COMP_CWORD]}" prev="${COMP_WORDS[COMP_CWORD-1]}"',
    '  local path="" w i words="" values="" kubeconfig="" context=""',
    "  for ((i = 1; i < COMP_CWORD; i++)); do",
    '    w="${COMP_WORDS[i]}"',
    '    case "$w" in',
    '      -k|--kubeconfig) kubeconfig="${COMP_WORDS[i+1]}" ;;',
    '      --context) context="${COMP_WORDS[i+1]}" ;;',
    "    esac",
    `    case " ${
      flagWords(verbs, (f) => f.takesValue).join(" ")
    } " in *" $w "*) ((i++)); continue ;; esac`,
    '    [[ "$w" == -* ]] && continue',
    '    case " ' + paths.join(" ") + ' " in *" ${path}/${w} "*) path="${path}/${w}" ;; esac',
    "  done",
    '  case "${path:-/}|${prev}" in',
    ...valueCases,
    "  esac",
    '  if [[ -n "$values" ]]; then',
    '    COMPREPLY=($(compgen -W "$values" -- "$cur"))',
    "    return",
    "  fi",
    `  ${among(flagWords(verbs, (f) => f.valueKind === "namespace"))}`,
    '    COMPREPLY=($(compgen -W "$(_aicr_namespaces "$kubeconfig" "$context")" -- "$cur"))',
    "    return ;; esac",
    `  ${among(flagWords(verbs, (f) => f.valueKind === "dir"))}`,
    '    compopt -o filenames 2>/dev/null; COMPREPLY=($(compgen -d -- "$cur"))',
    "    return ;; esac",
    `  ${among(flagWords(verbs, (f) => f.valueKind === "file"))}`,
    '    compopt -o filenames 2>/dev/null; COMPREPLY=($(compgen -f -- "$cur"))',
    "    return ;; esac",
    // Any other flag that takes a value: the value is the user's to type.
    `  ${among(flagWords(verbs, (f) => f.takesValue))}`,
    "    COMPREPLY=()",
    "    return ;; esac",
    '  case "${path:-/}" in',
    ...wordCases,
    "  esac",
    '  COMPREPLY=($(compgen -W "$words" -- "$cur"))',
    "}",
    "complete -F _aicr_complete aicr",
    "",
  ].join("\n");
}

/**
 * The zsh completion script: zsh's `bashcompinit` runs the bash one.
 *
 * @param verbs the program's verbs (root first)
 * @returns the script
 */
export function zshCompletion(verbs: readonly VerbSpec[]): string {
  return [
    "#compdef aicr",
    "# zsh completion for aicr (generated by 'aicr completion zsh'): the bash completion through bashcompinit",
    "autoload -U +X bashcompinit && bashcompinit",
    bashCompletion(verbs),
  ].join("\n");
}

/** A fish flag's value: its fixed set, the cluster's namespaces, files, folders, or free text. */
function fishValue(flag: FlagSpec): string {
  if (!flag.takesValue) return "";
  if (flag.values) return ` -x -a ${quote(flag.values.join(" "))}`;
  switch (flag.valueKind) {
    case "namespace":
      return ` -x -a ${
        quote(`(timeout ${SHELL_TIMEOUT_SECONDS} aicr ${COMPLETE_VERB} namespaces 2>/dev/null)`)
      }`;
    case "dir":
      return ` -x -a ${quote("(__fish_complete_directories)")}`;
    case "file":
      return " -r -F";
    default:
      return " -x";
  }
}

/**
 * The fish completion script: one `complete` line per verb, flag and value set.
 *
 * @param verbs the program's verbs (root first)
 * @returns the script
 */
export function fishCompletion(verbs: readonly VerbSpec[]): string {
  const lines = ["# fish completion for aicr (generated by 'aicr completion fish')"];
  const globals = verbs[0]?.flags ?? [];
  for (const v of verbs) {
    // A verb's flags complete once its last word was typed; the root's everywhere.
    const condition = v.path.length === 0
      ? ""
      : ` -n ${quote(`__fish_seen_subcommand_from ${v.path.at(-1)}`)}`;
    const parent = verbs.find((p) => p.path.join(" ") === v.path.slice(0, -1).join(" "));
    if (v.path.length > 0 && parent) {
      const parentCondition = parent.path.length === 0
        ? ` -n ${quote("__fish_use_subcommand")}`
        : ` -n ${quote(`__fish_seen_subcommand_from ${parent.path.at(-1)}`)}`;
      lines.push(
        `complete -c aicr -f${parentCondition} -a ${quote(v.path.at(-1) ?? "")} -d ${
          quote(v.description.slice(0, 80))
        }`,
      );
    }
    for (const f of v.path.length === 0 ? globals : v.flags) {
      const name = f.long.replace(/^--/, "");
      lines.push(
        `complete -c aicr${condition} -l ${name}${
          f.short ? ` -s ${f.short.replace(/^-/, "")}` : ""
        }${fishValue(f)} -d ${quote(f.description.slice(0, 80))}`,
      );
    }
  }
  return lines.join("\n") + "\n";
}

/**
 * The `completion` command.
 *
 * @param deps CLI dependencies
 * @param fullProgram builds the program with every verb registered
 * @returns the command
 */
export function completionCommand(deps: CliDeps, fullProgram: () => Promise<Command>): Command {
  return new Command("completion")
    .description("print the shell completion script for bash, zsh or fish")
    .argument("<shell>", COMPLETION_SHELLS.join(", "))
    .action(async (shell: string) => {
      if (!(COMPLETION_SHELLS as readonly string[]).includes(shell)) {
        throw new UsageError(
          `Cannot write completion for '${shell}' as the shell must be bash, zsh or fish`,
        );
      }
      const verbs = describeProgram(await fullProgram());
      deps.stdout.write(
        shell === "bash"
          ? bashCompletion(verbs)
          : shell === "zsh"
          ? zshCompletion(verbs)
          : fishCompletion(verbs),
      );
    });
}

/** The values `aicr __complete` prints. */
const COMPLETED_VALUES = ["namespaces"] as const;

/**
 * The hidden `__complete <what>` verb the completion scripts call: the cluster's namespaces, one a
 * line, from the kubeconfig the command line names. One attempt of at most 2 s; any failure (no
 * kubeconfig, no cluster, no right to list) prints nothing and exits 0, so a shell shows no
 * error and never waits long.
 *
 * @param deps CLI dependencies
 * @returns the command (hidden from help)
 */
export function completeValuesCommand(deps: CliDeps): Command {
  return new Command(COMPLETE_VERB)
    .description("values for shell completion (used by the completion scripts)")
    .argument("<what>", COMPLETED_VALUES.join(", "))
    .action(async (what: string, _flags: unknown, command: Command) => {
      if (!(COMPLETED_VALUES as readonly string[]).includes(what)) return;
      const signal = AbortSignal.any([deps.signal, AbortSignal.timeout(NAMESPACES_TIMEOUT_MS)]);
      try {
        const kube = connect({ ...deps, signal }, globalOptions(command), { interruptible: true });
        const names = await namespaceNames(kube, { timeoutMs: NAMESPACES_TIMEOUT_MS, signal });
        if (names.length > 0) deps.stdout.write(names.join("\n") + "\n");
      } catch {
        // Silent: a completion that fails offers nothing.
      }
    });
}
