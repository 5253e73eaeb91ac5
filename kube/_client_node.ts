/**
 * The one import of `@kubernetes/client-node`, loaded dynamically by `connection.ts` on a
 * cluster's first use (a named re-export keeps the bundle tree-shaken).
 *
 * @module
 */
export { KubeConfig } from "@kubernetes/client-node";
