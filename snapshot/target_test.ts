import assert from "node:assert/strict";
import { UsageError } from "../errors.ts";
import { formatConfigMapUri, parseConfigMapUri, parseSnapshotTarget } from "./target.ts";

Deno.test("parseSnapshotTarget() reads stdout, files and ConfigMaps", () => {
  assert.deepEqual(parseSnapshotTarget(undefined), { kind: "stdout" });
  assert.deepEqual(parseSnapshotTarget("-"), { kind: "stdout" });
  assert.deepEqual(parseSnapshotTarget("out/snap.yaml"), { kind: "file", path: "out/snap.yaml" });
  assert.deepEqual(parseSnapshotTarget("cm://gpu-operator/aicr-snapshot"), {
    kind: "configmap",
    ref: { namespace: "gpu-operator", name: "aicr-snapshot" },
  });
});

for (
  const bad of [
    "cm://",
    "cm://ns",
    "cm://ns/",
    "cm:///name",
    "cm://Bad_NS/name",
    "cm://ns/Name!",
    "https://example.com/x",
    "dir/",
  ]
) {
  Deno.test(`parseSnapshotTarget() rejects '${bad}' with a usage error naming it`, () => {
    assert.throws(() => parseSnapshotTarget(bad), (error: unknown) => {
      assert.ok(error instanceof UsageError);
      assert.ok(error.message.includes(`'${bad}'`), error.message);
      return true;
    });
  });
}

Deno.test("formatConfigMapUri() is the inverse of parseConfigMapUri()", () => {
  const ref = parseConfigMapUri("cm://default/aicr-agent-snapshot-x");
  assert.equal(formatConfigMapUri(ref), "cm://default/aicr-agent-snapshot-x");
});

Deno.test("parseConfigMapUri() names the invalid name and namespace it refuses", () => {
  assert.throws(() => parseConfigMapUri("cm://ns/UPPER", "target"), (error: unknown) => {
    assert.ok(error instanceof UsageError);
    assert.match(error.message, /name 'UPPER' is not a valid ConfigMap name/);
    assert.ok(!error.message.includes("=>"), error.message);
    return true;
  });
  assert.throws(
    () => parseConfigMapUri("cm://Bad_NS/x", "target"),
    /namespace 'Bad_NS' is not a valid Kubernetes namespace/,
  );
});
