/**
 * Fixture for serve_test.ts, run with `deno run`: a response of 16 000 bytes, then another request,
 * then a shutdown, over HTTP and HTTPS. Under `deno run` (not under `deno test`) Deno's node:http
 * leaves the fetch client's spare connection counted as busy. The drain timeout is 10 minutes, so
 * a shutdown held by that connection never ends (the test stops it); prints each server's
 * warnings as JSON (a forced shutdown warns).
 *
 * @module
 */
import { Hono } from "hono";
import { serve } from "../serve.ts";
import { generateTestTls } from "../_testing.ts";
import { NOOP_LOGGER, renderLogText } from "../../log.ts";

const tls = generateTestTls();
const app = new Hono();
app.get("/bytes/:n", (c) => c.text("x".repeat(Number(c.req.param("n")))));
app.get("/", (c) => c.text("hi"));
const warnings: Record<string, string[]> = {};
for (const secure of [false, true]) {
  const seen: string[] = [];
  warnings[secure ? "https" : "http"] = seen;
  const server = await serve(app.fetch, {
    hostname: "127.0.0.1",
    port: 0,
    drainTimeoutMs: 600_000,
    log: { ...NOOP_LOGGER, warn: (message) => seen.push(renderLogText(message)) },
    ...(secure ? { tls } : { insecureHttp: true }),
  });
  const client = Deno.createHttpClient({ caCerts: [tls.ca] });
  await (await fetch(`${server.url}/bytes/16000`, { client })).text();
  await (await fetch(`${server.url}/`, { client })).text();
  await server.shutdown();
  client.close();
}
Deno.stdout.writeSync(new TextEncoder().encode(JSON.stringify(warnings) + "\n"));
