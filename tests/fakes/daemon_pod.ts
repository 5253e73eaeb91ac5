/**
 * A daemon pod as the DaemonSet controller makes it: the selector labels, owned by the
 * DaemonSet, on its node with its pod IP. For fakes of the signer's world (`csr/sign_test.ts`,
 * `bench/signer_bench.ts`).
 *
 * @module
 */

/**
 * The pod of daemon number `index` on `node`.
 *
 * @param options the DaemonSet's UID, the pod's index, its node and pod IP
 * @returns the pod, to `put` into a fake client
 */
export function daemonPod(
  options: { dsUid: string; index: number; node: string; ip: string },
): Record<string, unknown> {
  return {
    metadata: {
      name: `aicr-daemon-${options.index}`,
      namespace: "aicr-system",
      labels: {
        "app.kubernetes.io/name": "aicr",
        "app.kubernetes.io/component": "daemon",
        "app.kubernetes.io/instance": "aicr-daemon",
      },
      ownerReferences: [{
        apiVersion: "apps/v1",
        kind: "DaemonSet",
        name: "aicr-daemon",
        uid: options.dsUid,
        controller: true,
      }],
    },
    spec: { nodeName: options.node },
    status: { podIP: options.ip },
  };
}
