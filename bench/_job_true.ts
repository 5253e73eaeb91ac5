/**
 * The floor of one pod run, shared by the benchmarks: create a Job that runs `true` and wait for
 * its Complete condition.
 *
 * @module
 */
import { create, waitFor } from "../tests/cluster/harness.ts";
import type { Api } from "../tests/kubelet/api.ts";

/**
 * Creates a Job running `command` in `image` (tolerating every taint) and waits until it is
 * Complete.
 *
 * @param admin an admin client
 * @param ns namespace
 * @param name Job name
 * @param image the image (the stand-in maps `busybox` to this host's userland)
 * @param command what the container runs
 * @returns milliseconds from create to Complete
 * @throws {Error} when the Job fails or does not complete within 120 s
 */
export async function jobTrue(
  admin: Api,
  ns: string,
  name: string,
  image = "busybox:1.36",
  command: string[] = ["true"],
): Promise<number> {
  const t0 = performance.now();
  await create(admin, `/apis/batch/v1/namespaces/${ns}/jobs`, {
    metadata: { name },
    spec: {
      backoffLimit: 0,
      template: {
        spec: {
          restartPolicy: "Never",
          tolerations: [{ operator: "Exists" }],
          containers: [{ name: "main", image, command }],
        },
      },
    },
  });
  await waitFor(`job ${name} complete`, async () => {
    const res = await admin.request("GET", `/apis/batch/v1/namespaces/${ns}/jobs/${name}`);
    const conds = (res.body.status?.conditions ?? []) as { type: string; status: string }[];
    if (conds.some((c) => c.type === "Failed" && c.status === "True")) {
      throw new Error(`job ${name} failed`);
    }
    return conds.some((c) => c.type === "Complete" && c.status === "True") ? true : undefined;
  }, 120_000);
  return performance.now() - t0;
}
