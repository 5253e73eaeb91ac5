/**
 * What each second implementation kept for speed buys, measured beside the path it stands in for,
 * in one run (figures only; tests hold each pair to the same output):
 *
 * - the YAML writer (`snapshot/yaml_writer.ts`) beside the `yaml` library, encoding a 270 KiB
 *   snapshot;
 * - the YAML reader (`snapshot/yaml_reader.ts`) beside the library, parsing it (a comment line
 *   first sends the same text to the library, as any document beyond the writer's layout goes);
 * - the fleet fast path (`FleetBuilder.addYaml`) beside parsing each file and `add()`, over a
 *   fleet of 45 KiB files;
 * - the narrow kubeconfig loader (`kube/connection.ts`) beside `@kubernetes/client-node`, each
 *   loading a token kubeconfig in a fresh process (the library's evaluation included).
 *
 * Rounds alternate the two paths of each pair; medians are reported.
 *
 * ```sh
 * deno task bench:paths                       # 7 rounds, a fleet of 300 files
 * deno task bench:paths --rounds=3 --nodes=100
 * ```
 *
 * @module
 */
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import {
  createFleetBuilder,
  encodeSnapshot,
  encodeYamlWithLibrary,
  parseSnapshot,
  plainSnapshotDocument,
} from "../snapshot/mod.ts";
import { makeLargeSnapshot, makeNodeSnapshot, padSnapshot } from "../snapshot/testdata/generate.ts";

const { values } = parseArgs({
  args: Deno.args,
  options: {
    rounds: { type: "string", default: "7" },
    nodes: { type: "string", default: "300" },
  },
});
const ROUNDS = Number(values.rounds);
const NODES = Number(values.nodes);

function say(line: string): void {
  Deno.stdout.writeSync(new TextEncoder().encode(`${line}\n`));
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)] ?? NaN;
}

function time(fn: () => unknown): number {
  const t0 = performance.now();
  fn();
  return performance.now() - t0;
}

/** Runs both paths of a pair in alternating rounds and prints their medians and ratio. */
async function pair(
  what: string,
  paths: { fast: () => unknown | Promise<unknown>; other: () => unknown | Promise<unknown> },
  names: [string, string],
): Promise<void> {
  const fast: number[] = [];
  const other: number[] = [];
  for (let round = 0; round < ROUNDS; round++) {
    let t0 = performance.now();
    await paths.fast();
    fast.push(performance.now() - t0);
    t0 = performance.now();
    await paths.other();
    other.push(performance.now() - t0);
  }
  const a = median(fast);
  const b = median(other);
  say(
    `${what}: ${names[0]} ${a.toFixed(1)} ms, ${names[1]} ${b.toFixed(1)} ms (${
      (b / a).toFixed(1)
    }x)`,
  );
}

say(`# second paths: ${ROUNDS} rounds, medians`);

const large = makeLargeSnapshot("bench-node", 270 * 1024);
const text = encodeSnapshot(large);
say(`snapshot: ${(text.length / 1024).toFixed(0)} KiB of YAML`);
// Warm both paths once: the figures are steady-state costs.
time(() => encodeYamlWithLibrary(plainSnapshotDocument(large)));
time(() => parseSnapshot(`# library\n${text}`));
await pair("encode a snapshot", {
  fast: () => encodeSnapshot(large),
  other: () => encodeYamlWithLibrary(plainSnapshotDocument(large)),
}, ["writer", "library"]);
await pair("parse a snapshot", {
  fast: () => parseSnapshot(text),
  other: () => parseSnapshot(`# library\n${text}`),
}, ["reader", "library"]);

const fleetTexts = Array.from(
  { length: NODES },
  (_, i) => encodeSnapshot(padSnapshot(makeNodeSnapshot(`node-${i}`), 800)),
);
const fileKiB = Math.round((fleetTexts[0]?.length ?? 0) / 1024);
say(`fleet: ${NODES} files of ${fileKiB} KiB (one process)`);
await pair("compare a fleet", {
  fast: () => {
    const builder = createFleetBuilder();
    for (const t of fleetTexts) builder.addYaml(t, (n) => n);
    return builder.finish();
  },
  other: () => {
    const builder = createFleetBuilder();
    for (const [i, t] of fleetTexts.entries()) {
      builder.add({ node: `node-${i}`, snapshot: parseSnapshot(`# library\n${t}`) });
    }
    return builder.finish();
  },
}, ["addYaml", "library + add"]);

const dir = await mkdtemp(join(tmpdir(), "aicr-paths-"));
try {
  const config = join(dir, "config");
  await writeFile(
    config,
    JSON.stringify({
      apiVersion: "v1",
      kind: "Config",
      clusters: [{ name: "c", cluster: { server: "https://10.0.0.1:6443" } }],
      users: [{ name: "u", user: { token: "t0ken" } }],
      contexts: [{ name: "x", context: { cluster: "c", user: "u" } }],
      "current-context": "x",
    }),
  );
  const child = new URL("./_kubeconfig_child.ts", import.meta.url).pathname;
  const load = async (path: string) => {
    const out = await new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", child, path, config],
      stdout: "piped",
    }).output();
    return Number(new TextDecoder().decode(out.stdout));
  };
  const native: number[] = [];
  const clientNode: number[] = [];
  for (let round = 0; round < ROUNDS; round++) {
    native.push(await load("native"));
    clientNode.push(await load("client-node"));
  }
  const a = median(native);
  const b = median(clientNode);
  say(
    `load a kubeconfig (fresh process): narrow loader ${a.toFixed(1)} ms, client-node ${
      b.toFixed(1)
    } ms (+${(b - a).toFixed(0)} ms)`,
  );
} finally {
  await rm(dir, { recursive: true, force: true });
}
