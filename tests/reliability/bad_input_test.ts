/**
 * Bad input, one table row per input: malformed flags, a `cm://` namespace mismatch,
 * names over Kubernetes' length limits, missing or broken kubeconfigs, an unknown
 * context, a run ID that would inject a label selector. Each must fail with a clear
 * `error: Cannot ...` message and its exit code, and the cluster must be unchanged:
 * the CLI talks through our proxy, which proves no write reached the apiserver.
 *
 * Hostile node input (truncated and entity-laden nvidia-smi XML, a huge document,
 * non-UTF-8 files under /proc/sys) is a different contract: the spec makes every one of
 * them a degraded reading, never an error (`gpu-count: 0`; the file skipped). Those rows
 * assert exactly that, plus that nothing is expanded and the agent stays bounded.
 *
 * The `--oke-addons/--aks-gpu-pools/--gke-gpu-pools` projection files close the table.
 */
import assert from "node:assert/strict";
import { chmod, mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { parseSnapshot } from "../../snapshot/mod.ts";
import { startFaultProxy } from "../faults/proxy.ts";
import type { FaultProxy } from "../faults/proxy.ts";
import { aicr } from "../e2e/_aicr.ts";
import { record } from "./_report.ts";
import { ENABLED, suiteEnv } from "./_env.ts";

const L64 = "a".repeat(64);
const L254 = "a".repeat(254);

/** One row: the arguments (KC, NS and DIR are filled in), the exit code, the message. */
interface Row {
  name: string;
  args: string[];
  code: number;
  message: RegExp;
  /** Text that must appear nowhere in stderr (a credential). */
  absent?: string[];
}

function rows(): Row[] {
  const snap = (...rest: string[]) => ["snapshot", "--kubeconfig", "KC", "-n", "NS", ...rest];
  const parse = (flag: string) => new RegExp(`^error: Cannot parse '${flag}' as it must be `, "m");
  return [
    {
      name: "node selector without '='",
      args: snap("--node-selector", "novalue"),
      code: 2,
      message: parse("--node-selector"),
    },
    {
      name: "node selector value holding '='",
      args: snap("--node-selector", "a=b=c"),
      code: 2,
      message: parse("--node-selector"),
    },
    {
      name: "node selector key over 63",
      args: snap("--node-selector", `${L64}=v`),
      code: 2,
      message: /is not a valid label key/,
    },
    {
      name: "node selector value over 63",
      args: snap("--node-selector", `k=${L64}`),
      code: 2,
      message: /at most 63/,
    },
    {
      name: "toleration with an unknown effect",
      args: snap("--toleration", "key:Bogus"),
      code: 2,
      message: /the effect must be NoSchedule/,
    },
    {
      name: "toleration with two ':'",
      args: snap("--toleration", "a:b:c"),
      code: 2,
      message: /exactly one ':'/,
    },
    {
      name: "requests without '='",
      args: snap("--requests", "cpu"),
      code: 2,
      message: parse("--requests"),
    },
    {
      name: "requests with a bad quantity",
      args: snap("--requests", "cpu=lots"),
      code: 2,
      message: /not a Kubernetes quantity/,
    },
    {
      name: "limits with a negative quantity",
      args: snap("--limits", "memory=-1Gi"),
      code: 2,
      message: parse("--limits"),
    },
    {
      name: "timeout with an unknown unit",
      args: snap("--timeout", "5x"),
      code: 2,
      message: parse("--timeout"),
    },
    {
      name: "negative timeout",
      args: snap("--timeout", "-1s"),
      code: 2,
      message: parse("--timeout"),
    },
    {
      name: "timeout of zero",
      args: snap("--timeout", "0s"),
      code: 2,
      message: /^error: Cannot parse '--timeout' as it must be a duration from 1s to 24h/m,
    },
    {
      name: "timeout beyond any timer",
      args: snap("--timeout", "100000000h"),
      code: 2,
      message: /^error: Cannot parse '--timeout' as it must be at most 24h/m,
    },
    {
      name: "output that is a directory",
      args: snap("-o", "DIR"),
      code: 2,
      message: /^error: Cannot write snapshot to '.*': it is a directory; give a file path/m,
    },
    {
      name: "output under a file (a path that can never exist)",
      args: snap("-o", "DIR/not.json/out.yaml"),
      code: 2,
      message:
        /^error: Cannot write snapshot to '.*not\.json\/out\.yaml': .* is not a directory, so the path can never exist/m,
    },
    {
      name: "output under a device",
      args: snap("-o", "/dev/null/out.yaml"),
      code: 2,
      message: /^error: Cannot write snapshot to '\/dev\/null\/out\.yaml'/m,
    },
    {
      name: "output cm:// without a name",
      args: snap("-o", "cm://"),
      code: 2,
      message: /a ConfigMap URI is 'cm:\/\/<namespace>\/<name>'/,
    },
    {
      name: "output cm:// namespace only",
      args: snap("-o", "cm://onlyns"),
      code: 2,
      message: /a ConfigMap URI is/,
    },
    {
      name: "output cm:// in another namespace",
      args: snap("-o", "cm://other/x"),
      code: 2,
      message: /namespace must match '--namespace'/,
    },
    {
      name: "output cm:// name over 253",
      args: snap("-o", `cm://NS/${L254}`),
      code: 2,
      message: /^error: Cannot use '--output' value/m,
    },
    {
      name: "output cm:// name in capitals (named, not a function's text)",
      args: snap("-o", "cm://NS/UPPER"),
      code: 2,
      message:
        /^error: Cannot use '--output' value 'cm:\/\/[a-z0-9-]+\/UPPER': name 'UPPER' is not a valid ConfigMap name/m,
    },
    {
      name: "diff URL source with credentials and a token (redacted)",
      args: [
        "diff",
        "--baseline",
        "https://alice:hunter2@127.0.0.1:9/a.yaml?token=s3cret&x=1",
        "--target",
        "http://127.0.0.1:9/b.yaml?sig=s3cret",
      ],
      // A URL source's own exit code and wording (what failed, where), never the API server's.
      code: 11,
      message:
        /^error: Cannot read snapshot 'https?:\/\/(\*\*\*@)?127\.0\.0\.1:9\/[ab]\.yaml\?(token|sig)=\*\*\*(&x=\*\*\*)?': the connection to 127\.0\.0\.1:9 was refused \(nothing listens there\) \(ECONNREFUSED\)$/m,
      absent: ["alice", "hunter2", "s3cret", "API server", "VPN"],
    },
    {
      name: "baseline set -f from an unreachable URL (its own exit code, not the API server's)",
      args: [
        "daemonset",
        "baseline",
        "set",
        "--kubeconfig",
        "KC",
        "-n",
        "NS",
        "-f",
        "https://bob:pw@127.0.0.1:9/base.yaml?sig=s3cret",
      ],
      code: 11,
      message:
        /^error: Cannot read snapshot 'https:\/\/\*\*\*@127\.0\.0\.1:9\/base\.yaml\?sig=\*\*\*': the connection to 127\.0\.0\.1:9 was refused/m,
      absent: ["bob", "s3cret", "API server"],
    },
    {
      name: "unknown --os",
      args: snap("--os", "plan9"),
      code: 2,
      message: /must be one of ubuntu, rhel/,
    },
    {
      name: "unknown --format",
      args: snap("--format", "toml"),
      code: 2,
      message: /must be 'yaml', 'json' or 'table'/,
    },
    {
      name: "namespace over 63",
      args: ["snapshot", "--kubeconfig", "KC", "-n", L64],
      code: 2,
      message: /DNS-1123 label/,
    },
    {
      name: "service account prefix with '_'",
      args: snap("--service-account-name", "Bad_Name"),
      code: 2,
      message: /^error: Cannot use '--service-account-name'/m,
    },
    {
      name: "image pull secret over 253",
      args: snap("--image-pull-secret", L254),
      code: 2,
      message: /^error: Cannot use '--image-pull-secret'/m,
    },
    {
      name: "image that is no reference",
      args: snap("--image", "UPPER case!"),
      code: 2,
      message: /must be an image reference/,
    },
    {
      name: "run ID of the wrong shape",
      args: snap("--run-id", "bogus"),
      code: 2,
      message: /^error: Cannot use '--run-id'/m,
    },
    {
      name: "--privileged neither true nor false",
      args: snap("--privileged", "maybe"),
      code: 2,
      message: /must be 'true' or 'false'/,
    },
    {
      name: "a single-value flag twice",
      args: snap("-n", "other"),
      code: 2,
      message: /flag --namespace can only be specified once/,
    },
    {
      name: "--require-gpu with --runtime-class",
      args: snap("--require-gpu", "--runtime-class", "nvidia"),
      code: 2,
      message: /together with '--runtime-class'/,
    },
    {
      name: "unknown runtime class",
      args: snap("--runtime-class", "nope"),
      code: 3,
      message: /RuntimeClass "nope" not found/,
    },
    {
      name: "missing kubeconfig file",
      args: ["snapshot", "--kubeconfig", "DIR/none.kubeconfig", "-n", "NS"],
      code: 2,
      message: /^error: Cannot load kubeconfig '.*none.kubeconfig'/m,
    },
    {
      name: "kubeconfig that is not YAML",
      args: ["snapshot", "--kubeconfig", "DIR/broken.kubeconfig", "-n", "NS"],
      code: 2,
      message: /^error: Cannot load kubeconfig/m,
    },
    {
      name: "kubeconfig without a cluster",
      args: ["snapshot", "--kubeconfig", "DIR/empty.kubeconfig", "-n", "NS"],
      code: 2,
      message: /^error: Cannot find a Kubernetes API server/m,
    },
    {
      name: "no kubeconfig at all",
      args: ["snapshot", "-n", "NS"],
      code: 3,
      message: /^error: Cannot find a kubeconfig/m,
    },
    {
      name: "kubeconfig naming a dead server",
      args: ["snapshot", "--kubeconfig", "DIR/dead.kubeconfig", "-n", "NS"],
      code: 6,
      message: /^error: Cannot reach Kubernetes API server/m,
    },
    {
      name: "unknown context",
      args: snap("--context", "nope"),
      code: 2,
      message: /^error: Cannot use context 'nope': it is not in the kubeconfig/m,
    },
    {
      name: "cleanup run ID injecting a selector",
      args: [
        "cleanup",
        "--kubeconfig",
        "KC",
        "-n",
        "NS",
        "--run-id",
        "x,app.kubernetes.io/name=aicr",
      ],
      code: 2,
      message: /^error: Cannot use '--run-id'/m,
    },
    // Without --run-id, cleanup lists the runs that left objects (tests/e2e/cleanup_test.ts).
    {
      name: "cleanup with an empty run ID",
      args: ["cleanup", "--kubeconfig", "KC", "-n", "NS", "--run-id", ""],
      code: 2,
      message:
        /^error: Cannot use '--run-id' as it must be <YYYYMMDD-HHMMSS>-<16 hex>: current value is ''/m,
    },
    // The controller-side projection files (read before the cluster is contacted).
    {
      name: "--oke-addons file that is not JSON",
      args: snap("--oke-addons", "DIR/not.json"),
      code: 2,
      message: /^error: Cannot read '--oke-addons' file .*current value is not JSON/m,
    },
    {
      name: "--oke-addons without its data array",
      args: snap("--oke-addons", "DIR/object.json"),
      code: 2,
      message: /^error: Cannot read '--oke-addons' file .*'data' must be an array/m,
    },
    {
      name: "--aks-gpu-pools object instead of array",
      args: snap("--aks-gpu-pools", "DIR/object.json"),
      code: 2,
      message: /^error: Cannot read '--aks-gpu-pools' file .*must be the JSON array/m,
    },
    {
      name: "--aks-gpu-pools non-UTF-8 bytes",
      args: snap("--aks-gpu-pools", "DIR/latin1.json"),
      code: 2,
      message: /^error: Cannot read '--aks-gpu-pools' file/m,
    },
    {
      name: "--gke-gpu-pools pool with a numeric name",
      args: snap("--gke-gpu-pools", "DIR/numeric-name.json"),
      code: 2,
      message:
        /^error: Cannot read '--gke-gpu-pools' file .*'\[0\]\.name' must be a non-empty string/m,
    },
    {
      name: "--gke-gpu-pools missing file",
      args: snap("--gke-gpu-pools", "DIR/none.json"),
      code: 2,
      message: /^error: Cannot read '--gke-gpu-pools' file .*no such file/m,
    },
  ];
}

/** Writes the kubeconfig and projection file fixtures. */
async function kubeconfigs(dir: string): Promise<void> {
  await writeFile(join(dir, "not.json"), "not json {\n");
  await writeFile(join(dir, "object.json"), '{"items": 3}\n');
  await writeFile(join(dir, "numeric-name.json"), '[{"name": 1}]\n');
  await writeFile(
    join(dir, "latin1.json"),
    new Uint8Array([0x5b, 0x22, 0x63, 0x61, 0x66, 0xe9, 0x22, 0x5d]),
  );
  await writeFile(join(dir, "broken.kubeconfig"), "apiVersion: v1\nkind: Config\nclusters: [\n");
  await writeFile(join(dir, "empty.kubeconfig"), "apiVersion: v1\nkind: Config\n");
  await writeFile(
    join(dir, "dead.kubeconfig"),
    [
      "apiVersion: v1",
      "kind: Config",
      "clusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]",
      "users: [{name: u, user: {token: t}}]",
      "contexts: [{name: x, context: {cluster: c, user: u}}]",
      "current-context: x",
      "",
    ].join("\n"),
  );
}

/** What the proxy saw that could change the cluster (reviews persist nothing). */
function writes(requests: FaultProxy["requests"]): string[] {
  return requests
    .filter((r) => r.method !== "GET" && !/accessreviews$/.test(r.path.split("?")[0]!))
    .map((r) => `${r.method} ${r.path}`);
}

/** One hostile node input: a host tree and an nvidia-smi, and what the snapshot must say. */
interface HostileRow {
  name: string;
  smi?: string | (() => Promise<string>);
  files?: Record<string, Uint8Array | string>;
  check: (snapshot: ReturnType<typeof parseSnapshot>, stdout: string, stderr: string) => void;
}

function gpuSubtypes(s: ReturnType<typeof parseSnapshot>) {
  return s.measurements.find((m) => m.type === "GPU")?.subtypes ?? [];
}
function smiCount(s: ReturnType<typeof parseSnapshot>): unknown {
  return gpuSubtypes(s).find((t) => t.subtype === "smi")?.data["gpu-count"];
}
function sysctl(s: ReturnType<typeof parseSnapshot>): Record<string, unknown> {
  const os = s.measurements.find((m) => m.type === "OS");
  return (os?.subtypes.find((t) => t.subtype === "sysctl")?.data ?? {}) as Record<string, unknown>;
}

function hostileRows(): HostileRow[] {
  const gpu = (inner: string) =>
    `<?xml version="1.0" ?>\n<nvidia_smi_log><driver_version>580.1</driver_version><cuda_version>13.0</cuda_version><attached_gpus>1</attached_gpus>${inner}</nvidia_smi_log>\n`;
  return [
    {
      name: "nvidia-smi XML cut off mid-element",
      smi: gpu("<gpu><product_name>NVIDIA H100").slice(0, 160),
      check: (s, _o, err) => {
        assert.equal(smiCount(s), 0);
        assert.match(err, /nvidia-smi output did not parse/);
      },
    },
    {
      name: "nvidia-smi XML with external and recursive entity declarations",
      smi:
        `<?xml version="1.0"?>\n<!DOCTYPE nvidia_smi_log [\n<!ENTITY xxe SYSTEM "file:///etc/passwd">\n<!ENTITY a "aaaaaaaaaa">\n<!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">\n<!ENTITY c "&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;">\n<!ENTITY d "&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;">\n]>\n<nvidia_smi_log><driver_version>&xxe;</driver_version><gpu><product_name>&d;&d;&d;&d;</product_name></gpu></nvidia_smi_log>\n`,
      check: (_s, out) => {
        assert.doesNotMatch(out, /root:x:0:0/, "no external entity is read");
        assert.doesNotMatch(out, /a{1000}/, "no entity is expanded");
      },
    },
    {
      name: "nvidia-smi printing a 40 MiB document",
      smi: () => {
        const one = "<gpu><product_name>NVIDIA H100</product_name></gpu>";
        return Promise.resolve(gpu(one.repeat(Math.ceil((40 << 20) / one.length))));
      },
      check: (s, _o, err) => {
        assert.equal(smiCount(s), 0, "over the bound: the reading degrades, nothing hangs");
        assert.match(err, /nvidia-smi/);
      },
    },
    {
      name: "non-UTF-8 files under /proc/sys",
      files: {
        "proc/sys/kernel/latin1": new Uint8Array([0x63, 0x61, 0x66, 0xe9, 0x0a]),
        "proc/sys/kernel/binary": new Uint8Array([0xff, 0xfe, 0x00, 0x80, 0xc3]),
        "proc/sys/kernel/overlong": new Uint8Array([0xc0, 0xaf, 0x0a]),
      },
      check: (s) => {
        const keys = Object.keys(sysctl(s));
        assert.ok(keys.includes("/proc/sys/kernel/pid_max"), keys.join(","));
        for (const bad of ["latin1", "binary", "overlong"]) {
          assert.ok(!keys.includes(`/proc/sys/kernel/${bad}`), `${bad} is skipped`);
        }
      },
    },
  ];
}

Deno.test({
  name: "reliability: bad input is refused clearly, the cluster unchanged",
  ignore: !ENABLED,
  // One cluster serves every step (its processes outlive the steps; close() ends them).
  sanitizeOps: false,
  sanitizeResources: false,
  async fn(t) {
    const suite = await suiteEnv();
    const dir = await mkdtemp(join(suite.env.cluster.stateDir, "bad-input-"));
    const proxy = await startFaultProxy(suite.env.cluster, { dir });
    let tried = 0;
    let refused = 0;
    let leftovers = 0;
    try {
      const ns = await suite.namespace("rel-bad");
      await kubeconfigs(dir);
      const before = await suite.aicrObjects(ns);
      for (const row of rows()) {
        await t.step(`${row.name}: exit ${row.code}`, async () => {
          tried++;
          // One pass: a temporary name may itself contain "DIR" or "NS".
          const values: Record<string, string> = { KC: proxy.kubeconfig, NS: ns, DIR: dir };
          const args = row.args.map((a) =>
            a.replace(/KC|NS|DIR/g, (token) => values[token] ?? token)
          );
          const seen = proxy.requests.length;
          const run = await aicr(args, { env: { HOME: dir } });
          const wrote = writes(proxy.requests.slice(seen));
          assert.equal(run.code, row.code, run.stderr);
          assert.match(run.stderr, row.message);
          for (const text of row.absent ?? []) assert.ok(!run.stderr.includes(text), run.stderr);
          assert.equal(run.stdout, "");
          assert.deepEqual(wrote, [], "no write reached the apiserver");
          refused++;
        });
      }
      const after = await suite.aicrObjects(ns);
      leftovers = after.filter((o) => !before.includes(o)).length;
      assert.deepEqual(after, before, "the namespace is unchanged");

      for (const row of hostileRows()) {
        await t.step(`hostile node input: ${row.name}`, async () => {
          tried++;
          const root = await mkdtemp(join(dir, "host-"));
          const files: Record<string, Uint8Array | string> = {
            "proc/cmdline": "BOOT_IMAGE=/vmlinuz ro quiet\n",
            "proc/modules": "nvidia 1 0 - Live 0x0\n",
            "proc/sys/kernel/pid_max": "4194304\n",
            "etc/os-release": 'NAME="Ubuntu"\nID=ubuntu\nVERSION_ID="24.04"\n',
            ...row.files,
          };
          for (const [path, content] of Object.entries(files)) {
            await mkdir(join(root, path, ".."), { recursive: true });
            await writeFile(join(root, path), content);
          }
          const bin = join(root, "bin");
          await mkdir(bin);
          if (row.smi !== undefined) {
            const text = typeof row.smi === "string" ? row.smi : await row.smi();
            await writeFile(join(root, "smi.xml"), text);
            await writeFile(
              join(bin, "nvidia-smi"),
              `#!/bin/sh\nexec cat '${join(root, "smi.xml")}'\n`,
            );
            await chmod(join(bin, "nvidia-smi"), 0o755);
          }
          // A hostile input must not hang the agent: past the deadline it is killed and the
          // row fails saying so.
          const run = await aicr(["agent", "--host-root", root, "-o", "-"], {
            env: { HOME: dir, PATH: `${bin}:/usr/bin:/bin` },
            deadlineMs: 120_000,
          });
          assert.equal(run.code, 0, run.stderr);
          row.check(parseSnapshot(run.stdout), run.stdout, run.stderr);
          refused++;
          await rm(root, { recursive: true, force: true });
        });
      }
    } finally {
      record("bad input: table", { badInputs: tried, badInputsRefused: refused, leftovers });
      await proxy.stop();
      await rm(dir, { recursive: true, force: true });
      await suite.close();
    }
  },
});
