import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, truncateSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { UsageError } from "../errors.ts";
import { writeFleet } from "./fleet_writer.ts";
import type { NodeResult } from "./fleet.ts";
import {
  createSnapshot,
  encodeSnapshot,
  FLEET_TOPOLOGY_FILE,
  loadFleet,
  loadSnapshot,
  MAX_DOCUMENT_BYTES,
  parseSnapshot,
  readFleet,
} from "../snapshot/mod.ts";
import type { SnapshotSourceLoader } from "../snapshot/mod.ts";
import { createFsSourceLoader } from "./sources.ts";

function node(name: string): string {
  return encodeSnapshot(
    createSnapshot([{ type: "OS", subtypes: [{ subtype: "kmod", data: { nvidia: true } }] }], {
      timestamp: new Date("2026-01-01T00:00:00Z"),
      version: "0.1.0",
      nodeName: name,
    }),
  );
}

function counting(loader: SnapshotSourceLoader): { loader: SnapshotSourceLoader; reads: string[] } {
  const reads: string[] = [];
  return {
    reads,
    loader: {
      ...loader,
      readFile(path, maxBytes) {
        reads.push(path);
        return loader.readFile(path, maxBytes);
      },
    },
  };
}

Deno.test("readFleet() reads a directory one file at a time; a file over the per-file cap fails before any is read", async () => {
  const dir = mkdtempSync(join(tmpdir(), "aicr-fleet-cap-"));
  try {
    for (const n of ["a", "b", "c"]) writeFileSync(join(dir, `${n}.yaml`), node(n));
    const { loader, reads } = counting(createFsSourceLoader());
    // Each member is handed over before the next file is read: no fleet-wide buffer.
    const events: string[] = [];
    const traced = {
      ...loader,
      readFile(path: string, maxBytes: number) {
        events.push(`read ${path.slice(dir.length + 1)}`);
        return loader.readFile(path, maxBytes);
      },
    };
    const count = await readFleet([dir], traced, { cwd: "/" }, {
      add: (m) => void events.push(`add ${m.node}`),
    });
    assert.equal(count, 3);
    assert.deepEqual(events, [
      "read a.yaml",
      "add a",
      "read b.yaml",
      "add b",
      "read c.yaml",
      "add c",
    ]);

    // The cap is per file now (the fleet as a whole is bounded by what `add` keeps).
    reads.length = 0;
    writeFileSync(join(dir, "d.yaml"), "");
    truncateSync(join(dir, "d.yaml"), MAX_DOCUMENT_BYTES + 1);
    await assert.rejects(
      loadFleet([dir], loader, { cwd: "/" }),
      (e) =>
        e instanceof UsageError &&
        e.message ===
          `Cannot read snapshot '${dir}/d.yaml': file is ${
            MAX_DOCUMENT_BYTES + 1
          } bytes, over the ${MAX_DOCUMENT_BYTES}-byte cap`,
    );
    assert.deepEqual(reads, [], "nothing was read");
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

Deno.test("readFleet() refuses a stream file over the 256 MiB stream cap before reading it", async () => {
  const dir = mkdtempSync(join(tmpdir(), "aicr-fleet-stream-cap-"));
  try {
    // A sparse file: its size is over the cap, its blocks are not there to read.
    const stream = join(dir, "fleet.yaml");
    const cap = 256 * 1024 * 1024; // MAX_FLEET_STREAM_BYTES in snapshot/sources.ts
    writeFileSync(stream, "");
    truncateSync(stream, cap + 1);
    const { loader, reads } = counting(createFsSourceLoader());
    await assert.rejects(
      readFleet([stream], loader, { cwd: "/" }, { add: () => {} }),
      (e) =>
        e instanceof UsageError &&
        e.message ===
          `Cannot read snapshot '${stream}': file is ${cap + 1} bytes, over the ${cap}-byte cap`,
    );
    assert.deepEqual(reads, [], "nothing was read");
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

Deno.test("readFleet() names a stream of one after its file, of many after their nodes", async () => {
  const dir = mkdtempSync(join(tmpdir(), "aicr-fleet-names-"));
  try {
    const anonymous = node("x").replace("source-node: x\n", 'source-node: ""\n');
    writeFileSync(join(dir, "one.yaml"), anonymous);
    writeFileSync(join(dir, "many.yaml"), [anonymous, node("b"), anonymous].join("---\n"));
    const names: string[] = [];
    await readFleet(
      [join(dir, "one.yaml"), join(dir, "many.yaml")],
      createFsSourceLoader(),
      { cwd: "/" },
      { add: (m) => void names.push(m.node) },
    );
    const many = join(dir, "many.yaml");
    assert.deepEqual(names, ["one", `${many}#1`, "b", `${many}#3`]);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

Deno.test("loadSnapshot() stops reading a device that reports size 0 at the cap", async () => {
  await assert.rejects(
    loadSnapshot("/dev/zero", createFsSourceLoader(), { cwd: "/" }),
    (e) => e instanceof UsageError && /^Cannot read snapshot '\/dev\/zero': .*cap/.test(e.message),
  );
});

Deno.test("loadFleet() names a JSON array nested too deeply", async () => {
  const text = "[" + "[".repeat(100_000) + "]".repeat(100_000) + "]";
  const loader = createFsSourceLoader({ stdin: [new TextEncoder().encode(text)] });
  await assert.rejects(
    loadFleet(["-"], loader, { cwd: "/" }),
    (e) =>
      e instanceof UsageError && /^Cannot parse snapshot '-': it nests too deeply/.test(e.message),
  );
});

Deno.test("readFleet() skips the fetch's cluster topology: the directory's _cluster-topology.yaml unread, the stream's topology document", async () => {
  const dir = mkdtempSync(join(tmpdir(), "aicr-fleet-topology-"));
  try {
    const results = ["a", "b"].map((name): NodeResult => ({
      node: name,
      pod: `p-${name}`,
      status: "ok",
      snapshot: parseSnapshot(node(name)),
      durationMs: 1,
    }));
    const topology = createSnapshot([{ type: "NodeTopology", subtypes: [] }], {
      timestamp: new Date("2026-01-01T00:00:00Z"),
      version: "0.1.0",
      nodeName: "",
    });
    topology.metadata["topology-scope"] = "cluster";
    const quiet = { write: () => {} };
    const files = await writeFleet(results, { kind: "directory", path: dir }, quiet, topology);
    assert.deepEqual(files.map((f) => f.slice(dir.length + 1)), [
      "a.yaml",
      "b.yaml",
      FLEET_TOPOLOGY_FILE,
    ]);
    const stream = join(dir, "stream", "fleet.yaml");
    mkdirSync(join(dir, "stream"));
    await writeFleet(results, { kind: "stream", path: stream }, quiet, topology);
    assert.match(readFileSync(stream, "utf8"), /topology-scope: cluster\n[^]*$/);
    const { loader, reads } = counting(createFsSourceLoader());
    const names: string[] = [];
    const count = await readFleet([dir, stream], loader, { cwd: "/" }, {
      add: (m) => void names.push(m.node),
    });
    assert.deepEqual(names, ["a", "b", "a", "b"]);
    assert.equal(count, 4);
    assert.ok(!reads.some((r) => r.endsWith(FLEET_TOPOLOGY_FILE)), "never read");
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

Deno.test("readFleet() hands a corrupt, invalid or oversized file to unreadable and reads the rest", async () => {
  const dir = mkdtempSync(join(tmpdir(), "aicr-fleet-unreadable-"));
  try {
    for (const n of ["a", "c"]) writeFileSync(join(dir, `${n}.yaml`), node(n));
    writeFileSync(join(dir, "b.yaml"), "kind: Snapshot\nmeasurements: [\n");
    writeFileSync(join(dir, "d.yaml"), "");
    truncateSync(join(dir, "d.yaml"), MAX_DOCUMENT_BYTES + 1);
    writeFileSync(join(dir, "e.yaml"), "kind: NotASnapshot\n");
    const added: string[] = [];
    const unreadable: { node: string; source: string; reason: string }[] = [];
    const count = await readFleet([dir], createFsSourceLoader(), { cwd: "/" }, {
      add: (m) => void added.push(m.node),
      unreadable: (u) => void unreadable.push(u),
    });
    assert.equal(count, 5);
    assert.deepEqual(added, ["a", "c"]);
    assert.deepEqual(unreadable.map((u) => [u.node, u.source]), [
      ["b", `${dir}/b.yaml`],
      ["d", `${dir}/d.yaml`],
      ["e", `${dir}/e.yaml`],
    ]);
    assert.match(unreadable[1]?.reason ?? "", /over the \d+-byte cap/);
    for (const u of unreadable) assert.ok(!u.reason.includes("\n"), u.reason);

    // A stream goes on after a bad document.
    const stream = join(dir, "stream.yaml");
    writeFileSync(stream, [node("x"), "kind: Snapshot\nmetadata: 3\n", node("y")].join("---\n"));
    added.length = 0;
    unreadable.length = 0;
    await readFleet([stream], createFsSourceLoader(), { cwd: "/" }, {
      add: (m) => void added.push(m.node),
      unreadable: (u) => void unreadable.push(u),
    });
    assert.deepEqual(added, ["x", "y"]);
    assert.deepEqual(unreadable.map((u) => u.node), [`${stream}#2`]);

    // Nothing readable at all: the first failure is the error, as without a sink for them.
    const bad = join(dir, "bad");
    mkdirSync(bad);
    writeFileSync(join(bad, "z.yaml"), "kind: NotASnapshot\n");
    await assert.rejects(
      readFleet([bad], createFsSourceLoader(), { cwd: "/" }, {
        add: () => {},
        unreadable: () => {},
      }),
      (e) =>
        e instanceof UsageError && e.message.startsWith(`Cannot read snapshot '${bad}/z.yaml'`),
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
