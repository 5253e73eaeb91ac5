import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { UsageError } from "../errors.ts";
import { createSnapshot, encodeSnapshot } from "../snapshot/mod.ts";
import { createFsSourceLoader, loadFleet, loadSnapshot } from "./_sources.ts";
import type { SnapshotSourceLoader } from "./_sources.ts";

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

Deno.test("loadFleet() refuses inputs over the total cap before reading a file", async () => {
  const dir = mkdtempSync(join(tmpdir(), "aicr-fleet-cap-"));
  try {
    for (const n of ["a", "b", "c"]) writeFileSync(join(dir, `${n}.yaml`), node(n));
    const one = node("a").length;
    const { loader, reads } = counting(createFsSourceLoader());
    // Room for two files, not three.
    await assert.rejects(
      loadFleet([dir], loader, { cwd: "/", maxFleetBytes: one * 2 + 10 }),
      (e) =>
        e instanceof UsageError &&
        e.message.startsWith(
          `Cannot read fleet: the inputs hold more than ${one * 2 + 10} bytes`,
        ) &&
        e.message.includes("c.yaml"),
    );
    assert.deepEqual(reads, [], "nothing was read");
    // The cap counts across sources: the directory, then a file beside it.
    writeFileSync(join(dir, "..", "aicr-extra.yaml"), node("x"));
    await assert.rejects(
      loadFleet([dir, join(dir, "..", "aicr-extra.yaml")], loader, {
        cwd: "/",
        maxFleetBytes: one * 3 + 10,
      }),
      /aicr-extra\.yaml/,
    );
    rmSync(join(dir, "..", "aicr-extra.yaml"));
    const fleet = await loadFleet([dir], loader, { cwd: "/", maxFleetBytes: one * 3 + 10 });
    assert.deepEqual(fleet.map((m) => m.node), ["a", "b", "c"]);
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
