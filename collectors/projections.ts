/**
 * Controller-side projections: the cloud CLIs' own JSON dumps, turned into K8s subtypes
 * that `aicr snapshot` and `aicr agent` merge into the snapshot they return. The files
 * never enter the agent pod; this module only parses text handed to it (no I/O).
 *
 * | Flag              | Dump of                                | Subtype         | Main key                  |
 * | ----------------- | -------------------------------------- | --------------- | ------------------------- |
 * | `--oke-addons`    | `oci ce cluster list-addons ... --all` | `oke-addons`    | `nvidia-gpu-plugin`       |
 * | `--aks-gpu-pools` | `az aks nodepool list -o json`         | `aks-gpu-pools` | `gpu-driver`              |
 * | `--gke-gpu-pools` | `gcloud container node-pools list`     | `gke-gpu-pools` | `gpu-driver-installation` |
 *
 * Value semantics (upstream does not document them; these are ours):
 *
 * - The main key is one stable lowercase token. For node pools it is the per-pool
 *   value when every GPU pool agrees, {@link MIXED} when they disagree, and
 *   {@link ABSENT} when the dump has no GPU pool. For OKE it is the NvidiaGpuPlugin
 *   add-on's `lifecycle-state` as a token (`active`, `needs-attention`, ...) or `absent`.
 * - AKS `<pool>.gpu-driver`: `install` or `none`. `gpuProfile.driver` (`Install`/`None`,
 *   newer API) wins; else the legacy `SkipGPUDriverInstall=true` tag (any case) means
 *   `none`; else AKS's default, `install`. `<pool>.gpu-driver-source` says which
 *   (`gpu-profile`, `tag`, `default`). A GPU pool is an NVIDIA N-series `vmSize`
 *   (`Standard_NC*`, `ND*`, `NV*`; AMD sizes excluded) or one with `gpuProfile.driver`.
 * - GKE `<pool>.gpu-driver-installation`: `default`, `latest`, `installation-disabled`,
 *   or `unspecified` (`GPU_DRIVER_VERSION_UNSPECIFIED` or no config: GKE's
 *   version-dependent default, automatic from 1.30.1-gke.1156000, manual before; see
 *   `<pool>.version`). A GPU pool has an accelerator with a count above zero, or a
 *   machine type with built-in GPUs (`a2-`, `a3-`, `a4-`, `g2-`, `g4-`).
 * - Detail keys are `<pool>.<key>` for GPU pools only (CPU pools would add noise to a
 *   drift diff), plus `pool-count`, `gpu-pool-count` and `gpu-pools` (sorted names).
 *   Other detail values are verbatim from the dump (`vm-size`, `machine-type`, ...).
 * - Unknown future enum values are kept (as tokens) rather than rejected.
 *
 * A file that is not the expected JSON is a {@link UsageError} naming the flag, the
 * path and what was expected.
 *
 * @module
 */
import { Buffer } from "node:buffer";
import { UsageError } from "../errors.ts";
import { normalizeSnapshot, sourceContext } from "../snapshot/mod.ts";
import type { Measurement, ReadingMap, Snapshot, Subtype } from "../snapshot/mod.ts";

/** The largest dump accepted, in bytes (real dumps are kilobytes). */
export const MAX_PROJECTION_BYTES = 16 * 1024 * 1024;
/** The main value when GPU pools disagree. */
export const MIXED = "mixed";
/** The main value when there is no GPU pool (or no NvidiaGpuPlugin add-on). */
export const ABSENT = "absent";
/** The OKE add-on whose state is projected. */
export const OKE_NVIDIA_GPU_PLUGIN = "NvidiaGpuPlugin";

/** What each projection flag reads, and where it goes. */
export interface ProjectionSpec {
  /** The CLI flag, e.g. `--aks-gpu-pools`. */
  flag: string;
  /** The command whose output the file must hold. */
  command: string;
  /** The K8s subtype it becomes. */
  subtype: string;
  /** The main reading key. */
  key: string;
}

/** The three projections, by flag property name. */
export const PROJECTIONS = {
  okeAddons: {
    flag: "--oke-addons",
    command: "oci ce cluster list-addons --cluster-id <id> --all --output json",
    subtype: "oke-addons",
    key: "nvidia-gpu-plugin",
  },
  aksGpuPools: {
    flag: "--aks-gpu-pools",
    command: "az aks nodepool list -o json",
    subtype: "aks-gpu-pools",
    key: "gpu-driver",
  },
  gkeGpuPools: {
    flag: "--gke-gpu-pools",
    command: "gcloud container node-pools list --cluster <c> --format=json",
    subtype: "gke-gpu-pools",
    key: "gpu-driver-installation",
  },
} as const satisfies Record<string, ProjectionSpec>;

type Json = Record<string, unknown>;

/** Where a value is being read, for error messages. */
interface Where {
  spec: ProjectionSpec;
  path: string;
}

function isRecord(value: unknown): value is Json {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function describe(value: unknown): string {
  if (value === undefined) return "missing";
  if (value === null) return "null";
  if (Array.isArray(value)) return "an array";
  switch (typeof value) {
    case "object":
      return "an object";
    case "string":
      return value === ""
        ? "an empty string"
        : `the string '${value.length > 40 ? value.slice(0, 40) + "..." : value}'`;
    default:
      return `${typeof value === "number" ? "the number" : ""} ${String(value)}`.trim();
  }
}

/** The state of a whole document: `is empty`, `is an object`, ... */
function describeDoc(doc: unknown): string {
  return doc === undefined ? "is empty" : `is ${describe(doc)}`;
}

function invalid(where: Where, expected: string, state: string): UsageError {
  return new UsageError(
    `Cannot read '${where.spec.flag}' file '${where.path}' as ${expected}: current value ${state}`,
  );
}

function fieldError(where: Where, at: string, kind: string, value: unknown): UsageError {
  return invalid(
    where,
    `'${at}' must be ${kind}, as printed by '${where.spec.command}'`,
    `is ${describe(value)}`,
  );
}

/** A lowercase token for an enum value: `INSTALLATION_DISABLED` → `installation-disabled`. */
function token(value: string): string {
  return value.trim().toLowerCase().replace(/[\s_]+/g, "-");
}

/** Parses the dump; undefined for an empty (whitespace-only) file. */
function parseDump(where: Where, text: string, expected: string): unknown {
  if (
    text.length > MAX_PROJECTION_BYTES || Buffer.byteLength(text, "utf8") > MAX_PROJECTION_BYTES
  ) {
    throw invalid(
      where,
      `it must be at most ${MAX_PROJECTION_BYTES / 1024 / 1024} MiB`,
      `is ${Buffer.byteLength(text, "utf8")} bytes`,
    );
  }
  const body = text.startsWith("\uFEFF") ? text.slice(1) : text;
  if (body.includes("\u0000")) {
    throw invalid(
      where,
      expected,
      "looks UTF-16 encoded (PowerShell '>' writes UTF-16; re-save the file as UTF-8)",
    );
  }
  if (body.trim() === "") return undefined;
  try {
    return JSON.parse(body);
  } catch (error) {
    const failure = invalid(
      where,
      expected,
      `is not JSON (${error instanceof Error ? error.message : String(error)})`,
    );
    throw new UsageError(failure.message, {
      cause: error,
      details: [
        `hint: save the output of '${where.spec.command}' unchanged (JSON, not a table or YAML)`,
      ],
    });
  }
}

function requireString(where: Where, item: Json, key: string, at: string): string {
  const value = item[key];
  if (typeof value !== "string" || value === "") {
    throw fieldError(where, `${at}.${key}`, "a non-empty string", value);
  }
  return value;
}

function optionalString(where: Where, item: Json, key: string, at: string): string | undefined {
  const value = item[key];
  if (value === undefined || value === null) return undefined;
  if (typeof value !== "string") throw fieldError(where, `${at}.${key}`, "a string or null", value);
  return value;
}

function optionalRecord(where: Where, item: Json, key: string, at: string): Json | undefined {
  const value = item[key];
  if (value === undefined || value === null) return undefined;
  if (!isRecord(value)) throw fieldError(where, `${at}.${key}`, "an object or null", value);
  return value;
}

function optionalArray(where: Where, item: Json, key: string, at: string): unknown[] {
  const value = item[key];
  if (value === undefined || value === null) return [];
  if (!Array.isArray(value)) throw fieldError(where, `${at}.${key}`, "an array or null", value);
  return value;
}

/** An integer field that the API may print as a number or (int64 in gcloud) a string. */
function optionalCount(where: Where, item: Json, key: string, at: string): number | undefined {
  const value = item[key];
  if (value === undefined || value === null) return undefined;
  if (typeof value === "number" && Number.isSafeInteger(value) && value >= 0) return value;
  if (typeof value === "string" && /^\d{1,15}$/.test(value)) return Number(value);
  throw fieldError(where, `${at}.${key}`, "a non-negative integer", value);
}

/** A node-pool dump: the JSON array of objects the pool-listing CLI prints. */
function poolRecords(where: Where, text: string): Json[] {
  const expected = `it must be the JSON array printed by '${where.spec.command}'`;
  const doc = parseDump(where, text, expected);
  if (!Array.isArray(doc)) throw invalid(where, expected, describeDoc(doc));
  return records(where, doc, "");
}

function records(where: Where, list: unknown[], at: string): Json[] {
  return list.map((item, index) => {
    if (!isRecord(item)) throw fieldError(where, `${at}[${index}]`, "an object", item);
    return item;
  });
}

function assertUniqueNames(where: Where, names: readonly string[], what: string): void {
  const seen = new Set<string>();
  for (const name of names) {
    if (seen.has(name)) {
      throw invalid(
        where,
        `${what} names must be unique (were two dumps concatenated?)`,
        `has '${name}' more than once`,
      );
    }
    seen.add(name);
  }
}

/** The value every GPU pool agrees on, {@link MIXED}, or {@link ABSENT} when none. */
function agree(values: readonly string[]): string {
  const first = values[0];
  if (first === undefined) return ABSENT;
  return values.every((v) => v === first) ? first : MIXED;
}

function projected(spec: ProjectionSpec, path: string, data: ReadingMap): Subtype {
  return { subtype: spec.subtype, data, context: sourceContext("ok", `${spec.flag} ${path}`) };
}

function poolSummary(
  spec: ProjectionSpec,
  totalPools: number,
  gpuPools: readonly { name: string; value: string }[],
): ReadingMap {
  const names = gpuPools.map((p) => p.name).sort();
  return {
    [spec.key]: agree(gpuPools.map((p) => p.value)),
    "pool-count": totalPools,
    "gpu-pool-count": gpuPools.length,
    "gpu-pools": names.join(","),
  };
}

/**
 * Projects an OKE add-on list into the `oke-addons` subtype: `nvidia-gpu-plugin` (the
 * NvidiaGpuPlugin add-on's lifecycle state as a token, or `absent`), its `version`
 * (installed), `configured-version` (only when pinned; OKE auto-updates otherwise),
 * `error` (the add-on error, when any) and `addons` (every add-on name, sorted).
 * Accepts `{"data": [...]}`, the bare array (`--query data`) and an empty file (the OCI
 * CLI prints nothing for an empty list).
 *
 * @param text the file content
 * @param source the file path, as the user gave it
 * @returns the subtype
 * @throws {UsageError} when the text is not that JSON
 */
export function projectOkeAddons(text: string, source: string): Subtype {
  const spec = PROJECTIONS.okeAddons;
  const where = { spec, path: source };
  const expected = `it must be the JSON object {"data": [...]} printed by '${spec.command}'`;
  const doc = parseDump(where, text, expected);
  let list: unknown[];
  let at = "data";
  if (doc === undefined) list = [];
  else if (Array.isArray(doc)) {
    list = doc;
    at = "";
  } else if (isRecord(doc)) {
    const data = doc.data;
    if (!Array.isArray(data)) throw fieldError(where, "data", "an array of add-ons", data);
    list = data;
  } else throw invalid(where, expected, describeDoc(doc));
  const addons = records(where, list, at).map((item, index) => {
    const here = `${at}[${index}]`;
    return {
      name: requireString(where, item, "name", here),
      state: requireString(where, item, "lifecycle-state", here),
      installed: optionalString(where, item, "current-installed-version", here),
      configured: optionalString(where, item, "version", here),
      error: optionalRecord(where, item, "addon-error", here),
    };
  });
  assertUniqueNames(where, addons.map((a) => a.name), "add-on");
  const data: ReadingMap = { addons: addons.map((a) => a.name).sort().join(",") };
  const plugin = addons.find((a) => a.name === OKE_NVIDIA_GPU_PLUGIN);
  data[spec.key] = plugin ? token(plugin.state) : ABSENT;
  if (plugin?.installed) data.version = plugin.installed;
  if (plugin?.configured) data["configured-version"] = plugin.configured;
  if (plugin?.error) {
    const code = typeof plugin.error.code === "string" ? plugin.error.code : "";
    const message = typeof plugin.error.message === "string" ? plugin.error.message : "";
    const line = [code, message].filter(Boolean).join(": ");
    if (line) data.error = line;
  }
  return projected(spec, source, data);
}

/** NVIDIA N-series Azure sizes; AMD GPU sizes (MI300X, NVv4, NGads V620) are excluded. */
function isAksGpuSize(vmSize: string): boolean {
  if (/_MI\d+X|^Standard_NV\d+as_v4$|^Standard_NG/i.test(vmSize)) return false;
  return /^Standard_N[CDV]/i.test(vmSize);
}

/**
 * Projects an AKS node pool list into the `aks-gpu-pools` subtype: `gpu-driver`
 * (`install`, `none`, `mixed` or `absent`), the pool counts, and per GPU pool
 * `<pool>.gpu-driver`, `.gpu-driver-source`, `.vm-size`, `.count`, `.os-type`,
 * `.os-sku`, `.mode`, `.gpu-instance-profile` and `.taints` (those present).
 *
 * @param text the file content
 * @param source the file path, as the user gave it
 * @returns the subtype
 * @throws {UsageError} when the text is not that JSON
 */
export function projectAksGpuPools(text: string, source: string): Subtype {
  const spec = PROJECTIONS.aksGpuPools;
  const where = { spec, path: source };
  const pools = poolRecords(where, text).map((item, index) => {
    const at = `[${index}]`;
    const name = requireString(where, item, "name", at);
    const vmSize = requireString(where, item, "vmSize", at);
    const gpuProfile = optionalRecord(where, item, "gpuProfile", at);
    const driver = gpuProfile
      ? optionalString(where, gpuProfile, "driver", `${at}.gpuProfile`)
      : undefined;
    const tags = optionalRecord(where, item, "tags", at) ?? {};
    const skipTag = Object.entries(tags).find(([k]) => k.toLowerCase() === "skipgpudriverinstall");
    const taints = optionalArray(where, item, "nodeTaints", at).map((t, i) => {
      if (typeof t !== "string") throw fieldError(where, `${at}.nodeTaints[${i}]`, "a string", t);
      return t;
    });
    const gpu = Boolean(driver) || isAksGpuSize(vmSize);
    const [value, from] = driver
      ? [token(driver), "gpu-profile"]
      : skipTag
      ? [String(skipTag[1]).trim().toLowerCase() === "true" ? "none" : "install", "tag"]
      : ["install", "default"];
    const details: ReadingMap = {
      "gpu-driver": value,
      "gpu-driver-source": from,
      "vm-size": vmSize,
    };
    const count = optionalCount(where, item, "count", at);
    if (count !== undefined) details.count = count;
    for (
      const [key, field] of [
        ["os-type", "osType"],
        ["os-sku", "osSku"],
        ["mode", "mode"],
        ["gpu-instance-profile", "gpuInstanceProfile"],
      ] as const
    ) {
      const v = optionalString(where, item, field, at);
      if (v) details[key] = v;
    }
    if (taints.length > 0) details.taints = taints.join(",");
    return { name, value, gpu, details };
  });
  assertUniqueNames(where, pools.map((p) => p.name), "node pool");
  return projected(spec, source, poolReadings(spec, pools));
}

function poolReadings(
  spec: ProjectionSpec,
  pools: readonly { name: string; value: string; gpu: boolean; details: ReadingMap }[],
): ReadingMap {
  const gpuPools = pools.filter((p) => p.gpu);
  const data = poolSummary(spec, pools.length, gpuPools);
  for (const pool of gpuPools) {
    for (const [key, value] of Object.entries(pool.details)) data[`${pool.name}.${key}`] = value;
  }
  return data;
}

/** Machine types with GPUs built in (no `--accelerator` needed). */
const GKE_GPU_MACHINE = /^(a2|a3|a4|a4x|g2|g4)-/;

/** `GPU_DRIVER_VERSION_UNSPECIFIED` or no config at all. */
function gkeDriverToken(value: string | undefined): string {
  if (value === undefined || value === "" || value === "GPU_DRIVER_VERSION_UNSPECIFIED") {
    return "unspecified";
  }
  return token(value);
}

/**
 * Projects a GKE node pool list into the `gke-gpu-pools` subtype:
 * `gpu-driver-installation` (`default`, `latest`, `installation-disabled`,
 * `unspecified`, `mixed` or `absent`), the pool counts, and per GPU pool
 * `<pool>.gpu-driver-installation`, `.machine-type`, `.accelerator-type`,
 * `.accelerator-count` (per node), `.gpu-partition-size`, `.gpu-sharing-strategy`,
 * `.max-shared-clients-per-gpu`, `.image-type` and `.version` (those present).
 *
 * @param text the file content
 * @param source the file path, as the user gave it
 * @returns the subtype
 * @throws {UsageError} when the text is not that JSON
 */
export function projectGkeGpuPools(text: string, source: string): Subtype {
  const spec = PROJECTIONS.gkeGpuPools;
  const where = { spec, path: source };
  const pools = poolRecords(where, text).map((item, index) => {
    const at = `[${index}]`;
    const name = requireString(where, item, "name", at);
    const config = optionalRecord(where, item, "config", at);
    if (!config) throw fieldError(where, `${at}.config`, "an object", item.config);
    const machineType = requireString(where, config, "machineType", `${at}.config`);
    const accelerators = records(
      where,
      optionalArray(where, config, "accelerators", `${at}.config`),
      `${at}.config.accelerators`,
    ).map((acc, i) => {
      const here = `${at}.config.accelerators[${i}]`;
      const install = optionalRecord(where, acc, "gpuDriverInstallationConfig", here);
      const sharing = optionalRecord(where, acc, "gpuSharingConfig", here);
      return {
        type: requireString(where, acc, "acceleratorType", here),
        count: optionalCount(where, acc, "acceleratorCount", here) ?? 0,
        driver: gkeDriverToken(
          install
            ? optionalString(
              where,
              install,
              "gpuDriverVersion",
              `${here}.gpuDriverInstallationConfig`,
            )
            : undefined,
        ),
        partition: optionalString(where, acc, "gpuPartitionSize", here),
        strategy: sharing
          ? optionalString(where, sharing, "gpuSharingStrategy", `${here}.gpuSharingConfig`)
          : undefined,
        maxClients: sharing
          ? optionalCount(where, sharing, "maxSharedClientsPerGpu", `${here}.gpuSharingConfig`)
          : undefined,
      };
    }).filter((acc) => acc.count > 0);
    const gpu = accelerators.length > 0 || GKE_GPU_MACHINE.test(machineType);
    const value = accelerators.length > 0
      ? agree(accelerators.map((a) => a.driver))
      : gkeDriverToken(undefined);
    const details: ReadingMap = { "gpu-driver-installation": value, "machine-type": machineType };
    if (accelerators.length > 0) {
      details["accelerator-type"] = [...new Set(accelerators.map((a) => a.type))].join(",");
      details["accelerator-count"] = accelerators.reduce((sum, a) => sum + a.count, 0);
    }
    const joined = (values: (string | undefined)[]) =>
      [...new Set(values.filter((v): v is string => !!v))].join(",");
    const partition = joined(accelerators.map((a) => a.partition));
    if (partition) details["gpu-partition-size"] = partition;
    const strategy = joined(accelerators.map((a) => a.strategy));
    if (strategy) details["gpu-sharing-strategy"] = strategy;
    const maxClients = accelerators.find((a) => a.maxClients !== undefined)?.maxClients;
    if (maxClients !== undefined) details["max-shared-clients-per-gpu"] = maxClients;
    const imageType = optionalString(where, config, "imageType", `${at}.config`);
    if (imageType) details["image-type"] = imageType;
    const version = optionalString(where, item, "version", at);
    if (version) details.version = version;
    return { name, value, gpu, details };
  });
  assertUniqueNames(where, pools.map((p) => p.name), "node pool");
  return projected(spec, source, poolReadings(spec, pools));
}

/**
 * Merges projected subtypes into a snapshot's K8s measurement: a subtype of the same
 * name is replaced in place, others are appended, and the measurement is created when
 * the snapshot has none. The input is not modified.
 *
 * @param snapshot the snapshot the agent produced
 * @param subtypes the projections to merge (none: the snapshot is returned as is)
 * @returns a normalised copy with the projections
 */
export function mergeProjections(snapshot: Snapshot, subtypes: readonly Subtype[]): Snapshot {
  if (subtypes.length === 0) return snapshot;
  const measurements: Measurement[] = snapshot.measurements.map((m) => ({
    type: m.type,
    subtypes: [...m.subtypes],
  }));
  let k8s = measurements.find((m) => m.type === "K8s");
  if (!k8s) {
    k8s = { type: "K8s", subtypes: [] };
    measurements.push(k8s);
  }
  for (const projection of subtypes) {
    const index = k8s.subtypes.findIndex((s) => s.subtype === projection.subtype);
    if (index >= 0) k8s.subtypes[index] = projection;
    else k8s.subtypes.push(projection);
  }
  return normalizeSnapshot({ ...snapshot, measurements });
}
