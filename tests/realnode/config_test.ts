/**
 * The real-kubelet lane's configuration files: what the kubelet and containerd need on a cgroup v1
 * machine, that every path stays in the node's folder, and the GPU runtime wrapper's spec edit
 * (run for real with `jq` on a bundle, with `true` standing in for runc).
 */
import assert from "node:assert/strict";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  cniConfig,
  containerdConfig,
  KUBELET_TUNABLES,
  kubeletConfig,
  mountSetupScript,
  type NodeLayout,
  nvidiaRuntimeScript,
} from "./config.ts";

const node: NodeLayout = {
  name: "p5-h100-1",
  profile: "p5-h100",
  gpu: true,
  ip: "10.231.0.11",
  podSubnet: "10.232.1.0/24",
  podGateway: "10.232.1.1",
  bridge: "aicr-br0",
  dir: "/state/nodes/p5-h100-1",
  socket: "/state/n0.sock",
  cgroupRoot: "/aicr-lane-x/p5-h100-1",
  kubeletPort: 10250,
  healthzPort: 10248,
};

Deno.test("kubeletConfig: cgroup v1 with cgroupfs, no swap check, the node's address and folders", () => {
  const c = kubeletConfig(node, {
    caFile: "/ca.crt",
    tlsCert: "/s.crt",
    tlsKey: "/s.key",
    taints: [{ key: "nvidia.com/gpu", value: "present", effect: "NoSchedule" }],
  });
  assert.equal(c.failCgroupV1, false);
  assert.equal(c.cgroupDriver, "cgroupfs");
  assert.equal(c.failSwapOn, false);
  assert.equal(c.address, node.ip);
  assert.equal(c.cgroupRoot, node.cgroupRoot);
  assert.equal(c.containerRuntimeEndpoint, `unix://${node.socket}`);
  assert.deepEqual(c.authorization, { mode: "Webhook" });
  assert.ok(String(c.podLogsDir).startsWith(node.dir));
  assert.ok(String(c.volumePluginDir).startsWith(node.dir));
  assert.equal(c.resolvConf, "", "pods get no resolver outside the netns");
});

Deno.test("containerdConfig: its own root, state and sockets; restrict_oom_score_adj; the GPU runtime only with a wrapper", () => {
  const gpu = containerdConfig(node, "aicr.local/pause:lane", "/state/wrapper");
  assert.match(gpu, /root = "\/state\/nodes\/p5-h100-1\/containerd\/root"/);
  assert.match(gpu, /state = "\/state\/nodes\/p5-h100-1\/containerd\/state"/);
  assert.match(gpu, /address = "\/state\/n0.sock"/);
  assert.match(gpu, /restrict_oom_score_adj = true/);
  assert.match(gpu, /disable_apparmor = true/);
  assert.match(gpu, /sandbox_image = "aicr.local\/pause:lane"/);
  assert.match(gpu, /default_runtime_name = "nvidia"/);
  assert.match(gpu, /BinaryName = "\/state\/wrapper"/);
  const cpu = containerdConfig(node, "aicr.local/pause:lane");
  assert.match(cpu, /default_runtime_name = "runc"/);
  assert.doesNotMatch(cpu, /runtimes\.nvidia/);
});

Deno.test("cniConfig: a bridge with the node's subnet, leases in the node's folder, no masquerade", () => {
  const c = cniConfig(node) as { plugins: Record<string, unknown>[] };
  const bridge = c.plugins[0]!;
  assert.equal(bridge.type, "bridge");
  assert.equal(bridge.bridge, "aicr-br0");
  assert.equal(bridge.ipMasq, false);
  const ipam = bridge.ipam as { ranges: { subnet: string }[][]; dataDir: string };
  assert.equal(ipam.ranges[0]![0]!.subnet, "10.232.1.0/24");
  assert.ok(ipam.dataDir.startsWith(node.dir));
});

Deno.test("mountSetupScript: every kernel tunable the kubelet sets is a file of the node's; /var and /run are overlays", () => {
  const script = mountSetupScript(node);
  for (const path of Object.keys(KUBELET_TUNABLES)) {
    assert.ok(script.includes(`/proc/sys/${path}`), path);
  }
  assert.match(script, /mount -t overlay overlay -o lowerdir=\/var,upperdir=\/state\/nodes/);
  assert.match(script, /mount -t overlay overlay -o lowerdir=\/run,upperdir=\/state\/nodes/);
  assert.ok(script.trimEnd().endsWith('exec "$@"'));
});

const hasJq = new Deno.Command("sh", { args: ["-c", "command -v jq"] }).outputSync().success;

Deno.test({
  name:
    "nvidiaRuntimeScript: injects nvidia-smi at create only for containers that ask for GPUs with utility" +
    (hasJq ? "" : " (skipped: jq is not installed; apt-get install jq)"),
  ignore: !hasJq,
  async fn() {
    const dir = await mkdtemp(join(tmpdir(), "aicr-wrapper-"));
    try {
      const wrapper = join(dir, "wrapper");
      await writeFile(wrapper, nvidiaRuntimeScript("/drv", "/bin/true"), { mode: 0o755 });
      const mounts = async (env: string[] | undefined, args: string[]) => {
        await writeFile(join(dir, "config.json"), JSON.stringify({ process: { env }, mounts: [] }));
        const out = await new Deno.Command(wrapper, { args }).output();
        assert.ok(out.success, new TextDecoder().decode(out.stderr));
        const spec = JSON.parse(await readFile(join(dir, "config.json"), "utf8"));
        return (spec.mounts as { destination: string; source: string }[]).map((m) =>
          `${m.source}->${m.destination}`
        );
      };
      const create = ["--root", "/r", "create", "--bundle", dir, "id1"];
      assert.deepEqual(await mounts(["NVIDIA_VISIBLE_DEVICES=all"], create), [
        "/drv/nvidia-smi->/usr/bin/nvidia-smi",
        "/drv/nvidia-smi-q-x.xml->/usr/bin/nvidia-smi-q-x.xml",
      ]);
      assert.equal(
        (await mounts(["NVIDIA_VISIBLE_DEVICES=0", "NVIDIA_DRIVER_CAPABILITIES=utility"], [
          "create",
          `--bundle=${dir}`,
          "id2",
        ])).length,
        2,
      );
      assert.deepEqual(await mounts(["NVIDIA_VISIBLE_DEVICES=void"], create), []);
      assert.deepEqual(await mounts(["PATH=/bin"], create), []);
      assert.deepEqual(await mounts(undefined, create), []);
      assert.deepEqual(
        await mounts(["NVIDIA_VISIBLE_DEVICES=all", "NVIDIA_DRIVER_CAPABILITIES=compute"], create),
        [],
      );
      assert.deepEqual(await mounts(["NVIDIA_VISIBLE_DEVICES=all"], ["state", "id1"]), []);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  },
});
