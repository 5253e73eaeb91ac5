import assert from "node:assert/strict";
import { sampleSnapshot } from "../tests/fakes/snapshot.ts";
import type { Snapshot } from "../snapshot/mod.ts";
import {
  agentBuildOf,
  AgentIdentityError,
  checkAgentBuild,
  isForeignDaemonExit,
  upstreamLogLine,
} from "./agent_identity.ts";

const RELEASE = {
  version: "0.2.0",
  commit: "abc1234",
  backend: "node-sea",
  imageRepository: "ghcr.io/aicr-run/aicr",
};
const IMAGE = "ghcr.io/aicr-run/aicr:0.2.0";

function snapshot(apiVersion: string, version: string): Snapshot {
  const base = sampleSnapshot({ nodeName: "gpu-1" });
  return { ...base, apiVersion, metadata: { ...base.metadata, version } } as Snapshot;
}

Deno.test("agent identity: this build's agent passes; its termination message's commit is checked", () => {
  const ours = snapshot("aicr.run/v1", "0.2.0");
  checkAgentBuild(agentBuildOf(ours), RELEASE, IMAGE);
  checkAgentBuild(agentBuildOf(ours, '{"version":"0.2.0","commit":"abc1234"}'), RELEASE, IMAGE);
  assert.throws(
    () =>
      checkAgentBuild(agentBuildOf(ours, '{"version":"0.2.0","commit":"0ff1ce0"}'), RELEASE, IMAGE),
    /the agent that ran is aicr 0\.2\.0 \(commit 0ff1ce0\), not aicr 0\.2\.0 \(commit abc1234\)/,
  );
});

Deno.test("agent identity: NVIDIA's Go aicr, another aicr version, another program: one error each", () => {
  assert.throws(
    () =>
      checkAgentBuild(
        agentBuildOf(snapshot("aicr.nvidia.com/v1alpha1", "v0.11.1")),
        RELEASE,
        IMAGE,
      ),
    (error: unknown) =>
      error instanceof AgentIdentityError && error.exitCode === 8 &&
      /the agent that ran is NVIDIA's Go aicr v0\.11\.1, not aicr 0\.2\.0 \(commit abc1234\): the image 'ghcr\.io\/aicr-run\/aicr:0\.2\.0' is not this build's/
        .test(error.message),
  );
  assert.throws(
    () => checkAgentBuild(agentBuildOf(snapshot("aicr.run/v1", "0.1.0")), RELEASE, IMAGE),
    /the agent that ran is aicr 0\.1\.0, not aicr 0\.2\.0/,
  );
  assert.throws(
    () => checkAgentBuild(agentBuildOf(snapshot("example.com/v9", "1")), RELEASE, IMAGE),
    /a program that is not aicr \(its document is 'example\.com\/v9'\)/,
  );
});

Deno.test("agent identity: a source run accepts the release it develops, and checks no commit", () => {
  const source = { ...RELEASE, version: "0.2.0-dev", commit: "unknown", backend: "source" };
  checkAgentBuild(
    agentBuildOf(snapshot("aicr.run/v1", "0.2.0"), '{"commit":"abc"}'),
    source,
    IMAGE,
  );
  checkAgentBuild(agentBuildOf(snapshot("aicr.run/v1", "0.2.0-dev")), source, IMAGE);
  assert.throws(
    () => checkAgentBuild(agentBuildOf(snapshot("aicr.run/v1", "0.3.0")), source, IMAGE),
    /not aicr 0\.2\.0:/,
  );
});

Deno.test("agent identity: NVIDIA's Go aicr's failure line is recognised in a log, aicr's never", () => {
  const upstream = [
    "\u001b[32m[agent] collecting GPU information via nvidia-smi\u001b[0m",
    '\u001b[31m[agent] command failed: error=[INTERNAL] failed to apply ConfigMap: configmaps "x" is forbidden exitCode=8\u001b[0m',
  ].join("\n");
  assert.match(upstreamLogLine(upstream) ?? "", /^\[agent\] command failed: error=\[INTERNAL\]/);
  assert.match(
    upstreamLogLine(
      '2026/12/05 10:25:18 ERROR command failed error="flag provided but not defined: -port" exitCode=1',
    ) ?? "",
    /flag provided but not defined/,
  );
  // The agent Job's command line run by NVIDIA's Go aicr v0.11.1 (its log tail, captured from
  // `aicr --debug --log-json agent -o cm://a/b`, built offline): it has no agent verb taking -o.
  const agentVerb = [
    "GLOBAL OPTIONS:",
    "   --debug        enable debug logging [$AICR_DEBUG]",
    "   --version, -v  print the version",
    "Incorrect Usage: flag provided but not defined: -o",
    "",
    '2026/12/07 04:13:17 ERROR command failed error="flag provided but not defined: -o" exitCode=1',
  ].join("\n");
  assert.match(upstreamLogLine(agentVerb) ?? "", /^2026\/12\/07 .*-o" exitCode=1$/);
  assert.equal(upstreamLogLine("[agent] error: Cannot read /proc/modules: EACCES\n"), undefined);
  assert.ok(isForeignDaemonExit("Incorrect Usage: flag provided but not defined: -port"));
  assert.ok(isForeignDaemonExit("No help topic for 'daemon'"));
  assert.ok(!isForeignDaemonExit("error: Cannot listen on 0.0.0.0:8443: EADDRINUSE"));
});
