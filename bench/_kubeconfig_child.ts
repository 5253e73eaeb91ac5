/**
 * Child of `second_paths_bench.ts`: in a fresh process, loads one kubeconfig through one path
 * (`native`: the narrow loader; `client-node`: `@kubernetes/client-node`) and applies it to one
 * request, then prints the milliseconds that took, so the cost includes evaluating the library.
 *
 * @module
 */
import { clientNodeConnection, nativeConnection } from "../kube/connection.ts";
import { mergeKubeConfigs, selectContext } from "../kube/kubeconfig.ts";

const [path = "native", file = ""] = Deno.args;
const started = performance.now();
const { parse } = await import("yaml");
const selected = selectContext(
  mergeKubeConfigs([{ path: file, document: parse(Deno.readTextFileSync(file)) }]),
  undefined,
);
const connection = path === "client-node"
  ? await clientNodeConnection(selected)
  : nativeConnection(selected);
await connection.apply({});
Deno.stdout.writeSync(new TextEncoder().encode(`${performance.now() - started}\n`));
