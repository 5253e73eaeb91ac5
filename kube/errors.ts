/**
 * Kubernetes API failures as aicr errors: the HTTP status and the Status body parsed,
 * mapped to the exit-code classes in `errors.ts`.
 *
 * @module
 */
import { ToolError } from "../errors.ts";
import type { ExitCodeName } from "../errors.ts";

/** Hints printed when the API server cannot be reached (upstream wording). */
export const UNREACHABLE_HINTS: readonly string[] = [
  "Is your VPN connected?",
  "Is the cluster endpoint correct in your kubeconfig?",
  "Are firewall rules allowing egress to the API server?",
];

/** Which kubeconfig identity a request went out as, for messages. */
export interface CallerIdentity {
  /** The kubeconfig context. */
  context: string;
  /** The kubeconfig user of that context. */
  user: string;
  /** The API server URL. */
  server: string;
}

/**
 * What a 401 means and how to fix it: the API server did not accept the credentials at all
 * (as opposed to a 403, where it knows who asks and says no).
 *
 * @param identity the context, user and server the request used
 * @returns the detail lines under the error
 */
export function credentialsRejectedHints(identity: CallerIdentity): string[] {
  return [
    `  the API server '${identity.server}' rejected the credentials of kubeconfig user '${identity.user}' (context '${identity.context}'): they are invalid or expired`,
    "  refresh them with the command that wrote them (aws eks update-kubeconfig, gcloud container clusters get-credentials, az aks get-credentials, oc login, ...), or renew the token or client certificate",
    `  check who you are with: kubectl --context ${identity.context} auth whoami`,
  ];
}

/** Node's codes for a server certificate that does not chain to the trusted CA. */
const UNTRUSTED_CERTIFICATE_CODES = new Set([
  "UNABLE_TO_VERIFY_LEAF_SIGNATURE",
  "UNABLE_TO_GET_ISSUER_CERT",
  "UNABLE_TO_GET_ISSUER_CERT_LOCALLY",
  "SELF_SIGNED_CERT_IN_CHAIN",
  "DEPTH_ZERO_SELF_SIGNED_CERT",
  "CERT_SIGNATURE_FAILURE",
]);

/** The reason of a {@link KubeApiError} for a server certificate the kubeconfig's CA did not sign. */
export const UNTRUSTED_CERTIFICATE_REASON = "CertificateNotTrusted";

/**
 * A TLS failure that says the server is not the one the kubeconfig trusts, as its own error:
 * the server answered, so no network advice (VPN, firewall) helps, and retrying cannot either.
 * A name mismatch (the certificate is for another host) is said as such.
 *
 * @param request what was sent (`METHOD path`)
 * @param identity the context, user and server
 * @param error the socket's error
 * @returns the error, or `undefined` when `error` is not about the server's certificate
 */
export function untrustedCertificateError(
  request: { method: string; path: string },
  identity: CallerIdentity,
  error: unknown,
): KubeApiError | undefined {
  const code = (error as { code?: unknown } | undefined)?.code;
  if (typeof code !== "string") return undefined;
  const what = `${request.method} ${request.path}`;
  const detail = error instanceof Error ? error.message : String(error);
  if (UNTRUSTED_CERTIFICATE_CODES.has(code)) {
    return new KubeApiError(
      `Cannot ${what} on '${identity.server}': the server's certificate is not signed by the CA of context '${identity.context}' (${detail})`,
      0,
      UNTRUSTED_CERTIFICATE_REASON,
      {
        cause: error,
        details: [
          `  the kubeconfig's certificate-authority(-data) for context '${identity.context}' is not the CA of this server: the server was reinstalled or its CA rotated, the kubeconfig is for another cluster, or a proxy between you re-signs TLS`,
          `  fetch a current kubeconfig (aws eks update-kubeconfig, gcloud container clusters get-credentials, az aks get-credentials, ...) or put the cluster's CA in it; compare with: openssl s_client -connect ${
            hostPort(identity.server)
          } -showcerts`,
        ],
      },
    );
  }
  if (code === "ERR_TLS_CERT_ALTNAME_INVALID") {
    return new KubeApiError(
      `Cannot ${what} on '${identity.server}': the server's certificate is not for this host name (context '${identity.context}'): ${detail}`,
      0,
      UNTRUSTED_CERTIFICATE_REASON,
      {
        cause: error,
        details: [
          "  use the server address the certificate names (or set tls-server-name in the kubeconfig's cluster)",
        ],
      },
    );
  }
  return undefined;
}

function hostPort(server: string): string {
  try {
    const url = new URL(server);
    return `${url.hostname}:${url.port || "443"}`;
  } catch {
    return server;
  }
}

/** A failed Kubernetes API call. */
export class KubeApiError extends ToolError {
  /** HTTP status, or 0 when no response arrived. */
  readonly status: number;
  /** The Status `reason` (e.g. `NotFound`, `AlreadyExists`, `Conflict`, `Forbidden`). */
  readonly reason: string;
  /** Seconds the server asked us to wait (429/503 `Retry-After`). */
  readonly retryAfterSeconds: number | undefined;

  /**
   * @param message what was attempted and what the server said
   * @param status HTTP status (0 for a connection failure)
   * @param reason the Status reason
   * @param options cause and Retry-After
   */
  constructor(
    message: string,
    status: number,
    reason: string,
    options: { cause?: unknown; retryAfterSeconds?: number; details?: readonly string[] } = {},
  ) {
    const [code, http] = classify(status);
    super(message, code, http, {
      ...(options.cause === undefined ? {} : { cause: options.cause }),
      ...(options.details ? { details: options.details } : {}),
    });
    this.name = "KubeApiError";
    this.status = status;
    this.reason = reason;
    this.retryAfterSeconds = options.retryAfterSeconds;
  }

  /** Whether the object did not exist. */
  get isNotFound(): boolean {
    return this.status === 404;
  }

  /** Whether a create met an existing object. */
  get isAlreadyExists(): boolean {
    return this.status === 409 && this.reason === "AlreadyExists";
  }

  /** Whether a precondition (UID, resourceVersion) failed. */
  get isConflict(): boolean {
    return this.status === 409 && this.reason !== "AlreadyExists";
  }

  /** Whether no response arrived at all (connection refused, reset, DNS, TLS). */
  get isConnectionFailure(): boolean {
    return this.status === 0;
  }

  /** Whether retrying the same idempotent request may succeed. */
  get isRetryable(): boolean {
    return (this.status === 0 && this.reason !== UNTRUSTED_CERTIFICATE_REASON) ||
      this.status === 429 || this.status === 500 ||
      this.status === 502 || this.status === 503 || this.status === 504;
  }
}

function classify(status: number): [ExitCodeName, number] {
  if (status === 0) return ["unavailable", 503];
  if (status === 401 || status === 403) return ["unauthorized", 403];
  if (status === 404) return ["notFound", 404];
  if (status === 409) return ["conflict", 409];
  if (status === 400 || status === 422) return ["usage", 400];
  if (status === 429) return ["rateLimited", 429];
  if (status === 504) return ["timeout", 504];
  if (status >= 500) return ["unavailable", 503];
  return ["internal", 500];
}
