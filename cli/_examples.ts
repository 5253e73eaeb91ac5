/**
 * The `Examples:` block of every verb's help, in one table (kubectl's habit: the first thing an
 * operator reads in `--help` is a command line that works).
 *
 * @module
 */

/** Example command lines per verb path (`daemonset fetch`), each with a comment. */
export const EXAMPLES: Readonly<Record<string, readonly string[]>> = {
  snapshot: [
    "# Snapshot a GPU node (auto-targeted) to stdout, in the kubeconfig context's namespace",
    "aicr snapshot",
    "# Into a ConfigMap, with its own namespace created if absent",
    "aicr snapshot -n gpu-operator --create-namespace -o cm://gpu-operator/aicr-snapshot",
    "# JSON to a file from one chosen node",
    "aicr snapshot --node-selector kubernetes.io/hostname=gpu-7 -t json -o snap.json",
    "# See the RBAC and Job a run would create, without creating them (no cluster: --offline)",
    "aicr snapshot --dry-run -t yaml",
  ],
  agent: [
    "# Snapshot this host to stdout",
    "aicr agent",
    "# JSON to a file, failing without a GPU",
    "aicr agent --require-gpu -t json -o host.json",
  ],
  cleanup: [
    "# Which runs left objects, in every namespace, and the command that removes each (exit 1 if any)",
    "aicr cleanup",
    "# See, then remove, what a killed run left (its run ID is in its first lines)",
    "aicr cleanup --run-id 20260102-150405-0123456789abcdef -n gpu-operator --dry-run",
    "aicr cleanup --run-id 20260102-150405-0123456789abcdef -n gpu-operator --report cleanup.json",
  ],
  diff: [
    "# Drift between two snapshots; exit 1 in CI when there is any",
    "aicr diff -b baseline.yaml --target cm://gpu-operator/aicr-snapshot --fail-on-drift",
    "# The outliers of a fleet, as one HTML page",
    "aicr diff --fleet fleet/ -t html -o fleet.html",
  ],
  daemon: [
    "# Serve this node's snapshot (inside the DaemonSet's pod; see 'aicr daemonset install')",
    "aicr daemon --port 8443",
  ],
  daemonset: [
    "aicr daemonset install -n aicr-system --create-namespace",
    "aicr daemonset fetch -n aicr-system -o fleet/",
    "aicr daemonset uninstall -n aicr-system",
  ],
  "daemonset install": [
    "# Install on GPU nodes and wait for the pods, with a JSON report for CI",
    "aicr daemonset install -n aicr-system --create-namespace --report install.json",
  ],
  "daemonset fetch": [
    "# Every node's snapshot into a directory, a JSON report and JUnit XML for CI",
    "aicr daemonset fetch -n aicr-system -o fleet/ --report fetch.json --junit fetch.xml",
    "# One YAML stream to stdout, straight into the fleet diff",
    "aicr daemonset fetch -n aicr-system -o - > fleet.yaml && aicr diff --fleet fleet.yaml",
  ],
  image: [
    "aicr image save -o aicr.tar",
    "aicr image push registry.example.com/tools/aicr",
    "aicr image list -t hauler",
  ],
  "image save": [
    "# This binary's image as an OCI archive (ctr images import, skopeo copy oci-archive:, podman load)",
    "aicr image save -o aicr.tar",
    "# Both platforms, from the other one's binary or a release folder",
    "aicr image save --binary linux/arm64=aicr-linux-arm64 -o aicr.tar",
    "aicr image save --from release/ -o aicr.tar",
  ],
  "image push": [
    "# Push to a registry (credentials from ~/.docker/config.json), then run with the printed --image",
    "aicr image push registry.example.com/tools/aicr --from release/",
    "aicr image push registry.local:5000/aicr --ca-file registry-ca.pem --registry-config auth.json",
  ],
  "image list": [
    "# The reference with its digest, for a mirror: plain, Hauler or Zarf",
    "aicr image list --from release/ -t zarf",
  ],
  "daemonset uninstall": [
    "aicr daemonset uninstall -n aicr-system --report uninstall.json",
  ],
  "daemonset render": [
    "# The manifests for review or GitOps (the Secret holds a private key: keep it private)",
    "aicr daemonset render -n aicr-system > aicr-daemonset.yaml",
  ],
  "daemonset upgrade": [
    "# After upgrading the CLI: the daemons and the signer to its image, every setting kept",
    "# (the install recorded its flags on the DaemonSet: annotation aicr.run/install-settings)",
    "aicr daemonset upgrade -n aicr-system",
    "# One setting changed, the rest as installed (and the new value recorded)",
    "aicr daemonset upgrade -n aicr-system --port 9443",
    "# A mirrored image; a rollout that fails is rolled back (exit 8 for a pull, 5 for a deadline)",
    "aicr daemonset upgrade -n aicr-system --image registry.local:5000/aicr:0.3.0 --timeout 10m",
  ],
  "daemonset status": [
    "aicr daemonset status -n aicr-system",
    "# For a monitor or a script: exit 9 when unhealthy",
    "aicr daemonset status -n aicr-system -t json > status.json",
  ],
  "daemonset signer": [
    "# Run by the install's Deployment (two replicas, one leader through the <name>-signer Lease)",
    "aicr daemonset signer -n aicr-system --name aicr-daemon",
  ],
  "daemonset baseline": [
    "aicr daemonset baseline set -n aicr-system --from-node gpu-node-1",
    "aicr daemonset baseline list -n aicr-system",
  ],
  "daemonset baseline set": [
    "# A node's current snapshot becomes its cohort's baseline (every daemon of that cohort compares with it)",
    "aicr daemonset baseline set -n aicr-system --from-node gpu-node-1",
    "# A reviewed file, refused unless it belongs to the cohort named",
    "aicr daemonset baseline set -n aicr-system -f golden-h100.yaml --cohort 3f2a9c0d1e4b5a67",
  ],
  "daemonset baseline get": [
    "aicr daemonset baseline get -n aicr-system --cohort 3f2a9c0d1e4b5a67 > baseline.yaml",
  ],
  "daemonset baseline list": [
    "aicr daemonset baseline list -n aicr-system",
  ],
  "daemonset baseline delete": [
    "aicr daemonset baseline delete -n aicr-system --cohort 3f2a9c0d1e4b5a67",
    "aicr daemonset baseline delete -n aicr-system --all",
  ],
  completion: [
    "# bash: this shell, or every new one",
    "source <(aicr completion bash)",
    "aicr completion bash > /etc/bash_completion.d/aicr",
    "# zsh and fish",
    'aicr completion zsh > "${fpath[1]}/_aicr"',
    "aicr completion fish > ~/.config/fish/completions/aicr.fish",
  ],
  version: [
    "aicr version",
    "aicr version -t json",
  ],
};

/**
 * The help text block for a verb path.
 *
 * @param path the verb path (`daemonset fetch`)
 * @returns the block, or undefined when the table has none
 */
export function examplesHelp(path: string): string | undefined {
  const lines = EXAMPLES[path];
  return lines ? `\nExamples:\n${lines.map((l) => `  ${l}`).join("\n")}\n` : undefined;
}
