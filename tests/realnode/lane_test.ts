/**
 * The real-kubelet lane's pre-flight: a machine without a kernel feature or a package gets one
 * line naming exactly what is missing (and what to install), and the lane's node layout.
 */
import assert from "node:assert/strict";
import {
  type LaneMachine,
  laneNodes,
  laneRequirementsMissing,
  laneUnavailableLine,
} from "./lane.ts";

const ready: LaneMachine = {
  uid: 0,
  filesystems: "nodev\tcgroup\nnodev\tcgroup2\nnodev\toverlay\n\text4\n",
  cgroupHierarchies: ["/sys/fs/cgroup/memory"],
  netns: true,
  hasCommand: () => true,
  exists: () => true,
};

Deno.test("laneRequirementsMissing: nothing on a machine that has it all", () => {
  assert.deepEqual(laneRequirementsMissing(ready), []);
});

Deno.test("laneRequirementsMissing: names each missing kernel feature in one line", () => {
  const missing = laneRequirementsMissing({
    ...ready,
    filesystems: "\text4\n",
    cgroupHierarchies: [],
    netns: false,
  });
  assert.deepEqual(missing, [
    "overlayfs (no 'overlay' in /proc/filesystems)",
    "cgroups (no cgroup hierarchy mounted under /sys/fs/cgroup)",
    "network namespaces (no /proc/self/ns/net)",
  ]);
  const line = laneUnavailableLine(missing);
  assert.equal(line.split("\n").length, 1);
  assert.match(line, /^real-kubelet lane unavailable on this machine: missing overlayfs/);
});

Deno.test("laneRequirementsMissing: a missing package names its commands and the apt-get line", () => {
  const missing = laneRequirementsMissing({
    ...ready,
    uid: 1000,
    hasCommand: (c) => !["containerd", "ctr", "socat"].includes(c),
    exists: (p) => !p.endsWith("/bridge"),
  });
  assert.deepEqual(missing, [
    "root (the lane mounts, creates cgroups and a netns)",
    "containerd, ctr, socat, /usr/lib/cni/bridge " +
    "(apt-get install containerd socat containernetworking-plugins)",
  ]);
});

Deno.test("laneNodes: a GPU node first, then a CPU node, each with its own address, bridge and cgroup root", () => {
  const [gpu, cpu, none] = laneNodes("/s", "abc", 2);
  assert.equal(none, undefined);
  assert.equal(gpu!.gpu, true);
  assert.equal(cpu!.gpu, false);
  assert.notEqual(gpu!.ip, cpu!.ip);
  assert.notEqual(gpu!.bridge, cpu!.bridge);
  assert.notEqual(gpu!.healthzPort, cpu!.healthzPort);
  assert.equal(gpu!.cgroupRoot, "/aicr-lane-abc/p5-h100-1");
  assert.ok(gpu!.bridge.length <= 15, "a Linux interface name has at most 15 characters");
  assert.ok(gpu!.socket.length < 108);
  assert.equal(laneNodes("/s", "abc", 1).length, 1);
});
