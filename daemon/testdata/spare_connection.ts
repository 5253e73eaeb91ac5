/**
 * Fixture for serve_test.ts, run with `deno run`: a response of 16 000 bytes, then another request,
 * then a shutdown, over HTTP and HTTPS. Under `deno run` (not under `deno test`) Deno's node:http
 * leaves the fetch client's spare connection counted as busy; prints the shutdown times as JSON.
 *
 * @module
 */
import { Hono } from "hono";
import { serve } from "../serve.ts";
import { generateTestTls } from "../_testing.ts";

const tls = generateTestTls();
const app = new Hono();
app.get("/bytes/:n", (c) => c.text("x".repeat(Number(c.req.param("n")))));
app.get("/", (c) => c.text("hi"));
const times: Record<string, number> = {};
for (const secure of [false, true]) {
  const server = await serve(app.fetch, {
    hostname: "127.0.0.1",
    port: 0,
    drainTimeoutMs: 5_000,
    ...(secure ? { tls } : { insecureHttp: true }),
  });
  const client = Deno.createHttpClient({ caCerts: [tls.ca] });
  await (await fetch(`${server.url}/bytes/16000`, { client })).text();
  await (await fetch(`${server.url}/`, { client })).text();
  const started = performance.now();
  await server.shutdown();
  times[secure ? "https" : "http"] = Math.round(performance.now() - started);
  client.close();
}
Deno.stdout.writeSync(new TextEncoder().encode(JSON.stringify(times) + "\n"));
