/**
 * The narrow kubeconfig loader: what operators' kubeconfigs use (a bearer token or token file,
 * client certificates, basic auth, a CA as data or file, `insecure-skip-tls-verify`,
 * `tls-server-name`, `as`) and the in-cluster ServiceAccount, turned into a connection's
 * credentials directly, without evaluating `@kubernetes/client-node` (about 100 ms per process).
 * A user it does not cover (an `exec` or `auth-provider` plugin, `as-groups`, a `proxy-url`
 * cluster) is handed to client-node, loaded then, from the same parsed and merged entries
 * (`kubeconfig.ts`), so EKS/GKE/OIDC credentials keep working.
 *
 * @module
 */
import type https from "node:https";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { Buffer } from "node:buffer";
import { NotFoundError, UsageError } from "../errors.ts";
import {
  IN_CLUSTER_CONTEXT,
  inClusterNamespace,
  kubeConfigError,
  selectKubeConfig,
  SERVICE_ACCOUNT_DIR,
  textOf,
} from "./kubeconfig.ts";
import type { KubeConfigSource, SelectedEntries } from "./kubeconfig.ts";

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

/** How long a token read from a file is used before it is read again (as client-go). */
const TOKEN_FILE_TTL_MS = 60_000;

/**
 * Loads a kubeconfig: an explicit file, else `KUBECONFIG`/`~/.kube/config`, else the
 * in-cluster ServiceAccount (found and selected by `kubeconfig.ts`). The narrow loader reads it; a user it does not
 * cover (exec or auth-provider plugins, `proxy-url`) loads `@kubernetes/client-node` for its
 * credentials.
 *
 * @param source explicit path, context, or in-cluster
 * @param env environment lookup
 * @returns the connection
 * @throws {NoKubeconfigError} when there is none at all
 * @throws {UsageError} naming the file or context and the fix
 */
export async function loadKubeConfig(
  source: KubeConfigSource,
  env: (name: string) => string | undefined,
): Promise<KubeConnection> {
  const found = await selectKubeConfig(source, env);
  try {
    if (found === "in-cluster") return inClusterConnection(env);
    if (!isNativelyCovered(found)) return await clientNodeConnection(found);
    return nativeConnection(found);
  } catch (error) {
    throw kubeConfigError(source, env, error, found === "in-cluster");
  }
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
  const cert = fileOrData(
    textOf(raw["client-certificate"]),
    textOf(raw["client-certificate-data"]),
  );
  if (cert) tls.cert = cert;
  const key = fileOrData(textOf(raw["client-key"]), textOf(raw["client-key-data"]));
  if (key) tls.key = key;
  const inline = textOf(raw.token);
  const file = textOf(raw["token-file"]) ?? textOf(raw.tokenFile);
  const token = inline !== undefined
    ? () => inline
    : file !== undefined
    ? tokenFileReader(file, clock)
    : undefined;
  const username = textOf(raw.username);
  const basic = username !== undefined ? `${username}:${textOf(raw.password) ?? ""}` : undefined;
  const impersonate = textOf(raw.as);
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
  const tokenFile = textOf(raw["token-file"]);
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
        // Trimmed, as the native path and client-go read a token file.
        token: textOf(raw.token) ??
          (tokenFile ? readFileSync(tokenFile, "utf8").trim() : undefined),
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
      await kc.applyToHTTPSOptions(options).catch((error) => {
        throw credentialPluginError(error, { context: context.name, user: user?.name ?? "", raw });
      });
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
  // As client-go's net.JoinHostPort: an IPv6 address (any host with a colon) in brackets. Node's
  // isIPv6 compiles its address pattern on first use: 4 ms of every agent pod's start.
  const server = `${scheme}://${host.includes(":") ? `[${host}]` : host}:${port}`;
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
 * A credential plugin that could not be started (not installed, not on PATH, not executable) as
 * an error naming the command, the kubeconfig user and how to install it, exit 3 as kubectl's
 * "executable not found"; any other failure is returned as it is.
 *
 * @param error what applying the user's credentials threw
 * @param where the context, the user and its raw kubeconfig entry
 * @returns the error to throw
 */
export function credentialPluginError(
  error: unknown,
  where: { context: string; user: string; raw: Record<string, unknown> },
): unknown {
  const code = (error as { code?: unknown } | undefined)?.code;
  const exec = where.raw.exec as { command?: unknown; installHint?: unknown } | undefined;
  if (!exec || (code !== "ENOENT" && code !== "EACCES")) return error;
  const command = String(exec.command ?? "");
  const hint = typeof exec.installHint === "string" ? exec.installHint.trim() : "";
  return new NotFoundError(
    `Cannot get credentials for kubeconfig user '${where.user}' (context '${where.context}'): its exec plugin '${command}' ${
      code === "ENOENT" ? "is not installed or not on PATH" : "is not executable"
    }`,
    {
      cause: error,
      details: [
        ...(hint ? hint.split("\n").map((line) => `  ${line}`) : []),
        "  install the plugin the kubeconfig names (aws-iam-authenticator or aws for EKS, gke-gcloud-auth-plugin for GKE, kubelogin for AKS), or put its directory on PATH",
        `  check with: kubectl --context ${where.context} auth whoami`,
      ],
    },
  );
}
