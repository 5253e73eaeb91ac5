/**
 * The in-cluster signer of the daemons' serving certificates (`aicr daemonset signer`): a
 * long-running role like `daemon/`, one leader among its replicas through a Lease, signing with
 * the decision the CLI uses (`csr/`). It never imports `controller/` or `daemon/`.
 *
 * ```ts ignore
 * await runSigner({ kube, log, now: () => new Date() }, {
 *   namespace: "aicr-system",
 *   name: "aicr-daemon",
 *   identity: "aicr-daemon-signer-7d9f-abcde_1a2b3c4d",
 *   signal,
 * });
 * ```
 *
 * @module
 */
export { runSigner } from "./run.ts";
export type { SignerOptions } from "./run.ts";
