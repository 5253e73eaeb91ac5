/**
 * `aicr snapshot --config FILE`: upstream's `AICRConfig` document (`kind: AICRConfig`,
 * `apiVersion: aicr.run/v1alpha2` or `aicr.run/v1beta1`), of which `aicr snapshot` reads
 * `spec.snapshot` (`output`, `agent`, `execution`): what the flags carry, version-controlled. A
 * flag given on the command line (or by its environment variable) always wins over the file; an
 * unknown field is an error naming it, so a typo never silently does nothing. The other sections
 * (`recipe`, `bundle`, `validate`) belong to upstream verbs aicr does not have and are ignored.
 *
 * @module
 */
import { readFile } from "node:fs/promises";
import { resolve } from "node:path";
import type { Command } from "commander";
import { parse as parseYaml } from "yaml";
import { UsageError } from "../errors.ts";

/** The `apiVersion`s upstream has published for `AICRConfig`. */
export const AICR_CONFIG_API_VERSIONS = ["aicr.run/v1alpha2", "aicr.run/v1beta1"] as const;

/** Fields of each object, by path; anything else is an unknown field. */
const SCHEMA: Readonly<Record<string, readonly string[]>> = {
  "": ["kind", "apiVersion", "metadata", "spec"],
  "metadata": ["name", "labels", "annotations"],
  "spec": ["snapshot", "recipe", "bundle", "validate"],
  "spec.snapshot": ["output", "agent", "execution"],
  "spec.snapshot.output": ["path", "format", "template"],
  "spec.snapshot.agent": [
    "namespace",
    "image",
    "imagePullSecrets",
    "jobName",
    "serviceAccountName",
    "nodeSelector",
    "tolerations",
    "requireGpu",
    "runtimeClassName",
    "os",
    "requests",
    "limits",
  ],
  "spec.snapshot.execution": ["timeout", "noCleanup", "privileged", "maxNodesPerEntry"],
};

/** Objects whose keys are free (labels, selectors) or whose content aicr does not read. */
const FREE = new Set([
  "metadata.labels",
  "metadata.annotations",
  "spec.snapshot.agent.nodeSelector",
  "spec.recipe",
  "spec.bundle",
  "spec.validate",
]);

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function checkFields(value: unknown, path: string, file: string): void {
  if (!isObject(value) || FREE.has(path)) return;
  const allowed = SCHEMA[path];
  if (!allowed) return;
  for (const [key, child] of Object.entries(value)) {
    const childPath = path ? `${path}.${key}` : key;
    if (!allowed.includes(key)) {
      throw new UsageError(
        `Cannot use config '${file}': unknown field '${childPath}' (known: ${
          allowed.map((k) => (path ? `${path}.${k}` : k)).join(", ")
        })`,
      );
    }
    checkFields(child, childPath, file);
  }
}

/** What `spec.snapshot` sets, as flag values (strings and lists, as the flags take them). */
export type SnapshotConfigValues = Partial<{
  output: string;
  format: string;
  template: string;
  namespace: string;
  image: string;
  imagePullSecret: string[];
  jobName: string;
  serviceAccountName: string;
  nodeSelector: string[];
  toleration: string[];
  requireGpu: boolean;
  runtimeClass: string;
  os: string;
  requests: string;
  limits: string;
  timeout: string;
  cleanup: boolean;
  privileged: string;
  maxNodesPerEntry: string;
}>;

function typed<T>(
  value: unknown,
  path: string,
  file: string,
  check: (v: unknown) => v is T,
  what: string,
): T | undefined {
  if (value === undefined || value === null || value === "") return undefined;
  if (!check(value)) {
    throw new UsageError(
      `Cannot use config '${file}': '${path}' must be ${what}: current value is ${
        JSON.stringify(value)
      }`,
    );
  }
  return value;
}

const isString = (v: unknown): v is string => typeof v === "string";
const isBool = (v: unknown): v is boolean => typeof v === "boolean";
const isStrings = (v: unknown): v is string[] =>
  Array.isArray(v) && v.every((x) => typeof x === "string");
const isDuration = (v: unknown): v is string | number =>
  typeof v === "string" || (typeof v === "number" && Number.isFinite(v));
const isCount = (v: unknown): v is number => typeof v === "number" && Number.isInteger(v) && v >= 0;
const isMap = (v: unknown): v is Record<string, string> =>
  isObject(v) && Object.values(v).every((x) => typeof x === "string");

/**
 * Parses an `AICRConfig` document and returns what `spec.snapshot` sets.
 *
 * @param text the document (YAML or JSON)
 * @param file its name, for messages
 * @returns the values, keyed like the flags
 * @throws {UsageError} naming the field for an unknown field, a wrong type, or a bad envelope
 */
export function parseSnapshotConfig(text: string, file: string): SnapshotConfigValues {
  let doc: unknown;
  try {
    doc = parseYaml(text);
  } catch (error) {
    throw new UsageError(
      `Cannot use config '${file}': it is not YAML or JSON: ${
        error instanceof Error ? error.message.split("\n")[0] : error
      }`,
    );
  }
  if (!isObject(doc)) throw new UsageError(`Cannot use config '${file}': it is not a document`);
  if (doc.kind !== "AICRConfig") {
    throw new UsageError(
      `Cannot use config '${file}': 'kind' must be AICRConfig: current value is ${
        JSON.stringify(doc.kind)
      }`,
    );
  }
  if (!(AICR_CONFIG_API_VERSIONS as readonly unknown[]).includes(doc.apiVersion)) {
    throw new UsageError(
      `Cannot use config '${file}': 'apiVersion' must be one of ${
        AICR_CONFIG_API_VERSIONS.join(", ")
      }: current value is ${JSON.stringify(doc.apiVersion)}`,
    );
  }
  checkFields(doc, "", file);
  const spec = isObject(doc.spec) ? doc.spec : {};
  const snapshot = isObject(spec.snapshot) ? spec.snapshot : {};
  const output = isObject(snapshot.output) ? snapshot.output : {};
  const agent = isObject(snapshot.agent) ? snapshot.agent : {};
  const execution = isObject(snapshot.execution) ? snapshot.execution : {};
  const p = (section: string, key: string) => `spec.snapshot.${section}.${key}`;
  const str = (o: Record<string, unknown>, s: string, k: string) =>
    typed(o[k], p(s, k), file, isString, "a string");
  const selector = typed(agent.nodeSelector, p("agent", "nodeSelector"), file, isMap, "a map");
  const timeout = typed(
    execution.timeout,
    p("execution", "timeout"),
    file,
    isDuration,
    "a duration",
  );
  const maxNodes = typed(
    execution.maxNodesPerEntry,
    p("execution", "maxNodesPerEntry"),
    file,
    isCount,
    "a whole number",
  );
  const privileged = typed(
    execution.privileged,
    p("execution", "privileged"),
    file,
    isBool,
    "true or false",
  );
  const noCleanup = typed(
    execution.noCleanup,
    p("execution", "noCleanup"),
    file,
    isBool,
    "true or false",
  );
  const values: { [K in keyof SnapshotConfigValues]: SnapshotConfigValues[K] | undefined } = {
    output: str(output, "output", "path"),
    format: str(output, "output", "format"),
    template: str(output, "output", "template"),
    namespace: str(agent, "agent", "namespace"),
    image: str(agent, "agent", "image"),
    imagePullSecret: typed(
      agent.imagePullSecrets,
      p("agent", "imagePullSecrets"),
      file,
      isStrings,
      "a list of strings",
    ),
    jobName: str(agent, "agent", "jobName"),
    serviceAccountName: str(agent, "agent", "serviceAccountName"),
    nodeSelector: selector ? Object.entries(selector).map(([k, v]) => `${k}=${v}`) : undefined,
    toleration: typed(
      agent.tolerations,
      p("agent", "tolerations"),
      file,
      isStrings,
      "a list of key=value:effect strings",
    ),
    requireGpu: typed(agent.requireGpu, p("agent", "requireGpu"), file, isBool, "true or false"),
    runtimeClass: str(agent, "agent", "runtimeClassName"),
    os: str(agent, "agent", "os"),
    requests: str(agent, "agent", "requests"),
    limits: str(agent, "agent", "limits"),
    timeout: timeout === undefined
      ? undefined
      : typeof timeout === "number"
      ? `${timeout}s`
      : timeout,
    cleanup: noCleanup === undefined ? undefined : !noCleanup,
    privileged: privileged === undefined ? undefined : String(privileged),
    maxNodesPerEntry: maxNodes === undefined ? undefined : String(maxNodes),
  };
  // An explicit empty tolerations list clears the tolerate-all default (upstream's nil-vs-empty).
  if (Array.isArray(agent.tolerations) && agent.tolerations.length === 0) values.toleration = [];
  return Object.fromEntries(
    Object.entries(values).filter(([, v]) => v !== undefined),
  ) as SnapshotConfigValues;
}

/**
 * Reads `--config` and fills every snapshot flag the command line did not set (a flag given on
 * the command line or by its environment variable wins). `-n` follows the same rule, so the
 * file's `agent.namespace` beats the kubeconfig context's namespace but not `-n`.
 *
 * @param command the running `snapshot` command (where the flags' sources are)
 * @param flags the parsed flags, filled in place
 * @param options the file and the working directory
 * @returns the names of the flags the file set
 * @throws {UsageError} for an unreadable or invalid file, naming the field
 */
export async function applySnapshotConfig(
  command: Command,
  flags: Record<string, unknown>,
  options: { file: string; cwd: string },
): Promise<string[]> {
  const text = await readFile(resolve(options.cwd, options.file), "utf8").catch((error) => {
    throw new UsageError(
      `Cannot read config '${options.file}': ${error instanceof Error ? error.message : error}`,
    );
  });
  const values = parseSnapshotConfig(text, options.file);
  const set: string[] = [];
  const given = (source: string | undefined) => source === "cli" || source === "env";
  for (const [key, value] of Object.entries(values)) {
    if (key === "namespace") {
      if (given(command.getOptionValueSourceWithGlobals("namespace"))) continue;
      let root: Command = command;
      while (root.parent) root = root.parent;
      root.setOptionValueWithSource("namespace", value, "config");
      set.push(key);
      continue;
    }
    if (given(command.getOptionValueSource(key))) continue;
    flags[key] = value;
    set.push(key);
  }
  return set;
}
