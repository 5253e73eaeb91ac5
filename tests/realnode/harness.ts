/**
 * The real-kubelet lane for a test file: reuses the lane `$AICR_REALNODE_DIR` names (started by
 * `AICR_CLUSTER_DIR=<dir> deno task cluster:up --real-kubelet`) or starts one of its own under
 * `<repo>/.cluster-runs/lane-*`, and stops it again. The tests' aicr runs go through
 * {@link RealNodeEnv.aicr}, which runs the binary inside the lane's network namespace.
 *
 * ```ts ignore
 * const env = await useRealNodeLane();
 * try {
 *   const run = await env.aicr(["snapshot", "--kubeconfig", env.kubeconfig, "-n", "default"]);
 * } finally {
 *   await env.stop();
 * }
 * ```
 *
 * @module
 */
import { existsSync, readFileSync } from "node:fs";
import { mkdir, mkdtemp, rm } from "node:fs/promises";
import { join } from "node:path";
import { type Cluster, loadCluster, REPO_ROOT } from "../cluster/cluster.ts";
import { type Api, createApi } from "../kubelet/api.ts";
import { aicr, type AicrResult } from "../e2e/_aicr.ts";
import {
  type LaneInfo,
  type LaneRegistry,
  laneRequirementsMissing,
  laneUnavailableLine,
  runningLane,
  startLane,
  sweepOrphanLanes,
} from "./lane.ts";

/** A lane ready for tests. */
export interface RealNodeEnv {
  lane: LaneInfo;
  cluster: Cluster;
  /** Client with the admin certificate (through the forwarder on 127.0.0.1). */
  admin: Api;
  /** The admin kubeconfig (its server, 127.0.0.1:<port>, answers inside the netns too). */
  kubeconfig: string;
  /** Nodes: name, address, profile, GPU or not. */
  nodes: { name: string; ip: string; profile: string; gpu: boolean }[];
  /** The command prefix that runs a program inside the lane's network namespace. */
  inNetns: string[];
  /** The aicr image in the lane's registry, pinned by digest (what every run gives `--image`). */
  image: string;
  /** The lane's registry (inside the netns). */
  registry: LaneRegistry;
  /**
   * Creates the image pull secret {@link PULL_SECRET} (a `kubernetes.io/dockerconfigjson` Secret
   * with the registry's credentials, or a wrong password) in a namespace.
   */
  createPullSecret(namespace: string, options?: { wrongPassword?: boolean }): Promise<void>;
  /** Runs the built aicr binary inside the lane's network namespace. */
  aicr(args: string[], options?: Parameters<typeof aicr>[1]): Promise<AicrResult>;
  /** Stops the lane if this call started it. */
  stop(): Promise<void>;
}

/** The name of the image pull secret {@link RealNodeEnv.createPullSecret} makes. */
export const PULL_SECRET = "aicr-registry";

/**
 * Whether this machine can run the lane.
 *
 * @returns undefined when it can, else the one line naming what is missing
 */
export function laneUnavailable(): string | undefined {
  const missing = laneRequirementsMissing();
  return missing.length ? laneUnavailableLine(missing) : undefined;
}

/**
 * The absolute path of a command (the aicr runs clear their environment, PATH included).
 *
 * @param cmd command name
 * @returns its path
 */
function which(cmd: string): string {
  for (const d of ["/usr/bin", "/bin", "/usr/sbin", "/sbin"]) {
    if (existsSync(join(d, cmd))) return join(d, cmd);
  }
  return cmd;
}

/**
 * Starts (or reuses) a lane.
 *
 * @param options.nodes 1 or 2 nodes (default 2)
 * @param options.log progress writer
 * @returns the environment
 * @throws {Error} when the lane cannot start (it is removed again)
 */
export async function useRealNodeLane(
  options: { nodes?: number; log?: (line: string) => void } = {},
): Promise<RealNodeEnv> {
  const { log = () => {} } = options;
  const reuseDir = Deno.env.get("AICR_REALNODE_DIR");
  let lane = reuseDir ? runningLane(reuseDir) : undefined;
  let stopLane: (() => Promise<void>) | undefined;
  let tmp: string | undefined;
  if (!lane) {
    await sweepOrphanLanes();
    await mkdir(join(REPO_ROOT, ".cluster-runs"), { recursive: true });
    tmp = await mkdtemp(join(REPO_ROOT, ".cluster-runs", "lane-"));
    const started = await startLane({ stateDir: tmp, nodes: options.nodes ?? 2, log });
    lane = started;
    stopLane = started.stop;
  }
  const cluster = await loadCluster(lane.controlPlaneDir);
  if (!cluster) throw new Error(`Cannot reach the lane's apiserver (${lane.server})`);
  const text = readFileSync(cluster.adminKubeconfig, "utf8");
  const field = (k: string) => atob(new RegExp(`${k}: (\\S+)`).exec(text)![1]!);
  const admin = createApi(cluster.server, {
    ca: readFileSync(cluster.caFile, "utf8"),
    cert: field("client-certificate-data"),
    key: field("client-key-data"),
  });
  const inNetns = [which("nsenter"), `--net=/run/netns/${lane.netns}`, "--"];
  const l = lane;
  const registry = l.registry;
  if (!registry || !l.image) throw new Error(`The lane at ${l.stateDir} has no registry or image`);
  return {
    lane: l,
    cluster,
    admin,
    kubeconfig: cluster.adminKubeconfig,
    nodes: l.nodes.map((n) => ({ name: n.name, ip: n.ip, profile: n.profile, gpu: n.gpu })),
    inNetns,
    image: l.image,
    registry,
    async createPullSecret(namespace, opts = {}) {
      const password = opts.wrongPassword ? `${registry.password}-wrong` : registry.password;
      const config = {
        auths: {
          [registry.host]: { auth: btoa(`${registry.username}:${password}`) },
        },
      };
      const res = await admin.request("POST", `/api/v1/namespaces/${namespace}/secrets`, {
        apiVersion: "v1",
        kind: "Secret",
        metadata: { name: PULL_SECRET },
        type: "kubernetes.io/dockerconfigjson",
        data: { ".dockerconfigjson": btoa(JSON.stringify(config)) },
      });
      if (res.status !== 201) {
        throw new Error(
          `Cannot create the pull secret in ${namespace}: ${JSON.stringify(res.body)}`,
        );
      }
    },
    aicr: (args, opts = {}) => aicr(args, { ...opts, prefix: inNetns }),
    async stop(): Promise<void> {
      admin.close();
      if (stopLane) await stopLane();
      if (tmp) await rm(tmp, { recursive: true, force: true });
    },
  };
}
