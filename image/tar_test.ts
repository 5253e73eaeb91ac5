import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { concat, readTar, type TarEntry, tarHeader, tarStream } from "./tar.ts";

async function collect(stream: AsyncIterable<Uint8Array>): Promise<Uint8Array> {
  const parts: Uint8Array[] = [];
  for await (const part of stream) parts.push(part);
  return concat(parts);
}

const LONG = `usr/share/doc/${"a".repeat(120)}/${"b".repeat(120)}/copyright-of-a-very-long-name`;

function entries() {
  const data = new TextEncoder().encode("hello\n");
  return [
    { entry: { path: "etc", type: "dir", mode: 0o755 } as TarEntry },
    {
      entry: { path: "etc/hello", type: "file", mode: 0o644, size: data.length } as TarEntry,
      data,
    },
    {
      entry: {
        path: "lib64/ld.so",
        type: "symlink",
        mode: 0o777,
        linkname: "/lib/ld.so",
      } as TarEntry,
    },
    {
      entry: { path: LONG, type: "file", mode: 0o600, size: 3, uid: 65534, gid: 65534 } as TarEntry,
      data: new Uint8Array([1, 2, 3]),
    },
  ];
}

Deno.test("tarStream() writes what readTar() reads back, a long path through a PAX record", async () => {
  const bytes = await collect(tarStream(entries()));
  assert.equal(bytes.length % 512, 0);
  const back = readTar(bytes);
  assert.deepEqual(back.map((m) => [m.entry.path, m.entry.type, m.entry.mode]), [
    ["etc/", "dir", 0o755],
    ["etc/hello", "file", 0o644],
    ["lib64/ld.so", "symlink", 0o777],
    [LONG, "file", 0o600],
  ]);
  assert.equal(new TextDecoder().decode(back[1]!.data), "hello\n");
  assert.equal(back[2]!.entry.linkname, "/lib/ld.so");
  assert.deepEqual([...back[3]!.data], [1, 2, 3]);
  assert.equal(back[3]!.entry.uid, 65534);
});

Deno.test("tarStream() gives the same bytes for the same entries, and GNU tar lists them", async () => {
  const a = await collect(tarStream(entries()));
  const b = await collect(tarStream(entries()));
  assert.deepEqual(a, b);
  const dir = mkdtempSync(join(tmpdir(), "aicr-tar-"));
  try {
    writeFileSync(join(dir, "t.tar"), a);
    const listed = spawnSync("tar", ["-tvf", join(dir, "t.tar")], { encoding: "utf8" });
    assert.equal(listed.status, 0, listed.stderr);
    assert.match(listed.stdout, /-rw-r--r-- 0\/0\s+6 1970-01-01 00:00 etc\/hello/);
    assert.match(listed.stdout, /lib64\/ld.so -> \/lib\/ld.so/);
    assert.ok(listed.stdout.includes(LONG), "GNU tar reads the PAX path");
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

Deno.test("tarStream() refuses a file whose data is not the size its entry says", async () => {
  const bad = [{
    entry: { path: "x", type: "file", mode: 0o644, size: 10 } as TarEntry,
    data: new Uint8Array(3),
  }];
  await assert.rejects(collect(tarStream(bad)), /has 3 bytes where its entry says 10/);
});

Deno.test("readTar() refuses a header with a wrong checksum", () => {
  const header = tarHeader({ path: "x", type: "dir", mode: 0o755 });
  header[0] = 0x79;
  assert.throws(() => readTar(concat([header, new Uint8Array(1024)])), /wrong checksum/);
});
