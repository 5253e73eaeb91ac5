/**
 * Where the kubeconfig comes from and what it says, read without contacting a cluster:
 * `--kubeconfig`, else every `KUBECONFIG` file, else `~/.kube/config`, else the pod's
 * ServiceAccount ({@link planKubeConfig}); the files parsed and merged as kubectl merges them
 * (the first file that sets `current-context` wins, and the first entry of each name wins;
 * relative file paths are taken from the kubeconfig's own folder); the context selected
 * ({@link selectKubeConfig}) and its namespace ({@link readContextNamespace}). `connection.ts`
 * turns the selected entries into a connection's credentials.
 *
 * @module
 */
import { existsSync, readFileSync } from "node:fs";
import { homedir } from "node:os";
import { delimiter, dirname, isAbsolute, join } from "node:path";
import { NotFoundError, ToolError, UsageError } from "../errors.ts";
import { parsePlainKubeconfig } from "./kubeconfig_yaml.ts";

/** A cluster entry, normalised. */
export interface ClusterEntry {
  /** Name. */
  name: string;
  /** API server URL, without a trailing slash. */
  server: string;
  /** `certificate-authority-data` (base64). */
  caData?: string;
  /** `certificate-authority`, absolute. */
  caFile?: string;
  /** `insecure-skip-tls-verify`. */
  skipTLSVerify: boolean;
  /** `tls-server-name`. */
  tlsServerName?: string;
  /** `proxy-url`. */
  proxyUrl?: string;
}

/** A user entry, normalised; `raw` keeps every field for the client-node fallback. */
export interface UserEntry {
  /** Name. */
  name: string;
  /** The `user` map as written (paths made absolute). */
  raw: Record<string, unknown>;
}

/** A context entry, normalised. */
export interface ContextEntry {
  /** Name. */
  name: string;
  /** Cluster name. */
  cluster: string;
  /** User name. */
  user?: string;
  /** Namespace. */
  namespace?: string;
}

/** Kubeconfig entries after merging every file. */
export interface MergedKubeConfig {
  /** Clusters, first of each name. */
  clusters: ClusterEntry[];
  /** Users, first of each name. */
  users: UserEntry[];
  /** Contexts, first of each name. */
  contexts: ContextEntry[];
  /** The first `current-context` set. */
  currentContext?: string;
}

/** One kubeconfig file's text and where it was read from. */
export interface KubeConfigFile {
  /** Its path (relative paths inside are taken from its folder). */
  path: string;
  /** The parsed document (YAML or JSON). */
  document: unknown;
}

/** Fields of a user that name files, made absolute against the kubeconfig's folder. */
const USER_FILE_FIELDS = ["client-certificate", "client-key", "token-file", "tokenFile"];

/** Where a pod's ServiceAccount credentials are mounted. */
export const SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount";

/** The one context of the in-cluster ServiceAccount (client-node's name for it). */
export const IN_CLUSTER_CONTEXT = "inClusterContext";

function record(value: unknown): Record<string, unknown> | undefined {
  return value !== null && typeof value === "object" && !Array.isArray(value)
    ? value as Record<string, unknown>
    : undefined;
}

/** A non-empty string field of a kubeconfig entry, else undefined. */
export function textOf(value: unknown): string | undefined {
  return typeof value === "string" && value !== "" ? value : undefined;
}

function absolute(dir: string, file: string | undefined): string | undefined {
  return file === undefined || isAbsolute(file) ? file : join(dir, file);
}

/** The named entries of one list (`clusters`, `users`, `contexts`), checked as client-node does. */
function entries(
  doc: Record<string, unknown>,
  list: "clusters" | "users" | "contexts",
  inner: "cluster" | "user" | "context",
): { name: string; body: Record<string, unknown> }[] {
  const items = doc[list];
  if (!Array.isArray(items)) return [];
  return items.map((item, i) => {
    const entry = record(item) ?? {};
    const name = textOf(entry.name);
    if (name === undefined) throw new Error(`${list}[${i}].name is missing`);
    const body = record(entry[inner]);
    if (body === undefined && inner !== "user") {
      throw new Error(`${list}[${i}].${inner} is missing`);
    }
    return { name, body: body ?? {} };
  });
}

/**
 * Merges kubeconfig files as kubectl does: the first `current-context` set wins, and the first
 * entry of each name wins. File paths inside each file are made absolute against its folder.
 *
 * @param files the parsed files, in `KUBECONFIG` order
 * @returns the merged entries
 * @throws {Error} when an entry lacks its name, body or server (the message names it)
 */
export function mergeKubeConfigs(files: readonly KubeConfigFile[]): MergedKubeConfig {
  const merged: MergedKubeConfig = { clusters: [], users: [], contexts: [] };
  const add = <T extends { name: string }>(list: T[], entry: T) => {
    if (!list.some((e) => e.name === entry.name)) list.push(entry);
  };
  for (const file of files) {
    const doc = record(file.document) ?? {};
    const dir = dirname(file.path);
    entries(doc, "clusters", "cluster").forEach(({ name, body }, i) => {
      const server = textOf(body.server);
      if (server === undefined) throw new Error(`clusters[${i}].cluster.server is missing`);
      const caFile = absolute(dir, textOf(body["certificate-authority"]));
      const caData = textOf(body["certificate-authority-data"]);
      const tlsServerName = textOf(body["tls-server-name"]);
      const proxyUrl = textOf(body["proxy-url"]);
      add(merged.clusters, {
        name,
        server: server.replace(/\/$/, ""),
        skipTLSVerify: body["insecure-skip-tls-verify"] === true,
        ...(caFile ? { caFile } : {}),
        ...(caData ? { caData } : {}),
        ...(tlsServerName ? { tlsServerName } : {}),
        ...(proxyUrl ? { proxyUrl } : {}),
      });
    });
    entries(doc, "users", "user").forEach(({ name, body }) => {
      const raw: Record<string, unknown> = { ...body };
      for (const field of USER_FILE_FIELDS) {
        const file = textOf(raw[field]);
        if (file !== undefined) raw[field] = absolute(dir, file);
      }
      add(merged.users, { name, raw });
    });
    entries(doc, "contexts", "context").forEach(({ name, body }, i) => {
      const cluster = textOf(body.cluster);
      if (cluster === undefined) throw new Error(`contexts[${i}].context.cluster is missing`);
      const user = textOf(body.user);
      const namespace = textOf(body.namespace);
      add(merged.contexts, {
        name,
        cluster,
        ...(user ? { user } : {}),
        ...(namespace ? { namespace } : {}),
      });
    });
    const current = textOf(doc["current-context"]);
    if (merged.currentContext === undefined && current !== undefined) {
      merged.currentContext = current;
    }
  }
  return merged;
}

/** The context, cluster and user a merged kubeconfig selects. */
export interface SelectedEntries {
  /** The context. */
  context: ContextEntry;
  /** Its cluster. */
  cluster: ClusterEntry;
  /** Its user, if it names one that exists. */
  user: UserEntry | undefined;
}

/**
 * Picks the context (`--context`, else `current-context`), its cluster and its user.
 *
 * @param config the merged kubeconfig
 * @param contextName `--context`, when given
 * @returns the selected entries
 * @throws {UsageError} when the context is not in the kubeconfig, or there is no current cluster
 */
export function selectContext(
  config: MergedKubeConfig,
  contextName: string | undefined,
): SelectedEntries {
  if (contextName !== undefined && !config.contexts.some((c) => c.name === contextName)) {
    throw new UsageError(
      `Cannot use context '${contextName}': it is not in the kubeconfig (contexts: ${
        config.contexts.map((c) => c.name).join(", ") || "none"
      })`,
    );
  }
  const name = contextName ?? config.currentContext;
  const context = config.contexts.find((c) => c.name === name);
  const cluster = context && config.clusters.find((c) => c.name === context.cluster);
  if (!context || !cluster) {
    throw new UsageError(
      "Cannot find a Kubernetes API server: the kubeconfig has no current cluster",
      {
        details: [
          (option) => `pass ${option("kubeconfig")}, set KUBECONFIG, or run inside a cluster`,
        ],
      },
    );
  }
  return { context, cluster, user: config.users.find((u) => u.name === context.user) };
}

/**
 * The pod's namespace, from its ServiceAccount mount.
 *
 * @param dir the mount folder
 * @returns the namespace, or undefined without the file (no default namespace, as client-node)
 */
export function inClusterNamespace(dir: string = SERVICE_ACCOUNT_DIR): string | undefined {
  try {
    return readFileSync(join(dir, "namespace"), "utf8").trim() || undefined;
  } catch {
    return undefined;
  }
}

/** Where a kubeconfig comes from. */
export interface KubeConfigSource {
  /** Explicit kubeconfig path (`--kubeconfig`). */
  kubeconfig?: string;
  /** Context name (`--context`). */
  context?: string;
  /** Use the in-cluster ServiceAccount (agent pods). */
  inCluster?: boolean;
}

/**
 * Whether `~/.kube/config` exists. A process may have no home at all (an arbitrary uid
 * without a passwd entry and no HOME, as OpenShift runs pods): that is "no file".
 */
function hasDefaultKubeconfig(env: (name: string) => string | undefined): boolean {
  let home = env("HOME");
  if (!home) {
    try {
      home = homedir();
    } catch {
      return false;
    }
  }
  return existsSync(join(home, ".kube", "config"));
}

/** No kubeconfig was given or found, and this is not a pod. */
export class NoKubeconfigError extends NotFoundError {
  constructor() {
    super(
      (option) =>
        `Cannot find a kubeconfig: ${
          option("kubeconfig")
        } is not set, KUBECONFIG is empty, ~/.kube/config does not exist and this is not a pod`,
      { details: [(option) => `pass ${option("kubeconfig")} <file> or set KUBECONFIG`] },
    );
    this.name = "NoKubeconfigError";
  }
}

/** Which kubeconfig a source names, decided without loading it. */
export type KubeConfigPlan = "in-cluster" | "file" | "default";

/**
 * Decides where the kubeconfig comes from: an explicit file, else `KUBECONFIG` or
 * `~/.kube/config`, else the in-cluster ServiceAccount.
 *
 * @param source explicit path or in-cluster
 * @param env environment lookup
 * @returns the plan
 * @throws {NoKubeconfigError} when there is none at all (client-node would silently fall
 *   back to http://localhost:8080)
 */
export function planKubeConfig(
  source: KubeConfigSource,
  env: (name: string) => string | undefined,
): KubeConfigPlan {
  if (source.inCluster) return "in-cluster";
  if (source.kubeconfig) return "file";
  if (env("KUBECONFIG") || hasDefaultKubeconfig(env)) return "default";
  if (env("KUBERNETES_SERVICE_HOST")) return "in-cluster";
  throw new NoKubeconfigError();
}

/** The kubeconfig files a plan reads: `--kubeconfig`, else every `KUBECONFIG` entry, else `~/.kube/config`. */
function kubeConfigFiles(
  plan: "file" | "default",
  source: KubeConfigSource,
  env: (name: string) => string | undefined,
): string[] {
  if (plan === "file") return [source.kubeconfig as string];
  const list = (env("KUBECONFIG") ?? "").split(delimiter).filter((f) => f !== "");
  if (list.length > 0) return list;
  return [join(env("HOME") || homedir(), ".kube", "config")];
}

/**
 * Reads and parses kubeconfig files (YAML, so JSON too): the plain block layout kubeconfig writers
 * use directly ({@link parsePlainKubeconfig}), anything else with the YAML library, loaded then.
 */
async function readKubeConfigFiles(paths: readonly string[]): Promise<KubeConfigFile[]> {
  const files: KubeConfigFile[] = [];
  for (const path of paths) {
    const text = readFileSync(path, "utf8");
    const document = parsePlainKubeconfig(text) ?? (await import("yaml")).parse(text);
    files.push({ path, document });
  }
  return files;
}

/** A kubeconfig that cannot be loaded, as the usage error naming it (or the in-cluster mount). */
export function kubeConfigError(
  source: KubeConfigSource,
  env: (name: string) => string | undefined,
  error: unknown,
  inCluster: boolean,
): unknown {
  if (error instanceof ToolError) return error;
  const detail = error instanceof Error ? error.message : String(error);
  if (inCluster) {
    return new UsageError(`Cannot load the in-cluster ServiceAccount credentials: ${detail}`, {
      cause: error,
      details: [
        (option) => `pass ${option("kubeconfig")}, or check the pod's ServiceAccount token mount`,
      ],
    });
  }
  const file = source.kubeconfig ?? env("KUBECONFIG") ?? "~/.kube/config";
  return new UsageError(`Cannot load kubeconfig '${file}': ${detail}`, {
    cause: error,
    details: [(option) => `pass ${option("kubeconfig")} with a valid kubeconfig file`],
  });
}

/**
 * Reads the kubeconfig a source names and selects its context, cluster and user; "in-cluster"
 * for the pod's ServiceAccount (whose one context is `inClusterContext`).
 */
export async function selectKubeConfig(
  source: KubeConfigSource,
  env: (name: string) => string | undefined,
): Promise<SelectedEntries | "in-cluster"> {
  const plan = planKubeConfig(source, env);
  if (plan === "in-cluster") {
    if (source.context && source.context !== IN_CLUSTER_CONTEXT) {
      throw new UsageError(
        `Cannot use context '${source.context}': it is not in the kubeconfig (contexts: ${IN_CLUSTER_CONTEXT})`,
      );
    }
    return "in-cluster";
  }
  try {
    const files = await readKubeConfigFiles(kubeConfigFiles(plan, source, env));
    return selectContext(mergeKubeConfigs(files), source.context);
  } catch (error) {
    throw kubeConfigError(source, env, error, false);
  }
}

/**
 * The kubeconfig's current context (after `--context`) and the namespace it names, read from the
 * file without contacting the cluster: the namespace a verb uses when `-n` is not given.
 *
 * @param source explicit path and context
 * @param env environment lookup
 * @returns the context's name and namespace (undefined when it names none)
 * @throws {NoKubeconfigError} when there is no kubeconfig
 * @throws {UsageError} when it cannot be loaded or the context is not in it
 */
export async function readContextNamespace(
  source: KubeConfigSource,
  env: (name: string) => string | undefined,
): Promise<{ context: string; namespace: string | undefined }> {
  const found = await selectKubeConfig(source, env);
  if (found !== "in-cluster") {
    return { context: found.context.name, namespace: found.context.namespace };
  }
  return { context: IN_CLUSTER_CONTEXT, namespace: inClusterNamespace() };
}
