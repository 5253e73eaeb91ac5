/**
 * The kubelet stand-in: one process that simulates many nodes against the real test control plane.
 *
 * - Registers one Node per requested profile instance, each with its own loopback address
 *   (`<nodeSubnet>.<n>`, a /24 private to the cluster run) as InternalIP, and renews its Lease.
 * - Authenticates as each node with a client certificate `CN=system:node:<name>, O=system:nodes`
 *   signed by the cluster CA, so the Node authorizer and NodeRestriction really apply.
 * - Watches the pods bound to each node (the real scheduler binds them) and runs every container as a
 *   local process: image → executable map, `command`/`args`, env with downward-API `fieldRef`s,
 *   volumes (projected ServiceAccount token from the TokenRequest API, configMap, secret, emptyDir;
 *   hostPath is the host's own path) bind-mounted in a private mount namespace (`unshare -m`, root).
 * - Reports pod status (Pending → Running → Succeeded/Failed, exit codes, reasons), honours deletion
 *   (SIGTERM to the container's process group, grace period, SIGKILL, then the final delete) and
 *   `activeDeadlineSeconds`, and serves `/containerLogs` over HTTPS on each node's address.
 *
 * Pods share their node's address (podIP = hostIP): pods on different nodes can listen on the same
 * port, and hostNetwork pods naturally share it. There is no per-pod network.
 *
 * @module
 */

import { existsSync, readFileSync } from "node:fs";
import { appendFile, chmod, mkdir, readFile, rename, rm, writeFile } from "node:fs/promises";
import https from "node:https";
import http from "node:http";
import type { IncomingMessage, ServerResponse } from "node:http";
import { basename, dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { type Api, createApi, type Obj } from "./api.ts";
import {
  loadProfiles,
  nodeObject,
  type NodeProfile,
  NVIDIA_SMI_XML_NAME,
  nvidiaSmiScript,
  nvidiaSmiXml,
} from "./profiles.ts";
import { createCert } from "../cluster/pki.ts";
import { sleep } from "../../io.ts";
import { defaultOut } from "../../scripts/build.ts";
import { commandLine, findEmulator, hostArch } from "../../scripts/node_base.ts";
import pkg from "../../package.json" with { type: "json" };
import { releaseImage } from "../../version.ts";
import { otherBuildReason } from "../../scripts/build_record.ts";
import { type ImageTarget, pullImage, type PullResult, testWorldImages } from "./images.ts";
import { ensureNotAicr, NOT_AICR_IMAGE } from "./notaicr.ts";
import type { ClusterInfo } from "../cluster/cluster.ts";

export type { ImageTarget } from "./images.ts";

/** Options of {@link startKubelet}. */
export interface KubeletOptions {
  /** Instances per profile name, e.g. `{ "p5-h100": 1, "system-m7i": 2 }`. Default: one of each. */
  nodes?: Record<string, number>;
  /**
   * The built aicr binary for this build's image on amd64 nodes. Default `$AICR_BIN`, else
   * `<repo>/dist/aicr`.
   */
  aicrBin?: string;
  /**
   * The arm64 binary for arm64 nodes (run under qemu-user). Default `$AICR_BIN_LINUX_ARM64`, else
   * `<repo>/dist/aicr-linux-arm64`; when it does not exist the image lacks linux/arm64.
   */
  aicrArm64Bin?: string;
  /**
   * Extra images (`images.ts`): an exact reference or a repository (without tag or digest) →
   * executable path, or `"host"`. Merged over `$AICR_KUBELET_IMAGES` (JSON).
   */
  images?: Record<string, string>;
  /** Working folder (pod dirs, logs, node certs). Default `<cluster state>/kubelet`. */
  dir?: string;
  /** Delete the Node objects on stop (default true). */
  deleteNodesOnStop?: boolean;
  /**
   * Numbers taken by another stand-in on the same cluster: this one's nodes are named
   * `<profile>-<offset + i>` and take the addresses after `offset + 1` (a node that joins later).
   * Default 0.
   */
  offset?: number;
  /** Progress lines. Default: none. */
  log?: (line: string) => void;
}

/** A running kubelet stand-in. */
export interface Kubelet {
  /** Node names registered. */
  nodes: { name: string; ip: string; profile: string; gpu: boolean }[];
  /** Port of the HTTPS log server on every node address. */
  port: number;
  /** Stops the watches and lease renewals, kills every container, closes the servers and (by default) deletes the nodes. */
  stop(): Promise<void>;
}

const LOG_LINE = /^(\S+) (stdout|stderr) [FP] (.*)$/;
const SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount";
/** The kubelet's cap on a termination message (MaxContainerTerminationMessageLength). */
const TERMINATION_MESSAGE_BYTES = 4096;
/** The repository's built binary (`scripts/build.ts` writes it), used when `AICR_BIN` is unset. */
const DEFAULT_AICR_BIN = fileURLToPath(new URL("../../dist/aicr", import.meta.url));
/** Where each container's private tmpfs of staged mount sources goes (the folder exists on the host). */
const STAGE_DIR = "/run/aicr-kubelet-stage";
/** How long a failed pull shows ErrImagePull before ImagePullBackOff. */
const PULL_BACKOFF_MS = 2_000;

/** A container's output, in memory and in a CRI-format file. */
interface LogBuffer {
  lines: string[];
  closed: boolean;
  listeners: Set<() => void>;
  file: string;
}

interface ContainerRun {
  spec: Obj;
  init: boolean;
  restartCount: number;
  pid?: number;
  state: Obj;
  lastState: Obj;
  log?: LogBuffer;
  previousLog?: LogBuffer;
  exited?: Promise<void>;
  /** The last readiness probe's answer while running (undefined: no readinessProbe). */
  probeReady?: boolean;
  /** What its image runs on this node, once pulled. */
  target?: ImageTarget;
}

interface SimNode {
  name: string;
  ip: string;
  profile: NodeProfile;
  api: Api;
  binDir?: string;
  uid?: string;
}

interface PodRun {
  uid: string;
  node: SimNode;
  pod: Obj;
  dir: string;
  phase: string;
  reason?: string;
  message?: string;
  startTime?: string;
  containers: ContainerRun[];
  deleting: boolean;
  gone: boolean;
  finished: boolean;
  posting: Promise<void>;
  dirty: boolean;
  done?: Promise<void>;
}

/**
 * RFC 3339 time with seconds precision, as the API stores most timestamps.
 *
 * @returns the time now
 */
function nowIso(): string {
  return new Date().toISOString().replace(/\.\d+Z$/, "Z");
}

/**
 * Expands `$(VAR)` references as the kubelet does (`$$(VAR)` escapes; unknown ones stay as written).
 *
 * @param s text
 * @param env variables
 * @returns expanded text
 */
function expand(s: string, env: Record<string, string>): string {
  return s.replace(/\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)/g, (m, name?: string) => {
    if (m === "$$") return "$";
    return name !== undefined && name in env ? env[name]! : m;
  });
}

/**
 * Reads a downward-API field of a pod.
 *
 * @param pod the pod
 * @param path fieldPath
 * @param ip the node's address
 * @returns the value
 */
function fieldRef(pod: Obj, path: string, ip: string): string {
  const m = /^metadata\.(labels|annotations)\['(.+)'\]$/.exec(path);
  if (m) return String(pod.metadata?.[m[1]!]?.[m[2]!] ?? "");
  switch (path) {
    case "metadata.name":
      return pod.metadata.name;
    case "metadata.namespace":
      return pod.metadata.namespace;
    case "metadata.uid":
      return pod.metadata.uid;
    case "spec.nodeName":
      return pod.spec.nodeName;
    case "spec.serviceAccountName":
      return pod.spec.serviceAccountName ?? "default";
    case "status.hostIP":
    case "status.podIP":
    case "status.hostIPs":
    case "status.podIPs":
      return ip;
    default:
      throw new Error(`unsupported fieldRef "${path}"`);
  }
}

/**
 * The `setpriv` prefix that runs a container as its securityContext's user and groups (container
 * fields over the pod's), after the mounts were made as root. Root (or no runAsUser) runs as is.
 *
 * @param pod the pod
 * @param container the container spec
 * @returns argv prefix, possibly empty
 * @throws {Error} when runAsNonRoot is set without a non-root runAsUser (the kubelet refuses it)
 */
export function identity(pod: Obj, container: Obj): string[] {
  const podSc = pod.spec?.securityContext ?? {};
  const sc = container.securityContext ?? {};
  const uid = sc.runAsUser ?? podSc.runAsUser;
  const gid = sc.runAsGroup ?? podSc.runAsGroup;
  const nonRoot = sc.runAsNonRoot ?? podSc.runAsNonRoot;
  if (nonRoot && (uid === undefined || uid === 0)) {
    throw new Error(
      `container "${container.name}" has runAsNonRoot and its image will run as root (set a non-root runAsUser)`,
    );
  }
  if (uid === undefined || (uid === 0 && (gid ?? 0) === 0)) return [];
  const groups = [...new Set([podSc.fsGroup, ...(podSc.supplementalGroups ?? [])])]
    .filter((g) => g !== undefined);
  return [
    "setpriv",
    `--reuid=${uid}`,
    `--regid=${gid ?? 0}`,
    groups.length ? `--groups=${groups.join(",")}` : "--clear-groups",
    "--",
  ];
}

/**
 * Starts the kubelet stand-in against a running cluster.
 *
 * @param cluster the cluster's record (`cluster.json`)
 * @param options nodes, image map, folders
 * @returns the running kubelet
 * @throws {Error} when a profile is unknown, or registration fails
 */
export async function startKubelet(
  cluster: ClusterInfo,
  options: KubeletOptions = {},
): Promise<Kubelet> {
  const {
    aicrBin = Deno.env.get("AICR_BIN") ?? DEFAULT_AICR_BIN,
    dir = join(cluster.stateDir, "kubelet"),
    deleteNodesOnStop = true,
    log = () => {},
  } = options;
  const profiles = loadProfiles();
  const wanted = options.nodes ?? Object.fromEntries([...profiles.keys()].map((k) => [k, 1]));
  const ca = readFileSync(cluster.caFile, "utf8");
  const caFiles = { cert: cluster.caFile, key: cluster.caKeyFile };
  const admin = createApi(cluster.server, {
    ca,
    cert: readFileSync(cluster.adminCert.cert, "utf8"),
    key: readFileSync(cluster.adminCert.key, "utf8"),
  });
  const catalog = testWorldImages({
    defaultImage: releaseImage(pkg.version),
    aicr: {
      [hostArch()]: aicrBin,
      arm64: options.aicrArm64Bin ?? Deno.env.get("AICR_BIN_LINUX_ARM64") ??
        defaultOut("arm64"),
      ...(hostArch() === "arm64" ? { arm64: aicrBin } : {}),
    },
    otherBuild: (path) => path === aicrBin ? undefined : otherBuildReason(path, aicrBin),
    notAicr: { image: NOT_AICR_IMAGE, path: await ensureNotAicr() },
    extra: {
      ...JSON.parse(Deno.env.get("AICR_KUBELET_IMAGES") ?? "{}"),
      ...(options.images ?? {}),
    },
  });
  /** Pulls a container's image for its node: what to run, or the pull error. */
  function pull(node: SimNode, image: string): PullResult {
    return pullImage(catalog, image, node.profile.arch, (arch) => findEmulator(arch));
  }

  await mkdir(join(dir, "pki"), { recursive: true });
  if (Deno.uid() === 0) await mkdir(STAGE_DIR, { recursive: true });
  const abort = new AbortController();
  const signal = abort.signal;
  const isRoot = Deno.uid() === 0;

  // Node identities and addresses.
  const nodes: SimNode[] = [];
  const offset = options.offset ?? 0;
  let n = offset;
  for (const [profileName, count] of Object.entries(wanted)) {
    const profile = profiles.get(profileName);
    if (!profile) {
      throw new Error(
        `Cannot register nodes: unknown profile "${profileName}" (known: ${
          [...profiles.keys()].join(", ")
        })`,
      );
    }
    for (let i = 1; i <= count; i++) {
      n++;
      if (n > 250) throw new RangeError("at most 250 simulated nodes");
      nodes.push(
        {
          name: `${profileName}-${offset + i}`,
          ip: `${cluster.nodeSubnet}.${n + 1}`,
          profile,
        } as SimNode,
      );
    }
  }
  log(`kubelet: minting certificates for ${nodes.length} nodes`);
  const serving = await createCert(join(dir, "pki"), "kubelet-serving", caFiles, {
    cn: "aicr-kubelet",
    usage: "server",
    ips: nodes.map((nd) => nd.ip),
    dns: nodes.map((nd) => nd.name),
  });
  // openssl per node; a few in parallel keeps 50 nodes at about a second on 2 cores.
  for (let i = 0; i < nodes.length; i += 8) {
    await Promise.all(
      nodes.slice(i, i + 8).map(async (nd) => {
        const c = await createCert(join(dir, "pki"), `node-${nd.name}`, caFiles, {
          cn: `system:node:${nd.name}`,
          orgs: ["system:nodes"],
          usage: "client",
        });
        nd.api = createApi(cluster.server, {
          ca,
          cert: readFileSync(c.cert, "utf8"),
          key: readFileSync(c.key, "utf8"),
        });
      }),
    );
  }

  // Log server on every node address, one port for all (free on the first address, then reused).
  const pods = new Map<string, PodRun>();
  const byName = new Map<string, PodRun>();
  const servers: https.Server[] = [];
  const handler = (req: IncomingMessage, res: ServerResponse) => serveLogs(req, res, byName);
  let port = 0;
  for (const nd of nodes) {
    const server = https.createServer({
      key: readFileSync(serving.key),
      cert: readFileSync(serving.cert),
      ca: [ca],
      requestCert: true,
      rejectUnauthorized: true,
    }, handler);
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(port, nd.ip, () => resolve());
    });
    if (port === 0) port = (server.address() as { port: number }).port;
    servers.push(server);
  }

  // Fake nvidia-smi per GPU node.
  for (const nd of nodes) {
    if (!nd.profile.gpu) continue;
    nd.binDir = join(dir, "nodes", nd.name, "bin");
    await mkdir(nd.binDir, { recursive: true });
    const xml = join(dir, "nodes", nd.name, "nvidia-smi-q-x.xml");
    const text = nvidiaSmiXml(nd.profile.gpu);
    await writeFile(xml, text);
    // The script reads the copy beside itself: the bin folder is staged into every container,
    // while the state folder may sit under a path a volume hides (an emptyDir at /tmp).
    await writeFile(join(nd.binDir, NVIDIA_SMI_XML_NAME), text);
    await writeFile(join(nd.binDir, "nvidia-smi"), nvidiaSmiScript(nd.profile.gpu));
    await chmod(join(nd.binDir, "nvidia-smi"), 0o755);
  }

  // Register nodes and their leases.
  log(`kubelet: registering ${nodes.length} nodes on ${cluster.nodeSubnet}.0/24, port ${port}`);
  for (let i = 0; i < nodes.length; i += 10) {
    await Promise.all(
      nodes.slice(i, i + 10).map(async (nd) => {
        const obj = nodeObject(nd.profile, nd.name, nd.ip, port, cluster.version);
        let res = await nd.api.request("POST", "/api/v1/nodes", obj);
        if (res.status === 409) {
          // A node of this name from an earlier run: start clean.
          await admin.request("DELETE", `/api/v1/nodes/${nd.name}`);
          for (let t = 0; t < 50 && res.status === 409; t++) {
            await new Promise((r) => setTimeout(r, 100));
            res = await nd.api.request("POST", "/api/v1/nodes", obj);
          }
        }
        if (res.status !== 201) {
          throw new Error(
            `Cannot register node "${nd.name}": HTTP ${res.status} ${res.body.message ?? ""}`,
          );
        }
        nd.uid = res.body.metadata.uid;
        await renewLease(nd, true);
      }),
    );
  }

  async function renewLease(nd: SimNode, create = false): Promise<void> {
    const renewTime = new Date().toISOString().replace("Z", "000Z").replace(
      /(\.\d{6})\d*Z$/,
      "$1Z",
    );
    const path = `/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases`;
    if (create) {
      const res = await nd.api.request("POST", path, {
        apiVersion: "coordination.k8s.io/v1",
        kind: "Lease",
        metadata: {
          name: nd.name,
          namespace: "kube-node-lease",
          ownerReferences: [{ apiVersion: "v1", kind: "Node", name: nd.name, uid: nd.uid }],
        },
        spec: { holderIdentity: nd.name, leaseDurationSeconds: 40, renewTime },
      });
      if (res.status === 201) return;
    }
    await nd.api.request("PATCH", `${path}/${nd.name}`, {
      spec: { holderIdentity: nd.name, renewTime },
    });
  }

  // Lease renewal every 10 s (as the kubelet does), spread over the period; node status every 60 s.
  const timers: ReturnType<typeof setTimeout>[] = [];
  /** The folders of deleted pods, removed a minute later (or at stop). */
  const removals = new Map<ReturnType<typeof setTimeout>, string>();
  nodes.forEach((nd, i) => {
    const offset = Math.floor((i * 10_000) / nodes.length);
    timers.push(setTimeout(() => {
      timers.push(setInterval(() => void renewLease(nd).catch(() => {}), 10_000));
    }, offset));
    timers.push(setInterval(() => {
      const obj = nodeObject(nd.profile, nd.name, nd.ip, port, cluster.version) as Obj;
      void nd.api.request("PATCH", `/api/v1/nodes/${nd.name}/status`, {
        status: { conditions: obj.status.conditions },
      })
        .catch(() => {});
    }, 60_000 + offset));
  });

  // ---- pods ----------------------------------------------------------------------------------

  /** Running, not an init container, and its readiness probe (if any) last succeeded. */
  function containerReady(c: ContainerRun): boolean {
    return "running" in c.state && !c.init && c.probeReady !== false;
  }

  function containerStatus(c: ContainerRun): Obj {
    const running = "running" in c.state;
    return {
      name: c.spec.name,
      image: c.spec.image,
      imageID: "",
      ...(c.pid ? { containerID: `aicr://${c.pid}` } : {}),
      ready: containerReady(c),
      started: running,
      restartCount: c.restartCount,
      state: c.state,
      lastState: c.lastState,
    };
  }

  function podStatus(run: PodRun): Obj {
    const main = run.containers.filter((c) => !c.init);
    const inits = run.containers.filter((c) => c.init);
    const initDone = inits.every((c) => c.state.terminated?.exitCode === 0);
    const allReady = main.length > 0 && main.every(containerReady);
    const t = nowIso();
    const cond = (type: string, ok: boolean, reason?: string) => ({
      type,
      status: ok ? "True" : "False",
      lastProbeTime: null,
      lastTransitionTime: run.startTime ?? t,
      ...(reason && !ok ? { reason } : {}),
    });
    const terminal = run.phase === "Succeeded" || run.phase === "Failed";
    const notReady = terminal ? "PodCompleted" : "ContainersNotReady";
    return {
      phase: run.phase,
      ...(run.reason ? { reason: run.reason } : {}),
      ...(run.message ? { message: run.message } : {}),
      conditions: [
        cond("PodReadyToStartContainers", run.startTime !== undefined && !terminal),
        cond("Initialized", initDone, "ContainersNotInitialized"),
        cond("Ready", allReady && !terminal, notReady),
        cond("ContainersReady", allReady && !terminal, notReady),
        {
          type: "PodScheduled",
          status: "True",
          lastProbeTime: null,
          lastTransitionTime: run.pod.metadata.creationTimestamp,
        },
      ],
      hostIP: run.node.ip,
      hostIPs: [{ ip: run.node.ip }],
      podIP: run.node.ip,
      podIPs: [{ ip: run.node.ip }],
      ...(run.startTime ? { startTime: run.startTime } : {}),
      ...(inits.length ? { initContainerStatuses: inits.map(containerStatus) } : {}),
      containerStatuses: main.map(containerStatus),
      ...(run.pod.status?.qosClass ? { qosClass: run.pod.status.qosClass } : {}),
    };
  }

  /** Posts the pod's current status; calls coalesce so at most one PATCH is in flight per pod. */
  function post(run: PodRun): Promise<void> {
    run.dirty = true;
    run.posting = run.posting.then(async () => {
      if (!run.dirty || run.gone) return;
      run.dirty = false;
      const { metadata } = run.pod;
      const res = await run.node.api.request(
        "PATCH",
        `/api/v1/namespaces/${metadata.namespace}/pods/${metadata.name}/status`,
        { metadata: { uid: run.uid }, status: podStatus(run) },
      ).catch((e) => ({ status: 0, body: { message: String(e) } }));
      if (res.status === 404) run.gone = true;
      else if (res.status !== 200) {
        log(
          `kubelet: status of ${metadata.namespace}/${metadata.name}: HTTP ${res.status} ${
            res.body.message ?? ""
          }`,
        );
        // The API server is away (restarting, its etcd down): post again, as a kubelet's
        // status manager does, or the pod's last state (Succeeded) would be lost for good.
        if (res.status === 0 || res.status === 429 || res.status >= 500) {
          run.dirty = true;
          const retry = setTimeout(() => {
            timers.splice(timers.indexOf(retry), 1);
            if (!signal.aborted) void post(run);
          }, 500);
          timers.push(retry);
        }
      }
    });
    return run.posting;
  }

  /** The last `bytes` bytes of a file, as text ("" when it cannot be read). */
  async function readTail(file: string, bytes: number): Promise<string> {
    const data = await readFile(file).catch(() => new Uint8Array());
    return new TextDecoder().decode(data.subarray(Math.max(0, data.length - bytes)));
  }

  function newLog(file: string): LogBuffer {
    return { lines: [], closed: false, listeners: new Set(), file };
  }

  async function pumpLog(
    stream: ReadableStream<Uint8Array>,
    name: "stdout" | "stderr",
    buf: LogBuffer,
  ) {
    let rest = "";
    const emit = async (text: string, partial: boolean) => {
      const line = `${
        new Date().toISOString().replace("Z", "000000Z").replace(/(\.\d{9})\d*Z$/, "$1Z")
      } ${name} ${partial ? "P" : "F"} ${text}`;
      buf.lines.push(line);
      for (const l of buf.listeners) l();
      await appendFile(buf.file, line + "\n");
    };
    for await (const chunk of stream.pipeThrough(new TextDecoderStream())) {
      rest += chunk;
      let i;
      while ((i = rest.indexOf("\n")) >= 0) {
        await emit(rest.slice(0, i), false);
        rest = rest.slice(i + 1);
      }
    }
    if (rest) await emit(rest, false);
  }

  /** Materializes the pod's volumes; returns bind mounts per container name. */
  async function prepareVolumes(run: PodRun): Promise<Map<string, [string, string, boolean][]>> {
    const pod = run.pod;
    const ns = pod.metadata.namespace;
    const api = run.node.api;
    const volDirs = new Map<string, string>();
    const get = async (path: string, what: string): Promise<Obj | undefined> => {
      const res = await api.request("GET", path);
      if (res.status === 200) return res.body;
      if (res.status === 404) return undefined;
      throw new Error(`Cannot read ${what}: HTTP ${res.status} ${res.body.message ?? ""}`);
    };
    const writeKeys = async (
      d: string,
      data: Record<string, string>,
      b64: boolean,
      items?: Obj[],
    ) => {
      const pick = items?.length
        ? items.map((it) => [it.key, it.path])
        : Object.keys(data).map((k) => [k, k]);
      for (const [key, path] of pick) {
        if (!(key in data)) continue;
        await mkdir(dirname(join(d, path)), { recursive: true });
        const v = data[key]!;
        await writeFile(join(d, path), b64 ? Uint8Array.from(atob(v), (c) => c.charCodeAt(0)) : v);
      }
    };
    for (const vol of pod.spec.volumes ?? []) {
      const d = join(run.dir, "volumes", vol.name);
      if (vol.hostPath) {
        const { path, type } = vol.hostPath as { path: string; type?: string };
        if (type === "DirectoryOrCreate") await mkdir(path, { recursive: true });
        if (type === "FileOrCreate" && !existsSync(path)) {
          await mkdir(dirname(path), { recursive: true });
          await writeFile(path, "");
        }
        volDirs.set(vol.name, path);
        continue;
      }
      await mkdir(d, { recursive: true });
      // emptyDir is world-writable, as the kubelet makes it, so non-root containers can use it.
      if (vol.emptyDir) await chmod(d, 0o777);
      volDirs.set(vol.name, d);
      if (vol.configMap || vol.secret) {
        const isSecret = Boolean(vol.secret);
        const name = isSecret ? vol.secret.secretName : vol.configMap.name;
        const obj = await get(
          `/api/v1/namespaces/${ns}/${isSecret ? "secrets" : "configmaps"}/${name}`,
          `${isSecret ? "secret" : "configmap"} "${name}"`,
        );
        const optional = (isSecret ? vol.secret : vol.configMap).optional;
        if (!obj && !optional) {
          throw new Error(`${isSecret ? "secret" : "configmap"} "${name}" not found`);
        }
        await writeKeys(
          d,
          obj?.data ?? {},
          isSecret,
          (isSecret ? vol.secret : vol.configMap).items,
        );
      }
      for (const src of vol.projected?.sources ?? []) {
        if (src.serviceAccountToken) {
          const sa = pod.spec.serviceAccountName ?? "default";
          const expirationSeconds = src.serviceAccountToken.expirationSeconds ?? 3607;
          const file = join(d, src.serviceAccountToken.path ?? "token");
          const fetchToken = async (): Promise<void> => {
            const tr = await api.request(
              "POST",
              `/api/v1/namespaces/${ns}/serviceaccounts/${sa}/token`,
              {
                apiVersion: "authentication.k8s.io/v1",
                kind: "TokenRequest",
                spec: {
                  audiences: src.serviceAccountToken.audience
                    ? [src.serviceAccountToken.audience]
                    : [],
                  expirationSeconds,
                  boundObjectRef: {
                    apiVersion: "v1",
                    kind: "Pod",
                    name: pod.metadata.name,
                    uid: run.uid,
                  },
                },
              },
            );
            if (tr.status !== 201) {
              throw new Error(
                `Cannot request a token for serviceaccount "${ns}/${sa}": HTTP ${tr.status} ${
                  tr.body.message ?? ""
                }`,
              );
            }
            // Write then rename: a reader never sees half a token.
            await writeFile(`${file}.tmp`, tr.body.status.token);
            await rename(`${file}.tmp`, file);
          };
          await fetchToken();
          // Refresh at 80 % of the lifetime, as the kubelet does, while the pod runs.
          const refresh = setInterval(() => {
            if (run.finished || run.gone || run.deleting) clearInterval(refresh);
            else void fetchToken().catch((e) => log(`kubelet: token refresh: ${e}`));
          }, expirationSeconds * 800);
          Deno.unrefTimer(refresh);
        } else if (src.configMap || src.secret) {
          const isSecret = Boolean(src.secret);
          const ref = isSecret ? src.secret : src.configMap;
          let data: Record<string, string> | undefined;
          if (!isSecret && ref.name === "kube-root-ca.crt") data = { "ca.crt": ca };
          else {
            const obj = await get(
              `/api/v1/namespaces/${ns}/${isSecret ? "secrets" : "configmaps"}/${ref.name}`,
              `"${ref.name}"`,
            );
            if (!obj && !ref.optional) throw new Error(`"${ref.name}" not found`);
            data = obj?.data ?? {};
          }
          await writeKeys(d, data!, isSecret && ref.name !== "kube-root-ca.crt", ref.items);
        } else if (src.downwardAPI) {
          for (const item of src.downwardAPI.items ?? []) {
            if (item.fieldRef) {
              await writeFile(
                join(d, item.path),
                fieldRef(pod, item.fieldRef.fieldPath, run.node.ip),
              );
            }
          }
        }
      }
      if (vol.downwardAPI) {
        for (const item of vol.downwardAPI.items ?? []) {
          if (item.fieldRef) {
            await writeFile(
              join(d, item.path),
              fieldRef(pod, item.fieldRef.fieldPath, run.node.ip),
            );
          }
        }
      }
    }
    const mounts = new Map<string, [string, string, boolean][]>();
    for (const c of [...(pod.spec.initContainers ?? []), ...pod.spec.containers]) {
      const list: [string, string, boolean][] = [];
      for (const m of c.volumeMounts ?? []) {
        const src = volDirs.get(m.name);
        if (!src) throw new Error(`volume "${m.name}" is not supported by the aicr test kubelet`);
        const from = m.subPath ? join(src, m.subPath) : src;
        // hostPath at its own path: the process already sees the host's file system (read-only
        // ones are still bound onto themselves, read-only).
        if (from === m.mountPath && !m.readOnly) continue;
        list.push([from, m.mountPath, Boolean(m.readOnly) || m.mountPath === SA_DIR]);
      }
      mounts.set(c.name, list);
    }
    return mounts;
  }

  async function containerEnv(run: PodRun, c: Obj): Promise<Record<string, string>> {
    const pod = run.pod;
    const ns = pod.metadata.namespace;
    const apiPort = new URL(cluster.server).port;
    const env: Record<string, string> = {
      PATH: "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
      HOME: "/root",
      HOSTNAME: pod.spec.hostNetwork ? run.node.name : pod.metadata.name,
      KUBERNETES_SERVICE_HOST: "127.0.0.1",
      KUBERNETES_SERVICE_PORT: apiPort,
      KUBERNETES_SERVICE_PORT_HTTPS: apiPort,
      KUBERNETES_PORT: `tcp://127.0.0.1:${apiPort}`,
    };
    const refData = async (
      kind: "configmaps" | "secrets",
      ref: Obj,
    ): Promise<Record<string, string> | undefined> => {
      const res = await run.node.api.request("GET", `/api/v1/namespaces/${ns}/${kind}/${ref.name}`);
      if (res.status !== 200) {
        if (ref.optional) return undefined;
        throw new Error(`${kind === "secrets" ? "secret" : "configmap"} "${ref.name}" not found`);
      }
      const data = res.body.data ?? {};
      return kind === "secrets"
        ? Object.fromEntries(Object.entries(data).map(([k, v]) => [k, atob(String(v))]))
        : data;
    };
    for (const from of c.envFrom ?? []) {
      const data = from.configMapRef
        ? await refData("configmaps", from.configMapRef)
        : from.secretRef
        ? await refData("secrets", from.secretRef)
        : undefined;
      for (const [k, v] of Object.entries(data ?? {})) env[`${from.prefix ?? ""}${k}`] = String(v);
    }
    for (const e of c.env ?? []) {
      if (e.valueFrom?.fieldRef) {
        env[e.name] = fieldRef(pod, e.valueFrom.fieldRef.fieldPath, run.node.ip);
      } else if (e.valueFrom?.configMapKeyRef || e.valueFrom?.secretKeyRef) {
        const isSecret = Boolean(e.valueFrom.secretKeyRef);
        const ref = isSecret ? e.valueFrom.secretKeyRef : e.valueFrom.configMapKeyRef;
        const data = await refData(isSecret ? "secrets" : "configmaps", ref);
        if (data && ref.key in data) env[e.name] = data[ref.key]!;
        else if (!ref.optional) throw new Error(`key "${ref.key}" not found in "${ref.name}"`);
      } else if (e.valueFrom?.resourceFieldRef) {
        // limits default to the node's allocatable, as with the real kubelet; requests to 0.
        const [kind, res] = String(e.valueFrom.resourceFieldRef.resource).split(".") as [
          string,
          string,
        ];
        const alloc = run.node.profile.resources as unknown as Record<string, string>;
        env[e.name] = String(
          c.resources?.[kind]?.[res] ?? (kind === "limits" ? alloc[res] ?? "0" : "0"),
        );
      } else env[e.name] = expand(String(e.value ?? ""), env);
    }
    // The NVIDIA container runtime puts nvidia-smi on a GPU container's PATH; ours is staged (see runContainer).
    if (run.node.binDir) env.PATH = `${STAGE_DIR}/gpu-bin:${env.PATH}`;
    return env;
  }

  /** Starts one container; resolves when it exits, with its terminated state recorded. */
  async function runContainer(
    run: PodRun,
    c: ContainerRun,
    mounts: [string, string, boolean][],
    env: Record<string, string>,
  ): Promise<number> {
    const spec = c.spec;
    const target = c.target!;
    const command = (spec.command ?? []).map((s: string) => expand(s, env));
    const args = (spec.args ?? []).map((s: string) => expand(s, env));
    let argv: string[];
    // Image semantics: `command` replaces the entrypoint and `args` the default arguments. The host
    // userland images (busybox and the like) have no entrypoint and `sh` as their default command.
    if (target.kind === "host") {
      argv = command.length ? [...command, ...args] : args.length ? args : ["sh"];
    } else {
      const cmd = command.length ? command : [target.path];
      // The image's own binary under any path the manifest names (`/aicr`, `/usr/local/bin/aicr`).
      if (basename(cmd[0]!) === basename(target.path) || /^aicr/.test(basename(cmd[0]!))) {
        cmd[0] = target.path;
      }
      argv = [...cmd, ...args];
    }
    if (c.log) c.previousLog = c.log;
    c.log = newLog(join(run.dir, `${spec.name}-${c.restartCount}.log`));
    await writeFile(c.log.file, "");
    // Private mount and UTS namespaces: bind mounts and hostname seen only by this container. Every
    // source is first bound under a private tmpfs at STAGE_DIR, so a volume mounted over a parent of
    // another source (the agent's emptyDir at /tmp over a state folder in /tmp) cannot hide it; the
    // executable and the fake nvidia-smi are reached through STAGE_DIR too. Missing mount points are
    // created on the host's file system (the container's root is the host's).
    // terminationMessagePath (the API server defaults it to /dev/termination-log): as the kubelet
    // does, a file of this run of the container, made writable by any user (0666: the container
    // may run as another uid) and bound at that path; read back when the container exits.
    const terminationLog = spec.terminationMessagePath
      ? join(run.dir, `${spec.name}-${c.restartCount}.termination-log`)
      : undefined;
    if (terminationLog) {
      await writeFile(terminationLog, "");
      await chmod(terminationLog, 0o666);
    }
    const staged: [string, string, string, string][] = [
      ...mounts,
      ...(terminationLog
        ? [
          [terminationLog, String(spec.terminationMessagePath), false] as [string, string, boolean],
        ]
        : []),
    ].map(([src, dst, ro], i) => [src, dst, ro ? "ro" : "rw", `v${i}`]);
    if (target.kind === "exe" && argv[0] === target.path) {
      staged.push([target.path, "-", "-", `exe/${basename(target.path)}`]);
      argv[0] = `${STAGE_DIR}/exe/${basename(target.path)}`;
      // Another architecture's binary runs as a real node of it would, emulated here.
      if (target.emulator) {
        const line = commandLine(target.emulator, argv[0], argv.slice(1));
        argv = [line.command, ...line.args];
      }
    }
    if (run.node.binDir) staged.push([run.node.binDir, "-", "-", "gpu-bin"]);
    const specFile = join(run.dir, `${spec.name}-${c.restartCount}.mounts`);
    await writeFile(specFile, staged.map((m) => m.join("\t") + "\n").join(""));
    const script = [
      'set -e; S="$1"; spec="$2"; kubelet="$3"; shift 3; tab="$(printf "\\t")"',
      'mount -t tmpfs -o size=1m,mode=0755 aicr-stage "$S"; cp "$spec" "$S/.spec"',
      'while IFS="$tab" read -r src dst ro name; do mkdir -p "$(dirname "$S/$name")"',
      '  if [ -d "$src" ]; then mkdir "$S/$name"; else : > "$S/$name"; fi; mount --bind "$src" "$S/$name"; done < "$S/.spec"',
      'while IFS="$tab" read -r src dst ro name; do [ "$dst" = - ] && continue',
      '  if [ -d "$S/$name" ]; then mkdir -p "$dst"; else mkdir -p "$(dirname "$dst")"; [ -e "$dst" ] || : > "$dst"; fi',
      '  mount --bind "$S/$name" "$dst"; if [ "$ro" = ro ]; then mount -o remount,bind,ro "$dst"; fi; done < "$S/.spec"',
      // If the kubelet dies without stopping this container (Ctrl-C of a test run), a watchdog
      // (double-forked: not the container's child) kills the container's process group.
      'main=$$; ( ( while kill -0 "$kubelet" && kill -0 "$main"; do sleep 1; done; kill -0 "$main" && kill -KILL -"$main" ) </dev/null >/dev/null 2>&1 & )',
      'hostname "$HOSTNAME" 2>/dev/null || true; cd "$1"; shift; exec "$@"',
    ].join("\n");
    const full = [
      "setsid",
      "unshare",
      "--mount",
      "--uts",
      "--propagation",
      "private",
      "--",
      "/bin/sh",
      "-c",
      script,
      "sh",
      STAGE_DIR,
      specFile,
      String(Deno.pid),
      spec.workingDir ?? "/",
      ...identity(run.pod, spec),
      ...argv,
    ];
    const startedAt = nowIso();
    const child = new Deno.Command(full[0]!, {
      args: full.slice(1),
      env,
      clearEnv: true,
      stdin: "null",
      stdout: "piped",
      stderr: "piped",
    }).spawn();
    c.pid = child.pid;
    c.state = { running: { startedAt } };
    if (!c.init && spec.readinessProbe?.httpGet) {
      c.probeReady = false;
      void probeReadiness(run, c, startedAt);
    }
    // Deleted (or the kubelet stopped) while this container was being set up: it must not
    // outlive the pod, nor the kubelet.
    if (run.deleting || run.gone || signal.aborted) Deno.kill(-child.pid, "SIGKILL");
    // A pod is Running once one of its (non-init) containers is.
    if (!c.init && run.phase === "Pending") run.phase = "Running";
    void post(run);
    const buf = c.log;
    const pumps = Promise.all([
      pumpLog(child.stdout, "stdout", buf),
      pumpLog(child.stderr, "stderr", buf),
    ]);
    const status = await child.status;
    await pumps.catch(() => {});
    buf.closed = true;
    for (const l of buf.listeners) l();
    const code = status.code;
    // The termination message, as the kubelet reads it: the last 4096 bytes of the file; with
    // terminationMessagePolicy FallbackToLogsOnError, a failed container whose file is empty gets
    // the log's tail instead (the kubelet takes its last 80 lines, at most 2048 bytes).
    const written = terminationLog ? await readTail(terminationLog, TERMINATION_MESSAGE_BYTES) : "";
    const fallback = written === "" && code !== 0 &&
        spec.terminationMessagePolicy === "FallbackToLogsOnError"
      ? buf.lines.slice(-80).map((l) => LOG_LINE.exec(l)?.[3] ?? l).join("\n").slice(-2048)
      : written;
    c.state = {
      terminated: {
        exitCode: code,
        reason: code === 0 ? "Completed" : "Error",
        ...(fallback ? { message: fallback } : {}),
        startedAt,
        finishedAt: nowIso(),
        containerID: `aicr://${child.pid}`,
        ...(status.signal ? { signal: code - 128 } : {}),
      },
    };
    return code;
  }

  /**
   * A readiness probe (`httpGet`, HTTP or HTTPS; the certificate is not verified, as the kubelet
   * does not) on the pod's address while this run of the container lasts. The first probe goes
   * after `initialDelaySeconds`, then one every `periodSeconds`, capped at 2 s so tests do not
   * wait out the default 10 s; `timeoutSeconds` (default 1) bounds each. 200-399 is success.
   */
  async function probeReadiness(run: PodRun, c: ContainerRun, startedAt: string): Promise<void> {
    const probe = c.spec.readinessProbe;
    const get = probe.httpGet;
    const port = typeof get.port === "number"
      ? get.port
      : (c.spec.ports ?? []).find((p: Obj) => p.name === get.port)?.containerPort;
    const periodMs = Math.min(probe.periodSeconds ?? 10, 2) * 1000;
    const timeoutMs = (probe.timeoutSeconds ?? 1) * 1000;
    const live = () =>
      c.state.running?.startedAt === startedAt && !run.gone && !run.deleting && !signal.aborted;
    await sleep((probe.initialDelaySeconds ?? 0) * 1000, signal);
    while (live()) {
      const ok = await new Promise<boolean>((resolve) => {
        const lib = String(get.scheme ?? "HTTP").toUpperCase() === "HTTPS" ? https : http;
        const req = lib.request({
          host: get.host ?? run.node.ip,
          port,
          path: get.path ?? "/",
          method: "GET",
          rejectUnauthorized: false,
          agent: false,
          timeout: timeoutMs,
        }, (res) => {
          res.resume();
          resolve((res.statusCode ?? 0) >= 200 && (res.statusCode ?? 0) < 400);
        });
        req.on("timeout", () => req.destroy(new Error("probe timed out")));
        req.on("error", () => resolve(false));
        req.end();
      });
      if (!live()) return;
      if (ok !== c.probeReady) {
        c.probeReady = ok;
        void post(run);
      }
      await sleep(periodMs, signal);
    }
  }

  function fail(run: PodRun, c: ContainerRun | undefined, reason: string, message: string) {
    if (c) c.state = { waiting: { reason, message } };
    log(
      `kubelet: pod ${run.pod.metadata.namespace}/${run.pod.metadata.name}: ${reason}: ${message}`,
    );
  }

  async function runPod(run: PodRun): Promise<void> {
    const pod = run.pod;
    const restartPolicy: string = pod.spec.restartPolicy ?? "Always";
    await mkdir(run.dir, { recursive: true });
    for (const c of run.containers) {
      c.state = { waiting: { reason: c.init ? "PodInitializing" : "ContainerCreating" } };
    }
    await post(run);
    const pulls = run.containers.map((c) => ({ c, pulled: pull(run.node, c.spec.image) }));
    const bad = pulls.find((p) => "error" in p.pulled);
    if (bad && "error" in bad.pulled) {
      // As a kubelet whose pull failed: the pod stays Pending with the container waiting,
      // ErrImagePull first, then ImagePullBackOff (the kubelet's retries back off).
      fail(run, bad.c, "ErrImagePull", bad.pulled.error);
      await post(run);
      await new Promise((done) => setTimeout(done, PULL_BACKOFF_MS));
      if (run.deleting || run.gone) return;
      fail(
        run,
        bad.c,
        "ImagePullBackOff",
        `Back-off pulling image "${bad.c.spec.image}": ErrImagePull: ${bad.pulled.error}`,
      );
      await post(run);
      return;
    }
    for (const { c, pulled } of pulls) if ("target" in pulled) c.target = pulled.target;
    let mounts: Map<string, [string, string, boolean][]> | undefined;
    const envs = new Map<ContainerRun, Record<string, string>>();
    const configError = async (e: unknown) => {
      for (const c of run.containers) {
        fail(run, c, "CreateContainerConfigError", e instanceof Error ? e.message : String(e));
      }
      await post(run);
    };
    try {
      if (!isRoot) {
        throw new Error("the aicr test kubelet must run as root (mount namespaces, bind mounts)");
      }
      // throws on runAsNonRoot without a non-root runAsUser
      for (const c of run.containers) identity(run.pod, c.spec);
    } catch (e) {
      return await configError(e);
    }
    // As a kubelet's pod sync: what the API server could not give (a token, a ConfigMap: it is
    // restarting, its authorizer's graph not yet filled, the object not there yet) is asked for
    // again, backing off to 5 s, until the pod is deleted.
    for (let attempt = 0; !mounts; attempt++) {
      try {
        mounts = await prepareVolumes(run);
        for (const c of run.containers) envs.set(c, await containerEnv(run, c.spec));
      } catch (e) {
        mounts = undefined;
        await configError(e);
        if (run.deleting || run.gone || signal.aborted) return;
        await new Promise((r) => setTimeout(r, Math.min(500 * 2 ** attempt, 5000)));
      }
    }
    run.startTime = nowIso();
    const deadline = pod.spec.activeDeadlineSeconds as number | undefined;
    let deadlineTimer: ReturnType<typeof setTimeout> | undefined;
    if (deadline !== undefined) {
      deadlineTimer = setTimeout(() => {
        if (run.finished || run.deleting) return;
        run.reason = "DeadlineExceeded";
        run.message = `Pod was active on the node longer than the specified deadline`;
        void killContainers(run, pod.spec.terminationGracePeriodSeconds ?? 30);
      }, deadline * 1000);
    }
    // A stopped kubelet restarts nothing: a container it killed on the way out stays dead.
    const stopped = () => run.deleting || run.reason === "DeadlineExceeded" || signal.aborted;
    /** Stopped with the kubelet, not deleted nor past its deadline. */
    const stoppedKubelet = () =>
      signal.aborted && !run.deleting && run.reason !== "DeadlineExceeded";
    try {
      for (const c of run.containers.filter((c) => c.init)) {
        while (true) {
          if (stopped()) return;
          c.exited = runContainer(run, c, mounts.get(c.spec.name) ?? [], envs.get(c)!).then(
            () => {},
          );
          await post(run);
          await c.exited;
          const code = c.state.terminated.exitCode as number;
          if (code === 0) break;
          if (restartPolicy === "Never" || stopped()) {
            run.phase = "Failed";
            for (const m of run.containers.filter((x) => !x.init)) {
              m.state = { waiting: { reason: "PodInitializing" } };
            }
            return;
          }
          c.lastState = c.state;
          c.restartCount++;
          await sleep(Math.min(10_000, 1000 * 2 ** (c.restartCount - 1)), signal);
        }
        await post(run);
      }
      const main = run.containers.filter((c) => !c.init);
      await Promise.all(main.map(async (c) => {
        while (true) {
          if (stopped()) return;
          c.exited = runContainer(run, c, mounts.get(c.spec.name) ?? [], envs.get(c)!).then(
            () => {},
          );
          void post(run);
          await c.exited;
          const code = c.state.terminated.exitCode as number;
          const restarts = restartPolicy === "Always" ||
            (restartPolicy === "OnFailure" && code !== 0);
          // Killed by the kubelet's stop: reported as waiting for a restart that never comes
          // (the pod lingers, not Ready, as a vanished node's does); nothing is started again.
          const halted = restarts && stoppedKubelet();
          if (!halted && (stopped() || !restarts)) return;
          await post(run);
          c.lastState = c.state;
          c.restartCount++;
          c.state = {
            waiting: {
              reason: "CrashLoopBackOff",
              message: `back-off restarting failed container ${c.spec.name}`,
            },
          };
          await post(run);
          if (halted) return;
          await sleep(Math.min(10_000, 1000 * 2 ** (c.restartCount - 1)), signal);
        }
      }));
      const codes = main.map((c) => c.state.terminated?.exitCode ?? 137);
      run.phase = run.reason === "DeadlineExceeded"
        ? "Failed"
        : codes.every((x) => x === 0)
        ? "Succeeded"
        : "Failed";
    } finally {
      clearTimeout(deadlineTimer);
      for (const c of run.containers) {
        if ("running" in c.state) {
          c.state = {
            terminated: {
              exitCode: 137,
              reason: "ContainerStatusUnknown",
              message: "The container could not be located when the pod was terminated",
              finishedAt: nowIso(),
            },
          };
        }
      }
      // A pod that would be restarted keeps the status the loop reported when the kubelet
      // stopped: no final phase from a kubelet that is gone.
      if (!(stoppedKubelet() && restartPolicy === "Always")) {
        if (run.phase !== "Succeeded" && run.phase !== "Failed") run.phase = "Failed";
        run.finished = true;
        await post(run);
      }
    }
  }

  /** SIGTERM every running container's process group, SIGKILL after the grace period. */
  async function killContainers(run: PodRun, graceSeconds: number): Promise<void> {
    const running = () => run.containers.filter((c) => c.pid && "running" in c.state);
    const signalAll = (sig: Deno.Signal) => {
      for (const c of running()) {
        try {
          Deno.kill(-c.pid!, sig);
        } catch { /* gone */ }
      }
    };
    signalAll(graceSeconds > 0 ? "SIGTERM" : "SIGKILL");
    const deadline = Date.now() + graceSeconds * 1000;
    while (running().length && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
    if (running().length) signalAll("SIGKILL");
    await Promise.all(run.containers.map((c) => c.exited));
  }

  async function deletePod(run: PodRun): Promise<void> {
    const pod = run.pod;
    const grace = pod.metadata.deletionGracePeriodSeconds ??
      pod.spec.terminationGracePeriodSeconds ?? 30;
    await killContainers(run, grace);
    await run.done;
    await run.posting;
    if (run.gone) return;
    const res = await run.node.api.request(
      "DELETE",
      `/api/v1/namespaces/${pod.metadata.namespace}/pods/${pod.metadata.name}`,
      {
        apiVersion: "v1",
        kind: "DeleteOptions",
        gracePeriodSeconds: 0,
        preconditions: { uid: run.uid },
      },
    );
    if (res.status !== 200 && res.status !== 404 && res.status !== 409) {
      log(
        `kubelet: delete ${pod.metadata.namespace}/${pod.metadata.name}: HTTP ${res.status} ${
          res.body.message ?? ""
        }`,
      );
    }
  }

  function onPod(nd: SimNode, type: string, pod: Obj): void {
    if (type === "LISTED") {
      const live = new Set((pod.items ?? []).map((p: Obj) => p.metadata.uid));
      for (const run of [...pods.values()]) {
        if (run.node === nd && !live.has(run.uid)) onPod(nd, "DELETED", run.pod);
      }
      return;
    }
    const uid = pod.metadata.uid as string;
    let run = pods.get(uid);
    if (type === "DELETED") {
      if (run) {
        run.gone = true;
        run.deleting = true;
        void killContainers(run, 0);
        pods.delete(uid);
        // Kept a minute for its logs; stop() removes it at once instead of leaving the timer.
        const removal = setTimeout(() => {
          timers.splice(timers.indexOf(removal), 1);
          removals.delete(removal);
          if (byName.get(`${pod.metadata.namespace}/${pod.metadata.name}`) === run) {
            byName.delete(`${pod.metadata.namespace}/${pod.metadata.name}`);
          }
          void rm(run!.dir, { recursive: true, force: true });
        }, 60_000);
        timers.push(removal);
        removals.set(removal, run.dir);
      }
      return;
    }
    if (!run) {
      const terminal = pod.status?.phase === "Succeeded" || pod.status?.phase === "Failed";
      if (terminal) {
        // Finished before this kubelet started (or an event replay): only the final delete is ours.
        if (pod.metadata.deletionTimestamp) {
          void nd.api.request(
            "DELETE",
            `/api/v1/namespaces/${pod.metadata.namespace}/pods/${pod.metadata.name}`,
            {
              apiVersion: "v1",
              kind: "DeleteOptions",
              gracePeriodSeconds: 0,
              preconditions: { uid },
            },
          );
        }
        return;
      }
      const created: PodRun = {
        uid,
        node: nd,
        pod,
        dir: join(dir, "pods", uid),
        phase: "Pending",
        containers: [
          ...(pod.spec.initContainers ?? []).map((spec: Obj) => ({
            spec,
            init: true,
            restartCount: 0,
            state: {},
            lastState: {},
          })),
          ...pod.spec.containers.map((spec: Obj) => ({
            spec,
            init: false,
            restartCount: 0,
            state: {},
            lastState: {},
          })),
        ],
        deleting: false,
        gone: false,
        finished: false,
        posting: Promise.resolve(),
        dirty: false,
      };
      run = created;
      pods.set(uid, run);
      byName.set(`${pod.metadata.namespace}/${pod.metadata.name}`, run);
      run.done = runPod(run).catch((e) => {
        log(
          `kubelet: pod ${pod.metadata.namespace}/${pod.metadata.name} failed: ${
            e instanceof Error ? e.stack : e
          }`,
        );
      });
    }
    run.pod = { ...pod, status: run.pod.status };
    if (pod.metadata.deletionTimestamp && !run.deleting) {
      run.deleting = true;
      void deletePod(run);
    }
  }

  const watches = nodes.map((nd) =>
    nd.api.watch(
      `/api/v1/pods?fieldSelector=${encodeURIComponent(`spec.nodeName=${nd.name}`)}`,
      (type, pod) => onPod(nd, type, pod),
      signal,
    )
  );
  // New nodes carry the node.kubernetes.io/not-ready taint (TaintNodesByCondition admission) until the
  // node lifecycle controller sees them Ready; wait for that so callers can schedule right away.
  const names = new Set(nodes.map((nd) => nd.name));
  for (const deadline = Date.now() + 60_000;;) {
    const res = await admin.request("GET", "/api/v1/nodes");
    const tainted = (res.body.items ?? []).filter((x: Obj) =>
      names.has(x.metadata.name) &&
      (x.spec.taints ?? []).some((t: Obj) => t.key.startsWith("node.kubernetes.io/"))
    );
    if (res.status === 200 && tainted.length === 0) break;
    if (Date.now() > deadline) {
      throw new Error(
        `Cannot get nodes schedulable: still tainted after 60 s: ${
          tainted.map((x: Obj) => x.metadata.name).join(", ")
        }`,
      );
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  log(`kubelet: ${nodes.length} nodes ready`);

  let stopping: Promise<void> | undefined;
  return {
    nodes: nodes.map((nd) => ({
      name: nd.name,
      ip: nd.ip,
      profile: nd.profile.name,
      gpu: Boolean(nd.profile.gpu),
    })),
    port,
    stop(): Promise<void> {
      stopping ??= (async () => {
        abort.abort();
        for (const t of timers) clearTimeout(t);
        await Promise.all([...pods.values()].map((run) => killContainers(run, 0)));
        // Each pod's loop sees the abort and ends (no restart): nothing it started outlives
        // stop(). Bounded, in case a status post hangs.
        const ended = Promise.allSettled([...pods.values()].map((run) => run.done));
        let bound: ReturnType<typeof setTimeout> | undefined;
        await Promise.race([ended, new Promise((r) => (bound = setTimeout(r, 10_000)))]);
        clearTimeout(bound);
        await Promise.all(
          [...removals.values()].map((dir) => rm(dir, { recursive: true, force: true })),
        );
        await Promise.allSettled(watches);
        for (const run of pods.values()) run.gone = true;
        await Promise.all(servers.map((s) => new Promise<void>((r) => s.close(() => r()))));
        if (deleteNodesOnStop) {
          await Promise.all(
            nodes.map((nd) => admin.request("DELETE", `/api/v1/nodes/${nd.name}`).catch(() => {})),
          );
        }
        for (const nd of nodes) nd.api.close();
        admin.close();
      })();
      return stopping;
    },
  };
}

/**
 * Serves `GET /containerLogs/<ns>/<pod>/<container>` (query: follow, tailLines, timestamps, previous,
 * limitBytes, sinceSeconds) from the in-memory log buffers, as the kubelet's server does.
 *
 * @param req request
 * @param res response
 * @param byName pod runs by "namespace/name"
 */
function serveLogs(req: IncomingMessage, res: ServerResponse, byName: Map<string, PodRun>): void {
  const url = new URL(req.url ?? "/", "https://kubelet");
  if (url.pathname === "/healthz") {
    res.writeHead(200).end("ok");
    return;
  }
  const m = /^\/containerLogs\/([^/]+)\/([^/]+)\/([^/]+)$/.exec(url.pathname);
  if (!m || req.method !== "GET") {
    res.writeHead(404).end("not found");
    return;
  }
  const [, ns, podName, containerName] = m.map(decodeURIComponent) as [
    string,
    string,
    string,
    string,
  ];
  const run = byName.get(`${ns}/${podName}`);
  const c = run?.containers.find((x) => x.spec.name === containerName);
  const q = url.searchParams;
  const buf = q.get("previous") === "true" ? c?.previousLog : c?.log;
  if (!run || !c || !buf) {
    res.writeHead(404, { "content-type": "text/plain" }).end(
      `container "${containerName}" in pod "${podName}" is not available`,
    );
    return;
  }
  const timestamps = q.get("timestamps") === "true";
  const follow = q.get("follow") === "true";
  const since = q.get("sinceSeconds")
    ? Date.now() - Number(q.get("sinceSeconds")) * 1000
    : undefined;
  let limit = q.get("limitBytes") ? Number(q.get("limitBytes")) : Infinity;
  const fmt = (line: string): string | undefined => {
    const lm = LOG_LINE.exec(line);
    if (!lm) return undefined;
    if (since !== undefined && Date.parse(lm[1]!) < since) return undefined;
    return (timestamps ? `${lm[1]} ` : "") + lm[3] + "\n";
  };
  res.writeHead(200, { "content-type": "text/plain" });
  let sent = q.get("tailLines") ? Math.max(0, buf.lines.length - Number(q.get("tailLines"))) : 0;
  const flush = (): boolean => {
    while (sent < buf.lines.length && limit > 0) {
      let out = fmt(buf.lines[sent++]!);
      if (out === undefined) continue;
      if (out.length > limit) out = out.slice(0, limit);
      limit -= out.length;
      res.write(out);
    }
    return limit <= 0 || buf.closed || !follow;
  };
  if (flush()) {
    res.end();
    return;
  }
  const onMore = () => {
    if (flush()) {
      buf.listeners.delete(onMore);
      res.end();
    }
  };
  buf.listeners.add(onMore);
  req.on("close", () => buf.listeners.delete(onMore));
}
