/**
 * The real-kubelet lane: beside the real control plane, one or two real nodes, each a real
 * kubelet (`kcp kubelet`, built and cached with the control plane) with its own containerd and
 * runc (Debian packages), running the aicr image in real containers.
 *
 * Nothing of it touches the machine outside it:
 * - one network namespace (`aicr-lane-<id>`) holds every non-loopback address (the nodes' IPs on
 *   its lo, the pod bridges, the `10.96.0.1` Service VIP's DNAT rule) and every process
 *   that talks to them: etcd and the control plane, containerd, the kubelets, the tests' aicr runs.
 *   It has no route out. The apiserver is reachable from this machine only on 127.0.0.1:<port>,
 *   through a pair of socat forwarders joined by a unix socket in the state folder.
 * - each node runs containerd and its kubelet in one private mount namespace whose `/var` and
 *   `/run` are overlays writing into the node's folder and whose kernel tunables the kubelet
 *   would set read as set already (see `config.ts`);
 * - one cgroup parent (`aicr-lane-<id>`) in every cgroup hierarchy holds every pod;
 * - the state folder holds everything else: `lane.json` (written before anything is created, so
 *   `stopLaneAt` can remove a crashed lane), the control plane (`control-plane/`), the nodes
 *   (`nodes/<name>/`), the images and logs.
 *
 * @module
 */
import { existsSync, readdirSync, readFileSync, rmdirSync, writeFileSync } from "node:fs";
import { chmod, mkdir, readFile, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { stringify } from "yaml";
import {
  type Cluster,
  type ClusterProcess,
  freePorts,
  isOurs,
  netnsPrefix,
  REPO_ROOT,
  spawnComponent,
  startCluster,
  stderrLog,
  stopClusterAt,
  stopProcesses,
} from "../cluster/cluster.ts";
import { createCert } from "../cluster/pki.ts";
import { loadProfiles, nodeObject, type NodeProfile, nvidiaSmiXml } from "../kubelet/profiles.ts";
import { createApi } from "../kubelet/api.ts";
import { ensureNotAicr, NOT_AICR_IMAGE } from "../kubelet/notaicr.ts";
import {
  cniConfig,
  containerdConfig,
  kubeletConfig,
  mountSetupScript,
  type NodeLayout,
  nvidiaRuntimeScript,
  registryHostsToml,
} from "./config.ts";
import { buildOciImage, pauseImageSpec, trueImageSpec } from "./images.ts";
import { prepareRegistry, waitReady } from "../registry/registry.ts";

/** Debian packages the lane needs (`.ci/run` installs them). */
export const LANE_PACKAGES = [
  "containerd",
  "runc",
  "containernetworking-plugins",
  "iptables",
  "socat",
  "jq",
] as const;

/** The Service VIP of `kubernetes.default` (the apiserver's `--service-cluster-ip-range` first address). */
export const SERVICE_VIP = "10.96.0.1";
/** The apiserver's advertised address inside the lane netns. */
export const APISERVER_IP = "10.231.0.10";
/** The sandbox image reference every node's containerd uses (imported, never pulled). */
export const SANDBOX_IMAGE = "aicr.local/pause:lane";
/** A minimal image with `/bin/true` (the benchmarks' floor Job), on every node. */
export const TRUE_IMAGE = "aicr.local/true:lane";

/** One node of the lane, as recorded. */
export interface LaneNode extends NodeLayout {
  /** The containerd process (its mount namespace is the kubelet's too). */
  containerdPid?: number;
}

/** What `lane.json` holds. */
export interface LaneInfo {
  id: string;
  netns: string;
  /** Name of the cgroup parent in every hierarchy. */
  cgroupParent: string;
  stateDir: string;
  /** The control plane's state folder (its `cluster.json`, kubeconfigs, logs). */
  controlPlaneDir: string;
  adminKubeconfig: string;
  server: string;
  /**
   * The aicr image the nodes pull, pinned by digest: `aicr image push` of the lane's binary into
   * the lane's registry (set once the lane is up; empty before).
   */
  image: string;
  /** The lane's registry (TLS from the cluster CA, htpasswd), inside the netns. */
  registry?: LaneRegistry;
  nodes: LaneNode[];
  /** Processes of the lane itself (forwarders, containerd, kubelets), in start order. */
  processes: ClusterProcess[];
  /** Whether the processes outlive the starter (`cluster:up`). */
  detached: boolean;
  /** The starting process (a lane whose owner died and that is not detached is an orphan). */
  ownerPid: number;
  /** Set once the lane is up. */
  ready?: boolean;
}

/** The lane's registry: where it listens, its CA, and its credentials. */
export interface LaneRegistry {
  /** `10.231.0.10:5443`: reachable from the netns (nodes, pods, the tests' aicr runs). */
  host: string;
  caFile: string;
  /** skopeo's `--cert-dir`. */
  certDir: string;
  username: string;
  password: string;
  /** Docker configs with the right and a wrong password. */
  authFile: string;
  wrongAuthFile: string;
}

/** The lane registry's port on {@link APISERVER_IP}. */
export const REGISTRY_PORT = 5443;

/** A running lane. */
export interface Lane extends LaneInfo {
  cluster: Cluster;
  /** Stops and removes everything of the lane (the logs folder stays). */
  stop(): Promise<void>;
}

/** The lane cannot run on this machine: `message` names what is missing. */
export class LaneUnavailableError extends Error {
  override name = "LaneUnavailableError";
}

/** What {@link laneRequirementsMissing} looks at, so a test can describe another machine. */
export interface LaneMachine {
  uid: number;
  /** `/proc/filesystems`. */
  filesystems: string;
  /** From {@link cgroupHierarchies}. */
  cgroupHierarchies: string[];
  /** Whether `/proc/self/ns/net` exists. */
  netns: boolean;
  /** Whether a command is on PATH. */
  hasCommand(cmd: string): boolean;
  /** Whether a file exists. */
  exists(path: string): boolean;
}

/**
 * This machine, for {@link laneRequirementsMissing}.
 *
 * @returns its probe
 */
export function thisMachine(): LaneMachine {
  return {
    uid: Deno.uid() ?? -1,
    filesystems: readText("/proc/filesystems"),
    cgroupHierarchies: cgroupHierarchies(),
    netns: existsSync("/proc/self/ns/net"),
    hasCommand: onPath,
    exists: existsSync,
  };
}

/** Each command the lane runs, with the Debian package it comes from. */
const LANE_COMMANDS: Readonly<Record<string, string>> = {
  containerd: "containerd",
  ctr: "containerd",
  runc: "runc",
  iptables: "iptables",
  socat: "socat",
  jq: "jq",
  ip: "iproute2",
  nsenter: "util-linux",
  unshare: "util-linux",
  tar: "tar",
  ldd: "libc-bin",
};

/**
 * What a machine lacks for the lane: root, overlayfs, cgroups, network namespaces, and the
 * commands it runs (with the Debian packages to install). Empty when it can run.
 *
 * @param machine the machine (default this one)
 * @returns one short phrase per missing thing
 */
export function laneRequirementsMissing(machine: LaneMachine = thisMachine()): string[] {
  const missing: string[] = [];
  if (machine.uid !== 0) missing.push("root (the lane mounts, creates cgroups and a netns)");
  if (!/\boverlay\b/.test(machine.filesystems)) {
    missing.push("overlayfs (no 'overlay' in /proc/filesystems)");
  }
  if (!/\bcgroup2?\b/.test(machine.filesystems) || machine.cgroupHierarchies.length === 0) {
    missing.push("cgroups (no cgroup hierarchy mounted under /sys/fs/cgroup)");
  }
  if (!machine.netns) missing.push("network namespaces (no /proc/self/ns/net)");
  const absent = Object.keys(LANE_COMMANDS).filter((c) => !machine.hasCommand(c));
  const packages = new Set(absent.map((c) => LANE_COMMANDS[c]!));
  for (const plugin of ["bridge", "host-local", "loopback"]) {
    if (!machine.exists(`/usr/lib/cni/${plugin}`)) {
      absent.push(`/usr/lib/cni/${plugin}`);
      packages.add("containernetworking-plugins");
    }
  }
  if (absent.length) {
    missing.push(`${absent.join(", ")} (apt-get install ${[...packages].join(" ")})`);
  }
  return missing;
}

/**
 * The one line a machine without the lane's needs gets.
 *
 * @param missing from {@link laneRequirementsMissing}
 * @returns the line
 */
export function laneUnavailableLine(missing: readonly string[]): string {
  return `real-kubelet lane unavailable on this machine: missing ${missing.join("; ")}`;
}

/**
 * Reads a text file, or "" when it cannot be read.
 *
 * @param path the file
 * @returns its text
 */
function readText(path: string): string {
  try {
    return readFileSync(path, "utf8");
  } catch {
    return "";
  }
}

/**
 * Whether a command is on PATH (or an absolute executable).
 *
 * @param cmd command name
 * @returns true when found
 */
function onPath(cmd: string): boolean {
  const dirs = (Deno.env.get("PATH") ?? "/usr/sbin:/usr/bin:/sbin:/bin").split(":");
  for (const d of [...dirs, "/usr/sbin", "/sbin"]) {
    try {
      if (Deno.statSync(join(d, cmd)).isFile) return true;
    } catch { /* next */ }
  }
  return false;
}

/**
 * The cgroup hierarchies to create the lane's parent in: every cgroup v1 controller mount under
 * `/sys/fs/cgroup` (not the hybrid `unified` one), or `/sys/fs/cgroup` itself on cgroup v2.
 *
 * @returns absolute mount points
 */
export function cgroupHierarchies(): string[] {
  const mounts = readText("/proc/self/mountinfo").split("\n").map((l) => l.split(" "));
  const v1 = mounts.filter((f) => {
    const dash = f.indexOf("-");
    return dash > 0 && f[dash + 1] === "cgroup" && f[4]?.startsWith("/sys/fs/cgroup/");
  }).map((f) => f[4]!);
  if (v1.length) return v1;
  const v2 = mounts.find((f) => {
    const dash = f.indexOf("-");
    return dash > 0 && f[dash + 1] === "cgroup2" && f[4] === "/sys/fs/cgroup";
  });
  return v2 ? ["/sys/fs/cgroup"] : [];
}

/**
 * Runs a command, throwing with its output when it fails.
 *
 * @param argv command and arguments
 * @param what what it was for, for the error
 * @returns stdout
 * @throws {Error} naming the purpose and the command's stderr
 */
async function sh(argv: string[], what: string): Promise<string> {
  const out = await new Deno.Command(argv[0]!, {
    args: argv.slice(1),
    stdout: "piped",
    stderr: "piped",
  }).output();
  const dec = new TextDecoder();
  if (!out.success) {
    throw new Error(`Cannot ${what}: ${argv.join(" ")}: ${dec.decode(out.stderr).trim()}`);
  }
  return dec.decode(out.stdout);
}

/**
 * Best-effort variant of {@link sh} for cleanup.
 *
 * @param argv command and arguments
 * @returns whether it succeeded, and its output
 */
async function trySh(argv: string[]): Promise<{ ok: boolean; out: string }> {
  try {
    const out = await new Deno.Command(argv[0]!, {
      args: argv.slice(1),
      stdout: "piped",
      stderr: "piped",
    }).output();
    return { ok: out.success, out: new TextDecoder().decode(out.stdout) };
  } catch {
    return { ok: false, out: "" };
  }
}

/**
 * The lane's nodes: a GPU node (the p5-h100 profile) and, with two, a CPU node (system-m7i).
 *
 * @param stateDir the lane's state folder
 * @param id the lane id
 * @param count 1 or 2
 * @returns their layouts
 */
export function laneNodes(stateDir: string, id: string, count: number): LaneNode[] {
  const specs = [
    { name: "p5-h100-1", profile: "p5-h100", gpu: true },
    { name: "system-m7i-1", profile: "system-m7i", gpu: false },
  ].slice(0, count);
  return specs.map((s, i) => {
    const dir = join(stateDir, "nodes", s.name);
    return {
      ...s,
      ip: `10.231.0.${11 + i}`,
      podSubnet: `10.232.${1 + i}.0/24`,
      podGateway: `10.232.${1 + i}.1`,
      bridge: `aicr-br${i}`,
      dir,
      // Short: a unix socket path holds at most 107 bytes.
      socket: join(stateDir, `n${i}.sock`),
      cgroupRoot: `/aicr-lane-${id}/${s.name}`,
      kubeletPort: 10250,
      healthzPort: 10248 + i * 100,
    };
  });
}

/**
 * Writes the lane record.
 *
 * @param info the record
 */
function saveLane(info: LaneInfo): void {
  writeFileSync(join(info.stateDir, "lane.json"), JSON.stringify(info, null, 2) + "\n");
}

/** Options of {@link startLane}. */
export interface StartLaneOptions {
  /** The lane's state folder (wiped first; must be empty or a previous lane's). */
  stateDir: string;
  /** 1 (a GPU node) or 2 (and a CPU node). Default 2. */
  nodes?: number;
  /** Outlive this process (as `cluster:up` does). */
  detach?: boolean;
  /** The aicr binary the image is built from (default `$AICR_BIN` or `dist/aicr`). */
  aicrBin?: string;
  log?: (line: string) => void;
}

/**
 * Starts the lane: netns, forwarders, the control plane inside the netns, the images, and for
 * each node containerd and the kubelet; waits until every node is Ready (the GPU node with its
 * `nvidia.com/gpu` capacity) and the aicr image is on every node.
 *
 * @param options where, how many nodes, detach
 * @returns the running lane
 * @throws {LaneUnavailableError} when the machine lacks a requirement (nothing was created)
 * @throws {Error} when a step fails (everything started so far is removed)
 */
export async function startLane(options: StartLaneOptions): Promise<Lane> {
  const { log = stderrLog, detach = false } = options;
  const missing = laneRequirementsMissing();
  if (missing.length) throw new LaneUnavailableError(laneUnavailableLine(missing));
  const aicrBin = options.aicrBin ?? Deno.env.get("AICR_BIN") ?? join(REPO_ROOT, "dist", "aicr");
  if (!existsSync(aicrBin)) {
    throw new Error(
      `Cannot build the lane's aicr image: "${aicrBin}" does not exist (run: deno task build)`,
    );
  }
  const stateDir = options.stateDir;
  await stopLaneAt(stateDir);
  const marker = join(stateDir, ".aicr-real-kubelet-lane");
  const standIn = join(stateDir, ".aicr-test-cluster");
  if (
    existsSync(stateDir) && !existsSync(marker) && !existsSync(standIn) &&
    readdirSync(stateDir).length > 0
  ) {
    throw new Error(
      `Cannot use "${stateDir}" as the lane's state folder: it is not empty and not a lane's`,
    );
  }
  await rm(stateDir, { recursive: true, force: true });
  await mkdir(join(stateDir, "logs"), { recursive: true, mode: 0o700 });
  await writeFile(marker, "state folder of an aicr real-kubelet lane: removed by the next start\n");
  const id = crypto.randomUUID().slice(0, 8);
  const t0 = performance.now();
  const info: LaneInfo = {
    id,
    netns: `aicr-lane-${id}`,
    cgroupParent: `aicr-lane-${id}`,
    stateDir,
    controlPlaneDir: join(stateDir, "control-plane"),
    adminKubeconfig: join(stateDir, "control-plane", "admin.kubeconfig"),
    server: "",
    image: "",
    nodes: laneNodes(stateDir, id, options.nodes ?? 2),
    processes: [],
    detached: detach,
    ownerPid: Deno.pid,
  };
  // Recorded before anything exists: a crash from here on leaves a lane stopLaneAt can remove.
  saveLane(info);
  const logDir = join(stateDir, "logs");
  const inNetns = netnsPrefix(info.netns);
  let cluster: Cluster | undefined;
  // The watchdog shells this process started: stopping the lane ends them, and stop() awaits
  // them, so no test file ends with a child of ours still running.
  const children: Deno.ChildProcess[] = [];
  const stop = async () => {
    await stopLaneAt(stateDir);
    await cluster?.stop();
    await settleChildren(children, 15_000);
  };
  try {
    // 1. The network namespace: loopback, the nodes' addresses, the Service VIP.
    await sh(["ip", "netns", "add", info.netns], "create the lane's network namespace");
    const ipn = (...args: string[]) =>
      sh(["ip", "-n", info.netns, ...args], "set up the lane netns");
    await ipn("link", "set", "lo", "up");
    // The addresses go on the netns' own lo (no dummy device needed): they are local, not
    // loopback addresses (the kubelet refuses 127/8), and pods reach them through their gateway.
    for (const ip of [APISERVER_IP, ...info.nodes.map((n) => n.ip)]) {
      await ipn("addr", "add", `${ip}/32`, "dev", "lo");
    }
    // A route for the Service range, so a connection to the VIP from the netns itself gets as far
    // as the nat OUTPUT chain; pods reach it through their bridge gateway (PREROUTING).
    await ipn("route", "add", "10.96.0.0/16", "dev", "lo");
    const [apiserverPort] = freePorts(1) as [number];
    for (const chain of ["PREROUTING", "OUTPUT"]) {
      await sh([
        ...inNetns,
        "iptables",
        "-w",
        "-t",
        "nat",
        "-A",
        chain,
        "-d",
        `${SERVICE_VIP}/32`,
        "-p",
        "tcp",
        "--dport",
        "443",
        "-j",
        "DNAT",
        "--to-destination",
        `${APISERVER_IP}:${apiserverPort}`,
      ], "add the Service VIP's DNAT rule in the lane netns");
    }
    // 2. The forwarders: 127.0.0.1:<port> here → unix socket → 127.0.0.1:<port> in the netns.
    const sock = join(stateDir, "api.sock");
    const start = (name: string, bin: string, args: string[], prefix: string[], match: string) => {
      const { child, proc } = spawnComponent(name, bin, args, logDir, detach, 0, prefix);
      if (!detach) children.push(child);
      proc.match = match;
      info.processes.push(proc);
      saveLane(info);
      return proc;
    };
    start(
      "forward-netns",
      "socat",
      [`UNIX-LISTEN:${sock},fork,unlink-early`, `TCP:127.0.0.1:${apiserverPort}`],
      inNetns,
      sock,
    );
    start(
      "forward-host",
      "socat",
      [`TCP-LISTEN:${apiserverPort},bind=127.0.0.1,fork,reuseaddr`, `UNIX-CONNECT:${sock}`],
      [],
      sock,
    );
    // 3. The control plane, inside the netns.
    cluster = await startCluster({
      stateDir: info.controlPlaneDir,
      detach,
      log,
      netns: info.netns,
      apiserverPort,
      advertiseAddress: APISERVER_IP,
    });
    info.server = cluster.server;
    saveLane(info);
    // 4. Images, built once for every node.
    const images = join(stateDir, "images");
    await mkdir(images, { recursive: true });
    const pauseTar = join(images, "pause.tar");
    const trueTar = join(images, "true.tar");
    const notAicrTar = join(images, "not-aicr.tar");
    await buildOciImage(pauseImageSpec(join(cluster.binDir, "pause"), SANDBOX_IMAGE), pauseTar);
    await buildOciImage(await trueImageSpec(TRUE_IMAGE), trueTar);
    // NVIDIA's Go aicr as the test world has it (a static binary): the image aicr must refuse.
    await buildOciImage({
      ref: NOT_AICR_IMAGE,
      files: [{ src: await ensureNotAicr(), dest: "/usr/local/bin/aicr" }],
      dirs: { "/tmp": 0o1777 },
      config: {
        User: "65534:65534",
        Env: ["PATH=/usr/local/bin:/usr/bin:/bin"],
        Entrypoint: ["/usr/local/bin/aicr"],
      },
    }, notAicrTar);
    log(`lane: images ${SANDBOX_IMAGE}, ${TRUE_IMAGE} and ${NOT_AICR_IMAGE} built offline`);
    // The registry the nodes pull the aicr image from, inside the netns, and the image pushed.
    info.registry = await startLaneRegistry(cluster, info, { start, inNetns, aicrBin, log });
    info.image = await pushLaneImage(info.registry, { inNetns, aicrBin, log });
    saveLane(info);
    // 5. The cgroup parent in every hierarchy.
    for (const node of info.nodes) await makeCgroup(node.cgroupRoot);
    // 6. The nodes.
    const profiles = loadProfiles();
    const caFiles = { cert: cluster.caFile, key: cluster.caKeyFile };
    for (const node of info.nodes) {
      await startNode(node, {
        cluster,
        info,
        caFiles,
        profile: profiles.get(node.profile)!,
        images: [pauseTar, trueTar, notAicrTar],
        start,
        inNetns,
        log,
      });
    }
    await waitForNodes(cluster, info, log);
    info.ready = true;
    saveLane(info);
    log(
      `lane: ${info.nodes.length} real node(s) ready in ${
        Math.round(performance.now() - t0)
      } ms (netns ${info.netns}); kubeconfig ${info.adminKubeconfig}`,
    );
    const c = cluster;
    return { ...info, cluster: c, stop };
  } catch (e) {
    await stop();
    throw e;
  }
}

/**
 * Awaits the exit of children already told to stop; one still running after `ms` is killed with
 * its process group, then awaited.
 */
async function settleChildren(children: Deno.ChildProcess[], ms: number): Promise<void> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<"late">((resolve) => timer = setTimeout(() => resolve("late"), ms));
  const all = Promise.allSettled(children.map((c) => c.status));
  try {
    if (await Promise.race([all, late]) !== "late") return;
  } finally {
    clearTimeout(timer);
  }
  for (const c of children) {
    try {
      Deno.kill(-c.pid, "SIGKILL");
    } catch { /* gone */ }
  }
  await all;
}

/**
 * Starts the lane's registry inside the netns on {@link APISERVER_IP}: TLS with a certificate
 * from the cluster CA (what every node's containerd is told to trust), htpasswd credentials.
 */
async function startLaneRegistry(
  cluster: Cluster,
  info: LaneInfo,
  ctx: {
    start: (name: string, bin: string, args: string[], prefix: string[], match: string) => unknown;
    inNetns: string[];
    aicrBin: string;
    log: (line: string) => void;
  },
): Promise<LaneRegistry> {
  const prepared = await prepareRegistry({
    dir: join(info.stateDir, "registry"),
    address: APISERVER_IP,
    port: REGISTRY_PORT,
    ca: { cert: cluster.caFile, key: cluster.caKeyFile },
  });
  ctx.start("registry", prepared.argv[0]!, prepared.argv.slice(1), ctx.inNetns, prepared.config);
  await waitReady(prepared, ctx.inNetns);
  const { host, caFile, certDir, username, password, authFile, wrongAuthFile } = prepared;
  ctx.log(`lane: registry ${host} (docker-registry, TLS from the cluster CA, htpasswd)`);
  return { host, caFile, certDir, username, password, authFile, wrongAuthFile };
}

/**
 * Pushes the lane binary's image into the lane's registry with `aicr image push` (run inside the
 * netns), the way an operator would.
 *
 * @returns the pinned reference it printed (`host/aicr@sha256:...`)
 */
async function pushLaneImage(
  registry: LaneRegistry,
  ctx: { inNetns: string[]; aicrBin: string; log: (line: string) => void },
): Promise<string> {
  const argv = [
    ...ctx.inNetns,
    ctx.aicrBin,
    "image",
    "push",
    `${registry.host}/aicr`,
    "--ca-file",
    registry.caFile,
    "--registry-config",
    registry.authFile,
  ];
  const out = await new Deno.Command(argv[0]!, {
    args: argv.slice(1),
    env: { HOME: Deno.env.get("HOME") ?? "/root", PATH: "/usr/sbin:/usr/bin:/sbin:/bin" },
    clearEnv: true,
    stdout: "piped",
    stderr: "piped",
  }).output();
  const pinned = new TextDecoder().decode(out.stdout).trim();
  if (!out.success || !/@sha256:[0-9a-f]{64}$/.test(pinned)) {
    throw new Error(
      `Cannot push the lane's aicr image: ${new TextDecoder().decode(out.stderr).trim()}`,
    );
  }
  ctx.log(`lane: aicr image pushed: ${pinned}`);
  return pinned;
}

/** Helpers {@link startNode} gets from {@link startLane}. */
interface NodeContext {
  cluster: Cluster;
  info: LaneInfo;
  caFiles: { cert: string; key: string };
  profile: NodeProfile;
  images: string[];
  start: (
    name: string,
    bin: string,
    args: string[],
    prefix: string[],
    match: string,
  ) => ClusterProcess;
  inNetns: string[];
  log: (line: string) => void;
}

/**
 * Writes a node's files, starts its containerd (in a fresh mount namespace), imports the images,
 * and starts its kubelet in the same namespaces.
 *
 * @param node the node
 * @param ctx the lane's context
 * @throws {Error} when a step fails
 */
async function startNode(node: LaneNode, ctx: NodeContext): Promise<void> {
  const { cluster, info, caFiles, profile } = ctx;
  for (const d of ["pki", "sysctl", "cni/net.d", "cni/ipam", "kubelet", "pod-logs", "containerd"]) {
    await mkdir(join(node.dir, d), { recursive: true, mode: 0o700 });
  }
  // What the node is: labels, taint, capacity as the stand-in's profile says (GPU Feature
  // Discovery's labels, the node group's taint, the device plugin's capacity).
  const want = nodeObject(profile, node.name, node.ip, node.kubeletPort, cluster.version) as {
    metadata: { labels: Record<string, string> };
    spec: { taints?: unknown[] };
  };
  const labels = Object.entries(want.metadata.labels)
    .filter(([k]) =>
      !["kubernetes.io/hostname", "kubernetes.io/os", "kubernetes.io/arch"].includes(k)
    );
  let wrapper: string | undefined;
  if (node.gpu && profile.gpu) {
    const smiDir = join(node.dir, "nvidia");
    await mkdir(smiDir, { recursive: true });
    await Deno.copyFile(join(cluster.binDir, "nvidia-smi"), join(smiDir, "nvidia-smi"));
    await chmod(join(smiDir, "nvidia-smi"), 0o755);
    await writeFile(join(smiDir, "nvidia-smi-q-x.xml"), nvidiaSmiXml(profile.gpu));
    wrapper = join(smiDir, "nvidia-container-runtime");
    await writeFile(wrapper, nvidiaRuntimeScript(smiDir), { mode: 0o755 });
  }
  const toml = join(node.dir, "containerd", "config.toml");
  const hosts = join(node.dir, "containerd", "certs.d");
  const registry = info.registry!;
  await mkdir(join(hosts, registry.host), { recursive: true });
  await writeFile(
    join(hosts, registry.host, "hosts.toml"),
    registryHostsToml(registry.host, registry.caFile),
  );
  await writeFile(toml, containerdConfig(node, SANDBOX_IMAGE, wrapper, hosts));
  await writeFile(
    join(node.dir, "cni", "net.d", "10-aicr.conflist"),
    JSON.stringify(cniConfig(node), null, 2),
  );
  const setup = join(node.dir, "mountns.sh");
  await writeFile(setup, mountSetupScript(node), { mode: 0o700 });
  // containerd: in the netns, in a new private mount namespace prepared by the setup script.
  ctx.start(
    `containerd-${node.name}`,
    "containerd",
    ["--config", toml],
    [...ctx.inNetns, "unshare", "--mount", "--propagation", "private", "--", "sh", setup],
    toml,
  );
  const pidFile = join(node.dir, "mountns.pid");
  await waitUntil(`containerd of ${node.name} to listen on ${node.socket}`, 60_000, async () => {
    if (!existsSync(pidFile) || !existsSync(node.socket)) return false;
    return (await trySh(["ctr", "--address", node.socket, "version"])).ok;
  }, join(info.stateDir, "logs", `containerd-${node.name}.log`));
  node.containerdPid = Number(readFileSync(pidFile, "utf8").trim());
  saveLane(info);
  for (const tar of ctx.images) {
    await sh(
      ["ctr", "--address", node.socket, "-n", "k8s.io", "images", "import", tar],
      `import ${tar} into ${node.name}'s containerd`,
    );
  }
  // The kubelet: a node client certificate (the Node authorizer and NodeRestriction apply), a
  // serving certificate for its address, signed by the cluster CA.
  const pki = join(node.dir, "pki");
  const serving = await createCert(pki, "kubelet-serving", caFiles, {
    cn: `system:node:${node.name}`,
    orgs: ["system:nodes"],
    ips: [node.ip],
    dns: [node.name],
    usage: "server",
  });
  const kubeconfig = await cluster.kubeconfigFor(`system:node:${node.name}`, ["system:nodes"]);
  const config = join(node.dir, "kubelet.yaml");
  await writeFile(
    config,
    stringify(kubeletConfig(node, {
      caFile: cluster.caFile,
      tlsCert: serving.cert,
      tlsKey: serving.key,
      taints: want.spec.taints ?? [],
    })),
  );
  const kcp = join(cluster.binDir, "kcp");
  ctx.start(
    `kubelet-${node.name}`,
    kcp,
    [
      "kubelet",
      `--config=${config}`,
      `--kubeconfig=${kubeconfig}`,
      `--root-dir=${join(node.dir, "kubelet")}`,
      `--hostname-override=${node.name}`,
      `--node-ip=${node.ip}`,
      `--node-labels=${labels.map(([k, v]) => `${k}=${v}`).join(",")}`,
      "--v=1",
    ],
    [
      "nsenter",
      `--net=/run/netns/${info.netns}`,
      `--mount=/proc/${node.containerdPid}/ns/mnt`,
      "--",
    ],
    config,
  );
  ctx.log(`lane: node ${node.name} (${node.ip}${node.gpu ? ", GPU" : ""}) starting`);
}

/**
 * Polls until `probe` is true.
 *
 * @param what for the error
 * @param timeoutMs deadline
 * @param probe the check
 * @param logFile a log whose tail the error shows
 * @throws {Error} on timeout
 */
async function waitUntil(
  what: string,
  timeoutMs: number,
  probe: () => Promise<boolean>,
  logFile?: string,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await probe().catch(() => false)) return;
    await new Promise((r) => setTimeout(r, 250));
  }
  const tail = logFile && existsSync(logFile)
    ? "; its log ends:\n" + readFileSync(logFile, "utf8").split("\n").slice(-20).join("\n")
    : "";
  throw new Error(`Timed out waiting for ${what}${tail}`);
}

/**
 * Waits until every node is Ready, then gives the GPU node its `nvidia.com/gpu` capacity (as the
 * NVIDIA device plugin would) and waits until it is allocatable.
 *
 * @param cluster the control plane
 * @param info the lane
 * @param log progress
 * @throws {Error} on timeout
 */
async function waitForNodes(
  cluster: Cluster,
  info: LaneInfo,
  log: (line: string) => void,
): Promise<void> {
  const admin = createApi(cluster.server, {
    ca: readFileSync(cluster.caFile, "utf8"),
    cert: readFileSync(cluster.adminCert.cert, "utf8"),
    key: readFileSync(cluster.adminCert.key, "utf8"),
  });
  try {
    for (const node of info.nodes) {
      await waitUntil(`node ${node.name} to be Ready`, 120_000, async () => {
        const res = await admin.request("GET", `/api/v1/nodes/${node.name}`);
        const ready = (res.body?.status?.conditions ?? []).find((c: { type: string }) =>
          c.type === "Ready"
        );
        return res.status === 200 && ready?.status === "True";
      }, join(info.stateDir, "logs", `kubelet-${node.name}.log`));
      log(`lane: node ${node.name} Ready`);
      const profile = loadProfiles().get(node.profile);
      if (!node.gpu || !profile?.gpu) continue;
      const count = String(profile.gpu.count);
      const patch = await admin.request(
        "PATCH",
        `/api/v1/nodes/${node.name}/status`,
        [{ op: "add", path: "/status/capacity/nvidia.com~1gpu", value: count }],
        "application/json-patch+json",
      );
      if (patch.status !== 200) {
        throw new Error(`Cannot give ${node.name} its GPU capacity: HTTP ${patch.status}`);
      }
      await waitUntil(`${node.name} to list nvidia.com/gpu as allocatable`, 60_000, async () => {
        const res = await admin.request("GET", `/api/v1/nodes/${node.name}`);
        return res.body?.status?.allocatable?.["nvidia.com/gpu"] === count;
      });
    }
  } finally {
    admin.close();
  }
}

/**
 * Creates a cgroup (and its parents) in every hierarchy; cpuset folders get their parent's CPUs
 * and memory nodes, which cgroup v1 leaves empty.
 *
 * @param path cgroup path, e.g. `/aicr-lane-<id>/<node>`
 */
async function makeCgroup(path: string): Promise<void> {
  for (const root of cgroupHierarchies()) {
    let dir = root;
    for (const part of path.split("/").filter(Boolean)) {
      const parent = dir;
      dir = join(dir, part);
      if (!existsSync(dir)) await mkdir(dir);
      for (const f of ["cpuset.cpus", "cpuset.mems"]) {
        if (existsSync(join(dir, f)) && readText(join(dir, f)).trim() === "") {
          await writeFile(join(dir, f), readText(join(parent, f)).trim());
        }
      }
    }
  }
}

/**
 * Every cgroup mount (v1 controllers and any cgroup2, the hybrid `unified` one included, where
 * runc also makes the containers' cgroups): where a lane's cgroups can be.
 *
 * @returns absolute mount points
 */
function allCgroupMounts(): string[] {
  const mounts = readText("/proc/self/mountinfo").split("\n").map((l) => l.split(" "));
  return mounts.filter((f) => {
    const dash = f.indexOf("-");
    return dash > 0 && ["cgroup", "cgroup2"].includes(f[dash + 1]!) &&
      !!f[4]?.startsWith("/sys/fs/cgroup");
  }).map((f) => f[4]!);
}

/**
 * Kills every process in a cgroup subtree (every hierarchy) and removes its folders, deepest
 * first.
 *
 * @param name the lane's cgroup parent name
 */
async function removeCgroup(name: string): Promise<void> {
  for (let round = 0; round < 20; round++) {
    let left = 0;
    for (const root of allCgroupMounts()) {
      const top = join(root, name);
      if (!existsSync(top)) continue;
      const dirs: string[] = [];
      const walk = (d: string) => {
        dirs.push(d);
        for (const e of readdirSync(d, { withFileTypes: true })) {
          if (e.isDirectory()) walk(join(d, e.name));
        }
      };
      walk(top);
      for (const d of dirs.reverse()) {
        for (const pid of readText(join(d, "cgroup.procs")).split("\n").filter(Boolean)) {
          try {
            Deno.kill(Number(pid), "SIGKILL");
          } catch { /* gone */ }
        }
        try {
          rmdirSync(d);
        } catch {
          left++;
        }
      }
    }
    if (left === 0) return;
    await new Promise((r) => setTimeout(r, 250));
  }
}

/**
 * Reads a lane record.
 *
 * @param stateDir the lane's state folder
 * @returns the record, or undefined
 */
export function readLane(stateDir: string): LaneInfo | undefined {
  const file = join(stateDir, "lane.json");
  if (!existsSync(file)) return undefined;
  return JSON.parse(readFileSync(file, "utf8")) as LaneInfo;
}

/**
 * Whether the lane in `stateDir` is up and its processes alive.
 *
 * @param stateDir the lane's state folder
 * @returns the record when it runs
 */
export function runningLane(stateDir: string): LaneInfo | undefined {
  const info = readLane(stateDir);
  if (!info?.ready) return undefined;
  return info.processes.every((p) => isOurs(p.pid, p.match)) ? info : undefined;
}

/**
 * Stops and removes a lane, also one whose starter crashed: the kubelets, every pod (by cgroup),
 * containerd, the forwarders and the control plane by recorded pid (each checked against its
 * command line), then whatever still runs in the netns, the cgroup folders, the netns, and the
 * nodes' folders and images (the logs stay).
 *
 * @param stateDir the lane's state folder
 * @returns true when there was a lane record
 */
export async function stopLaneAt(stateDir: string): Promise<boolean> {
  const info = readLane(stateDir);
  if (!info) return false;
  const kubelets = info.processes.filter((p) => p.name.startsWith("kubelet-"));
  await stopProcesses(kubelets, 8000);
  await removeCgroup(info.cgroupParent);
  const rest = info.processes.filter((p) => !p.name.startsWith("kubelet-")).reverse();
  await stopProcesses(rest.filter((p) => p.name.startsWith("containerd-")), 5000);
  if (existsSync(join(info.controlPlaneDir, "cluster.json"))) {
    await stopClusterAt(info.controlPlaneDir);
  }
  await stopProcesses(rest.filter((p) => p.name.startsWith("forward-")), 2000);
  // Anything else still in the netns (shims, a crashed start's stragglers), by the netns itself.
  const pids = await trySh(["ip", "netns", "pids", info.netns]);
  for (const pid of pids.out.split("\n").filter(Boolean)) {
    try {
      Deno.kill(Number(pid), "SIGKILL");
    } catch { /* gone */ }
  }
  await removeCgroup(info.cgroupParent);
  await trySh(["ip", "netns", "delete", info.netns]);
  for (const d of ["nodes", "images"]) {
    await rm(join(info.stateDir, d), { recursive: true, force: true }).catch(() => {});
  }
  for (const f of readdirSync(info.stateDir)) {
    if (f.endsWith(".sock") || f.endsWith(".ttrpc")) {
      await rm(join(info.stateDir, f), { force: true });
    }
  }
  info.ready = false;
  info.processes = [];
  saveLane(info);
  await writeFile(join(info.stateDir, "stopped"), new Date().toISOString() + "\n");
  return true;
}

/**
 * Removes lanes under `<repo>/.cluster-runs/` left by a test process that died without stopping
 * them (not detached, owner gone).
 *
 * @returns state folders cleaned
 */
export async function sweepOrphanLanes(): Promise<string[]> {
  const runs = join(REPO_ROOT, ".cluster-runs");
  if (!existsSync(runs)) return [];
  const cleaned: string[] = [];
  for (const e of readdirSync(runs)) {
    const dir = join(runs, e);
    const info = readLane(dir);
    if (!info || info.detached || existsSync(`/proc/${info.ownerPid}`)) continue;
    if (info.processes.length === 0 && !existsSync(`/run/netns/${info.netns}`)) continue;
    await stopLaneAt(dir);
    cleaned.push(dir);
  }
  return cleaned;
}

/**
 * Reads the lane's nodes for tests.
 *
 * @param stateDir the lane's state folder
 * @returns name, address, GPU flag and the fixture file the GPU node's nvidia-smi prints
 */
export async function laneNodeFixtures(
  stateDir: string,
): Promise<{ name: string; ip: string; gpu: boolean; xml?: string }[]> {
  const info = readLane(stateDir);
  if (!info) return [];
  return await Promise.all(info.nodes.map(async (n) => ({
    name: n.name,
    ip: n.ip,
    gpu: n.gpu,
    ...(n.gpu ? { xml: await readFile(join(n.dir, "nvidia", "nvidia-smi-q-x.xml"), "utf8") } : {}),
  })));
}
