/**
 * Bench of issue #25's goal "a new node's daemon is Ready within seconds with no CLI": the time
 * from a node joining (its kubelet registered) to its daemon pod Ready, side by side in one run on
 * the local cluster (real API server, kubelet stand-in running the built binary):
 *
 * - `signer`: an install with the in-cluster signer; nothing is run after the join;
 * - `cli`: an install with `--no-signer`, and an operator who runs `aicr daemonset fetch --node
 *   <new node>` the moment the node joins, again until it answers (the best case of the CLI path:
 *   in practice the node waits for the next manual fetch).
 *
 * Run: `deno run -A bench/signer_join_bench.ts [--rounds=2]` (needs `dist/aicr`; reuses the cluster
 * of `$AICR_CLUSTER_DIR` when it runs one, else starts its own).
 */
import { mkdtemp, rm } from "node:fs/promises";
import { join } from "node:path";
import { createNamespace, useTestCluster, waitFor } from "../tests/cluster/harness.ts";
import type { Api, Obj } from "../tests/kubelet/api.ts";
import { startKubelet } from "../tests/kubelet/kubelet.ts";
import { aicr } from "../tests/e2e/_aicr.ts";

const DAEMON_PODS = encodeURIComponent(
  "app.kubernetes.io/name=aicr,app.kubernetes.io/component=daemon",
);

async function readyOn(admin: Api, ns: string, node: string): Promise<boolean> {
  const res = await admin.request(
    "GET",
    `/api/v1/namespaces/${ns}/pods?labelSelector=${DAEMON_PODS}`,
  );
  return ((res.body.items ?? []) as Obj[]).some((p) =>
    p.spec.nodeName === node && !p.metadata.deletionTimestamp &&
    (p.status?.conditions ?? []).some((c: Obj) => c.type === "Ready" && c.status === "True")
  );
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? NaN;
}

async function main(args: string[]): Promise<void> {
  const rounds = Number(args.find((a) => a.startsWith("--rounds="))?.slice(9) ?? "2");
  const env = await useTestCluster();
  const { admin } = env;
  const work = await mkdtemp(join(env.cluster.stateDir, "join-bench-"));
  const seconds: Record<"signer" | "cli", number[]> = { signer: [], cli: [] };
  let offset = 60;
  try {
    for (let round = 0; round < rounds; round++) {
      for (const mode of ["signer", "cli"] as const) {
        const ns = await createNamespace(admin, `join-${mode}`);
        const port = String(9670 + offset);
        const ds = (...rest: string[]) =>
          aicr(["daemonset", ...rest, "--kubeconfig", env.cluster.adminKubeconfig, "-n", ns], {
            deadlineMs: 300_000,
          });
        const install = await ds(
          "install",
          "--image",
          "aicr:dev",
          "--port",
          port,
          "--timeout",
          "3m",
          ...(mode === "cli" ? ["--no-signer"] : []),
        );
        if (install.code !== 0) throw new Error(`install failed: ${install.stderr}`);
        const kubelet = await startKubelet(env.cluster, {
          nodes: { "p5-h100": 1 },
          offset: offset++,
          dir: join(work, `kubelet-${mode}-${round}`),
        });
        const node = kubelet.nodes[0]?.name ?? "";
        const joinedAt = performance.now();
        try {
          if (mode === "cli") {
            await waitFor(`fetch of ${node} ok`, async () => {
              const run = await ds("fetch", "--node", node, "-o", "-", "--no-topology");
              return run.code === 0 ? true : undefined;
            }, 180_000);
          }
          await waitFor(
            `the daemon on ${node} Ready`,
            async () => await readyOn(admin, ns, node) ? true : undefined,
            180_000,
          );
          seconds[mode].push((performance.now() - joinedAt) / 1000);
        } finally {
          // Uninstalled while the node's kubelet still runs: it confirms its pod gone.
          await ds("uninstall");
          await kubelet.stop();
          await admin.request("DELETE", `/api/v1/namespaces/${ns}`);
        }
        // deno-lint-ignore no-console
        console.log(`round ${round + 1} ${mode}: ${seconds[mode].at(-1)?.toFixed(1)} s`);
      }
    }
  } finally {
    await rm(work, { recursive: true, force: true });
    await env.stop();
  }
  const signer = median(seconds.signer);
  const cli = median(seconds.cli);
  // deno-lint-ignore no-console
  console.log(
    `node join -> daemon Ready, median of ${rounds}: in-cluster signer ${
      signer.toFixed(1)
    } s, CLI fetch run at the join ${cli.toFixed(1)} s (signer/CLI ${(signer / cli).toFixed(2)}x)`,
  );
}

if (import.meta.main) await main(Deno.args);
