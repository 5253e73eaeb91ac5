/**
 * The plain Hono app `daemon_bench.ts` measures `aicr daemon` beside: one route answering a fixed
 * body, served by the daemon's own HTTPS stack (`daemon/serve.ts`) under the daemon's V8 flags
 * and web classes, as `aicr daemon` runs. The bench seals it into a Node single executable on the
 * same base, Node options and V8 flags as `aicr`, so the two differ only by the daemon's app.
 *
 * Environment: `AICR_BENCH_TLS_CERT`, `AICR_BENCH_TLS_KEY` (PEM files), `AICR_BENCH_BODY` (the
 * file whose bytes it answers, e.g. a snapshot the daemon served), `AICR_BENCH_PORT`. Prints
 * `listening` once it serves; stops on SIGTERM.
 *
 * @module
 */
import { readFileSync } from "node:fs";
import process from "node:process";
import { Hono } from "hono";
import { serve, useLightWebClasses } from "../daemon/mod.ts";
import { useDaemonV8Flags } from "../runtime.ts";

async function main(): Promise<void> {
  if (useDaemonV8Flags()) useLightWebClasses();
  const env = (name: string) => {
    const value = process.env[name];
    if (!value) throw new Error(`${name} is not set`);
    return value;
  };
  const body = readFileSync(env("AICR_BENCH_BODY"));
  const app = new Hono();
  app.get("/v1/snapshot", (c) => c.body(body, 200, { "content-type": "application/yaml" }));
  const stop = new AbortController();
  process.on("SIGTERM", () => stop.abort());
  await serve(app, {
    hostname: "127.0.0.1",
    port: Number(env("AICR_BENCH_PORT")),
    tls: {
      cert: readFileSync(env("AICR_BENCH_TLS_CERT"), "utf8"),
      key: readFileSync(env("AICR_BENCH_TLS_KEY"), "utf8"),
    },
    signal: stop.signal,
  });
  process.stdout.write("listening\n");
}

if (import.meta.main) {
  await main();
}
