/**
 * The Helm chart `charts/aicr/` against its one source: the files are what `scripts/chart.ts`
 * generates; a real `helm template` (helm v4 built from Go modules, `tests/cluster/tools.ts`) gives
 * the same objects as `aicr daemonset render` for the same settings, defaults included; wrong value
 * types fail in helm with the value named; the chart's own CA signs certificates a chain check
 * accepts; and a real `kubectl kustomize` builds over the rendered base.
 *
 * @module
 */
import assert from "node:assert/strict";
import { createPrivateKey, X509Certificate } from "node:crypto";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parse, parseAllDocuments, stringify } from "yaml";
import pkg from "../../package.json" with { type: "json" };
import { createProgram } from "../../cli/mod.ts";
import { makeDaemonCa, renderDaemonSet } from "../../controller/mod.ts";
import { releaseImage } from "../../version.ts";
import { generateServingKey, issueServingCertificate } from "../../x509.ts";
import { CHART_DIR, chartDrift } from "../../scripts/chart.ts";
import { fakeCli } from "../fakes/cli.ts";
import { buildTools } from "../cluster/tools.ts";

type Obj = {
  kind: string;
  metadata: { name: string; namespace?: string; annotations?: Record<string, string> };
  data?: Record<string, string>;
  [k: string]: unknown;
};

/** `aicr daemonset render` in this process, as a user types it. */
async function render(args: string[], cwd = "/"): Promise<Obj[]> {
  const cli = fakeCli({ cwd });
  await (await createProgram(cli.deps)).parseAsync(["daemonset", "render", ...args], {
    from: "user",
  });
  return docs(cli.stdout());
}

function docs(text: string): Obj[] {
  return parseAllDocuments(text).map((d) => d.toJS() as Obj).filter((d) => d && d.kind);
}

async function helm(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const { helm } = await buildTools();
  const out = await new Deno.Command(helm, {
    args,
    stdout: "piped",
    stderr: "piped",
    env: { HELM_CACHE_HOME: tmpdir(), HELM_CONFIG_HOME: tmpdir(), HELM_DATA_HOME: tmpdir() },
  }).output();
  const text = (b: Uint8Array) => new TextDecoder().decode(b);
  return { code: out.code, stdout: text(out.stdout), stderr: text(out.stderr) };
}

/** `helm template` with these values (render takes an `--image` for a copy of the release's). */
async function helmTemplate(namespace: string, values: object): Promise<Obj[]> {
  const dir = await mkdtemp(join(tmpdir(), "aicr-chart-"));
  try {
    await writeFile(join(dir, "values.yaml"), stringify(values));
    const run = await helm([
      "template",
      "aicr",
      CHART_DIR,
      "--namespace",
      namespace,
      "-f",
      join(dir, "values.yaml"),
    ]);
    assert.equal(run.code, 0, run.stderr);
    return docs(run.stdout);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** The CA pair of a set of objects, checked: a P-256 CA, the key its own, the ConfigMap's the same. */
function caOf(objects: Obj[]): { cert: string; key?: string } {
  const configMap = objects.find((o) => o.kind === "ConfigMap" && o.metadata.name.endsWith("-ca"));
  const secret = objects.find((o) => o.kind === "Secret");
  const cert = configMap?.data?.["ca.crt"] ?? "";
  const x509 = new X509Certificate(cert);
  assert.ok(x509.ca, "the CA ConfigMap holds a CA certificate");
  assert.equal(x509.publicKey.asymmetricKeyDetails?.namedCurve, "prime256v1");
  if (!secret) return { cert };
  assert.equal(atob(secret.data?.["tls.crt"] ?? ""), cert, "the Secret and ConfigMap agree");
  const key = atob(secret.data?.["tls.key"] ?? "");
  assert.ok(x509.checkPrivateKey(createPrivateKey(key)), "the key is the certificate's");
  return { cert, key };
}

/** The objects with the CA's material (random per render) and Helm's keep policy left out, sorted. */
function comparable(objects: Obj[]): Obj[] {
  return objects.map((o) => {
    const copy = structuredClone(o);
    if (copy.kind === "Secret" && copy.data) copy.data = { "tls.crt": "<ca>", "tls.key": "<key>" };
    if (copy.kind === "ConfigMap" && copy.data?.["ca.crt"]) copy.data = { "ca.crt": "<ca>" };
    const annotations = copy.metadata.annotations;
    if (annotations) {
      delete annotations["helm.sh/resource-policy"];
      // render records its flags for `aicr daemonset upgrade`; a Helm release is upgraded by
      // helm (which keeps its values), and `aicr daemonset upgrade` refuses it.
      if (copy.kind === "DaemonSet") delete annotations["aicr.run/install-settings"];
      if (Object.keys(annotations).length === 0) delete copy.metadata.annotations;
    }
    return copy;
  }).sort((a, b) =>
    `${a.kind}/${a.metadata.namespace}/${a.metadata.name}`.localeCompare(
      `${b.kind}/${b.metadata.namespace}/${b.metadata.name}`,
    )
  );
}

const VALUES = parse(await readFile(join(CHART_DIR, "values.yaml"), "utf8"));

Deno.test("chart: charts/aicr/ is exactly what scripts/chart.ts generates from the builders", () => {
  assert.deepEqual(chartDrift(), [], "run: deno task chart");
});

Deno.test("chart: its default image is what a release binary of this version renders", () => {
  assert.equal(`${VALUES.image.repository}:${VALUES.image.tag}`, releaseImage(pkg.version));
});

Deno.test("chart: helm lint passes", async () => {
  const run = await helm(["lint", "--strict", CHART_DIR]);
  assert.equal(run.code, 0, run.stdout + run.stderr);
});

Deno.test("chart: helm template with default values gives render's objects", async () => {
  const image = { repository: "example.com/aicr", tag: "v9.9.9" };
  const chart = await helmTemplate("default", { image });
  const cli = await render(["--image", "example.com/aicr:v9.9.9"]);
  caOf(chart);
  caOf(cli);
  assert.deepEqual(comparable(chart), comparable(cli));
  assert.equal(
    chart.find((o) => o.kind === "Secret")?.metadata.annotations?.["helm.sh/resource-policy"],
    "keep",
    "helm uninstall keeps the CA",
  );
});

Deno.test("chart: every knob set in helm gives what the same flags give render", async (t) => {
  const resources = (over: { requests?: object; limits?: object }) => ({
    requests: { ...VALUES.resources.requests, ...over.requests },
    limits: { ...VALUES.resources.limits, ...over.limits },
  });
  const cases: { name: string; namespace: string; flags: string[]; values: object }[] = [
    {
      name: "restricted, Talos, own selector, toleration, pull secret, runtime class, resources",
      namespace: "team-a",
      flags: [
        "--name",
        "gpu-snap",
        "--image",
        "registry.local/aicr:1.2.3",
        "--port",
        "9443",
        "--privileged=false",
        "--os",
        "talos",
        "--node-selector",
        "pool=gpu",
        "--toleration",
        "nvidia.com/gpu=present:NoSchedule",
        "--image-pull-secret",
        "regcred",
        "--runtime-class",
        "nvidia",
        "--requests",
        "cpu=200m",
        "--limits",
        "memory=2Gi",
        "--baseline-interval",
        "2m",
        "--no-service",
      ],
      values: {
        name: "gpu-snap",
        image: { repository: "registry.local/aicr", tag: "1.2.3" },
        port: 9443,
        privileged: false,
        os: "talos",
        nodeSelector: { pool: "gpu" },
        tolerations: [{
          key: "nvidia.com/gpu",
          operator: "Equal",
          value: "present",
          effect: "NoSchedule",
        }],
        imagePullSecrets: [{ name: "regcred" }],
        runtimeClassName: "nvidia",
        resources: resources({ requests: { cpu: "200m" }, limits: { memory: "2Gi" } }),
        baselineInterval: "120s",
        service: { enabled: false },
      },
    },
    {
      name: "privileged on COS, every node, a ServiceMonitor",
      namespace: "aicr-system",
      flags: ["--image", "r/aicr:1", "--os", "cos", "--all-nodes", "--service-monitor"],
      values: {
        image: { repository: "r/aicr", tag: "1" },
        os: "cos",
        allNodes: true,
        serviceMonitor: { enabled: true },
      },
    },
    {
      name: "an image of one architecture: the pods land only there",
      namespace: "one-arch",
      flags: ["--image", "r/aicr:1", "--image-platforms", "linux/arm64"],
      values: { image: { repository: "r/aicr", tag: "1" }, architectures: ["arm64"] },
    },
    {
      name: "a priority class for both workloads, node affinity on the daemons",
      namespace: "prio",
      flags: [
        "--image",
        "r/aicr:1",
        "--priority-class-name",
        "gpu-infra",
        "--node-affinity",
        "pool in (a,b)",
        "--node-affinity",
        "!aicr.run/skip",
      ],
      values: {
        image: { repository: "r/aicr", tag: "1" },
        priorityClassName: "gpu-infra",
        affinity: {
          nodeAffinity: {
            requiredDuringSchedulingIgnoredDuringExecution: {
              nodeSelectorTerms: [{
                matchExpressions: [
                  { key: "kubernetes.io/arch", operator: "In", values: ["amd64", "arm64"] },
                  { key: "pool", operator: "In", values: ["a", "b"] },
                  { key: "aicr.run/skip", operator: "DoesNotExist" },
                ],
              }],
            },
          },
        },
      },
    },
    {
      name: "the default daemon's reader is aicr-reader, another's <name>-reader",
      namespace: "x",
      flags: ["--image", "r/aicr:1", "--name", "aicr-daemon"],
      values: { image: { repository: "r/aicr", tag: "1" }, name: "aicr-daemon" },
    },
  ];
  for (const c of cases) {
    await t.step(c.name, async () => {
      const chart = await helmTemplate(c.namespace, c.values);
      const cli = await render(["-n", c.namespace, ...c.flags]);
      assert.deepEqual(comparable(chart), comparable(cli));
    });
  }
});

Deno.test("chart: signer.enabled gives the signer's objects renderDaemonSet gives", async () => {
  const chart = await helmTemplate("aicr-system", {
    image: { repository: "r/aicr", tag: "1" },
    signer: { enabled: true, replicas: 3 },
    architectures: [],
  });
  const rendered = renderDaemonSet({
    namespace: "aicr-system",
    image: "r/aicr:1",
    privileged: true,
    nodeSelector: {},
    allNodes: false,
    tolerations: [],
    imagePullSecrets: [],
    service: true,
    serviceMonitor: false,
    extraArgs: ["--baseline-interval", "60s"],
    signer: true,
    signerReplicas: 3,
    ca: makeDaemonCa({ now: new Date() }),
  }).objects.map((o) => JSON.parse(JSON.stringify(o.manifest)) as Obj);
  assert.ok(
    rendered.some((o) => o.kind === "Deployment") && rendered.some((o) => o.kind === "Lease"),
  );
  assert.deepEqual(comparable(chart), comparable(rendered));
});

Deno.test("chart: a CA kept from an earlier render gives the same Secret, an existing CA no Secret", async () => {
  const dir = await mkdtemp(join(tmpdir(), "aicr-chart-ca-"));
  try {
    const first = await render(["--image", "r/aicr:1", "-o", join(dir, "first.yaml")], dir)
      .then(async () => docs(await readFile(join(dir, "first.yaml"), "utf8")));
    const { cert, key } = caOf(first);
    // --ca-secret and ca.certificate + ca.key: the very same objects, CA bytes included.
    const kept = await render(["--image", "r/aicr:1", "--ca-secret", join(dir, "first.yaml")]);
    const chart = await helmTemplate("default", {
      image: { repository: "r/aicr", tag: "1" },
      ca: { certificate: cert, key },
    });
    const keep = (objects: Obj[]) =>
      comparable(
        objects.map((o) =>
          o.kind === "Secret" ? { ...o, metadata: { ...o.metadata, annotations: {} } } : o
        ),
      ).map((o) => o.kind === "Secret" || o.kind === "ConfigMap" ? { ...o, data: undefined } : o);
    assert.deepEqual(keep(chart), keep(kept));
    assert.deepEqual(
      chart.find((o) => o.kind === "Secret")?.data,
      kept.find((o) => o.kind === "Secret")?.data,
    );
    // --existing-ca and ca.create=false + ca.certificate: the ConfigMap only, no key anywhere.
    await writeFile(join(dir, "ca.crt"), cert);
    const existing = await render(["--image", "r/aicr:1", "--existing-ca", join(dir, "ca.crt")]);
    const chartExisting = await helmTemplate("default", {
      image: { repository: "r/aicr", tag: "1" },
      ca: { create: false, certificate: cert },
    });
    assert.equal(existing.filter((o) => o.kind === "Secret").length, 0);
    assert.deepEqual(comparable(chartExisting), comparable(existing));
    assert.ok(!JSON.stringify(chartExisting).includes("PRIVATE KEY"));
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

Deno.test("chart: the CA helm makes (genCAWithKey) signs daemon certificates that verify", async () => {
  const chart = await helmTemplate("default", {});
  const { cert, key } = caOf(chart);
  const serving = generateServingKey();
  const leaf = new X509Certificate(issueServingCertificate({
    ca: { caCert: cert, caKey: key! },
    publicKey: serving.publicKey,
    node: "gpu-node-1",
    ipAddresses: ["10.0.0.7"],
    now: new Date(),
    lifetimeSeconds: 3600,
  }));
  assert.ok(leaf.checkIssued(new X509Certificate(cert)), "issuer name and key identifier match");
  assert.ok(leaf.verify(new X509Certificate(cert).publicKey));
});

Deno.test("chart: a value of the wrong type fails in helm with the value and the type named", async () => {
  for (
    const [set, line] of [
      [["--set", "port=abc"], "at '/port': got string, want integer"],
      [["--set-string", "privileged=yes"], "at '/privileged': got string, want boolean"],
      [["--set", "port=70000"], "at '/port': maximum: got 70,000, want 65,535"],
      [["--set", "os=windows"], "at '/os': value must be one of"],
      [["--set", "nodeSelecter.pool=gpu"], "additional properties 'nodeSelecter' not allowed"],
      [["--set", "name=Bad_Name"], "at '/name': 'Bad_Name' does not match pattern"],
      [["--set", "tolerations=none"], "at '/tolerations': got string, want array"],
      [["--set", "baselineInterval=soon"], "at '/baselineInterval'"],
    ] as const
  ) {
    const run = await helm(["template", "aicr", CHART_DIR, ...set]);
    assert.notEqual(run.code, 0, set.join(" "));
    assert.ok(
      run.stderr.split("\n").some((l) => l.includes(line)),
      `${set.join(" ")}: ${run.stderr}`,
    );
  }
});

Deno.test("chart: kubectl kustomize builds over the rendered base, with an overlay's patch", async () => {
  const { kubectl } = await buildTools();
  const dir = await mkdtemp(join(tmpdir(), "aicr-kustomize-"));
  try {
    await Deno.mkdir(join(dir, "base"));
    await Deno.mkdir(join(dir, "overlay"));
    await render(
      ["-n", "aicr-system", "--image", "r/aicr:1", "-o", join(dir, "base", "aicr.yaml")],
      dir,
    );
    await render([
      "-n",
      "aicr-system",
      "--image",
      "r/aicr:1",
      "-t",
      "json",
      "-o",
      join(dir, "base", "aicr.json"),
    ], dir);
    await writeFile(join(dir, "base", "kustomization.yaml"), "resources: [aicr.yaml]\n");
    await writeFile(
      join(dir, "overlay", "kustomization.yaml"),
      stringify({
        resources: ["../base"],
        labels: [{ pairs: { team: "gpu-ops" }, includeSelectors: false }],
        patches: [{
          target: { kind: "DaemonSet", name: "aicr-daemon" },
          patch: stringify([{
            op: "add",
            path: "/spec/template/spec/priorityClassName",
            value: "system-node-critical",
          }]),
        }],
      }),
    );
    const build = async (path: string) => {
      const out = await new Deno.Command(kubectl, {
        args: ["kustomize", path],
        stdout: "piped",
        stderr: "piped",
      })
        .output();
      assert.equal(out.code, 0, new TextDecoder().decode(out.stderr));
      return docs(new TextDecoder().decode(out.stdout));
    };
    const base = await build(join(dir, "base"));
    const rendered = docs(await readFile(join(dir, "base", "aicr.yaml"), "utf8"));
    assert.deepEqual(comparable(base), comparable(rendered), "the base builds to the render");
    const overlay = await build(join(dir, "overlay"));
    assert.equal(overlay.length, rendered.length);
    assert.ok(
      overlay.every((o) =>
        (o.metadata as { labels?: Record<string, string> }).labels?.team === "gpu-ops"
      ),
    );
    const ds = overlay.find((o) => o.kind === "DaemonSet") as unknown as {
      spec: { template: { spec: { priorityClassName?: string } } };
    };
    assert.equal(ds.spec.template.spec.priorityClassName, "system-node-critical");
    // The JSON List is a kustomize resource too.
    await writeFile(join(dir, "base", "kustomization.yaml"), "resources: [aicr.json]\n");
    assert.equal((await build(join(dir, "base"))).length, rendered.length);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});
