import assert from "node:assert/strict";
import { chmod, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  GPU_TAINT,
  loadProfiles,
  nodeObject,
  NVIDIA_SMI_XML_NAME,
  nvidiaSmiScript,
  nvidiaSmiXml,
} from "./profiles.ts";
import type { Obj } from "./api.ts";

Deno.test("kubelet profiles: GPU profiles get GPU labels, capacity and the GPU taint; CPU ones none", () => {
  const profiles = loadProfiles();
  assert.deepEqual([...profiles.keys()], ["p5-h100", "p6-gb200", "system-m7i"]);
  const h100 = nodeObject(
    profiles.get("p5-h100")!,
    "p5-h100-1",
    "127.100.0.2",
    10250,
    "v1.37.2",
  ) as Obj;
  assert.equal(h100.metadata.labels["nvidia.com/gpu.present"], "true");
  assert.equal(h100.metadata.labels["nvidia.com/gpu.product"], "NVIDIA-H100-80GB-HBM3");
  assert.equal(h100.status.capacity["nvidia.com/gpu"], "8");
  assert.deepEqual(h100.spec.taints, [GPU_TAINT]);
  assert.deepEqual(h100.status.addresses[0], { type: "InternalIP", address: "127.100.0.2" });
  const gb200 = nodeObject(profiles.get("p6-gb200")!, "g", "127.0.0.3", 1, "v") as Obj;
  assert.equal(gb200.metadata.labels["kubernetes.io/arch"], "arm64");
  const cpu = nodeObject(profiles.get("system-m7i")!, "c", "127.0.0.4", 1, "v") as Obj;
  assert.equal(cpu.metadata.labels["nvidia.com/gpu.present"], undefined);
  assert.equal(cpu.status.capacity["nvidia.com/gpu"], undefined);
  assert.deepEqual(cpu.spec, {});
});

Deno.test("kubelet profiles: the fake nvidia-smi prints the node's fixture for -q -x", async () => {
  const gpu = loadProfiles().get("p6-gb200")!.gpu!;
  const dir = await mkdtemp(join(tmpdir(), "aicr-smi-"));
  try {
    const xml = nvidiaSmiXml(gpu);
    assert.match(xml, /<product_name>NVIDIA GB200 192GB HBM3e<\/product_name>/);
    assert.match(xml, /<product_architecture>Blackwell<\/product_architecture>/);
    assert.match(xml, /<driver_version>580\.82\.07<\/driver_version>/);
    assert.doesNotMatch(xml, /H100/);
    await writeFile(join(dir, NVIDIA_SMI_XML_NAME), xml);
    await writeFile(join(dir, "nvidia-smi"), nvidiaSmiScript(gpu));
    await chmod(join(dir, "nvidia-smi"), 0o755);
    const run = async (...args: string[]) =>
      new TextDecoder().decode(
        (await new Deno.Command(join(dir, "nvidia-smi"), { args, stdout: "piped" }).output())
          .stdout,
      );
    assert.equal(await run("-q", "-x"), xml);
    assert.equal(await run("-x", "-q"), xml);
    assert.equal((await run("-L")).split("\n").filter(Boolean).length, 8);
    const h100 = loadProfiles().get("p5-h100")!.gpu!;
    assert.match(nvidiaSmiXml(h100), /NVIDIA H100 80GB HBM3/);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});
