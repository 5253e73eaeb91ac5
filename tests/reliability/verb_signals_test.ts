/**
 * Issue #28 (1): SIGINT/SIGTERM ends the cluster verbs while the API server holds their request,
 * on the real cluster: each verb has one request held 20 s by the fault proxy; the signal, sent
 * once the request is held, ends the verb with exit 130 while it is still held (the proxy sees
 * the verb let go of it, never answered), naming the signal, and nothing is written.
 *
 * - `daemonset baseline list`, `get`, `delete --all`, `set -f` and `cleanup --run-id`;
 * - `daemonset status`, `uninstall` (its discovery), `install` (its gate), `upgrade` (its read
 *   of the DaemonSet), `diff` of a `cm://` source, `snapshot` (its gate) and
 *   `snapshot --from-daemonset`: before the fix of these, each waited the hold or its request
 *   timeout out (10 to 20 s) and then failed with its own exit code (3, 6, 8) or none (0);
 * - `agent`: its collectors were cancelled and it wrote what they left, exit 0.
 *
 * (`snapshot`'s later phases: `signals_test.ts`; `daemonset fetch`:
 * `tests/e2e/daemonset_test.ts`; `upgrade` mid-rollout: `tests/e2e/upgrade_test.ts`; `-o` a FIFO:
 * `output_paths_test.ts`.)
 */
import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";
import { type FaultProxy, type ProxiedRequest, startFaultProxy } from "../faults/proxy.ts";
import { waitFor } from "../cluster/harness.ts";
import { record } from "./_report.ts";
import { ENABLED, spawnAicr, suiteEnv } from "./_env.ts";

const FIXTURE = fileURLToPath(
  new URL("../../snapshot/testdata/h100-gpu-node-1.yaml", import.meta.url),
);
/** How long the proxy holds the verb's request: a verb that ignores the signal waits it out. */
const HOLD_MS = 20_000;

/** A verb, the request held (method `GET` unless named) and the signal sent while it is. */
type VerbCase = [
  what: string,
  args: string[] | ((namespace: string) => string[]),
  path: RegExp,
  signal: Deno.Signal,
  method?: string,
];

Deno.test({
  name: "reliability: signals end the cluster verbs while the API server holds their request",
  ignore: !ENABLED,
  sanitizeOps: false,
  sanitizeResources: false,
  async fn(t) {
    const suite = await suiteEnv();
    const proxies: FaultProxy[] = [];
    try {
      const ns = await suite.namespace("rel-verb-signals");
      const baseline = (...args: string[]) => ["daemonset", "baseline", ...args];
      const cases: VerbCase[] = [
        ["baseline list", baseline("list"), /\/configmaps\?/, "SIGTERM"],
        ["baseline get", baseline("get"), /\/configmaps\?/, "SIGINT"],
        ["baseline delete --all", baseline("delete", "--all"), /\/configmaps\?/, "SIGTERM"],
        ["baseline set -f", baseline("set", "-f", FIXTURE), /\/(secrets|configmaps)\b/, "SIGINT"],
        // A sweep stops where it is; run again, it removes the rest.
        [
          "cleanup --run-id",
          ["cleanup", "--run-id", "20261205-120000-0123456789abcdef"],
          /labelSelector=/,
          "SIGTERM",
        ],
        ["daemonset status", ["daemonset", "status"], /\/daemonsets\/aicr-daemon$/, "SIGTERM"],
        // An uninstall stopped midway is finished by running it again.
        ["daemonset uninstall", ["daemonset", "uninstall"], /^\/apis$/, "SIGINT"],
        [
          "daemonset install (gate)",
          ["daemonset", "install", "--image", "aicr:dev"],
          /selfsubjectaccessreviews/,
          "SIGTERM",
          "POST",
        ],
        [
          "daemonset upgrade (read)",
          ["daemonset", "upgrade", "--image", "aicr:dev"],
          /\/daemonsets\/aicr-daemon$/,
          "SIGINT",
        ],
        [
          "diff cm://",
          (ns) => ["diff", "-b", `cm://${ns}/held`, "--target", FIXTURE],
          /\/configmaps\/held$/,
          "SIGTERM",
        ],
        [
          "snapshot (gate)",
          ["snapshot", "--timeout", "60s"],
          /selfsubjectaccessreviews/,
          "SIGINT",
          "POST",
        ],
        [
          "snapshot --from-daemonset",
          ["snapshot", "--from-daemonset"],
          /\/configmaps\/aicr-daemon-ca$/,
          "SIGTERM",
        ],
        // The node agent's collectors are cancelled: no partial snapshot on stdout, exit 130.
        ["agent (its Node list)", ["agent"], /\/api\/v1\/nodes\?/, "SIGTERM"],
      ];
      const results: { what: string; code: number; seconds: number; letGo: boolean }[] = [];
      for (const [what, verb, path, signal, method = "GET"] of cases) {
        await t.step(`${what}: ${signal} while its request is held, exit 130`, async () => {
          const proxy = await startFaultProxy(suite.env.cluster);
          proxies.push(proxy);
          let held: (request: ProxiedRequest) => void = () => {};
          const isHeld = new Promise<ProxiedRequest>((resolve) => (held = resolve));
          const args = typeof verb === "function" ? verb(ns) : verb;
          proxy.add({
            method,
            path,
            action: { kind: "delay", ms: HOLD_MS },
            times: 1,
            onMatch: (request) => held(request),
          });
          const run = spawnAicr([
            ...args,
            "--kubeconfig",
            proxy.kubeconfig,
            "-n",
            ns,
          ]);
          const request = await isHeld;
          await new Promise((r) => setTimeout(r, 300));
          const sent = Date.now();
          run.kill(signal);
          const guard = setTimeout(() => run.kill("SIGKILL"), HOLD_MS + 20_000);
          const done = await run.done;
          clearTimeout(guard);
          const seconds = (Date.now() - sent) / 1000;
          const result = { what, code: done.code, seconds, letGo: false };
          results.push(result);
          assert.equal(
            done.code,
            130,
            `${what}: exit ${done.code} after ${seconds} s\n${done.stderr}`,
          );
          assert.match(
            done.stderr,
            new RegExp(`^error: .*interrupted \\(Error: received ${signal}\\)`, "m"),
          );
          // Honoured while the request was held, not after the hold: the verb let go of it
          // (observed by the proxy, not guessed from the time it took).
          await waitFor(
            `${what} to let go of its held request`,
            () =>
              Promise.resolve(
                request.abandoned === true || request.status !== 0 ? true : undefined,
              ),
          );
          result.letGo = request.abandoned === true;
          assert.equal(request.status, 0, `${what}: its held request was answered`);
          assert.equal(request.abandoned, true, `${what}: exited ${seconds} s after ${signal}`);
          assert.deepEqual(await suite.aicrObjects(ns), [], `${what}: nothing written`);
          assert.equal(done.stdout, "", `${what}: nothing delivered`);
        });
      }
      record("signals: cluster verbs with a held request", {
        faultsInjected: cases.length,
        faultsSurvived: results.filter((r) => r.code === 130 && r.letGo).length,
        leftovers: (await suite.aicrObjects(ns)).length,
      });
    } finally {
      for (const p of proxies) await p.stop();
      await suite.close();
    }
  },
});
