/**
 * Helpers for end-to-end tests that drive the built `aicr` binary against the local
 * cluster: run it, find a run's objects by label, and read a node's GPU fixture.
 *
 * @module
 */
import { readFileSync } from "node:fs";
import { request } from "node:https";
import type { PeerCertificate } from "node:tls";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import type { Api, Obj } from "../kubelet/api.ts";

/** The binary under test: `$AICR_BIN`, else `<repo>/dist/aicr` (built by `deno task build`). */
export const AICR_BIN: string = Deno.env.get("AICR_BIN") ??
  fileURLToPath(new URL("../../dist/aicr", import.meta.url));

/** What one run of the binary gave back. */
export interface AicrResult {
  /** Exit code. */
  code: number;
  /** Standard output. */
  stdout: string;
  /** Standard error. */
  stderr: string;
  /** The run ID it logged, if any. */
  runId: string | undefined;
}

/**
 * Runs the built binary.
 *
 * @param args its arguments
 * @param options extra environment, working directory, a signal to send after a delay, and a
 *   deadline (a hang guard, not a speed claim) after which the run is killed and this throws
 * @returns exit code, output and the logged run ID
 * @throws {Error} when the run outlives `deadlineMs`, naming its arguments
 */
export async function aicr(
  args: string[],
  options: {
    env?: Record<string, string>;
    cwd?: string;
    signalAfterMs?: { signal: Deno.Signal; ms: number };
    /** A command that runs the binary, e.g. `nsenter --net=... --` (it must exec, keeping the pid). */
    prefix?: readonly string[];
    /** Called with each chunk of stderr as it arrives, and a way to signal the process. */
    onStderr?: (text: string, kill: (signal: Deno.Signal) => void) => void;
    /** Past it the run is killed and this throws, naming it (a hang guard, not a speed claim). */
    deadlineMs?: number;
  } = {},
): Promise<AicrResult> {
  const argv = [...(options.prefix ?? []), AICR_BIN, ...args];
  const child = new Deno.Command(argv[0]!, {
    args: argv.slice(1),
    env: { ...options.env },
    clearEnv: true,
    ...(options.cwd ? { cwd: options.cwd } : {}),
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  let timer: ReturnType<typeof setTimeout> | undefined;
  if (options.signalAfterMs) {
    const { signal, ms } = options.signalAfterMs;
    timer = setTimeout(() => child.kill(signal), ms);
  }
  let overdue = false;
  const deadline = options.deadlineMs === undefined ? undefined : setTimeout(() => {
    overdue = true;
    child.kill("SIGKILL");
  }, options.deadlineMs);
  let stderr = "";
  const onStderr = options.onStderr;
  const [status, stdout] = await Promise.all([
    child.status,
    new Response(child.stdout).text(),
    (async () => {
      for await (const chunk of child.stderr.pipeThrough(new TextDecoderStream())) {
        stderr += chunk;
        onStderr?.(stderr, (signal) => child.kill(signal));
      }
    })(),
  ]);
  if (timer !== undefined) clearTimeout(timer);
  clearTimeout(deadline);
  if (overdue) {
    throw new Error(
      `aicr ${
        args.join(" ")
      } did not exit within ${options.deadlineMs} ms; killed. stderr:\n${stderr}`,
    );
  }
  return {
    code: status.code,
    stdout,
    stderr,
    runId: /snapshot agent run: runID=(\S+)/.exec(stderr)?.[1],
  };
}

/** Namespaced kinds a run creates, with their list paths. */
const NAMESPACED = [
  ["Job", "/apis/batch/v1/namespaces/NS/jobs"],
  ["Pod", "/api/v1/namespaces/NS/pods"],
  ["ServiceAccount", "/api/v1/namespaces/NS/serviceaccounts"],
  ["Role", "/apis/rbac.authorization.k8s.io/v1/namespaces/NS/roles"],
  ["RoleBinding", "/apis/rbac.authorization.k8s.io/v1/namespaces/NS/rolebindings"],
] as const;
/** Kinds only DaemonSet mode creates, with their list paths. */
const DAEMONSET_KINDS = [
  ["DaemonSet", "/apis/apps/v1/namespaces/NS/daemonsets"],
  ["Deployment", "/apis/apps/v1/namespaces/NS/deployments"],
  ["Lease", "/apis/coordination.k8s.io/v1/namespaces/NS/leases"],
  ["Secret", "/api/v1/namespaces/NS/secrets"],
  ["Service", "/api/v1/namespaces/NS/services"],
] as const;
const CLUSTER = [
  ["ClusterRole", "/apis/rbac.authorization.k8s.io/v1/clusterroles"],
  ["ClusterRoleBinding", "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings"],
] as const;

/**
 * Every object labelled with a run ID, plus its staging ConfigMap: what a clean run
 * leaves behind is nothing.
 *
 * @param admin an admin client
 * @param namespace the run's namespace
 * @param runId the run ID
 * @returns `Kind/name` of each object found
 */
export async function runObjects(admin: Api, namespace: string, runId: string): Promise<string[]> {
  const selector = `?labelSelector=${encodeURIComponent(`aicr.run/run-id=${runId}`)}`;
  const found: string[] = [];
  for (const [kind, path] of [...NAMESPACED, ...CLUSTER]) {
    const res = await admin.request("GET", path.replace("NS", namespace) + selector);
    for (const item of (res.body.items ?? []) as Obj[]) found.push(`${kind}/${item.metadata.name}`);
  }
  const cm = await admin.request(
    "GET",
    `/api/v1/namespaces/${namespace}/configmaps/aicr-agent-snapshot-${runId}`,
  );
  if (cm.status === 200) found.push(`ConfigMap/${cm.body.metadata.name}`);
  return found;
}

/**
 * Every object labelled `app.kubernetes.io/name=aicr` in a namespace (and, unless told
 * otherwise, cluster-wide: other tests' cluster-scoped objects then count too).
 *
 * @param admin an admin client
 * @param namespace the namespace
 * @param options whether to include cluster-scoped kinds, and DaemonSet mode's kinds
 * @returns `Kind/name` of each
 */
export async function aicrObjects(
  admin: Api,
  namespace: string,
  options: { clusterScoped?: boolean; daemonset?: boolean } = {},
): Promise<string[]> {
  const selector = `?labelSelector=${encodeURIComponent("app.kubernetes.io/name=aicr")}`;
  const found: string[] = [];
  const kinds = [
    ...NAMESPACED,
    ...(options.daemonset ? DAEMONSET_KINDS : []),
    ...(options.clusterScoped === false ? [] : CLUSTER),
    ["ConfigMap", "/api/v1/namespaces/NS/configmaps"] as const,
  ];
  for (const [kind, path] of kinds) {
    const res = await admin.request("GET", path.replace("NS", namespace) + selector);
    for (const item of (res.body.items ?? []) as Obj[]) found.push(`${kind}/${item.metadata.name}`);
  }
  return found;
}

/**
 * The `nvidia-smi -q -x` output the kubelet stand-in serves on a node.
 *
 * @param stateDir the cluster's state folder
 * @param node the node name
 * @returns the XML text
 */
export function nodeFixture(stateDir: string, node: string): string {
  return readFileSync(join(stateDir, "kubelet", "nodes", node, "nvidia-smi-q-x.xml"), "utf8");
}

/**
 * Whether the API server binds ServiceAccount tokens to a Node (`ServiceAccountTokenNodeBinding`,
 * on by default from 1.31): one probe TokenRequest for the namespace's default ServiceAccount,
 * bound to `node`. Steps that test Node binding itself run only where it holds.
 *
 * @param admin admin client
 * @param ns a namespace whose default ServiceAccount exists
 * @param node an existing Node
 * @returns true when the token was minted, false when the API server refuses to bind to a Node
 * @throws {Error} on any other answer
 */
export async function bindsTokensToNodes(admin: Api, ns: string, node: string): Promise<boolean> {
  const res = await requestToken(admin, ns, "default", { node });
  if (res.status === 201) return true;
  if (res.status === 400 && /ServiceAccountTokenNodeBinding/.test(String(res.body.message))) {
    return false;
  }
  throw new Error(`Cannot probe Node binding: HTTP ${res.status} ${JSON.stringify(res.body)}`);
}

/** What a test's TokenRequest asks for: audiences, and the Pod (first) or Node it is bound to. */
export interface TokenSpec {
  audiences?: string[];
  pod?: Obj;
  node?: string;
}

/** Sends a TokenRequest (10 minutes) for ServiceAccount `sa`, answering the API's reply as is. */
function requestToken(admin: Api, ns: string, sa: string, spec: TokenSpec) {
  const bound = spec.pod
    ? {
      boundObjectRef: {
        apiVersion: "v1",
        kind: "Pod",
        name: spec.pod.metadata.name,
        uid: spec.pod.metadata.uid,
      },
    }
    : spec.node
    ? { boundObjectRef: { apiVersion: "v1", kind: "Node", name: spec.node } }
    : {};
  return admin.request("POST", `/api/v1/namespaces/${ns}/serviceaccounts/${sa}/token`, {
    apiVersion: "authentication.k8s.io/v1",
    kind: "TokenRequest",
    spec: {
      expirationSeconds: 600,
      ...(spec.audiences ? { audiences: spec.audiences } : {}),
      ...bound,
    },
  });
}

/**
 * A token for ServiceAccount `sa` (10 minutes) as {@link TokenSpec} says.
 *
 * @throws {Error} unless the API server created it (201), with its answer
 */
export async function mintToken(
  admin: Api,
  ns: string,
  sa: string,
  spec: TokenSpec = {},
): Promise<string> {
  const res = await requestToken(admin, ns, sa, spec);
  if (res.status !== 201) {
    throw new Error(`TokenRequest for ${ns}/${sa}: HTTP ${res.status} ${JSON.stringify(res.body)}`);
  }
  return res.body.status.token as string;
}

/** One HTTPS answer: status, body, headers and the server's certificate. */
export interface HttpsAnswer {
  /** Status code. */
  status: number;
  /** Body text. */
  body: string;
  /** Response headers. */
  headers: Record<string, unknown>;
  /** The certificate the server presented. */
  peer: PeerCertificate;
}

/**
 * A GET to a daemon: only `ca` trusted, `servername` checked, the token as a bearer.
 *
 * @param url the URL
 * @param options CA, server name, token
 * @returns the answer
 */
export function httpsGet(
  url: string,
  options: { ca: string; servername: string; token?: string },
): Promise<HttpsAnswer> {
  return new Promise((resolve, reject) => {
    const req = request(url, {
      ca: options.ca,
      servername: options.servername,
      agent: false,
      headers: options.token ? { authorization: `Bearer ${options.token}` } : {},
    }, (res) => {
      const peer = (res.socket as unknown as { getPeerCertificate(): PeerCertificate })
        .getPeerCertificate();
      let body = "";
      res.on("data", (chunk) => (body += chunk));
      res.on(
        "end",
        () => resolve({ status: res.statusCode ?? 0, body, headers: res.headers, peer }),
      );
    });
    req.on("error", reject);
    req.end();
  });
}
