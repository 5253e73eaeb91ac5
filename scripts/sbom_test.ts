import assert from "node:assert/strict";
import { backendRuntime, spdxDocument } from "./sbom.ts";

const VERSIONS = { node: "24.11.1", deno: "2.5.6" };

function document(backend: string) {
  return spdxDocument({
    version: "0.2.0",
    commit: "abc1234",
    created: "2026-12-05T00:00:00Z",
    image: { repository: "ghcr.io/aicr-run/aicr", digest: `sha256:${"a".repeat(64)}` },
    binaries: [{ arch: "amd64", file: "aicr-0.2.0-linux-amd64", sha256: "b".repeat(64) }],
    backend,
    runtime: backendRuntime(backend, VERSIONS),
    npm: [],
    debian: { amd64: [], arm64: [] },
  }) as { packages: { name: string; versionInfo: string; sourceInfo?: string }[] };
}

Deno.test("sbom: the binary names its backend, and the runtime inside is that backend's", () => {
  const sea = document("node-sea");
  const binary = sea.packages.find((p) => p.name === "aicr-0.2.0-linux-amd64");
  assert.equal(
    binary?.sourceInfo,
    "aicr 0.2.0, commit abc1234, built with the node-sea backend (node 24.11.1)",
  );
  assert.deepEqual(
    sea.packages.filter((p) => p.name === "node" || p.name === "denort").map((p) => p.name),
    ["node"],
  );
  const compiled = document("deno-compile");
  assert.match(
    compiled.packages.find((p) => p.name === "aicr-0.2.0-linux-amd64")?.sourceInfo ?? "",
    /built with the deno-compile backend \(denort 2\.5\.6\)/,
  );
  assert.deepEqual(
    compiled.packages.filter((p) => p.name === "node" || p.name === "denort").map((p) => [
      p.name,
      p.versionInfo,
    ]),
    [["denort", "2.5.6"]],
  );
});
