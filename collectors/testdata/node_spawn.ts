/**
 * Fixture for spawn_test.ts: bundled as the single executable's bundle is (its lazy built-ins
 * included) and run by the Node 24 of the release executable, it runs the same processes through
 * the command runner with Node's process and pipe handles and with `node:child_process`, and
 * prints, as one JSON line, what each gave and whether `node:child_process` had been loaded
 * before the second set.
 *
 * @module
 */
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import process from "node:process";
import { createCommandRunner } from "../host.ts";
import { bindingSpawner, childProcessSpawner, pipedSpawner } from "../spawn.ts";
import type { PipedSpawner } from "../spawn.ts";

const SCRIPTS: Record<string, string> = {
  "ok": `echo out; printf 'caf\\303\\251\\n' >&2; exit 3`,
  "big": `head -c 1000000 /dev/zero | tr '\\000' x`,
  "signal": `kill -TERM $$`,
  "stray": `sleep 600 &\necho $! > "$(dirname "$0")/stray.pid"\nwait`,
};

function isRunning(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

async function outcome(
  run: () => Promise<{ exitCode: number; stdout: Uint8Array; stderr: string }>,
) {
  try {
    const result = await run();
    const out = new TextDecoder().decode(result.stdout);
    return {
      exitCode: result.exitCode,
      stdout: out.length > 100 ? `${out.length} x ${[...new Set(out)].join("")}` : out,
      stderr: result.stderr,
    };
  } catch (error) {
    return { error: `${(error as Error).name}: ${(error as Error).message}` };
  }
}

async function scenarios(spawner: PipedSpawner): Promise<Record<string, unknown>> {
  const dir = mkdtempSync(join(tmpdir(), "aicr-node-spawn-"));
  try {
    for (const [name, body] of Object.entries(SCRIPTS)) {
      writeFileSync(join(dir, name), `#!/bin/sh\n${body}\n`);
      chmodSync(join(dir, name), 0o755);
    }
    writeFileSync(join(dir, "badinterp"), "#!/nonexistent/sh\n");
    chmodSync(join(dir, "badinterp"), 0o755);
    const runner = createCommandRunner({ path: dir, spawner });
    const got: Record<string, unknown> = {};
    got.ok = await outcome(() => runner.run("ok", [], { timeoutMs: 5000 }));
    got.big = await outcome(() => runner.run("big", [], { timeoutMs: 5000 }));
    got.signal = await outcome(() => runner.run("signal", [], { timeoutMs: 5000 }));
    got.tooLarge = await outcome(() =>
      runner.run("big", [], { timeoutMs: 5000, maxOutputBytes: 1000 })
    );
    got.badInterpreter = await outcome(() => runner.run("badinterp", [], { timeoutMs: 5000 }));
    const started = Date.now();
    got.timeout = await outcome(() => runner.run("stray", [], { timeoutMs: 200 }));
    got.timeoutWithinSeconds = Date.now() - started < 5000;
    const stray = Number(readFileSync(join(dir, "stray.pid"), "utf8"));
    for (let i = 0; i < 100 && isRunning(stray); i++) await new Promise((r) => setTimeout(r, 20));
    got.strayKilled = stray > 0 && !isRunning(stray);
    return got;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

async function main(): Promise<void> {
  // Node's list of the built-ins it has loaded (not in its type definitions).
  const list = () => (process as unknown as { moduleLoadList: string[] }).moduleLoadList;
  const loaded = () => list().includes("NativeModule child_process");
  const binding = bindingSpawner();
  const report: Record<string, unknown> = {
    defaultIsBinding: binding !== undefined && pipedSpawner() !== childProcessSpawner,
  };
  report.binding = binding ? await scenarios(binding) : undefined;
  report.childProcessLoadedByBinding = loaded();
  report.childProcess = await scenarios(childProcessSpawner);
  report.childProcessLoadedAfter = loaded();
  process.stdout.write(JSON.stringify(report) + "\n");
}

if (import.meta.main) {
  await main();
}
