/**
 * A real local Kubernetes control plane for tests: etcd, kube-apiserver, kube-controller-manager and
 * kube-scheduler built from Go modules by `build.sh`, each its own process on 127.0.0.1 with free
 * ports, a throwaway PKI and logs in a state folder.
 *
 * ```sh
 * deno task cluster:build            # build once (cached by source hash, outside the repo)
 * deno task cluster:up               # start, wait for readiness, write kubeconfigs, return
 * deno task cluster:up --foreground  # same, and stay until Ctrl-C (then stop everything)
 * deno task cluster:down             # stop what `up` started
 * ```
 *
 * ```ts ignore
 * const cluster = await startCluster({ stateDir: "/tmp/c1" });
 * // cluster.adminKubeconfig, await cluster.kubeconfigFor("alice", ["team-a"])
 * await cluster.stop();
 * ```
 *
 * @module
 */

import { existsSync, readdirSync, readFileSync } from "node:fs";
import { mkdir, readFile, rm, writeFile } from "node:fs/promises";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { stringify } from "yaml";
import { type CertFiles, createCa, createCert, createServiceAccountKeys } from "./pki.ts";

const HERE = dirname(fileURLToPath(import.meta.url));
/** The repository root (two folders above this file). */
export const REPO_ROOT: string = resolve(HERE, "..", "..");
/** Default state folder, git-ignored. Overridden by `AICR_CLUSTER_DIR`. */
export const DEFAULT_STATE_DIR: string = join(REPO_ROOT, ".cluster");

/** Ports the control plane listens on, all on 127.0.0.1 and all chosen free. */
export interface ClusterPorts {
  etcdClient: number;
  etcdPeer: number;
  apiserver: number;
  controllerManager: number;
  scheduler: number;
}

/** One started process. */
export interface ClusterProcess {
  name: string;
  pid: number;
  log: string;
  /** Text its /proc/<pid>/cmdline contains: guards against killing a reused pid. */
  match: string;
  /**
   * How it was started (control-plane components): what {@link restartComponent} starts again,
   * with the same flags, data folder and ports.
   */
  spawn?: {
    bin: string;
    args: string[];
    detach: boolean;
    lingerSeconds: number;
    prefix: string[];
  };
}

/** What `cluster.json` in the state folder holds; the kubelet stand-in and tests read it. */
export interface ClusterInfo {
  /** The apiserver URL, `https://127.0.0.1:<port>`. */
  server: string;
  stateDir: string;
  logDir: string;
  /** CA that signed every certificate (serving and client). */
  caFile: string;
  /** CA key: the kubelet stand-in signs its node client and serving certificates with it. */
  caKeyFile: string;
  adminKubeconfig: string;
  /** Admin client certificate (`O=system:masters`) for plain HTTPS clients. */
  adminCert: CertFiles;
  /** Client certificate the apiserver presents to kubelets (`pods/log`, exec). */
  kubeletClientCert: CertFiles;
  /** A loopback /24 private to this run (`127.X.Y`) from which simulated nodes take addresses. */
  nodeSubnet: string;
  ports: ClusterPorts;
  processes: ClusterProcess[];
  binDir: string;
  /** Kubernetes version of the built components. */
  version: string;
}

/** A running cluster. */
export interface Cluster extends ClusterInfo {
  /**
   * Writes (once) and returns the path of a kubeconfig for a client certificate with this user name and groups.
   * No RBAC is granted: tests bind what they need.
   */
  kubeconfigFor(user: string, groups?: readonly string[]): Promise<string>;
  /** Stops every process this cluster started (SIGTERM, then SIGKILL after a few seconds). */
  stop(): Promise<void>;
}

/** Options of {@link startCluster}. */
export interface StartClusterOptions {
  /** State folder; default `$AICR_CLUSTER_DIR` or `<repo>/.cluster`. It is wiped first. */
  stateDir?: string;
  /** Detach the processes (own session) so they outlive this process, as `cluster:up` does. */
  detach?: boolean;
  /** Progress lines. Default: stderr. */
  log?: (line: string) => void;
  /** Give up waiting for readiness after this many ms (default 120 000). */
  readyTimeoutMs?: number;
  /**
   * Run every component inside this network namespace (`/run/netns/<name>`, entered with
   * `nsenter --net`, so mounts stay shared): the real-kubelet lane's. The caller makes the
   * apiserver reachable on 127.0.0.1:`apiserverPort` of this machine (a forwarder).
   */
  netns?: string;
  /** The apiserver's port (default: a free one). */
  apiserverPort?: number;
  /**
   * A non-loopback address of the netns the apiserver advertises (the `kubernetes` Service's
   * endpoint; its serving certificate names it). Default: 127.0.0.1 and no endpoints.
   */
  advertiseAddress?: string;
}

const enc = new TextEncoder();

/**
 * The default progress writer: one line to stderr.
 *
 * @param line text without newline
 */
export function stderrLog(line: string): void {
  Deno.stderr.writeSync(enc.encode(`${line}\n`));
}

/**
 * Resolves the state folder from an option or the environment.
 *
 * @param stateDir explicit folder
 * @returns an absolute path
 */
export function resolveStateDir(stateDir?: string): string {
  return resolve(stateDir ?? Deno.env.get("AICR_CLUSTER_DIR") ?? DEFAULT_STATE_DIR);
}

/**
 * Builds the control plane binaries (or finds them cached) with `build.sh`, streaming its progress;
 * with `AICR_K8S_VERSION=v1.x.y` (`deno task test:k8s`, `minor.ts`), that release's with
 * `build-minor.sh` instead, in a cache entry of its own.
 *
 * @param options.log progress writer (default stderr)
 * @returns the folder holding `kcp` and `etcd`
 * @throws {Error} when the build fails
 */
export async function buildCluster(
  options: { log?: (line: string) => void } = {},
): Promise<string> {
  const { log = stderrLog } = options;
  const release = Deno.env.get("AICR_K8S_VERSION");
  const child = new Deno.Command("bash", {
    args: release ? [join(HERE, "build-minor.sh"), release] : [join(HERE, "build.sh")],
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const pump = async (stream: ReadableStream<Uint8Array>, sink: (l: string) => void) => {
    let buf = "";
    for await (const chunk of stream.pipeThrough(new TextDecoderStream())) {
      buf += chunk;
      let i;
      while ((i = buf.indexOf("\n")) >= 0) {
        sink(buf.slice(0, i));
        buf = buf.slice(i + 1);
      }
    }
    if (buf) sink(buf);
  };
  const outLines: string[] = [];
  const [status] = await Promise.all([
    child.status,
    pump(child.stdout, (l) => outLines.push(l)),
    pump(child.stderr, log),
  ]);
  const binDir = outLines.at(-1);
  if (!status.success || !binDir) {
    throw new Error(
      `Cannot build the test cluster${
        release ? ` (Kubernetes ${release})` : ""
      }: the build exited with code ${status.code}`,
    );
  }
  return binDir;
}

/**
 * Picks `count` distinct free TCP ports on 127.0.0.1 (held open together so they differ).
 *
 * @param count how many
 * @returns the ports
 */
export function freePorts(count: number): number[] {
  const listeners = Array.from(
    { length: count },
    () => Deno.listen({ hostname: "127.0.0.1", port: 0 }),
  );
  const ports = listeners.map((l) => (l.addr as Deno.NetAddr).port);
  for (const l of listeners) l.close();
  return ports;
}

/**
 * Renders a kubeconfig with embedded certificate data.
 *
 * @param server apiserver URL
 * @param ca CA file
 * @param client client certificate
 * @param user user/context name
 * @returns kubeconfig YAML
 */
function kubeconfigYaml(server: string, ca: string, client: CertFiles, user: string): string {
  const b64 = (p: string) => btoa(readFileSync(p, "latin1"));
  return stringify({
    apiVersion: "v1",
    kind: "Config",
    clusters: [{ name: "aicr-test", cluster: { server, "certificate-authority-data": b64(ca) } }],
    users: [{
      name: user,
      user: {
        "client-certificate-data": b64(client.cert),
        "client-key-data": b64(client.key),
      },
    }],
    contexts: [{ name: user, context: { cluster: "aicr-test", user } }],
    "current-context": user,
  });
}

/**
 * Spawns one component in its own session with output appended to its log file.
 *
 * Its own session keeps a terminal's Ctrl-C from reaching every component at once (an apiserver
 * whose etcd died first spends its whole grace period retrying): the caller stops them in order.
 * When not detached, a watchdog shell stays as the recorded process: SIGTERM to it stops the
 * component, and if this process dies without stopping it (Ctrl-C of `deno test`, SIGKILL), the
 * component is stopped `lingerSeconds` later (etcd lingers, so the apiserver goes first).
 *
 * @param name component name (log file base name)
 * @param bin executable
 * @param args arguments
 * @param logDir logs folder
 * @param detach outlive this process (as `cluster:up` does), with no watchdog
 * @param lingerSeconds delay before a watchdog stops an orphaned component
 * @returns the child and its record
 */
export function spawnComponent(
  name: string,
  bin: string,
  args: string[],
  logDir: string,
  detach: boolean,
  lingerSeconds = 0,
  prefix: readonly string[] = [],
): { child: Deno.ChildProcess; proc: ClusterProcess } {
  const log = join(logDir, `${name}.log`);
  // setsid does not fork (a child of ours is no group leader), so the pid is the shell's, and
  // `exec` makes it the component's when detached.
  const script = detach ? 'log="$1"; shift 3; exec "$@" >>"$log" 2>&1 </dev/null' : [
    'log="$1"; parent="$2"; linger="$3"; shift 3',
    '"$@" >>"$log" 2>&1 </dev/null &',
    'child=$!; nap=""',
    // The nap is ended with the shell, so no `sleep 1` outlives it.
    `trap 'kill -TERM "$child" $nap 2>/dev/null; wait "$child"; exit $?' TERM INT`,
    'while kill -0 "$child" 2>/dev/null; do',
    '  if ! kill -0 "$parent" 2>/dev/null; then',
    '    sleep "$linger"; kill -TERM "$child" 2>/dev/null; sleep 5; kill -KILL "$child" 2>/dev/null; break',
    "  fi",
    '  sleep 1 & nap=$!; wait "$nap" 2>/dev/null; nap=""',
    "done",
    'wait "$child"',
  ].join("\n");
  const argv = [
    "setsid",
    "/bin/sh",
    "-c",
    script,
    "sh",
    log,
    String(Deno.pid),
    String(lingerSeconds),
    ...prefix,
    bin,
    ...args,
  ];
  const child = new Deno.Command(argv[0]!, {
    args: argv.slice(1),
    stdin: "null",
    stdout: "null",
    stderr: "null",
  }).spawn();
  if (detach) child.unref();
  const spawn = { bin, args, detach, lingerSeconds, prefix: [...prefix] };
  return { child, proc: { name, pid: child.pid, log, match: bin, spawn } };
}

/**
 * The command prefix that runs a program in a named network namespace and nothing else
 * (`ip netns exec` would also give it a mount namespace of its own, which hides the kubelet's
 * volume mounts from the container runtime).
 *
 * @param netns name under /run/netns
 * @returns argv prefix
 */
export function netnsPrefix(netns: string): string[] {
  return ["nsenter", `--net=/run/netns/${netns}`, "--"];
}

/**
 * Whether a pid is alive and still runs what we started (so a reused pid is never killed).
 *
 * @param pid process id
 * @param match text its command line contains
 * @returns true when it is ours and alive
 */
export function isOurs(pid: number, match: string): boolean {
  try {
    const cmdline = readFileSync(`/proc/${pid}/cmdline`, "latin1");
    const stat = readFileSync(`/proc/${pid}/stat`, "latin1");
    return cmdline.includes(match) && !/\) Z /.test(stat);
  } catch {
    return false;
  }
}

/**
 * Stops processes one by one in the order given: SIGTERM, then SIGKILL if still running after `graceMs`.
 *
 * @param procs processes to stop
 * @param graceMs grace period
 */
export async function stopProcesses(procs: ClusterProcess[], graceMs = 8000): Promise<void> {
  // One at a time, in the order given (clients before the apiserver, the apiserver before etcd): an
  // apiserver whose etcd is already gone spends its whole grace period retrying.
  for (const p of procs) {
    if (!isOurs(p.pid, p.match)) continue;
    try {
      Deno.kill(p.pid, "SIGTERM");
    } catch { /* already gone */ }
    const deadline = Date.now() + graceMs;
    while (Date.now() < deadline && isOurs(p.pid, p.match)) {
      await new Promise((r) => setTimeout(r, 50));
    }
    if (isOurs(p.pid, p.match)) {
      try {
        Deno.kill(p.pid, "SIGKILL");
      } catch { /* already gone */ }
    }
  }
}

/**
 * Components of the cluster at `stateDir` still running under a pid nobody recorded: when a
 * watchdog shell is killed (SIGKILL), its component is reparented and the recorded pid is gone.
 * Found by the command line: the program is a recorded one and an argument names the state folder
 * (a `mktemp` folder of its own), so another cluster's processes never match.
 *
 * @param stateDir the cluster's state folder (absolute)
 * @param procs the recorded processes, in the order to stop them
 * @param procDir the proc file system (a test passes its own)
 * @returns the strays, in the order of the recorded programs
 */
export function strayProcesses(
  stateDir: string,
  procs: readonly ClusterProcess[],
  procDir = "/proc",
): ClusterProcess[] {
  const recorded = new Set(procs.map((p) => p.pid));
  const folder = stateDir.endsWith("/") ? stateDir : `${stateDir}/`;
  const found: { pid: number; argv: string[] }[] = [];
  let entries: string[] = [];
  try {
    entries = readdirSync(procDir);
  } catch { /* no proc file system: nothing to find */ }
  for (const entry of entries) {
    if (!/^\d+$/.test(entry)) continue;
    const pid = Number(entry);
    if (pid === Deno.pid || recorded.has(pid)) continue;
    try {
      const argv = readFileSync(join(procDir, entry, "cmdline"), "latin1").split("\0");
      if (argv.slice(1).some((arg) => arg.includes(folder))) found.push({ pid, argv });
    } catch { /* gone meanwhile */ }
  }
  const strays: ClusterProcess[] = [];
  for (const p of procs) {
    for (const f of found) {
      if (f.argv[0] !== p.match || strays.some((s) => s.pid === f.pid)) continue;
      strays.push({ name: `${p.name} (stray)`, pid: f.pid, log: p.log, match: p.match });
    }
  }
  return strays;
}

/**
 * Polls an HTTPS URL until it answers 200 or the deadline passes.
 *
 * @param url URL to get
 * @param client HTTP client with the admin certificate
 * @param deadline epoch ms
 * @param alive throws when a component died, to fail fast
 * @returns the last body
 * @throws {Error} on timeout
 */
async function waitFor200(
  url: string,
  client: Deno.HttpClient,
  deadline: number,
  alive: () => void,
): Promise<string> {
  let last = "";
  while (Date.now() < deadline) {
    alive();
    try {
      const res = await fetch(url, { client, signal: AbortSignal.timeout(5000) });
      last = await res.text();
      if (res.status === 200) return last;
      last = `HTTP ${res.status}: ${last.slice(0, 2000)}`;
    } catch (e) {
      last = String(e);
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`Cannot reach "${url}": ${last}`);
}

/**
 * Starts etcd, kube-apiserver, kube-controller-manager and kube-scheduler, waits until the apiserver
 * is ready, the scheduler and controller-manager are healthy and the `default` ServiceAccount exists,
 * then writes `admin.kubeconfig`, `user-alice.kubeconfig` (a user with no rights) and `cluster.json`.
 *
 * @param options state folder, detach mode, logger, timeout
 * @returns the running cluster
 * @throws {Error} when the build, the PKI or readiness fails (processes started so far are stopped)
 */
export async function startCluster(options: StartClusterOptions = {}): Promise<Cluster> {
  const { detach = false, log = stderrLog, readyTimeoutMs = 120_000 } = options;
  // nsenter execs the component, so the recorded pid and /proc cmdline stay the component's.
  const prefix = options.netns ? netnsPrefix(options.netns) : [];
  const advertise = options.advertiseAddress;
  const stateDir = resolveStateDir(options.stateDir);
  const binDir = await buildCluster({ log });
  // Readiness is timed from here: a build (or a wait for another checkout's build) is not start-up.
  const t0 = performance.now();
  // Wipe only a folder that is ours (marked) or empty: never a mistyped AICR_CLUSTER_DIR.
  const marker = join(stateDir, ".aicr-test-cluster");
  if (existsSync(stateDir) && !existsSync(marker) && readdirSync(stateDir).length > 0) {
    throw new Error(
      `Cannot use "${stateDir}" as the cluster state folder: it is not empty and not a test cluster's`,
    );
  }
  await rm(stateDir, { recursive: true, force: true });
  await mkdir(stateDir, { recursive: true, mode: 0o700 });
  await writeFile(marker, "state folder of an aicr test cluster: wiped by the next start\n");
  const pki = join(stateDir, "pki");
  const logDir = join(stateDir, "logs");
  for (const d of [pki, logDir, join(stateDir, "etcd"), join(stateDir, "certs")]) {
    await mkdir(d, { recursive: true, mode: 0o700 });
  }
  const [etcdClient, etcdPeer, freeApiserverPort, kcmPort, schedPort] = freePorts(5) as [
    number,
    number,
    number,
    number,
    number,
  ];
  const apiserverPort = options.apiserverPort ?? freeApiserverPort;
  const ports: ClusterPorts = {
    etcdClient,
    etcdPeer,
    apiserver: apiserverPort,
    controllerManager: kcmPort,
    scheduler: schedPort,
  };
  const server = `https://127.0.0.1:${apiserverPort}`;
  // A /24 of loopback addresses private to this run, so two runs' nodes never share an address.
  const nodeSubnet = `127.${100 + Math.floor(Math.random() * 150)}.${
    Math.floor(Math.random() * 256)
  }`;

  log(`cluster: generating PKI in ${pki}`);
  const ca = await createCa(pki, "ca");
  const frontProxyCa = await createCa(pki, "front-proxy-ca");
  const [apiCert, admin, kcm, sched, kubeletClient, sa, frontProxy] = await Promise.all([
    createCert(pki, "apiserver", ca, {
      cn: "kube-apiserver",
      usage: "server",
      ips: ["127.0.0.1", "10.96.0.1", ...(advertise ? [advertise] : [])],
      dns: [
        "localhost",
        "kubernetes",
        "kubernetes.default",
        "kubernetes.default.svc",
        "kubernetes.default.svc.cluster.local",
      ],
    }),
    createCert(pki, "admin", ca, { cn: "aicr-admin", orgs: ["system:masters"], usage: "client" }),
    createCert(pki, "controller-manager", ca, {
      cn: "system:kube-controller-manager",
      usage: "client",
    }),
    createCert(pki, "scheduler", ca, { cn: "system:kube-scheduler", usage: "client" }),
    createCert(pki, "apiserver-kubelet-client", ca, {
      cn: "kube-apiserver-kubelet-client",
      orgs: ["system:masters"],
      usage: "client",
    }),
    createServiceAccountKeys(pki),
    // The aggregation layer's request-header identity; without it every component logs errors
    // about the missing requestheader CA bundle.
    createCert(pki, "front-proxy-client", frontProxyCa, {
      cn: "front-proxy-client",
      usage: "client",
    }),
  ]);
  const adminKubeconfig = join(stateDir, "admin.kubeconfig");
  await writeFile(adminKubeconfig, kubeconfigYaml(server, ca.cert, admin, "aicr-admin"));
  const kcmKubeconfig = join(stateDir, "controller-manager.kubeconfig");
  await writeFile(
    kcmKubeconfig,
    kubeconfigYaml(server, ca.cert, kcm, "system:kube-controller-manager"),
  );
  const schedKubeconfig = join(stateDir, "scheduler.kubeconfig");
  await writeFile(schedKubeconfig, kubeconfigYaml(server, ca.cert, sched, "system:kube-scheduler"));

  const kcp = join(binDir, "kcp");
  const children: Deno.ChildProcess[] = [];
  const procs: ClusterProcess[] = [];
  const start = (name: string, bin: string, args: string[]) => {
    const { child, proc } = spawnComponent(
      name,
      bin,
      args,
      logDir,
      detach,
      name === "etcd" ? 4 : 0,
      prefix,
    );
    children.push(child);
    procs.push(proc);
    void child.status.then((st) => exited.set(name, st.code));
    log(`cluster: started ${name} (pid ${proc.pid}, log ${proc.log})`);
  };
  // Exit codes of components that ended (our own children: their status is exact, unlike /proc,
  // whose cmdline reads empty while a process execs).
  const exited = new Map<string, number>();
  const alive = () => {
    for (const p of procs) {
      if (exited.has(p.name)) {
        const tail = existsSync(p.log)
          ? readFileSync(p.log, "utf8").split("\n").slice(-15).join("\n")
          : "";
        throw new Error(
          `Cannot start the test cluster: "${p.name}" exited with code ${
            exited.get(p.name)
          }; its log ends:\n${tail}`,
        );
      }
    }
  };
  const client = Deno.createHttpClient({
    caCerts: [await readFile(ca.cert, "utf8")],
    cert: await readFile(admin.cert, "utf8"),
    key: await readFile(admin.key, "utf8"),
  });
  try {
    start("etcd", join(binDir, "etcd"), [
      "--name=default",
      `--data-dir=${join(stateDir, "etcd")}`,
      `--listen-client-urls=http://127.0.0.1:${etcdClient}`,
      `--advertise-client-urls=http://127.0.0.1:${etcdClient}`,
      `--listen-peer-urls=http://127.0.0.1:${etcdPeer}`,
      `--initial-advertise-peer-urls=http://127.0.0.1:${etcdPeer}`,
      `--initial-cluster=default=http://127.0.0.1:${etcdPeer}`,
      "--initial-cluster-state=new",
      // A test cluster dies with its folder: skip fsync, which dominates etcd's latency on CI disks.
      "--unsafe-no-fsync",
      "--log-level=warn",
    ]);
    start("kube-apiserver", kcp, [
      "apiserver",
      `--etcd-servers=http://127.0.0.1:${etcdClient}`,
      // In the lane's netns: every address of the namespace (its loopback, where the forwarder
      // arrives, and the advertised one, where the Service VIP's DNAT points).
      `--bind-address=${advertise ? "0.0.0.0" : "127.0.0.1"}`,
      `--advertise-address=${advertise ?? "127.0.0.1"}`,
      `--secure-port=${apiserverPort}`,
      `--cert-dir=${join(stateDir, "certs")}`,
      `--tls-cert-file=${apiCert.cert}`,
      `--tls-private-key-file=${apiCert.key}`,
      `--client-ca-file=${ca.cert}`,
      "--authorization-mode=Node,RBAC",
      "--enable-admission-plugins=NodeRestriction",
      "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
      `--service-account-key-file=${sa.pub}`,
      `--service-account-signing-key-file=${sa.key}`,
      "--service-cluster-ip-range=10.96.0.0/16",
      // Endpoints may not hold loopback addresses, and nothing routes to the Service IP here anyway:
      // pods reach the apiserver through KUBERNETES_SERVICE_HOST=127.0.0.1 set by the kubelet stand-in.
      `--endpoint-reconciler-type=${advertise ? "lease" : "none"}`,
      `--kubelet-client-certificate=${kubeletClient.cert}`,
      `--kubelet-client-key=${kubeletClient.key}`,
      `--kubelet-certificate-authority=${ca.cert}`,
      "--kubelet-preferred-address-types=InternalIP",
      `--requestheader-client-ca-file=${frontProxyCa.cert}`,
      "--requestheader-allowed-names=front-proxy-client",
      "--requestheader-username-headers=X-Remote-User",
      "--requestheader-group-headers=X-Remote-Group",
      "--requestheader-extra-headers-prefix=X-Remote-Extra-",
      `--proxy-client-cert-file=${frontProxy.cert}`,
      `--proxy-client-key-file=${frontProxy.key}`,
      "--allow-privileged=true",
      // An older release's feature gates (`deno task test:k8s`): e.g. on 1.30,
      // AICR_APISERVER_FEATURE_GATES=ServiceAccountTokenNodeBinding=true for DaemonSet mode.
      ...(Deno.env.get("AICR_APISERVER_FEATURE_GATES")
        ? [`--feature-gates=${Deno.env.get("AICR_APISERVER_FEATURE_GATES")}`]
        : []),
      "--profiling=false",
      "--v=1",
    ]);
    const deadline = Date.now() + readyTimeoutMs;
    await waitFor200(`${server}/readyz`, client, deadline, alive);
    log(
      `cluster: kube-apiserver ready at ${server} after ${Math.round(performance.now() - t0)} ms`,
    );
    const common = (port: number, kubeconfig: string, dir: string) => [
      `--kubeconfig=${kubeconfig}`,
      `--authentication-kubeconfig=${kubeconfig}`,
      `--authorization-kubeconfig=${kubeconfig}`,
      "--bind-address=127.0.0.1",
      `--secure-port=${port}`,
      `--cert-dir=${join(stateDir, "certs", dir)}`,
      "--leader-elect=false",
      // The default client rate limit (20 qps) paces the controller-manager's start-up (one
      // ServiceAccount and token per controller) by seconds; a test cluster has no one to protect.
      "--kube-api-qps=500",
      "--kube-api-burst=1000",
      "--profiling=false",
      "--v=1",
    ];
    start("kube-controller-manager", kcp, [
      "controller-manager",
      ...common(kcmPort, kcmKubeconfig, "kcm"),
      "--controllers=*",
      "--use-service-account-credentials=true",
      `--service-account-private-key-file=${sa.key}`,
      `--root-ca-file=${ca.cert}`,
      `--cluster-signing-cert-file=${ca.cert}`,
      `--cluster-signing-key-file=${ca.key}`,
      "--allocate-node-cidrs=false",
      // Check nodes every second (default 5 s): new nodes lose their not-ready taint sooner.
      "--node-monitor-period=1s",
    ]);
    start("kube-scheduler", kcp, ["scheduler", ...common(schedPort, schedKubeconfig, "scheduler")]);
    // Their serving certs are self-signed in --cert-dir; /healthz is always allowed: curl -k semantics.
    await Promise.all([
      waitForHealthz(`https://127.0.0.1:${kcmPort}/healthz`, deadline, alive, prefix),
      waitForHealthz(`https://127.0.0.1:${schedPort}/healthz`, deadline, alive, prefix),
    ]);
    log(
      `cluster: controller-manager and scheduler healthy after ${
        Math.round(performance.now() - t0)
      } ms`,
    );
    // Pods need their ServiceAccount: the serviceaccount controller creates `default` per namespace.
    await waitFor200(
      `${server}/api/v1/namespaces/default/serviceaccounts/default`,
      client,
      deadline,
      alive,
    );
    const version = JSON.parse(await waitFor200(`${server}/version`, client, deadline, alive))
      .gitVersion as string;
    const info: ClusterInfo = {
      server,
      stateDir,
      logDir,
      caFile: ca.cert,
      caKeyFile: ca.key,
      adminKubeconfig,
      adminCert: admin,
      kubeletClientCert: kubeletClient,
      nodeSubnet,
      ports,
      processes: procs,
      binDir,
      version,
    };
    await writeFile(join(stateDir, "cluster.json"), JSON.stringify(info, null, 2) + "\n");
    const cluster = attach(info, children);
    await cluster.kubeconfigFor("alice");
    log(`cluster: ${version} ready in ${Math.round(performance.now() - t0)} ms; state ${stateDir}`);
    return cluster;
  } catch (e) {
    await stopProcesses([...procs].reverse(), 2000);
    throw e;
  } finally {
    client.close();
  }
}

/**
 * Polls a component's /healthz with `curl -k` (its serving certificate is self-signed).
 *
 * @param url healthz URL
 * @param deadline epoch ms
 * @param alive throws when a component died
 * @param prefix command prefix entering the components' network namespace, if any
 * @throws {Error} on timeout
 */
async function waitForHealthz(
  url: string,
  deadline: number,
  alive: () => void,
  prefix: readonly string[] = [],
): Promise<void> {
  let last = "";
  while (Date.now() < deadline) {
    alive();
    const argv = [
      ...prefix,
      "curl",
      "-ksS",
      "-m",
      "3",
      "-o",
      "/dev/null",
      "-w",
      "%{http_code}",
      url,
    ];
    const out = await new Deno.Command(argv[0]!, {
      args: argv.slice(1),
      stdout: "piped",
      stderr: "piped",
    }).output();
    last = new TextDecoder().decode(out.stdout) + new TextDecoder().decode(out.stderr);
    if (last.trim() === "200") return;
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`Cannot reach "${url}": ${last}`);
}

/** Control-plane components that {@link crashComponent} and {@link startComponentAgain} handle. */
export type RestartableComponent =
  | "etcd"
  | "kube-apiserver"
  | "kube-controller-manager"
  | "kube-scheduler";

/**
 * The pid of the component itself: the recorded one when it was started detached (the shell
 * execs it), else the watchdog shell's child that runs it.
 *
 * @param proc the recorded process
 * @returns its pid, or undefined when it is not running
 */
export function componentPid(proc: ClusterProcess): number | undefined {
  if (!isOurs(proc.pid, proc.match)) return undefined;
  if (proc.spawn?.detach !== false) return proc.pid;
  try {
    const kids = readFileSync(`/proc/${proc.pid}/task/${proc.pid}/children`, "latin1");
    return kids.trim().split(/\s+/).map(Number).find((k) => k > 0 && isOurs(k, proc.match));
  } catch {
    return undefined;
  }
}

/** The recorded process of a restartable component, or an error naming what is missing. */
function restartable(cluster: ClusterInfo, name: RestartableComponent) {
  const proc = cluster.processes.find((p) => p.name === name);
  if (!proc?.spawn) {
    throw new Error(
      `Cannot restart "${name}": ${cluster.stateDir}/cluster.json records no such component ` +
        "with its command line (a cluster started before restarts were recorded: start it again)",
    );
  }
  return { proc, spawn: proc.spawn };
}

/**
 * Kills one control-plane component with SIGKILL, as a crash would (no graceful shutdown), and
 * waits until it is gone. Its record stays in `cluster.json` until {@link startComponentAgain}.
 *
 * @param cluster the running cluster
 * @param name the component
 * @returns the pid it killed
 * @throws {Error} when the component is not running or outlives SIGKILL by 10 s
 */
export async function crashComponent(
  cluster: ClusterInfo,
  name: RestartableComponent,
): Promise<number> {
  const { proc } = restartable(cluster, name);
  const pid = componentPid(proc);
  if (pid === undefined) throw new Error(`Cannot crash "${name}": it is not running`);
  Deno.kill(pid, "SIGKILL");
  const deadline = Date.now() + 10_000;
  while (isOurs(pid, proc.match)) {
    if (Date.now() > deadline) throw new Error(`"${name}" (pid ${pid}) runs 10 s after SIGKILL`);
    await new Promise((r) => setTimeout(r, 20));
  }
  return pid;
}

/**
 * Starts a crashed component again with the flags, data folder and ports it had, records the
 * new process in `cluster.processes` and `cluster.json` (so `stop()` and `cluster:down` stop the
 * new one, checked against its command line as before), and waits until it answers: `/readyz`
 * of the apiserver (which needs etcd), `/health` of etcd, `/healthz` of the others.
 *
 * @param cluster the cluster (its `processes` are updated in place)
 * @param name the component
 * @param options.readyTimeoutMs give up waiting after this long (default 120 000)
 * @returns the new process record
 * @throws {Error} when it still runs, exits again, or does not answer in time
 */
export async function startComponentAgain(
  cluster: ClusterInfo,
  name: RestartableComponent,
  options: { readyTimeoutMs?: number } = {},
): Promise<ClusterProcess> {
  const { proc: old, spawn } = restartable(cluster, name);
  if (componentPid(old) !== undefined) {
    throw new Error(`Cannot start "${name}" again: it still runs`);
  }
  const { child, proc } = spawnComponent(
    name,
    spawn.bin,
    spawn.args,
    cluster.logDir,
    spawn.detach,
    spawn.lingerSeconds,
    spawn.prefix,
  );
  let exitCode: number | undefined;
  void child.status.then((st) => (exitCode = st.code));
  cluster.processes[cluster.processes.indexOf(old)] = proc;
  const file = join(cluster.stateDir, "cluster.json");
  const saved = JSON.parse(await readFile(file, "utf8")) as ClusterInfo;
  saved.processes = saved.processes.map((p) => p.name === name ? proc : p);
  // Renamed into place: a `cluster:down` reading it meanwhile never sees half a file.
  await writeFile(`${file}.tmp`, JSON.stringify(saved, null, 2) + "\n");
  await Deno.rename(`${file}.tmp`, file);
  const { ports } = cluster;
  const url = {
    "etcd": `http://127.0.0.1:${ports.etcdClient}/health`,
    "kube-apiserver": `https://127.0.0.1:${ports.apiserver}/readyz`,
    "kube-controller-manager": `https://127.0.0.1:${ports.controllerManager}/healthz`,
    "kube-scheduler": `https://127.0.0.1:${ports.scheduler}/healthz`,
  }[name];
  const alive = () => {
    if (exitCode !== undefined) {
      throw new Error(`"${name}" exited with code ${exitCode} after its restart; see ${proc.log}`);
    }
  };
  await waitForHealthz(url, Date.now() + (options.readyTimeoutMs ?? 120_000), alive, spawn.prefix);
  return proc;
}

/**
 * A crash and a restart: {@link crashComponent}, `downMs` of absence, {@link startComponentAgain}.
 *
 * @param cluster the cluster
 * @param name the component
 * @param options how long it stays down (default 0) and the readiness timeout
 * @returns the new process record
 */
export async function restartComponent(
  cluster: ClusterInfo,
  name: RestartableComponent,
  options: { downMs?: number; readyTimeoutMs?: number } = {},
): Promise<ClusterProcess> {
  await crashComponent(cluster, name);
  await new Promise((r) => setTimeout(r, options.downMs ?? 0));
  return await startComponentAgain(cluster, name, options);
}

/**
 * Wraps cluster info with its methods.
 *
 * @param info the cluster's record
 * @param children child handles when this process started them
 * @returns the cluster
 */
function attach(info: ClusterInfo, children: Deno.ChildProcess[] = []): Cluster {
  let stopped: Promise<void> | undefined;
  return {
    ...info,
    async kubeconfigFor(user: string, groups: readonly string[] = []): Promise<string> {
      const safe = `${user}${groups.length ? "." + groups.join(".") : ""}`.replace(
        /[^A-Za-z0-9._-]/g,
        "_",
      );
      const path = join(info.stateDir, `user-${safe}.kubeconfig`);
      if (existsSync(path)) return path;
      const dir = join(info.stateDir, "pki", "users");
      await mkdir(dir, { recursive: true });
      const cert = await createCert(dir, safe, { cert: info.caFile, key: info.caKeyFile }, {
        cn: user,
        orgs: groups,
        usage: "client",
      });
      await writeFile(path, kubeconfigYaml(info.server, info.caFile, cert, user));
      return path;
    },
    stop(): Promise<void> {
      stopped ??= (async () => {
        const order = [...info.processes].reverse();
        await stopProcesses(order);
        await stopProcesses(strayProcesses(info.stateDir, order), 2000);
        await Promise.allSettled(children.map((c) => c.status));
      })();
      return stopped;
    },
  };
}

/**
 * Attaches to a cluster already started in `stateDir` (by `cluster:up` or another test run) if its
 * apiserver answers `/readyz`.
 *
 * @param stateDir state folder (default `$AICR_CLUSTER_DIR` or `<repo>/.cluster`)
 * @returns the cluster, or undefined when none is running there
 */
export async function loadCluster(stateDir?: string): Promise<Cluster | undefined> {
  const dir = resolveStateDir(stateDir);
  const file = join(dir, "cluster.json");
  if (!existsSync(file)) return undefined;
  const info = JSON.parse(await readFile(file, "utf8")) as ClusterInfo;
  if (!info.processes.every((p) => isOurs(p.pid, p.match))) return undefined;
  const client = Deno.createHttpClient({
    caCerts: [await readFile(info.caFile, "utf8")],
    cert: await readFile(info.adminCert.cert, "utf8"),
    key: await readFile(info.adminCert.key, "utf8"),
  });
  try {
    const res = await fetch(`${info.server}/readyz`, { client, signal: AbortSignal.timeout(3000) });
    await res.body?.cancel();
    return res.ok ? attach(info) : undefined;
  } catch {
    return undefined;
  } finally {
    client.close();
  }
}

/**
 * Stops a cluster recorded in `stateDir/cluster.json` (by pid, only processes still running our binaries),
 * then any of its components a killed watchdog left under another pid ({@link strayProcesses}).
 *
 * @param stateDir state folder
 * @returns true when there was a record
 */
export async function stopClusterAt(stateDir?: string): Promise<boolean> {
  const file = join(resolveStateDir(stateDir), "cluster.json");
  if (!existsSync(file)) return false;
  const info = JSON.parse(await readFile(file, "utf8")) as ClusterInfo;
  const order = [...info.processes].reverse();
  await stopProcesses(order);
  await stopProcesses(strayProcesses(info.stateDir, order), 2000);
  return true;
}

/**
 * Resolves on the first SIGINT or SIGTERM, then removes its listeners (so the process can exit).
 *
 * @returns when a signal arrived
 */
export function waitForSignal(): Promise<Deno.Signal> {
  return new Promise((resolveSignal) => {
    const handlers = (["SIGINT", "SIGTERM"] as const).map((sig) => {
      const h = () => {
        for (const [s, f] of handlers) Deno.removeSignalListener(s, f);
        resolveSignal(sig);
      };
      return [sig, h] as const;
    });
    for (const [s, f] of handlers) Deno.addSignalListener(s, f);
  });
}

/**
 * Starts the kubelet stand-in (`tests/kubelet/main.ts`) as a detached process of the cluster, records
 * it in `cluster.json` (so `down` stops it first) and waits until it has registered its nodes.
 *
 * @param cluster the running cluster
 * @param nodes `profile=count,...` (default one node per profile)
 * @throws {Error} when it exits or takes longer than 60 s
 */
async function startKubeletProcess(cluster: Cluster, nodes?: string): Promise<void> {
  const main = join(REPO_ROOT, "tests", "kubelet", "main.ts");
  const ready = join(cluster.stateDir, "kubelet.json");
  await rm(ready, { force: true });
  const { child, proc } = spawnComponent(
    "kubelet",
    Deno.execPath(),
    ["run", "-A", main, `--state-dir=${cluster.stateDir}`, ...(nodes ? [`--nodes=${nodes}`] : [])],
    cluster.logDir,
    true,
  );
  proc.match = main;
  // Exit is told by the child's status, not /proc: its cmdline is empty while the shell
  // execs the kubelet, which read as "exited" and failed a healthy start now and then.
  let exited = false;
  child.status.then(() => (exited = true), () => (exited = true));
  const info: ClusterInfo = { ...cluster, processes: [...cluster.processes, proc] };
  delete (info as Partial<Cluster>).kubeconfigFor;
  delete (info as Partial<Cluster>).stop;
  await writeFile(join(cluster.stateDir, "cluster.json"), JSON.stringify(info, null, 2) + "\n");
  stderrLog(`cluster: started kubelet stand-in (pid ${proc.pid}, log ${proc.log})`);
  const deadline = Date.now() + 60_000;
  while (!existsSync(ready)) {
    if (exited || Date.now() > deadline) {
      const tail = existsSync(proc.log)
        ? readFileSync(proc.log, "utf8").split("\n").slice(-15).join("\n")
        : "(no log written)";
      throw new Error(`Cannot start the kubelet stand-in; its log ends:\n${tail}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  stderrLog(
    `cluster: kubelet nodes ${
      JSON.parse(readFileSync(ready, "utf8")).nodes.map((n: { name: string }) => n.name).join(", ")
    }`,
  );
}

/**
 * CLI: `build`, `up [--foreground]`, `down`, `kubeconfig <user> [group...]`.
 *
 * @param args command line
 * @returns exit code
 */
async function main(args: string[]): Promise<number> {
  const [verb, ...rest] = args;
  const out = (s: string) => Deno.stdout.writeSync(enc.encode(`${s}\n`));
  switch (verb) {
    case "build":
      out(await buildCluster());
      return 0;
    case "up": {
      const { values } = parseArgs({
        args: rest,
        options: {
          foreground: { type: "boolean", default: false },
          kubelet: { type: "boolean", default: true },
          "no-kubelet": { type: "boolean", default: false },
          nodes: { type: "string" },
          "real-kubelet": { type: "boolean", default: false },
        },
      });
      const foreground = values.foreground;
      const lane = await import("../realnode/lane.ts");
      await lane.stopLaneAt(resolveStateDir());
      if (values["real-kubelet"]) {
        // Real nodes (tests/realnode): containerd, runc and the real kubelet in a netns of their own.
        const nodes = Number(values.nodes ?? "2");
        if (![1, 2].includes(nodes)) {
          stderrLog(`cluster: --real-kubelet takes --nodes 1 or 2, not "${values.nodes}"`);
          return 2;
        }
        await stopClusterAt();
        const started = await lane.startLane({
          stateDir: resolveStateDir(),
          nodes,
          detach: !foreground,
        });
        out(`export KUBECONFIG=${started.adminKubeconfig}`);
        stderrLog(
          `cluster: the nodes' addresses live in netns ${started.netns}; run aicr there: ` +
            `nsenter --net=/run/netns/${started.netns} -- aicr ... (the apiserver is also on ${started.server})`,
        );
        if (!foreground) return 0;
        stderrLog("cluster: running; Ctrl-C stops it");
        await waitForSignal();
        await started.stop();
        stderrLog("cluster: stopped");
        return 0;
      }
      await stopClusterAt();
      const cluster = await startCluster({ detach: !foreground });
      let stopKubelet = async () => {};
      if (!values["no-kubelet"]) {
        if (foreground) {
          const { startKubelet } = await import("../kubelet/kubelet.ts");
          const { parseNodes } = await import("../kubelet/profiles.ts");
          const kubelet = await startKubelet(cluster, {
            ...(values.nodes ? { nodes: parseNodes(values.nodes) } : {}),
            log: stderrLog,
          });
          stopKubelet = () => kubelet.stop();
        } else {
          await startKubeletProcess(cluster, values.nodes);
        }
      }
      out(`export KUBECONFIG=${cluster.adminKubeconfig}`);
      if (!foreground) return 0;
      stderrLog("cluster: running; Ctrl-C stops it");
      await waitForSignal();
      await stopKubelet();
      await cluster.stop();
      stderrLog("cluster: stopped");
      return 0;
    }
    case "down": {
      const lane = await import("../realnode/lane.ts");
      const stoppedLane = await lane.stopLaneAt(resolveStateDir());
      const stopped = await stopClusterAt();
      for (const dir of await lane.sweepOrphanLanes()) {
        stderrLog(`cluster: removed an orphaned real-kubelet lane in ${dir}`);
      }
      stderrLog(stoppedLane || stopped ? "cluster: stopped" : "cluster: nothing recorded");
      return 0;
    }
    case "restart": {
      // A real crash and restart of one component (kill -9, then the same flags and data).
      const { values, positionals } = parseArgs({
        args: rest,
        allowPositionals: true,
        options: { "down-ms": { type: "string", default: "0" } },
      });
      const [name] = positionals;
      const file = join(resolveStateDir(), "cluster.json");
      const names = ["etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"];
      const downMs = Number(values["down-ms"]);
      if (!name || !names.includes(name) || !Number.isFinite(downMs) || downMs < 0) {
        stderrLog(`usage: cluster.ts restart ${names.join("|")} [--down-ms N]`);
        return 2;
      }
      if (!existsSync(file)) {
        stderrLog(`cluster: nothing recorded in ${file}`);
        return 2;
      }
      const info = JSON.parse(await readFile(file, "utf8")) as ClusterInfo;
      const proc = await restartComponent(info, name as RestartableComponent, { downMs });
      stderrLog(`cluster: ${name} restarted (pid ${proc.pid}) after ${downMs} ms down`);
      return 0;
    }
    case "kubeconfig": {
      const [user, ...groups] = rest;
      const cluster = user ? await loadCluster() : undefined;
      if (!user || !cluster) {
        stderrLog(user ? "cluster: not running" : "usage: cluster.ts kubeconfig <user> [group...]");
        return 2;
      }
      out(await cluster.kubeconfigFor(user, groups));
      return 0;
    }
    default:
      stderrLog(
        "usage: cluster.ts build | up [--foreground] [--real-kubelet [--nodes 1|2]] | down | " +
          "restart <component> [--down-ms N] | kubeconfig <user> [group...]",
      );
      return 2;
  }
}

if (import.meta.main) {
  // No top-level await: `up --real-kubelet` imports tests/realnode/lane.ts, which imports this
  // module, and an import cycle never resolves while this module's evaluation awaits.
  main(Deno.args).then((code) => (Deno.exitCode = code), (e) => {
    stderrLog(e instanceof Error ? e.message : String(e));
    Deno.exitCode = 1;
  });
}
