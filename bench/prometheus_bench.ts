/**
 * A real Prometheus (v3, built from Go modules as the real-kubelet lane's) scraping N simulated
 * daemons (`_fleet_sim_servers.ts`: real daemon apps over real TLS, each on its own loopback
 * address with its own certificate, `/metrics` authorized as on a cluster: a default-audience
 * token reviewed and checked for `get nodes/metrics`, here through the counting fake). Prometheus
 * scrapes every daemon over HTTPS with the install's CA and a bearer token, as the documented
 * scrape config does, for `--seconds` at `--interval`, then its own HTTP API says (figures only,
 * never asserted): targets up, scrape duration per target (mean, p50, p99, max), samples per
 * scrape and in all, and Prometheus' own CPU and memory; the daemons' process CPU over the window
 * (one process holds all N) gives the scrape's cost per daemon.
 *
 * ```sh
 * deno run -A bench/prometheus_bench.ts [--nodes=1000] [--interval=15s] [--seconds=60]
 * ```
 *
 * @module
 */
import { readFileSync } from "node:fs";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { stringify } from "yaml";
import { buildTools } from "../tests/cluster/tools.ts";

const HERE = dirname(fileURLToPath(import.meta.url));
const enc = new TextEncoder();
const out = (s: string) => Deno.stdout.writeSync(enc.encode(`${s}\n`));

function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const server = createServer().listen(0, "127.0.0.1", () => {
      const port = (server.address() as { port: number }).port;
      server.close(() => resolve(port));
    });
  });
}

/** CPU seconds (user + system) of a process, from /proc. */
function cpuSeconds(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    args: Deno.args,
    options: {
      nodes: { type: "string", default: "1000" },
      interval: { type: "string", default: "15s" },
      seconds: { type: "string", default: "60" },
    },
  });
  const nodes = Number(values.nodes);
  const seconds = Number(values.seconds);
  const dir = await mkdtemp(join(tmpdir(), "aicr-prom-bench-"));
  const simPort = await freePort();
  const sim = new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", join(HERE, "_fleet_sim_servers.ts"), String(nodes)],
    env: { AICR_SIM_PORT: String(simPort), AICR_SIM_TOPOLOGY: "own" },
    stdin: "piped",
    stdout: "piped",
    stderr: "inherit",
  }).spawn();
  const reader = sim.stdout.pipeThrough(new TextDecoderStream()).getReader();
  let buffered = "";
  while (!buffered.includes("\n")) {
    const { value, done } = await reader.read();
    if (done) throw new Error("the simulated daemons exited before listening");
    buffered += value;
  }
  const ready = JSON.parse(buffered.split("\n")[0]!) as {
    ca: string;
    port: number;
    nodes: { node: string; ip: string }[];
  };
  out(`simulated daemons: ${ready.nodes.length} listening (pid ${sim.pid})`);
  await writeFile(join(dir, "ca.crt"), ready.ca);
  await writeFile(join(dir, "token"), "token-prometheus");
  const webPort = await freePort();
  await writeFile(
    join(dir, "prometheus.yml"),
    stringify({
      global: { scrape_interval: values.interval },
      scrape_configs: [
        {
          job_name: "aicr-daemon",
          scheme: "https",
          authorization: { credentials_file: join(dir, "token") },
          tls_config: { ca_file: join(dir, "ca.crt") },
          static_configs: [{
            targets: ready.nodes.map((n) => `${n.ip}:${ready.port}`),
          }],
        },
        { job_name: "prometheus", static_configs: [{ targets: [`127.0.0.1:${webPort}`] }] },
      ],
    }),
  );
  const prometheus = new Deno.Command((await buildTools()).prometheus, {
    args: [
      `--config.file=${join(dir, "prometheus.yml")}`,
      `--storage.tsdb.path=${join(dir, "data")}`,
      `--web.listen-address=127.0.0.1:${webPort}`,
    ],
    stdout: "null",
    stderr: "piped",
  }).spawn();
  const log = await Deno.open(join(dir, "prometheus.log"), { write: true, create: true });
  void prometheus.stderr.pipeTo(log.writable).catch(() => {});
  const exited = prometheus.status.then((s) => s);
  const query = async (q: string): Promise<number> => {
    const res = await fetch(
      `http://127.0.0.1:${webPort}/api/v1/query?query=${encodeURIComponent(q)}`,
    );
    const body = await res.json() as { data?: { result?: { value: [number, string] }[] } };
    return Number(body.data?.result?.[0]?.value[1] ?? NaN);
  };
  try {
    const simCpu0 = cpuSeconds(sim.pid);
    const promCpu0 = cpuSeconds(prometheus.pid);
    const early = await Promise.race([
      exited,
      new Promise((r) => setTimeout(() => r(undefined), seconds * 1000)),
    ]);
    if (early) {
      throw new Error(
        `prometheus exited: ${readFileSync(join(dir, "prometheus.log"), "utf8").slice(-2000)}`,
      );
    }
    const simCpu = cpuSeconds(sim.pid) - simCpu0;
    const promCpu = cpuSeconds(prometheus.pid) - promCpu0;
    const job = 'job="aicr-daemon"';
    const scrapes = await query(`sum(count_over_time(up{${job}}[${seconds}s]))`);
    const figures = {
      nodes,
      interval: values.interval,
      seconds,
      targets_up: await query(`count(up{${job}} == 1)`),
      scrapes,
      scrape_duration_ms: {
        mean: 1000 * await query(`avg(scrape_duration_seconds{${job}})`),
        p50: 1000 * await query(`quantile(0.5, scrape_duration_seconds{${job}})`),
        p99: 1000 * await query(`quantile(0.99, scrape_duration_seconds{${job}})`),
        max: 1000 * await query(`max(scrape_duration_seconds{${job}})`),
      },
      samples_per_scrape: await query(`avg(scrape_samples_scraped{${job}})`),
      samples_per_round: await query(`sum(scrape_samples_scraped{${job}})`),
      series_in_head: await query('prometheus_tsdb_head_series{job="prometheus"}'),
      prometheus_rss_mib: (await query('process_resident_memory_bytes{job="prometheus"}')) /
        1048576,
      prometheus_cpu_s: promCpu,
      daemons_cpu_s: simCpu,
      daemon_cpu_ms_per_scrape: scrapes > 0 ? (1000 * simCpu) / scrapes : NaN,
    };
    const round = (v: unknown): unknown =>
      typeof v === "number"
        ? Math.round(v * 100) / 100
        : v && typeof v === "object"
        ? Object.fromEntries(Object.entries(v).map(([k, x]) => [k, round(x)]))
        : v;
    out(JSON.stringify(round(figures)));
  } finally {
    try {
      prometheus.kill("SIGTERM");
    } catch { /* exited */ }
    await prometheus.status;
    const writer = sim.stdin.getWriter();
    await writer.write(enc.encode("quit\n"));
    await writer.close();
    await sim.status;
    await rm(dir, { recursive: true, force: true });
  }
}

if (import.meta.main) await main();
