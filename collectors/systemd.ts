/**
 * The SystemD collector: every property of each configured unit, read over D-Bus with
 * `Properties.GetAll` (empty interface), filtered and typed by D-Bus signature.
 *
 * Typing: `s` → string, `b` → bool, `x`/`t` → int (bigint beyond 2^53), `d` → float.
 * Everything else is rendered as Go's `%v` would print the value godbus decodes, so
 * snapshots diff cleanly against upstream ones: integers in decimal (`NRestarts: "0"`),
 * object paths and signatures as their text, arrays as `[a b c]`, structs as `{a b c}`
 * (upstream's documented `ExecStart` shape), dicts as `map[k:v ...]` with sorted keys,
 * variants as their inner value, floats like Go's `%v` (`1e+06`), byte arrays as numbers.
 *
 * @module
 */
import type { Measurement, Reading, ReadingMap, SourceStatus, Subtype } from "../snapshot/mod.ts";
import { unitObjectPath } from "./dbus.ts";
import { messageOf, statusOf, subtype, throwIfAborted } from "./status.ts";
import type { CollectorDeps, DbusValue, SystemdBus } from "./types.ts";

/** Upstream's default units. */
export const DEFAULT_SYSTEMD_UNITS: readonly string[] = [
  "containerd.service",
  "docker.service",
  "kubelet.service",
];
/** Units used when an empty list is given (upstream's fallback). */
export const FALLBACK_SYSTEMD_UNITS: readonly string[] = ["containerd.service"];
/** Property names removed from every unit. */
export const SYSTEMD_REMOVED_KEYS: readonly string[] = [
  "AllowedCPUs",
  "AllowedMemoryNodes",
  "Asserts",
  "BPFProgram",
  "BusName",
  "Id",
];
/** The subtype that carries the status when systemd cannot be reached at all. */
export const SYSTEMD_STATUS_SUBTYPE = "status";
const SOURCE = "dbus:org.freedesktop.systemd1";

/**
 * Whether a property is kept.
 *
 * @param name property name
 * @returns false for {@link SYSTEMD_REMOVED_KEYS} and any name containing `Credential`
 */
export function keepProperty(name: string): boolean {
  return !SYSTEMD_REMOVED_KEYS.includes(name) && !name.includes("Credential");
}

/**
 * Formats a float as Go's `%v` (`strconv.FormatFloat(f, 'g', -1, 64)` with `%v`'s
 * exponent threshold of 21).
 *
 * @param value the number
 * @returns e.g. `0.5`, `1e+21`, `+Inf`, `NaN`
 */
export function goFloat(value: number): string {
  if (Number.isNaN(value)) return "NaN";
  if (value === Infinity) return "+Inf";
  if (value === -Infinity) return "-Inf";
  if (value === 0) return Object.is(value, -0) ? "-0" : "0";
  const abs = Math.abs(value);
  if (abs < 1e-4 || abs >= 1e21) {
    const [mantissa, exponent] = value.toExponential().split("e") as [string, string];
    const sign = exponent.startsWith("-") ? "-" : "+";
    const digits = exponent.replace(/^[-+]/, "").padStart(2, "0");
    return `${mantissa}e${sign}${digits}`;
  }
  return String(value);
}

/**
 * Renders a decoded D-Bus value as Go's `%v` prints godbus's decoding of it.
 *
 * @param signature the value's D-Bus signature
 * @param value the decoded value (see {@link DbusValue})
 * @returns the text
 */
export function goFormat(signature: string, value: unknown): string {
  const code = signature[0];
  if (code === "v") {
    const inner = value as DbusValue;
    return goFormat(inner.signature, inner.value);
  }
  if (code === "a") {
    const element = signature.slice(1);
    const items = value as unknown[];
    if (element.startsWith("{")) {
      const [keySig, valueSig] = splitPair(element);
      const pairs = (items as [unknown, unknown][]).map((
        [k, v],
      ) => [goFormat(keySig, k), goFormat(valueSig, v)]);
      pairs.sort((a, b) => compareMapKeys(keySig, a[0] as string, b[0] as string));
      return `map[${pairs.map(([k, v]) => `${k}:${v}`).join(" ")}]`;
    }
    return `[${items.map((item) => goFormat(element, item)).join(" ")}]`;
  }
  if (code === "(") {
    const members = splitMembers(signature.slice(1, -1));
    const values = value as unknown[];
    return `{${values.map((v, i) => goFormat(members[i] ?? "s", v)).join(" ")}}`;
  }
  if (code === "d") return goFloat(value as number);
  return String(value);
}

function compareMapKeys(keySig: string, a: string, b: string): number {
  // Go's fmt sorts map keys by value: numerically for numbers, bytewise for strings.
  if ("ynqiuxtdh".includes(keySig)) return Number(a) - Number(b);
  return a < b ? -1 : a > b ? 1 : 0;
}

function splitMembers(signature: string): string[] {
  const out: string[] = [];
  let depth = 0;
  let start = 0;
  for (let i = 0; i < signature.length; i++) {
    const ch = signature[i] as string;
    if (ch === "(" || ch === "{") depth++;
    else if (ch === ")" || ch === "}") depth--;
    if (depth === 0 && !(ch === "a")) {
      out.push(signature.slice(start, i + 1));
      start = i + 1;
    }
  }
  return out;
}

function splitPair(element: string): [string, string] {
  const members = splitMembers(element.slice(1, -1));
  return [members[0] ?? "s", members[1] ?? "v"];
}

/**
 * Types one property value as a Reading.
 *
 * @param property the signature and value
 * @returns the Reading (native for s, b, x, t, d; a Go `%v` string otherwise)
 */
export function toReading(property: DbusValue): Reading {
  switch (property.signature) {
    case "s":
      return String(property.value);
    case "b":
      return Boolean(property.value);
    case "x":
    case "t":
      return typeof property.value === "bigint" ? property.value : Number(property.value);
    case "d":
      return Number(property.value);
    default:
      return goFormat(property.signature, property.value);
  }
}

/**
 * Filters and types a unit's properties.
 *
 * @param properties what GetAll returned
 * @returns the readings
 */
export function unitReadings(properties: Record<string, DbusValue>): ReadingMap {
  const data: ReadingMap = {};
  for (const [name, property] of Object.entries(properties)) {
    if (keepProperty(name)) data[name] = toReading(property);
  }
  return data;
}

/**
 * The SystemD measurement when systemd cannot be reached: no unit subtypes, only the
 * {@link SYSTEMD_STATUS_SUBTYPE} subtype with empty data and the status.
 *
 * @param status why
 * @param message one line of detail
 * @returns the measurement
 */
export function systemdUnavailable(status: SourceStatus, message: string): Measurement {
  return {
    type: "SystemD",
    subtypes: [subtype(SYSTEMD_STATUS_SUBTYPE, {}, status, SOURCE, message)],
  };
}

/**
 * Reads the units. Never throws. When systemd cannot be reached the measurement has
 * only the status subtype; a unit whose call fails gives its subtype with `data: {}`
 * and a `failed` status (upstream drops it; an empty subtype adds no diff paths).
 *
 * @param deps the bus (or a factory) and logger
 * @param options units and signal
 * @returns the measurement, one subtype per unit in the given order
 */
export async function collectSystemd(
  deps: Pick<CollectorDeps, "systemd" | "log">,
  options: { units?: readonly string[]; signal?: AbortSignal } = {},
): Promise<Measurement> {
  const units = options.units === undefined
    ? DEFAULT_SYSTEMD_UNITS
    : options.units.length === 0
    ? FALLBACK_SYSTEMD_UNITS
    : options.units;
  if (deps.systemd === undefined) {
    return systemdUnavailable("absent", "Cannot reach systemd: no D-Bus client is configured");
  }
  let bus: SystemdBus;
  try {
    bus = typeof deps.systemd === "function" ? deps.systemd() : deps.systemd;
  } catch (error) {
    return systemdUnavailable(statusOf(error), messageOf(error));
  }
  try {
    const subtypes: Subtype[] = [];
    for (const unit of units) {
      throwIfAborted(options.signal, "SystemD");
      const source = `${SOURCE} ${unitObjectPath(unit)}`;
      try {
        const properties = await bus.getUnitProperties(unit, options.signal);
        subtypes.push(subtype(unit, unitReadings(properties), "ok", source));
      } catch (error) {
        if (error instanceof Error && error.name === "UnavailableError") {
          // systemd itself is not there: no unit can be asked.
          return systemdUnavailable("absent", messageOf(error));
        }
        deps.log.warn("systemd unit skipped", { unit, error: messageOf(error) });
        subtypes.push(subtype(unit, {}, statusOf(error), source, messageOf(error)));
      }
    }
    return { type: "SystemD", subtypes };
  } catch (error) {
    return systemdUnavailable(statusOf(error), messageOf(error));
  } finally {
    await bus.close().catch(() => undefined);
  }
}
