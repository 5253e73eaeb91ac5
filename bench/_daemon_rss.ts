/**
 * The daemon's steady memory, measured one way for every bench that reports it: a built binary
 * runs `aicr daemon` (plain HTTP, or HTTPS when given a certificate; no auth, loopback only) on a
 * fake 8x H100 node (a fake `nvidia-smi` first on PATH printing
 * `tests/fixtures/nvidia-smi-q-x.h100.xml`), is asked for 100 cached snapshots, and its resident
 * set (VmRSS) is read from /proc: issue #13's goal is at most 64 MiB. `upstream_bench.ts` and
 * `daemon_bench.ts` use it.
 *
 * Both schemes are asked by the same client, which keeps at most one idle connection: Deno's
 * fetch opens a spare connection when a response ends just after the next request started (over
 * TLS it left 3-4 connections open after the 100 requests, over plain HTTP 1), and each open TLS
 * connection holds about 70 KiB in the daemon (OpenSSL's buffers), so HTTPS and HTTP are compared
 * on one connection each.
 *
 * @module
 */
import { spawn } from "node:child_process";
import type { ChildProcess } from "node:child_process";
import { readdirSync, readFileSync, readlinkSync } from "node:fs";
import { chmod, mkdir, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const REPO_ROOT = join(dirname(fileURLToPath(import.meta.url)), "..");

/** The fake node's `nvidia-smi -q -x` answer. */
export const H100_FIXTURE = join(REPO_ROOT, "tests", "fixtures", "nvidia-smi-q-x.h100.xml");

/** The daemon's steady RSS goal, MiB. */
export const DAEMON_RSS_GOAL_MIB = 64;

/**
 * Makes a folder of fake host tools (`nvidia-smi`) and returns the PATH that puts it first.
 *
 * @param work a scratch folder
 * @returns the PATH value
 */
export async function fakeH100Path(work: string): Promise<string> {
  const fakeBin = join(work, "bin");
  await mkdir(fakeBin, { recursive: true });
  const smi = join(fakeBin, "nvidia-smi");
  await writeFile(smi, `#!/bin/sh\nexec cat '${H100_FIXTURE}'\n`);
  await chmod(smi, 0o755);
  return `${fakeBin}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin`;
}

/** Reads a process's resident set (VmRSS) and CPU time (utime + stime) from /proc. */
export function procFigures(pid: number): { rssMiB: number; cpuMs: number } {
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  const rss = Number(/VmRSS:\s+(\d+) kB/.exec(status)?.[1] ?? NaN) / 1024;
  // Fields after the command name's closing parenthesis: utime and stime are the 12th and 13th.
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  const ticks = Number(fields[11]) + Number(fields[12]);
  return { rssMiB: rss, cpuMs: ticks * 10 };
}

/** The daemon's serving certificate for an HTTPS measurement. */
export interface BenchDaemonTls {
  /** PEM certificate file (leaf and CA). */
  certFile: string;
  /** PEM key file. */
  keyFile: string;
  /** PEM CA certificate the client trusts. */
  caCert: string;
}

/** How many sockets a process holds open (its listener and its connections). */
function socketCount(pid: number): number {
  let count = 0;
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    try {
      if (readlinkSync(`/proc/${pid}/fd/${fd}`).startsWith("socket:")) count += 1;
    } catch {
      // closed meanwhile
    }
  }
  return count;
}

/** A daemon started from a built binary, cached and ready. */
export interface RunningBenchDaemon {
  /** Its process. */
  child: ChildProcess;
  /** `http://127.0.0.1:<port>` (or `https://`). */
  base: string;
  /** Its steady figures after 100 cached requests; `sockets` counts its listener too. */
  steady: { rssMiB: number; cpuMs: number; sockets: number };
  /** Stops it (SIGTERM) and waits for its exit. */
  stop(): Promise<void>;
}

/**
 * Starts `binary daemon` on the fake node, waits for /readyz, sends 100 cached requests and
 * reads its figures.
 *
 * @param binary the built `aicr`
 * @param options the scratch folder, the PATH from {@link fakeH100Path}, and for HTTPS the
 *   certificate and key files and the CA that signed them
 * @returns the running daemon (stop it)
 */
export async function startBenchDaemon(
  binary: string,
  options: { work: string; path: string; tls?: BenchDaemonTls },
): Promise<RunningBenchDaemon> {
  const port = 20000 + Math.floor(Math.random() * 20000);
  const { tls } = options;
  const scheme = tls
    ? ["--tls-cert-file", tls.certFile, "--tls-key-file", tls.keyFile]
    : ["--insecure-http"];
  const child = spawn(binary, [
    "daemon",
    ...scheme,
    "--insecure-no-auth",
    "--listen",
    "127.0.0.1",
    "--port",
    String(port),
    "--max-age",
    "1h",
    "--fresh-min-interval",
    "0",
    "--node-name",
    "bench-h100",
  ], { env: { PATH: options.path }, cwd: options.work, stdio: ["ignore", "ignore", "pipe"] });
  let stderr = "";
  child.stderr?.setEncoding("utf8").on("data", (chunk: string) => (stderr += chunk));
  const client = Deno.createHttpClient({
    ...(tls ? { caCerts: [tls.caCert] } : {}),
    poolMaxIdlePerHost: 1,
  });
  const stop = async () => {
    client.close();
    if (child.exitCode !== null) return;
    child.kill("SIGTERM");
    await new Promise((r) => child.once("exit", r));
  };
  const base = `${tls ? "https" : "http"}://127.0.0.1:${port}`;
  try {
    const deadline = Date.now() + 30_000;
    for (;;) {
      const ready = await fetch(`${base}/readyz`, { client }).then(async (r) => {
        await r.body?.cancel();
        return r.ok;
      }, () => false);
      if (ready) break;
      if (Date.now() > deadline || child.exitCode !== null) {
        throw new Error(`Cannot start the daemon for the bench:\n${stderr.slice(-2000)}`);
      }
      await new Promise((r) => setTimeout(r, 100));
    }
    for (let i = 0; i < 100; i++) {
      const res = await fetch(`${base}/v1/snapshot`, { client });
      await res.text();
      if (!res.ok) throw new Error(`daemon answered ${res.status} to a cached request`);
    }
    const steady = {
      ...procFigures(child.pid as number),
      sockets: socketCount(child.pid as number),
    };
    return { child, base, steady, stop };
  } catch (error) {
    await stop();
    throw error;
  }
}
