/**
 * The daemons' certificate requests, decided and signed the one way: the pure decision
 * (`decide.ts`) and its I/O through the API (`sign.ts`), used by the in-cluster signer
 * (`signer/`) and by the CLI's install and fetch (`controller/`), so both sign exactly the
 * same requests.
 *
 * ```ts ignore
 * const outcome = await signPendingCsrs({ kube, log, now: () => new Date() }, {
 *   namespace: "aicr-system",
 * });
 * ```
 *
 * @module
 */
export { decideCsr, EXTRA_POD_UID, extraValue, isDecided } from "./decide.ts";
export type { CsrObject, DenyReason } from "./decide.ts";
export {
  CSR_PATH,
  deleteDaemonCsrs,
  listSignerCsrs,
  listSignerCsrsWithVersion,
  readDaemonSetAndPods,
  readSignerCa,
  signerCallerChecks,
  signPendingCsrs,
} from "./sign.ts";
export type { SignOutcome } from "./sign.ts";
