/**
 * Issue #28 (2): a forged snapshot is never delivered as the node's. A forging poller with only
 * ConfigMap rights in the namespace watches for the run's staging ConfigMap and, as soon as the
 * agent's snapshot is in it, replaces it with a document of its own (another `source-node`, no
 * measurements, the agent's version kept). The CLI's read of the staging ConfigMap is held back
 * 1.5 s by the fault proxy, the window a loaded cluster gives an attacker anyway, so the forger
 * wins the race every time. The run must refuse what it read (exit 10, naming both digests),
 * deliver nothing, and clean up; before the fix it delivered the forgery with exit 0.
 */
import assert from "node:assert/strict";
import { startFaultProxy } from "../faults/proxy.ts";
import type { FaultProxy } from "../faults/proxy.ts";
import type { Api } from "../kubelet/api.ts";
import { record } from "./_report.ts";
import { ENABLED, snapshotArgs, spawnAicr, suiteEnv } from "./_env.ts";

const FORGED_NODE = "forged-node";

Deno.test({
  name: "reliability: a snapshot forged in the staging ConfigMap is refused, not delivered",
  ignore: !ENABLED,
  sanitizeOps: false,
  sanitizeResources: false,
  async fn(t) {
    const suite = await suiteEnv();
    const { env } = suite;
    const proxies: FaultProxy[] = [];
    try {
      for (const output of ["stdout", "file"] as const) {
        await t.step(
          `the forging poller wins the race (-o ${output}): exit 10, nothing delivered, clean`,
          async () => {
            const ns = await suite.namespace(`rel-forge-${output}`);
            const p = await startFaultProxy(env.cluster);
            proxies.push(p);
            // The CLI's read of the staging ConfigMap waits 1.5 s: the forger's window.
            p.add({
              method: "GET",
              path: /\/configmaps\/aicr-agent-snapshot-/,
              action: { kind: "delay", ms: 1500 },
              times: 1,
            });
            const forger = startForger(env.admin, ns);
            const file = `/tmp/aicr-forged-${ns}.yaml`;
            const run = spawnAicr(
              snapshotArgs(
                p.kubeconfig,
                ns,
                "--timeout",
                "60s",
                ...(output === "file" ? ["-o", file] : []),
              ),
            );
            const done = await run.done;
            const forged = await forger.stop();
            const left = await suite.leftovers(ns, done.runId);
            const written = await Deno.stat(file).then(() => true, () => false);
            record(`forgery: staging ConfigMap replaced (-o ${output})`, {
              faultsInjected: 1,
              faultsSurvived: done.code === 10 && left.length === 0 && !written ? 1 : 0,
              leftovers: left.length,
            });
            assert.ok(forged > 0, `the forger replaced the agent's snapshot:\n${done.stderr}`);
            assert.equal(done.code, 10, done.stderr);
            assert.match(
              done.stderr,
              /^error: Cannot trust the snapshot in 'cm:\/\/[^']+\/aicr-agent-snapshot-[^']+': it is not what the agent wrote \(read sha256:[0-9a-f]{64}, \d+ bytes; the agent reported sha256:[0-9a-f]{64}, \d+ bytes\)$/m,
            );
            assert.doesNotMatch(
              done.stdout,
              new RegExp(FORGED_NODE),
              "the forgery was not delivered",
            );
            assert.equal(done.stdout, "", "nothing was delivered");
            assert.equal(written, false, "no file was written");
            assert.deepEqual(left, [], "the run's objects are gone");
          },
        );
      }
    } finally {
      for (const p of proxies) await p.stop();
      await suite.close();
    }
  },
});

/**
 * A forger with ConfigMap rights in the namespace: polls every 10 ms for the run's staging
 * ConfigMap and, each time it holds a snapshot that is not the forger's, writes its own in place
 * (same key and format, `source-node` changed, no measurements, the agent's version kept).
 */
function startForger(admin: Api, ns: string) {
  let running = true;
  let forged = 0;
  const loop = (async () => {
    while (running) {
      const list = await admin.request("GET", `/api/v1/namespaces/${ns}/configmaps`).catch(() =>
        undefined
      );
      for (const cm of list?.status === 200 ? list.body.items ?? [] : []) {
        const name: string = cm.metadata?.name ?? "";
        if (!name.startsWith("aicr-agent-snapshot-")) continue;
        const data: Record<string, string> = cm.data ?? {};
        const key = Object.keys(data).find((k) => k.startsWith("snapshot."));
        if (!key) continue;
        let doc: { metadata?: Record<string, unknown>; measurements?: unknown[] };
        try {
          doc = JSON.parse(data[key]!);
        } catch {
          continue;
        }
        if (doc.metadata?.["source-node"] === FORGED_NODE) continue;
        const forgery = JSON.stringify({
          ...doc,
          metadata: { ...doc.metadata, "source-node": FORGED_NODE },
          measurements: [],
        });
        const res = await admin.request(
          "PATCH",
          `/api/v1/namespaces/${ns}/configmaps/${name}`,
          { data: { [key]: forgery } },
        ).catch(() => undefined);
        if (res?.status === 200) forged++;
      }
      await new Promise((r) => setTimeout(r, 10));
    }
  })();
  return {
    async stop(): Promise<number> {
      running = false;
      await loop;
      return forged;
    },
  };
}
