/**
 * The shipped alert rules on a real Prometheus (built from Go modules with its Kubernetes service
 * discovery, `tests/cluster/build-tools.sh`: Debian's package has none) against real daemons under
 * real kubelets: Prometheus runs inside the lane's network namespace (where the pod IPs are),
 * discovers the daemons through the API server (`kubernetes_sd_configs`, role endpoints, kept by
 * the Service's `prometheus.io/*` annotations) with its own ServiceAccount's token, scrapes them
 * with that token (the daemons' TokenReview and `get nodes/metrics` SubjectAccessReview) and the
 * install's CA, and evaluates `charts/aicr/files/aicr-rules.yaml`'s rules (the same expressions,
 * every `for` shortened to 10 s). A baseline planted with another driver on the GPU node's cohort
 * makes `AicrNodeDrift` fire for that node, read through Prometheus' HTTP API, while the other
 * node, with its own node's baseline, stays clean.
 *
 * @module
 */
import assert from "node:assert/strict";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { stringify } from "yaml";
import { daemonAlertRules } from "../../manifests/monitoring.ts";
import { encodeSnapshot, parseSnapshot } from "../../snapshot/mod.ts";
import { setReading } from "../../snapshot/testdata/generate.ts";
import { REPO_ROOT } from "../cluster/cluster.ts";
import { createNamespace, waitFor } from "../cluster/harness.ts";
import { buildTools } from "../cluster/tools.ts";
import { gated } from "../_gated.ts";
import { laneUnavailable, PULL_SECRET, type RealNodeEnv, useRealNodeLane } from "./harness.ts";

const NAME = "real-kubelet lane: a real Prometheus scrapes the daemons and the drift alert fires";

/** Prometheus' ServiceAccount and the RBAC a stock Prometheus has: discovery and nodes/metrics. */
async function prometheusAccount(env: RealNodeEnv, ns: string): Promise<string> {
  const { admin } = env;
  const ok = async (path: string, body: unknown) => {
    const res = await admin.request("POST", path, body);
    assert.ok(res.status === 201 || res.status === 200, `${path}: ${JSON.stringify(res.body)}`);
    return res.body;
  };
  const rbac = "/apis/rbac.authorization.k8s.io/v1";
  await ok(`/api/v1/namespaces/${ns}/serviceaccounts`, { metadata: { name: "prometheus" } });
  await ok(`${rbac}/clusterroles`, {
    metadata: { name: `prometheus-${ns}` },
    rules: [
      {
        apiGroups: [""],
        resources: ["services", "endpoints", "pods"],
        verbs: ["get", "list", "watch"],
      },
      {
        apiGroups: ["discovery.k8s.io"],
        resources: ["endpointslices"],
        verbs: ["get", "list", "watch"],
      },
      { apiGroups: [""], resources: ["nodes/metrics"], verbs: ["get"] },
    ],
  });
  await ok(`${rbac}/clusterrolebindings`, {
    metadata: { name: `prometheus-${ns}` },
    roleRef: {
      apiGroup: "rbac.authorization.k8s.io",
      kind: "ClusterRole",
      name: `prometheus-${ns}`,
    },
    subjects: [{ kind: "ServiceAccount", name: "prometheus", namespace: ns }],
  });
  // A token of the API server's default audience, as a Prometheus pod's projected token.
  const token = await ok(`/api/v1/namespaces/${ns}/serviceaccounts/prometheus/token`, {
    apiVersion: "authentication.k8s.io/v1",
    kind: "TokenRequest",
    spec: { expirationSeconds: 3600 },
  });
  return token.status.token as string;
}

/** The scrape config of the chart's README: the Service's annotations, the install's CA. */
function prometheusConfig(options: {
  ns: string;
  server: string;
  dir: string;
}): unknown {
  const { ns, server, dir } = options;
  const auth = { credentials_file: join(dir, "token") };
  return {
    global: { scrape_interval: "2s", evaluation_interval: "2s" },
    rule_files: [join(dir, "rules.yaml")],
    scrape_configs: [{
      job_name: "aicr-daemon",
      scheme: "https",
      authorization: auth,
      tls_config: { ca_file: join(dir, "daemon-ca.crt") },
      kubernetes_sd_configs: [{
        role: "endpoints",
        api_server: server,
        namespaces: { names: [ns] },
        authorization: auth,
        tls_config: { ca_file: join(dir, "cluster-ca.crt") },
      }],
      relabel_configs: [
        {
          source_labels: ["__meta_kubernetes_service_annotation_prometheus_io_scrape"],
          regex: "true",
          action: "keep",
        },
        {
          source_labels: ["__meta_kubernetes_service_label_app_kubernetes_io_name"],
          regex: "aicr",
          action: "keep",
        },
        {
          source_labels: ["__address__", "__meta_kubernetes_service_annotation_prometheus_io_port"],
          regex: "([^:]+)(?::\\d+)?;(\\d+)",
          replacement: "$1:$2",
          target_label: "__address__",
        },
        {
          source_labels: ["__meta_kubernetes_service_annotation_prometheus_io_path"],
          target_label: "__metrics_path__",
        },
        { source_labels: ["__meta_kubernetes_namespace"], target_label: "namespace" },
        { source_labels: ["__meta_kubernetes_pod_node_name"], target_label: "node" },
      ],
    }],
  };
}

const gate = laneUnavailable();
Deno.test(gated(gate, {
  name: NAME,
  sanitizeOps: false,
  sanitizeResources: false,
  async fn(t) {
    const env = await useRealNodeLane();
    const { admin, kubeconfig } = env;
    const gpuNode = env.nodes.find((n) => n.gpu)!.name;
    const cpuNode = env.nodes.find((n) => !n.gpu)!.name;
    const dir = await mkdtemp(join(REPO_ROOT, ".cluster-runs", "prometheus-"));
    const ns = await createNamespace(admin, "rn-prom");
    // A real kubelet pulls what it runs: the lane registry's aicr, through the pull secret.
    await env.createPullSecret(ns);
    const ds = (...args: string[]) =>
      env.aicr(["daemonset", ...args, "--kubeconfig", kubeconfig, "-n", ns]);
    let prometheus: Deno.ChildProcess | undefined;
    const port = 19090 + Math.floor(Math.random() * 500);
    /** Prometheus' HTTP API, from inside the netns (where it listens). */
    const api = async (path: string) => {
      const script =
        `const r = await fetch(${JSON.stringify(`http://127.0.0.1:${port}${path}`)});` +
        "console.log(await r.text());";
      const out = await new Deno.Command(env.inNetns[0]!, {
        args: [...env.inNetns.slice(1), Deno.execPath(), "eval", script],
        stdout: "piped",
        stderr: "piped",
      }).output();
      if (out.code !== 0) return undefined;
      return JSON.parse(new TextDecoder().decode(out.stdout));
    };
    const steps: boolean[] = [];
    try {
      steps.push(
        await t.step(
          "the daemons run on both nodes, each cohort with its own node's baseline",
          async () => {
            const install = await ds(
              "install",
              "--all-nodes",
              "--baseline-interval",
              "3s",
              "--timeout",
              "180s",
              "--image",
              env.image,
              "--image-pull-secret",
              PULL_SECRET,
            );
            assert.equal(install.code, 0, install.stderr);
            for (const node of [gpuNode, cpuNode]) {
              const set = await ds("baseline", "set", "--from-node", node);
              assert.equal(set.code, 0, set.stderr);
            }
          },
        ),
      );

      steps.push(
        await t.step(
          "Prometheus discovers both daemons through the API server and scrapes them with its token",
          async () => {
            const token = await prometheusAccount(env, ns);
            const ca =
              (await admin.request("GET", `/api/v1/namespaces/${ns}/configmaps/aicr-daemon-ca`))
                .body.data["ca.crt"] as string;
            await writeFile(join(dir, "token"), token, { mode: 0o600 });
            await writeFile(join(dir, "daemon-ca.crt"), ca);
            await writeFile(
              join(dir, "cluster-ca.crt"),
              await readFile(env.cluster.caFile, "utf8"),
            );
            await writeFile(
              join(dir, "rules.yaml"),
              stringify(daemonAlertRules({ forOverride: "10s" }), { lineWidth: 0 }),
            );
            await writeFile(
              join(dir, "prometheus.yml"),
              stringify(prometheusConfig({ ns, server: env.cluster.server, dir })),
            );
            const log = await Deno.open(join(dir, "prometheus.log"), {
              write: true,
              create: true,
            });
            prometheus = new Deno.Command(env.inNetns[0]!, {
              args: [
                ...env.inNetns.slice(1),
                (await buildTools()).prometheus,
                `--config.file=${join(dir, "prometheus.yml")}`,
                `--storage.tsdb.path=${join(dir, "data")}`,
                `--web.listen-address=127.0.0.1:${port}`,
              ],
              stdout: "null",
              stderr: "piped",
            }).spawn();
            void prometheus.stderr.pipeTo(log.writable).catch(() => {});
            const targets = await waitFor("both daemons scraped (up 1)", async () => {
              const up = await api(
                "/api/v1/query?query=" + encodeURIComponent('up{job="aicr-daemon"}'),
              );
              const series = (up?.data?.result ?? []) as {
                metric: Record<string, string>;
                value: [number, string];
              }[];
              return series.length === 2 && series.every((s) => s.value[1] === "1")
                ? series
                : undefined;
            }, 120_000);
            assert.deepEqual(targets.map((s) => s.metric.node).sort(), [gpuNode, cpuNode].sort());
          },
        ),
      );

      steps.push(
        await t.step(
          "a baseline planted with another driver makes AicrNodeDrift fire for the GPU node only",
          async () => {
            const get = await ds("baseline", "get", "--cohort", await cohortOf(ds, gpuNode));
            assert.equal(get.code, 0, get.stderr);
            const changed = parseSnapshot(get.stdout);
            setReading(changed, "GPU.smi.driver", "999.99.99");
            const file = join(dir, "changed.yaml");
            await writeFile(file, encodeSnapshot(changed));
            const set = await ds("baseline", "set", "-f", file);
            assert.equal(set.code, 0, set.stderr);
            const firing = await waitFor("AicrNodeDrift firing", async () => {
              const alerts = await api("/api/v1/alerts");
              const list = (alerts?.data?.alerts ?? []) as {
                labels: Record<string, string>;
                state: string;
              }[];
              const drift = list.filter((a) => a.labels.alertname === "AicrNodeDrift");
              return drift.some((a) => a.state === "firing") ? drift : undefined;
            }, 120_000);
            assert.deepEqual(
              firing.map((a) => [a.labels.node, a.labels.measurement, a.state]),
              [[gpuNode, "GPU", "firing"]],
            );
            // The other node is measured (its series exist) and clean.
            const clean = await api(
              "/api/v1/query?query=" +
                encodeURIComponent(`aicr_drift_readings{node="${cpuNode}"}`),
            );
            const series = (clean?.data?.result ?? []) as { value: [number, string] }[];
            assert.ok(series.length > 0, "the CPU node's drift is measured");
            assert.ok(series.every((s) => s.value[1] === "0"), JSON.stringify(series));
          },
        ),
      );
    } finally {
      if (prometheus && steps.includes(false)) {
        const text = await readFile(join(dir, "prometheus.log"), "utf8").catch(() => "");
        Deno.stderr.writeSync(
          new TextEncoder().encode(`--- prometheus.log ---\n${text.slice(-4000)}\n`),
        );
      }
      if (prometheus) {
        try {
          prometheus.kill("SIGTERM");
        } catch { /* gone */ }
        await prometheus.status;
      }
      await ds("uninstall");
      await ds("baseline", "delete", "--all");
      for (
        const path of [
          `/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/prometheus-${ns}`,
          `/apis/rbac.authorization.k8s.io/v1/clusterroles/prometheus-${ns}`,
          `/api/v1/namespaces/${ns}`,
        ]
      ) await admin.request("DELETE", path);
      await rm(dir, { recursive: true, force: true });
      await env.stop();
    }
  },
}));

/** The cohort key of a node's baseline, from `baseline list`. */
async function cohortOf(
  ds: (...args: string[]) => Promise<{ code: number; stdout: string; stderr: string }>,
  node: string,
): Promise<string> {
  const list = await ds("baseline", "list");
  assert.equal(list.code, 0, list.stderr);
  const line = list.stdout.split("\n").find((l) => l.includes(` ${node} `));
  assert.ok(line, `no baseline of ${node}: ${list.stdout}`);
  return line.split(/\s+/)[0]!;
}
