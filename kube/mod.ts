/**
 * The Kubernetes adapter: the only importer of `@kubernetes/client-node`. It exposes a
 * narrow {@link KubeClient} and API errors as aicr errors.
 *
 * ```ts ignore
 * const kube = connectKube({ kubeconfig: "~/.kube/config" }, (n) => process.env[n]);
 * const cm = await kube.get("ConfigMap", "default", "aicr-snapshot");
 * ```
 *
 * @module
 */
export * from "./client.ts";
export * from "./errors.ts";
export * from "./resources.ts";
export {
  abortableSleep,
  NoKubeconfigError,
  readContextNamespace,
  ResponseTooLargeError,
} from "./rest.ts";
export type { KubeConfigSource, LineStream, RestClient, RestRequest } from "./rest.ts";
export * from "./ledger.ts";
export { checkNamespace, CREATE_NAMESPACE_CHECK, createNamespaceIfAbsent } from "./namespace.ts";
export type { NamespaceState } from "./namespace.ts";
export { sweepObjects } from "./sweep.ts";
export type { SweepObjectsOptions, SweptObject } from "./sweep.ts";
