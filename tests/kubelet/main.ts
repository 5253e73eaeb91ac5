/**
 * Runs the kubelet stand-in against the cluster in `$AICR_CLUSTER_DIR` (default `<repo>/.cluster`)
 * until SIGINT/SIGTERM, then kills its containers and deletes its nodes.
 *
 * ```sh
 * deno task cluster:kubelet --nodes p5-h100=1,p6-gb200=1,system-m7i=1
 * ```
 *
 * Writes `<state>/kubelet.json` (`{ pid, port, nodes }`) once every node is registered.
 *
 * @module
 */

import { readFileSync } from "node:fs";
import { rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { type ClusterInfo, resolveStateDir, waitForSignal } from "../cluster/cluster.ts";
import { parseNodes } from "./profiles.ts";
import { startKubelet } from "./kubelet.ts";

if (import.meta.main) {
  const enc = new TextEncoder();
  const log = (s: string) => Deno.stderr.writeSync(enc.encode(`${s}\n`));
  const { values } = parseArgs({
    args: Deno.args,
    options: { nodes: { type: "string" }, "state-dir": { type: "string" } },
  });
  const stateDir = resolveStateDir(values["state-dir"]);
  const info = JSON.parse(readFileSync(join(stateDir, "cluster.json"), "utf8")) as ClusterInfo;
  const kubelet = await startKubelet(info, {
    ...(values.nodes ? { nodes: parseNodes(values.nodes) } : {}),
    log,
  });
  const readyFile = join(stateDir, "kubelet.json");
  await writeFile(
    readyFile,
    JSON.stringify({ pid: Deno.pid, port: kubelet.port, nodes: kubelet.nodes }, null, 2) + "\n",
  );
  await waitForSignal();
  log("kubelet: stopping");
  await kubelet.stop();
  await rm(readyFile, { force: true });
}
