/**
 * The servers of `daemon_bench.ts`, in their own process so the runtime under test (Deno, or
 * Node as in the release executable) is chosen by how this file is started, and so their CPU
 * time is theirs alone. No `Deno.*`: it runs as is under Deno and bundled under Node.
 *
 * Starts, on 127.0.0.1 with one throwaway CA: (a) the daemon with its cache warm (fake
 * collector, cached fake TokenReview/SubjectAccessReview), (b) a Hono hello-world, (c) a cold
 * daemon whose collector takes 200 ms. Under Node all three run with the daemon's V8 flags
 * (`runtime.ts` `DAEMON_V8_FLAGS`) and its web classes (`daemon/web.ts`), as `aicr daemon` does. Prints one JSON line `{ ca, daemon, hello, cold }`, then
 * answers `cold` on stdin with `{ "coldCollections": n }` and exits on `quit` (or end of input).
 *
 * @module
 */
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import process from "node:process";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { Hono } from "hono";
import { createCachingAuthorizer, createDaemon, serve, useLightWebClasses } from "../daemon/mod.ts";
import { fakeCollector, fakeKubeAuth, generateTestTls, OK_REPORTS } from "../daemon/_testing.ts";
import { NOOP_LOGGER } from "../log.ts";
import { useDaemonV8Flags } from "../runtime.ts";
import { parseSnapshot } from "../snapshot/mod.ts";
import type { Snapshot } from "../snapshot/mod.ts";

/** The fixture snapshot (7.5 KB of YAML), optionally with extra sysctl keys. */
function benchSnapshot(fixture: string, extraSysctls: number): Snapshot {
  const snapshot = parseSnapshot(readFileSync(fixture, "utf8"));
  if (extraSysctls > 0) {
    const data: Record<string, string> = {};
    for (let i = 0; i < extraSysctls; i++) data[`/proc/sys/kernel/bench_key_${i}`] = String(i);
    snapshot.measurements.find((m) => m.type === "OS")?.subtypes.push({
      subtype: "bench-sysctl",
      data,
    });
  }
  return snapshot;
}

async function main(): Promise<void> {
  // Under Node, the V8 flags and the small web classes `aicr daemon` runs with, for both servers.
  if (useDaemonV8Flags()) useLightWebClasses();
  // Bundled for Node the file moves, so the fixture path comes from the environment there.
  const fixture = process.env.AICR_BENCH_FIXTURE ??
    join(
      dirname(fileURLToPath(import.meta.url)),
      "..",
      "snapshot",
      "testdata",
      "h100-gpu-node-1.yaml",
    );
  const sysctls = Number(process.env.AICR_BENCH_SYSCTLS ?? "0");
  const tls = generateTestTls();
  const options = { hostname: "127.0.0.1", port: 0, tls: { cert: tls.cert, key: tls.key } };
  const build = { version: "bench", commit: "bench" };

  const warm = createDaemon({
    collect:
      fakeCollector({ snapshot: benchSnapshot(fixture, sysctls), reports: OK_REPORTS }).collect,
    auth: createCachingAuthorizer(fakeKubeAuth()),
    clock: Date.now,
    log: NOOP_LOGGER,
    build,
    nodeName: "gpu-node-1",
  }, { maxAgeMs: 3_600_000 });
  await warm.cache.get();
  const warmServer = await serve(warm.app, options);

  const hello = new Hono();
  hello.get("/", (c) => c.text("Hello Hono!"));
  const helloServer = await serve(hello.fetch, options);

  const coldCollector = fakeCollector({ snapshot: benchSnapshot(fixture, 0), reports: OK_REPORTS });
  coldCollector.delayMs = 200;
  const cold = createDaemon({
    collect: coldCollector.collect,
    auth: createCachingAuthorizer(fakeKubeAuth()),
    clock: Date.now,
    log: NOOP_LOGGER,
    build,
    nodeName: "gpu-node-1",
  });
  const coldServer = await serve(cold.app, options);

  process.stdout.write(
    JSON.stringify({
      ca: tls.ca,
      daemon: warmServer.url,
      hello: helloServer.url,
      cold: coldServer.url,
      runtime: typeof (globalThis as { Deno?: unknown }).Deno === "undefined"
        ? `node ${process.versions.node}`
        : "deno",
    }) + "\n",
  );

  const lines = createInterface({ input: process.stdin });
  for await (const line of lines) {
    if (line === "cold") {
      process.stdout.write(JSON.stringify({ coldCollections: coldCollector.calls }) + "\n");
    } else if (line === "quit") break;
  }
  lines.close();
  await Promise.all([warmServer.shutdown(), helloServer.shutdown(), coldServer.shutdown()]);
  await Promise.all([warm.close(), cold.close()]);
  process.stdin.destroy();
}

main().catch((error) => {
  process.stderr.write(`${error instanceof Error ? error.stack : String(error)}\n`);
  process.exitCode = 1;
});
