import assert from "node:assert/strict";
import { fakeCli } from "../tests/fakes/cli.ts";
import { runCli } from "./mod.ts";
import { MAX_CONFIG_BYTES, parseSnapshotConfig } from "./_config.ts";

const CONFIG = `kind: AICRConfig
apiVersion: aicr.run/v1beta1
metadata:
  name: gke-h100-training
spec:
  snapshot:
    output:
      format: json
    agent:
      namespace: aicr-validation
      image: ghcr.io/example/aicr:test
      imagePullSecrets: [secret-a]
      jobName: snap-job
      nodeSelector:
        nodeGroup: gpu-worker
      tolerations:
        - dedicated=gpu-workload:NoSchedule
      os: ubuntu
      requests: "cpu=500m,memory=1Gi"
      limits: "cpu=1,memory=2Gi"
    execution:
      timeout: 7m
      privileged: false
  recipe:
    criteria: { service: gke }
`;

async function preview(args: string[], config: string) {
  const dir = await Deno.makeTempDir();
  try {
    await Deno.writeTextFile(`${dir}/aicr.yaml`, config);
    const fake = fakeCli({ cwd: dir });
    const deps = fake.deps;
    const code = await runCli(
      ["snapshot", "--dry-run", "--offline", "--config", "aicr.yaml", ...args],
      deps,
    );
    return { code, out: fake.stdout(), err: fake.stderr() };
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

Deno.test("--config: spec.snapshot sets what the flags set", async () => {
  const run = await preview([], CONFIG);
  assert.equal(run.code, 0, run.err);
  const list = JSON.parse(run.out); // output.format: json
  const job = list.items.at(-1);
  assert.equal(job.metadata.namespace, "aicr-validation");
  assert.match(job.metadata.name, /^snap-job-/);
  const pod = job.spec.template.spec;
  assert.equal(pod.containers[0].image, "ghcr.io/example/aicr:test");
  assert.deepEqual(pod.imagePullSecrets, [{ name: "secret-a" }]);
  assert.deepEqual(pod.nodeSelector, { nodeGroup: "gpu-worker" });
  assert.deepEqual(pod.tolerations, [
    { key: "dedicated", operator: "Equal", value: "gpu-workload", effect: "NoSchedule" },
  ]);
  assert.equal(pod.containers[0].resources.requests.cpu, "500m");
  assert.notEqual(pod.containers[0].securityContext?.privileged, true);
});

Deno.test("--config: a flag on the command line wins over the file", async () => {
  const run = await preview(
    ["-n", "team-b", "--image", "example.com/aicr:flag", "-t", "yaml"],
    CONFIG,
  );
  assert.equal(run.code, 0, run.err);
  assert.match(run.out, /^---\n/, "-t yaml beat output.format: json");
  assert.match(run.out, /namespace: team-b\n/);
  assert.doesNotMatch(run.out, /aicr-validation/);
  assert.match(run.out, /image: example\.com\/aicr:flag/);
});

Deno.test("--config: an unknown field is an error naming it; a wrong type names the field", async () => {
  const typo = await preview([], CONFIG.replace("nodeSelector:", "nodeSelectr:"));
  assert.equal(typo.code, 2);
  assert.match(typo.err, /unknown field 'spec\.snapshot\.agent\.nodeSelectr'/);
  assert.throws(
    () => parseSnapshotConfig(CONFIG.replace("privileged: false", "privileged: nope"), "c.yaml"),
    /'spec\.snapshot\.execution\.privileged' must be true or false/,
  );
  assert.throws(
    () => parseSnapshotConfig(CONFIG.replace("kind: AICRConfig", "kind: Recipe"), "c.yaml"),
    /'kind' must be AICRConfig/,
  );
  assert.throws(
    () => parseSnapshotConfig(CONFIG.replace("v1beta1", "v9"), "c.yaml"),
    /'apiVersion' must be one of aicr\.run\/v1alpha2, aicr\.run\/v1beta1/,
  );
});

Deno.test("--config: a file over the 1 MiB cap is refused before it is read or parsed (exit 2, naming it)", async () => {
  // A sparse 300 MB file: refused by its size, never read into memory.
  const dir = await Deno.makeTempDir();
  try {
    const file = await Deno.open(`${dir}/huge.yaml`, { write: true, create: true });
    await file.truncate(300 * 1024 * 1024);
    file.close();
    const fake = fakeCli({ cwd: dir });
    const started = performance.now();
    const code = await runCli(
      ["snapshot", "--dry-run", "--offline", "--config", "huge.yaml"],
      fake.deps,
    );
    assert.equal(code, 2);
    assert.match(
      fake.stderr(),
      /^error: Cannot read config 'huge\.yaml': it is 314572800 bytes, over the 1048576-byte cap$/m,
    );
    assert.ok(performance.now() - started < 30_000);
    // A config one byte over, written in full: the same refusal.
    const over = await preview([], CONFIG + "#".repeat(MAX_CONFIG_BYTES));
    assert.equal(over.code, 2);
    assert.match(over.err, /over the 1048576-byte cap/);
    // A missing file names it.
    const missing = fakeCli({ cwd: dir });
    assert.equal(await runCli(["snapshot", "--config", "absent.yaml"], missing.deps), 2);
    assert.match(missing.stderr(), /^error: Cannot read config 'absent\.yaml': ENOENT/m);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
