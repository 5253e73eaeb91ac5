/**
 * A loopback fake of the Kubernetes API server for the REST layer's tests: plain HTTP on
 * 127.0.0.1, answers from a script (statuses, bodies, Retry-After, cut connections), every
 * request recorded.
 *
 * @module
 */
import { createServer } from "node:http";
import { nativeConnection } from "../../kube/connection.ts";
import type { KubeConnection } from "../../kube/connection.ts";
import { mergeKubeConfigs, selectContext } from "../../kube/kubeconfig.ts";

/**
 * A kubeconfig for a loopback API server, with a named context, user and namespace.
 *
 * @param port the server's port
 * @returns the kubeconfig
 */
export function loopbackKubeConfig(port: number): KubeConnection {
  const merged = mergeKubeConfigs([{
    path: "/lab.kubeconfig",
    document: {
      clusters: [{
        name: "lab",
        cluster: { server: `http://127.0.0.1:${port}`, "insecure-skip-tls-verify": true },
      }],
      users: [{ name: "alice", user: { token: "expired-token" } }],
      contexts: [{
        name: "lab-admin",
        context: { cluster: "lab", user: "alice", namespace: "team-a" },
      }],
      "current-context": "lab-admin",
    },
  }]);
  return nativeConnection(selectContext(merged, undefined));
}

/** One scripted answer of the loopback API server: a status and body, or a cut connection. */
export type ApiAnswer =
  | { status: number; body?: unknown; headers?: Record<string, string> }
  | { cut: "before-answer" | "mid-body" };

/** One request the fake saw. */
export interface SeenRequest {
  /** HTTP method. */
  method: string;
  /** URL path. */
  path: string;
  /** URL query, with its `?`. */
  query: string;
  /** Request body. */
  body: string;
  /** Authorization header. */
  auth: string;
}

/** A running fake; `await using` stops it. */
export interface ScriptedApiServer extends AsyncDisposable {
  /** Its port on 127.0.0.1. */
  port: number;
  /** Every request, in order. */
  seen: SeenRequest[];
}

/**
 * A loopback HTTP API server that answers from a script, one answer per request (the last one
 * repeats), and records method, path, query, body and Authorization of every request.
 *
 * @param script the answers, in order
 * @returns the port, what it saw, and an async disposer
 */
export async function scriptedApiServer(script: ApiAnswer[]): Promise<ScriptedApiServer> {
  const seen: SeenRequest[] = [];
  const server = createServer((req, res) => {
    let body = "";
    req.on("data", (chunk) => (body += chunk));
    req.on("end", () => {
      const url = new URL(req.url ?? "/", "http://127.0.0.1");
      const auth = req.headers.authorization ?? "";
      seen.push({ method: req.method ?? "", path: url.pathname, query: url.search, body, auth });
      const answer = script[Math.min(seen.length - 1, script.length - 1)] as ApiAnswer;
      if ("cut" in answer) {
        if (answer.cut === "before-answer") {
          req.socket.destroy();
          return;
        }
        res.writeHead(200, { "Content-Type": "application/json", "Content-Length": "100" });
        res.write('{"kind":"Po');
        setTimeout(() => req.socket.destroy(), 5);
        return;
      }
      const text = answer.body === undefined ? "" : JSON.stringify(answer.body);
      res.writeHead(answer.status, { "Content-Type": "application/json", ...answer.headers });
      res.end(text);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as { port: number }).port;
  return {
    port,
    seen,
    async [Symbol.asyncDispose]() {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

/**
 * A Kubernetes `Status` answer.
 *
 * @param code the HTTP status
 * @param reason the Status reason, e.g. `NotFound`
 * @param message the Status message
 * @returns the scripted answer
 */
export function apiStatus(code: number, reason: string, message = reason): ApiAnswer {
  return { status: code, body: { kind: "Status", apiVersion: "v1", code, reason, message } };
}
