/**
 * The narrow kubeconfig loader: what operators' kubeconfigs use (a bearer token or token file,
 * client certificates, basic auth, a CA as data or file, `insecure-skip-tls-verify`,
 * `tls-server-name`, `as`) and the in-cluster ServiceAccount, read directly without evaluating
 * `@kubernetes/client-node` (about 100 ms per process). A user it does not cover (an `exec` or
 * `auth-provider` plugin, `as-groups`, a `proxy-url` cluster) is handed to client-node, loaded
 * then, from the same parsed and merged entries, so EKS/GKE/OIDC credentials keep working.
 *
 * Several `KUBECONFIG` files merge as kubectl merges them: the first file that sets
 * `current-context` wins, and the first entry of each name wins. Relative file paths are taken
 * from the kubeconfig's own folder.
 *
 * @module
 */
import type https from "node:https";
import { readFileSync } from "node:fs";
import { dirname, isAbsolute, join } from "node:path";
import { isIPv6 } from "node:net";
import { Buffer } from "node:buffer";
import { UsageError } from "../errors.ts";

/**
 * One cluster connection resolved from a kubeconfig: where, as whom, and the credentials each
 * request carries.
 */
export interface KubeConnection {
  /** The API server URL, without a trailing slash. */
  readonly server: string;
  /** The context's name. */
  readonly context: string;
  /** The context's user name. */
  readonly user: string;
  /** The context's namespace, if it names one. */
  readonly namespace: string | undefined;
  /**
   * Whether requests may share the client's keep-alive agent; false when the connection brings
   * its own (a `proxy-url` through client-node).
   */
  readonly pooled: boolean;
  /**
   * Adds the TLS material and credentials to one request's options (a token file is re-read
   * once a minute; an exec plugin runs when its credential expires).
   */
  apply(options: https.RequestOptions): Promise<void>;
}

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

/** The user fields the narrow loader handles itself; any other field goes to client-node. */
const NATIVE_USER_FIELDS: ReadonlySet<string> = new Set([
  "token",
  "tokenFile",
  "token-file",
  "client-certificate",
  "client-certificate-data",
  "client-key",
  "client-key-data",
  "username",
  "password",
  "as",
  "extensions",
]);

/** Fields of a user that name files, made absolute against the kubeconfig's folder. */
const USER_FILE_FIELDS = ["client-certificate", "client-key", "token-file", "tokenFile"];

/** Where a pod's ServiceAccount credentials are mounted. */
export const SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount";

/** The one context of the in-cluster ServiceAccount (client-node's name for it). */
export const IN_CLUSTER_CONTEXT = "inClusterContext";

/** How long a token read from a file is used before it is read again (as client-go). */
const TOKEN_FILE_TTL_MS = 60_000;

function record(value: unknown): Record<string, unknown> | undefined {
  return value !== null && typeof value === "object" && !Array.isArray(value)
    ? value as Record<string, unknown>
    : undefined;
}

function text(value: unknown): string | undefined {
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
    const name = text(entry.name);
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
      const server = text(body.server);
      if (server === undefined) throw new Error(`clusters[${i}].cluster.server is missing`);
      const caFile = absolute(dir, text(body["certificate-authority"]));
      const caData = text(body["certificate-authority-data"]);
      const tlsServerName = text(body["tls-server-name"]);
      const proxyUrl = text(body["proxy-url"]);
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
        const file = text(raw[field]);
        if (file !== undefined) raw[field] = absolute(dir, file);
      }
      add(merged.users, { name, raw });
    });
    entries(doc, "contexts", "context").forEach(({ name, body }, i) => {
      const cluster = text(body.cluster);
      if (cluster === undefined) throw new Error(`contexts[${i}].context.cluster is missing`);
      const user = text(body.user);
      const namespace = text(body.namespace);
      add(merged.contexts, {
        name,
        cluster,
        ...(user ? { user } : {}),
        ...(namespace ? { namespace } : {}),
      });
    });
    const current = text(doc["current-context"]);
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
 * Whether the narrow loader covers a selected user and cluster itself (else client-node does).
 *
 * @param selected the selected entries
 * @returns true when every user field is one it handles and the cluster has no proxy
 */
export function isNativelyCovered(selected: SelectedEntries): boolean {
  if (selected.cluster.proxyUrl !== undefined) return false;
  const raw = selected.user?.raw ?? {};
  return Object.entries(raw).every(([field, value]) =>
    NATIVE_USER_FIELDS.has(field) || value === undefined || value === null || value === ""
  );
}

/** Reads a file, or decodes base64 data; the file wins, as in client-node. */
function fileOrData(file: string | undefined, data: string | undefined): Buffer | undefined {
  if (file !== undefined) return readFileSync(file);
  if (data !== undefined) return Buffer.from(data, "base64");
  return undefined;
}

/** A bearer token read from a file, read again once it is a minute old. */
function tokenFileReader(
  file: string,
  clock: () => number,
): () => string {
  let token: string | undefined;
  let readAt = 0;
  return () => {
    if (token === undefined || clock() - readAt > TOKEN_FILE_TTL_MS) {
      try {
        token = readFileSync(file, "utf8").trim();
      } catch (error) {
        throw new UsageError(
          `Cannot read the bearer token file '${file}': ${
            error instanceof Error ? error.message : error
          }`,
          { cause: error, details: ["check the kubeconfig user's token-file"] },
        );
      }
      readAt = clock();
    }
    return token;
  };
}

/**
 * The connection for a user and cluster the narrow loader covers: TLS material read once, the
 * bearer token (or token file), basic auth and `as` set on each request.
 *
 * @param selected the selected entries (see {@link isNativelyCovered})
 * @param clock millisecond clock, for the token file's refresh
 * @returns the connection
 * @throws {Error} when a certificate, key or CA file cannot be read
 */
export function nativeConnection(
  selected: SelectedEntries,
  clock: () => number = Date.now,
): KubeConnection {
  const { context, cluster, user } = selected;
  const raw = user?.raw ?? {};
  if (cluster.server.startsWith("http:") && !cluster.skipTLSVerify) {
    throw new Error("HTTP protocol is not allowed when skipTLSVerify is not set or false");
  }
  const tls: https.RequestOptions = {};
  if (cluster.skipTLSVerify) tls.rejectUnauthorized = false;
  if (cluster.tlsServerName) tls.servername = cluster.tlsServerName;
  const ca = fileOrData(cluster.caFile, cluster.caData);
  if (ca) tls.ca = ca;
  const cert = fileOrData(text(raw["client-certificate"]), text(raw["client-certificate-data"]));
  if (cert) tls.cert = cert;
  const key = fileOrData(text(raw["client-key"]), text(raw["client-key-data"]));
  if (key) tls.key = key;
  const inline = text(raw.token);
  const file = text(raw["token-file"]) ?? text(raw.tokenFile);
  const token = inline !== undefined
    ? () => inline
    : file !== undefined
    ? tokenFileReader(file, clock)
    : undefined;
  const username = text(raw.username);
  const basic = username !== undefined ? `${username}:${text(raw.password) ?? ""}` : undefined;
  const impersonate = text(raw.as);
  return {
    server: cluster.server,
    context: context.name,
    user: user?.name ?? "",
    namespace: context.namespace,
    pooled: true,
    apply(options) {
      Object.assign(options, tls);
      const headers = { ...(options.headers as Record<string, string> | undefined) };
      if (token) headers.Authorization = `Bearer ${token()}`;
      if (impersonate !== undefined) headers["Impersonate-User"] = impersonate;
      options.headers = headers;
      if (basic !== undefined) options.auth = basic;
      return Promise.resolve();
    },
  };
}

/**
 * The connection through `@kubernetes/client-node` (loaded now) for what the narrow loader does
 * not cover: exec and auth-provider plugins, `as-groups`, `proxy-url`.
 *
 * @param selected the selected entries
 * @returns the connection
 */
export async function clientNodeConnection(selected: SelectedEntries): Promise<KubeConnection> {
  const { context, cluster, user } = selected;
  const { KubeConfig } = await import("./_client_node.ts");
  const kc = new KubeConfig();
  const raw = user?.raw ?? {};
  const tokenFile = text(raw["token-file"]);
  kc.loadFromOptions({
    clusters: [cluster],
    users: user
      ? [{
        name: user.name,
        authProvider: raw["auth-provider"],
        certData: raw["client-certificate-data"],
        certFile: raw["client-certificate"],
        exec: raw.exec,
        keyData: raw["client-key-data"],
        keyFile: raw["client-key"],
        token: text(raw.token) ?? (tokenFile ? readFileSync(tokenFile, "utf8") : undefined),
        password: raw.password,
        username: raw.username,
        impersonateUser: raw.as,
      } as never]
      : [],
    contexts: [{
      name: context.name,
      cluster: cluster.name,
      ...(context.user ? { user: context.user } : {}),
      ...(context.namespace ? { namespace: context.namespace } : {}),
    } as never],
    currentContext: context.name,
  });
  const proxied = cluster.proxyUrl !== undefined;
  return {
    server: cluster.server,
    context: context.name,
    user: user?.name ?? "",
    namespace: context.namespace,
    pooled: !proxied,
    async apply(options) {
      await kc.applyToHTTPSOptions(options);
      // client-node's own agent opens a connection per request; ours keeps them alive. A proxy
      // agent is kept: it is how the request reaches the server.
      if (!proxied) delete options.agent;
    },
  };
}

/**
 * The same server, trust and proxy as `connection`, speaking with `token` alone: the
 * kubeconfig's client certificate, basic auth, bearer token and impersonation are left out
 * (e.g. the fleet fetch listing nodes as the daemon's reader ServiceAccount).
 *
 * @param connection the kubeconfig's connection
 * @param token the bearer token
 * @returns the connection
 */
export function bearerConnection(connection: KubeConnection, token: string): KubeConnection {
  return {
    server: connection.server,
    context: connection.context,
    user: "(bearer token)",
    namespace: connection.namespace,
    pooled: connection.pooled,
    async apply(options) {
      await connection.apply(options);
      for (const key of ["cert", "key", "pfx", "passphrase", "auth"] as const) delete options[key];
      const headers: Record<string, string> = {};
      for (const [key, value] of Object.entries(options.headers ?? {})) {
        if (!/^(authorization|impersonate-)/i.test(key)) headers[key] = String(value);
      }
      headers.Authorization = `Bearer ${token}`;
      options.headers = headers;
    },
  };
}

/**
 * The in-cluster connection of a pod: `KUBERNETES_SERVICE_HOST`/`_PORT`, the mounted CA, the
 * ServiceAccount token (re-read once a minute: it rotates) and namespace.
 *
 * @param env environment lookup
 * @param options the mount folder (tests) and clock
 * @returns the connection (context `inClusterContext`, user `inClusterUser`, as client-node names them)
 * @throws {Error} when the host or port is unset or the CA cannot be read
 */
export function inClusterConnection(
  env: (name: string) => string | undefined,
  options: { dir?: string; clock?: () => number } = {},
): KubeConnection {
  const { dir = SERVICE_ACCOUNT_DIR, clock = Date.now } = options;
  const host = env("KUBERNETES_SERVICE_HOST");
  const port = env("KUBERNETES_SERVICE_PORT");
  if (!host || !port) {
    throw new Error(
      "KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must be set to use the in-cluster ServiceAccount",
    );
  }
  const scheme = port === "80" || port === "8080" || port === "8001" ? "http" : "https";
  const server = `${scheme}://${isIPv6(host) ? `[${host}]` : host}:${port}`;
  const namespace = inClusterNamespace(dir);
  const connection = nativeConnection({
    context: {
      name: IN_CLUSTER_CONTEXT,
      cluster: "inCluster",
      user: "inClusterUser",
      ...(namespace ? { namespace } : {}),
    },
    cluster: {
      name: "inCluster",
      server,
      caFile: join(dir, "ca.crt"),
      skipTLSVerify: scheme === "http",
    },
    user: { name: "inClusterUser", raw: { "token-file": join(dir, "token") } },
  }, clock);
  return connection;
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
