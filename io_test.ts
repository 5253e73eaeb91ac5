import assert from "node:assert/strict";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  allSettledOrThrow,
  checkOutputFile,
  mapConcurrent,
  openAtomicFile,
  sleep,
  writeFileAtomic,
} from "./io.ts";
import { UsageError } from "./errors.ts";

Deno.test("sleep() waits its time, ends at once on abort, and never rejects", async () => {
  const started = performance.now();
  await sleep(30);
  assert.ok(performance.now() - started >= 25);
  const controller = new AbortController();
  const early = performance.now();
  const pending = sleep(60_000, controller.signal);
  setTimeout(() => controller.abort(new Error("stop")), 10);
  await pending;
  assert.ok(performance.now() - early < 5_000, "the abort ended the wait");
  // Already aborted: resolves without a timer (the leak sanitizer would see one).
  await sleep(60_000, controller.signal);
  // Longer than a timer can hold: cut, not fired at once (setTimeout's overflow is 1 ms).
  const long = new AbortController();
  let done = false;
  const longSleep = sleep(2 ** 40, long.signal).then(() => (done = true));
  await sleep(20);
  assert.equal(done, false);
  long.abort();
  await longSleep;
});

Deno.test("mapConcurrent() keeps input order and rethrows the first failure", async () => {
  const out = await mapConcurrent([30, 10, 20], 2, async (ms, i) => {
    await new Promise((resolve) => setTimeout(resolve, ms));
    return i;
  });
  assert.deepEqual(out, [0, 1, 2]);
  await assert.rejects(
    mapConcurrent(
      [1, 2],
      5,
      (n) => n === 2 ? Promise.reject(new Error("two")) : Promise.resolve(n),
    ),
    /two/,
  );
  assert.deepEqual(await mapConcurrent([], 3, () => Promise.resolve(1)), []);
});

Deno.test("writeFileAtomic() writes into a device or pipe instead of renaming over it", async () => {
  const dir = await mkdtemp(join(tmpdir(), "aicr-fifo-"));
  try {
    const fifo = join(dir, "pipe");
    const made = await new Deno.Command("mkfifo", { args: [fifo] }).output();
    assert.ok(made.success);
    const reader = readFile(fifo, "utf8");
    await writeFileAtomic(fifo, "kind: Snapshot\n");
    assert.equal(await reader, "kind: Snapshot\n");
    assert.ok((await Deno.lstat(fifo)).isFifo, "the pipe is still a pipe");
    await assert.rejects(writeFileAtomic(dir, "x"), /it is a directory/);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

Deno.test("allSettledOrThrow() rejects with the first failure only after every promise settled", async () => {
  const order: string[] = [];
  const slow = new Promise<number>((resolve) =>
    setTimeout(() => {
      order.push("slow settled");
      resolve(1);
    }, 20)
  );
  const error = await allSettledOrThrow([slow, Promise.reject(new Error("first"))]).then(
    () => undefined,
    (e: unknown) => {
      order.push("rejected");
      return e;
    },
  );
  assert.equal((error as Error).message, "first");
  assert.deepEqual(order, ["slow settled", "rejected"]);
  assert.deepEqual(await allSettledOrThrow([Promise.resolve(1), Promise.resolve("a")]), [1, "a"]);
});

Deno.test("checkOutputFile() refuses a folder, a path that can never exist and an unwritable device, naming the path", async () => {
  const dir = await Deno.makeTempDir();
  try {
    await Deno.writeTextFile(`${dir}/file`, "x");
    const refused = async (path: string, why: RegExp) =>
      await assert.rejects(
        checkOutputFile(path),
        (e) =>
          e instanceof UsageError && e.exitCode === 2 &&
          e.message.startsWith(`Cannot write snapshot to '${path}': `) && why.test(e.message),
      );
    await refused(dir, /it is a directory/);
    await refused(`${dir}/file/under/it.yaml`, /is not a directory, so the path can never exist/);
    await refused("/dev/null/x.yaml", /is not a directory/);
    // Fine: a new file in a folder that exists, one in folders still to create, a device.
    await checkOutputFile(`${dir}/new.yaml`);
    await checkOutputFile(`${dir}/a/b/c.yaml`);
    await checkOutputFile("/dev/null");
    // writeFileAtomic() checks first: no `mkdir -p` ever meets the file in its way.
    await assert.rejects(writeFileAtomic(`${dir}/file/x.yaml`, "y"), UsageError);
    await writeFileAtomic(`${dir}/a/b/c.yaml`, "y");
    assert.equal(await Deno.readTextFile(`${dir}/a/b/c.yaml`), "y");
    // A device that refuses the write: exit 2 naming it, not an internal error.
    await assert.rejects(
      writeFileAtomic("/dev/full", "y"),
      (e) => e instanceof UsageError && /^Cannot write snapshot to '\/dev\/full': /.test(e.message),
    );
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("writeFileAtomic() writes as openAtomicFile() does: through symlinks, with its mode, no temporary file left", async () => {
  const dir = await Deno.makeTempDir();
  try {
    for (
      const [name, write] of [
        ["whole", (path: string, text: string) => writeFileAtomic(path, text, 0o600)],
        ["pieces", async (path: string, text: string) => {
          const file = await openAtomicFile(path, 0o600);
          await file.write(text);
          await file.commit();
        }],
      ] as const
    ) {
      const real = `${dir}/${name}/real.yaml`;
      await write(real, "first\n");
      await Deno.symlink(real, `${dir}/${name}/link.yaml`);
      await write(`${dir}/${name}/link.yaml`, "second\n");
      assert.equal(await Deno.readTextFile(real), "second\n", name);
      assert.ok((await Deno.lstat(`${dir}/${name}/link.yaml`)).isSymlink, name);
      assert.equal((await Deno.stat(real)).mode! & 0o777, 0o600, name);
      assert.deepEqual(
        [...Deno.readDirSync(`${dir}/${name}`)].map((e) => e.name).sort(),
        ["link.yaml", "real.yaml"],
        name,
      );
    }
    // An unwritable folder: exit 2 naming the path, nothing left behind.
    if (Deno.uid() !== 0) {
      await Deno.mkdir(`${dir}/locked`, { mode: 0o500 });
      await assert.rejects(writeFileAtomic(`${dir}/locked/x.yaml`, "y"), UsageError);
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
