import assert from "node:assert/strict";
import { mkdir, mkdtemp, readdir, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { basename, join } from "node:path";
import { fileURLToPath } from "node:url";
import { DEFAULT_K8S_VERSION, k8sVersionEnv, parseK8sVersion } from "./k8s_minor.ts";

const CLUSTER = fileURLToPath(new URL("../cluster/", import.meta.url));

Deno.test("parseK8sVersion() reads a minor or a release, and refuses the rest naming the accepted ones", () => {
  assert.equal(parseK8sVersion("1.33"), "v1.33.13");
  assert.equal(parseK8sVersion("v1.30"), "v1.30.14");
  assert.equal(parseK8sVersion("1.33.13"), "v1.33.13");
  assert.equal(parseK8sVersion("v1.31.2"), "v1.31.2");
  assert.equal(parseK8sVersion("1.37"), DEFAULT_K8S_VERSION);
  assert.throws(
    () => parseK8sVersion(undefined),
    /Cannot read the Kubernetes version "".*1\.33 \(v1\.33\.13\)/,
  );
  assert.throws(() => parseK8sVersion("1.33.x"), /Cannot read the Kubernetes version "1\.33\.x"/);
  assert.throws(() => parseK8sVersion("1.29"), /outside the supported range 1\.30-1\.37/);
  assert.throws(() => parseK8sVersion("1.38.0"), /outside the supported range/);
  assert.throws(() => parseK8sVersion("1.31"), /No known patch release of Kubernetes 1\.31/);
});

Deno.test("k8sVersionEnv() leaves the default release to build.sh", () => {
  assert.deepEqual(k8sVersionEnv(DEFAULT_K8S_VERSION), { AICR_K8S_VERSION: "" });
  assert.deepEqual(k8sVersionEnv("v1.33.13"), { AICR_K8S_VERSION: "v1.33.13" });
});

/** build-minor.sh's cache entry for a release, without building. */
async function entryOf(cache: string, version: string): Promise<string> {
  const out = await new Deno.Command("bash", {
    args: [join(CLUSTER, "build-minor.sh"), version, "--dir-only"],
    env: { AICR_CLUSTER_BIN_CACHE: cache },
    stdout: "piped",
    stderr: "piped",
  }).output();
  assert.equal(out.code, 0, new TextDecoder().decode(out.stderr));
  return new TextDecoder().decode(out.stdout).trim();
}

Deno.test("another release's cache entry is its own and survives build.sh's pruning", async () => {
  const cache = await mkdtemp(join(tmpdir(), "aicr-k8s-cache-"));
  try {
    const e133 = await entryOf(cache, "v1.33.13");
    const e130 = await entryOf(cache, "v1.30.14");
    assert.match(basename(e133), /^\.k8s-v1\.33\.13-[0-9a-f]{16}$/);
    assert.match(basename(e130), /^\.k8s-v1\.30\.14-[0-9a-f]{16}$/);
    assert.equal(join(e133, ".."), cache);
    // Four default builds (hash folders) and the two entries; then build.sh's own pruning line.
    for (const d of ["a", "b", "c", "d"]) await mkdir(join(cache, `${d.repeat(16)}`));
    await mkdir(e133);
    await mkdir(e130);
    const script = await readFile(join(CLUSTER, "build.sh"), "utf8");
    const prune = script.split("\n").find((l) => l.startsWith("ls -1dt "));
    assert.ok(prune, "build.sh prunes with ls -1dt");
    const ran = await new Deno.Command("bash", {
      args: ["-c", `cache_root="$1"; ${prune}`, "bash", cache],
    }).output();
    assert.equal(ran.code, 0);
    const left = await readdir(cache);
    assert.equal(left.filter((n) => /^[a-d]{16}$/.test(n)).length, 3, "build.sh keeps three");
    assert.ok(left.includes(basename(e133)) && left.includes(basename(e130)), left.join(" "));
  } finally {
    await rm(cache, { recursive: true, force: true });
  }
});

Deno.test("build-minor.sh refuses a malformed release before touching the cache", async () => {
  const out = await new Deno.Command("bash", {
    args: [join(CLUSTER, "build-minor.sh"), "1.33"],
    env: { AICR_CLUSTER_BIN_CACHE: "/nonexistent/aicr-cache" },
    stderr: "piped",
  }).output();
  assert.equal(out.code, 2);
  assert.match(
    new TextDecoder().decode(out.stderr),
    /expected a Kubernetes release like v1\.33\.13, got '1\.33'/,
  );
});
