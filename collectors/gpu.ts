/**
 * The GPU collector: `nvidia-smi -q -x`, parsed with the safe parser in `xml.ts`.
 *
 * Subtypes, in order:
 * - `smi`: exactly upstream's keys, from the first GPU (`gpu-count` is an int);
 * - `models`: one int per product name, the per-model count;
 * - `gpu-<i>`: one per GPU in nvidia-smi's order (PCI bus order), with identity and
 *   configuration keys (never volatile ones such as temperature or current clocks).
 *
 * @module
 */
import type { Measurement, ReadingMap, SourceStatus, Subtype } from "../snapshot/mod.ts";
import { messageOf, statusOf, subtype, throwIfAborted } from "./status.ts";
import type { CollectorDeps } from "./types.ts";
import { child, children, parseXml, textAt, XmlError } from "./xml.ts";
import type { XmlElement, XmlSelection } from "./xml.ts";

/** The command the collector runs. */
export const NVIDIA_SMI = "nvidia-smi";
/** Its arguments. */
export const NVIDIA_SMI_ARGS: readonly string[] = ["-q", "-x"];
const SOURCE = "nvidia-smi -q -x";
/** Upper bound on nvidia-smi output (the parser's bound, too). */
export const MAX_SMI_BYTES = 16 << 20;

/** Upstream's `gpu.*` keys of subtype `smi` and their element under `<gpu>`. */
export const SMI_GPU_KEYS: readonly (readonly [string, string])[] = [
  ["gpu.model", "product_name"],
  ["gpu.product-architecture", "product_architecture"],
  ["gpu.display-mode", "display_mode"],
  ["gpu.display-active", "display_active"],
  ["gpu.persistence-mode", "persistence_mode"],
  ["gpu.addressing-mode", "addressing_mode"],
  ["gpu.vbios-version", "vbios_version"],
  ["gpu.gsp-firmware-version", "gsp_firmware_version"],
];

/**
 * Per-GPU keys of subtype `gpu-<i>`: key, then candidate element paths (first present
 * wins, so older drivers' element names are covered). Values are trimmed strings; a
 * key whose element is missing is left out.
 */
export const GPU_DETAIL_KEYS: readonly (readonly [string, ...string[]])[] = [
  ["model", "product_name"],
  ["brand", "product_brand"],
  ["architecture", "product_architecture"],
  ["uuid", "uuid"],
  ["serial", "serial"],
  ["minor-number", "minor_number"],
  ["board-part-number", "board_part_number"],
  ["vbios-version", "vbios_version"],
  ["gsp-firmware-version", "gsp_firmware_version"],
  ["inforom-version", "inforom_version/img_version"],
  ["persistence-mode", "persistence_mode"],
  ["display-mode", "display_mode"],
  ["addressing-mode", "addressing_mode"],
  ["compute-mode", "compute_mode"],
  ["virtualization-mode", "gpu_virtualization_mode/virtualization_mode"],
  ["memory.total", "fb_memory_usage/total"],
  ["memory.bar1-total", "bar1_memory_usage/total"],
  ["mig.current", "mig_mode/current_mig"],
  ["mig.pending", "mig_mode/pending_mig"],
  ["ecc.current", "ecc_mode/current_ecc"],
  ["ecc.pending", "ecc_mode/pending_ecc"],
  ["power.limit.current", "gpu_power_readings/current_power_limit", "power_readings/power_limit"],
  [
    "power.limit.enforced",
    "gpu_power_readings/enforced_power_limit",
    "power_readings/enforced_power_limit",
  ],
  ["power.limit.requested", "gpu_power_readings/requested_power_limit"],
  [
    "power.limit.default",
    "gpu_power_readings/default_power_limit",
    "power_readings/default_power_limit",
  ],
  ["power.limit.min", "gpu_power_readings/min_power_limit", "power_readings/min_power_limit"],
  ["power.limit.max", "gpu_power_readings/max_power_limit", "power_readings/max_power_limit"],
  ["pcie.gen.max", "pci/pci_gpu_link_info/pcie_gen/max_link_gen"],
  ["pcie.gen.current", "pci/pci_gpu_link_info/pcie_gen/current_link_gen"],
  ["pcie.width.max", "pci/pci_gpu_link_info/link_widths/max_link_width"],
  ["pcie.width.current", "pci/pci_gpu_link_info/link_widths/current_link_width"],
  ["pcie.device-id", "pci/pci_device_id"],
  ["pcie.sub-system-id", "pci/pci_sub_system_id"],
  ["clocks.max.graphics", "max_clocks/graphics_clock"],
  ["clocks.max.sm", "max_clocks/sm_clock"],
  ["clocks.max.memory", "max_clocks/mem_clock"],
  ["clocks.applications.graphics", "applications_clocks/graphics_clock"],
  ["clocks.applications.memory", "applications_clocks/mem_clock"],
  ["clocks.default-applications.graphics", "default_applications_clocks/graphics_clock"],
  ["clocks.default-applications.memory", "default_applications_clocks/mem_clock"],
];

/** Keys of each MIG device, under `mig.<index>.`. */
const MIG_DEVICE_KEYS: readonly (readonly [string, string])[] = [
  ["gpu-instance-id", "gpu_instance_id"],
  ["compute-instance-id", "compute_instance_id"],
  ["sm-count", "device_attributes/shared/multiprocessor_count"],
  ["memory.total", "fb_memory_usage/total"],
];

/**
 * The most GPUs one node's output may list (the largest systems have 16 per node; a
 * document listing more is not a real node's and degrades like a malformed one).
 */
export const MAX_SMI_GPUS = 256;

/** Adds a slash-separated element path to a selection tree. */
function addPath(tree: Record<string, Record<string, unknown>>, path: string): void {
  let node = tree;
  for (const step of path.split("/")) {
    node[step] ??= {};
    node = node[step] as Record<string, Record<string, unknown>>;
  }
}

/**
 * The elements the GPU subtypes read, and only those: the parser builds nothing else, so
 * memory follows what is kept (a valid output's per-process lists, ECC counters, clock
 * samples and the like are checked for well-formedness and dropped).
 */
export const SMI_SELECTION: XmlSelection = (() => {
  const gpu: Record<string, Record<string, unknown>> = {};
  for (const [, element] of SMI_GPU_KEYS) addPath(gpu, element);
  for (const [, ...paths] of GPU_DETAIL_KEYS) for (const path of paths) addPath(gpu, path);
  addPath(gpu, "pci/pci_bus_id");
  addPath(gpu, "mig_devices/mig_device/index");
  for (const [, path] of MIG_DEVICE_KEYS) addPath(gpu, `mig_devices/mig_device/${path}`);
  return { driver_version: {}, cuda_version: {}, gpu } as XmlSelection;
})();

function countSelected(selection: XmlSelection): number {
  let n = 0;
  for (const name in selection) n += 1 + countSelected(selection[name] as XmlSelection);
  return n;
}

/**
 * Elements kept at most: the root, its two version elements and, per GPU, its selected
 * elements with room for 8 MIG devices (the largest GPUs split into 7).
 */
const MAX_SMI_KEPT = (() => {
  const gpu = SMI_SELECTION.gpu as XmlSelection;
  const mig = (gpu.mig_devices as XmlSelection).mig_device as XmlSelection;
  return 3 + MAX_SMI_GPUS * (countSelected(gpu) + 8 * (1 + countSelected(mig)));
})();

/**
 * Parses `nvidia-smi -q -x` output into the GPU subtypes (status `ok`).
 *
 * @param xml the document
 * @returns `smi`, `models` and one `gpu-<i>` per GPU
 * @throws {XmlError} when the document is malformed, truncated or lists more than
 *   {@link MAX_SMI_GPUS} GPUs
 */
export function parseNvidiaSmi(xml: string): Subtype[] {
  const root = parseXml(xml, {
    maxChars: MAX_SMI_BYTES,
    select: SMI_SELECTION,
    maxKept: MAX_SMI_KEPT,
  });
  const gpus = children(root, "gpu");
  if (gpus.length > MAX_SMI_GPUS) {
    throw new XmlError(
      `Cannot read nvidia-smi output: it lists ${gpus.length} GPUs, over the ${MAX_SMI_GPUS} one node can hold`,
    );
  }
  const smi: ReadingMap = {
    driver: textAt(root, "driver_version"),
    "cuda-version": textAt(root, "cuda_version"),
    "gpu-count": gpus.length,
  };
  const first = gpus[0];
  if (first) {
    for (const [key, element] of SMI_GPU_KEYS) smi[key] = textAt(first, element);
  }
  const models: ReadingMap = {};
  for (const gpu of gpus) {
    const model = textAt(gpu, "product_name").trim() || "unknown";
    models[model] = ((models[model] as number | undefined) ?? 0) + 1;
  }
  const out: Subtype[] = [
    subtype("smi", smi, "ok", SOURCE),
    subtype("models", models, "ok", SOURCE),
  ];
  gpus.forEach((gpu, index) => out.push(subtype(`gpu-${index}`, gpuDetails(gpu), "ok", SOURCE)));
  return out;
}

function gpuDetails(gpu: XmlElement): ReadingMap {
  const data: ReadingMap = {};
  const elements = firstElementsByPath(gpu);
  const busId = gpu.attributes.id ?? elements.get("pci/pci_bus_id")?.text;
  if (busId) data["pci-bus-id"] = busId.trim();
  // Indexed loops: see `child()` in xml.ts.
  for (let k = 0; k < GPU_DETAIL_KEYS.length; k++) {
    // A key, then its candidate paths: indexed, without a rest array per key and GPU.
    const entry = GPU_DETAIL_KEYS[k] as (typeof GPU_DETAIL_KEYS)[number];
    for (let p = 1; p < entry.length; p++) {
      const found = elements.get(entry[p] as string);
      if (found !== undefined) {
        data[entry[0]] = found.text.trim();
        break;
      }
    }
  }
  const migRoot = child(gpu, "mig_devices");
  const migDevices = children(migRoot, "mig_device");
  if (migRoot !== undefined) data["mig.device-count"] = migDevices.length;
  migDevices.forEach((device, position) => {
    const index = textAt(device, "index").trim() || String(position);
    for (const [key, path] of MIG_DEVICE_KEYS) {
      const value = firstPresent(device, [path]);
      if (value !== undefined) data[`mig.${index}.${key}`] = value;
    }
  });
  return data;
}

/**
 * The elements below one, by slash-separated path (`pci/pci_gpu_link_info/pcie_gen`), each path's
 * as a lookup step by step finds it: the first child of each name, then the first of the next name
 * in that child. One walk of the kept tree (a few dozen elements per GPU), where a lookup per key
 * scanned the GPU's children again for each of its ~40 keys.
 */
function firstElementsByPath(element: XmlElement): Map<string, XmlElement> {
  const found = new Map<string, XmlElement>();
  const pending: [XmlElement, string][] = [[element, ""]];
  for (let next = pending.pop(); next !== undefined; next = pending.pop()) {
    // Indexed, not destructured: destructuring steps an iterator (see `child()` in xml.ts).
    const prefix = next[1];
    const all = next[0].children;
    for (let i = 0; i < all.length; i++) {
      const item = all[i] as XmlElement;
      const path = prefix + item.name;
      if (found.has(path)) continue;
      found.set(path, item);
      if (item.children.length > 0) pending.push([item, path + "/"]);
    }
  }
  return found;
}

/** The trimmed text of the first path present below an element. */
function firstPresent(element: XmlElement, paths: readonly string[]): string | undefined {
  for (const path of paths) {
    let current: XmlElement | undefined = element;
    for (const step of path.split("/")) current = child(current, step);
    if (current !== undefined) return current.text.trim();
  }
  return undefined;
}

/**
 * The GPU measurement when nvidia-smi could not be asked: upstream's `gpu-count: 0`,
 * with the reason in the context.
 *
 * @param status why (absent: no nvidia-smi; failed; timeout; denied)
 * @param message one line of detail
 * @returns the measurement
 */
export function gpuUnavailable(status: SourceStatus, message: string): Measurement {
  return { type: "GPU", subtypes: [subtype("smi", { "gpu-count": 0 }, status, SOURCE, message)] };
}

/**
 * Runs nvidia-smi and builds the GPU measurement. Never throws: every failure gives
 * {@link gpuUnavailable} with a status.
 *
 * @param deps the command runner and logger
 * @param options deadline and signal
 * @returns the measurement
 */
export async function collectGpu(
  deps: Pick<CollectorDeps, "exec" | "log">,
  options: { timeoutMs: number; signal?: AbortSignal },
): Promise<Measurement> {
  try {
    throwIfAborted(options.signal, "GPU");
    const runOptions = options.signal === undefined
      ? { timeoutMs: options.timeoutMs, maxOutputBytes: MAX_SMI_BYTES }
      : { timeoutMs: options.timeoutMs, signal: options.signal, maxOutputBytes: MAX_SMI_BYTES };
    const result = await deps.exec.run(NVIDIA_SMI, [...NVIDIA_SMI_ARGS], runOptions);
    if (result.exitCode !== 0) {
      const stderr = result.stderr.trim().split("\n")[0] ?? "";
      deps.log.warn("nvidia-smi failed", { exitCode: result.exitCode, stderr });
      return gpuUnavailable(
        "failed",
        `Cannot run '${SOURCE}': it exited with code ${result.exitCode}${
          stderr ? `: ${stderr}` : ""
        }`,
      );
    }
    const text = new TextDecoder().decode(result.stdout);
    try {
      return { type: "GPU", subtypes: parseNvidiaSmi(text) };
    } catch (error) {
      deps.log.warn("nvidia-smi output did not parse", { error: messageOf(error) });
      return gpuUnavailable("failed", messageOf(error));
    }
  } catch (error) {
    const status = statusOf(error);
    if (status !== "absent") deps.log.warn("GPU collection degraded", { error: messageOf(error) });
    return gpuUnavailable(status, messageOf(error));
  }
}
