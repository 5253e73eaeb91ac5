/**
 * The daemon's authenticator and authorizer over the Kubernetes API: `TokenReview` and
 * `SubjectAccessReview` through the narrow client of `kube/`, each bounded by its own timeout
 * (the caching wrapper shares one review among callers, so no caller's signal reaches it).
 *
 * @module
 */
import { ToolError } from "../errors.ts";
import { KubeApiError } from "../kube/mod.ts";
import type { KubeClient } from "../kube/mod.ts";
import type { AccessAuthorizer, TokenAuthenticator } from "./auth.ts";

/** Options of {@link createKubeAuth}. */
export interface KubeAuthOptions {
  /**
   * Audiences the token must carry (TokenReview `spec.audiences`); empty means the API
   * server's own, which is what `kubectl create token` and client tokens carry. @default []
   */
  audiences?: readonly string[];
  /** Timeout of each review. @default 10_000 */
  timeoutMs?: number;
  /**
   * This daemon's node: a token is accepted only when it is bound to it (TokenRequest
   * `boundObjectRef` of kind Node, which the TokenReview reports as
   * `authentication.kubernetes.io/node-name`), so a token minted for another node's daemon,
   * or replayed by it, is refused even where the audiences were to match. @default no binding
   */
  boundNode?: string;
}

/** The `extra` key naming the node a ServiceAccount token is bound to (directly or via a pod). */
const EXTRA_NODE_NAME = "authentication.kubernetes.io/node-name";

/**
 * Whether a reviewed user's token is bound to this node.
 *
 * @param user the TokenReview's user
 * @param node this daemon's node
 * @returns true when the token names exactly this node
 */
export function boundToNode(user: { extra?: Record<string, string[]> }, node: string): boolean {
  const names = user.extra?.[EXTRA_NODE_NAME] ?? [];
  return names.length === 1 && names[0] === node;
}

/**
 * Builds the authenticator and authorizer from a Kubernetes client.
 *
 * @param kube a client able to create TokenReviews and SubjectAccessReviews (the daemon's
 *   ServiceAccount needs `create` on both, as `system:auth-delegator` grants)
 * @param options audiences and timeout
 * @returns the pair `createCachingAuthorizer()` takes
 */
export function createKubeAuth(
  kube: Pick<KubeClient, "tokenReview" | "subjectAccessReview">,
  options: KubeAuthOptions = {},
): { authenticator: TokenAuthenticator; authorizer: AccessAuthorizer } {
  const { audiences = [], timeoutMs = 10_000, boundNode } = options;
  return {
    authenticator: {
      async review(token, signal) {
        const result = await kube.tokenReview(token, {
          timeoutMs,
          ...(audiences.length > 0 ? { audiences: [...audiences] } : {}),
          ...(signal ? { signal } : {}),
        }).catch((error) => {
          throw ownCredentialError(error, "tokenreviews.authentication.k8s.io");
        });
        if (!result.user) return { authenticated: result.authenticated };
        // Valid, but bound to another node (or to none): as invalid as a bad token.
        // guard: review-bound-node: a token bound to another node is refused
        if (boundNode !== undefined && !boundToNode(result.user, boundNode)) {
          return { authenticated: false };
        }
        return { authenticated: result.authenticated, user: result.user };
      },
    },
    authorizer: {
      async allowed(user, attributes, signal) {
        const decision = await kube.subjectAccessReview(user, attributes, {
          timeoutMs,
          ...(signal ? { signal } : {}),
        }).catch((error) => {
          throw ownCredentialError(error, "subjectaccessreviews.authorization.k8s.io");
        });
        // guard: review-allowed: the SubjectAccessReview's answer decides;
        // mutant: `decision.allowed` -> `true`
        return decision.allowed;
      },
    },
  };
}

/**
 * A review the API server refused is the daemon's own credential failing, not the
 * caller's: answering 401/403 would tell the caller it was denied. Say 500 and how to fix.
 */
function ownCredentialError(error: unknown, resource: string): unknown {
  if (error instanceof KubeApiError && (error.status === 401 || error.status === 403)) {
    return new ToolError(
      `Cannot check the caller: the daemon's own ServiceAccount may not create ${resource} (bind it to the ClusterRole system:auth-delegator)`,
      "internal",
      500,
      { cause: error },
    );
  }
  return error;
}
