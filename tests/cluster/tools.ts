/**
 * The client tools of the chart, manifest and monitoring tests, helm, kubectl and prometheus,
 * built from Go modules by
 * `build-tools.sh` (cached by source hash outside the repository, like the control plane).
 *
 * ```sh
 * deno run -A tests/cluster/tools.ts build   # build once (cold: a few minutes on 2 cores), or print the cached folder
 * ```
 *
 * @module
 */
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const HERE = dirname(fileURLToPath(import.meta.url));

/** Where the tools are. */
export interface Tools {
  /** helm (helm.sh/helm/v4). */
  helm: string;
  /** kubectl (k8s.io/kubectl, the control plane's release). */
  kubectl: string;
  /** prometheus (Go modules, Kubernetes service discovery only). */
  prometheus: string;
}

let built: Promise<Tools> | undefined;

/**
 * Builds helm and kubectl (or finds them cached), once per process, streaming the build's
 * progress to stderr.
 *
 * @returns their paths
 * @throws {Error} when the build fails
 */
export function buildTools(): Promise<Tools> {
  built ??= (async () => {
    const child = new Deno.Command("bash", {
      args: [join(HERE, "build-tools.sh")],
      stdout: "piped",
      stderr: "inherit",
    }).spawn();
    const [status, out] = await Promise.all([child.status, new Response(child.stdout).text()]);
    const dir = out.trim().split("\n").at(-1);
    if (!status.success || !dir) {
      throw new Error(`Cannot build helm and kubectl: build-tools.sh exited with ${status.code}`);
    }
    return {
      helm: join(dir, "helm"),
      kubectl: join(dir, "kubectl"),
      prometheus: join(dir, "prometheus"),
    };
  })();
  return built;
}

if (import.meta.main) {
  if (Deno.args[0] !== "build") {
    // deno-lint-ignore no-console
    console.error("usage: deno run -A tests/cluster/tools.ts build");
    Deno.exit(2);
  }
  const tools = await buildTools();
  // deno-lint-ignore no-console
  console.log(dirname(tools.helm));
}
