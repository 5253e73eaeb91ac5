/**
 * Shared helpers of the reliability suite: one cluster per test file, namespaces that
 * are removed afterwards, the built binary spawned with hooks (signal it when a
 * condition holds), and the leftover count the figures report.
 *
 * @module
 */
import process from "node:process";
import { createNamespace, type TestCluster, useTestCluster } from "../cluster/harness.ts";
import { AICR_BIN, aicrObjects, runObjects } from "../e2e/_aicr.ts";
import type { Obj } from "../kubelet/api.ts";

/** Whether the suite runs: a cluster is named (the full `deno task test` run sets it). */
export const ENABLED: boolean = process.env.AICR_CLUSTER_DIR !== undefined;

/** A running `aicr` process. */
export interface AicrProcess {
  /** Sends a signal. */
  kill(signal: Deno.Signal): void;
  /** Standard error so far. */
  readonly stderr: string;
  /** Resolves when stderr matches. */
  waitFor(pattern: RegExp, timeoutMs?: number): Promise<RegExpExecArray>;
  /** The result once it exits. */
  done: Promise<{ code: number; stdout: string; stderr: string; runId: string | undefined }>;
}

/**
 * What {@link spawnAicr} started and has not settled: its processes not yet exited and the
 * deadlines of its `waitFor`s. A step that fails midway leaves them; {@link SuiteEnv.close}
 * ends them, so nothing outlives the file's last test (its sanitizers are off).
 */
const unsettled = {
  processes: new Set<{ kill: () => void; done: Promise<unknown> }>(),
  timers: new Set<ReturnType<typeof setTimeout>>(),
};

/**
 * Ends what {@link spawnAicr} left: SIGKILL to each process still running, awaited, and every
 * pending `waitFor` deadline cleared.
 */
export async function endAicrProcesses(): Promise<void> {
  for (const timer of unsettled.timers) clearTimeout(timer);
  unsettled.timers.clear();
  const left = [...unsettled.processes];
  for (const p of left) p.kill();
  await Promise.all(left.map((p) => p.done.catch(() => {})));
}

/**
 * Starts the built binary; {@link endAicrProcesses} ends it if it is still running then.
 *
 * @param args arguments
 * @param options extra environment, working directory
 * @returns the process
 */
export function spawnAicr(
  args: string[],
  options: { env?: Record<string, string>; cwd?: string } = {},
): AicrProcess {
  const child = new Deno.Command(AICR_BIN, {
    args,
    env: { HOME: "/nonexistent", ...options.env },
    clearEnv: true,
    ...(options.cwd ? { cwd: options.cwd } : {}),
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  let stderr = "";
  const waiters: { pattern: RegExp; resolve: (m: RegExpExecArray) => void }[] = [];
  const check = () => {
    for (const w of [...waiters]) {
      const m = w.pattern.exec(stderr);
      if (m) {
        waiters.splice(waiters.indexOf(w), 1);
        w.resolve(m);
      }
    }
  };
  const readErr = (async () => {
    const decoder = new TextDecoder();
    for await (const chunk of child.stderr) {
      stderr += decoder.decode(chunk, { stream: true });
      check();
    }
  })();
  const readOut = new Response(child.stdout).text();
  const done = (async () => {
    const [status, stdout] = await Promise.all([child.status, readOut, readErr]).then((
      [s, o],
    ) => [s, o] as const);
    return {
      code: status.code,
      stdout,
      stderr,
      runId: /snapshot agent run: runID=(\S+)/.exec(stderr)?.[1],
    };
  })();
  let exited = false;
  /** Ended by endAicrProcesses(): its pending waitFors are left unsettled, not rejected. */
  let ended = false;
  const entry = {
    kill: () => {
      ended = true;
      try {
        if (!exited) child.kill("SIGKILL");
      } catch {
        // It exited between the check and the kill.
      }
    },
    done,
  };
  unsettled.processes.add(entry);
  void done.then(() => {
    exited = true;
    unsettled.processes.delete(entry);
  });
  return {
    kill(signal) {
      if (!exited) child.kill(signal);
    },
    get stderr() {
      return stderr;
    },
    waitFor(pattern, timeoutMs = 60_000) {
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => {
          unsettled.timers.delete(timer);
          reject(new Error(`no ${pattern} in stderr:\n${stderr}`));
        }, timeoutMs);
        unsettled.timers.add(timer);
        const settle = () => {
          clearTimeout(timer);
          unsettled.timers.delete(timer);
        };
        waiters.push({
          pattern,
          resolve: (m) => {
            settle();
            resolve(m);
          },
        });
        check();
        void done.then(() => {
          settle();
          if (!ended && waiters.some((w) => w.pattern === pattern)) {
            reject(new Error(`exited without ${pattern} in stderr:\n${stderr}`));
          }
        });
      });
    },
    done,
  };
}

/** A cluster and the namespaces a file made. */
export interface SuiteEnv {
  /** The cluster. */
  env: TestCluster;
  /** Creates a namespace removed at {@link SuiteEnv.close}. */
  namespace(prefix: string): Promise<string>;
  /** Every object of a run still in the cluster (`Kind/name`). */
  leftovers(namespace: string, runId: string | undefined): Promise<string[]>;
  /** Every object labelled `app.kubernetes.io/name=aicr` in the namespace. */
  aicrObjects(namespace: string): Promise<string[]>;
  /** Ends the processes `spawnAicr` left, deletes the namespaces and stops what was started. */
  close(): Promise<void>;
}

/**
 * Starts or reuses the cluster for one test file.
 *
 * @param options.own a cluster of the file's own, never the shared one (crash tests)
 * @returns the suite environment
 */
export async function suiteEnv(options: { own?: boolean } = {}): Promise<SuiteEnv> {
  const env = await useTestCluster(options.own ? { own: true } : {});
  const made: string[] = [];
  return {
    env,
    async namespace(prefix) {
      const ns = await createNamespace(env.admin, prefix);
      made.push(ns);
      return ns;
    },
    async leftovers(namespace, runId) {
      if (!runId) return [];
      return await runObjects(env.admin, namespace, runId);
    },
    aicrObjects(namespace) {
      return aicrObjects(env.admin, namespace, { clusterScoped: false });
    },
    async close() {
      try {
        await endAicrProcesses();
        for (const ns of made) await env.admin.request("DELETE", `/api/v1/namespaces/${ns}`);
      } finally {
        await env.stop();
      }
    },
  };
}

/**
 * Polls until `probe` returns a value.
 *
 * @param what for the error
 * @param probe the check
 * @param timeoutMs give up after
 * @returns the value
 */
export async function until<T>(
  what: string,
  probe: () => Promise<T | undefined>,
  timeoutMs = 30_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const v = await probe().catch(() => undefined);
    if (v !== undefined) return v;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`Timed out waiting for ${what}`);
}

/**
 * Reads one object as admin.
 *
 * @param env the cluster
 * @param path its path
 * @returns the object, or undefined on 404
 */
export async function getObject(env: TestCluster, path: string): Promise<Obj | undefined> {
  const res = await env.admin.request("GET", path);
  return res.status === 200 ? res.body : undefined;
}

/** Common snapshot arguments: a kubeconfig and a namespace. */
export function snapshotArgs(kubeconfig: string, namespace: string, ...rest: string[]): string[] {
  return ["snapshot", "--kubeconfig", kubeconfig, "-n", namespace, ...rest];
}

/** Arguments that keep the agent pod Pending (no node carries the label). */
export const PENDING = ["--node-selector", "aicr-test/none=true"];
