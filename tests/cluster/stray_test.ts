/**
 * `strayProcesses`: a component whose watchdog shell was killed keeps running under a pid nobody
 * recorded; `cluster:down` finds it by its command line (program + state folder) and stops it,
 * and never a process of another state folder.
 *
 * @module
 */
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type ClusterProcess, isOurs, stopProcesses, strayProcesses } from "./cluster.ts";

function spawnSh(arg: string): Deno.ChildProcess {
  // "; :" keeps the shell from exec-ing sleep, so its command line keeps the folder argument.
  // setsid (which execs the shell) makes it a group of its own, ended whole at the end, its
  // sleep included.
  return new Deno.Command("setsid", {
    args: ["/bin/sh", "-c", "sleep 600; :", arg],
    stdin: "null",
    stdout: "null",
    stderr: "null",
  }).spawn();
}

/** A process's argv[0], or undefined once it is gone. */
function argv0(pid: number | string): string | undefined {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0")[0];
  } catch {
    return undefined;
  }
}

/**
 * Waits until `setsid` has exec'd the shell, and the shell's child has exec'd `sleep`. Until then
 * the pid's command line is setsid's, which no recorded program matches, and the shell's forked
 * child has the shell's command line, folder included, under another pid: a second match (loaded
 * machines showed both windows).
 */
async function execd(child: Deno.ChildProcess): Promise<void> {
  for (let i = 0; i < 200; i++) {
    const children = argv0(child.pid) === "/bin/sh"
      ? readFileSync(`/proc/${child.pid}/task/${child.pid}/children`, "utf8").trim().split(" ")
      : [];
    if (children.length === 1 && argv0(children[0]!) === "sleep") return;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  throw new Error(`pid ${child.pid} did not exec /bin/sh and its sleep within 2 s`);
}

Deno.test("strayProcesses finds an unrecorded component of this state folder only, and stopProcesses stops it", async () => {
  const stateDir = mkdtempSync(join(tmpdir(), "aicr-stray-"));
  const stray = spawnSh(join(stateDir, "etcd"));
  const other = spawnSh(`${stateDir}-other/etcd`);
  const recordedChild = spawnSh(join(stateDir, "apiserver"));
  try {
    for (const child of [stray, other, recordedChild]) await execd(child);
    const recorded: ClusterProcess[] = [
      { name: "kube-apiserver", pid: recordedChild.pid, log: "", match: "/bin/sh" },
    ];
    const strays = strayProcesses(stateDir, recorded);
    assert.deepEqual(
      strays.map((s) => s.pid),
      [stray.pid],
      "only the unrecorded one of this folder",
    );
    assert.equal(strays[0]?.name, "kube-apiserver (stray)");
    assert.deepEqual(strayProcesses(stateDir, []), [], "only recorded programs are strays");
    await stopProcesses(strays, 2000);
    await stray.status;
    assert.equal(isOurs(stray.pid, "/bin/sh"), false);
    assert.equal(isOurs(other.pid, "/bin/sh"), true, "another folder's process is left alone");
  } finally {
    for (const child of [stray, other, recordedChild]) {
      try {
        Deno.kill(-child.pid, "SIGKILL");
      } catch { /* already gone */ }
      await child.status;
    }
    rmSync(stateDir, { recursive: true, force: true });
  }
});
