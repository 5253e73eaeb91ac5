import assert from "node:assert/strict";
import { KubeApiError } from "../kube/mod.ts";
import type { KubeObject } from "../kube/mod.ts";
import { createLogger } from "../log.ts";
import {
  BASELINE_COHORT_ANNOTATION,
  BASELINE_COHORT_KEY_LABEL,
  BASELINE_SIGNATURE_KEY,
  BASELINE_VALUES_ANNOTATION,
  baselineConfigMapName,
  baselineSnapshot,
  encodeSnapshot,
  signBaseline,
  snapshotCohort,
} from "../snapshot/mod.ts";
import type { BaselineObject, Snapshot } from "../snapshot/mod.ts";
import { setReading } from "../snapshot/testdata/generate.ts";
import { sampleSnapshot } from "./_testing.ts";
import { createBaselineTracker } from "./baseline.ts";
import { X509Certificate } from "node:crypto";
import type { KeyObject } from "node:crypto";
import { generateDaemonCa } from "../x509.ts";
import { createDaemonMetrics } from "./metrics.ts";

/** The install's CA: it signs the baselines, and the daemons verify with it. */
const CA = generateDaemonCa({ now: new Date("2026-01-01T00:00:00Z") });
const TRUST = new X509Certificate(CA.caCert).publicKey;

/** Signs a baseline ConfigMap (again) as `baseline set` does. */
function signed(object: KubeObject, key = CA.caKey): KubeObject {
  const data = (object as { data: Record<string, string> }).data;
  delete data[BASELINE_SIGNATURE_KEY];
  data[BASELINE_SIGNATURE_KEY] = signBaseline(object as BaselineObject, key);
  return object;
}

function configMap(snapshot: Snapshot, version = "1", cohortOf: Snapshot = snapshot): KubeObject {
  return signed(unsignedConfigMap(snapshot, version, cohortOf));
}

function unsignedConfigMap(
  snapshot: Snapshot,
  version = "1",
  cohortOf: Snapshot = snapshot,
): KubeObject {
  const cohort = snapshotCohort(cohortOf);
  return {
    metadata: {
      name: baselineConfigMapName("aicr-daemon", cohort.key),
      namespace: "aicr-system",
      resourceVersion: version,
      labels: { [BASELINE_COHORT_KEY_LABEL]: cohort.key },
      annotations: {
        [BASELINE_COHORT_ANNOTATION]: cohort.name,
        [BASELINE_VALUES_ANNOTATION]: JSON.stringify(cohort.values),
      },
    },
    data: { "snapshot.yaml": encodeSnapshot(baselineSnapshot(snapshot)), format: "yaml" },
  } as KubeObject;
}

function setup(
  read: (name: string) => Promise<KubeObject | undefined>,
  trust: () => KeyObject | undefined = () => TRUST,
) {
  const metrics = createDaemonMetrics({ version: "1", commit: "c" });
  const lines: string[] = [];
  const names: string[] = [];
  const tracker = createBaselineTracker({
    read: (name) => {
      names.push(name);
      return read(name);
    },
    metrics,
    log: createLogger({ write: (line: string) => lines.push(line) }),
    daemonName: "aicr-daemon",
    nodeName: "node-1",
    trust,
  }, { intervalMs: 0 });
  return { metrics, lines, names, tracker };
}

function drift(metrics: ReturnType<typeof createDaemonMetrics>): string[] {
  return metrics.driftReadings.render().split("\n").filter((l) => l.startsWith("aicr_drift"));
}

Deno.test("createBaselineTracker() exports drift 0 against its cohort's baseline, then the planted change", async () => {
  const node = sampleSnapshot();
  const cohort = snapshotCohort(node, "node-1");
  let stored: KubeObject | undefined = configMap(sampleSnapshot());
  const { metrics, lines, names, tracker } = setup(() => Promise.resolve(stored));
  await tracker.observe(node);
  assert.deepEqual(names, [`aicr-daemon-baseline-${cohort.key}`]);
  assert.equal(tracker.state(), "ok");
  assert.equal(metrics.driftReadings.get({ measurement: "GPU", cohort: cohort.name }), 0);
  assert.equal(
    metrics.baselineInfo.get({ cohort: cohort.name, configmap: names[0]!, state: "ok" }),
    1,
  );
  const changed = sampleSnapshot();
  setReading(changed, "GPU.smi.driver", "580.95.05");
  await tracker.observe(changed);
  assert.equal(metrics.driftReadings.get({ measurement: "GPU", cohort: cohort.name }), 1);
  assert.ok(drift(metrics).every((l) => l.endsWith(" 0") || l.includes('measurement="GPU"')));
  // A new baseline with the new driver: drift back to 0 on the next read.
  stored = configMap(changed, "2");
  await tracker.refresh();
  await tracker.refresh();
  assert.equal(metrics.driftReadings.get({ measurement: "GPU", cohort: cohort.name }), 0);
  assert.equal(
    lines.filter((l) => l.includes("baseline read")).length,
    2,
    "one line per baseline version read, none per poll",
  );
  // Deleted: state missing, drift series gone, one log line per change of state.
  stored = undefined;
  await tracker.refresh();
  await tracker.refresh();
  assert.equal(tracker.state(), "missing");
  assert.deepEqual(drift(metrics), []);
  assert.equal(lines.filter((l) => l.includes("baseline missing")).length, 1, lines.join(""));
  await tracker.close();
});

Deno.test("createBaselineTracker() says malformed, wrong-cohort, forbidden and unreachable in its state metric and keeps going", async () => {
  const node = sampleSnapshot();
  const gb200 = sampleSnapshot();
  setReading(gb200, "GPU.smi.gpu.model", "NVIDIA GB200 192GB HBM3e");
  let answer: (name: string) => Promise<KubeObject | undefined> = () => {
    const cm = configMap(node);
    (cm as { data: Record<string, string> }).data = { "snapshot.yaml": "kind: NotASnapshot\n" };
    return Promise.resolve(signed(cm));
  };
  const { metrics, lines, tracker } = setup((name) => answer(name));
  await tracker.observe(node);
  assert.equal(tracker.state(), "malformed");
  assert.equal(metrics.baselineReadErrors.get({ reason: "malformed" }), 1);
  // The GB200's baseline filed under this node's cohort name (a hand-made ConfigMap).
  answer = () => Promise.resolve(configMap(gb200, "2", node));
  await tracker.refresh();
  assert.equal(tracker.state(), "wrong-cohort");
  assert.match(lines.at(-1) ?? "", /GPU\.smi\.gpu\.model is 'NVIDIA GB200 192GB HBM3e'/);
  answer = () => Promise.resolve(configMap(node, "3", gb200));
  await tracker.refresh();
  assert.equal(tracker.state(), "wrong-cohort");
  // Refused for the cohort's name, but the placeholder every grant lists reads fine (404): the
  // RBAC works and no baseline is granted for this cohort, which is what "missing" means.
  answer = (name) =>
    name.endsWith("-baseline-none")
      ? Promise.resolve(undefined)
      : Promise.reject(new KubeApiError("configmaps is forbidden", 403, "Forbidden"));
  await tracker.refresh();
  assert.equal(tracker.state(), "missing");
  assert.equal(metrics.baselineReadErrors.get({ reason: "forbidden" }), undefined);
  // Refused for the placeholder too: the daemon's grant itself is broken.
  answer = () => Promise.reject(new KubeApiError("configmaps is forbidden", 403, "Forbidden"));
  await tracker.refresh();
  assert.equal(tracker.state(), "forbidden");
  answer = () => Promise.reject(new KubeApiError("connection refused", 0, ""));
  await tracker.refresh();
  assert.equal(tracker.state(), "unreachable");
  assert.deepEqual(drift(metrics), []);
  const info = metrics.baselineInfo.render().split("\n").filter((l) => l.startsWith("aicr_"));
  assert.equal(info.length, 1, "one state series at a time");
  assert.match(info[0] ?? "", /state="unreachable"/);
  await tracker.close();
});

Deno.test("createBaselineTracker() never measures drift against an unsigned, edited or foreign-signed baseline: untrusted", async () => {
  const node = sampleSnapshot();
  const cohort = snapshotCohort(node, "node-1");
  // The attacker's baseline hides the node's real driver: drift 0 if it were used.
  const forged = sampleSnapshot();
  setReading(forged, "GPU.smi.driver", "999.99.99");
  const other = generateDaemonCa({ now: new Date("2026-01-01T00:00:00Z") });
  let answer: KubeObject = unsignedConfigMap(forged);
  let trust: KeyObject | undefined = undefined;
  const { metrics, lines, tracker } = setup(() => Promise.resolve(answer), () => trust);

  // Before the daemon holds its certificate, no CA: nothing is trusted, even a good baseline.
  answer = configMap(sampleSnapshot());
  await tracker.observe(node);
  assert.equal(tracker.state(), "untrusted");
  assert.match(
    lines.at(-1) ?? "",
    /^WARN baseline untrusted: drift is not measured .*CA is not known yet/,
  );
  trust = TRUST;
  await tracker.refresh();
  assert.equal(tracker.state(), "ok", "the same version judged again once the CA is known");

  const cases: [string, KubeObject, RegExp][] = [
    ["planted, unsigned", unsignedConfigMap(forged, "2"), /carries no signature/],
    [
      "signed by another install's CA",
      signed(unsignedConfigMap(forged, "3"), other.caKey),
      /another CA/,
    ],
    [
      "edited after it was signed",
      (() => {
        const edited = configMap(sampleSnapshot(), "4");
        const data = (edited as { data: Record<string, string> }).data;
        data["snapshot.yaml"] = encodeSnapshot(baselineSnapshot(forged));
        return edited;
      })(),
      /changed or copied after it was signed/,
    ],
    [
      "copied from another namespace",
      (() => {
        const copied = configMap(forged, "5");
        copied.metadata!.namespace = "elsewhere";
        return copied;
      })(),
      /changed or copied/,
    ],
  ];
  for (const [what, object, reason] of cases) {
    answer = object;
    await tracker.refresh();
    assert.equal(tracker.state(), "untrusted", what);
    assert.deepEqual(drift(metrics), [], `${what}: no drift series`);
    assert.equal(
      metrics.baselineInfo.get({
        cohort: cohort.name,
        configmap: baselineConfigMapName("aicr-daemon", cohort.key),
        state: "untrusted",
      }),
      1,
    );
    assert.match(lines.at(-1) ?? "", reason, what);
  }
  assert.equal(metrics.baselineReadErrors.get({ reason: "untrusted" }), 5);
  await tracker.close();
});
