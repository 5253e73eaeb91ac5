/**
 * A client of the OCI distribution API for one repository, enough to push: the `/v2/` check, blob
 * existence (`HEAD`), blob upload (`POST` then one `PUT` with the digest), manifest existence and
 * upload. Authentication follows the registry's challenge (`Basic`, or a `Bearer` token for
 * `repository:<name>:pull,push`), with credentials looked up only once a challenge asks.
 * Every failure is one {@link ToolError} naming the registry: unreachable (exit 6), credentials
 * rejected or refused (4, naming where they came from), no such repository (3), or an answer that is
 * not the distribution API (6).
 *
 * @module
 */
import {
  InterruptedError,
  NotFoundError,
  type OptionText,
  PermissionError,
  ToolError,
  UnavailableError,
} from "../errors.ts";
import { basicAuthorization, type CredentialLookup, parseChallenge } from "./auth.ts";
import type { Digest } from "./digest.ts";
import type { HttpClient, HttpRequest, HttpResponse } from "./http.ts";
import type { EncodedDocument } from "./oci.ts";
import type { ImageReference } from "./reference.ts";
import { apiHost } from "./reference.ts";

/** Options of {@link createRegistryClient}. */
export interface RegistryClientOptions {
  ref: ImageReference;
  http: HttpClient;
  /** `https`, or `http` only when the operator asked for plain HTTP. */
  scheme: "https" | "http";
  /** Looks the registry's credentials up (called at the first challenge, once). */
  credentials: () => Promise<CredentialLookup>;
  signal?: AbortSignal;
}

/** What the push needs of a registry. */
export interface RegistryClient {
  /** Checks the API answers (and settles authentication). */
  ping(): Promise<void>;
  blobExists(digest: Digest): Promise<boolean>;
  /** Uploads a blob: one monolithic `PUT` of its bytes. */
  uploadBlob(
    blob: { digest: Digest; size: number; read(): AsyncIterable<Uint8Array> },
    onSent?: (bytes: number) => void,
  ): Promise<void>;
  manifestExists(digest: Digest, mediaType: string): Promise<boolean>;
  /** Puts a manifest or index under a tag or its digest; returns the digest the registry says. */
  putManifest(reference: string, document: EncodedDocument): Promise<void>;
}

const TLS_CODES = new Set([
  "UNABLE_TO_VERIFY_LEAF_SIGNATURE",
  "SELF_SIGNED_CERT_IN_CHAIN",
  "DEPTH_ZERO_SELF_SIGNED_CERT",
  "UNABLE_TO_GET_ISSUER_CERT_LOCALLY",
  "CERT_HAS_EXPIRED",
  "ERR_TLS_CERT_ALTNAME_INVALID",
]);

function registryErrors(res: HttpResponse): string {
  try {
    const parsed = JSON.parse(new TextDecoder().decode(res.body)) as {
      errors?: { code?: string; message?: string }[];
    };
    return (parsed.errors ?? []).map((e) => `${e.code ?? "?"}: ${e.message ?? ""}`.trim()).join(
      "; ",
    );
  } catch {
    return "";
  }
}

function snippet(res: HttpResponse): string {
  const text = new TextDecoder().decode(res.body.subarray(0, 120)).replace(/\s+/g, " ").trim();
  return `${res.headers["content-type"] ?? "no content type"}${text ? `: '${text}'` : ""}`;
}

/** The errors of one repository's requests, naming its registry. */
class Failures {
  readonly #ref: ImageReference;
  readonly #base: string;

  constructor(ref: ImageReference, base: string) {
    this.#ref = ref;
    this.#base = base;
  }

  unreachable(error: unknown, url: string): ToolError {
    const ref = this.#ref;
    const code = (error as { code?: string }).code ?? "";
    const message = (error as Error).message ?? String(error);
    if (TLS_CODES.has(code)) {
      const text: OptionText = (name) =>
        `Cannot reach the registry '${ref.registry}' over TLS: its certificate is not trusted (${message}); give its CA with ${
          name("caFile")
        }`;
      return new UnavailableError(text, { cause: error });
    }
    if (code === "EPROTO" || /wrong version number|packet length too long/i.test(message)) {
      const text: OptionText = (name) =>
        `Cannot reach the registry '${ref.registry}' over TLS: it does not speak TLS at ${this.#base} (${message}); if it serves plain HTTP, say so with ${
          name("plainHttp")
        }`;
      return new UnavailableError(text, { cause: error });
    }
    return new UnavailableError(
      `Cannot reach the registry '${ref.registry}' at ${new URL(url).origin}: ${code || message}${
        code && message && !message.includes(code) ? ` (${message})` : ""
      }`,
      { cause: error },
    );
  }

  noCredentials(found: CredentialLookup): PermissionError {
    const text: OptionText = (name) =>
      `Cannot push to '${this.#ref.registry}': it asks for credentials and aicr found ${found.describe}; log in (docker login, podman login) or name a Docker config file with ${
        name("registryConfig")
      }`;
    return new PermissionError(text);
  }

  rejected(res: HttpResponse, found: CredentialLookup | undefined): PermissionError {
    const detail = registryErrors(res);
    const what = res.status === 403 ? "refused access to" : "rejected";
    return new PermissionError(
      `Cannot push to '${this.#ref.registry}/${this.#ref.repository}': the registry ${what} ${
        found?.describe ?? "the request"
      } (HTTP ${res.status}${detail ? `, ${detail}` : ""})`,
    );
  }

  garbage(res: HttpResponse, what: string): ToolError {
    return new UnavailableError(
      `Cannot push to '${this.#ref.registry}': it answered ${what} with HTTP ${res.status} (${
        snippet(res)
      }), which is not the OCI distribution API`,
    );
  }

  refused(res: HttpResponse, what: string): ToolError {
    const { registry, repository } = this.#ref;
    const detail = registryErrors(res);
    if (/NAME_UNKNOWN/.test(detail) || (res.status === 404 && what.startsWith("POST"))) {
      return new NotFoundError(
        `Cannot push to '${registry}/${repository}': the repository does not exist there (${
          detail || "HTTP 404"
        }); create it in the registry first, or push to one that exists`,
      );
    }
    if (detail && res.status >= 400 && res.status < 500) {
      return new ToolError(
        `Cannot push to '${registry}/${repository}': ${what} was refused (HTTP ${res.status}, ${detail})`,
        "internal",
      );
    }
    return this.garbage(res, what);
  }
}

/** One repository's requests, authenticated as its challenges ask. */
class Session {
  readonly base: string;
  readonly fail: Failures;
  readonly #options: RegistryClientOptions;
  #authorization: string | undefined;
  #lookup: CredentialLookup | undefined;

  constructor(options: RegistryClientOptions) {
    this.#options = options;
    this.base = `${options.scheme}://${apiHost(options.ref.registry)}`;
    this.fail = new Failures(options.ref, this.base);
  }

  /** Sends once, with the current authorization. */
  async raw(req: HttpRequest): Promise<HttpResponse> {
    const { http, signal } = this.#options;
    if (signal?.aborted) throw interrupted(signal);
    try {
      return await http.request({
        ...req,
        headers: {
          ...req.headers,
          ...(this.#authorization ? { authorization: this.#authorization } : {}),
        },
        ...(signal ? { signal } : {}),
      });
    } catch (error) {
      if (signal?.aborted) throw interrupted(signal);
      throw this.fail.unreachable(error, req.url);
    }
  }

  /** Sends, answers a 401 challenge once, and checks the status. */
  async call(req: HttpRequest, expect: number[], what: string): Promise<HttpResponse> {
    let res = await this.raw(req);
    if (res.status === 401) {
      await this.#authenticate(res);
      res = await this.raw(req);
    }
    if (expect.includes(res.status)) return res;
    if (res.status === 401 || res.status === 403) throw this.fail.rejected(res, this.#lookup);
    throw this.fail.refused(res, what);
  }

  async #authenticate(res: HttpResponse): Promise<void> {
    const challenge = parseChallenge(res.headers["www-authenticate"]);
    const found = this.#lookup ??= await this.#options.credentials();
    const registry = this.#options.ref.registry;
    if (!challenge) {
      throw new UnavailableError(
        `Cannot push to '${registry}': it answered 401 without a WWW-Authenticate challenge (${
          snippet(res)
        })`,
      );
    }
    const c = found.credentials;
    if (challenge.scheme === "basic") {
      if (!c?.username && !c?.password) throw this.fail.noCredentials(found);
      this.#authorization = basicAuthorization(c);
    } else if (challenge.scheme !== "bearer") {
      throw new UnavailableError(
        `Cannot push to '${registry}': it asks for '${challenge.scheme}' authentication, which aicr does not speak (Basic, Bearer)`,
      );
    } else if (c?.registryToken) {
      this.#authorization = `Bearer ${c.registryToken}`;
    } else {
      this.#authorization = `Bearer ${await this.#bearerToken(challenge.params, found)}`;
    }
  }

  async #bearerToken(params: Record<string, string>, found: CredentialLookup): Promise<string> {
    if (!params.realm) {
      throw new UnavailableError(
        `Cannot push to '${this.#options.ref.registry}': its Bearer challenge names no realm`,
      );
    }
    const req = tokenRequest(params, `repository:${this.#options.ref.repository}:pull,push`, found);
    this.#authorization = undefined;
    const res = await this.raw(req);
    if (res.status === 401 || res.status === 403) throw this.fail.rejected(res, found);
    let token: string | undefined;
    try {
      const body = JSON.parse(new TextDecoder().decode(res.body)) as {
        token?: string;
        access_token?: string;
      };
      token = body.token ?? body.access_token;
    } catch {
      // handled below
    }
    const url = new URL(req.url);
    if (res.status !== 200 || !token) {
      throw this.fail.garbage(res, `${req.method} ${url.origin}${url.pathname} (token)`);
    }
    return token;
  }
}

/** The token request of a Bearer challenge: a refresh-token POST, or a GET with Basic auth. */
function tokenRequest(
  params: Record<string, string>,
  scope: string,
  found: CredentialLookup,
): HttpRequest {
  const url = new URL(params.realm!);
  const c = found.credentials;
  if (c?.identityToken) {
    const form = new URLSearchParams({
      grant_type: "refresh_token",
      refresh_token: c.identityToken,
      service: params.service ?? "",
      scope,
      client_id: "aicr",
    });
    return {
      method: "POST",
      url: url.toString(),
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: new TextEncoder().encode(form.toString()),
    };
  }
  if (params.service) url.searchParams.set("service", params.service);
  url.searchParams.set("scope", scope);
  return {
    method: "GET",
    url: url.toString(),
    headers: c?.username || c?.password ? { authorization: basicAuthorization(c) } : {},
  };
}

/**
 * Makes a client for one repository.
 *
 * @param options reference, HTTP client, scheme, credential lookup, cancellation
 * @returns the client
 */
export function createRegistryClient(options: RegistryClientOptions): RegistryClient {
  const session = new Session(options);
  const { base, fail } = session;
  const { ref } = options;
  const repo = ref.repository;
  return {
    async ping() {
      const res = await session.call({ method: "GET", url: `${base}/v2/` }, [200], "GET /v2/");
      const version = res.headers["docker-distribution-api-version"];
      if (version !== undefined && !version.includes("registry/2.0")) {
        throw fail.garbage(res, "GET /v2/");
      }
      if (version === undefined && res.headers["content-type"]?.includes("text/html")) {
        throw fail.garbage(res, "GET /v2/");
      }
    },
    async blobExists(digest) {
      const res = await session.call(
        { method: "HEAD", url: `${base}/v2/${repo}/blobs/${digest}` },
        [200, 404],
        `HEAD blob ${digest.slice(0, 19)}`,
      );
      return res.status === 200;
    },
    async uploadBlob(blob, onSent) {
      const start = await session.call(
        { method: "POST", url: `${base}/v2/${repo}/blobs/uploads/` },
        [202],
        "POST blob upload",
      );
      const location = start.headers.location;
      if (!location) throw fail.garbage(start, "POST blob upload (no Location)");
      const url = new URL(location, base);
      url.searchParams.set("digest", blob.digest);
      await session.call(
        {
          method: "PUT",
          url: url.toString(),
          headers: { "content-type": "application/octet-stream" },
          body: () => blob.read(),
          contentLength: blob.size,
          ...(onSent ? { onSent } : {}),
        },
        [201],
        `PUT blob ${blob.digest.slice(0, 19)}`,
      );
    },
    async manifestExists(digest, mediaType) {
      const res = await session.call(
        {
          method: "HEAD",
          url: `${base}/v2/${repo}/manifests/${digest}`,
          headers: { accept: mediaType },
        },
        [200, 404],
        `HEAD manifest ${digest.slice(0, 19)}`,
      );
      return res.status === 200;
    },
    async putManifest(reference, document) {
      const res = await session.call(
        {
          method: "PUT",
          url: `${base}/v2/${repo}/manifests/${reference}`,
          headers: { "content-type": document.descriptor.mediaType },
          body: document.bytes,
        },
        [200, 201],
        `PUT manifest ${reference.slice(0, 19)}`,
      );
      const said = res.headers["docker-content-digest"];
      if (said && said !== document.descriptor.digest) {
        throw new ToolError(
          `Cannot trust the push to '${ref.registry}/${repo}': it stored the manifest as ${said}, aicr sent ${document.descriptor.digest}`,
          "internal",
        );
      }
    },
  };
}

function interrupted(signal: AbortSignal): InterruptedError {
  const reason = signal.reason instanceof Error ? signal.reason.message : String(signal.reason);
  return new InterruptedError(`Cannot finish the push: interrupted (${reason})`);
}
