/**
 * The install's settings, remembered: `aicr daemonset install` (and `render`) record on the
 * DaemonSet, in the annotation {@link INSTALL_SETTINGS_ANNOTATION}, the value of every flag that
 * shapes the objects (the image aside: an upgrade moves it), as given or defaulted; `aicr
 * daemonset upgrade` reads them back and uses each one the command line does not give, as
 * `helm upgrade --reuse-values` does. The flags given override, and the result is recorded anew.
 *
 * The settings are kept as the flags' values (strings, lists, booleans), keyed by the flags'
 * option names, so the values read back go through the very parsing and checks the flags do.
 * Nothing read from the cluster is trusted for being there: an annotation that is not JSON, has a
 * key the upgrade does not know, a value of the wrong kind or one the flags' checks refuse is a
 * {@link UsageError} naming the DaemonSet, the annotation and the fix, before anything is written.
 *
 * @module
 */
import { UsageError } from "../errors.ts";
import type { KubeObject } from "../kube/mod.ts";

/** The DaemonSet annotation that holds the install's settings (JSON). */
export const INSTALL_SETTINGS_ANNOTATION = "aicr.run/install-settings";

/** One flag's value: a string, a repeatable flag's list, or a switch. */
export type SettingValue = string | readonly string[] | boolean;

/** The kind of value a setting holds. */
export type SettingKind = "string" | "strings" | "boolean";

/** The settings, by the flags' option names. */
export type InstallSettings = Readonly<Record<string, SettingValue>>;

/** What the upgrade needs from its command line to merge the install's settings. */
export interface UpgradeSettings<O = unknown> {
  /** Every recorded setting and its kind: the flags that shape the objects, bar the image. */
  kinds: Readonly<Record<string, SettingKind>>;
  /** The command line's value of each setting (given, or its default). */
  flags: InstallSettings;
  /** Each setting's default (what the command line holds when it is not given). */
  defaults: InstallSettings;
  /** The settings given on the command line (not defaulted). */
  given: readonly string[];
  /**
   * Settings (merged) into the daemon's options, with the checks the flags have.
   * @throws {UsageError} on a value the flags would refuse
   */
  toOptions: (settings: InstallSettings) => O;
  /** Settings that go together: given one, all come from the command line (--all-nodes, --node-selector). */
  linked?: readonly (readonly string[])[];
}

/** What the install's settings resolved to. */
export interface ResolvedSettings<O> {
  /** The daemon's options to render. */
  options: O;
  /** The settings to record on the DaemonSet. */
  settings: InstallSettings;
  /** Whether the DaemonSet held recorded settings (false: an install of an older build). */
  recorded: boolean;
}

/**
 * The annotation's text for these settings: keys sorted, unset values left out.
 *
 * @param settings the settings
 * @returns JSON
 */
export function encodeInstallSettings(settings: InstallSettings): string {
  const sorted = Object.keys(settings).sort().filter((k) => settings[k] !== undefined);
  return JSON.stringify(Object.fromEntries(sorted.map((k) => [k, settings[k]])));
}

/**
 * The settings of `flags` the kinds name, unset ones left out: what an install records.
 *
 * @param kinds the recorded settings and their kinds
 * @param flags the command line's values
 * @returns the settings to record
 */
export function pickSettings(
  kinds: Readonly<Record<string, SettingKind>>,
  flags: Readonly<Record<string, unknown>>,
): InstallSettings {
  const picked: Record<string, SettingValue> = {};
  for (const key of Object.keys(kinds)) {
    const value = flags[key];
    if (value !== undefined && kindOf(value) === kinds[key]) picked[key] = value as SettingValue;
  }
  return picked;
}

function kindOf(value: unknown): SettingKind | undefined {
  if (typeof value === "string") return "string";
  if (typeof value === "boolean") return "boolean";
  if (Array.isArray(value) && value.every((v) => typeof v === "string")) return "strings";
  return undefined;
}

/**
 * Parses and checks the annotation's text: a JSON object of known settings, each of its kind.
 *
 * @param text the annotation's value
 * @param kinds the known settings
 * @returns the settings
 * @throws {Error} saying what is wrong (the caller names the DaemonSet and the fix)
 */
export function parseInstallSettings(
  text: string,
  kinds: Readonly<Record<string, SettingKind>>,
): InstallSettings {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw new Error("it is not JSON");
  }
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) {
    throw new Error("it is not a JSON object");
  }
  for (const [key, value] of Object.entries(parsed)) {
    const want = Object.hasOwn(kinds, key) ? kinds[key] : undefined;
    if (want === undefined) {
      throw new Error(
        `'${key}' is not a setting this build knows (${Object.keys(kinds).join(", ")})`,
      );
    }
    if (kindOf(value) !== want) {
      const expected = want === "strings" ? "a list of strings" : `a ${want}`;
      throw new Error(`'${key}' must be ${expected}: current value is ${JSON.stringify(value)}`);
    }
  }
  return parsed as InstallSettings;
}

/**
 * The settings to upgrade with: each recorded one unless the command line gives it (or one
 * linked to it), the command line's for the rest.
 *
 * @param recorded the install's settings
 * @param upgrade the command line
 * @returns the merged settings
 */
export function mergeInstallSettings(
  recorded: InstallSettings,
  upgrade: Pick<UpgradeSettings<unknown>, "kinds" | "flags" | "given" | "linked">,
): InstallSettings {
  const given = new Set(upgrade.given);
  for (const group of upgrade.linked ?? []) {
    if (group.some((k) => given.has(k))) group.forEach((k) => given.add(k));
  }
  const merged: Record<string, SettingValue> = {};
  for (const key of Object.keys(upgrade.kinds)) {
    const value = !given.has(key) && Object.hasOwn(recorded, key)
      ? recorded[key]
      : upgrade.flags[key];
    if (value !== undefined) merged[key] = value;
  }
  return merged;
}

/**
 * Resolves the upgrade's settings from the live DaemonSet's annotation and the command line:
 * without the annotation (an older build's install) the command line's alone.
 *
 * @param existing the live DaemonSet
 * @param upgrade the command line
 * @param where the daemon's namespace and name (for errors)
 * @returns the options to render and the settings to record
 * @throws {UsageError} when the annotation is malformed, unknown or holds a refused value
 */
export function resolveInstallSettings<O>(
  existing: KubeObject,
  upgrade: UpgradeSettings<O>,
  where: { namespace: string; name: string },
): ResolvedSettings<O> {
  const text = existing.metadata?.annotations?.[INSTALL_SETTINGS_ANNOTATION];
  if (text === undefined) {
    return { options: upgrade.toOptions(upgrade.flags), settings: upgrade.flags, recorded: false };
  }
  const refuse = (why: string) =>
    new UsageError(
      `Cannot upgrade the daemon '${where.namespace}/${where.name}': the annotation '${INSTALL_SETTINGS_ANNOTATION}' of its DaemonSet is refused: ${why}`,
      {
        details: [
          "  pass the install's flags explicitly, without the annotation:",
          `  kubectl annotate daemonset -n ${where.namespace} ${where.name} ${INSTALL_SETTINGS_ANNOTATION}-`,
          (option) =>
            `  aicr daemonset upgrade -n ${where.namespace} ${
              option("name")
            } ${where.name} <the install's flags>`,
        ],
      },
    );
  let recorded: InstallSettings;
  try {
    recorded = parseInstallSettings(text, upgrade.kinds);
  } catch (error) {
    throw refuse((error as Error).message);
  }
  try {
    // Every recorded value, over the defaults alone, passes the flags' own checks.
    upgrade.toOptions(
      mergeInstallSettings(recorded, { ...upgrade, flags: upgrade.defaults, given: [] }),
    );
  } catch (error) {
    if (error instanceof UsageError) throw refuse(error.message.split("\n")[0] ?? "");
    throw error;
  }
  const settings = mergeInstallSettings(recorded, upgrade);
  return { options: upgrade.toOptions(settings), settings, recorded: true };
}
