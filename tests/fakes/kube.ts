/**
 * An in-memory {@link KubeClient} for unit tests of pure logic (the ledger, the
 * deployer's decisions). It assigns UIDs, honours UID preconditions and label
 * selectors, records every call, and can lose a create's response on demand.
 * Behaviour that touches a real API server is tested against the local cluster.
 *
 * @module
 */
import { KubeApiError, RESOURCES } from "../../kube/mod.ts";
import type { KindName, KubeClient, KubeObject, NewObject } from "../../kube/mod.ts";

/** One recorded call. */
export interface FakeCall {
  /** Method name. */
  method: string;
  /** Kind. */
  kind?: KindName;
  /** Object name. */
  name?: string;
}

/** The fake and its controls. */
export interface FakeKube {
  /** The client to inject. */
  client: KubeClient;
  /** Stored objects by `kind/namespace/name`. */
  objects: Map<string, KubeObject>;
  /** Every call, in order. */
  calls: FakeCall[];
  /** Applies the next create of this kind but throws as if its response was lost. */
  loseNextCreateResponse(kind: KindName): void;
  /** Stores an object directly (someone else created it). */
  put(kind: KindName, object: NewObject & { metadata: { name: string } }): KubeObject;
}

function keyOf(kind: KindName, namespace: string | undefined, name: string): string {
  return `${kind}/${RESOURCES[kind].namespaced ? namespace ?? "" : ""}/${name}`;
}

function matches(
  labels: Record<string, string> | undefined,
  selector: string | undefined,
): boolean {
  if (!selector) return true;
  // Equality terms (`k=v`) and set terms (`k in (a,b)`, `k notin (a,b)`), as the API server
  // reads them.
  const terms = selector.match(/[^,(]+(?:\([^)]*\))?/g) ?? [];
  return terms.every((term) => {
    const set = /^\s*(\S+)\s+(in|notin)\s+\(([^)]*)\)\s*$/.exec(term);
    if (set) {
      const values = (set[3] ?? "").split(",").map((v) => v.trim());
      const found = values.includes(labels?.[set[1] ?? ""] ?? "\u0000");
      return set[2] === "in" ? found : !found;
    }
    const [k, v] = term.split("=");
    return labels?.[k ?? ""] === v;
  });
}

/**
 * Creates the fake.
 *
 * @returns the client and its controls
 */
export function createFakeKube(): FakeKube {
  const objects = new Map<string, KubeObject>();
  const calls: FakeCall[] = [];
  const lose = new Set<KindName>();
  let uid = 0;
  function put(kind: KindName, object: NewObject & { metadata: { name: string } }): KubeObject {
    const stored: KubeObject = {
      ...structuredClone(object),
      metadata: { ...structuredClone(object.metadata), uid: `uid-${++uid}` },
    };
    objects.set(keyOf(kind, object.metadata.namespace, object.metadata.name), stored);
    return structuredClone(stored);
  }
  const notImplemented = (what: string) => () => {
    throw new Error(`FakeKube: ${what} is not faked`);
  };
  const client: KubeClient = {
    server: "https://fake",
    defaultNamespace: undefined,
    rest: {
      server: "https://fake",
      defaultNamespace: undefined,
      json: notImplemented("rest.json"),
      text: notImplemented("rest.text"),
      lines: notImplemented("rest.lines"),
    },
    create(kind, object) {
      const name = object.metadata?.name ?? "";
      calls.push({ method: "create", kind, name });
      const key = keyOf(kind, object.metadata?.namespace, name);
      if (objects.has(key)) {
        return Promise.reject(new KubeApiError(`Cannot create: exists`, 409, "AlreadyExists"));
      }
      const created = put(kind, { ...object, metadata: { ...object.metadata, name } });
      if (lose.delete(kind)) {
        return Promise.reject(
          new KubeApiError("Cannot reach Kubernetes API server", 0, "ConnectionFailure"),
        );
      }
      return Promise.resolve(created);
    },
    get<T extends KubeObject>(kind: KindName, namespace: string | undefined, name: string) {
      calls.push({ method: "get", kind, name });
      const found = objects.get(keyOf(kind, namespace, name));
      return Promise.resolve(found ? structuredClone(found) as T : undefined);
    },
    list<T extends KubeObject>(
      kind: KindName,
      namespace: string | undefined,
      options?: { labelSelector?: string },
    ) {
      calls.push({ method: "list", kind });
      const prefix = `${kind}/${RESOURCES[kind].namespaced ? namespace ?? "" : ""}/`;
      const items = [...objects.entries()]
        .filter(([k, o]) =>
          k.startsWith(prefix) && matches(o.metadata?.labels, options?.labelSelector)
        )
        .map(([, o]) => structuredClone(o) as T);
      return Promise.resolve({ items, resourceVersion: "1" });
    },
    async listAll<T extends KubeObject>(
      kind: KindName,
      namespace: string | undefined,
      options?: { labelSelector?: string },
    ) {
      return (await client.list<T>(kind, namespace, options ?? {})).items;
    },
    deleteIfUid(kind, namespace, name, wantUid) {
      calls.push({ method: "delete", kind, name });
      const key = keyOf(kind, namespace, name);
      const found = objects.get(key);
      if (!found) return Promise.resolve("gone");
      if (found.metadata?.uid !== wantUid) return Promise.resolve("conflict");
      objects.delete(key);
      return Promise.resolve("deleted");
    },
    watch: notImplemented("watch"),
    apply: notImplemented("apply"),
    adoptFields: notImplemented("adoptFields"),
    applyConfigMap: notImplemented("applyConfigMap"),
    updateConfigMapIfUid: notImplemented("updateConfigMapIfUid"),
    podLog: notImplemented("podLog"),
    followPodLog: notImplemented("followPodLog"),
    selfAccessReview: notImplemented("selfAccessReview"),
    subjectAccessReview: notImplemented("subjectAccessReview"),
    tokenReview: notImplemented("tokenReview"),
    serverVersion: notImplemented("serverVersion"),
    discoverResources: notImplemented("discoverResources"),
    listCustomObjects: notImplemented("listCustomObjects"),
  };
  return {
    client,
    objects,
    calls,
    put,
    loseNextCreateResponse(kind) {
      lose.add(kind);
    },
  };
}
