/**
 * The README's first command (`deno task demo`): a full `aicr snapshot` against the
 * embedded local cluster. It builds `dist/aicr` and the control plane when needed
 * (with progress), starts the cluster and its kubelet stand-in unless one is already
 * running in `.cluster/`, runs the built binary as the CLI (the pods run it as the
 * agent), and leaves the cluster up for more runs (`deno task cluster:down` stops it).
 *
 * Arguments after `--` go to `aicr snapshot` (e.g. `deno task demo -- --format json`).
 *
 * The demo builds the linux/amd64 binary only (the arm64 one needs qemu-user and a second Node,
 * `deno task build -- --arch all`), so the local cluster publishes the agent image for the
 * platforms found in `dist/` and the run says so with `--image-platforms`: the Job lands on a GPU
 * node of a published architecture instead of failing to pull on the GB200 node, as it would on a
 * real cluster given a single-platform image.
 *
 * @module
 */
import { existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { loadCluster } from "../tests/cluster/cluster.ts";

const ROOT = dirname(dirname(fileURLToPath(import.meta.url)));
const DENO = Deno.execPath();

/**
 * Runs one preparation step (a build, the cluster's start) with everything it prints on
 * stderr: the demo's stdout is the snapshot only, so `deno task demo > snap.yaml` is YAML
 * (the cluster's `export KUBECONFIG=...` line and the build log go to the terminal).
 *
 * @param what the step, as the progress line says it
 * @param args the `deno` arguments
 */
export async function step(what: string, args: string[]): Promise<void> {
  // deno-lint-ignore no-console
  console.error(`demo: ${what}`);
  const child = new Deno.Command(DENO, {
    args,
    cwd: ROOT,
    stdout: "piped",
    stderr: "inherit",
  }).spawn();
  await child.stdout.pipeTo(Deno.stderr.writable, { preventClose: true });
  const status = await child.status;
  if (!status.success) throw new Error(`demo: ${what} failed (exit ${status.code})`);
}

/** `--image-platforms` for the platforms built in `dist/`, unless the caller gave its own. */
export function imagePlatforms(args: readonly string[], root = ROOT): string[] {
  if (args.some((a) => a === "--image-platforms" || a.startsWith("--image-platforms="))) return [];
  if (Deno.env.get("AICR_IMAGE_PLATFORMS")) return [];
  const built = ["linux/amd64"];
  if (existsSync(join(root, "dist", "aicr-linux-arm64"))) built.push("linux/arm64");
  return ["--image-platforms", built.join(",")];
}

async function main(args: string[]): Promise<number> {
  await step("building dist/aicr", ["run", "-A", "scripts/build.ts"]);
  const stateDir = Deno.env.get("AICR_CLUSTER_DIR") ?? join(ROOT, ".cluster");
  let cluster = await loadCluster(stateDir);
  if (!cluster || !existsSync(join(stateDir, "kubelet.json"))) {
    await step("starting the local cluster (the first run builds it from Go modules)", [
      "run",
      "-A",
      "tests/cluster/cluster.ts",
      "up",
    ]);
    cluster = await loadCluster(stateDir);
    if (!cluster) throw new Error(`demo: no cluster found in ${stateDir} after starting it`);
  }
  // deno-lint-ignore no-console
  console.error(
    `demo: aicr snapshot against ${cluster.server} (stop the cluster with: deno task cluster:down)`,
  );
  const aicr = new Deno.Command(join(ROOT, "dist", "aicr"), {
    args: ["snapshot", "--kubeconfig", cluster.adminKubeconfig, ...imagePlatforms(args), ...args],
    stdout: "inherit",
    stderr: "inherit",
  }).spawn();
  return (await aicr.status).code;
}

if (import.meta.main) Deno.exitCode = await main(Deno.args);
