/**
 * The e2e lane against another Kubernetes minor than the default (`go.mod`, v1.37.2):
 *
 * ```sh
 * deno task test:k8s -- 1.33        # or 1.30, or a full release: v1.33.13
 * ```
 *
 * builds that release's control plane from Go modules (`tests/cluster/build-minor.sh`: its own cache entry
 * `~/.cache/aicr/testcluster/.k8s-<version>-<hash>/`, which no checkout's pruning removes; cold:
 * 48 min on 2 cores under load), then runs `tests/run.ts` with every cluster (the lane's shared one and
 * the files' own) started from those binaries (`AICR_K8S_VERSION`) and only the e2e lane. It is a
 * documented task, not part of `npm test`.
 *
 * @module
 */
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

/** The default release, built by `build.sh` from `go.mod`. */
export const DEFAULT_K8S_VERSION = "v1.37.2";

/** Oldest and newest minor aicr supports (README: "Supported Kubernetes"). */
export const SUPPORTED_MINORS = { oldest: 30, newest: 37 } as const;

/** The patch release a bare minor means (each served by the Go module proxy). */
export const KNOWN_RELEASES: Readonly<Record<number, string>> = {
  30: "v1.30.14",
  33: "v1.33.13",
  37: DEFAULT_K8S_VERSION,
};

/**
 * Reads the task's argument: a minor (`1.33`, `v1.33`) or a release (`1.33.13`, `v1.33.13`).
 *
 * @param arg the argument
 * @returns the release, `v1.<minor>.<patch>`
 * @throws {Error} naming the argument and what is accepted
 */
export function parseK8sVersion(arg: string | undefined): string {
  const known = Object.entries(KNOWN_RELEASES).map(([m, v]) => `1.${m} (${v})`).join(", ");
  const usage = `give a minor (${known}) or a release like v1.33.13`;
  const m = /^v?1\.(\d+)(?:\.(\d+))?$/.exec((arg ?? "").trim());
  if (!m) throw new Error(`Cannot read the Kubernetes version "${arg ?? ""}": ${usage}`);
  const minor = Number(m[1]);
  if (minor < SUPPORTED_MINORS.oldest || minor > SUPPORTED_MINORS.newest) {
    throw new Error(
      `Kubernetes 1.${minor} is outside the supported range 1.${SUPPORTED_MINORS.oldest}-1.${SUPPORTED_MINORS.newest}: ${usage}`,
    );
  }
  if (m[2] !== undefined) return `v1.${minor}.${Number(m[2])}`;
  const release = KNOWN_RELEASES[minor];
  if (!release) throw new Error(`No known patch release of Kubernetes 1.${minor}: ${usage}`);
  return release;
}

/**
 * The environment that makes every cluster of a run use that release's binaries.
 *
 * @param version the release
 * @returns `AICR_K8S_VERSION` (empty for the default release: `build.sh` as usual)
 */
export function k8sVersionEnv(version: string): Record<string, string> {
  return { AICR_K8S_VERSION: version === DEFAULT_K8S_VERSION ? "" : version };
}

async function main(args: string[]): Promise<number> {
  let version: string;
  try {
    version = parseK8sVersion(args.filter((a) => a !== "--")[0]);
  } catch (e) {
    // deno-lint-ignore no-console
    console.error(`error: ${(e as Error).message}`);
    return 2;
  }
  const root = dirname(dirname(dirname(fileURLToPath(import.meta.url))));
  // deno-lint-ignore no-console
  console.error(`test:k8s: the e2e lane against Kubernetes ${version}`);
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", join(root, "tests", "run.ts")],
    cwd: root,
    env: { ...k8sVersionEnv(version), AICR_SKIP_LANES: "unit,realnode" },
    stdin: "inherit",
    stdout: "inherit",
    stderr: "inherit",
  }).spawn();
  return (await child.status).code;
}

if (import.meta.main) Deno.exitCode = await main(Deno.args);
