/**
 * Real restarts of the control plane mid-run: the real kube-apiserver, then (separately) etcd,
 * killed with SIGKILL while `aicr snapshot` waits for its agent Job and while it cleans up, and
 * started again a few seconds later with the same flags on the same data and ports
 * (`tests/cluster/cluster.ts`: `crashComponent`, `startComponentAgain`). Each run must either
 * finish (exit 0, snapshot delivered) or fail with exit 6, and in both cases leave nothing of
 * its own once the API answers again. The file crashes a cluster of its own, never the shared
 * one the other files use.
 */
import assert from "node:assert/strict";
import { parseSnapshot } from "../../snapshot/mod.ts";
import {
  crashComponent,
  type RestartableComponent,
  startComponentAgain,
} from "../cluster/cluster.ts";
import { record } from "./_report.ts";
import { ENABLED, getObject, snapshotArgs, spawnAicr, suiteEnv, until } from "./_env.ts";
import type { SuiteEnv } from "./_env.ts";

/** How long a crashed component stays down before it is started again. */
const DOWN_MS = 3000;
/** A hang guard for one run (not a speed claim). */
const RUN_DEADLINE_MS = 180_000;

/** The run's phases, as its `--debug` log names them. */
const PHASES = {
  "the Job runs": /agent Job created/,
  "cleanup runs": /snapshot read/,
} as const;

Deno.test({
  name: "reliability: real restarts (kill -9) of the kube-apiserver and etcd mid-run",
  ignore: !ENABLED,
  // One cluster of the file's own serves every step (its processes outlive the steps).
  sanitizeOps: false,
  sanitizeResources: false,
  async fn(t) {
    const suite: SuiteEnv = await suiteEnv({ own: true });
    const { env } = suite;
    const crashDuring = async (component: RestartableComponent, phase: keyof typeof PHASES) => {
      const ns = await suite.namespace(`rel-kill-${component.replace("kube-", "")}`);
      const run = spawnAicr([
        ...snapshotArgs(env.cluster.adminKubeconfig, ns, "--timeout", "90s"),
        "--debug",
      ]);
      let timer: ReturnType<typeof setTimeout> | undefined;
      const guard = new Promise<never>((_, reject) => {
        timer = setTimeout(() => {
          run.kill("SIGKILL");
          reject(new Error(`the run outlived ${RUN_DEADLINE_MS} ms:\n${run.stderr}`));
        }, RUN_DEADLINE_MS);
      });
      try {
        await run.waitFor(PHASES[phase], 90_000);
        await crashComponent(env.cluster, component);
        // Down on purpose for a while (the outage), then up on the same data and ports.
        await new Promise((r) => setTimeout(r, DOWN_MS));
        await startComponentAgain(env.cluster, component);
        const result = await Promise.race([run.done, guard]);
        // What aicr deletes must be gone at exit. Its agent's pods it deleted may still wait for
        // Kubernetes' own Job controller to drop their finalizer (its informers re-list after the
        // restart): terminating is fine, and they must then go within a deadline.
        const atExit = await suite.leftovers(ns, result.runId);
        const undeleted: string[] = [];
        for (const o of atExit) {
          const pod = o.startsWith("Pod/")
            ? await getObject(env, `/api/v1/namespaces/${ns}/pods/${o.slice(4)}`)
            : undefined;
          if (!pod?.metadata.deletionTimestamp) undeleted.push(o);
        }
        const left = undeleted.length > 0 ? atExit : await until(
          "the deleted agent pods to go",
          async () => {
            const now = await suite.leftovers(ns, result.runId);
            return now.length === 0 ? now : undefined;
          },
          120_000,
        ).catch(() => atExit);
        const labelled = await suite.aicrObjects(ns);
        const ok = (result.code === 0 || result.code === 6) && left.length === 0 &&
          labelled.length === 0;
        record(`restarts: ${component} killed while ${phase}`, {
          faultsInjected: 1,
          faultsSurvived: ok ? 1 : 0,
          realRestarts: 1,
          leftovers: left.length + labelled.length,
        });
        assert.ok(result.runId, result.stderr);
        assert.ok([0, 6].includes(result.code), `exit ${result.code}:\n${result.stderr}`);
        if (result.code === 0) assert.equal(parseSnapshot(result.stdout).kind, "Snapshot");
        else assert.match(result.stderr, /error: Cannot reach Kubernetes API server/);
        assert.deepEqual(undeleted, [], `not deleted by the run:\n${result.stderr}`);
        assert.deepEqual(left, [], result.stderr);
        assert.deepEqual(labelled, [], result.stderr);
        return result;
      } finally {
        clearTimeout(timer);
        run.kill("SIGKILL");
      }
    };
    try {
      for (const component of ["kube-apiserver", "etcd"] as const) {
        for (const phase of Object.keys(PHASES) as (keyof typeof PHASES)[]) {
          await t.step(`${component} killed while ${phase}, back after ${DOWN_MS} ms`, async () => {
            await crashDuring(component, phase);
          });
        }
      }
    } finally {
      await suite.close();
    }
  },
});
