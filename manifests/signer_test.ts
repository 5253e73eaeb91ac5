import assert from "node:assert/strict";
import { UsageError } from "../errors.ts";
import { assertGolden as assertGoldenFile } from "../tests/_golden.ts";
import { daemonSelectorLabels, signerSelectorLabels } from "./names.ts";
import { buildSignerDeployment, buildSignerLease, signerArgs } from "./signer.ts";
import type { SignerConfig } from "./signer.ts";
import { formatManifest } from "./yaml.ts";

const BASE: SignerConfig = { namespace: "aicr-system", image: "ghcr.io/aicr-run/aicr:0.1.0" };

Deno.test("signer: the default Deployment matches its golden", () => {
  assertGoldenFile(
    new URL("./testdata/signer-deployment.yaml", import.meta.url),
    formatManifest(buildSignerDeployment(BASE)),
  );
});

Deno.test("signer: two replicas run 'aicr daemonset signer' for this install, spread over nodes", () => {
  const deployment = buildSignerDeployment({ ...BASE, name: "gpu-snap" });
  assert.equal(deployment.metadata.name, "gpu-snap-signer");
  assert.equal(deployment.spec.replicas, 2);
  const pod = deployment.spec.template.spec;
  assert.equal(pod.serviceAccountName, "gpu-snap-signer");
  assert.deepEqual(pod.containers[0]?.args, signerArgs("aicr-system", "gpu-snap"));
  assert.deepEqual(pod.containers[0]?.args.slice(0, 2), ["daemonset", "signer"]);
  const spread = pod.affinity?.podAntiAffinity?.preferredDuringSchedulingIgnoredDuringExecution;
  assert.equal(spread?.[0]?.podAffinityTerm.topologyKey, "kubernetes.io/hostname");
  assert.deepEqual(spread?.[0]?.podAffinityTerm.labelSelector.matchLabels, {
    ...signerSelectorLabels("gpu-snap"),
  });
  // A rollout starts a new replica before an old one goes.
  assert.deepEqual(deployment.spec.strategy.rollingUpdate, { maxSurge: 1, maxUnavailable: 0 });
});

Deno.test("signer: the DaemonSet's selector never matches a signer pod, nor the signer's a daemon pod", () => {
  const podLabels = buildSignerDeployment(BASE).spec.template.metadata.labels;
  const matches = (selector: Record<string, string>, labels: Record<string, string>) =>
    Object.entries(selector).every(([k, v]) => labels[k] === v);
  assert.equal(matches(daemonSelectorLabels("aicr-daemon"), podLabels), false);
  assert.equal(matches(signerSelectorLabels("aicr-daemon"), podLabels), true);
});

Deno.test("signer: its pods are PSS restricted, with no port, no host access and no volume", () => {
  const pod = buildSignerDeployment(BASE).spec.template.spec;
  const container = pod.containers[0];
  assert.ok(container);
  assert.equal(pod.hostNetwork, undefined);
  assert.equal(pod.hostPID, undefined);
  // None, and no empty list either: the API server drops one, and kubectl apply would then
  // report the Deployment configured on every apply of the same render.
  assert.equal(pod.volumes, undefined);
  assert.equal(container.volumeMounts, undefined);
  assert.equal(container.ports, undefined);
  assert.equal(container.securityContext.runAsNonRoot, true);
  assert.equal(container.securityContext.readOnlyRootFilesystem, true);
  assert.equal(container.securityContext.allowPrivilegeEscalation, false);
  assert.deepEqual(container.securityContext.capabilities, { drop: ["ALL"] });
  assert.equal(pod.tolerations, undefined);
  assert.deepEqual(pod.nodeSelector, { "kubernetes.io/os": "linux" });
});

Deno.test("signer: pull secrets, replicas, resources and a priority class are taken", () => {
  const deployment = buildSignerDeployment({
    ...BASE,
    imagePullSecrets: ["regcred"],
    replicas: 3,
    requests: { memory: "128Mi" },
    priorityClassName: "aicr-critical",
  });
  const pod = deployment.spec.template.spec;
  assert.deepEqual(pod.imagePullSecrets, [{ name: "regcred" }]);
  assert.equal(deployment.spec.replicas, 3);
  assert.equal(pod.containers[0]?.resources.requests.memory, "128Mi");
  assert.equal(pod.containers[0]?.resources.requests.cpu, "10m");
  assert.equal(pod.priorityClassName, "aicr-critical");
});

Deno.test("signer: bad values are refused naming the option", () => {
  const cases: [Partial<SignerConfig>, RegExp][] = [
    [{ replicas: 0 }, /signerReplicas.*from 1 to 10/],
    [{ replicas: 1.5 }, /signerReplicas/],
    [{ priorityClassName: "Not_A_Name" }, /priorityClassName.*PriorityClass name/],
    [{ imagePullSecrets: ["a b"] }, /imagePullSecret/],
    [{ image: "" }, /image/],
    [{ name: "Bad" }, /DNS-1123 label/],
    [{ requests: { memory: "2Gi" } }, /must not exceed its limit/],
  ];
  for (const [extra, message] of cases) {
    assert.throws(
      () => buildSignerDeployment({ ...BASE, ...extra }),
      (error: unknown) => error instanceof UsageError && message.test(error.message) ? true : false,
      JSON.stringify(extra),
    );
  }
});

Deno.test("signer: the Lease is created empty, with the signer's name and labels", () => {
  const lease = buildSignerLease({ namespace: "ns", name: "aicr-daemon" });
  assert.equal(lease.metadata.name, "aicr-daemon-signer");
  assert.equal(lease.metadata.namespace, "ns");
  assert.deepEqual(lease.spec, {});
  assert.equal(lease.metadata.labels?.["app.kubernetes.io/component"], "signer");
});
