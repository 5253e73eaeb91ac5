/**
 * The real-kubelet lane's configuration files, as pure functions of a node's layout: containerd's
 * `config.toml`, the bridge CNI network, the `KubeletConfiguration`, the mount-namespace setup
 * that keeps containerd and the kubelet off the machine's `/var`, `/run` and kernel tunables, and
 * the GPU node's runtime wrapper that injects a fake `nvidia-smi` the way the NVIDIA container
 * runtime injects the real one. `lane.ts` writes them; `config_test.ts` checks them.
 *
 * @module
 */
import { join } from "node:path";

/** Where one lane node keeps everything it writes (all under the lane's state folder). */
export interface NodeLayout {
  /** Node name (as the stand-in names its nodes: `<profile>-<n>`). */
  name: string;
  /** Node profile in `tests/fixtures/node-profiles`. */
  profile: string;
  /** Whether the node emulates a GPU node. */
  gpu: boolean;
  /** The node's own address (InternalIP), on the lane netns' dummy interface. */
  ip: string;
  /** The node's pod subnet (bridge CNI, host-local IPAM), e.g. `10.232.1.0/24`. */
  podSubnet: string;
  /** The pod subnet's gateway, the bridge's own address. */
  podGateway: string;
  /** Bridge device name in the lane netns (at most 15 characters). */
  bridge: string;
  /** The node's folder. */
  dir: string;
  /** containerd's gRPC socket. */
  socket: string;
  /** The kubelet's cgroup root (`cgroupRoot`), under the lane's cgroup parent. */
  cgroupRoot: string;
  /** The kubelet's HTTPS port on `ip`. */
  kubeletPort: number;
  /** The kubelet's healthz port on the netns loopback (two kubelets share the netns). */
  healthzPort: number;
}

/** The runc every node runs (Debian's `runc` package). */
export const RUNC = "/usr/sbin/runc";
/** Debian's containernetworking-plugins folder. */
export const CNI_BIN_DIR = "/usr/lib/cni";

/**
 * The kernel tunables the kubelet sets on start (`setupKernelTunables`) unless they hold already.
 * They are machine-wide (not per network namespace), so the lane shows the kubelet these values
 * through files bind-mounted over `/proc/sys/...` in the node's own mount namespace instead.
 */
export const KUBELET_TUNABLES: Readonly<Record<string, string>> = {
  "vm/overcommit_memory": "1",
  "vm/panic_on_oom": "0",
  "kernel/panic": "10",
  "kernel/panic_on_oops": "1",
  "kernel/keys/root_maxkeys": "1000000",
  "kernel/keys/root_maxbytes": "25000000",
};

/**
 * containerd 1.6's `config.toml` for one node: its own root, state, sockets and CNI folder, the
 * lane's sandbox image (never pulled), cgroupfs, `restrict_oom_score_adj` (needed where the
 * kubelet's cgroups are not the machine's root), no AppArmor profile loading (that would touch
 * the kernel's profile set), and on the GPU node the NVIDIA-style runtime as the default.
 *
 * @param node the node's layout
 * @param sandboxImage the pause image reference imported into the node
 * @param wrapper the GPU node's runtime wrapper path
 * @param registryHosts the folder of per-registry `hosts.toml` files (containerd's
 *   `config_path`): the lane's registry and the CA that signed its certificate
 * @returns TOML text
 */
export function containerdConfig(
  node: NodeLayout,
  sandboxImage: string,
  wrapper?: string,
  registryHosts?: string,
): string {
  const cri = `plugins."io.containerd.grpc.v1.cri"`;
  const runtime = (name: string, binary: string) => [
    `[${cri}.containerd.runtimes.${name}]`,
    `  runtime_type = "io.containerd.runc.v2"`,
    `[${cri}.containerd.runtimes.${name}.options]`,
    `  BinaryName = ${JSON.stringify(binary)}`,
    `  SystemdCgroup = false`,
  ];
  return [
    "# containerd of the aicr real-kubelet lane node " + node.name + " (written by tests/realnode)",
    "version = 2",
    `root = ${JSON.stringify(join(node.dir, "containerd", "root"))}`,
    `state = ${JSON.stringify(join(node.dir, "containerd", "state"))}`,
    "oom_score = 0",
    `disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs", "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]`,
    "[grpc]",
    `  address = ${JSON.stringify(node.socket)}`,
    "[ttrpc]",
    `  address = ${JSON.stringify(node.socket + ".ttrpc")}`,
    "[metrics]",
    `  address = ""`,
    `[plugins."io.containerd.internal.v1.opt"]`,
    `  path = ${JSON.stringify(join(node.dir, "containerd", "opt"))}`,
    `[${cri}]`,
    `  sandbox_image = ${JSON.stringify(sandboxImage)}`,
    "  restrict_oom_score_adj = true",
    "  disable_apparmor = true",
    "  enable_selinux = false",
    `  stream_server_address = "127.0.0.1"`,
    `  stream_server_port = "0"`,
    `[${cri}.containerd]`,
    `  snapshotter = "overlayfs"`,
    `  default_runtime_name = ${JSON.stringify(wrapper ? "nvidia" : "runc")}`,
    ...runtime("runc", RUNC),
    ...(wrapper ? runtime("nvidia", wrapper) : []),
    ...(registryHosts
      ? [`[${cri}.registry]`, `  config_path = ${JSON.stringify(registryHosts)}`]
      : []),
    `[${cri}.cni]`,
    `  bin_dir = ${JSON.stringify(CNI_BIN_DIR)}`,
    `  conf_dir = ${JSON.stringify(join(node.dir, "cni", "net.d"))}`,
    "  max_conf_num = 1",
    "",
  ].join("\n");
}

/**
 * containerd's host configuration of one registry (`certs.d/<host>/hosts.toml`): HTTPS, pull and
 * resolve, its certificate checked against `caFile`. Credentials come from the pod's image pull
 * secret, through the kubelet.
 *
 * @param host `address:port`
 * @param caFile the CA that signed the registry's certificate
 * @returns TOML text
 */
export function registryHostsToml(host: string, caFile: string): string {
  return [
    `server = "https://${host}"`,
    "",
    `[host."https://${host}"]`,
    `  capabilities = ["pull", "resolve"]`,
    `  ca = ${JSON.stringify(caFile)}`,
    "",
  ].join("\n");
}

/**
 * The node's pod network: one bridge in the lane netns with the node's subnet (host-local IPAM,
 * its leases in the node's folder). No masquerade: nothing leaves the netns.
 *
 * @param node the node's layout
 * @returns the CNI network configuration list
 */
export function cniConfig(node: NodeLayout): Record<string, unknown> {
  return {
    cniVersion: "0.4.0",
    name: `aicr-${node.bridge}`,
    plugins: [{
      type: "bridge",
      bridge: node.bridge,
      isGateway: true,
      ipMasq: false,
      hairpinMode: true,
      ipam: {
        type: "host-local",
        ranges: [[{ subnet: node.podSubnet, gateway: node.podGateway }]],
        routes: [{ dst: "0.0.0.0/0" }],
        dataDir: join(node.dir, "cni", "ipam"),
      },
    }],
  };
}

/**
 * The `KubeletConfiguration` of a lane node. cgroup v1 machines need `failCgroupV1: false`;
 * `cgroupfs` because no systemd manages the machine's cgroups; no swap check; eviction and image
 * GC thresholds out of the way on a shared disk; x509 client auth against the cluster CA and
 * webhook authorization, as a cluster's kubelets have; every folder under the node's own.
 *
 * @param node the node's layout
 * @param files the CA, the serving certificate and the GPU taint (if any)
 * @returns the configuration object (YAML-serialisable)
 */
export function kubeletConfig(
  node: NodeLayout,
  files: { caFile: string; tlsCert: string; tlsKey: string; taints: readonly unknown[] },
): Record<string, unknown> {
  return {
    apiVersion: "kubelet.config.k8s.io/v1beta1",
    kind: "KubeletConfiguration",
    address: node.ip,
    port: node.kubeletPort,
    readOnlyPort: 0,
    healthzBindAddress: "127.0.0.1",
    healthzPort: node.healthzPort,
    containerRuntimeEndpoint: `unix://${node.socket}`,
    cgroupDriver: "cgroupfs",
    cgroupRoot: node.cgroupRoot,
    cgroupsPerQOS: true,
    failCgroupV1: false,
    failSwapOn: false,
    protectKernelDefaults: false,
    authentication: {
      anonymous: { enabled: false },
      webhook: { enabled: true },
      x509: { clientCAFile: files.caFile },
    },
    authorization: { mode: "Webhook" },
    tlsCertFile: files.tlsCert,
    tlsPrivateKeyFile: files.tlsKey,
    registerWithTaints: files.taints,
    // No cluster DNS: nothing in the lane resolves names, and pods must not inherit the machine's
    // resolvers (traffic to them would leave the netns, which has no route out anyway).
    resolvConf: "",
    clusterDomain: "cluster.local",
    podLogsDir: join(node.dir, "pod-logs"),
    volumePluginDir: join(node.dir, "volume-plugins"),
    imageGCHighThresholdPercent: 100,
    imageGCLowThresholdPercent: 99,
    evictionHard: {
      "memory.available": "1Mi",
      "nodefs.available": "1%",
      "nodefs.inodesFree": "1%",
      "imagefs.available": "1%",
    },
    serializeImagePulls: false,
    nodeStatusUpdateFrequency: "2s",
    shutdownGracePeriod: "0s",
  };
}

/**
 * The `sh` script that prepares a node's own mount namespace (entered by `unshare --mount
 * --propagation private` inside the lane netns) and then execs containerd; the kubelet joins the
 * same namespaces, so pod volumes it mounts are the ones runc sees. Inside it: `/var` and `/run`
 * are overlays whose writes land in the node's folder (`/var/lib/cni`, `/var/log/pods`,
 * `/run/containerd` never reach the machine), `/run/systemd` exists as on a systemd node (the
 * privileged agent mounts it), and the kubelet's kernel tunables read as set. All of it vanishes
 * with the namespace's last process, even after a crash.
 *
 * @param node the node's layout
 * @returns script text; its arguments are the command to exec
 */
export function mountSetupScript(node: NodeLayout): string {
  const q = (s: string) => `'${s.replaceAll("'", `'\\''`)}'`;
  const lines = ["set -eu", `echo $$ > ${q(join(node.dir, "mountns.pid"))}`];
  for (const [path, value] of Object.entries(KUBELET_TUNABLES)) {
    const file = join(node.dir, "sysctl", path.replaceAll("/", "."));
    lines.push(`printf '%s\\n' ${value} > ${q(file)}`, `mount --bind ${q(file)} /proc/sys/${path}`);
  }
  for (const top of ["var", "run"]) {
    const upper = join(node.dir, "overlay", top, "upper");
    const work = join(node.dir, "overlay", top, "work");
    lines.push(
      `mkdir -p ${q(upper)} ${q(work)}`,
      `mount -t overlay overlay -o lowerdir=/${top},upperdir=${upper},workdir=${work} /${top}`,
    );
  }
  lines.push("mkdir -p /run/systemd", 'exec "$@"');
  return lines.join("\n") + "\n";
}

/**
 * The GPU node's OCI runtime: a wrapper around runc that, like the NVIDIA container runtime,
 * adds the driver's `nvidia-smi` to a container's spec at `create` when the container asks for
 * GPUs (`NVIDIA_VISIBLE_DEVICES` set and not `void`/`none`) with the `utility` capability
 * (`NVIDIA_DRIVER_CAPABILITIES`, default `utility,compute`). Here the "driver" is the lane's
 * static fake `nvidia-smi` with the real capture beside it, bind-mounted read-only into
 * `/usr/bin`.
 *
 * @param smiDir folder holding `nvidia-smi` and `nvidia-smi-q-x.xml`
 * @param runc the runtime it execs (default {@link RUNC})
 * @returns script text
 */
export function nvidiaRuntimeScript(smiDir: string, runc: string = RUNC): string {
  return `#!/bin/sh
# aicr real-kubelet lane: NVIDIA-container-runtime stand-in (runc wrapper). Written by tests/realnode.
bundle=""; create=0; prev=""
for a in "$@"; do
  case "$prev" in --bundle|-b) bundle="$a" ;; esac
  case "$a" in create) create=1 ;; --bundle=*) bundle="\${a#--bundle=}" ;; esac
  prev="$a"
done
if [ "$create" = 1 ] && [ -n "$bundle" ] && [ -f "$bundle/config.json" ]; then
  env="$(jq -r '.process.env // [] | .[]' "$bundle/config.json")"
  devices="$(printf '%s\\n' "$env" | sed -n 's/^NVIDIA_VISIBLE_DEVICES=//p' | tail -n 1)"
  caps="$(printf '%s\\n' "$env" | sed -n 's/^NVIDIA_DRIVER_CAPABILITIES=//p' | tail -n 1)"
  case "$devices" in ""|void|none) ;; *)
    case ",\${caps:-utility,compute}," in *,utility,*|*,all,*)
      jq --arg dir ${JSON.stringify(smiDir)} '.mounts += [
        {destination: "/usr/bin/nvidia-smi", type: "bind", source: ($dir + "/nvidia-smi"), options: ["rbind", "ro", "nosuid", "nodev"]},
        {destination: "/usr/bin/nvidia-smi-q-x.xml", type: "bind", source: ($dir + "/nvidia-smi-q-x.xml"), options: ["rbind", "ro", "nosuid", "nodev"]}
      ]' "$bundle/config.json" > "$bundle/config.json.aicr" && mv "$bundle/config.json.aicr" "$bundle/config.json"
    ;; esac
  ;; esac
fi
exec ${runc} "$@"
`;
}
