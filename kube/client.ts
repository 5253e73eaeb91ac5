/**
 * The narrow Kubernetes client aicr uses: the calls we make, nothing more, over the
 * transport in `rest.ts`. Everything above floor 1 depends on {@link KubeClient},
 * never on `@kubernetes/client-node` types.
 *
 * @module
 */
import { ConflictError, NotFoundError } from "../errors.ts";
import { KubeApiError } from "./errors.ts";
import { bearerConnection, loadKubeConfig } from "./connection.ts";
import { planKubeConfig } from "./kubeconfig.ts";
import type { KubeConfigSource } from "./kubeconfig.ts";
import { createLazyRestClient, restWithSignal } from "./rest.ts";
import type { LineStream, Query, RestClient, RestClientOptions } from "./rest.ts";
import { apiVersionOf, collectionPath, objectPath, RESOURCES } from "./resources.ts";
import type { KindName, ResourceType } from "./resources.ts";

/** An owner reference. */
export interface OwnerReference {
  /** Owner apiVersion. */
  apiVersion: string;
  /** Owner kind. */
  kind: string;
  /** Owner name. */
  name: string;
  /** Owner UID. */
  uid: string;
  /** Whether the owner is the managing controller. */
  controller?: boolean;
}

/** Object metadata, the fields aicr reads. */
export interface ObjectMeta {
  /** Name. */
  name?: string;
  /** Namespace. */
  namespace?: string;
  /** UID assigned by the API server. */
  uid?: string;
  /** Labels. */
  labels?: Record<string, string>;
  /** Annotations. */
  annotations?: Record<string, string>;
  /** Resource version. */
  resourceVersion?: string;
  /** Set when deletion started. */
  deletionTimestamp?: string;
  /** Creation time. */
  creationTimestamp?: string;
  /** Owners. */
  ownerReferences?: OwnerReference[];
  /** Which manager owns which fields (server-side apply). */
  managedFields?: unknown[];
}

/** Any Kubernetes object. */
export interface KubeObject {
  /** apiVersion. */
  apiVersion?: string;
  /** kind. */
  kind?: string;
  /** metadata. */
  metadata?: ObjectMeta;
  /** Everything else. */
  [field: string]: unknown;
}

/** An object to create: any manifest with metadata (name, namespace, labels). */
export interface NewObject {
  /** metadata. */
  metadata?: ObjectMeta;
}

/** One page of a list. */
export interface ListResult<T> {
  /** The objects. */
  items: T[];
  /** Continue token for the next page, if any. */
  continue?: string;
  /** Resource version of the list (start a watch from it). */
  resourceVersion: string;
}

/** One watch event. */
export interface WatchEvent<T> {
  /** Event type. */
  type: "ADDED" | "MODIFIED" | "DELETED" | "BOOKMARK" | "ERROR";
  /** The object (a Status for ERROR). */
  object: T;
}

/** Options shared by calls. */
export interface CallOptions {
  /** Cancels the call. */
  signal?: AbortSignal;
  /** Per-attempt timeout. */
  timeoutMs?: number;
  /** Retries after the first attempt, instead of the client's own (0: the caller retries). */
  retries?: number;
}

/** Options for list and watch. */
export interface ListOptions extends CallOptions {
  /** Label selector. */
  labelSelector?: string;
  /** Field selector. */
  fieldSelector?: string;
  /** Page size. */
  limit?: number;
  /** Continue token. */
  continue?: string;
}

/** Options for watch. */
export interface WatchOptions extends ListOptions {
  /** Start after this resource version. */
  resourceVersion?: string;
  /** Server-side timeout of the watch. */
  timeoutSeconds?: number;
}

/**
 * One access question (`kubectl auth can-i`, the `resourceAttributes` of a (Self)SubjectAccessReview):
 * the one type the gate, the rule set, the daemon's authorizer and the client share.
 */
export interface AccessAttributes {
  /** Verb, e.g. `create`. */
  verb: string;
  /** API group, `""` for core. */
  group?: string;
  /** Resource plural, e.g. `jobs`. */
  resource: string;
  /** Subresource, e.g. `log`. */
  subresource?: string;
  /** Namespace; omitted for cluster scope. */
  namespace?: string;
  /** Object name. */
  name?: string;
}

/** The answer of an access review. */
export interface AccessDecision {
  /** Whether allowed. */
  allowed: boolean;
  /** The authorizer's reason, if any. */
  reason?: string;
}

/** A user as TokenReview reports it. */
export interface ReviewedUser {
  /** Username. */
  username: string;
  /** UID. */
  uid?: string;
  /** Groups. */
  groups: string[];
  /** Extra attributes. */
  extra?: Record<string, string[]>;
}

/** What aicr asks of the Kubernetes API. */
export interface KubeClient {
  /** API server URL. */
  readonly server: string;
  /** The kubeconfig context's namespace, if set. */
  readonly defaultNamespace: string | undefined;
  /** Creates an object; the response carries its UID. Never retried. */
  create(kind: KindName, object: NewObject, options?: CallOptions): Promise<KubeObject>;
  /** Reads an object; undefined when it does not exist. */
  get<T extends KubeObject>(
    kind: KindName,
    namespace: string | undefined,
    name: string,
    options?: CallOptions,
  ): Promise<T | undefined>;
  /** Lists one page. */
  list<T extends KubeObject>(
    kind: KindName,
    namespace: string | undefined,
    options?: ListOptions,
  ): Promise<ListResult<T>>;
  /** Lists every page. */
  listAll<T extends KubeObject>(
    kind: KindName,
    namespace: string | undefined,
    options?: ListOptions,
  ): Promise<T[]>;
  /**
   * Deletes an object only if its UID still matches (`preconditions.uid`).
   * Returns `deleted`, `gone` (404) or `conflict` (another object holds the name).
   */
  deleteIfUid(
    kind: KindName,
    namespace: string | undefined,
    name: string,
    uid: string,
    options?: CallOptions & {
      propagationPolicy?: "Background" | "Foreground" | "Orphan";
      /** The grace period of the delete (0: at once, without the kubelet's confirmation). */
      gracePeriodSeconds?: number;
    },
  ): Promise<"deleted" | "gone" | "conflict">;
  /** Watches objects; iterate, and break or abort the signal to stop. */
  watch<T extends KubeObject>(
    kind: KindName,
    namespace: string | undefined,
    options?: WatchOptions,
  ): Promise<AsyncIterable<WatchEvent<T>> & { close(): void }>;
  /**
   * Server-side applies any object (field manager `aicr`, forced): creates it, or makes the
   * fields this manager owns exactly the ones given (those it no longer sets are removed).
   */
  apply(kind: KindName, object: NewObject, options?: CallOptions): Promise<KubeObject>;
  /**
   * Moves the fields this manager owns through creates and updates to its apply entry (what
   * kubectl's client-side to server-side apply upgrade does), so that a later {@link apply}
   * also removes what the create set and the apply no longer does. Returns false when there was
   * nothing to move (already applied, or the object is gone).
   */
  adoptFields(
    kind: KindName,
    namespace: string | undefined,
    name: string,
    options?: CallOptions,
  ): Promise<boolean>;
  /** Server-side applies a ConfigMap (create or update, field manager `aicr`, forced). */
  applyConfigMap(
    namespace: string,
    name: string,
    content: {
      labels: Record<string, string>;
      /** Annotations set over the current ones (absent: the current ones kept). */
      annotations?: Record<string, string>;
      data: Record<string, string>;
    },
    options?: CallOptions,
  ): Promise<KubeObject>;
  /**
   * Writes a ConfigMap only if it is the object of this UID: reads it, refuses a missing
   * or replaced one, and updates it pinned to the UID it read (never creates). Its own
   * labels are kept; `content.labels` only adds missing ones.
   */
  updateConfigMapIfUid(
    namespace: string,
    name: string,
    uid: string,
    content: {
      labels: Record<string, string>;
      /** Annotations set over the current ones (absent: the current ones kept). */
      annotations?: Record<string, string>;
      data: Record<string, string>;
    },
    options?: CallOptions,
  ): Promise<KubeObject>;
  /** Reads a container's log. */
  podLog(
    namespace: string,
    name: string,
    options?: CallOptions & { container?: string; tailLines?: number; limitBytes?: number },
  ): Promise<string>;
  /** Follows a container's log line by line. */
  followPodLog(
    namespace: string,
    name: string,
    options?: CallOptions & { container?: string; sinceTime?: string },
  ): Promise<LineStream>;
  /** Asks whether the caller may do something (SelfSubjectAccessReview). */
  selfAccessReview(attributes: AccessAttributes, options?: CallOptions): Promise<AccessDecision>;
  /** Asks whether a user may do something (SubjectAccessReview). */
  subjectAccessReview(
    user: { username: string; groups?: string[]; uid?: string; extra?: Record<string, string[]> },
    attributes: AccessAttributes,
    options?: CallOptions,
  ): Promise<AccessDecision>;
  /** Authenticates a bearer token (TokenReview). */
  tokenReview(
    token: string,
    options?: CallOptions & { audiences?: string[] },
  ): Promise<{ authenticated: boolean; user?: ReviewedUser; error?: string }>;
  /** The server's `/version`. */
  serverVersion(options?: CallOptions): Promise<Record<string, string>>;
  /** The preferred version of every API resource (discovery). */
  discoverResources(options?: CallOptions): Promise<DiscoveredResource[]>;
  /** Lists custom objects cluster-wide (all pages). */
  listCustomObjects(
    resource: { group: string; version: string; plural: string },
    options?: ListOptions,
  ): Promise<KubeObject[]>;
  /** The transport, for calls not covered here. */
  readonly rest: RestClient;
  /**
   * A client of the same server and trust speaking with `token` alone, not the kubeconfig's
   * credentials (a ServiceAccount's TokenRequest token). Absent where the transport has no
   * kubeconfig behind it (test fakes).
   */
  withBearerToken?(token: string): KubeClient;
  /**
   * The same client over the same connection, whose requests without a signal of their own end
   * when `signal` aborts (a verb's reads that SIGINT/SIGTERM may cut). Absent in test fakes.
   */
  withSignal?(signal: AbortSignal): KubeClient;
}

/** One resource found by discovery. */
export interface DiscoveredResource {
  /** API group. */
  group: string;
  /** Preferred version. */
  version: string;
  /** Plural name. */
  plural: string;
  /** Kind. */
  kind: string;
  /** Namespaced or cluster-scoped. */
  namespaced: boolean;
  /** Verbs. */
  verbs: string[];
}

/** Options for {@link createKubeClient}. */
export interface KubeClientOptions extends RestClientOptions {
  /** Field manager for server-side apply. @default "aicr" */
  fieldManager?: string;
}

/**
 * Connects to the cluster a kubeconfig names.
 *
 * @param source kubeconfig path, context or in-cluster
 * @param env environment lookup
 * @param options retry policy and field manager
 * @returns the client
 * @throws {NoKubeconfigError} when there is no kubeconfig and this is not a pod (a kubeconfig
 *   that cannot be loaded fails the first call with a {@link UsageError})
 */
export function connectKube(
  source: KubeConfigSource,
  env: (name: string) => string | undefined,
  options: KubeClientOptions = {},
): KubeClient {
  // Fails now when there is no kubeconfig at all; loads it on the first call.
  planKubeConfig(source, env);
  const client = createKubeClient(
    createLazyRestClient(() => loadKubeConfig(source, env), options),
    options,
  );
  client.withBearerToken = (token) =>
    createKubeClient(
      createLazyRestClient(
        async () => bearerConnection(await loadKubeConfig(source, env), token),
        options,
      ),
      options,
    );
  return client;
}

/**
 * Builds the client over a transport.
 *
 * @param rest the transport
 * @param options field manager
 * @returns the client
 */
export function createKubeClient(rest: RestClient, options: KubeClientOptions = {}): KubeClient {
  const { fieldManager = "aicr" } = options;

  return {
    get server() {
      return rest.server;
    },
    get defaultNamespace() {
      return rest.defaultNamespace;
    },
    rest,
    withSignal: (signal) => createKubeClient(restWithSignal(rest, signal), options),
    ...objectCalls(rest, fieldManager),
    ...applyCalls(rest, fieldManager),
    ...streamAndApplyCalls(rest, fieldManager),
    ...podLogCalls(rest),
    ...reviewCalls(rest),
    ...discoveryCalls(rest),
  };
}

/** Create, get, list and the UID-pinned delete of any kind. */
function objectCalls(
  rest: RestClient,
  fieldManager: string,
): Pick<KubeClient, "create" | "get" | "list" | "listAll" | "deleteIfUid"> {
  const list = <T extends KubeObject>(
    kind: KindName,
    namespace: string | undefined,
    options?: ListOptions,
  ) => listPage<T>(rest, kind, namespace, options);

  return {
    async create(kind: KindName, object: NewObject, options?: CallOptions) {
      const resource = res(kind);
      const body = { apiVersion: apiVersionOf(resource), kind: resource.kind, ...object };
      return await rest.json<KubeObject>({
        method: "POST",
        path: collectionPath(resource, ns(resource, object.metadata?.namespace)),
        // The same manager as apply: an upgrade's apply then owns what the create set.
        query: { fieldManager },
        body,
        idempotent: false,
        ...call(options),
      });
    },
    async get<T extends KubeObject>(
      kind: KindName,
      namespace: string | undefined,
      name: string,
      options?: CallOptions,
    ) {
      const resource = res(kind);
      try {
        return await rest.json<T>({
          method: "GET",
          path: objectPath(resource, ns(resource, namespace), name),
          ...call(options),
        });
      } catch (error) {
        if (error instanceof KubeApiError && error.isNotFound) return undefined;
        throw error;
      }
    },
    list,
    listAll<T extends KubeObject>(
      kind: KindName,
      namespace: string | undefined,
      options?: ListOptions,
    ) {
      return pages<T>((token) =>
        list<T>(kind, namespace, { limit: 500, ...options, ...(token ? { continue: token } : {}) })
      );
    },
    async deleteIfUid(kind, namespace, name, uid, options) {
      const resource = res(kind);
      try {
        await rest.json({
          method: "DELETE",
          path: objectPath(resource, ns(resource, namespace), name),
          body: deleteOptions(uid, options),
          // A UID-pinned delete is safe to resend: it can only ever remove that one object.
          idempotent: true,
          ...call(options),
        });
        return "deleted";
      } catch (error) {
        if (error instanceof KubeApiError && error.isNotFound) return "gone";
        if (error instanceof KubeApiError && error.status === 409) return "conflict";
        throw error;
      }
    },
  };
}

/** The DeleteOptions of a UID-pinned delete. */
function deleteOptions(
  uid: string,
  options: Parameters<KubeClient["deleteIfUid"]>[4],
): Record<string, unknown> {
  return {
    apiVersion: "v1",
    kind: "DeleteOptions",
    // guard: uid-delete: the delete removes only the object of this UID
    preconditions: { uid },
    ...(options?.propagationPolicy ? { propagationPolicy: options.propagationPolicy } : {}),
    ...(options?.gracePeriodSeconds !== undefined
      ? { gracePeriodSeconds: options.gracePeriodSeconds }
      : {}),
  };
}

/** The server's version, its resources, and custom objects. */
function discoveryCalls(
  rest: RestClient,
): Pick<KubeClient, "serverVersion" | "discoverResources" | "listCustomObjects"> {
  return {
    async serverVersion(options) {
      return await rest.json<Record<string, string>>({
        method: "GET",
        path: "/version",
        ...call(options),
      });
    },
    async discoverResources(options) {
      return await discover(rest, call(options));
    },
    listCustomObjects(resource, options) {
      const path = `/apis/${resource.group}/${resource.version}/${resource.plural}`;
      return pages<KubeObject>(async (token) => {
        const body = await rest.json<{ items?: KubeObject[]; metadata?: { continue?: string } }>({
          method: "GET",
          path,
          query: { ...listQuery(options), limit: options?.limit ?? 500, continue: token },
          ...call(options),
        });
        const out: ListResult<KubeObject> = { items: body.items ?? [], resourceVersion: "" };
        if (body.metadata?.continue) out.continue = body.metadata.continue;
        return out;
      });
    },
  };
}

/** Reads every page of a paged list. */
async function pages<T extends KubeObject>(
  fetchPage: (token: string | undefined) => Promise<ListResult<T>>,
): Promise<T[]> {
  const items: T[] = [];
  let token: string | undefined;
  do {
    const page = await fetchPage(token);
    items.push(...page.items);
    token = page.continue;
  } while (token);
  return items;
}

/** Lists one page of a kind. */
async function listPage<T extends KubeObject>(
  rest: RestClient,
  kind: KindName,
  namespace: string | undefined,
  options?: ListOptions,
): Promise<ListResult<T>> {
  const resource = res(kind);
  const body = await rest.json<
    { items?: T[]; metadata?: { continue?: string; resourceVersion?: string } }
  >({
    method: "GET",
    path: collectionPath(resource, ns(resource, namespace)),
    query: listQuery(options),
    ...call(options),
  });
  const out: ListResult<T> = {
    items: body.items ?? [],
    resourceVersion: body.metadata?.resourceVersion ?? "",
  };
  if (body.metadata?.continue) out.continue = body.metadata.continue;
  return out;
}

/** One entry of `metadata.managedFields`. */
interface ManagedFieldsEntry {
  manager?: string;
  operation?: string;
  apiVersion?: string;
  subresource?: string;
  [field: string]: unknown;
}

/** Server-side apply of any kind, and the move of created fields to the apply entry. */
function applyCalls(
  rest: RestClient,
  fieldManager: string,
): Pick<KubeClient, "apply" | "adoptFields"> {
  return {
    async apply(kind, object, options) {
      const resource = res(kind);
      return await rest.json<KubeObject>({
        method: "PATCH",
        path: objectPath(
          resource,
          ns(resource, object.metadata?.namespace),
          object.metadata?.name ?? "",
        ),
        query: { fieldManager, force: true },
        contentType: "application/apply-patch+yaml",
        body: { ...object, apiVersion: apiVersionOf(resource), kind: resource.kind },
        // Server-side apply is idempotent: sending the same intent twice converges.
        idempotent: true,
        ...call(options),
      });
    },
    async adoptFields(kind, namespace, name, options) {
      const resource = res(kind);
      const path = objectPath(resource, ns(resource, namespace), name);
      let current: KubeObject;
      try {
        current = await rest.json<KubeObject>({ method: "GET", path, ...call(options) });
      } catch (error) {
        if (error instanceof KubeApiError && error.isNotFound) return false;
        throw error;
      }
      const entries = (current.metadata?.managedFields ?? []) as ManagedFieldsEntry[];
      const mine = (e: ManagedFieldsEntry) =>
        e.manager === fieldManager && e.subresource === undefined;
      if (entries.some((e) => mine(e) && e.operation === "Apply")) return false;
      const created = entries.findIndex((e) => mine(e) && e.operation === "Update");
      if (created < 0) return false;
      const moved = entries.map((e, i) => i === created ? { ...e, operation: "Apply" } : e);
      await rest.json<KubeObject>({
        method: "PATCH",
        path,
        contentType: "application/merge-patch+json",
        // Pinned to what was read: a write in between is a 409, and the apply then forces.
        body: {
          metadata: { managedFields: moved, resourceVersion: current.metadata?.resourceVersion },
        },
        idempotent: true,
        ...call(options),
      });
      return true;
    },
  };
}

/** Watches and the server-side apply of a ConfigMap. */
function streamAndApplyCalls(
  rest: RestClient,
  fieldManager: string,
): Pick<KubeClient, "watch" | "applyConfigMap" | "updateConfigMapIfUid"> {
  return {
    async watch<T extends KubeObject>(
      kind: KindName,
      namespace: string | undefined,
      options?: WatchOptions,
    ) {
      const resource = res(kind);
      const stream = await rest.lines({
        path: collectionPath(resource, ns(resource, namespace)),
        query: {
          ...listQuery(options),
          watch: true,
          allowWatchBookmarks: true,
          resourceVersion: options?.resourceVersion,
          timeoutSeconds: options?.timeoutSeconds,
        },
        ...call(options),
      });
      return {
        close: () => stream.close(),
        async *[Symbol.asyncIterator]() {
          for await (const line of stream) {
            if (line.trim() === "") continue;
            yield JSON.parse(line) as WatchEvent<T>;
          }
        },
      };
    },
    async applyConfigMap(namespace, name, content, options) {
      return await rest.json<KubeObject>({
        method: "PATCH",
        path: objectPath(RESOURCES.ConfigMap, namespace, name),
        query: { fieldManager, force: true },
        contentType: "application/apply-patch+yaml",
        body: {
          apiVersion: "v1",
          kind: "ConfigMap",
          metadata: { name, namespace, labels: content.labels },
          data: content.data,
        },
        // Server-side apply is idempotent: sending the same intent twice converges.
        idempotent: true,
        ...call(options),
      });
    },
    updateConfigMapIfUid: createConfigMapUpdater(rest),
  };
}

/**
 * `updateConfigMapIfUid`: read, check the UID, replace pinned by UID and resourceVersion; a
 * conflicting write in between is read and checked again (up to 3 retries). Never creates.
 */
function createConfigMapUpdater(rest: RestClient): KubeClient["updateConfigMapIfUid"] {
  return async function updateConfigMapIfUid(namespace, name, uid, content, options) {
    const path = objectPath(RESOURCES.ConfigMap, namespace, name);
    for (let attempt = 0;; attempt++) {
      let current: KubeObject;
      try {
        current = await rest.json<KubeObject>({ method: "GET", path, ...call(options) });
      } catch (error) {
        if (error instanceof KubeApiError && error.isNotFound) {
          throw new NotFoundError(
            `Cannot write ConfigMap '${namespace}/${name}': it no longer exists (the run that created it has ended), and it is never created here`,
            { cause: error },
          );
        }
        throw error;
      }
      // guard: uid-configmap-check: only the ConfigMap this run created is rewritten
      if (current.metadata?.uid !== uid) {
        throw new ConflictError(
          `Cannot write ConfigMap '${namespace}/${name}': it is not the object this run created (UID ${
            current.metadata?.uid ?? "none"
          }, expected ${uid}), so it is left untouched`,
        );
      }
      try {
        return await rest.json<KubeObject>({
          method: "PUT",
          path,
          body: {
            apiVersion: "v1",
            kind: "ConfigMap",
            metadata: {
              name,
              namespace,
              // Both pin the write: a replaced object (other UID) or a newer version is a 409.
              uid,
              resourceVersion: current.metadata?.resourceVersion,
              labels: { ...content.labels, ...current.metadata?.labels },
              ...(current.metadata?.annotations || content.annotations
                ? { annotations: { ...current.metadata?.annotations, ...content.annotations } }
                : {}),
            },
            data: content.data,
          },
          idempotent: false,
          ...call(options),
        });
      } catch (error) {
        // Someone else wrote in between: read again (the UID check runs again) and retry.
        if (error instanceof KubeApiError && error.status === 409 && attempt < 3) continue;
        if (error instanceof KubeApiError && error.isNotFound) {
          throw new NotFoundError(
            `Cannot write ConfigMap '${namespace}/${name}': it was deleted while being written, and it is never created here`,
            { cause: error },
          );
        }
        throw error;
      }
    }
  };
}

const res = (kind: KindName): ResourceType => RESOURCES[kind];

function ns(resource: ResourceType, namespace: string | undefined): string | undefined {
  return resource.namespaced ? namespace : undefined;
}

function call(
  options?: CallOptions,
): { signal?: AbortSignal; timeoutMs?: number; retries?: number } {
  return {
    ...(options?.signal ? { signal: options.signal } : {}),
    ...(options?.timeoutMs ? { timeoutMs: options.timeoutMs } : {}),
    ...(options?.retries !== undefined ? { retries: options.retries } : {}),
  };
}

function listQuery(options?: ListOptions): Query {
  return {
    labelSelector: options?.labelSelector,
    fieldSelector: options?.fieldSelector,
    limit: options?.limit,
    continue: options?.continue,
  };
}

/** A container's log, read once or followed. */
function podLogCalls(rest: RestClient): Pick<KubeClient, "podLog" | "followPodLog"> {
  return {
    async podLog(namespace, name, options) {
      return await rest.text({
        method: "GET",
        path: `${objectPath(RESOURCES.Pod, namespace, name)}/log`,
        query: {
          container: options?.container,
          tailLines: options?.tailLines,
          limitBytes: options?.limitBytes,
        },
        ...call(options),
      });
    },
    async followPodLog(namespace, name, options) {
      return await rest.lines({
        path: `${objectPath(RESOURCES.Pod, namespace, name)}/log`,
        query: { container: options?.container, follow: true, sinceTime: options?.sinceTime },
        ...call(options),
      });
    },
  };
}

/** The access and token reviews (they persist nothing, so each may be resent). */
function reviewCalls(
  rest: RestClient,
): Pick<KubeClient, "selfAccessReview" | "subjectAccessReview" | "tokenReview"> {
  return {
    async selfAccessReview(attributes, options) {
      const review = await rest.json<{ status?: AccessDecision }>({
        method: "POST",
        path: "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
        body: {
          apiVersion: "authorization.k8s.io/v1",
          kind: "SelfSubjectAccessReview",
          spec: { resourceAttributes: attributes },
        },
        // A review persists nothing, so resending it is safe.
        idempotent: true,
        ...call(options),
      });
      return decision(review.status);
    },
    async subjectAccessReview(user, attributes, options) {
      const review = await rest.json<{ status?: AccessDecision }>({
        method: "POST",
        path: "/apis/authorization.k8s.io/v1/subjectaccessreviews",
        body: {
          apiVersion: "authorization.k8s.io/v1",
          kind: "SubjectAccessReview",
          spec: {
            user: user.username,
            ...(user.groups ? { groups: user.groups } : {}),
            ...(user.uid ? { uid: user.uid } : {}),
            ...(user.extra ? { extra: user.extra } : {}),
            resourceAttributes: attributes,
          },
        },
        idempotent: true,
        ...call(options),
      });
      return decision(review.status);
    },
    async tokenReview(token, options) {
      const review = await rest.json<{
        status?: { authenticated?: boolean; user?: Partial<ReviewedUser>; error?: string };
      }>({
        method: "POST",
        path: "/apis/authentication.k8s.io/v1/tokenreviews",
        body: {
          apiVersion: "authentication.k8s.io/v1",
          kind: "TokenReview",
          spec: { token, ...(options?.audiences ? { audiences: options.audiences } : {}) },
        },
        idempotent: true,
        ...call(options),
      });
      const status = review.status ?? {};
      const out: { authenticated: boolean; user?: ReviewedUser; error?: string } = {
        authenticated: status.authenticated === true,
      };
      if (status.authenticated && status.user?.username) {
        out.user = {
          username: status.user.username,
          groups: status.user.groups ?? [],
          ...(status.user.uid ? { uid: status.user.uid } : {}),
          ...(status.user.extra ? { extra: status.user.extra } : {}),
        };
      }
      if (status.error) out.error = status.error;
      return out;
    },
  };
}

function decision(status: AccessDecision | undefined): AccessDecision {
  const out: AccessDecision = { allowed: status?.allowed === true };
  if (status?.reason) out.reason = status.reason;
  return out;
}

interface ApiResourceList {
  groupVersion?: string;
  resources?: { name: string; kind: string; namespaced: boolean; verbs?: string[] }[];
}

/** Aggregated discovery (`apidiscovery.k8s.io/v2`): every group's resources in one answer. */
const AGGREGATED_DISCOVERY =
  "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json";

/** An answer to `/api` or `/apis`: aggregated, or the legacy group list (older servers). */
interface DiscoveryAnswer {
  kind?: string;
  /** Aggregated: one entry per group, versions in order of preference. */
  items?: {
    metadata?: { name?: string };
    versions?: {
      version: string;
      freshness?: string;
      resources?: {
        resource: string;
        responseKind?: { kind?: string };
        scope?: string;
        verbs?: string[];
      }[];
    }[];
  }[];
  /** Legacy `/apis`. */
  groups?: { name: string; preferredVersion?: { version: string } }[];
}

/**
 * The preferred version's resources of every group in an aggregated answer. A stale group (its
 * aggregated API server does not answer) is skipped, as a group whose legacy read fails.
 */
function aggregatedResources(answer: DiscoveryAnswer): DiscoveredResource[] {
  const out: DiscoveredResource[] = [];
  for (const item of answer.items ?? []) {
    const preferred = item.versions?.[0];
    if (!preferred || preferred.freshness === "Stale") continue;
    for (const r of preferred.resources ?? []) {
      out.push({
        group: item.metadata?.name ?? "",
        version: preferred.version,
        plural: r.resource,
        kind: r.responseKind?.kind ?? "",
        namespaced: r.scope === "Namespaced",
        verbs: r.verbs ?? [],
      });
    }
  }
  return out;
}

/**
 * Every API resource's preferred version: from two aggregated answers (`/api`, `/apis`) where the
 * server gives them (Kubernetes 1.30+), else one read per group version.
 */
async function discover(
  rest: RestClient,
  call: { signal?: AbortSignal; timeoutMs?: number },
): Promise<DiscoveredResource[]> {
  const read = (path: string) =>
    rest.json<DiscoveryAnswer>({ method: "GET", path, accept: AGGREGATED_DISCOVERY, ...call });
  const [core, groups] = await Promise.all([read("/api").catch(() => undefined), read("/apis")]);
  if (core?.kind === "APIGroupDiscoveryList" && groups.kind === "APIGroupDiscoveryList") {
    return [...aggregatedResources(core), ...aggregatedResources(groups)];
  }
  const groupVersions: { group: string; version: string }[] = [{ group: "", version: "v1" }];
  for (const g of groups.groups ?? []) {
    if (g.preferredVersion) {
      groupVersions.push({ group: g.name, version: g.preferredVersion.version });
    }
  }
  // Partial discovery is accepted (as upstream): a group that fails is skipped.
  const lists = await Promise.allSettled(
    groupVersions.map(({ group, version }) =>
      rest.json<ApiResourceList>({
        method: "GET",
        path: group === "" ? `/api/${version}` : `/apis/${group}/${version}`,
        ...call,
      }).then((list) => ({ group, version, list }))
    ),
  );
  const out: DiscoveredResource[] = [];
  for (const result of lists) {
    if (result.status !== "fulfilled") continue;
    const { group, version, list } = result.value;
    for (const r of list.resources ?? []) {
      if (r.name.includes("/")) continue;
      out.push({
        group,
        version,
        plural: r.name,
        kind: r.kind,
        namespaced: r.namespaced,
        verbs: r.verbs ?? [],
      });
    }
  }
  return out;
}
