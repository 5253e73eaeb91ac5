/**
 * A fault-injecting HTTPS proxy between the CLI and the test cluster's apiserver
 * (loopback only). It speaks HTTP/1.1 only, so the CLI behind it falls back from HTTP/2 (its
 * transport with a real API server, `kube/h2.ts`): Deno's HTTP/2 server cannot drop one client's
 * connection on cue. HTTP/2 connection loss is tested by `restart_test.ts` (the API server killed
 * mid-run) and `kube/h2_test.ts`. It serves a certificate for 127.0.0.1 signed by the cluster's CA,
 * forwards every request upstream with the admin client certificate, and applies the
 * first matching rule (method + path regex, path including the query):
 *
 * - `loseResponse`: forward, wait for the whole upstream answer, then destroy the
 *   client's socket (the apiserver applied the request; the client never learns it);
 * - `status`: answer `code` with `headers` instead of forwarding (429 + Retry-After, 503);
 * - `delay`: wait, then forward;
 * - `dropAfter`: forward a streaming answer (watch, log follow) and cut it after `ms`;
 * - `truncate`: forward, then send the headers and half the body and cut the connection;
 * - `reset`: never forward; reset the client's connection (the apiserver never sees the
 *   request: with an `onMatch` starting {@link FaultProxy.refuse}, an outage that
 *   provably begins before that request);
 * - {@link FaultProxy.refuse}: close the listener and reset every connection for a
 *   while, as an apiserver restart does.
 *
 * Each rule fires for its first `times` matches (default: always) and counts what it
 * injected. The proxy also keeps a request log, so tests can prove a create was sent
 * once.
 *
 * ```ts ignore
 * const proxy = await startFaultProxy(env.cluster);
 * proxy.add({ method: "POST", path: /\/jobs$/, action: { kind: "loseResponse" }, times: 1 });
 * await aicr(["snapshot", "--kubeconfig", proxy.kubeconfig, ...]);
 * await proxy.stop();
 * ```
 *
 * @module
 */
import https from "node:https";
import { Buffer } from "node:buffer";
import type http from "node:http";
import type { Socket } from "node:net";
import { readFileSync, writeFileSync } from "node:fs";
import { mkdtemp } from "node:fs/promises";
import { join } from "node:path";
import { stringify } from "yaml";
import type { Cluster } from "../cluster/cluster.ts";
import { createCert } from "../cluster/pki.ts";

/** What a rule does to a matching request. */
export type FaultAction =
  | { kind: "loseResponse" }
  | { kind: "status"; code: number; headers?: Record<string, string>; body?: unknown }
  | { kind: "delay"; ms: number }
  | { kind: "dropAfter"; ms: number }
  /** Forward, then send the headers and half the body, and cut the connection. */
  | { kind: "truncate" }
  /** Never forward: reset the client's connection (the apiserver never sees the request). */
  | { kind: "reset" }
  /** No fault: forward as is (for `onMatch` hooks); not counted. */
  | { kind: "observe" };

/** One rule. */
export interface FaultRule {
  /** HTTP method, or any when absent. */
  method?: string;
  /** Matched against the path with its query string. */
  path: RegExp;
  /** What to do. */
  action: FaultAction;
  /** Fire for the first N matches only. @default Infinity */
  times?: number;
  /** A label for reports. @default the action kind */
  name?: string;
  /**
   * Runs when the rule fires, before the action completes (for `loseResponse`: after
   * the upstream answer, before the socket is destroyed): a test's moment to tamper.
   */
  onMatch?: (request: ProxiedRequest) => void | Promise<void>;
}

/** One proxied request, for assertions. */
export interface ProxiedRequest {
  /** Method. */
  method: string;
  /** Path with query. */
  path: string;
  /** Upstream status, or 0 when none reached the client. */
  status: number;
  /** The rule that fired, if any. */
  fault?: string;
  /** A request held by a `delay` rule whose client went away before the hold ended. */
  abandoned?: boolean;
}

/** A running proxy. */
export interface FaultProxy {
  /** `https://127.0.0.1:<port>`. */
  readonly url: string;
  /** A kubeconfig pointing at the proxy (the proxy authenticates upstream as admin). */
  readonly kubeconfig: string;
  /** Adds a rule (rules are tried in the order added). */
  add(rule: FaultRule): void;
  /** Removes every rule. */
  clear(): void;
  /** Refuses connections for `ms` (closes the listener, resets open sockets). */
  refuse(ms: number): Promise<void>;
  /** Faults injected so far, by rule name (`refuse` counts once per call). */
  readonly injected: Record<string, number>;
  /** Total faults injected. */
  readonly total: number;
  /** Every request seen, in order. */
  readonly requests: readonly ProxiedRequest[];
  /** Stops the proxy. */
  stop(): Promise<void>;
}

interface LiveRule extends FaultRule {
  fired: number;
}

/**
 * Starts a proxy in front of a cluster's apiserver.
 *
 * @param cluster the test cluster (its CA signs the proxy's certificate)
 * @param options state folder for the certificate and kubeconfig (default: under the cluster's)
 * @returns the running proxy
 */
export async function startFaultProxy(
  cluster: Cluster,
  options: { dir?: string } = {},
): Promise<FaultProxy> {
  const dir = options.dir ?? await mkdtemp(join(cluster.stateDir, "fault-proxy-"));
  const serving = await createCert(dir, "proxy", { cert: cluster.caFile, key: cluster.caKeyFile }, {
    cn: "aicr-fault-proxy",
    ips: ["127.0.0.1"],
    usage: "server",
  });
  const ca = readFileSync(cluster.caFile);
  const upstream = new URL(cluster.server);
  const agent = new https.Agent({
    ca,
    cert: readFileSync(cluster.adminCert.cert),
    key: readFileSync(cluster.adminCert.key),
    keepAlive: true,
  });
  const rules: LiveRule[] = [];
  /** Requests held by a delay rule: dropped by stop(), so no timer outlives the proxy. */
  const delays = new Set<ReturnType<typeof setTimeout>>();
  /** Requests forwarded and not yet closed: aborted by stop(). */
  const inFlight = new Set<AbortController>();
  const injected: Record<string, number> = {};
  const requests: ProxiedRequest[] = [];
  const sockets = new Set<Socket>();
  let refusing = false;

  const count = (name: string) => {
    injected[name] = (injected[name] ?? 0) + 1;
  };

  function match(method: string, path: string): LiveRule | undefined {
    for (const rule of rules) {
      if (rule.method && rule.method !== method) continue;
      if (!rule.path.test(path)) continue;
      if (rule.fired >= (rule.times ?? Infinity)) continue;
      rule.fired++;
      return rule;
    }
    return undefined;
  }

  function handle(req: http.IncomingMessage, res: http.ServerResponse): void {
    const method = req.method ?? "GET";
    const path = req.url ?? "/";
    const rule = match(method, path);
    const name = rule && rule.action.kind !== "observe" ? rule.name ?? rule.action.kind : undefined;
    const record: ProxiedRequest = { method, path, status: 0, ...(name ? { fault: name } : {}) };
    requests.push(record);
    if (rule && name) count(name);
    const action = rule?.action;
    if (action?.kind === "status") {
      void rule?.onMatch?.(record);
      req.resume();
      const body = JSON.stringify(
        action.body ?? {
          kind: "Status",
          apiVersion: "v1",
          status: "Failure",
          message: `injected ${action.code}`,
          reason: action.code === 429 ? "TooManyRequests" : "ServiceUnavailable",
          code: action.code,
        },
      );
      record.status = action.code;
      res.writeHead(action.code, { "Content-Type": "application/json", ...action.headers });
      res.end(body);
      return;
    }
    const forward = () => {
      const headers = { ...req.headers, host: upstream.host };
      delete headers.authorization;
      const aborter = new AbortController();
      inFlight.add(aborter);
      const up = https.request({
        host: upstream.hostname,
        port: upstream.port,
        method,
        path,
        headers,
        agent,
        signal: aborter.signal,
      }, (answer) => {
        record.status = answer.statusCode ?? 0;
        if (action?.kind === "loseResponse") {
          // The apiserver answered (so it applied the request); the client never hears it.
          answer.resume();
          answer.on("end", async () => {
            record.status = 0;
            await rule?.onMatch?.(record);
            req.socket.destroy();
          });
          return;
        }
        if (action?.kind === "truncate") {
          const chunks: Buffer[] = [];
          answer.on("data", (c: Buffer) => chunks.push(c));
          answer.on("end", () => {
            const body = Buffer.concat(chunks);
            res.writeHead(answer.statusCode ?? 502, answer.headers);
            res.write(body.subarray(0, Math.floor(body.length / 2)));
            setTimeout(() => req.socket.destroy(), 50);
          });
          return;
        }
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
        if (action?.kind === "dropAfter") {
          const timer = setTimeout(() => {
            answer.destroy();
            req.socket.destroy();
          }, action.ms);
          answer.on("close", () => clearTimeout(timer));
        }
      });
      up.on("error", () => req.socket.destroy());
      up.on("close", () => inFlight.delete(aborter));
      // Aborted, not only destroyed: a destroyed request's answer (a watch) could stay open
      // until the API server ends it, long after the proxy stopped.
      res.on("close", () => aborter.abort());
      req.pipe(up);
    };
    const hook = action?.kind === "loseResponse" ? undefined : rule?.onMatch;
    const go = () => {
      if (action?.kind === "reset") {
        req.resume();
        req.socket.destroy();
      } else if (action?.kind === "delay") {
        let released = false;
        const timer = setTimeout(() => {
          released = true;
          delays.delete(timer);
          forward();
        }, action.ms);
        delays.add(timer);
        res.on("close", () => {
          if (!released) record.abandoned = true;
        });
      } else forward();
    };
    if (hook) Promise.resolve(hook(record)).then(go, go);
    else go();
  }

  const key = readFileSync(serving.key);
  const cert = readFileSync(serving.cert);
  let server = listen(0);
  const port = await new Promise<number>((resolve, reject) => {
    server.once("listening", () => resolve((server.address() as { port: number }).port));
    server.once("error", reject);
  });

  function listen(onPort: number): https.Server {
    const s = https.createServer({ key, cert }, handle);
    s.on("connection", (socket: Socket) => {
      if (refusing) {
        socket.destroy();
        return;
      }
      sockets.add(socket);
      socket.on("close", () => sockets.delete(socket));
    });
    s.on("tlsClientError", () => {});
    s.listen(onPort, "127.0.0.1");
    return s;
  }

  const url = `https://127.0.0.1:${port}`;
  const kubeconfig = join(dir, "proxy.kubeconfig");
  const b64 = (p: string) => readFileSync(p).toString("base64");
  writeFileSync(
    kubeconfig,
    stringify({
      apiVersion: "v1",
      kind: "Config",
      clusters: [{
        name: "fault-proxy",
        cluster: { server: url, "certificate-authority-data": ca.toString("base64") },
      }],
      users: [{
        name: "via-proxy",
        // Any client certificate will do: the proxy authenticates upstream as admin.
        user: {
          "client-certificate-data": b64(cluster.adminCert.cert),
          "client-key-data": b64(cluster.adminCert.key),
        },
      }],
      contexts: [{ name: "via-proxy", context: { cluster: "fault-proxy", user: "via-proxy" } }],
      "current-context": "via-proxy",
    }),
  );

  const closeServer = (s: https.Server) =>
    new Promise<void>((resolve) => {
      s.close(() => resolve());
      for (const socket of sockets) socket.destroy();
      sockets.clear();
    });

  return {
    url,
    kubeconfig,
    add(rule) {
      rules.push({ ...rule, fired: 0 });
    },
    clear() {
      rules.length = 0;
    },
    async refuse(ms) {
      count("refuse");
      refusing = true;
      await closeServer(server);
      await new Promise((r) => setTimeout(r, ms));
      refusing = false;
      server = listen(port);
      await new Promise<void>((resolve, reject) => {
        server.once("listening", () => resolve());
        server.once("error", reject);
      });
    },
    get injected() {
      return { ...injected };
    },
    get total() {
      return Object.values(injected).reduce((a, b) => a + b, 0);
    },
    requests,
    async stop() {
      for (const timer of delays) clearTimeout(timer);
      delays.clear();
      for (const aborter of inFlight) aborter.abort();
      inFlight.clear();
      await closeServer(server);
      agent.destroy();
    },
  };
}
