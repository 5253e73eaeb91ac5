import assert from "node:assert/strict";
import { formatReference, parseReference } from "./reference.ts";

Deno.test("parseReference() reads registry, repository, tag and digest as Docker does", () => {
  const digest = `sha256:${"a".repeat(64)}` as const;
  const cases: [string, ReturnType<typeof parseReference>][] = [
    ["ghcr.io/nvidia/aicr:v0.1.0", {
      registry: "ghcr.io",
      repository: "nvidia/aicr",
      tag: "v0.1.0",
    }],
    ["10.231.0.10:5443/aicr", { registry: "10.231.0.10:5443", repository: "aicr" }],
    ["localhost/tools/aicr:1", { registry: "localhost", repository: "tools/aicr", tag: "1" }],
    ["myorg/aicr", { registry: "docker.io", repository: "myorg/aicr" }],
    ["busybox", { registry: "docker.io", repository: "library/busybox" }],
    [`reg.example:5000/a/b@${digest}`, { registry: "reg.example:5000", repository: "a/b", digest }],
  ];
  for (const [text, want] of cases) assert.deepEqual(parseReference(text), want, text);
  assert.equal(formatReference(parseReference("reg.example/a:1")), "reg.example/a:1");
});

Deno.test("parseReference() names the part that is wrong", () => {
  assert.throws(() => parseReference("reg.example/UPPER"), /'UPPER' is not a valid repository/);
  assert.throws(
    () => parseReference("reg.example/a@sha256:12"),
    /'sha256:12' is not a sha256 digest/,
  );
  assert.throws(() => parseReference("reg.example/a:bad tag"), /not a valid tag/);
  assert.throws(() => parseReference(""), /it is empty/);
});
