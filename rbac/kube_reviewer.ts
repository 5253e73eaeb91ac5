/**
 * The gate's {@link AccessReviewer} over the shared Kubernetes client:
 * SelfSubjectAccessReview for the caller, SubjectAccessReview for the agent.
 *
 * @module
 */
import { PermissionError } from "../errors.ts";
import { KubeApiError } from "../kube/mod.ts";
import type { KubeClient } from "../kube/mod.ts";
import type { AccessReviewer } from "./gate.ts";
import type { AccessAttributes } from "./rules.ts";

function toResourceAttributes(attributes: AccessAttributes): AccessAttributes {
  return {
    verb: attributes.verb,
    group: attributes.group ?? "",
    resource: attributes.resource,
    ...(attributes.subresource ? { subresource: attributes.subresource } : {}),
    ...(attributes.namespace !== undefined ? { namespace: attributes.namespace } : {}),
    ...(attributes.name !== undefined ? { name: attributes.name } : {}),
  };
}

/**
 * Adapts a {@link KubeClient} to the gate's reviewer.
 *
 * @param kube the client
 * @returns the reviewer
 */
export function createAccessReviewer(kube: KubeClient): AccessReviewer {
  return {
    async selfReview(attributes) {
      return await kube.selfAccessReview(toResourceAttributes(attributes));
    },
    async subjectReview(user, groups, attributes) {
      try {
        return await kube.subjectAccessReview(
          { username: user, groups },
          toResourceAttributes(attributes),
        );
      } catch (error) {
        if (error instanceof KubeApiError && (error.status === 403 || error.status === 401)) {
          throw new PermissionError(
            "Cannot create subjectaccessreviews.authorization.k8s.io: the caller lacks 'create'",
            { cause: error },
          );
        }
        throw error;
      }
    },
  };
}
