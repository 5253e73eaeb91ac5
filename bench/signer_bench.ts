/**
 * Bench of the in-cluster signer's work (issue #25): one signing pass of the leader
 * (`signPendingCsrs`, what `aicr daemonset signer` runs on every watch event) over N pending
 * requests of N live daemon pods on N nodes, each a real P-256 request with its pod-bound
 * token's extra fields, checked (pod, node, pod IP, key, usages) and signed by the install's
 * CA. The API is an in-memory fake answering at once, so what is measured is the signer's own
 * CPU and memory, not the API server's latency (on a cluster each request adds two writes).
 * Each size runs in a child process of its own (its peak RSS is the pass's alone); sizes side by
 * side in one run, so the ratio shows how it scales.
 *
 * Run: `deno run -A bench/signer_bench.ts` (`--sizes=100,1000`, `--json` for one JSON line).
 */
import { Buffer } from "node:buffer";
import { readFileSync } from "node:fs";
import process from "node:process";
import { fileURLToPath } from "node:url";
import { EXTRA_NODE_NAME, EXTRA_NODE_UID, EXTRA_POD_NAME, EXTRA_POD_UID } from "../csr/decide.ts";
import type { CsrObject } from "../csr/decide.ts";
import { signPendingCsrs } from "../csr/mod.ts";
import type { RestRequest } from "../kube/mod.ts";
import { createLogger } from "../log.ts";
import { DAEMON_CSR_SIGNER } from "../manifests/mod.ts";
import { createFakeKube } from "../tests/fakes/kube.ts";
import { daemonPod } from "../tests/fakes/daemon_pod.ts";
import { buildCsr, generateDaemonCa, generateServingKey } from "../x509.ts";

const MIB = 1024 * 1024;

interface PassResult {
  requests: number;
  signed: number;
  wallMs: number;
  cpuMs: number;
  rssBeforeMiB: number;
  peakRssMiB: number;
}

function vmHwmMiB(): number {
  const line = readFileSync("/proc/self/status", "utf8").split("\n").find((l) =>
    l.startsWith("VmHWM:")
  );
  return Number(line?.split(/\s+/)[1] ?? 0) / 1024;
}

/** One pass over `n` requests, in this process. */
async function child(n: number): Promise<PassResult> {
  const now = new Date();
  const ca = generateDaemonCa({ now });
  const fake = createFakeKube();
  const ds = fake.put("DaemonSet", { metadata: { name: "aicr-daemon", namespace: "aicr-system" } });
  const csrs = new Map<string, CsrObject>();
  for (let i = 0; i < n; i++) {
    const node = `gpu-${i}`;
    const ip = `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`;
    const nodeObject = fake.put("Node", { metadata: { name: node } });
    const pod = fake.put(
      "Pod",
      daemonPod({ dsUid: ds.metadata?.uid ?? "", index: i, node, ip: ip }) as never,
    );
    const name = `aicr-daemon.${node}`;
    csrs.set(name, {
      metadata: { name },
      spec: {
        signerName: DAEMON_CSR_SIGNER,
        username: "system:serviceaccount:aicr-system:aicr-daemon",
        usages: ["digital signature", "key encipherment", "server auth"],
        request: Buffer.from(
          buildCsr({
            commonName: node,
            dnsNames: [node],
            ipAddresses: [ip],
            ...generateServingKey(),
          }),
        ).toString("base64"),
        extra: {
          [EXTRA_POD_NAME]: [pod.metadata?.name ?? ""],
          [EXTRA_POD_UID]: [pod.metadata?.uid ?? ""],
          [EXTRA_NODE_NAME]: [node],
          [EXTRA_NODE_UID]: [nodeObject.metadata?.uid ?? ""],
        },
      },
      status: {},
    });
  }
  fake.client.rest.json = <T>(request: RestRequest): Promise<T> => {
    if (request.method === "GET") return Promise.resolve({ items: [...csrs.values()] } as T);
    const [, name] = /certificatesigningrequests\/([^/]+)\/(\w+)$/.exec(request.path) ?? [];
    csrs.set(name ?? "", request.body as CsrObject);
    return Promise.resolve(request.body as T);
  };
  const deps = { kube: fake.client, log: createLogger({ write: () => {} }), now: () => now };
  (globalThis as { gc?: () => void }).gc?.();
  const rssBefore = process.memoryUsage().rss / MIB;
  const cpu = process.cpuUsage();
  const started = performance.now();
  const outcome = await signPendingCsrs(deps, { namespace: "aicr-system", ca });
  const wallMs = performance.now() - started;
  const used = process.cpuUsage(cpu);
  return {
    requests: n,
    signed: outcome.signed.length,
    wallMs: Math.round(wallMs),
    cpuMs: Math.round((used.user + used.system) / 1000),
    rssBeforeMiB: Math.round(rssBefore * 10) / 10,
    peakRssMiB: Math.round(vmHwmMiB() * 10) / 10,
  };
}

async function main(args: string[]): Promise<void> {
  const childArg = args.find((a) => a.startsWith("--child="));
  if (childArg) {
    // deno-lint-ignore no-console
    console.log(JSON.stringify(await child(Number(childArg.slice("--child=".length)))));
    return;
  }
  const sizes = (args.find((a) => a.startsWith("--sizes="))?.slice(8) ?? "100,1000")
    .split(",").map(Number);
  const results: PassResult[] = [];
  for (const n of sizes) {
    const out = await new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", fileURLToPath(import.meta.url), `--child=${n}`],
      stdout: "piped",
      stderr: "inherit",
    }).output();
    if (!out.success) throw new Error(`the child for ${n} requests failed`);
    results.push(JSON.parse(new TextDecoder().decode(out.stdout)));
  }
  if (args.includes("--json")) {
    // deno-lint-ignore no-console
    console.log(JSON.stringify(results));
    return;
  }
  for (const r of results) {
    // deno-lint-ignore no-console
    console.log(
      `signer pass, ${r.requests} pending requests: ${r.signed} signed, ${r.cpuMs} ms CPU, ${r.wallMs} ms wall, RSS ${r.rssBeforeMiB} MiB before, ${r.peakRssMiB} MiB peak`,
    );
  }
  const [first, last] = [results[0], results[results.length - 1]];
  if (first && last && first !== last) {
    // deno-lint-ignore no-console
    console.log(
      `ratio ${last.requests}/${first.requests}: CPU ${
        (last.cpuMs / first.cpuMs).toFixed(1)
      }x, peak RSS ${(last.peakRssMiB / first.peakRssMiB).toFixed(2)}x`,
    );
  }
}

if (import.meta.main) await main(Deno.args);
