import assert from "node:assert/strict";
import { formatStatusTable, statusProblems } from "./status.ts";
import type { DaemonSetStatus } from "./status.ts";

const NOW = new Date("2026-12-05T12:00:00Z");

function healthy(): Omit<DaemonSetStatus, "problems"> {
  return {
    namespace: "aicr-system",
    name: "aicr-daemon",
    cliVersion: "0.2.0",
    daemonSet: {
      desired: 2,
      ready: 2,
      updated: 2,
      available: 2,
      image: "ghcr.io/aicr-run/aicr:0.2.0",
      version: "0.2.0",
    },
    nodes: [
      {
        node: "gpu-1",
        pod: "aicr-daemon-a",
        podUid: "uid-1",
        ready: true,
        image: "ghcr.io/aicr-run/aicr:0.2.0",
        version: "0.2.0",
        certificate: "issued",
      },
      {
        node: "gpu-2",
        pod: "aicr-daemon-b",
        podUid: "uid-2",
        ready: true,
        image: "ghcr.io/aicr-run/aicr:0.2.0",
        version: "0.2.0",
        certificate: "issued",
      },
    ],
    signer: {
      installed: true,
      desired: 2,
      ready: 2,
      available: 2,
      leader: {
        identity: "aicr-daemon-signer-x-y_1",
        pod: "aicr-daemon-signer-x-y",
        transitions: 0,
        renewTime: "2026-12-05T11:59:58.000000Z",
      },
    },
    requests: [],
    issued: 2,
    baselines: [],
    versionSkew: [],
  };
}

Deno.test("statusProblems() finds nothing in a healthy install, and names each problem otherwise", () => {
  assert.deepEqual(statusProblems(healthy(), NOW), []);
  const sick = healthy();
  sick.nodes[1] = { ...sick.nodes[1]!, ready: false, detail: "Running", certificate: "pending" };
  sick.daemonSet.desired = 3;
  sick.signer = { installed: true, desired: 2, ready: 2, available: 2 };
  sick.requests = [
    {
      name: "csr-a",
      podUid: "uid-2",
      livePod: true,
      state: "Denied",
      reason: "WrongNames",
      message: "names x",
    },
    {
      name: "csr-b",
      podUid: "uid-2",
      livePod: true,
      state: "Pending",
      created: "2026-12-05T11:50:00Z",
    },
    {
      name: "csr-c",
      podUid: "c",
      livePod: true,
      state: "Pending",
      created: "2026-12-05T11:59:30Z",
    },
    { name: "csr-d", podUid: "gone", livePod: false, state: "Denied", reason: "UnknownPod" },
    // Sent with gpu-1's token beside its issued certificate: listed, not a failure.
    { name: "csr-e", podUid: "uid-1", livePod: true, state: "Denied", reason: "UnsupportedKey" },
  ];
  const problems = statusProblems(sick, NOW);
  assert.deepEqual(problems, [
    "daemon on gpu-2 not Ready (Running)",
    "1 targeted node(s) have no daemon pod",
    "signer: no replica holds the Lease",
    "request csr-a denied: WrongNames names x",
    "request csr-b pending for over 2 minutes (no signer signs it)",
  ]);
  const noReplica = healthy();
  noReplica.signer = { installed: true, desired: 2, ready: 0, available: 0 };
  assert.deepEqual(statusProblems(noReplica, NOW), ["signer: no available replica (0/2 Ready)"]);
  // An install without the signer is healthy when its daemons are (the CLI signs).
  const noSigner = healthy();
  noSigner.signer = { installed: false, desired: 0, ready: 0, available: 0 };
  assert.deepEqual(statusProblems(noSigner, NOW), []);
});

Deno.test("formatStatusTable() shows each node, the leader, the requests and the verdict", () => {
  const status = { ...healthy(), versionSkew: ["0.1.0"], problems: [] };
  const text = formatStatusTable(status, NOW);
  assert.match(text, /DaemonSet aicr-system\/aicr-daemon: 2\/2 Ready, 2 updated/);
  assert.match(text, /NODE\s+POD\s+READY\s+CERTIFICATE\s+VERSION\s+IMAGE/);
  assert.match(text, /gpu-1\s+aicr-daemon-a\s+true\s+issued\s+0\.2\.0/);
  assert.match(
    text,
    /Signer: 2\/2 available, leader aicr-daemon-signer-x-y \(renewed 2s ago, 0 transitions\)/,
  );
  assert.match(text, /Version skew: daemons run 0\.1\.0, this CLI 0\.2\.0/);
  assert.match(text, /^Healthy$/m);
});
