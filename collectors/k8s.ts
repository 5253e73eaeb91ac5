/**
 * The K8s collector: `server`, `image`, `policy` and `node` (upstream's four), plus the
 * v1.0.0 detections `slinky`, `mariadb` and `oke`. Reads go through a
 * {@link ClusterReader}; the folding and flattening here is pure.
 *
 * @module
 */
import type { Logger } from "../log.ts";
import type { Measurement, ReadingMap, SourceStatus, Subtype } from "../snapshot/mod.ts";
import { messageOf, statusOf, subtype, throwIfAborted } from "./status.ts";
import type {
  ClusterReader,
  CollectorDeps,
  KubeApiResource,
  KubeDaemonSet,
  KubeNode,
  KubeObject,
  KubePod,
  KubeServerVersion,
  ListOptions,
  ListPage,
} from "./types.ts";

/** The K8s subtypes, in order. */
export const K8S_SUBTYPES = [
  "server",
  "image",
  "policy",
  "node",
  "slinky",
  "mariadb",
  "oke",
] as const;
/** Page size of every list. */
export const LIST_PAGE_SIZE = 500;
/** Upper bound on pages followed, against a server that never stops paginating. */
export const MAX_PAGES = 10_000;
/** Provider-ID prefixes mapped to provider names; others are kept as written. */
export const PROVIDER_NAMES: Readonly<Record<string, string>> = {
  aws: "eks",
  gce: "gke",
  azure: "aks",
  oci: "oke",
};
/** The Slinky API group. */
export const SLINKY_GROUP = "slinky.slurm.net";
/** The Slinky kinds detected, with the allowlisted boolean spec fields of each. */
export const SLINKY_KINDS: Readonly<Record<string, readonly string[]>> = {
  Controller: ["persistence.enabled", "metrics.enabled", "metrics.serviceMonitor.enabled"],
  NodeSet: ["ssh.enabled", "metrics.enabled"],
  LoginSet: ["ssh.enabled"],
  RestApi: [],
  Accounting: ["metrics.enabled"],
};
/** Association (reference) fields read from a Slinky spec: `{name, namespace}` objects. */
export const SLINKY_REFS: readonly string[] = ["controllerRef", "accountingRef"];
/** The official MariaDB operator's API group and kind. */
export const MARIADB_GROUP = "k8s.mariadb.com";
const MARIADB_KIND = "MariaDB";
/** DaemonSet names of OKE's legacy NVIDIA device plugin (in `kube-system`). */
export const OKE_LEGACY_DEVICE_PLUGIN_NAMES: readonly string[] = ["nvidia-gpu-device-plugin"];

/**
 * Shortens an image reference as upstream does: drop everything up to the last `/`,
 * drop `@digest`, then split on the last `:` (no tag means `latest`).
 *
 * @param image e.g. `registry.k8s.io/kube-apiserver:v1.33.5@sha256:…`
 * @returns `[name, tag]`, e.g. `["kube-apiserver", "v1.33.5"]`
 */
export function shortImage(image: string): [string, string] {
  let rest = image.slice(image.lastIndexOf("/") + 1);
  const at = rest.indexOf("@");
  if (at >= 0) rest = rest.slice(0, at);
  const colon = rest.lastIndexOf(":");
  return colon < 0 ? [rest, "latest"] : [rest.slice(0, colon), rest.slice(colon + 1)];
}

/**
 * Folds pods into `image` readings: short name → tag. Pods are taken in
 * namespace/name order and containers, then init, then ephemeral containers, so the
 * "last one wins" rule for colliding names is deterministic.
 *
 * @param pods the pods
 * @returns readings (strings)
 */
export function imageReadings(pods: readonly KubePod[]): ReadingMap {
  const sorted = [...pods].sort((a, b) => {
    const ka = `${a.metadata?.namespace ?? ""}/${a.metadata?.name ?? ""}`;
    const kb = `${b.metadata?.namespace ?? ""}/${b.metadata?.name ?? ""}`;
    return ka < kb ? -1 : ka > kb ? 1 : 0;
  });
  const data: ReadingMap = {};
  for (const pod of sorted) {
    const spec = pod.spec ?? {};
    for (
      const container of [
        ...spec.containers ?? [],
        ...spec.initContainers ?? [],
        ...spec.ephemeralContainers ?? [],
      ]
    ) {
      if (!container.image) continue;
      const [name, tag] = shortImage(container.image);
      if (name !== "") data[name] = tag;
    }
  }
  return data;
}

/**
 * Go-compatible JSON (map keys sorted, no spaces), as `encoding/json` writes it.
 *
 * @param value a JSON value
 * @returns the text
 */
export function goJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(goJson).join(",")}]`;
  if (value !== null && typeof value === "object") {
    const entries = Object.keys(value as Record<string, unknown>).sort().map((key) =>
      `${JSON.stringify(key)}:${goJson((value as Record<string, unknown>)[key])}`
    );
    return `{${entries.join(",")}}`;
  }
  return JSON.stringify(value ?? null);
}

/**
 * Flattens a ClusterPolicy spec into dot-keys: maps recursed, non-empty arrays as Go
 * JSON, empty arrays dropped, scalars as strings, null as `<nil>`.
 *
 * @param spec the spec object
 * @param prefix key prefix (internal)
 * @param out the accumulator (internal)
 * @returns readings (all strings)
 */
export function flattenSpec(spec: unknown, prefix = "", out: ReadingMap = {}): ReadingMap {
  if (spec === null || typeof spec !== "object" || Array.isArray(spec)) return out;
  for (const [key, value] of Object.entries(spec as Record<string, unknown>)) {
    const path = prefix === "" ? key : `${prefix}.${key}`;
    if (Array.isArray(value)) {
      if (value.length > 0) out[path] = goJson(value);
    } else if (value === null || value === undefined) {
      out[path] = "<nil>";
    } else if (typeof value === "object") {
      flattenSpec(value, path, out);
    } else {
      out[path] = String(value);
    }
  }
  return out;
}

/**
 * Maps a provider ID to a provider name.
 *
 * @param providerId e.g. `aws:///us-west-2a/i-0123`
 * @returns e.g. `eks`; the raw lower-cased prefix when unknown; `""` when empty
 */
export function providerOf(providerId: string): string {
  if (providerId === "") return "";
  const sep = providerId.indexOf("://");
  const prefix = (sep < 0 ? providerId : providerId.slice(0, sep)).toLowerCase();
  return PROVIDER_NAMES[prefix] ?? prefix;
}

/**
 * Builds `node` readings; keys appear only when their source is non-empty.
 *
 * @param node the node object
 * @param nodeName the name asked for
 * @returns readings (strings)
 */
export function nodeReadings(node: KubeNode, nodeName: string): ReadingMap {
  const data: ReadingMap = {};
  function set(key: string, value: string | undefined): void {
    if (value) data[key] = value;
  }
  const info = node.status?.nodeInfo ?? {};
  const providerId = node.spec?.providerID ?? "";
  set("source-node", nodeName);
  set("provider", providerOf(providerId));
  set("provider-id", providerId);
  const runtime = info.containerRuntimeVersion ?? "";
  set("container-runtime-id", runtime);
  const sep = runtime.indexOf("://");
  if (sep >= 0) {
    set("container-runtime-name", runtime.slice(0, sep));
    set("container-runtime-version", runtime.slice(sep + 3));
  }
  set("kubelet-version", info.kubeletVersion);
  set("kernel-version", info.kernelVersion);
  set("operating-system", info.operatingSystem);
  set("os-image", info.osImage);
  return data;
}

/**
 * Follows continue tokens to the end.
 *
 * @param list one page call
 * @param options signal
 * @returns every item
 * @throws whatever the page call throws
 */
export async function listAll<T>(
  list: (options: ListOptions) => Promise<ListPage<T>>,
  options: { signal?: AbortSignal } = {},
): Promise<T[]> {
  const items: T[] = [];
  let token: string | undefined;
  for (let page = 0; page < MAX_PAGES; page++) {
    throwIfAborted(options.signal, "a list");
    const request: ListOptions = { limit: LIST_PAGE_SIZE };
    if (token) request.continue = token;
    if (options.signal) request.signal = options.signal;
    const result = await list(request);
    items.push(...result.items);
    token = result.continue;
    if (!token) return items;
  }
  return items;
}

function byName(a: KubeObject, b: KubeObject): number {
  const ka = `${a.metadata?.namespace ?? ""}/${a.metadata?.name ?? ""}`;
  const kb = `${b.metadata?.namespace ?? ""}/${b.metadata?.name ?? ""}`;
  return ka < kb ? -1 : ka > kb ? 1 : 0;
}

function objectId(object: KubeObject): string {
  const name = object.metadata?.name ?? "";
  return object.metadata?.namespace ? `${object.metadata.namespace}/${name}` : name;
}

function valueAt(root: unknown, path: string): unknown {
  let current = root;
  for (const step of path.split(".")) {
    if (current === null || typeof current !== "object") return undefined;
    current = (current as Record<string, unknown>)[step];
  }
  return current;
}

/**
 * Projects Slinky CRs to allowlisted readings: `<kind>.count`, and per object
 * `<kind>.<ns>/<name>.apiVersion`, `.<ref>` (`<ns>/<name>` of controllerRef and
 * accountingRef) and the allowlisted booleans. Nothing free-form is copied.
 *
 * @param objects CRs by kind
 * @returns readings
 */
export function slinkyReadings(
  objects: Readonly<Record<string, readonly KubeObject[]>>,
): ReadingMap {
  const data: ReadingMap = {};
  for (const [kind, fields] of Object.entries(SLINKY_KINDS)) {
    const list = objects[kind];
    if (list === undefined) continue;
    const prefix = kind.toLowerCase();
    data[`${prefix}.count`] = list.length;
    for (const object of [...list].sort(byName)) {
      const id = `${prefix}.${objectId(object)}`;
      data[`${id}.apiVersion`] = object.apiVersion ?? "";
      for (const ref of SLINKY_REFS) {
        const value = valueAt(object.spec, ref) as
          | { name?: unknown; namespace?: unknown }
          | undefined;
        if (value && typeof value.name === "string" && value.name !== "") {
          const ns = typeof value.namespace === "string" && value.namespace !== ""
            ? value.namespace
            : object.metadata?.namespace ?? "";
          data[`${id}.${ref}`] = ns ? `${ns}/${value.name}` : value.name;
        }
      }
      for (const field of fields) {
        const value = valueAt(object.spec, field);
        if (typeof value === "boolean") data[`${id}.${field}`] = value;
      }
    }
  }
  return data;
}

/**
 * Detects OKE's legacy NVIDIA device plugin among DaemonSets.
 *
 * @param daemonSets every DaemonSet
 * @returns `legacy-device-plugin` (bool) and, when found, its `daemonset` and `image` tag
 */
export function okeReadings(daemonSets: readonly KubeDaemonSet[]): ReadingMap {
  const found = daemonSets.filter((ds) =>
    ds.metadata?.namespace === "kube-system" &&
    OKE_LEGACY_DEVICE_PLUGIN_NAMES.includes(ds.metadata?.name ?? "")
  );
  const data: ReadingMap = { "legacy-device-plugin": found.length > 0 };
  const first = found[0];
  if (first) {
    data["legacy-device-plugin.daemonset"] = `${first.metadata?.namespace}/${first.metadata?.name}`;
    const image = first.spec?.template?.spec?.containers?.[0]?.image;
    if (image) data["legacy-device-plugin.image"] = shortImage(image)[1];
  }
  return data;
}

/**
 * The K8s measurement without a client or after a whole-collector failure.
 *
 * @param status why
 * @param message one line of detail
 * @returns every K8s subtype with `data: {}` and the status
 */
export function k8sUnavailable(status: SourceStatus, message: string): Measurement {
  return {
    type: "K8s",
    subtypes: K8S_SUBTYPES.map((name) => subtype(name, {}, status, "kubernetes", message)),
  };
}

async function step(
  name: string,
  source: string,
  read: () => Promise<ReadingMap>,
  onError: (error: unknown) => ReadingMap = () => ({}),
): Promise<Subtype> {
  try {
    return subtype(name, await read(), "ok", source);
  } catch (error) {
    return subtype(name, onError(error), statusOf(error), source, messageOf(error));
  }
}

function findResources(
  resources: readonly KubeApiResource[],
  group: string | undefined,
  kind: string,
): KubeApiResource[] {
  return resources
    .filter((r) =>
      r.kind === kind && !r.plural.includes("/") && (group === undefined || r.group === group)
    )
    .sort((a, b) => (a.group < b.group ? -1 : a.group > b.group ? 1 : 0));
}

/** The cluster reads the K8s subtypes share: one API discovery per collection. */
interface K8sReads {
  cluster: ClusterReader;
  signal: AbortSignal | undefined;
  listOptions: { signal?: AbortSignal };
  /** The served API resources (discovered once, on first use). */
  resources(): Promise<KubeApiResource[]>;
  /** Every object of a custom kind, or undefined when its group does not serve it. */
  customObjects(group: string, kind: string): Promise<KubeObject[] | undefined>;
}

function createK8sReads(cluster: ClusterReader, signal: AbortSignal | undefined): K8sReads {
  const listOptions = signal ? { signal } : {};
  let discovery: Promise<KubeApiResource[]> | undefined;
  function resources(): Promise<KubeApiResource[]> {
    discovery ??= cluster.listApiResources(signal);
    return discovery;
  }
  async function customObjects(group: string, kind: string): Promise<KubeObject[] | undefined> {
    const found = findResources(await resources(), group, kind)[0];
    if (found === undefined) return undefined;
    return await listAll(
      (o) => cluster.listCustomObjects(found.group, found.version, found.plural, o),
      listOptions,
    );
  }
  return { cluster, signal, listOptions, resources, customObjects };
}

/** Every ClusterPolicy's spec, flattened (any group; a group that fails to list is skipped). */
async function readClusterPolicies(reads: K8sReads, log: Logger): Promise<ReadingMap> {
  const data: ReadingMap = {};
  for (const resource of findResources(await reads.resources(), undefined, "ClusterPolicy")) {
    let items: KubeObject[];
    try {
      items = await listAll(
        (o) =>
          reads.cluster.listCustomObjects(resource.group, resource.version, resource.plural, o),
        reads.listOptions,
      );
    } catch (error) {
      log.debug("ClusterPolicy list skipped", {
        group: resource.group,
        error: messageOf(error),
      });
      continue;
    }
    for (const item of items.sort(byName)) flattenSpec(item.spec, "", data);
  }
  return data;
}

async function readNodeSubtype(reads: K8sReads, nodeName: string): Promise<Subtype> {
  const source = `GET /api/v1/nodes/${nodeName}`;
  if (nodeName === "") {
    return subtype(
      "node",
      {},
      "absent",
      source,
      "Cannot read the node: no node name (NODE_NAME, KUBERNETES_NODE_NAME, HOSTNAME)",
    );
  }
  return await step(
    "node",
    source,
    async () => nodeReadings(await reads.cluster.getNode(nodeName, reads.signal), nodeName),
  );
}

async function readSlinky(reads: K8sReads): Promise<Subtype> {
  const source = `LIST ${SLINKY_GROUP}`;
  try {
    const objects: Record<string, KubeObject[]> = {};
    for (const kind of Object.keys(SLINKY_KINDS)) {
      const list = await reads.customObjects(SLINKY_GROUP, kind);
      if (list !== undefined) objects[kind] = list;
    }
    if (Object.keys(objects).length === 0) {
      return subtype(
        "slinky",
        {},
        "absent",
        source,
        `Cannot find Slinky: the API group '${SLINKY_GROUP}' is not served`,
      );
    }
    return subtype("slinky", slinkyReadings(objects), "ok", source);
  } catch (error) {
    return subtype("slinky", {}, statusOf(error), source, messageOf(error));
  }
}

async function readMariadb(reads: K8sReads): Promise<Subtype> {
  const source = `LIST ${MARIADB_GROUP} ${MARIADB_KIND}`;
  try {
    const list = await reads.customObjects(MARIADB_GROUP, MARIADB_KIND);
    if (list === undefined) {
      return subtype(
        "mariadb",
        { present: false },
        "absent",
        source,
        `Cannot find MariaDB: the API group '${MARIADB_GROUP}' is not served`,
      );
    }
    const data: ReadingMap = { present: list.length > 0, count: list.length };
    for (const object of [...list].sort(byName)) data[objectId(object)] = true;
    return subtype("mariadb", data, "ok", source);
  } catch (error) {
    return subtype("mariadb", {}, statusOf(error), source, messageOf(error));
  }
}

/**
 * Reads every K8s subtype. Never throws: each failing read gives its subtype with
 * `data: {}` (server: null values, as upstream) and a non-ok status.
 *
 * @param deps the cluster reader and logger
 * @param options node name and signal
 * @returns the measurement, subtypes in {@link K8S_SUBTYPES} order
 */
export async function collectK8s(
  deps: Pick<CollectorDeps, "cluster" | "log">,
  options: { nodeName: string; signal?: AbortSignal },
): Promise<Measurement> {
  const cluster: ClusterReader | undefined = deps.cluster;
  if (cluster === undefined) {
    return k8sUnavailable(
      "absent",
      "Cannot read the Kubernetes API: no client (no kubeconfig, not in a cluster)",
    );
  }
  const { signal, nodeName } = options;
  const reads = createK8sReads(cluster, signal);
  const { listOptions } = reads;

  const subtypes = await Promise.all([
    step("server", "GET /version", async () => {
      const version: KubeServerVersion = await cluster.serverVersion(signal);
      return {
        version: version.gitVersion ?? null,
        platform: version.platform ?? null,
        goVersion: version.goVersion ?? null,
      };
    }, () => ({ version: null, platform: null, goVersion: null })),
    step(
      "image",
      "LIST /api/v1/pods",
      async () => imageReadings(await listAll((o) => cluster.listPods(o), listOptions)),
    ),
    step(
      "policy",
      "LIST kind ClusterPolicy (any group)",
      () => readClusterPolicies(reads, deps.log),
    ),
    readNodeSubtype(reads, nodeName),
    readSlinky(reads),
    readMariadb(reads),
    step(
      "oke",
      "LIST apps/v1 daemonsets",
      async () => okeReadings(await listAll((o) => cluster.listDaemonSets(o), listOptions)),
    ),
  ]);
  return { type: "K8s", subtypes };
}
