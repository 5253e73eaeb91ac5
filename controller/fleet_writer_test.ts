import assert from "node:assert/strict";
import { lstat, mkdir, mkdtemp, readdir, readFile, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createFakeKube } from "../tests/fakes/kube.ts";
import { sampleSnapshot } from "../tests/fakes/snapshot.ts";
import { UsageError } from "../errors.ts";
import { createLogger } from "../log.ts";
import { encodeSnapshot } from "../snapshot/mod.ts";
import { fetchFleet, fleetStream } from "./fleet.ts";
import type { DirectGet, NodeResult } from "./fleet.ts";
import { createFleetWriter, writeFleet } from "./fleet_writer.ts";

/** Five nodes in name order: ok, failed, ok, ok, ok. */
function results(): NodeResult[] {
  return ["n1", "n2", "n3", "n4", "n5"].map((node): NodeResult =>
    node === "n2"
      ? { node, pod: `p-${node}`, status: "unreachable", error: "refused", durationMs: 1 }
      : {
        node,
        pod: `p-${node}`,
        status: "ok",
        snapshot: sampleSnapshot({ nodeName: node }),
        durationMs: 1,
      }
  );
}

async function withTemp(fn: (dir: string) => Promise<void>): Promise<void> {
  const dir = await mkdtemp(join(tmpdir(), "aicr-writer-test-"));
  try {
    await fn(dir);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

Deno.test("fleet writer: a stream written out of order is byte for byte the stream in node order", async () => {
  const all = results();
  let out = "";
  const writer = createFleetWriter({ kind: "stream", path: undefined }, {
    write: (t) => void (out += t),
  });
  // Arrival order differs from name order; the puts overlap as the fetch's workers do.
  await Promise.all([4, 1, 3, 0, 2].map((i) => writer.put(all[i] as NodeResult, i)));
  assert.deepEqual(await writer.close(), []);
  assert.equal(out, fleetStream(all));
});

Deno.test("fleet writer: past the reorder bound, waiting documents go to a spool that is removed at the end", async () => {
  await withTemp(async (dir) => {
    const all = results();
    const path = join(dir, "fleet.yaml");
    const spoolParent = join(dir, "spool");
    await Deno.mkdir(spoolParent);
    const writer = createFleetWriter({ kind: "stream", path }, { write: () => {} }, {
      reorderBytes: 1,
      spoolParent,
    });
    // The first node comes last: everything else waits, all of it spooled (bound: 1 byte).
    for (const i of [4, 3, 2, 1]) await writer.put(all[i] as NodeResult, i);
    const [spool] = await readdir(spoolParent);
    assert.deepEqual((await readdir(join(spoolParent, spool as string))).sort(), [
      "2.yaml",
      "3.yaml",
      "4.yaml",
    ]);
    assert.deepEqual((await readdir(dir)).filter((f) => f.startsWith("fleet")), []);
    await writer.put(all[0] as NodeResult, 0);
    assert.deepEqual(await writer.close(), [path]);
    assert.equal(await readFile(path, "utf8"), fleetStream(all));
    assert.deepEqual(await readdir(spoolParent), [], "spool removed");
    assert.deepEqual((await readdir(dir)).sort(), ["fleet.yaml", "spool"], "no temporary file");
  });
});

Deno.test("fleet writer: a directory gets each ok node's file as it arrives; abort leaves no stream file", async () => {
  await withTemp(async (dir) => {
    const all = results();
    const writer = createFleetWriter({ kind: "directory", path: dir }, { write: () => {} });
    await writer.put(all[3] as NodeResult, 3);
    assert.deepEqual(await readdir(dir), ["n4.yaml"], "written before the fetch ends");
    for (const i of [0, 1, 2, 4]) await writer.put(all[i] as NodeResult, i);
    assert.deepEqual(
      await writer.close(),
      ["n1", "n3", "n4", "n5"].map((n) => join(dir, n + ".yaml")),
    );
    assert.equal(
      await readFile(join(dir, "n3.yaml"), "utf8"),
      encodeSnapshot(all[2]?.snapshot as never, "yaml"),
    );

    const path = join(dir, "stream.yaml");
    const stream = createFleetWriter({ kind: "stream", path }, { write: () => {} });
    await stream.put(all[0] as NodeResult, 0);
    await stream.abort();
    assert.ok(!(await readdir(dir)).some((f) => f.includes("stream")), "nothing published");

    const whole = join(dir, "whole.yaml");
    assert.deepEqual(await writeFleet(all, { kind: "stream", path: whole }, { write: () => {} }), [
      whole,
    ]);
    assert.equal(await readFile(whole, "utf8"), fleetStream(all));
  });
});

Deno.test("fleet writer: a directory never writes through a link planted for a node, first or later; it names it", async () => {
  await withTemp(async (dir) => {
    const all = results();
    const victim = join(dir, "victim");
    await writeFile(victim, "precious\n");
    const out = join(dir, "out");
    await mkdir(out);
    // n1 is the first file written (writeFileAtomic's checks), n4 a later one (the quick path).
    for (const first of [true, false]) {
      const planted = join(out, first ? "n1.yaml" : "n4.yaml");
      await symlink(victim, planted);
      const writer = createFleetWriter({ kind: "directory", path: out }, { write: () => {} });
      if (!first) await writer.put(all[0] as NodeResult, 0);
      await assert.rejects(
        writer.put(all[first ? 0 : 3] as NodeResult, first ? 0 : 3),
        (error: Error) => {
          assert.ok(error instanceof UsageError, String(error));
          assert.match(
            error.message,
            new RegExp(`^Cannot write snapshots to '${planted}': it is a symbolic link`),
          );
          return true;
        },
      );
      assert.equal(await readFile(victim, "utf8"), "precious\n", first ? "first" : "later");
      assert.ok((await lstat(planted)).isSymbolicLink(), "the link is left as it was");
      await rm(planted);
    }
  });
});

Deno.test("fetchFleet with onResult: every node handed over once with its position; the results keep no snapshot", async () => {
  const fake = createFakeKube();
  const ns = "aicr-system";
  fake.put("ConfigMap", {
    metadata: { name: "aicr-daemon-ca", namespace: ns },
    data: { "ca.crt": "CA PEM" },
  } as never);
  const nodes = ["c", "a", "e", "b", "d"];
  for (const [i, node] of nodes.entries()) {
    fake.put("Pod", {
      metadata: {
        name: `aicr-daemon-${node}`,
        namespace: ns,
        labels: {
          "app.kubernetes.io/name": "aicr",
          "app.kubernetes.io/component": "daemon",
          "app.kubernetes.io/instance": "aicr-daemon",
        },
      },
      spec: { nodeName: node, containers: [{ ports: [{ containerPort: 8443 }] }] },
      status: { podIP: `10.0.0.${i + 1}`, conditions: [{ type: "Ready", status: "True" }] },
    } as never);
  }
  fake.client.rest.json = <T>() => Promise.resolve({ status: { token: "t" } } as T);
  const directGet: DirectGet = (request) => {
    const node = nodes[Number(new URL(request.url).hostname.split(".")[3]) - 1] as string;
    return Promise.resolve(
      node === "d"
        ? { status: 503, body: "{}" }
        : { status: 200, body: encodeSnapshot(sampleSnapshot({ nodeName: node }), "json") },
    );
  };
  const handed: [string, number, boolean][] = [];
  const fleet = await fetchFleet({
    kube: fake.client,
    log: createLogger({ write: () => {} }),
    directGet,
  }, {
    namespace: ns,
    transport: "auto",
    concurrency: 2,
    onResult: (result, position) => {
      handed.push([result.node, position, result.snapshot !== undefined]);
      return Promise.resolve();
    },
  });
  assert.deepEqual(handed.sort((x, y) => x[1] - y[1]), [
    ["a", 0, true],
    ["b", 1, true],
    ["c", 2, true],
    ["d", 3, false],
    ["e", 4, true],
  ]);
  assert.deepEqual(fleet.results.map((r) => [r.node, r.status]), [
    ["a", "ok"],
    ["b", "ok"],
    ["c", "ok"],
    ["d", "not-ready"],
    ["e", "ok"],
  ]);
  assert.ok(fleet.results.every((r) => r.snapshot === undefined));

  // A sink that cannot write ends the fetch with its error.
  await assert.rejects(
    fetchFleet({ kube: fake.client, log: createLogger({ write: () => {} }), directGet }, {
      namespace: ns,
      transport: "direct",
      onResult: () => Promise.reject(new Error("disk full")),
    }),
    /disk full/,
  );
});

Deno.test("fleet writer: --redact names a directory's files by token and writes no node name", async () => {
  const { createRedactor } = await import("../snapshot/mod.ts");
  const redactor = createRedactor("sixteen bytes or more of key");
  await withTemp(async (dir) => {
    const all = results().map((r) => ({ ...r, node: `gpu-node-${r.node}` }));
    for (const r of all) if (r.snapshot) r.snapshot.metadata["source-node"] = r.node;
    const writer = createFleetWriter({ kind: "directory", path: dir }, { write: () => {} }, {
      redactor,
    });
    for (const [i, r] of all.entries()) await writer.put(r, i);
    await writer.putTopology(sampleSnapshot({ nodeName: "gpu-node-n1" }));
    await writer.close();
    const files = (await readdir(dir)).sort();
    assert.equal(files.length, 5, files.join(" "));
    assert.ok(files.includes(`${redactor.token("gpu-node-n1")}.yaml`), files.join(" "));
    for (const file of files) {
      const text = await readFile(join(dir, file), "utf8");
      assert.doesNotMatch(file + text, /gpu-node-n\d/, file);
    }
  });
  // A stream too.
  let out = "";
  const stream = createFleetWriter({ kind: "stream", path: undefined }, {
    write: (t) => void (out += t),
  }, { redactor });
  for (const [i, r] of results().entries()) await stream.put(r, i);
  await stream.close();
  assert.match(out, /redacted: hostnames/);
  assert.doesNotMatch(out, /source-node: n\d/);
});
