/**
 * Node profiles (`tests/fixtures/node-profiles/*.yaml`) turned into Node objects and per-node
 * `nvidia-smi` fixtures.
 *
 * GPU nodes get what the NVIDIA GPU Operator's feature discovery and device plugin would put there:
 * labels `nvidia.com/gpu.present=true`, `nvidia.com/gpu.product`, `nvidia.com/gpu.count`,
 * `nvidia.com/gpu.memory`, `nvidia.com/cuda.driver.major|minor`, capacity `nvidia.com/gpu: <count>`
 * and the taint `nvidia.com/gpu=present:NoSchedule` (as GPU node groups are usually tainted, so only
 * pods that tolerate it land there). CPU nodes get none of these.
 *
 * @module
 */

import { readdirSync, readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { parse } from "yaml";

/** The repository's own fixtures folder (`tests/fixtures`): real captures and node profiles. */
export const FIXTURES_DIR: string = resolve(fileURLToPath(new URL("../fixtures", import.meta.url)));

/** The GPU taint put on every GPU node. */
export const GPU_TAINT = { key: "nvidia.com/gpu", value: "present", effect: "NoSchedule" } as const;

/** One node profile as read from its YAML. */
export interface NodeProfile {
  name: string;
  labels: Record<string, string>;
  instanceType: string;
  arch: string;
  osImage: string;
  resources: { cpu: string; memory: string; storage: string };
  gpu?: {
    product: string;
    count: number;
    memory: number;
    driver: string;
    driverMajor: string;
    driverMinor: string;
  };
}

/**
 * Reads every profile in the fixtures folder.
 *
 * @param dir profiles folder (default `<fixtures>/node-profiles`)
 * @returns profiles by name
 * @throws {Error} when a file does not parse
 */
export function loadProfiles(
  dir: string = join(FIXTURES_DIR, "node-profiles"),
): Map<string, NodeProfile> {
  const out = new Map<string, NodeProfile>();
  for (const f of readdirSync(dir).filter((f) => /\.ya?ml$/.test(f)).sort()) {
    // deno-lint-ignore no-explicit-any -- fixture YAML, shape checked by use below
    const doc = parse(readFileSync(join(dir, f), "utf8")) as any;
    const spec = doc.spec ?? {};
    const profile: NodeProfile = {
      name: String(doc.metadata.name),
      labels: doc.metadata.labels ?? {},
      instanceType: String(spec.instanceType),
      arch: String(spec.arch ?? "amd64"),
      osImage: String(spec.osImage ?? "Linux"),
      resources: {
        cpu: String(spec.resources?.cpu ?? "4"),
        memory: String(spec.resources?.memory ?? "16Gi"),
        storage: String(spec.resources?.storage ?? "100Gi"),
      },
    };
    if (spec.gpu) {
      profile.gpu = {
        product: String(spec.gpu.product),
        count: Number(spec.gpu.count),
        memory: Number(spec.gpu.memory),
        driver: String(spec.gpu.driver),
        driverMajor: String(spec.gpu.driverMajor),
        driverMinor: String(spec.gpu.driverMinor),
      };
    }
    out.set(profile.name, profile);
  }
  return out;
}

/**
 * Builds the Node object a kubelet would register for this profile.
 *
 * @param profile the node's profile
 * @param name node name
 * @param ip the node's own address (InternalIP)
 * @param kubeletPort port of the log server
 * @param version the cluster's Kubernetes version (reported as kubelet version)
 * @returns a v1 Node
 */
export function nodeObject(
  profile: NodeProfile,
  name: string,
  ip: string,
  kubeletPort: number,
  version: string,
): Record<string, unknown> {
  const labels: Record<string, string> = {
    "kubernetes.io/hostname": name,
    "kubernetes.io/os": "linux",
    "kubernetes.io/arch": profile.arch,
    "node.kubernetes.io/instance-type": profile.instanceType,
    "aicr.nvidia.com/node-profile": profile.name,
  };
  for (const [k, v] of Object.entries(profile.labels)) labels[`aicr.nvidia.com/${k}`] = String(v);
  const capacity: Record<string, string> = {
    cpu: profile.resources.cpu,
    memory: profile.resources.memory,
    "ephemeral-storage": profile.resources.storage,
    pods: "110",
  };
  const taints: unknown[] = [];
  const gpu = profile.gpu;
  if (gpu) {
    Object.assign(labels, {
      "nvidia.com/gpu.present": "true",
      "nvidia.com/gpu.product": gpu.product,
      "nvidia.com/gpu.count": String(gpu.count),
      "nvidia.com/gpu.memory": String(gpu.memory),
      "nvidia.com/cuda.driver.major": gpu.driverMajor,
      "nvidia.com/cuda.driver.minor": gpu.driverMinor,
    });
    capacity["nvidia.com/gpu"] = String(gpu.count);
    taints.push({ ...GPU_TAINT });
  }
  const now = new Date().toISOString().replace(/\.\d+Z$/, "Z");
  const cond = (type: string, status: string, reason: string, message: string) => ({
    type,
    status,
    reason,
    message,
    lastHeartbeatTime: now,
    lastTransitionTime: now,
  });
  return {
    apiVersion: "v1",
    kind: "Node",
    metadata: { name, labels },
    spec: taints.length ? { taints } : {},
    status: {
      capacity,
      allocatable: capacity,
      conditions: [
        cond(
          "MemoryPressure",
          "False",
          "KubeletHasSufficientMemory",
          "kubelet has sufficient memory available",
        ),
        cond("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
        cond(
          "PIDPressure",
          "False",
          "KubeletHasSufficientPID",
          "kubelet has sufficient PID available",
        ),
        cond("Ready", "True", "KubeletReady", "aicr kubelet stand-in is posting ready status"),
      ],
      addresses: [{ type: "InternalIP", address: ip }, { type: "Hostname", address: name }],
      daemonEndpoints: { kubeletEndpoint: { Port: kubeletPort } },
      nodeInfo: {
        machineID: "",
        systemUUID: "",
        bootID: "",
        kernelVersion: Deno.osRelease().split(" ")[0],
        osImage: profile.osImage,
        containerRuntimeVersion: "aicr-kubelet://0.1.0",
        kubeletVersion: version,
        kubeProxyVersion: "",
        operatingSystem: "linux",
        architecture: profile.arch,
      },
    },
  };
}

/**
 * The `nvidia-smi -q -x` XML for a GPU profile: the H100 fixture as is for H100 profiles, and for
 * others the fixture with product name, architecture, driver version and GPU count substituted.
 *
 * @param gpu the profile's GPU section
 * @param fixture the H100 XML (default the shared fixture)
 * @returns XML text
 */
export function nvidiaSmiXml(
  gpu: NonNullable<NodeProfile["gpu"]>,
  fixture: string = readFileSync(join(FIXTURES_DIR, "nvidia-smi-q-x.h100.xml"), "utf8"),
): string {
  if (/H100/.test(gpu.product)) return fixture;
  const product = gpu.product.replace(/-/g, " ");
  const arch = /GB?200|B200|B100/.test(gpu.product) ? "Blackwell" : "Hopper";
  return fixture
    .replace(
      /<driver_version>[^<]*<\/driver_version>/g,
      `<driver_version>${gpu.driver}</driver_version>`,
    )
    .replace(/<product_name>[^<]*<\/product_name>/g, `<product_name>${product}</product_name>`)
    .replace(
      /<product_architecture>[^<]*<\/product_architecture>/g,
      `<product_architecture>${arch}</product_architecture>`,
    )
    .replace(/<attached_gpus>[^<]*<\/attached_gpus>/, `<attached_gpus>${gpu.count}</attached_gpus>`)
    .replace(/(<total>)81559 MiB(<\/total>)/g, `$1${gpu.memory} MiB$2`);
}

/** The file name the fake `nvidia-smi` reads its XML from, in its own folder. */
export const NVIDIA_SMI_XML_NAME = "nvidia-smi-q-x.xml";

/**
 * A POSIX sh `nvidia-smi` that prints {@link NVIDIA_SMI_XML_NAME} from its own folder for
 * `-q -x` (in any order) and a short summary otherwise. Reading beside itself keeps it working
 * wherever its folder is mounted (the kubelet stages it into every container of a GPU node).
 *
 * @param gpu the profile's GPU block
 * @returns the script text
 */
export function nvidiaSmiScript(gpu: NonNullable<NodeProfile["gpu"]>): string {
  const product = gpu.product.replace(/-/g, " ");
  return `#!/bin/sh
# aicr test kubelet: fake nvidia-smi for a ${gpu.product} node
q=0; x=0; l=0
for a in "$@"; do
  case "$a" in
    -q|--query) q=1 ;;
    -x|--xml-format) x=1 ;;
    -qx|-xq) q=1; x=1 ;;
    -L|--list-gpus) l=1 ;;
  esac
done
if [ $q = 1 ] && [ $x = 1 ]; then exec cat "$(dirname "$0")/${NVIDIA_SMI_XML_NAME}"; fi
if [ $l = 1 ]; then
  i=0; while [ $i -lt ${gpu.count} ]; do echo "GPU $i: ${product} (UUID: GPU-00000000-0000-0000-0000-00000000000$i)"; i=$((i+1)); done
  exit 0
fi
echo "NVIDIA-SMI ${gpu.driver}  Driver Version: ${gpu.driver}  (aicr test kubelet fake: ${gpu.count}x ${product})"
`;
}

/**
 * Parses `profile=count,...`.
 *
 * @param spec the flag value
 * @returns counts by profile
 * @throws {RangeError} on a malformed entry
 */
export function parseNodes(spec: string): Record<string, number> {
  const out: Record<string, number> = {};
  for (const part of spec.split(",").map((s) => s.trim()).filter(Boolean)) {
    const [name, count = "1"] = part.split("=");
    const n = Number(count);
    if (!name || !Number.isInteger(n) || n < 0) {
      throw new RangeError(`Cannot parse node spec "${part}"`);
    }
    out[name] = n;
  }
  return out;
}
