/**
 * The docs run: every fenced `sh` block the README and `docs/*.md` mark `<!-- runnable -->` is run
 * with bash (`-euo pipefail`), in page order, against the local cluster, so a documented command
 * that stops working fails here, named by page and line.
 *
 * The world the blocks see, as a user's: a scratch HOME and working folder, `KUBECONFIG` the
 * cluster's admin, `PATH` = `~/.local/bin`, the real kubectl (built from Go modules) and the
 * system's folders. No `aicr` is on `PATH` at first: the README's install block installs it from
 * a release-like folder the test stages (`<!-- runnable: release -->`: the built binary under its
 * release name and a `SHA256SUMS` of it, as `deno task release` writes them), and the kubectl
 * plugin block proves `kubectl aicr` through kubectl's own plugin discovery.
 * What a real cluster has that this one has not (an image registry to pull from, real GPUs) is
 * the stand-in's, as in every e2e test.
 */
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { copyFile, mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { createHash } from "node:crypto";
import { dirname, join } from "node:path";
import type { Obj } from "../kubelet/api.ts";
import { type TestCluster, useTestCluster } from "../cluster/harness.ts";
import { buildTools } from "../cluster/tools.ts";
import { runnableBlocks, userPages } from "../_docs.ts";
import { AICR_BIN } from "./_aicr.ts";

/** The namespaces of the cluster, to remove those the blocks made. */
async function namespaces(env: TestCluster): Promise<Set<string>> {
  const res = await env.admin.request("GET", "/api/v1/namespaces");
  return new Set((res.body.items as Obj[]).map((n) => n.metadata.name as string));
}

/** Stages what a release holds for this machine: the binary and SHA256SUMS. */
async function stageRelease(dir: string): Promise<void> {
  const version = await new Deno.Command(AICR_BIN, { args: ["version", "-t", "json"] }).output();
  const info = JSON.parse(new TextDecoder().decode(version.stdout));
  const file = `aicr-${info.version}-linux-amd64`;
  await copyFile(AICR_BIN, join(dir, file));
  const sum = createHash("sha256").update(await readFile(join(dir, file))).digest("hex");
  await writeFile(join(dir, "SHA256SUMS"), `${sum}  ${file}\n`);
}

Deno.test({
  name: "docs: every runnable block of the README and docs/ runs against the local cluster",
  sanitizeOps: false,
  sanitizeResources: false,
  async fn(t) {
    const { kubectl } = await buildTools();
    const env = await useTestCluster();
    const before = await namespaces(env);
    const home = await mkdtemp(join(env.cluster.stateDir, "docs-"));
    const work = join(home, "work");
    await mkdir(join(home, ".local", "bin"), { recursive: true });
    await mkdir(work);
    const blocks = userPages().flatMap(runnableBlocks);
    // The stand-in runs dist/aicr-linux-arm64 on arm64 nodes; without that build the image this
    // test world serves has linux/amd64 only, and says so as an operator of such a mirror would.
    const amd64Only = !existsSync(join(dirname(AICR_BIN), "aicr-linux-arm64"));
    const shellEnv = {
      ...(amd64Only ? { AICR_IMAGE_PLATFORMS: "linux/amd64" } : {}),
      HOME: home,
      KUBECONFIG: env.cluster.adminKubeconfig,
      PATH: [join(home, ".local", "bin"), dirname(kubectl), "/usr/local/bin", "/usr/bin", "/bin"]
        .join(":"),
    };
    try {
      for (const block of blocks) {
        await t.step(`${block.page}:${block.line}`, async () => {
          if (block.needs === "release") await stageRelease(work);
          const out = await new Deno.Command("bash", {
            args: ["-euo", "pipefail", "-c", block.script],
            cwd: work,
            env: shellEnv,
            clearEnv: true,
            stdout: "piped",
            stderr: "piped",
          }).output();
          const text = (b: Uint8Array) => new TextDecoder().decode(b);
          assert.equal(
            out.code,
            0,
            `${block.page}:${block.line} exited ${out.code}\n--- block\n${block.script}--- stdout\n${
              text(out.stdout).slice(-3000)
            }--- stderr\n${text(out.stderr).slice(-3000)}`,
          );
        });
      }
    } finally {
      // What the blocks made: their namespaces (and a DaemonSet's cluster-scoped objects with them).
      for (const ns of await namespaces(env)) {
        if (before.has(ns)) continue;
        await new Deno.Command(AICR_BIN, {
          args: ["daemonset", "uninstall", "-n", ns, "--kubeconfig", env.cluster.adminKubeconfig],
          stdout: "null",
          stderr: "null",
        }).output();
        await env.admin.request("DELETE", `/api/v1/namespaces/${ns}`);
      }
      const roles = await env.admin.request(
        "GET",
        "/apis/rbac.authorization.k8s.io/v1/clusterroles?labelSelector=app.kubernetes.io/component=scheduled-snapshot",
      );
      for (const role of (roles.body.items ?? []) as Obj[]) {
        for (const kind of ["clusterroles", "clusterrolebindings"]) {
          await env.admin.request(
            "DELETE",
            `/apis/rbac.authorization.k8s.io/v1/${kind}/${role.metadata.name}`,
          );
        }
      }
      await rm(home, { recursive: true, force: true });
    }
    assert.ok(blocks.length >= 5, `${blocks.length} runnable blocks`);
  },
});
