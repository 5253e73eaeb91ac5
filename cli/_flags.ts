/**
 * The CLI's flag parsing shared by the verbs: parsers of the flag values that end up in the
 * agent's and the daemon's manifests (node selectors, tolerations, resource lists, Go-style
 * durations), each bad value a {@link UsageError} naming the flag, the value and the expected
 * format; and the flag each typed option comes from, which {@link withFlagNames} puts into the
 * errors the library raises (below `cli/` a message names options, never flags).
 *
 * @module
 */
import { nameOptionsIn, UsageError } from "../errors.ts";
import {
  checkTimeout,
  isDns1123Subdomain,
  isLabelKey,
  isLabelValue,
  isQuantity,
  MAX_WAIT_MS,
  type NodeSelectorRequirement,
  type ResourceList,
  type Toleration,
} from "../manifests/mod.ts";

/** Taint effects `--toleration` accepts, case-sensitive. */
export const TAINT_EFFECTS = ["NoSchedule", "PreferNoSchedule", "NoExecute"] as const;

/** One taint effect. */
export type TaintEffect = typeof TAINT_EFFECTS[number];

function usage(flag: string, value: string, expected: string, detail?: string): UsageError {
  return new UsageError(
    `Cannot parse '${flag}' as it must be ${expected}${
      detail ? ` (${detail})` : ""
    }: current value is '${value}'`,
  );
}

/**
 * Parses repeated `--node-selector key=value` values, splitting each on its first `=`.
 * Keys must be label keys and values label values, so a selector Kubernetes would
 * reject (say `a=b=c`, whose value holds `=`) fails here, naming the flag.
 *
 * @param values the flag's values, in order
 * @param flag the flag name for errors @default "--node-selector"
 * @returns the selector map, in order
 * @throws {UsageError} on a missing `=`, an invalid key or value, or a key given twice with different values
 */
export function parseNodeSelectors(
  values: readonly string[],
  flag = "--node-selector",
): Record<string, string> {
  const selector: Record<string, string> = {};
  for (const raw of values) {
    const eq = raw.indexOf("=");
    if (eq < 0) throw usage(flag, raw, "'key=value'");
    const key = raw.slice(0, eq);
    const value = raw.slice(eq + 1);
    if (!isLabelKey(key)) {
      throw usage(flag, raw, "'key=value'", `'${key}' is not a valid label key`);
    }
    if (!isLabelValue(value)) {
      throw usage(
        flag,
        raw,
        "'key=value'",
        `'${value}' is not a valid label value: at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit`,
      );
    }
    const previous = selector[key];
    if (previous !== undefined && previous !== value) {
      throw usage(flag, raw, "'key=value' with each key once", `'${key}' is already '${previous}'`);
    }
    selector[key] = value;
  }
  return selector;
}

/** `key in (a,b)`, `key notin (a,b)`: kubectl's set-based selector, on node labels. */
const SET_REQUIREMENT_REGEXP = /^\s*([^\s!=()]+)\s+(in|notin)\s*\(([^()]*)\)\s*$/i;

/**
 * Parses repeated `--node-affinity` values, kubectl's label selector requirements on node
 * labels: `key in (a,b)`, `key notin (a,b)`, `key=value`, `key!=value`, `key` (exists) and
 * `!key` (does not exist). They all must hold (one required node affinity term).
 *
 * @param values the flag's values, in order
 * @param flag the flag name for errors @default "--node-affinity"
 * @returns the requirements, in order
 * @throws {UsageError} on a malformed value, a bad label key or value
 */
export function parseNodeRequirements(
  values: readonly string[],
  flag = "--node-affinity",
): NodeSelectorRequirement[] {
  const expected =
    "a node label requirement: 'key in (a,b)', 'key notin (a,b)', 'key=value', 'key!=value', 'key' or '!key'";
  return values.map((raw): NodeSelectorRequirement => {
    const checkKey = (key: string) => {
      if (!isLabelKey(key)) throw usage(flag, raw, expected, `'${key}' is not a valid label key`);
      return key;
    };
    const checkValues = (list: string[]) => {
      const bad = list.find((v) => v === "" || !isLabelValue(v));
      if (bad !== undefined || list.length === 0) {
        throw usage(flag, raw, expected, `'${bad ?? ""}' is not a valid label value`);
      }
      return list;
    };
    const set = SET_REQUIREMENT_REGEXP.exec(raw);
    if (set) {
      return {
        key: checkKey(set[1]!),
        operator: set[2]!.toLowerCase() === "in" ? "In" : "NotIn",
        values: checkValues(set[3]!.split(",").map((v) => v.trim())),
      };
    }
    const text = raw.trim();
    const notEqual = text.indexOf("!=");
    if (notEqual > 0) {
      return {
        key: checkKey(text.slice(0, notEqual).trim()),
        operator: "NotIn",
        values: checkValues([text.slice(notEqual + 2).trim()]),
      };
    }
    const equal = text.indexOf("=");
    if (equal > 0) {
      return {
        key: checkKey(text.slice(0, equal).trim()),
        operator: "In",
        values: checkValues([text.slice(equal + 1).replace(/^=/, "").trim()]),
      };
    }
    if (text.startsWith("!")) {
      return { key: checkKey(text.slice(1).trim()), operator: "DoesNotExist" };
    }
    return { key: checkKey(text), operator: "Exists" };
  });
}

/**
 * Parses repeated `--toleration` values: `key=value:effect` gives `Equal`,
 * `key:effect` gives `Exists`; exactly one `:`; the effect one of `NoSchedule`,
 * `PreferNoSchedule`, `NoExecute` (case-sensitive). An empty key is accepted with
 * `Exists` (tolerates every taint of that effect). Any value replaces the default
 * tolerate-all toleration.
 *
 * @param values the flag's values, in order
 * @param flag the flag name for errors @default "--toleration"
 * @returns the tolerations, in order (empty when no value was given)
 * @throws {UsageError} on a malformed value
 */
export function parseTolerations(values: readonly string[], flag = "--toleration"): Toleration[] {
  const expected = "'key=value:effect' or 'key:effect'";
  return values.map((raw): Toleration => {
    const parts = raw.split(":");
    if (parts.length !== 2) throw usage(flag, raw, expected, "exactly one ':'");
    const [left = "", effect = ""] = parts;
    if (!(TAINT_EFFECTS as readonly string[]).includes(effect)) {
      throw usage(flag, raw, expected, `the effect must be ${TAINT_EFFECTS.join(", ")}`);
    }
    const eq = left.indexOf("=");
    const key = eq < 0 ? left : left.slice(0, eq);
    if (key !== "" && !isLabelKey(key)) {
      throw usage(flag, raw, expected, `'${key}' is not a valid taint key`);
    }
    const typedEffect = effect as TaintEffect;
    if (eq < 0) {
      return key === ""
        ? { operator: "Exists", effect: typedEffect }
        : { key, operator: "Exists", effect: typedEffect };
    }
    const value = left.slice(eq + 1);
    if (key === "") throw usage(flag, raw, expected, "a value needs a key");
    if (!isLabelValue(value)) {
      throw usage(flag, raw, expected, `'${value}' is not a valid taint value`);
    }
    return { key, operator: "Equal", value, effect: typedEffect };
  });
}

function isResourceName(name: string): boolean {
  const slash = name.indexOf("/");
  if (slash < 0) return isLabelKey(name);
  return isDns1123Subdomain(name.slice(0, slash)) && isLabelKey(name);
}

/**
 * Parses `--requests`/`--limits`: comma-separated `name=quantity` pairs such as
 * `cpu=1,memory=4Gi,nvidia.com/gpu=1`. Whitespace around pairs is ignored, an empty
 * value gives an empty list.
 *
 * @param value the flag value
 * @param flag the flag name for errors
 * @returns the resources, in order
 * @throws {UsageError} on a malformed pair, name or quantity, or a name given twice
 */
export function parseResourceList(value: string, flag: string): ResourceList {
  const expected = "comma-separated 'name=quantity' pairs, e.g. 'cpu=1,memory=4Gi'";
  const list: ResourceList = {};
  if (value.trim() === "") return list;
  for (const piece of value.split(",")) {
    const pair = piece.trim();
    const eq = pair.indexOf("=");
    if (eq < 0) throw usage(flag, value, expected, `'${pair}' has no '='`);
    const name = pair.slice(0, eq).trim();
    const quantity = pair.slice(eq + 1).trim();
    if (!isResourceName(name)) {
      throw usage(flag, value, expected, `'${name}' is not a resource name`);
    }
    if (!isQuantity(quantity)) {
      throw usage(
        flag,
        value,
        expected,
        `'${quantity}' is not a Kubernetes quantity such as 500m, 2, 4Gi or 1e3`,
      );
    }
    if (name in list) throw usage(flag, value, expected, `'${name}' is given twice`);
    list[name] = quantity;
  }
  return list;
}

/**
 * Parses a non-negative integer flag.
 *
 * @param flag the flag name
 * @param value its value
 * @returns the number
 * @throws {UsageError} when it is not a non-negative integer
 */
export function parseCount(flag: string, value: string): number {
  if (!/^\d+$/.test(value.trim())) {
    throw new UsageError(
      `Cannot use '${flag}' as it must be a non-negative integer: current value is '${value}'`,
    );
  }
  return Number(value);
}

const DURATION_UNITS: Record<string, number> = {
  ns: 1e-6,
  us: 1e-3,
  "µs": 1e-3,
  "μs": 1e-3,
  ms: 1,
  s: 1000,
  m: 60_000,
  h: 3_600_000,
};
const DURATION_REGEXP = /^(?:(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h))+$/;
const DURATION_PART_REGEXP = /(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)/g;

/**
 * Parses a Go-style duration (`5m`, `90s`, `1h30m`, `1.5h`, `250ms`) into
 * milliseconds. `0` alone is zero (callers read it as "the default"); negative
 * durations are refused because every duration flag here is a wait.
 *
 * @param value the flag value
 * @param flag the flag name for errors @default "--timeout"
 * @returns the duration in milliseconds (fractions of a millisecond kept)
 * @throws {UsageError} when the value is not a duration
 */
export function parseDuration(value: string, flag = "--timeout"): number {
  if (value === "0") return 0;
  if (!DURATION_REGEXP.test(value)) {
    throw usage(
      flag,
      value,
      "a duration such as '90s', '5m' or '1h30m'",
      "units h, m, s, ms, us, ns",
    );
  }
  let total = 0;
  for (const match of value.matchAll(DURATION_PART_REGEXP)) {
    total += Number(match[1]) * (DURATION_UNITS[match[2] ?? ""] ?? 0);
  }
  if (!(total <= MAX_WAIT_MS)) {
    throw usage(flag, value, "at most 24h", "a longer wait is no wait: use a CronJob or rerun");
  }
  return total;
}

/**
 * Parses `--request-timeout` (kubectl's meaning: how long one API request may take): a duration
 * up to 24h, or `0` (or `0s`) for no bound.
 *
 * @param value the flag value
 * @returns milliseconds, whole; 0 for none
 * @throws {UsageError} naming `--request-timeout` when the value is not such a duration
 */
export function parseRequestTimeout(value: string): number {
  const flag = "--request-timeout";
  const ms = parseDuration(value, flag);
  if (ms > 0 && ms < 1) throw usage(flag, value, "0 (no bound) or at least 1ms");
  return Math.round(ms);
}

/** The shortest `--timeout`: 1s (a shorter wait cannot see a pod start). */
export const MIN_TIMEOUT_MS = 1000;

/**
 * Parses a `--timeout` value: a duration from 1s to 24h. `0` and `0s` are refused rather
 * than read as "the default" or "forever" (kubectl gives 0 both meanings).
 *
 * @param value the flag value
 * @param flag the flag name for errors @default "--timeout"
 * @returns milliseconds
 * @throws {UsageError} naming the flag when the value is not a duration from 1s to 24h
 */
export function parseTimeout(value: string, flag = "--timeout"): number {
  const ms = parseDuration(value, flag);
  if (ms < MIN_TIMEOUT_MS) {
    throw usage(flag, value, "a duration from 1s to 24h", "omit the flag for its default");
  }
  // What is left of the contract (at most 24 h) parseDuration already holds.
  return checkTimeout(ms);
}

/** The flags whose name is not their option's name in kebab case. */
const FLAG_OF_OPTION: Readonly<Record<string, string>> = {
  serviceAccount: "--add-roles-to-service-account",
};

/**
 * The flag a typed option comes from: its name in kebab case (`imagePullSecret` gives
 * `--image-pull-secret`) unless {@link FLAG_OF_OPTION} says otherwise.
 *
 * @param option the option's name, as the library's messages name it
 * @returns the flag
 */
export function flagOf(option: string): string {
  return FLAG_OF_OPTION[option] ?? `--${option.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}`;
}

/**
 * Puts the CLI's flag names into an error the library raised (and into its causes), so the user
 * reads `'--image'` where the library named the option `image`.
 *
 * @param error anything thrown
 * @returns the same value, its messages naming flags
 */
export function withFlagNames<T>(error: T): T {
  return nameOptionsIn(error, flagOf);
}

/**
 * Wraps a verb's action so every error it ends with names flags ({@link withFlagNames}): the
 * verb is the layer that knows them, whoever runs it.
 *
 * @param action the commander action
 * @returns the same action, its errors naming flags
 */
export function namingFlags<A extends unknown[]>(
  action: (...args: A) => unknown,
): (...args: A) => Promise<void> {
  return async function namedAction(...args: A): Promise<void> {
    try {
      await action(...args);
    } catch (error) {
      throw withFlagNames(error);
    }
  };
}

/**
 * Parses `--keep-last`: how many snapshots a series keeps, 1 to 1000.
 *
 * @param value the flag's value
 * @returns the count
 * @throws {UsageError} naming the flag and the value
 */
export function parseKeepLast(value: string): number {
  const count = /^\d+$/.test(value.trim()) ? Number(value) : NaN;
  if (!(count >= 1 && count <= 1000)) {
    throw new UsageError(
      `Cannot use '--keep-last' as it must be a whole number from 1 to 1000: current value is '${value}'`,
    );
  }
  return count;
}
