/**
 * Whose baselines the CLI trusts: those signed by the install's CA (`snapshot/baseline_signature.ts`).
 * The CA is read from the install's signer Secret (`<name>-signer`), which only the CLI of
 * someone allowed to read it and the in-cluster signer may read: never from the CA ConfigMap,
 * which anyone who may write ConfigMaps in the namespace could replace along with a baseline.
 *
 * - `baseline set` signs with the CA's key (and fails, writing nothing, without it);
 * - `baseline list` and `get` verify with its certificate, and say `unverified` when the caller
 *   may not read it;
 * - `daemonset install` grants the daemons only the baselines its CA verifies.
 *
 * @module
 */
import { Buffer } from "node:buffer";
import { NotFoundError, PermissionError } from "../errors.ts";
import { KubeApiError } from "../kube/mod.ts";
import type { AccessAttributes, KubeClient, KubeObject } from "../kube/mod.ts";
import type { Logger } from "../log.ts";
import { daemonSignerSecretName } from "../manifests/mod.ts";
import { BASELINE_COHORT_KEY_LABEL, verifyBaseline } from "../snapshot/mod.ts";
import type { BaselineObject, BaselineTrust } from "../snapshot/mod.ts";
import type { DaemonCa } from "../x509.ts";

/** A baseline's trust as `list` shows it: the signature's verdict, or why it was not checked. */
export type BaselineTrustView = BaselineTrust | { state: "unverified"; reason: string };

/** What `list` and `get` verify with: the CA's certificate, or why there is none. */
export type TrustAnchor = { caCert: string } | { unverified: string };

/**
 * The caller check for reading the install's CA (its key signs baselines).
 *
 * @param namespace the daemon's namespace
 * @param name the daemon's name
 * @returns the question
 */
export function caSecretCheck(namespace: string, name: string): AccessAttributes {
  return {
    verb: "get",
    group: "",
    resource: "secrets",
    namespace,
    name: daemonSignerSecretName(name),
  };
}

async function readCaSecret(
  kube: KubeClient,
  scope: { namespace: string; name: string },
): Promise<Record<string, string> | undefined> {
  const secret = await kube.get<KubeObject & { data?: Record<string, string> }>(
    "Secret",
    scope.namespace,
    daemonSignerSecretName(scope.name),
    { timeoutMs: 10_000 },
  );
  return secret?.data;
}

function decode(value: string | undefined): string {
  return value === undefined ? "" : Buffer.from(value, "base64").toString("utf8");
}

/**
 * Reads the install's CA, key and certificate, to sign a baseline.
 *
 * @param kube the caller's client
 * @param scope the daemon's namespace and name
 * @returns the CA pair
 * @throws {PermissionError} when the caller may not read the CA Secret
 * @throws {NotFoundError} when the daemon is not installed (no CA), or its Secret holds no key
 */
export async function readCaForSigning(
  kube: KubeClient,
  scope: { namespace: string; name: string },
): Promise<DaemonCa> {
  const where = `${scope.namespace}/${daemonSignerSecretName(scope.name)}`;
  let data: Record<string, string> | undefined;
  try {
    data = await readCaSecret(kube, scope);
  } catch (error) {
    if (error instanceof KubeApiError && (error.status === 401 || error.status === 403)) {
      throw new PermissionError(
        `Cannot sign the baseline: the caller may not read Secret '${where}' (the install's CA, whose key signs baselines)`,
        {
          cause: error,
          details: ["  ask for 'get' on that Secret, or have its holder set the baseline"],
        },
      );
    }
    throw error;
  }
  const caCert = decode(data?.["tls.crt"]);
  const caKey = decode(data?.["tls.key"]);
  if (!caCert || !caKey) {
    throw new NotFoundError(
      `Cannot sign the baseline: Secret '${where}' ${
        data ? "holds no CA key" : "does not exist"
      } (the daemon's install makes the CA whose key signs baselines)`,
      {
        details: [
          `  install the daemon first: aicr daemonset install -n ${scope.namespace}`,
          "  (a GitOps install whose CA key is kept outside the cluster cannot sign baselines in it)",
        ],
      },
    );
  }
  return { caCert, caKey };
}

/**
 * Reads the install's CA certificate to verify baselines; never fails: without it, the reason.
 *
 * @param kube the caller's client
 * @param scope the daemon's namespace and name
 * @returns the certificate, or why baselines cannot be verified
 */
export async function readTrustAnchor(
  kube: KubeClient,
  scope: { namespace: string; name: string },
): Promise<TrustAnchor> {
  const where = `${scope.namespace}/${daemonSignerSecretName(scope.name)}`;
  try {
    const caCert = decode((await readCaSecret(kube, scope))?.["tls.crt"]);
    if (caCert) return { caCert };
    return { unverified: `no CA in Secret '${where}': is the daemon installed?` };
  } catch (error) {
    if (error instanceof KubeApiError && (error.status === 401 || error.status === 403)) {
      return { unverified: `the caller may not read Secret '${where}' (the install's CA)` };
    }
    return {
      unverified: `Secret '${where}' cannot be read: ${
        error instanceof Error ? error.message.split("\n")[0] : String(error)
      }`,
    };
  }
}

/**
 * A baseline's trust under an anchor.
 *
 * @param object the baseline ConfigMap
 * @param anchor the CA certificate, or why there is none
 * @returns the verdict
 */
export function judgeTrust(object: BaselineObject, anchor: TrustAnchor): BaselineTrustView {
  if ("unverified" in anchor) return { state: "unverified", reason: anchor.unverified };
  return verifyBaseline(object, anchor.caCert);
}

/**
 * Says once per untrusted baseline that the daemons will not use it, and how to make it trusted.
 *
 * @param log the logger
 * @param untrusted the baselines (cohort key, ConfigMap) and their verdicts
 * @param namespace the daemon's namespace
 */
export function warnUntrusted(
  log: Logger,
  untrusted: readonly { cohortKey: string; configMap: string; trust: BaselineTrustView }[],
  namespace: string,
): void {
  for (const { cohortKey, configMap, trust } of untrusted) {
    if (trust.state === "signed" || trust.state === "unverified") continue;
    log.warn("baseline untrusted: the daemons do not use it for drift", {
      configmap: `${namespace}/${configMap}`,
      trust: trust.state,
      reason: trust.reason,
      remedy:
        `check it, then sign it: aicr daemonset baseline get --cohort ${cohortKey} -n ${namespace} > b.yaml && aicr daemonset baseline set -f b.yaml -n ${namespace}`,
    });
  }
}

/**
 * The baselines an install grants its daemons: only those its CA verifies (a baseline planted
 * with the right labels, edited, or signed by an earlier install's CA is left out, said once
 * each with the remedy).
 *
 * @param log the logger
 * @param objects the baseline ConfigMaps found
 * @param options the install's CA certificate and namespace
 * @returns the names of the verified ones
 */
export function grantableBaselines(
  log: Logger,
  objects: readonly KubeObject[],
  options: { caCert: string; namespace: string },
): string[] {
  const verdicts = objects.map((object) => ({
    configMap: object.metadata?.name ?? "",
    cohortKey: (object.metadata?.labels as Record<string, string> | undefined)?.[
      BASELINE_COHORT_KEY_LABEL
    ] ?? "",
    trust: verifyBaseline(object as BaselineObject, options.caCert) as BaselineTrustView,
  })).filter((v) => v.configMap !== "");
  warnUntrusted(log, verdicts, options.namespace);
  return verdicts.filter((v) => v.trust.state === "signed").map((v) => v.configMap);
}
