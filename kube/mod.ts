/**
 * The Kubernetes adapter: the only importer of `@kubernetes/client-node`. It exposes a
 * narrow {@link KubeClient} and API errors as aicr errors.
 *
 * ```ts ignore
 * const kube = connectKube({ kubeconfig: "~/.kube/config" }, (n) => process.env[n]);
 * const cm = await kube.get("ConfigMap", "default", "aicr-snapshot");
 * ```
 *
 * Only what callers outside the folder use is exported here (named); each file's other exports
 * serve its siblings and its tests.
 *
 * @module
 */
export { connectKube } from "./client.ts";
export type { AccessAttributes, KubeClient, KubeObject, NewObject, ObjectMeta } from "./client.ts";
export { KubeApiError, UNREACHABLE_HINTS, UNTRUSTED_CERTIFICATE_REASON } from "./errors.ts";
export { RESOURCES } from "./resources.ts";
export type { KindName } from "./resources.ts";
export { NoKubeconfigError, readContextNamespace } from "./kubeconfig.ts";
export type { KubeConfigSource } from "./kubeconfig.ts";
export { ResponseTooLargeError } from "./rest.ts";
export type { LineStream, RestRequest } from "./rest.ts";
export type { ConnectionInfo } from "./h2.ts";
export { DELETE_ORDER, Ledger } from "./ledger.ts";
export type { LedgerEntry } from "./ledger.ts";
export {
  checkNamespace,
  CREATE_NAMESPACE_CHECK,
  createNamespaceIfAbsent,
  namespaceNames,
} from "./namespace.ts";
export { sweepObjects } from "./sweep.ts";
export type { SweptObject } from "./sweep.ts";
