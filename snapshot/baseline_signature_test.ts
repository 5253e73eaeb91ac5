import assert from "node:assert/strict";
import { generateDaemonCa } from "../x509.ts";
import {
  BASELINE_COHORT_ANNOTATION,
  BASELINE_COHORT_KEY_LABEL,
  BASELINE_VALUES_ANNOTATION,
} from "./baseline.ts";
import {
  BASELINE_SIGNATURE_KEY,
  type BaselineObject,
  keyId,
  signBaseline,
  verifyBaseline,
} from "./baseline_signature.ts";

const CA = generateDaemonCa({ now: new Date("2026-01-01T00:00:00Z") });
const OTHER = generateDaemonCa({ now: new Date("2026-01-01T00:00:00Z") });

function baseline(): BaselineObject {
  return {
    metadata: {
      name: "aicr-daemon-baseline-0123456789abcdef",
      namespace: "aicr",
      labels: { "app.kubernetes.io/name": "aicr", [BASELINE_COHORT_KEY_LABEL]: "0123456789abcdef" },
      annotations: {
        [BASELINE_COHORT_ANNOTATION]: "NVIDIA H100 80GB HBM3 ×8",
        [BASELINE_VALUES_ANNOTATION]: JSON.stringify({ "GPU.smi.gpu-count": "8" }),
      },
    },
    data: {
      "snapshot.yaml": "kind: Snapshot\n",
      format: "yaml",
      timestamp: "2026-01-01T00:00:00Z",
      source: "node gpu-1",
    },
  };
}

function signed(): BaselineObject {
  const object = baseline();
  object.data![BASELINE_SIGNATURE_KEY] = signBaseline(object, CA.caKey);
  return object;
}

Deno.test("verifyBaseline() trusts a baseline signed by the install's CA, by certificate or key", () => {
  assert.deepEqual(verifyBaseline(signed(), CA.caCert), { state: "signed", key: keyId(CA.caCert) });
});

Deno.test("verifyBaseline() refuses an unsigned baseline", () => {
  assert.equal(verifyBaseline(baseline(), CA.caCert).state, "unsigned");
});

Deno.test("verifyBaseline() refuses a baseline signed by another install's CA", () => {
  const object = baseline();
  object.data![BASELINE_SIGNATURE_KEY] = signBaseline(object, OTHER.caKey);
  const trust = verifyBaseline(object, CA.caCert);
  assert.equal(trust.state, "other-ca");
});

Deno.test("verifyBaseline() refuses any edit of what decides the drift", async (t) => {
  const edits: [string, (o: BaselineObject) => void][] = [
    ["the snapshot text", (o) => (o.data!["snapshot.yaml"] += "# edited\n")],
    ["the source", (o) => (o.data!.source = "node gpu-2")],
    ["a data key added", (o) => (o.data!["snapshot.json"] = "{}")],
    ["a data key removed", (o) => delete o.data!.timestamp],
    ["the cohort key (copied to another cohort)", (o) => {
      o.metadata!.labels![BASELINE_COHORT_KEY_LABEL] = "fedcba9876543210";
      o.metadata!.name = "aicr-daemon-baseline-fedcba9876543210";
    }],
    ["the cohort values", (o) => {
      o.metadata!.annotations![BASELINE_VALUES_ANNOTATION] = JSON.stringify({
        "GPU.smi.gpu-count": "4",
      });
    }],
    ["the cohort name", (o) => (o.metadata!.annotations![BASELINE_COHORT_ANNOTATION] = "x")],
    ["the name", (o) => (o.metadata!.name = "aicr-daemon-baseline-other")],
    ["the namespace", (o) => (o.metadata!.namespace = "elsewhere")],
    ["the signature (the same CA's, over other content)", (o) => {
      const envelope = JSON.parse(o.data![BASELINE_SIGNATURE_KEY]!);
      envelope.sig = JSON.parse(signBaseline({ ...baseline(), data: {} }, CA.caKey)).sig;
      o.data![BASELINE_SIGNATURE_KEY] = JSON.stringify(envelope);
    }],
    ["the envelope", (o) => (o.data![BASELINE_SIGNATURE_KEY] = "not json")],
  ];
  for (const [what, edit] of edits) {
    await t.step(what, () => {
      const object = signed();
      edit(object);
      assert.equal(verifyBaseline(object, CA.caCert).state, "edited");
    });
  }
});

Deno.test("verifyBaseline() ignores labels and annotations that do not decide the drift", () => {
  const object = signed();
  object.metadata!.labels!["team"] = "gpu";
  object.metadata!.annotations!["kubectl.kubernetes.io/last-applied-configuration"] = "{}";
  assert.equal(verifyBaseline(object, CA.caCert).state, "signed");
});
