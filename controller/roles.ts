/**
 * `aicr snapshot --add-roles-to-service-account <sa>`: writes the RBAC manifests that
 * grant the agent's permissions to an existing ServiceAccount into
 * `./snapshot-rbac-<runID>/`, applies nothing and contacts no cluster.
 *
 * @module
 */
import { mkdir, rename, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { newRunId, validateServiceAccountName } from "../manifests/mod.ts";
import { rbacNextSteps, renderRbacFiles, writeRbacDirectory } from "../rbac/mod.ts";
import { buildInfo } from "../version.ts";
import type { TextWriter } from "../log.ts";

/**
 * Renders and writes the four files, then prints the next steps.
 *
 * @param deps working directory, clock, randomness (the run ID) and stdout
 * @param options the ServiceAccount, namespace and `--discover-network`
 * @returns the directory written
 * @throws {ConflictError} when the directory already exists
 * @throws {UsageError} when the ServiceAccount name is invalid
 */
export async function renderRolesForServiceAccount(
  deps: { cwd: string; now: () => Date; randomHex: () => string; stdout: TextWriter },
  options: {
    serviceAccount: string;
    namespace: string;
    discoverNetwork: boolean;
    outputConfigMap?: string;
  },
): Promise<string> {
  const serviceAccount = validateServiceAccountName("serviceAccount", options.serviceAccount);
  const runId = newRunId(deps.now(), deps.randomHex);
  const rendered = renderRbacFiles({
    namespace: options.namespace,
    serviceAccount,
    runId,
    discoverNetwork: options.discoverNetwork,
    ...(options.outputConfigMap ? { outputConfigMap: options.outputConfigMap } : {}),
    version: buildInfo().version,
  });
  const dir = join(deps.cwd, rendered.directory);
  await writeRbacDirectory(dir, rendered.files, { mkdir, rename, writeFile });
  deps.stdout.write(rbacNextSteps({
    directory: rendered.directory,
    namespace: options.namespace,
    serviceAccount,
    discoverNetwork: options.discoverNetwork,
  }));
  return dir;
}
