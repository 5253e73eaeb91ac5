import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";
import { NotFoundError, TimeoutError } from "../errors.ts";
import { NOOP_LOGGER } from "../log.ts";
import { collectGpu, parseNvidiaSmi } from "./gpu.ts";
import type { CommandRunner, RunResult } from "./types.ts";

const H100 = new URL("../tests/fixtures/nvidia-smi-q-x.h100.xml", import.meta.url);
const testdata = (name: string) => new URL(`./testdata/${name}`, import.meta.url);

/** Extracts `<tag>text</tag>` from raw XML with a regex, independently of the parser. */
function rawText(xml: string, tag: string): string | undefined {
  return new RegExp(`<${tag}>([^<]*)</${tag}>`).exec(xml)?.[1];
}
function rawGpuBlocks(xml: string): string[] {
  return xml.split(/<gpu id="/).slice(1).map((block) => block.slice(0, block.indexOf("</gpu>")));
}

function runner(result: Partial<RunResult> | Error): CommandRunner & { calls: string[][] } {
  const calls: string[][] = [];
  return {
    calls,
    run(command, args) {
      calls.push([command, ...args]);
      if (result instanceof Error) return Promise.reject(result);
      return Promise.resolve({ exitCode: 0, stdout: new Uint8Array(), stderr: "", ...result });
    },
  };
}

Deno.test("parseNvidiaSmi() gives upstream's smi keys from the first H100 and counts every <gpu>", async () => {
  const xml = await readFile(H100, "utf8");
  const [smi] = parseNvidiaSmi(xml);
  assert.equal(smi?.subtype, "smi");
  assert.deepEqual(smi?.data, {
    driver: "570.86.15",
    "cuda-version": "12.8",
    "gpu-count": 8,
    "gpu.model": "NVIDIA H100 80GB HBM3",
    "gpu.product-architecture": "Hopper",
    "gpu.display-mode": "Enabled",
    "gpu.display-active": "Disabled",
    "gpu.persistence-mode": "Disabled",
    "gpu.addressing-mode": "None",
    "gpu.vbios-version": "96.00.A5.00.01",
    "gpu.gsp-firmware-version": "570.86.15",
  });
  assert.deepEqual(smi?.context, { status: "ok", source: "nvidia-smi -q -x" });
});

Deno.test("parseNvidiaSmi() reports every GPU of the H100 fixture field by field", async () => {
  const xml = await readFile(H100, "utf8");
  const subtypes = parseNvidiaSmi(xml);
  const blocks = rawGpuBlocks(xml);
  assert.equal(blocks.length, 8);
  assert.deepEqual(subtypes.find((s) => s.subtype === "models")?.data, {
    "NVIDIA H100 80GB HBM3": 8,
  });
  const uuids = new Set<string>();
  blocks.forEach((block, i) => {
    const gpu = subtypes.find((s) => s.subtype === `gpu-${i}`);
    assert.ok(gpu, `gpu-${i} present`);
    assert.equal(gpu.data["pci-bus-id"], block.slice(0, block.indexOf('"')));
    assert.equal(gpu.data.uuid, rawText(block, "uuid"));
    assert.equal(gpu.data.serial, rawText(block, "serial"));
    assert.equal(gpu.data.model, rawText(block, "product_name"));
    assert.equal(gpu.data["vbios-version"], rawText(block, "vbios_version"));
    assert.equal(gpu.data["minor-number"], rawText(block, "minor_number"));
    assert.equal(gpu.data["persistence-mode"], rawText(block, "persistence_mode"));
    assert.equal(gpu.data["mig.current"], rawText(block, "current_mig"));
    assert.equal(gpu.data["ecc.current"], rawText(block, "current_ecc"));
    assert.equal(gpu.data["power.limit.current"], rawText(block, "current_power_limit"));
    assert.equal(gpu.data["power.limit.max"], rawText(block, "max_power_limit"));
    assert.equal(gpu.data["pcie.gen.max"], rawText(block, "max_link_gen"));
    assert.equal(gpu.data["pcie.width.current"], rawText(block, "current_link_width"));
    const fb = block.slice(block.indexOf("<fb_memory_usage>"));
    assert.equal(gpu.data["memory.total"], rawText(fb, "total"));
    const maxClocks = block.slice(block.indexOf("<max_clocks>"));
    assert.equal(gpu.data["clocks.max.graphics"], rawText(maxClocks, "graphics_clock"));
    assert.equal(gpu.data["mig.device-count"], 0);
    uuids.add(String(gpu.data.uuid));
  });
  assert.equal(uuids.size, 8);
  assert.equal(subtypes.length, 2 + 8);
});

Deno.test("parseNvidiaSmi() lists MIG devices under their GPU", async () => {
  const subtypes = parseNvidiaSmi(await readFile(testdata("nvidia-smi-mig.xml"), "utf8"));
  const gpu0 = subtypes.find((s) => s.subtype === "gpu-0")?.data ?? {};
  assert.equal(gpu0["mig.current"], "Enabled");
  assert.equal(gpu0["mig.device-count"], 2);
  assert.equal(gpu0["mig.0.gpu-instance-id"], "1");
  assert.equal(gpu0["mig.1.gpu-instance-id"], "2");
  assert.equal(gpu0["mig.0.sm-count"], "60");
  assert.equal(gpu0["mig.1.memory.total"], "40192 MiB");
  const gpu1 = subtypes.find((s) => s.subtype === "gpu-1")?.data ?? {};
  assert.equal(gpu1["mig.current"], "Disabled");
  assert.equal(gpu1["mig.pending"], "Enabled");
  assert.equal(gpu1["mig.device-count"], 0);
  assert.equal(subtypes[0]?.data["gpu-count"], 2);
});

Deno.test("parseNvidiaSmi() counts GPUs per model on a mixed host", async () => {
  const subtypes = parseNvidiaSmi(await readFile(testdata("nvidia-smi-multi-model.xml"), "utf8"));
  assert.deepEqual(subtypes[1]?.data, { "NVIDIA H100 80GB HBM3": 2, "NVIDIA L40S": 1 });
  assert.equal(subtypes[0]?.data["gpu.model"], "NVIDIA H100 80GB HBM3");
  assert.equal(subtypes[0]?.data["gpu-count"], 3);
  const l40 = subtypes.find((s) => s.subtype === "gpu-2")?.data ?? {};
  assert.equal(l40.model, "NVIDIA L40S");
  assert.equal(l40.architecture, "Ada Lovelace");
  assert.equal(l40["power.limit.max"], "350.00 W");
  assert.equal(l40["pci-bus-id"], "00000000:81:00.0");
});

Deno.test("parseNvidiaSmi() reads an older driver's v11 document, with missing elements as empty strings", async () => {
  const subtypes = parseNvidiaSmi(await readFile(testdata("nvidia-smi-old-driver.xml"), "utf8"));
  const smi = subtypes[0]?.data ?? {};
  assert.equal(smi.driver, "470.182.03");
  assert.equal(smi["cuda-version"], "11.4");
  assert.equal(smi["gpu.model"], "Tesla T4");
  assert.equal(smi["gpu.product-architecture"], "");
  assert.equal(smi["gpu.gsp-firmware-version"], "");
  assert.equal(smi["gpu.addressing-mode"], "");
  const gpu = subtypes[2]?.data ?? {};
  assert.equal(gpu["power.limit.current"], "70.00 W");
  assert.equal(gpu["power.limit.enforced"], "70.00 W");
  assert.equal(gpu["pcie.gen.current"], "1");
  assert.equal("architecture" in gpu, false);
  assert.equal("power.limit.requested" in gpu, false);
});

Deno.test("parseNvidiaSmi() with zero GPUs gives only driver, cuda-version and gpu-count", () => {
  const subtypes = parseNvidiaSmi(
    "<nvidia_smi_log><driver_version>580.1</driver_version><cuda_version>13.0</cuda_version></nvidia_smi_log>",
  );
  assert.deepEqual(subtypes[0]?.data, { driver: "580.1", "cuda-version": "13.0", "gpu-count": 0 });
  assert.deepEqual(subtypes[1]?.data, {});
});

Deno.test("collectGpu() runs 'nvidia-smi -q -x' and parses it", async () => {
  const exec = runner({ stdout: await readFile(H100) });
  const m = await collectGpu({ exec, log: NOOP_LOGGER }, { timeoutMs: 1000 });
  assert.deepEqual(exec.calls, [["nvidia-smi", "-q", "-x"]]);
  assert.equal(m.subtypes[0]?.data["gpu-count"], 8);
});

Deno.test("collectGpu() says absent when nvidia-smi is not on PATH", async () => {
  const m = await collectGpu({
    exec: runner(new NotFoundError("Cannot run 'nvidia-smi': it is not on PATH")),
    log: NOOP_LOGGER,
  }, {
    timeoutMs: 1000,
  });
  assert.deepEqual(m.subtypes[0]?.data, { "gpu-count": 0 });
  assert.equal(m.subtypes[0]?.context?.status, "absent");
  assert.match(m.subtypes[0]?.context?.message ?? "", /not on PATH/);
});

Deno.test("collectGpu() says failed on a non-zero exit, a truncated document or an entity bomb it cannot trust", async () => {
  const exited = await collectGpu({
    exec: runner({
      exitCode: 9,
      stderr: "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver\n",
    }),
    log: NOOP_LOGGER,
  }, { timeoutMs: 1000 });
  assert.equal(exited.subtypes[0]?.context?.status, "failed");
  assert.match(
    exited.subtypes[0]?.context?.message ?? "",
    /exited with code 9: NVIDIA-SMI has failed/,
  );
  const truncated = await collectGpu({
    exec: runner({ stdout: await readFile(testdata("nvidia-smi-truncated.xml")) }),
    log: NOOP_LOGGER,
  }, {
    timeoutMs: 1000,
  });
  assert.deepEqual(truncated.subtypes[0]?.data, { "gpu-count": 0 });
  assert.equal(truncated.subtypes[0]?.context?.status, "failed");
});

Deno.test("collectGpu() says timeout when nvidia-smi hangs", async () => {
  const m = await collectGpu({
    exec: runner(new TimeoutError("Cannot run 'nvidia-smi -q -x': it did not finish")),
    log: NOOP_LOGGER,
  }, {
    timeoutMs: 1,
  });
  assert.equal(m.subtypes[0]?.context?.status, "timeout");
  assert.deepEqual(m.subtypes[0]?.data, { "gpu-count": 0 });
});

Deno.test("parseNvidiaSmi() reads a huge valid document (long process lists) as it reads the plain one", async () => {
  const xml = await readFile(
    new URL("../tests/fixtures/nvidia-smi-q-x.h100.xml", import.meta.url),
    "utf8",
  );
  const proc = "<process_info><pid>1</pid><process_name>python3</process_name></process_info>\n";
  const big = xml.replace(
    /<processes>[\s\S]*?<\/processes>|<processes\/>/g,
    `<processes>${proc.repeat(20_000)}</processes>`,
  );
  assert.ok(big.length > 10 << 20, "over 10 MiB");
  assert.deepEqual(parseNvidiaSmi(big), parseNvidiaSmi(xml));
});

Deno.test("parseNvidiaSmi() refuses a document listing more GPUs than a node holds", () => {
  const gpu = "<gpu><product_name>NVIDIA H100</product_name></gpu>";
  const doc = (n: number) =>
    `<nvidia_smi_log><driver_version>1</driver_version>${gpu.repeat(n)}</nvidia_smi_log>`;
  assert.equal(parseNvidiaSmi(doc(256))[0]?.data["gpu-count"], 256);
  assert.throws(() => parseNvidiaSmi(doc(257)), /lists 257 GPUs, over the 256/);
  assert.throws(() => parseNvidiaSmi(doc(200_000)), /too many elements to keep/);
});

Deno.test("parseNvidiaSmi() reads each key from the first element of each name on its path", () => {
  // MIG devices hold their own <fb_memory_usage> and come first: the GPU's keys never read them.
  // A path is read step by step from the first element of each name, so a first <pci> without a
  // link section hides a second one's (a document no driver writes; pinned so it stays one rule).
  const xml = `<nvidia_smi_log><driver_version>1</driver_version><gpu id="00000000:01:00.0">
<mig_devices><mig_device><index>0</index><fb_memory_usage><total>9 MiB</total></fb_memory_usage></mig_device></mig_devices>
<pci><pci_device_id>2330</pci_device_id></pci>
<pci><pci_gpu_link_info><pcie_gen><max_link_gen>5</max_link_gen></pcie_gen></pci_gpu_link_info></pci>
<fb_memory_usage><reserved>1 MiB</reserved></fb_memory_usage>
<fb_memory_usage><total>80 GiB</total></fb_memory_usage>
<max_clocks><sm_clock> 1980 MHz </sm_clock></max_clocks>
</gpu></nvidia_smi_log>`;
  const gpu = parseNvidiaSmi(xml).find((s) => s.subtype === "gpu-0");
  assert.equal(gpu?.data["pcie.device-id"], "2330");
  assert.equal(gpu?.data["pcie.gen.max"], undefined);
  assert.equal(gpu?.data["memory.total"], undefined);
  assert.equal(gpu?.data["mig.0.memory.total"], "9 MiB");
  assert.equal(gpu?.data["clocks.max.sm"], "1980 MHz");
  assert.equal(gpu?.data["pci-bus-id"], "00000000:01:00.0");
});
