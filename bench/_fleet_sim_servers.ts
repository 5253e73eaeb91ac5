/**
 * Many simulated daemons in one process, for `daemonset_bench.ts --simulate N`: N real daemon
 * apps (`createDaemon`, warm cache, real caching authorizer over a counting fake
 * TokenReview/SubjectAccessReview), each served over real TLS by `serve()` on its own loopback
 * address (127.0.1.1, 127.0.1.2, …, one port), each with a certificate of its own naming its
 * node and address (one throwaway CA, as the install signs), each accepting only the reader
 * token minted for its node (`token-reader@<node>`, as the per-node audience and node binding
 * do on a cluster). Node snapshots come from the mixed-fleet
 * generator (H100, GB200, CPU nodes from the real captures); their NodeTopology is the whole
 * simulated cluster's with `AICR_SIM_TOPOLOGY=cluster` (what daemons collected before the
 * fetch listed the nodes itself), or the node's own with `own` (what a daemon collects now:
 * the real `foldOwnTopology` of its Node, `scope: node`).
 *
 * Prints one JSON line `{ ca, port, nodes: [{ node, ip }], snapshotBytes }` when every daemon
 * listens; answers `stats` on stdin with `{ reviews, checks }` and exits on `quit`.
 *
 * @module
 */
import process from "node:process";
import { createInterface } from "node:readline";
import { generateDaemonCa, generateServingKey, issueServingCertificate } from "../x509.ts";
import { createCachingAuthorizer, createDaemon, serve } from "../daemon/mod.ts";
import { fakeKubeAuth, OK_REPORTS } from "../daemon/_testing.ts";
import { NOOP_LOGGER } from "../log.ts";
import { encodeSnapshot } from "../snapshot/mod.ts";
import { generateMixedFleet, mixedCounts } from "../snapshot/testdata/mixed_fleet.ts";

/** The loopback address of simulated node `i` (0-based): 127.0.1.1 … 127.0.4.250 for 1,000. */
export function simulatedIp(i: number): string {
  return `127.0.${1 + Math.floor(i / 250)}.${1 + (i % 250)}`;
}

async function main(): Promise<void> {
  const total = Number(process.argv[2] ?? process.env.AICR_SIM_NODES ?? "1000");
  const port = Number(process.env.AICR_SIM_PORT ?? "28443");
  const ca = generateDaemonCa({ now: new Date() });
  const auth = fakeKubeAuth();
  const counts = mixedCounts(total);
  const servers: { shutdown(): Promise<void> }[] = [];
  const daemons: { close(): Promise<void> }[] = [];
  const nodes: { node: string; ip: string }[] = [];
  let snapshotBytes = 0;
  let i = 0;
  // AICR_SIM_TOPOLOGY=own: each daemon's NodeTopology is its own node's (see generateMixedFleet).
  const ownTopology = process.env.AICR_SIM_TOPOLOGY === "own";
  for (const snapshot of generateMixedFleet(counts, { ownTopology })) {
    const node = snapshot.metadata["source-node"];
    if (i === 0) snapshotBytes = new TextEncoder().encode(encodeSnapshot(snapshot, "json")).length;
    // This node's token only (another node's is as invalid as a bad one).
    const nodeAuth = {
      authorizer: auth.authorizer,
      authenticator: {
        review: (token: string) =>
          token === `token-reader@${node}`
            ? auth.authenticator.review("token-reader")
            : auth.authenticator.review(`refused: ${token}`),
      },
    };
    const daemon = createDaemon({
      collect: () => Promise.resolve({ snapshot, reports: OK_REPORTS }),
      auth: createCachingAuthorizer(nodeAuth),
      // /metrics as a real daemon authorizes it: a default-audience token of any node, here the
      // fake's `token-prometheus` (get nodes/metrics), for prometheus_bench.ts.
      metricsAuth: createCachingAuthorizer(auth),
      clock: Date.now,
      log: NOOP_LOGGER,
      build: { version: "bench", commit: "bench" },
      nodeName: node,
    }, { maxAgeMs: 3_600_000 });
    await daemon.cache.refresh();
    const ip = simulatedIp(i);
    const key = generateServingKey();
    const cert = issueServingCertificate({
      ca,
      publicKey: key.publicKey,
      node,
      ipAddresses: [ip],
      now: new Date(),
      lifetimeSeconds: 86_400,
    });
    servers.push(
      await serve(daemon.app, {
        hostname: ip,
        port,
        tls: { cert, key: key.privateKey.export({ type: "pkcs8", format: "pem" }) as string },
      }),
    );
    daemons.push(daemon);
    nodes.push({ node, ip });
    i++;
  }
  process.stdout.write(JSON.stringify({ ca: ca.caCert, port, nodes, snapshotBytes }) + "\n");
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
