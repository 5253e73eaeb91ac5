/**
 * Many simulated daemons in one process, for `daemonset_bench.ts --simulate N`: N real daemon
 * apps (`createDaemon`, warm cache, real caching authorizer over a counting fake
 * TokenReview/SubjectAccessReview), each served over real TLS by `serve()` on its own loopback
 * address (127.0.1.1, 127.0.1.2, …, one port), with the certificate the installer would make
 * (`<name>.<namespace>.svc`, one throwaway CA). Node snapshots come from the mixed-fleet
 * generator (H100, GB200, CPU nodes from the real captures; NodeTopology of the whole
 * simulated cluster, as a real daemon collects it).
 *
 * Prints one JSON line `{ ca, port, nodes: [{ node, ip }], snapshotBytes }` when every daemon
 * listens; answers `stats` on stdin with `{ reviews, checks }` and exits on `quit`.
 *
 * @module
 */
import process from "node:process";
import { createInterface } from "node:readline";
import { generateDaemonTls } from "../x509.ts";
import { createCachingAuthorizer, createDaemon, serve } from "../daemon/mod.ts";
import { fakeKubeAuth, OK_REPORTS } from "../daemon/_testing.ts";
import { NOOP_LOGGER } from "../log.ts";
import { daemonServerName } from "../manifests/mod.ts";
import { encodeSnapshot } from "../snapshot/mod.ts";
import { generateMixedFleet, mixedCounts } from "../snapshot/testdata/mixed_fleet.ts";

/** The loopback address of simulated node `i` (0-based): 127.0.1.1 … 127.0.4.250 for 1,000. */
export function simulatedIp(i: number): string {
  return `127.0.${1 + Math.floor(i / 250)}.${1 + (i % 250)}`;
}

async function main(): Promise<void> {
  const total = Number(process.argv[2] ?? process.env.AICR_SIM_NODES ?? "1000");
  const namespace = process.env.AICR_SIM_NAMESPACE ?? "aicr-bench";
  const port = Number(process.env.AICR_SIM_PORT ?? "28443");
  const tls = generateDaemonTls({
    dnsNames: [daemonServerName(namespace, "aicr-daemon")],
    now: new Date(),
  });
  const auth = fakeKubeAuth();
  const counts = mixedCounts(total);
  const servers: { shutdown(): Promise<void> }[] = [];
  const daemons: { close(): Promise<void> }[] = [];
  const nodes: { node: string; ip: string }[] = [];
  let snapshotBytes = 0;
  let i = 0;
  for (const snapshot of generateMixedFleet(counts)) {
    const node = snapshot.metadata["source-node"];
    if (i === 0) snapshotBytes = new TextEncoder().encode(encodeSnapshot(snapshot, "json")).length;
    const daemon = createDaemon({
      collect: () => Promise.resolve({ snapshot, reports: OK_REPORTS }),
      auth: createCachingAuthorizer(auth),
      clock: Date.now,
      log: NOOP_LOGGER,
      build: { version: "bench", commit: "bench" },
      nodeName: node,
    }, { maxAgeMs: 3_600_000 });
    await daemon.cache.refresh();
    const ip = simulatedIp(i);
    servers.push(
      await serve(daemon.app.fetch, {
        hostname: ip,
        port,
        tls: { cert: tls.cert, key: tls.key },
      }),
    );
    daemons.push(daemon);
    nodes.push({ node, ip });
    i++;
  }
  process.stdout.write(JSON.stringify({ ca: tls.caCert, port, nodes, snapshotBytes }) + "\n");
  const lines = createInterface({ input: process.stdin });
  for await (const line of lines) {
    if (line === "stats") {
      process.stdout.write(
        JSON.stringify({ reviews: auth.reviews, checks: auth.checks.length }) + "\n",
      );
    } else if (line === "quit") break;
  }
  lines.close();
  await Promise.all(servers.map((s) => s.shutdown()));
  await Promise.all(daemons.map((d) => d.close()));
  process.stdin.destroy();
}

if (import.meta.main) {
  main().catch((error) => {
    process.stderr.write(`${error instanceof Error ? error.stack : String(error)}\n`);
    process.exitCode = 1;
  });
}
