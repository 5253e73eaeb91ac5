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
import { resolve } from "node:path";
import type { Command } from "commander";
import { parse as parseYaml } from "yaml";
import { UsageError } from "../errors.ts";
import { readTextFileBounded } from "../io.ts";

/** The `apiVersion`s upstream has published for `AICRConfig`. */
export const AICR_CONFIG_API_VERSIONS = ["aicr.run/v1alpha2", "aicr.run/v1beta1"] as const;

/** The largest `--config` file read (an AICRConfig is a few KiB). */
export const MAX_CONFIG_BYTES = 1024 * 1024;

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
  const doc = readConfigEnvelope(text, file);
  const spec = isObject(doc.spec) ? doc.spec : {};
  const snapshot = isObject(spec.snapshot) ? spec.snapshot : {};
  const section = (name: string): ConfigSection => ({
    name,
    file,
    fields: isObject(snapshot[name]) ? snapshot[name] : {},
  });
  const values: ConfigValues = {
    ...outputValues(section("output")),
    ...agentValues(section("agent")),
    ...executionValues(section("execution")),
  };
  return Object.fromEntries(
    Object.entries(values).filter(([, v]) => v !== undefined),
  ) as SnapshotConfigValues;
}

/** The values read so far, each possibly unset. */
type ConfigValues = { [K in keyof SnapshotConfigValues]?: SnapshotConfigValues[K] | undefined };

/** One section of `spec.snapshot` (`output`, `agent`, `execution`) and the file it is in. */
interface ConfigSection {
  name: string;
  file: string;
  fields: Record<string, unknown>;
}

/** The document parsed, its kind and apiVersion checked, every field known. */
function readConfigEnvelope(text: string, file: string): Record<string, unknown> {
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
  return doc;
}

/** One field of a section, of the type `check` accepts (`what` names it in the message). */
function field<T>(
  section: ConfigSection,
  key: string,
  check: (v: unknown) => v is T,
  what: string,
): T | undefined {
  return typed(
    section.fields[key],
    `spec.snapshot.${section.name}.${key}`,
    section.file,
    check,
    what,
  );
}

function outputValues(output: ConfigSection): ConfigValues {
  return {
    output: field(output, "path", isString, "a string"),
    format: field(output, "format", isString, "a string"),
    template: field(output, "template", isString, "a string"),
  };
}

function agentValues(agent: ConfigSection): ConfigValues {
  const selector = field(agent, "nodeSelector", isMap, "a map");
  const tolerations = agent.fields.tolerations;
  return {
    namespace: field(agent, "namespace", isString, "a string"),
    image: field(agent, "image", isString, "a string"),
    imagePullSecret: field(agent, "imagePullSecrets", isStrings, "a list of strings"),
    jobName: field(agent, "jobName", isString, "a string"),
    serviceAccountName: field(agent, "serviceAccountName", isString, "a string"),
    nodeSelector: selector ? Object.entries(selector).map(([k, v]) => `${k}=${v}`) : undefined,
    // An explicit empty list clears the tolerate-all default (upstream's nil-vs-empty).
    toleration: Array.isArray(tolerations) && tolerations.length === 0
      ? []
      : field(agent, "tolerations", isStrings, "a list of key=value:effect strings"),
    requireGpu: field(agent, "requireGpu", isBool, "true or false"),
    runtimeClass: field(agent, "runtimeClassName", isString, "a string"),
    os: field(agent, "os", isString, "a string"),
    requests: field(agent, "requests", isString, "a string"),
    limits: field(agent, "limits", isString, "a string"),
  };
}

function executionValues(execution: ConfigSection): ConfigValues {
  const timeout = field(execution, "timeout", isDuration, "a duration");
  const noCleanup = field(execution, "noCleanup", isBool, "true or false");
  const privileged = field(execution, "privileged", isBool, "true or false");
  const maxNodes = field(execution, "maxNodesPerEntry", isCount, "a whole number");
  return {
    timeout: typeof timeout === "number" ? `${timeout}s` : timeout,
    cleanup: noCleanup === undefined ? undefined : !noCleanup,
    privileged: privileged === undefined ? undefined : String(privileged),
    maxNodesPerEntry: maxNodes === undefined ? undefined : String(maxNodes),
  };
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
  options: { file: string; cwd: string; signal?: AbortSignal },
): Promise<string[]> {
  // Capped before a byte is parsed: a huge file is refused at once (exit 2), not read into memory.
  const text = await readTextFileBounded(resolve(options.cwd, options.file), MAX_CONFIG_BYTES, {
    what: "config",
    shown: options.file,
    ...(options.signal ? { signal: options.signal } : {}),
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
