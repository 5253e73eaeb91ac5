/**
 * Finds and ends the processes a test file left running: every process of the file's process
 * group (its `deno test` runs in a group of its own), and every process that still carries the
 * file's owner mark in its environment (`AICR_TEST_OWNER`, inherited by whatever the tests start,
 * even a process that moved to a group or session of its own). Each is signalled by its PID,
 * never by name.
 *
 * @module
 */
import { readdirSync, readFileSync } from "node:fs";
import process from "node:process";

/** The environment variable that marks every process a test file starts. */
export const OWNER_ENV = "AICR_TEST_OWNER";

/** One process found in `/proc`. */
export interface ProcessInfo {
  /** Its PID. */
  pid: number;
  /** Its command line (or its name, for a process without one). */
  command: string;
}

/** The fields of `/proc/<pid>/stat` after the command name: state, ppid, pgrp, ... */
function statFields(pid: number): string[] | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  } catch {
    return undefined;
  }
}

function commandOf(pid: number): string {
  try {
    const cmdline = readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").filter((s) => s);
    if (cmdline.length > 0) return cmdline.join(" ").slice(0, 200);
    return readFileSync(`/proc/${pid}/comm`, "utf8").trim();
  } catch {
    return "?";
  }
}

function carries(pid: number, mark: string): boolean {
  try {
    return readFileSync(`/proc/${pid}/environ`, "latin1").split("\0").includes(mark);
  } catch {
    return false;
  }
}

/**
 * The live processes (zombies left out) of a process group or carrying an owner mark.
 *
 * @param owner the process group and the value of {@link OWNER_ENV}
 * @returns the processes, this process excluded
 */
export function ownedProcesses(owner: { pgid?: number; mark: string }): ProcessInfo[] {
  const mark = `${OWNER_ENV}=${owner.mark}`;
  const found: ProcessInfo[] = [];
  let entries: string[];
  try {
    entries = readdirSync("/proc");
  } catch {
    return found;
  }
  for (const entry of entries) {
    if (!/^\d+$/.test(entry)) continue;
    const pid = Number(entry);
    if (pid === process.pid) continue;
    const fields = statFields(pid);
    if (fields === undefined || fields[0] === "Z" || fields[0] === "X") continue;
    const inGroup = owner.pgid !== undefined && Number(fields[2]) === owner.pgid;
    if (inGroup || carries(pid, mark)) found.push({ pid, command: commandOf(pid) });
  }
  return found;
}

function alive(pid: number): boolean {
  const fields = statFields(pid);
  return fields !== undefined && fields[0] !== "Z" && fields[0] !== "X";
}

function signal(pid: number, name: "SIGTERM" | "SIGKILL"): void {
  try {
    process.kill(pid, name);
  } catch {
    // Already gone.
  }
}

/**
 * Ends the processes of a process group or carrying an owner mark: SIGTERM to each PID, then
 * SIGKILL to those still alive after `graceMs`.
 *
 * @param owner the process group and the owner mark
 * @param options `graceMs`: how long SIGTERM has before SIGKILL (default 5 s)
 * @returns the processes that were running, each ended
 */
export async function endOwnedProcesses(
  owner: { pgid?: number; mark: string },
  options: { graceMs?: number } = {},
): Promise<ProcessInfo[]> {
  const { graceMs = 5_000 } = options;
  const found = ownedProcesses(owner);
  if (found.length === 0) return found;
  for (const p of found) signal(p.pid, "SIGTERM");
  const until = performance.now() + graceMs;
  while (found.some((p) => alive(p.pid)) && performance.now() < until) {
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  for (const p of found) if (alive(p.pid)) signal(p.pid, "SIGKILL");
  // Whatever the ended ones started in between.
  const late = ownedProcesses(owner);
  for (const p of late) signal(p.pid, "SIGKILL");
  return [...found, ...late.filter((p) => !found.some((f) => f.pid === p.pid))];
}
