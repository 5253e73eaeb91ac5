/**
 * The load generator of `daemon_bench.ts`, run in a Worker so the client's JavaScript does
 * not share a thread with the server under test: `concurrency` keep-alive clients issue GETs
 * back to back for `durationMs` and report every latency.
 *
 * @module
 */

/** What the bench asks the worker to do. */
export interface LoadRequest {
  /** Target URL. */
  url: string;
  /** Request headers (the bearer token). */
  headers: Record<string, string>;
  /** CA certificate to trust (PEM). */
  ca: string;
  /** Clients issuing requests back to back. */
  concurrency: number;
  /** How long to run. */
  durationMs: number;
}

/** What the worker reports. */
export interface LoadResult {
  /** Completed requests with status 200. */
  ok: number;
  /** Requests that failed or answered otherwise. */
  errors: number;
  /** Wall time of the run. */
  elapsedMs: number;
  /** Latency of every successful request, in ms. */
  latencies: number[];
  /** Body bytes of the last response. */
  bodyBytes: number;
}

/**
 * Runs one load loop.
 *
 * @param request the target and the shape of the load
 * @returns the counts and latencies
 */
export async function runLoad(request: LoadRequest): Promise<LoadResult> {
  const client = Deno.createHttpClient({ caCerts: [request.ca], poolMaxIdlePerHost: 256 });
  const latencies: number[] = [];
  let errors = 0;
  let bodyBytes = 0;
  const start = performance.now();
  const deadline = start + request.durationMs;
  async function worker(): Promise<void> {
    while (performance.now() < deadline) {
      const t0 = performance.now();
      try {
        const res = await fetch(request.url, { client, headers: request.headers });
        const body = await res.arrayBuffer();
        if (res.status === 200) {
          latencies.push(performance.now() - t0);
          bodyBytes = body.byteLength;
        } else errors++;
      } catch {
        errors++;
      }
    }
  }
  await Promise.all(Array.from({ length: request.concurrency }, () => worker()));
  const elapsedMs = performance.now() - start;
  client.close();
  return { ok: latencies.length, errors, elapsedMs, latencies, bodyBytes };
}

// Worker entry: one message in, one result out.
const scope = globalThis as unknown as {
  onmessage: ((event: MessageEvent<LoadRequest>) => void) | null;
  postMessage(message: LoadResult): void;
  close(): void;
};
if (typeof (globalThis as { WorkerGlobalScope?: unknown }).WorkerGlobalScope !== "undefined") {
  scope.onmessage = async (event) => {
    scope.postMessage(await runLoad(event.data));
    scope.close();
  };
}
