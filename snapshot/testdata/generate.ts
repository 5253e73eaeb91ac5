/**
 * Test and bench support: realistic node snapshots built from the real H100 fixture
 * (`tests/fixtures/nvidia-smi-q-x.h100.xml`: 8x NVIDIA H100 80GB HBM3, driver
 * 570.86.15, CUDA 12.8) and realistic OS, SystemD, K8s and NodeTopology readings of an
 * EKS p5.48xlarge node. Not part of the library surface.
 *
 * @module
 */
import { createSnapshot } from "../model.ts";
import type { Measurement, MeasurementType, Reading, Snapshot } from "../model.ts";

/** The GPU readings of the real H100 fixture, as the `smi` subtype carries them. */
export const H100_SMI: Readonly<Record<string, Reading>> = {
  "cuda-version": "12.8",
  driver: "570.86.15",
  "gpu-count": 8,
  "gpu.addressing-mode": "None",
  "gpu.display-active": "Disabled",
  "gpu.display-mode": "Enabled",
  "gpu.gsp-firmware-version": "570.86.15",
  "gpu.model": "NVIDIA H100 80GB HBM3",
  "gpu.persistence-mode": "Disabled",
  "gpu.product-architecture": "Hopper",
  "gpu.vbios-version": "96.00.A5.00.01",
};

/** Options for {@link makeNodeSnapshot}. */
export interface NodeSnapshotOptions {
  /** Names of every node in the cluster (for NodeTopology). @default [node] */
  clusterNodes?: readonly string[];
  /** Collection time. @default 2026-03-21T10:30:00Z */
  timestamp?: Date;
  /** A seed that changes the volatile readings (boot id, counters, PIDs). @default 1 */
  boot?: number;
}

function hex(seed: number, length: number): string {
  let out = "";
  let x = (seed * 2654435761) >>> 0;
  while (out.length < length) {
    x = (x * 1103515245 + 12345) >>> 0;
    out += x.toString(16).padStart(8, "0");
  }
  return out.slice(0, length);
}

function uuid(seed: number): string {
  const h = hex(seed, 32);
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${
    h.slice(20, 32)
  }`;
}

/**
 * Builds the snapshot of one H100 node.
 *
 * @param node the node name
 * @param options cluster nodes, time and boot seed
 * @returns a normalised snapshot
 */
export function makeNodeSnapshot(node: string, options: NodeSnapshotOptions = {}): Snapshot {
  const {
    clusterNodes = [node],
    timestamp = new Date("2026-03-21T10:30:00Z"),
    boot = 1,
  } = options;
  const nodes = [...clusterNodes].sort();
  const instance = `i-0${hex(node.length * 7919 + node.charCodeAt(node.length - 1), 16)}`;
  const measurements: Measurement[] = [
    {
      type: "GPU",
      subtypes: [{ subtype: "smi", data: { ...H100_SMI }, context: ctx("nvidia-smi -q -x") }],
    },
    {
      type: "OS",
      subtypes: [
        {
          subtype: "grub",
          data: {
            BOOT_IMAGE: "/boot/vmlinuz-6.8.0-1028-aws",
            console: "ttyS0",
            hugepages: "5128",
            hugepagesz: "2M",
            iommu: "pt",
            "nvme_core.io_timeout": "4294967295",
            numa_balancing: "disable",
            ro: "",
            quiet: "",
          },
          context: ctx("/proc/cmdline"),
        },
        {
          subtype: "sysctl",
          data: {
            "/proc/sys/fs/aio-max-nr": "1048576",
            "/proc/sys/fs/aio-nr": String(4096 + boot * 64),
            "/proc/sys/fs/dentry-state": `${180000 + boot * 17}\t${160000 + boot}\t45\t0\t${
              2000 + boot
            }\t0`,
            "/proc/sys/fs/file-max": "9223372036854775807",
            "/proc/sys/fs/file-nr": `${12000 + boot * 3}\t0\t9223372036854775807`,
            "/proc/sys/fs/inode-nr": `${150000 + boot * 11}\t${3000 + boot}`,
            "/proc/sys/fs/inode-state": `${150000 + boot * 11}\t${3000 + boot}\t0\t0\t0\t0\t0`,
            "/proc/sys/fs/inotify/max_user_instances": "8192",
            "/proc/sys/fs/inotify/max_user_watches": "524288",
            "/proc/sys/fs/nr_open": "1073741816",
            "/proc/sys/kernel/hostname": node,
            "/proc/sys/kernel/ns_last_pid": String(100000 + boot * 977),
            "/proc/sys/kernel/numa_balancing": "0",
            "/proc/sys/kernel/osrelease": "6.8.0-1028-aws",
            "/proc/sys/kernel/panic": "10",
            "/proc/sys/kernel/panic_on_oops": "1",
            "/proc/sys/kernel/pid_max": "4194304",
            "/proc/sys/kernel/printk": "4\t4\t1\t7",
            "/proc/sys/kernel/pty/nr": String(boot % 5),
            "/proc/sys/kernel/random/boot_id": uuid(boot * 31 + node.length),
            "/proc/sys/kernel/random/entropy_avail": "256",
            "/proc/sys/kernel/random/uuid": uuid(boot * 97 + node.length),
            "/proc/sys/kernel/sched_autogroup_enabled": "0",
            "/proc/sys/kernel/threads-max": "16510935",
            "/proc/sys/kernel/yama/ptrace_scope": "1",
            "/proc/sys/vm/dirty_background_ratio": "10",
            "/proc/sys/vm/dirty_ratio": "20",
            "/proc/sys/vm/max_map_count": "1048576",
            "/proc/sys/vm/min_free_kbytes": "4194304",
            "/proc/sys/vm/nr_hugepages": "5128",
            "/proc/sys/vm/overcommit_memory": "1",
            "/proc/sys/vm/swappiness": "60",
            "/proc/sys/vm/zone_reclaim_mode": "0",
          },
          context: ctx("/proc/sys"),
        },
        {
          subtype: "kmod",
          data: Object.fromEntries(
            [
              "br_netfilter",
              "efa",
              "ena",
              "gdrdrv",
              "ib_core",
              "ib_uverbs",
              "nf_conntrack",
              "nvidia",
              "nvidia_drm",
              "nvidia_modeset",
              "nvidia_peermem",
              "nvidia_uvm",
              "overlay",
              "xt_conntrack",
            ].map((m) => [m, true]),
          ),
          context: ctx("/proc/modules"),
        },
        {
          subtype: "release",
          data: {
            ID: "ubuntu",
            ID_LIKE: "debian",
            NAME: "Ubuntu",
            PRETTY_NAME: "Ubuntu 24.04.1 LTS",
            VERSION: "24.04.1 LTS (Noble Numbat)",
            VERSION_CODENAME: "noble",
            VERSION_ID: "24.04",
          },
          context: ctx("/etc/os-release"),
        },
      ],
    },
    {
      type: "SystemD",
      subtypes: [
        unit("containerd.service", boot, 1200, {
          ExecStart: "/usr/bin/containerd",
          LimitNOFILE: 1048576,
        }),
        {
          subtype: "docker.service",
          data: { ActiveState: "inactive", LoadState: "not-found", SubState: "dead" },
          context: ctx("/run/systemd/private"),
        },
        unit("kubelet.service", boot, 1800, {
          ExecStart: "/usr/bin/kubelet",
          LimitNOFILE: 1048576,
        }),
      ],
    },
    {
      type: "K8s",
      subtypes: [
        {
          subtype: "server",
          data: { goVersion: "go1.24.4", platform: "linux/amd64", version: "v1.33.5-eks-3025e55" },
          context: ctx("GET /version"),
        },
        {
          subtype: "image",
          data: {
            aicr: "v1.0.0",
            "aws-node": "v1.19.2-eksbuild.1",
            coredns: "v1.11.4-eksbuild.2",
            "dcgm-exporter": "4.2.3-4.1.3-ubuntu22.04",
            "gpu-operator": "v25.10.1",
            "k8s-device-plugin": "v0.17.1",
            "kube-proxy": "v1.33.5-eksbuild.2",
            "nvidia-container-toolkit": "v1.17.8-ubuntu20.04",
          },
          context: ctx("LIST pods"),
        },
        {
          subtype: "policy",
          data: {
            "devicePlugin.enabled": "true",
            "driver.enabled": "true",
            "driver.version": "570.86.15",
            "toolkit.enabled": "true",
          },
          context: ctx("ClusterPolicy"),
        },
        {
          subtype: "node",
          data: {
            "container-runtime-id": "containerd://2.0.3",
            "container-runtime-name": "containerd",
            "container-runtime-version": "2.0.3",
            "kernel-version": "6.8.0-1028-aws",
            "kubelet-version": "v1.33.5-eks-3025e55",
            "operating-system": "linux",
            "os-image": "Ubuntu 24.04.1 LTS",
            provider: "eks",
            "provider-id": `aws:///us-west-2a/${instance}`,
            "source-node": node,
          },
          context: ctx(`GET node/${node}`),
        },
      ],
    },
    {
      type: "NodeTopology",
      subtypes: [
        {
          subtype: "summary",
          data: { "label-count": 3, "node-count": nodes.length, "taint-count": 1 },
          context: ctx("LIST nodes"),
        },
        {
          subtype: "taint",
          data: { "nvidia.com/gpu": `NoSchedule||${nodes.join(",")}` },
          context: ctx("LIST nodes"),
        },
        {
          subtype: "label",
          data: {
            "kubernetes.io/arch": `amd64|${nodes.join(",")}`,
            "node.kubernetes.io/instance-type": `p5.48xlarge|${nodes.join(",")}`,
            "nvidia.com/gpu.present": `true|${nodes.join(",")}`,
          },
          context: ctx("LIST nodes"),
        },
      ],
    },
  ];
  return createSnapshot(measurements, { timestamp, version: "1.0.0", nodeName: node });
}

function ctx(source: string): Record<string, string> {
  return { source, status: "ok" };
}

function unit(
  name: string,
  boot: number,
  pid: number,
  extra: Record<string, Reading>,
): Measurement["subtypes"][number] {
  const started = 1774088400 + boot * 3600;
  return {
    subtype: name,
    data: {
      ActiveEnterTimestamp: started * 1_000_000,
      ActiveEnterTimestampMonotonic: 9_000_000 + boot * 1000,
      ActiveState: "active",
      CPUUsageNSec: 812_000_000_000 + boot * 1_000_003,
      Description: name === "kubelet.service"
        ? "Kubernetes Kubelet"
        : "containerd container runtime",
      ExecMainPID: pid + boot,
      InvocationID: hex(boot * 13 + pid, 32),
      LoadState: "loaded",
      MainPID: pid + boot,
      MemoryCurrent: 512_000_000 + boot * 4096,
      MemoryMax: 18446744073709551615n,
      NRestarts: "0",
      Restart: "always",
      SubState: "running",
      TasksCurrent: 40 + (boot % 7),
      UnitFileState: "enabled",
      ...extra,
    },
    context: ctx("/run/systemd/private"),
  };
}

/**
 * Sets, replaces or (with `undefined`) deletes one reading of a snapshot, in place.
 *
 * @param snapshot the snapshot to change
 * @param path `<Type>.<subtype>.<key>`; the subtype is the longest existing one that fits
 * @param value the new reading, or undefined to delete it
 * @returns the same snapshot
 * @throws {RangeError} when the measurement or subtype does not exist
 */
export function setReading(snapshot: Snapshot, path: string, value: Reading | undefined): Snapshot {
  const dot = path.indexOf(".");
  const type = path.slice(0, dot) as MeasurementType;
  const rest = path.slice(dot + 1);
  const m = snapshot.measurements.find((x) => x.type === type);
  const s = m?.subtypes
    .filter((x) => rest.startsWith(x.subtype + "."))
    .sort((a, b) => b.subtype.length - a.subtype.length)[0];
  if (!s) throw new RangeError(`no subtype for path ${path}`);
  const key = rest.slice(s.subtype.length + 1);
  if (value === undefined) delete s.data[key];
  else s.data[key] = value;
  return snapshot;
}

/**
 * Builds a snapshot of about `bytes` encoded bytes: a node snapshot grown with
 * realistic sysctl entries and container images (for the bench).
 *
 * @param node the node name
 * @param bytes approximate encoded size
 * @returns the snapshot
 */
export function makeLargeSnapshot(node: string, bytes: number): Snapshot {
  const snap = makeNodeSnapshot(node);
  const sysctl = snap.measurements.find((m) => m.type === "OS")?.subtypes
    .find((s) => s.subtype === "sysctl");
  const images = snap.measurements.find((m) => m.type === "K8s")?.subtypes
    .find((s) => s.subtype === "image");
  if (!sysctl || !images) throw new RangeError("fixture lacks sysctl or image");
  // About 55 bytes per entry in YAML.
  const entries = Math.ceil(bytes / 55);
  for (let i = 0; i < entries; i++) {
    if (i % 4 === 0) images.data[`workload-image-${i}`] = `v1.${i % 97}.${i % 13}`;
    else sysctl.data[`/proc/sys/dev/nvme/nvme${i % 64}/queue/param_${i}`] = String(i * 7 % 1000);
  }
  return snap;
}

/**
 * Adds `count` realistic sysctl readings (the same on every node) to a snapshot, in place,
 * so a generated node carries as many readings as a real one (about 1,000).
 *
 * @param snapshot the snapshot to grow
 * @param count readings to add
 * @returns the same snapshot
 */
export function padSnapshot(snapshot: Snapshot, count: number): Snapshot {
  const sysctl = snapshot.measurements.find((m) => m.type === "OS")?.subtypes
    .find((s) => s.subtype === "sysctl");
  if (!sysctl) throw new RangeError("snapshot lacks OS.sysctl");
  const dirs = ["kernel", "vm", "fs", "dev/raid", "kernel/sched", "user", "abi", "debug"];
  for (let i = 0; i < count; i++) {
    sysctl.data[`/proc/sys/${dirs[i % dirs.length]}/param_${i}`] = String((i * 7919) % 65536);
  }
  return snapshot;
}
