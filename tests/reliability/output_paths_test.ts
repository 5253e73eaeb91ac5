/**
 * Issue #28 (1): outputs that cannot be written, or that are never read, on the real cluster.
 *
 * - A path whose folder `mkdir` cannot make (procfs answers ENOENT under a folder that exists;
 *   Node's recursive `mkdir` looped forever on it) is refused with exit 2 naming the path before
 *   anything is created in the cluster: `aicr snapshot -o`, the output of `--config`,
 *   `aicr agent -o`, `aicr daemonset fetch -o dir/`, `aicr diff -o`.
 * - `-o` a FIFO that no one reads: the run's Job finishes, delivery waits for a reader without
 *   blocking the event loop, and SIGINT/SIGTERM end it within a second: exit 130, nothing left.
 *   A reader that comes late gets the snapshot whole.
 * - Issue #28 (5): links planted in `daemonset fetch -o dir/`'s folder (and
 *   `snapshot --from-daemonset -o dir/`'s) where a node's file goes, to a file aicr must not
 *   write, dangling, or to a folder: refused with exit 2 naming the link, before a node is asked;
 *   nothing is written where they point. With the links gone, the same folder gets every node.
 */
import assert from "node:assert/strict";
import { lstat, mkdir, mkdtemp, readdir, readFile, rm, symlink, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { aicr } from "../e2e/_aicr.ts";
import { record } from "./_report.ts";
import { ENABLED, snapshotArgs, spawnAicr, suiteEnv } from "./_env.ts";

const FIXTURE = fileURLToPath(
  new URL("../../snapshot/testdata/h100-gpu-node-1.yaml", import.meta.url),
);
/** A folder procfs refuses to make (ENOENT) although its parent exists. */
const HUNG = "/proc/aicr-no-such/out";

Deno.test({
  name: "reliability: output paths that cannot be made, and pipes no one reads",
  ignore: !ENABLED,
  sanitizeOps: false,
  sanitizeResources: false,
  async fn(t) {
    const suite = await suiteEnv();
    const kubeconfig = suite.env.cluster.adminKubeconfig;
    const dir = await mkdtemp("/tmp/aicr-outputs-");
    try {
      await t.step("a path mkdir cannot make: exit 2 naming it, before the cluster", async () => {
        const ns = await suite.namespace("rel-out-hung");
        const config = join(dir, "config.yaml");
        await writeFile(
          config,
          [
            "kind: AICRConfig",
            "apiVersion: aicr.run/v1alpha2",
            "spec:",
            "  snapshot:",
            "    output:",
            `      path: ${HUNG}/from-config.yaml`,
            "",
          ].join("\n"),
        );
        const cases: [string, string[], RegExp][] = [
          [
            "snapshot -o",
            snapshotArgs(kubeconfig, ns, "-o", `${HUNG}/snap.yaml`),
            /^error: Cannot write snapshot to '\/proc\/aicr-no-such\/out\/snap\.yaml': the folder '\/proc\/aicr-no-such' cannot be created \(ENOENT/m,
          ],
          [
            "snapshot --config",
            snapshotArgs(kubeconfig, ns, "--config", config),
            /^error: Cannot write snapshot to '\/proc\/aicr-no-such\/out\/from-config\.yaml': the folder '\/proc\/aicr-no-such' cannot be created/m,
          ],
          [
            "agent -o",
            ["agent", "-o", `${HUNG}/agent.yaml`],
            /^error: Cannot write snapshot to '\/proc\/aicr-no-such\/out\/agent\.yaml': the folder/m,
          ],
          [
            "daemonset fetch -o dir/",
            ["daemonset", "fetch", "--kubeconfig", kubeconfig, "-n", ns, "-o", `${HUNG}/`],
            /^error: Cannot write snapshots to '\/proc\/aicr-no-such\/out\/?': the folder '\/proc\/aicr-no-such' cannot be created/m,
          ],
          [
            "diff -o",
            ["diff", "-b", FIXTURE, "--target", FIXTURE, "-o", "/proc/aicr-diff.txt"],
            /^error: Cannot write '\/proc\/aicr-diff\.txt': a file cannot be created in '\/proc'/m,
          ],
        ];
        let refused = 0;
        for (const [what, args, message] of cases) {
          // The deadline is a hang guard: that nothing ran is read from what the run said.
          const r = await aicr(args, { deadlineMs: 30_000 });
          assert.equal(r.code, 2, `${what}: exit ${r.code}\n${r.stderr}`);
          assert.match(r.stderr, message, what);
          assert.doesNotMatch(r.stderr, /snapshot agent run: runID=/, `${what}: nothing was run`);
          refused++;
        }
        const left = await suite.aicrObjects(ns);
        record("outputs: paths mkdir cannot make", {
          faultsInjected: cases.length,
          faultsSurvived: refused,
          leftovers: left.length,
        });
        assert.deepEqual(left, [], "nothing was created in the cluster");
      });

      await t.step(
        "-o a FIFO no one reads: SIGINT and SIGTERM end the wait within a second, exit 130, nothing left",
        async () => {
          const results = await Promise.all((["SIGINT", "SIGTERM"] as const).map(async (signal) => {
            const ns = await suite.namespace(`rel-out-fifo-${signal.toLowerCase()}`);
            const fifo = join(dir, `unread-${signal}`);
            assert.ok((await new Deno.Command("mkfifo", { args: [fifo] }).output()).success);
            const run = spawnAicr(["--debug", ...snapshotArgs(kubeconfig, ns, "-o", fifo)]);
            // The Job is done and its snapshot read: delivery waits for the pipe's reader.
            await run.waitFor(/snapshot read/);
            await new Promise((r) => setTimeout(r, 500));
            const sent = Date.now();
            run.kill(signal);
            // A run that ignores the signal (blocked in a system call) is killed after 20 s.
            const guard = setTimeout(() => run.kill("SIGKILL"), 20_000);
            const done = await run.done;
            clearTimeout(guard);
            const seconds = (Date.now() - sent) / 1000;
            const left = await suite.leftovers(ns, done.runId);
            return { signal, done, seconds, left };
          }));
          record("outputs: signals while a FIFO is unread", {
            faultsInjected: results.length,
            faultsSurvived: results.filter((r) => r.done.code === 130 && r.left.length === 0)
              .length,
            leftovers: results.reduce((n, r) => n + r.left.length, 0),
          });
          for (const r of results) {
            assert.equal(
              r.done.code,
              130,
              `${r.signal}, ${r.seconds} s after it:\n${r.done.stderr}`,
            );
            assert.match(
              r.done.stderr,
              new RegExp(
                `error: Cannot write snapshot to '.*unread-${r.signal}': interrupted \\(Error: received ${r.signal}\\)`,
              ),
            );
            assert.ok(r.done.runId, r.done.stderr);
            // The signal ended the wait for a reader that never comes (a run that ignored it is
            // killed at 20 s, and SIGKILL gives no 130); cleanup ran: nothing is left.
            assert.deepEqual(r.left, [], `${r.signal}: the run's objects are gone`);
          }
        },
      );

      await t.step(
        "links planted in a fetch's output folder: exit 2 naming each, nothing written through",
        async () => {
          const ns = await suite.namespace("rel-out-links");
          const ds = (...args: string[]) =>
            aicr(["daemonset", ...args, "--kubeconfig", kubeconfig, "-n", ns], {
              deadlineMs: 240_000,
            });
          const install = await ds("install", "--image", "aicr:dev", "--all-nodes");
          assert.equal(install.code, 0, install.stderr);
          const nodes = suite.env.nodes.map((n) => n.name).sort();
          const out = join(dir, "fleet");
          await mkdir(out);
          const victim = join(dir, "victim.txt");
          await writeFile(victim, "precious\n");
          const victimDir = join(dir, "victim-dir");
          await mkdir(victimDir);
          const node = nodes[0] as string;
          const planted: [string, string][] = [
            [`${node}.yaml`, victim],
            [`${nodes[1]}.yaml`, join(dir, "nowhere.yaml")],
            ["_cluster-topology.yaml", victimDir],
          ];
          let refused = 0;
          for (const [name, to] of planted) {
            const link = join(out, name);
            await symlink(to, link);
            for (
              const args of [
                ["daemonset", "fetch", "--kubeconfig", kubeconfig, "-n", ns, "-o", `${out}/`],
                ["snapshot", "--from-daemonset", "--kubeconfig", kubeconfig, "-n", ns, "-o", out],
              ]
            ) {
              const r = await aicr(args, { deadlineMs: 60_000 });
              assert.equal(r.code, 2, `${name} ${args[0]}: exit ${r.code}\n${r.stderr}`);
              assert.match(
                r.stderr,
                new RegExp(
                  `^error: Cannot write snapshots to '${link}': it is a symbolic link to '${to}' that was there before this run`,
                  "m",
                ),
              );
              assert.doesNotMatch(r.stderr, /\bok\s+direct/, "no node was asked");
              refused++;
            }
            assert.ok((await lstat(link)).isSymbolicLink(), `${name}: the link is left as it was`);
            await rm(link);
          }
          assert.equal(await readFile(victim, "utf8"), "precious\n", "nothing written through");
          assert.deepEqual(await readdir(victimDir), [], "nothing written into the linked folder");
          await assert.rejects(lstat(join(dir, "nowhere.yaml")), "the dangling link made no file");
          // Links gone: the same folder gets every node's file and the topology.
          const fetched = await ds("fetch", "-o", `${out}/`);
          assert.equal(fetched.code, 0, fetched.stderr);
          assert.deepEqual(
            (await readdir(out)).sort(),
            ["_cluster-topology.yaml", ...nodes.map((n) => `${n}.yaml`)].sort(),
          );
          const uninstall = await ds("uninstall");
          assert.equal(uninstall.code, 0, uninstall.stderr);
          record("outputs: links planted in a fetch's output folder", {
            faultsInjected: planted.length * 2,
            faultsSurvived: refused,
            leftovers: (await suite.aicrObjects(ns)).length,
          });
        },
      );

      await t.step("-o a FIFO whose reader comes late: the whole snapshot, exit 0", async () => {
        const ns = await suite.namespace("rel-out-fifo-late");
        const fifo = join(dir, "late");
        assert.ok((await new Deno.Command("mkfifo", { args: [fifo] }).output()).success);
        const run = spawnAicr(["--debug", ...snapshotArgs(kubeconfig, ns, "-o", fifo)]);
        await run.waitFor(/snapshot read/);
        await new Promise((r) => setTimeout(r, 500));
        const text = await readFile(fifo, "utf8");
        const done = await run.done;
        assert.equal(done.code, 0, done.stderr);
        assert.match(text, /^kind: Snapshot$/m);
        assert.match(text, /source-node: /);
        assert.deepEqual(await suite.leftovers(ns, done.runId), []);
      });
    } finally {
      await rm(dir, { recursive: true, force: true });
      await suite.close();
    }
  },
});
