/**
 * A small apiserver client for the kubelet stand-in: fetch over a client certificate, JSON in and
 * out, and a list-then-watch loop. (The kubelet is test harness code, outside the app's `kube/` layer.)
 *
 * @module
 */

/** A JSON object from the API. */
// deno-lint-ignore no-explicit-any -- Kubernetes objects of many kinds, read by field
export type Obj = Record<string, any>;

/** A response: status and parsed JSON body (or text when it is not JSON). */
export interface ApiResponse {
  status: number;
  body: Obj;
}

/** Client for one identity. */
export interface Api {
  /** The apiserver URL. */
  server: string;
  /**
   * Sends a request.
   *
   * @param method HTTP method
   * @param path path with query
   * @param body JSON body
   * @param contentType defaults to application/json (PATCH: merge patch)
   */
  request(method: string, path: string, body?: unknown, contentType?: string): Promise<ApiResponse>;
  /**
   * Lists then watches `path` until `signal` aborts, calling `onEvent` for every object (ADDED for
   * listed ones, then LISTED with the whole list), relisting on 410 Gone or a dropped connection.
   */
  watch(
    path: string,
    onEvent: (type: string, obj: Obj) => void,
    signal: AbortSignal,
  ): Promise<void>;
  /** Releases the HTTP client. */
  close(): void;
}

/** How long the server keeps one watch open before ending it (the loop opens the next). */
const WATCH_SECONDS = 30;
/** How long one watch may take in all before it is taken as stalled and cut. */
const WATCH_BOUND_MS = (WATCH_SECONDS + 10) * 1000;

/** Files of one identity. */
export interface ApiIdentity {
  ca: string;
  cert: string;
  key: string;
}

/**
 * Creates a client authenticating with the given PEM certificate and key.
 *
 * @param server apiserver URL
 * @param id PEM texts (not paths) of the CA, client certificate and key
 * @returns the client
 */
export function createApi(server: string, id: ApiIdentity): Api {
  const client = Deno.createHttpClient({ caCerts: [id.ca], cert: id.cert, key: id.key });
  async function request(
    method: string,
    path: string,
    body?: unknown,
    contentType?: string,
  ): Promise<ApiResponse> {
    const ct = contentType ??
      (method === "PATCH" ? "application/merge-patch+json" : "application/json");
    const res = await fetch(server + path, {
      client,
      method,
      headers: {
        accept: "application/json",
        ...(body === undefined ? {} : { "content-type": ct }),
      },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      signal: AbortSignal.timeout(30_000),
    });
    const text = await res.text();
    let parsed: Obj;
    try {
      parsed = text ? JSON.parse(text) : {};
    } catch {
      parsed = { text };
    }
    return { status: res.status, body: parsed };
  }
  async function watch(
    path: string,
    onEvent: (type: string, obj: Obj) => void,
    signal: AbortSignal,
  ): Promise<void> {
    const sep = path.includes("?") ? "&" : "?";
    while (!signal.aborted) {
      let rv = "";
      try {
        const list = await request("GET", path);
        if (list.status !== 200) {
          throw new Error(`list ${path}: HTTP ${list.status} ${list.body.message ?? ""}`);
        }
        rv = list.body.metadata?.resourceVersion ?? "";
        for (const item of list.body.items ?? []) onEvent("ADDED", item);
        // After a (re)list: objects deleted while no watch was open are missing from it.
        onEvent("LISTED", list.body);
        while (!signal.aborted) {
          // The server ends each watch after WATCH_SECONDS; one that goes past WATCH_BOUND_MS has
          // stalled without a word (nothing arrives, nothing ends it): cut and relisted, so a pod
          // bound to the node meanwhile waits seconds, not a test's whole timeout.
          const res = await fetch(
            `${server}${path}${sep}watch=true&allowWatchBookmarks=true&resourceVersion=${rv}&timeoutSeconds=${WATCH_SECONDS}`,
            {
              client,
              signal: AbortSignal.any([signal, AbortSignal.timeout(WATCH_BOUND_MS)]),
              headers: { accept: "application/json" },
            },
          );
          if (res.status !== 200 || !res.body) {
            await res.body?.cancel();
            break;
          }
          let buf = "";
          let gone = false;
          for await (const chunk of res.body.pipeThrough(new TextDecoderStream())) {
            buf += chunk;
            let i;
            while ((i = buf.indexOf("\n")) >= 0) {
              const line = buf.slice(0, i).trim();
              buf = buf.slice(i + 1);
              if (!line) continue;
              const ev = JSON.parse(line) as { type: string; object: Obj };
              if (ev.type === "ERROR") {
                gone = true;
                continue;
              }
              rv = ev.object.metadata?.resourceVersion ?? rv;
              if (ev.type !== "BOOKMARK") onEvent(ev.type, ev.object);
            }
          }
          if (gone) break;
        }
      } catch (e) {
        if (signal.aborted) return;
        // A dropped watch or apiserver hiccup: relist after a short pause, as informers do.
        void e;
      }
      if (!signal.aborted) await new Promise((r) => setTimeout(r, 500));
    }
  }
  return { server, request, watch, close: () => client.close() };
}
