import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { UsageError } from "../errors.ts";
import { createSnapshot, findSubtype } from "../snapshot/mod.ts";
import type { ReadingMap, Subtype } from "../snapshot/mod.ts";
import {
  ABSENT,
  MAX_PROJECTION_BYTES,
  mergeProjections,
  MIXED,
  projectAksGpuPools,
  projectGkeGpuPools,
  projectOkeAddons,
} from "./projections.ts";

const TESTDATA = new URL("./testdata/projections/", import.meta.url);

function fixture(name: string): string {
  return readFileSync(new URL(name, TESTDATA), "utf8");
}

type Project = (text: string, source: string) => Subtype;

interface ValidCase {
  name: string;
  project: Project;
  file: string;
  want: ReadingMap;
}

const VALID: ValidCase[] = [
  {
    name: "an OKE cluster with an active, pinned NvidiaGpuPlugin add-on",
    project: projectOkeAddons,
    file: "valid-oke-addons.json",
    want: {
      addons: "CertManager,ClusterAutoscaler,NvidiaGpuPlugin",
      "nvidia-gpu-plugin": "active",
      version: "v0.17.0",
      "configured-version": "v0.17.0",
    },
  },
  {
    name: "an OKE add-on that needs attention, with its error and no installed version",
    project: projectOkeAddons,
    file: "valid-oke-addons-needs-attention.json",
    want: {
      addons: "NvidiaGpuPlugin",
      "nvidia-gpu-plugin": "needs-attention",
      error: "AddonInstallFailed: nvidia-gpu-device-plugin DaemonSet is not ready on 2 of 4 nodes",
    },
  },
  {
    name: "an OKE cluster without the NvidiaGpuPlugin add-on",
    project: projectOkeAddons,
    file: "valid-oke-addons-no-gpu-plugin.json",
    want: { addons: "CertManager", "nvidia-gpu-plugin": ABSENT },
  },
  {
    name: "an empty OCI output (the CLI prints nothing for an empty list)",
    project: projectOkeAddons,
    file: "valid-oke-addons-empty.json",
    want: { addons: "", "nvidia-gpu-plugin": ABSENT },
  },
  {
    name: "AKS GPU pools that disagree (gpuProfile Install and None) next to a CPU system pool",
    project: projectAksGpuPools,
    file: "valid-aks-gpu-pools-mixed.json",
    want: {
      "gpu-driver": MIXED,
      "pool-count": 3,
      "gpu-pool-count": 2,
      "gpu-pools": "gpua100,gpuh100",
      "gpua100.gpu-driver": "install",
      "gpua100.gpu-driver-source": "gpu-profile",
      "gpua100.vm-size": "Standard_NC24ads_A100_v4",
      "gpua100.count": 2,
      "gpua100.os-type": "Linux",
      "gpua100.os-sku": "Ubuntu",
      "gpua100.mode": "User",
      "gpua100.gpu-instance-profile": "MIG3g",
      "gpua100.taints": "sku=gpu:NoSchedule",
      "gpuh100.gpu-driver": "none",
      "gpuh100.gpu-driver-source": "gpu-profile",
      "gpuh100.vm-size": "Standard_ND96isr_H100_v5",
      "gpuh100.count": 1,
      "gpuh100.os-type": "Linux",
      "gpuh100.os-sku": "Ubuntu",
      "gpuh100.mode": "User",
      "gpuh100.taints": "sku=gpu:NoSchedule,nvidia.com/gpu=present:NoSchedule",
    },
  },
  {
    name: "AKS pools skipping the driver through the legacy tag, in any case",
    project: projectAksGpuPools,
    file: "valid-aks-gpu-pools-legacy.json",
    want: {
      "gpu-driver": "none",
      "pool-count": 3,
      "gpu-pool-count": 2,
      "gpu-pools": "gput4,gpuv100",
      "gput4.gpu-driver": "none",
      "gput4.gpu-driver-source": "tag",
      "gput4.vm-size": "Standard_NC4as_T4_v3",
      "gput4.count": 1,
      "gput4.os-type": "Linux",
      "gput4.os-sku": "Ubuntu",
      "gput4.mode": "User",
      "gput4.taints": "sku=gpu:NoSchedule",
      "gpuv100.gpu-driver": "none",
      "gpuv100.gpu-driver-source": "tag",
      "gpuv100.vm-size": "Standard_NC6s_v3",
      "gpuv100.count": 4,
      "gpuv100.os-type": "Linux",
      "gpuv100.os-sku": "Ubuntu",
      "gpuv100.mode": "User",
      "gpuv100.taints": "sku=gpu:NoSchedule",
    },
  },
  {
    name: "an AKS GPU pool with neither gpuProfile nor tag (AKS installs the driver)",
    project: projectAksGpuPools,
    file: "valid-aks-gpu-pools-default.json",
    want: {
      "gpu-driver": "install",
      "pool-count": 2,
      "gpu-pool-count": 1,
      "gpu-pools": "gpua10",
      "gpua10.gpu-driver": "install",
      "gpua10.gpu-driver-source": "default",
      "gpua10.vm-size": "Standard_NV36ads_A10_v5",
      "gpua10.count": 2,
      "gpua10.os-type": "Linux",
      "gpua10.os-sku": "Ubuntu",
      "gpua10.mode": "User",
    },
  },
  {
    name: "AKS CPU pools only (Linux and Windows)",
    project: projectAksGpuPools,
    file: "valid-aks-gpu-pools-cpu-only.json",
    want: { "gpu-driver": ABSENT, "pool-count": 2, "gpu-pool-count": 0, "gpu-pools": "" },
  },
  {
    name: "an empty AKS pool list",
    project: projectAksGpuPools,
    file: "valid-aks-gpu-pools-empty.json",
    want: { "gpu-driver": ABSENT, "pool-count": 0, "gpu-pool-count": 0, "gpu-pools": "" },
  },
  {
    name: "GKE GPU pools with DEFAULT, LATEST and INSTALLATION_DISABLED next to a CPU pool",
    project: projectGkeGpuPools,
    file: "valid-gke-gpu-pools-mixed.json",
    want: {
      "gpu-driver-installation": MIXED,
      "pool-count": 4,
      "gpu-pool-count": 3,
      "gpu-pools": "h100-pool,l4-pool,t4-ubuntu",
      "l4-pool.gpu-driver-installation": "default",
      "l4-pool.machine-type": "g2-standard-8",
      "l4-pool.accelerator-type": "nvidia-l4",
      "l4-pool.accelerator-count": 1,
      "l4-pool.image-type": "COS_CONTAINERD",
      "l4-pool.version": "1.33.2-gke.1240000",
      "h100-pool.gpu-driver-installation": "latest",
      "h100-pool.machine-type": "a3-highgpu-8g",
      "h100-pool.accelerator-type": "nvidia-h100-80gb",
      "h100-pool.accelerator-count": 8,
      "h100-pool.image-type": "COS_CONTAINERD",
      "h100-pool.version": "1.33.2-gke.1240000",
      "t4-ubuntu.gpu-driver-installation": "installation-disabled",
      "t4-ubuntu.machine-type": "n1-standard-8",
      "t4-ubuntu.accelerator-type": "nvidia-tesla-t4",
      "t4-ubuntu.accelerator-count": 2,
      "t4-ubuntu.gpu-sharing-strategy": "TIME_SHARING",
      "t4-ubuntu.max-shared-clients-per-gpu": 4,
      "t4-ubuntu.image-type": "UBUNTU_CONTAINERD",
      "t4-ubuntu.version": "1.32.4-gke.1106006",
    },
  },
  {
    name: "a GKE MIG pool with driver installation disabled",
    project: projectGkeGpuPools,
    file: "valid-gke-gpu-pools-disabled.json",
    want: {
      "gpu-driver-installation": "installation-disabled",
      "pool-count": 2,
      "gpu-pool-count": 1,
      "gpu-pools": "a100-mig",
      "a100-mig.gpu-driver-installation": "installation-disabled",
      "a100-mig.machine-type": "a2-highgpu-1g",
      "a100-mig.accelerator-type": "nvidia-tesla-a100",
      "a100-mig.accelerator-count": 1,
      "a100-mig.gpu-partition-size": "1g.5gb",
      "a100-mig.image-type": "UBUNTU_CONTAINERD",
      "a100-mig.version": "1.33.2-gke.1240000",
    },
  },
  {
    name: "GKE pools with no driver config and GPU_DRIVER_VERSION_UNSPECIFIED (count as a number)",
    project: projectGkeGpuPools,
    file: "valid-gke-gpu-pools-unspecified.json",
    want: {
      "gpu-driver-installation": "unspecified",
      "pool-count": 2,
      "gpu-pool-count": 2,
      "gpu-pools": "t4-new,t4-old",
      "t4-old.gpu-driver-installation": "unspecified",
      "t4-old.machine-type": "n1-standard-4",
      "t4-old.accelerator-type": "nvidia-tesla-t4",
      "t4-old.accelerator-count": 1,
      "t4-old.image-type": "COS_CONTAINERD",
      "t4-old.version": "1.29.8-gke.1211000",
      "t4-new.gpu-driver-installation": "unspecified",
      "t4-new.machine-type": "n1-standard-4",
      "t4-new.accelerator-type": "nvidia-tesla-t4",
      "t4-new.accelerator-count": 1,
      "t4-new.image-type": "COS_CONTAINERD",
      "t4-new.version": "1.29.8-gke.1211000",
    },
  },
  {
    name: "GKE CPU pools only (one with an empty accelerator list)",
    project: projectGkeGpuPools,
    file: "valid-gke-gpu-pools-cpu-only.json",
    want: {
      "gpu-driver-installation": ABSENT,
      "pool-count": 2,
      "gpu-pool-count": 0,
      "gpu-pools": "",
    },
  },
];

for (const { name, project, file, want } of VALID) {
  Deno.test(`projections: ${project.name}() reads ${name}`, () => {
    const got = project(fixture(file), `dumps/${file}`);
    assert.deepEqual(got.data, want);
    const flag = got.subtype === "oke-addons"
      ? "--oke-addons"
      : got.subtype === "aks-gpu-pools"
      ? "--aks-gpu-pools"
      : "--gke-gpu-pools";
    assert.deepEqual(got.context, { status: "ok", source: `${flag} dumps/${file}` });
  });
}

interface InvalidCase {
  name: string;
  project: Project;
  /** A fixture file name, or inline text. */
  file?: string;
  text?: string;
  want: string;
}

const OCI = "'oci ce cluster list-addons --cluster-id <id> --all --output json'";
const AZ = "'az aks nodepool list -o json'";
const GCLOUD = "'gcloud container node-pools list --cluster <c> --format=json'";

const INVALID: InvalidCase[] = [
  {
    name: "a truncated OCI dump",
    project: projectOkeAddons,
    file: "invalid-oke-addons-truncated.txt",
    want:
      `Cannot read '--oke-addons' file 'invalid-oke-addons-truncated.txt' as it must be the JSON object {"data": [...]} printed by ${OCI}: current value is not JSON (`,
  },
  {
    name: "an 'oci ce cluster get' dump instead of the add-on list",
    project: projectOkeAddons,
    file: "invalid-oke-addons-cluster.json",
    want:
      `Cannot read '--oke-addons' file 'invalid-oke-addons-cluster.json' as 'data' must be an array of add-ons, as printed by ${OCI}: current value is an object`,
  },
  {
    name: "an add-on without a name",
    project: projectOkeAddons,
    file: "invalid-oke-addons-no-name.json",
    want:
      `Cannot read '--oke-addons' file 'invalid-oke-addons-no-name.json' as 'data[0].name' must be a non-empty string, as printed by ${OCI}: current value is missing`,
  },
  {
    name: "a JSON string at the top level of an OCI dump",
    project: projectOkeAddons,
    text: '"NvidiaGpuPlugin"',
    want:
      `Cannot read '--oke-addons' file 'inline.json' as it must be the JSON object {"data": [...]} printed by ${OCI}: current value is the string 'NvidiaGpuPlugin'`,
  },
  {
    name: "an 'az aks show' object instead of the pool list",
    project: projectAksGpuPools,
    file: "invalid-aks-gpu-pools-cluster.json",
    want:
      `Cannot read '--aks-gpu-pools' file 'invalid-aks-gpu-pools-cluster.json' as it must be the JSON array printed by ${AZ}: current value is an object`,
  },
  {
    name: "az table output (-o table)",
    project: projectAksGpuPools,
    file: "invalid-aks-gpu-pools-table.txt",
    want:
      `Cannot read '--aks-gpu-pools' file 'invalid-aks-gpu-pools-table.txt' as it must be the JSON array printed by ${AZ}: current value is not JSON (`,
  },
  {
    name: "a pool without vmSize",
    project: projectAksGpuPools,
    file: "invalid-aks-gpu-pools-no-vmsize.json",
    want:
      `Cannot read '--aks-gpu-pools' file 'invalid-aks-gpu-pools-no-vmsize.json' as '[1].vmSize' must be a non-empty string, as printed by ${AZ}: current value is missing`,
  },
  {
    name: "a gpuProfile that is a string",
    project: projectAksGpuPools,
    file: "invalid-aks-gpu-pools-gpu-profile.json",
    want:
      `Cannot read '--aks-gpu-pools' file 'invalid-aks-gpu-pools-gpu-profile.json' as '[0].gpuProfile' must be an object or null, as printed by ${AZ}: current value is the string 'Install'`,
  },
  {
    name: "two dumps concatenated (a pool name twice)",
    project: projectAksGpuPools,
    file: "invalid-aks-gpu-pools-duplicate.json",
    want:
      "Cannot read '--aks-gpu-pools' file 'invalid-aks-gpu-pools-duplicate.json' as node pool names must be unique (were two dumps concatenated?): current value has 'gpua100' more than once",
  },
  {
    name: "an empty AKS file",
    project: projectAksGpuPools,
    text: "\n",
    want:
      `Cannot read '--aks-gpu-pools' file 'inline.json' as it must be the JSON array printed by ${AZ}: current value is empty`,
  },
  {
    name: "a UTF-16 file (PowerShell redirection)",
    project: projectAksGpuPools,
    text: "\uFFFD\uFFFD[\u0000]\u0000",
    want:
      `Cannot read '--aks-gpu-pools' file 'inline.json' as it must be the JSON array printed by ${AZ}: current value looks UTF-16 encoded`,
  },
  {
    name: "gcloud's default YAML output (no --format=json)",
    project: projectGkeGpuPools,
    file: "invalid-gke-gpu-pools-yaml.txt",
    want:
      `Cannot read '--gke-gpu-pools' file 'invalid-gke-gpu-pools-yaml.txt' as it must be the JSON array printed by ${GCLOUD}: current value is not JSON (`,
  },
  {
    name: "a 'clusters describe' object instead of the pool list",
    project: projectGkeGpuPools,
    file: "invalid-gke-gpu-pools-cluster.json",
    want:
      `Cannot read '--gke-gpu-pools' file 'invalid-gke-gpu-pools-cluster.json' as it must be the JSON array printed by ${GCLOUD}: current value is an object`,
  },
  {
    name: "a pool without config",
    project: projectGkeGpuPools,
    file: "invalid-gke-gpu-pools-no-config.json",
    want:
      `Cannot read '--gke-gpu-pools' file 'invalid-gke-gpu-pools-no-config.json' as '[0].config' must be an object, as printed by ${GCLOUD}: current value is missing`,
  },
  {
    name: "an accelerator count that is not a number",
    project: projectGkeGpuPools,
    file: "invalid-gke-gpu-pools-bad-count.json",
    want:
      `Cannot read '--gke-gpu-pools' file 'invalid-gke-gpu-pools-bad-count.json' as '[0].config.accelerators[0].acceleratorCount' must be a non-negative integer, as printed by ${GCLOUD}: current value is the string 'eight'`,
  },
  {
    name: "an array of numbers",
    project: projectGkeGpuPools,
    text: "[1, 2]",
    want:
      `Cannot read '--gke-gpu-pools' file 'inline.json' as '[0]' must be an object, as printed by ${GCLOUD}: current value is the number 1`,
  },
];

for (const { name, project, file, text, want } of INVALID) {
  Deno.test(`projections: ${project.name}() rejects ${name} with a UsageError`, () => {
    const input = file ? fixture(file) : text ?? "";
    assert.throws(
      () => project(input, file ?? "inline.json"),
      (error: unknown) => {
        assert.ok(error instanceof UsageError, String(error));
        assert.equal(error.exitCode, 2);
        assert.ok(
          error.message.startsWith(want),
          `${error.message}\n  does not start with\n${want}`,
        );
        return true;
      },
    );
  });
}

Deno.test("projections: a dump that is not JSON carries a hint and the parser's error as cause", () => {
  assert.throws(
    () => projectGkeGpuPools(fixture("invalid-gke-gpu-pools-yaml.txt"), "pools.yaml"),
    (error: unknown) => {
      assert.ok(error instanceof UsageError);
      assert.ok(error.cause instanceof SyntaxError);
      assert.match(error.details[0] ?? "", /^hint: save the output of 'gcloud container/);
      return true;
    },
  );
});

Deno.test("projections: a dump larger than MAX_PROJECTION_BYTES is rejected before parsing", () => {
  const huge = "[" + " ".repeat(MAX_PROJECTION_BYTES) + "]";
  assert.throws(
    () => projectAksGpuPools(huge, "huge.json"),
    /^UsageError: Cannot read '--aks-gpu-pools' file 'huge.json' as it must be at most 16 MiB: current value is 16777218 bytes$/,
  );
});

Deno.test("projections: a UTF-8 byte order mark and the bare OCI array (--query data) are accepted", () => {
  const text =
    '\uFEFF[{"name": "NvidiaGpuPlugin", "lifecycle-state": "UPDATING", "version": null}]';
  assert.deepEqual(projectOkeAddons(text, "addons.json").data, {
    addons: "NvidiaGpuPlugin",
    "nvidia-gpu-plugin": "updating",
  });
});

Deno.test("projections: AMD GPU sizes on AKS are not NVIDIA GPU pools, unless gpuProfile says so", () => {
  const pools = [
    { name: "mi300x", vmSize: "Standard_ND96isr_MI300X_v5" },
    { name: "nvv4", vmSize: "Standard_NV32as_v4" },
    { name: "custom", vmSize: "Standard_D4ds_v5", gpuProfile: { driver: "None" } },
  ];
  const data = projectAksGpuPools(JSON.stringify(pools), "pools.json").data;
  assert.equal(data["gpu-pools"], "custom");
  assert.equal(data["gpu-driver"], "none");
});

Deno.test("projections: a GKE machine type with built-in GPUs but no accelerator list is unspecified", () => {
  const pools = [{ name: "a3", config: { machineType: "a3-megagpu-8g" } }];
  const data = projectGkeGpuPools(JSON.stringify(pools), "pools.json").data;
  assert.deepEqual(data, {
    "gpu-driver-installation": "unspecified",
    "pool-count": 1,
    "gpu-pool-count": 1,
    "gpu-pools": "a3",
    "a3.gpu-driver-installation": "unspecified",
    "a3.machine-type": "a3-megagpu-8g",
  });
});

Deno.test("projections: an unknown future enum value is kept as a token, not rejected", () => {
  const aks = [{
    name: "gpu",
    vmSize: "Standard_NC8as_T4_v3",
    gpuProfile: { driver: "Managed_Preview" },
  }];
  assert.equal(
    projectAksGpuPools(JSON.stringify(aks), "p.json").data["gpu-driver"],
    "managed-preview",
  );
  const gke = [{
    name: "gpu",
    config: {
      machineType: "n1-standard-4",
      accelerators: [{
        acceleratorCount: "1",
        acceleratorType: "nvidia-tesla-t4",
        gpuDriverInstallationConfig: { gpuDriverVersion: "PINNED_580" },
      }],
    },
  }];
  assert.equal(
    projectGkeGpuPools(JSON.stringify(gke), "p.json").data["gpu-driver-installation"],
    "pinned-580",
  );
});

function baseSnapshot(withK8s: boolean) {
  return createSnapshot(
    [
      { type: "GPU", subtypes: [{ subtype: "smi", data: { "gpu-count": 0 } }] },
      ...(withK8s
        ? [{
          type: "K8s" as const,
          subtypes: [
            { subtype: "server", data: { version: "v1.33.2" } },
            { subtype: "aks-gpu-pools", data: { "gpu-driver": "stale" } },
          ],
        }]
        : []),
    ],
    { timestamp: new Date("2026-06-01T00:00:00Z"), version: "1.0.0", nodeName: "n1" },
  );
}

Deno.test("projections: mergeProjections() replaces a subtype in place and appends new ones", () => {
  const snapshot = baseSnapshot(true);
  const aks = projectAksGpuPools(fixture("valid-aks-gpu-pools-legacy.json"), "aks.json");
  const oke = projectOkeAddons(fixture("valid-oke-addons.json"), "oke.json");
  const merged = mergeProjections(snapshot, [aks, oke]);
  const k8s = merged.measurements.find((m) => m.type === "K8s");
  assert.deepEqual(k8s?.subtypes.map((s) => s.subtype), ["server", "aks-gpu-pools", "oke-addons"]);
  assert.equal(findSubtype(merged, "K8s", "aks-gpu-pools")?.data["gpu-driver"], "none");
  // Keys come out sorted, as everywhere else in a snapshot.
  const keys = Object.keys(findSubtype(merged, "K8s", "oke-addons")?.data ?? {});
  assert.deepEqual(keys, [...keys].sort());
  // The input is untouched.
  assert.equal(findSubtype(snapshot, "K8s", "aks-gpu-pools")?.data["gpu-driver"], "stale");
  assert.equal(findSubtype(snapshot, "K8s", "oke-addons"), undefined);
});

Deno.test("projections: mergeProjections() creates the K8s measurement in canonical order", () => {
  const snapshot = baseSnapshot(false);
  const gke = projectGkeGpuPools(fixture("valid-gke-gpu-pools-mixed.json"), "gke.json");
  const merged = mergeProjections(snapshot, [gke]);
  assert.deepEqual(merged.measurements.map((m) => m.type), ["K8s", "GPU"]);
  assert.equal(
    findSubtype(merged, "K8s", "gke-gpu-pools")?.context?.source,
    "--gke-gpu-pools gke.json",
  );
  assert.equal(mergeProjections(snapshot, []), snapshot);
});
