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
    return this.status === 0 || this.status === 429 || this.status === 500 ||
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
