/**
 * The built aicr binary on real nodes: real kubelets (v1.37.2, built with the control plane),
 * containerd and runc, the aicr image that `aicr image push` put into the lane's registry (Debian's
 * docker-registry, TLS from the cluster CA, htpasswd) and the nodes pull through an image pull
 * secret, and a GPU node that injects
 * a fake `nvidia-smi` printing the real H100 capture the way the NVIDIA container runtime injects
 * the real one. Every aicr run happens inside the lane's network namespace, and every step counts
 * what is left by label afterwards.
 *
 * A machine without what the lane needs (root, overlayfs, cgroups, network namespaces, the Debian
 * packages) gets one line naming what is missing, and every test is still registered, as skipped
 * with that reason after its name (`tests/_gated.ts`); under `CI=true` the test command fails on
 * the skip.
 */
import assert from "node:assert/strict";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { parseNvidiaSmi } from "../../collectors/mod.ts";
import { FLEET_TOPOLOGY_FILE, parseSnapshot, type Snapshot } from "../../snapshot/mod.ts";
import { isOurs, REPO_ROOT } from "../cluster/cluster.ts";
import { createNamespace, waitFor } from "../cluster/harness.ts";
import { aicrObjects, type AicrResult, runObjects } from "../e2e/_aicr.ts";
import {
  clusterOriginals,
  hits,
  labelNodes,
  outputsOf,
  PRIVATE_REGISTRY,
  seedClusterPolicy,
  watchPods,
} from "../e2e/_redact_search.ts";
import { FIXTURES_DIR } from "../kubelet/profiles.ts";
import { NOT_AICR_IMAGE, REFUSED_AGENT } from "../kubelet/notaicr.ts";
import { releaseImage, releaseVersion } from "../../version.ts";
import pkg from "../../package.json" with { type: "json" };
import { gated } from "../_gated.ts";
import { laneUnavailable, PULL_SECRET, type RealNodeEnv, useRealNodeLane } from "./harness.ts";
import { cgroupHierarchies, readLane } from "./lane.ts";

/** The registry host the seeded ClusterPolicy names. */
const PRIVATE_HOST = PRIVATE_REGISTRY.replace(/:\d+$/, "");

const LANE = "real-kubelet lane: aicr in real containers under real kubelets";

function gpuData(snapshot: Snapshot) {
  const gpu = snapshot.measurements.find((m) => m.type === "GPU");
  return gpu?.subtypes.map((s) => ({ subtype: s.subtype, data: s.data })) ?? [];
}

/** The GPU measurement the real capture gives, subtype by subtype. */
async function captureGpuData() {
  const xml = await readFile(join(FIXTURES_DIR, "nvidia-smi-q-x.h100.xml"), "utf8");
  return parseNvidiaSmi(xml).map((s) => ({ subtype: s.subtype, data: s.data }));
}

/**
 * Prints the last lines of every log in a folder to stderr.
 *
 * @param dir the logs folder
 */
function printLogTails(dir: string): void {
  if (!existsSync(dir)) return;
  for (const f of readdirSync(dir).filter((f) => f.endsWith(".log")).sort()) {
    const tail = readFileSync(join(dir, f), "utf8").split("\n").slice(-25).join("\n");
    Deno.stderr.writeSync(new TextEncoder().encode(`--- ${f} (last lines) ---\n${tail}\n`));
  }
}

const unavailable = laneUnavailable();
if (unavailable) Deno.stderr.writeSync(new TextEncoder().encode(`${unavailable}\n`));

Deno.test(gated(unavailable, {
  name: LANE,
  sanitizeOps: false,
  sanitizeResources: false,
  async fn(t) {
    const env: RealNodeEnv = await useRealNodeLane();
    const { admin, kubeconfig } = env;
    const gpuNode = env.nodes.find((n) => n.gpu)!.name;
    const namespaces: string[] = [];
    const steps: boolean[] = [];
    /** The first step's plain run: what the --redact step's search must find there. */
    let plain: AicrResult | undefined;
    /** The image flags of every run: the lane registry's aicr, pulled with the pull secret. */
    const image = ["--image", env.image, "--image-pull-secret", PULL_SECRET];
    /** `aicr snapshot` as the admin in a namespace, inside the lane's netns. */
    const runSnapshot = (
      namespace: string,
      extra: string[] = [],
      options?: Parameters<RealNodeEnv["aicr"]>[1],
    ) =>
      env.aicr(
        [
          "snapshot",
          "--kubeconfig",
          kubeconfig,
          "-n",
          namespace,
          "--timeout",
          "120s",
          ...(extra.includes("--image") ? [] : image),
          ...extra,
        ],
        options,
      );
    /** Nothing of the run is left: no object with its run ID, none labelled aicr in the namespace. */
    const assertNothingLeft = async (namespace: string, runId: string | undefined) => {
      assert.ok(runId, "the run logged its run ID");
      assert.deepEqual(await runObjects(admin, namespace, runId), []);
      assert.deepEqual(await aicrObjects(admin, namespace, { clusterScoped: false }), []);
    };
    const ns = async (
      prefix: string,
      labels: Record<string, string> = {},
      options: { wrongPassword?: boolean } = {},
    ) => {
      const name = await createNamespace(admin, prefix);
      namespaces.push(name);
      await env.createPullSecret(name, options);
      if (Object.keys(labels).length) {
        const res = await admin.request(
          "PATCH",
          `/api/v1/namespaces/${name}`,
          { metadata: { labels } },
          "application/merge-patch+json",
        );
        assert.equal(res.status, 200, JSON.stringify(res.body));
      }
      return name;
    };
    // What a real cluster has and the lane lacks, for the --redact step to look for in the
    // first step's plain run: a hostname and an address label on each node, and a GPU
    // operator's ClusterPolicy naming a private registry.
    const seeded = await seedClusterPolicy(admin);
    await labelNodes(admin, env.nodes, true);
    try {
      steps.push(
        await t.step(
          "a default aicr snapshot lands on the GPU node, in a containerd container, with the capture's GPU data",
          async () => {
            const namespace = await ns("rn-default");
            const run = await runSnapshot(namespace);
            assert.equal(run.code, 0, run.stderr);
            assert.match(run.stderr, /auto-targeting GPU nodes/);
            const snapshot = parseSnapshot(run.stdout);
            assert.equal(snapshot.metadata["source-node"], gpuNode);
            assert.deepEqual(gpuData(snapshot), await captureGpuData());
            const node = snapshot.measurements.find((m) => m.type === "K8s")?.subtypes.find((s) =>
              s.subtype === "node"
            )?.data;
            assert.equal(node?.["container-runtime-name"], "containerd");
            assert.equal(node?.["kubelet-version"], env.cluster.version);
            await assertNothingLeft(namespace, run.runId);
            plain = run;
          },
        ),
      );

      steps.push(
        await t.step(
          "--redact in a real container: no node name, address, hostname or registry host the API server knows survives; the plain run carries them",
          async () => {
            const namespace = await ns("rn-redact");
            const key = join(env.lane.stateDir, "aicr-redact.key");
            await writeFile(
              key,
              btoa(String.fromCharCode(...crypto.getRandomValues(new Uint8Array(32)))),
            );
            // The agent's pod (its address) is gone once the run ends: read while it runs.
            const pods = watchPods(admin);
            const run = await runSnapshot(namespace, ["--redact", "--redact-key-file", key])
              .finally(
                () => pods.stop(),
              );
            const redacted = outputsOf("snapshot --redact", run);
            assert.equal(
              parseSnapshot(run.stdout).metadata.redacted,
              "hostnames,node-names,ip-addresses,registry-hosts",
            );
            plain ??= await runSnapshot(namespace);
            const originals = await clusterOriginals(admin, await pods.stop());
            const kinds = new Set([...originals.values()].flatMap((k) => k.split(", ")));
            for (const kind of ["node name", "node InternalIP", "pod IP", "registry host"]) {
              assert.ok(kinds.has(kind), `the lane knows a ${kind}: ${[...kinds].join(", ")}`);
            }
            assert.deepEqual(hits(redacted, originals), []);
            // Not a vacuous search: the same run without --redact names them.
            const seen = new Set(
              hits(outputsOf("snapshot", plain), originals).map((h) => h.split("'")[1]),
            );
            const { ip } = env.nodes.find((n) => n.gpu)!;
            for (const value of [gpuNode, ip, `${gpuNode}.gpu.corp.example`, PRIVATE_HOST]) {
              assert.ok(seen.has(value), `${value} in the plain run: ${[...seen].join(" ")}`);
            }
            await assertNothingLeft(namespace, run.runId);
          },
        ),
      );

      steps.push(
        await t.step(
          "the nodes pulled the aicr image from the lane's registry through the pull secret (nothing was imported)",
          async () => {
            const node = env.lane.nodes.find((n) => n.gpu)!;
            const listed = await new Deno.Command("ctr", {
              args: ["--address", node.socket, "-n", "k8s.io", "images", "ls", "-q"],
              stdout: "piped",
              stderr: "piped",
            }).output();
            const refs = new TextDecoder().decode(listed.stdout).split("\n");
            assert.ok(
              refs.includes(env.image),
              `the GPU node holds ${env.image}: ${refs.join(" ")}`,
            );
            // The default image of this version was never imported: the pull is the only way in.
            const defaultImage = releaseImage(releaseVersion(pkg.version));
            assert.ok(
              !refs.includes(defaultImage),
              `${defaultImage} is not on the node: ${refs.join(" ")}`,
            );
          },
        ),
      );

      steps.push(
        await t.step(
          "a wrong pull secret fails fast: exit 8 naming the image and the kubelet's pull error, nothing left",
          async () => {
            const namespace = await ns("rn-badcreds", {}, { wrongPassword: true });
            const run = await runSnapshot(namespace);
            // Ended on the pull error, not at the 120 s timeout (exit 5, "did not finish within").
            assert.equal(run.code, 8, run.stderr);
            assert.doesNotMatch(run.stderr, /did not finish within/);
            assert.ok(run.stderr.includes(env.image), run.stderr);
            assert.match(run.stderr, /401 Unauthorized/);
            // And what it means, in aicr's words: which registry, which Secret.
            assert.ok(
              run.stderr.includes(
                `the registry ${env.registry.host} rejected the credentials of the image pull secret '${PULL_SECRET}'`,
              ),
              run.stderr,
            );
            await assertNothingLeft(namespace, run.runId);
          },
        ),
      );

      steps.push(
        await t.step(
          "ctr images import takes the archive aicr image save writes, under the image's name",
          async () => {
            const node = env.lane.nodes[0]!;
            const dir = await mkdtemp(join(env.lane.stateDir, "save-"));
            try {
              const archive = join(dir, "aicr.tar");
              const saved = await env.aicr(["image", "save", "-o", archive]);
              assert.equal(saved.code, 0, saved.stderr);
              const name = /: (\S+)@sha256:/.exec(saved.stderr)?.[1];
              assert.ok(name, saved.stderr);
              const ctr = (...args: string[]) =>
                new Deno.Command("ctr", {
                  args: ["--address", node.socket, "-n", "aicr-import-test", ...args],
                  stdout: "piped",
                  stderr: "piped",
                }).output();
              const imported = await ctr("images", "import", archive);
              assert.ok(imported.success, new TextDecoder().decode(imported.stderr));
              const listed = new TextDecoder().decode((await ctr("images", "ls", "-q")).stdout);
              assert.ok(listed.split("\n").includes(name), `${name} in: ${listed}`);
              await ctr("images", "rm", name);
            } finally {
              await rm(dir, { recursive: true, force: true });
            }
          },
        ),
      );

      steps.push(
        await t.step(
          "NVIDIA's image in a real container: its exit on the agent verb is refused by name (exit 8), on the daemon verb too, nothing left",
          async () => {
            const namespace = await ns("rn-upstream");
            const run = await runSnapshot(namespace, ["--image", NOT_AICR_IMAGE]);
            assert.equal(run.code, 8, run.stderr);
            assert.match(run.stderr, REFUSED_AGENT);
            assert.equal(run.stdout, "");
            await assertNothingLeft(namespace, run.runId);
            const install = await env.aicr([
              "daemonset",
              "install",
              "--kubeconfig",
              kubeconfig,
              "-n",
              namespace,
              "--image",
              NOT_AICR_IMAGE,
              "--timeout",
              "120s",
            ]);
            assert.equal(install.code, 8, install.stderr);
            // The real kubelet's FallbackToLogsOnError carries the program's last line.
            assert.match(
              install.stderr,
              new RegExp(
                `the daemon that ran on node '${gpuNode}' is NVIDIA's Go aicr: it exited 1 on the 'daemon' verb \\('.*flag provided but not defined: -port.*'\\)`,
              ),
            );
            await waitFor(
              "the rolled-back daemon's pods gone",
              async () =>
                (await aicrObjects(admin, namespace, { clusterScoped: false })).length === 0
                  ? true
                  : undefined,
            );
          },
        ),
      );

      steps.push(
        await t.step(
          "--privileged=false is admitted under PSS restricted enforcement and returns the GPU data",
          async () => {
            const namespace = await ns("rn-restricted", {
              "pod-security.kubernetes.io/enforce": "restricted",
            });
            const run = await runSnapshot(namespace, ["--privileged=false"]);
            assert.equal(run.code, 0, run.stderr);
            const snapshot = parseSnapshot(run.stdout);
            assert.equal(snapshot.metadata["source-node"], gpuNode);
            // The NVIDIA runtime injects nvidia-smi from the image's NVIDIA_VISIBLE_DEVICES, not
            // from privilege: restricted mode still reads the GPUs.
            assert.deepEqual(gpuData(snapshot), await captureGpuData());
            await assertNothingLeft(namespace, run.runId);
          },
        ),
      );

      steps.push(
        await t.step(
          "SIGINT while the agent pod runs exits 130 and leaves nothing",
          async () => {
            const namespace = await ns("rn-sigint");
            let sent = false;
            const run = await runSnapshot(
              namespace,
              [],
              {
                onStderr: (text, kill) => {
                  // Midway: the Job exists and its pod was placed on the GPU node.
                  if (!sent && /waiting for the agent .*node=\S+/.test(text)) {
                    sent = true;
                    kill("SIGINT");
                  }
                },
              },
            );
            assert.ok(sent, `the run reached the wait: ${run.stderr}`);
            assert.equal(run.code, 130, run.stderr);
            await assertNothingLeft(namespace, run.runId);
          },
        ),
      );

      steps.push(
        await t.step(
          "aicr daemonset install, fetch (each GPU node's snapshot) and uninstall (nothing left)",
          async () => {
            const namespace = await ns("rn-ds");
            const ds = (...args: string[]) =>
              env.aicr(["daemonset", ...args, "--kubeconfig", kubeconfig, "-n", namespace]);
            const out = await mkdtemp(join(env.lane.stateDir, "ds-out-"));
            try {
              const install = await ds("install", "--timeout", "120s", ...image);
              assert.equal(install.code, 0, install.stderr);
              const pods = await admin.request(
                "GET",
                `/api/v1/namespaces/${namespace}/pods?labelSelector=${
                  encodeURIComponent(
                    "app.kubernetes.io/name=aicr,app.kubernetes.io/component=daemon",
                  )
                }`,
              );
              // GPU nodes by default: the daemon runs on the GPU node and nowhere else.
              assert.deepEqual(
                (pods.body.items as { spec: { nodeName: string } }[]).map((p) => p.spec.nodeName),
                [gpuNode],
              );
              const dir = join(out, "fleet") + "/";
              const fetch = await ds("fetch", "-o", dir);
              assert.equal(fetch.code, 0, fetch.stderr);
              assert.match(fetch.stderr, new RegExp(`${gpuNode}\\s+ok\\s+`));
              // The node's snapshot, and the cluster's topology listed once beside it.
              assert.deepEqual(
                (await readdir(dir)).sort(),
                [`${gpuNode}.yaml`, FLEET_TOPOLOGY_FILE].sort(),
              );
              const snapshot = parseSnapshot(
                await readFile(join(dir, `${gpuNode}.yaml`), "utf8"),
              );
              assert.equal(snapshot.metadata["source-node"], gpuNode);
              // The daemon read its own Node only, under a real kubelet's pod too.
              assert.equal(snapshot.metadata["topology-scope"], "node");
              assert.deepEqual(gpuData(snapshot), await captureGpuData());
              const uninstall = await ds("uninstall");
              assert.equal(uninstall.code, 0, uninstall.stderr);
              // The DaemonSet's pods go with it (foreground deletion or the garbage collector).
              await waitFor("the daemon pods to be gone", async () => {
                const left = await aicrObjects(admin, namespace, { daemonset: true });
                return left.length === 0 ? true : undefined;
              }, 60_000).catch(() => {});
              assert.deepEqual(await aicrObjects(admin, namespace, { daemonset: true }), []);
            } finally {
              await env.aicr([
                "daemonset",
                "uninstall",
                "--kubeconfig",
                kubeconfig,
                "-n",
                namespace,
              ]);
              await rm(out, { recursive: true, force: true });
            }
          },
        ),
      );
    } finally {
      // A failed step: the lane's logs go with it, so their ends are printed first.
      if (steps.includes(false)) {
        printLogTails(join(env.lane.stateDir, "logs"));
        printLogTails(join(env.lane.controlPlaneDir, "logs"));
      }
      for (const name of namespaces) await admin.request("DELETE", `/api/v1/namespaces/${name}`);
      await labelNodes(admin, env.nodes, false);
      for (const path of seeded) await admin.request("DELETE", path);
      await env.stop();
    }
  },
}));

Deno.test(gated(unavailable, {
  name: "real-kubelet lane: cluster:down removes a lane whose starter was killed midway",
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    await mkdir(join(REPO_ROOT, ".cluster-runs"), { recursive: true });
    const stateDir = await mkdtemp(join(REPO_ROOT, ".cluster-runs", "lane-crash-"));
    const task = (verb: string[]) =>
      new Deno.Command(Deno.execPath(), {
        args: ["run", "-A", join(REPO_ROOT, "tests", "cluster", "cluster.ts"), ...verb],
        env: { AICR_CLUSTER_DIR: stateDir },
        stdin: "null",
        stdout: "piped",
        stderr: "piped",
      });
    try {
      // `cluster:up --real-kubelet`, SIGKILLed once its node's containerd and kubelet started.
      const up = task(["up", "--real-kubelet", "--nodes", "1"]).spawn();
      let log = "";
      let killed = false;
      const stdout = new Response(up.stdout).text();
      for await (const chunk of up.stderr.pipeThrough(new TextDecoderStream())) {
        log += chunk;
        if (!killed && /lane: node \S+ \(.*\) starting/.test(log)) {
          killed = true;
          up.kill("SIGKILL");
        }
      }
      await stdout;
      await up.status;
      assert.ok(killed, `the start reached its node: ${log}`);
      const lane = readLane(stateDir)!;
      assert.ok(existsSync(`/run/netns/${lane.netns}`), "the crash left the netns behind");
      assert.ok(lane.processes.some((p) => isOurs(p.pid, p.match)), "and running processes");

      const down = await task(["down"]).output();
      assert.equal(down.code, 0, new TextDecoder().decode(down.stderr));
      // By pid: no recorded process runs.
      for (const p of lane.processes) assert.ok(!isOurs(p.pid, p.match), `${p.name} stopped`);
      // By path: no netns, no cgroup, no mount, no process that names the state folder.
      assert.ok(!existsSync(`/run/netns/${lane.netns}`), "the netns is gone");
      const roots = [...cgroupHierarchies(), "/sys/fs/cgroup/unified"];
      for (const root of roots) {
        assert.ok(!existsSync(join(root, lane.cgroupParent)), `no cgroup left in ${root}`);
      }
      assert.ok(
        !readFileSync("/proc/self/mountinfo", "utf8").includes(stateDir),
        "nothing mounted under the state folder",
      );
      const naming = readdirSync("/proc").filter((d) => /^\d+$/.test(d)).filter((pid) => {
        try {
          return readFileSync(`/proc/${pid}/cmdline`, "latin1").includes(stateDir);
        } catch {
          return false;
        }
      });
      assert.deepEqual(naming, [], "no process runs from the state folder");
      assert.ok(!existsSync(join(stateDir, "nodes")), "the nodes' folders are removed");
    } finally {
      await task(["down"]).output();
      await rm(stateDir, { recursive: true, force: true });
    }
  },
}));
