/**
 * The agent image's layout, checked on the image itself without a container runtime: `aicr image
 * save` writes the image of the built binary (its own embedded base), and GNU tar unpacks it
 * (the archive, then the linux/amd64 manifest's layers, in order) into a root filesystem. Its
 * config gives the binary's path (ENTRYPOINT), PATH and USER; the Job and DaemonSet builders must
 * run a command that PATH finds there, as the user the image defaults to in restricted mode. Then,
 * in that root, mounted read-only with the /proc, /sys and /dev every container gets, `aicr
 * version` and `aicr agent` are run by bare name through PATH, as uid/gid 65534 and with no
 * network, and again as an arbitrary uid that has no passwd entry (as OpenShift assigns). Those
 * cases need root, `unshare`, `mount`, `chroot` and `tar`.
 */
import assert from "node:assert/strict";
import { chmod, mkdir, mkdtemp, readdir, readFile, rm, symlink } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { buildAgentJob, buildDaemonSet } from "../../manifests/mod.ts";
import type { AgentJobConfig, DaemonSetConfig } from "../../manifests/mod.ts";
import {
  canIsolate,
  describeRun,
  ensureBinary,
  NOBODY,
  PACKAGE_VERSION,
} from "./binary_harness.ts";
import type { Ran } from "./binary_harness.ts";
import { imageTag } from "../../scripts/image_tag.ts";

/** What the image's config says about its layout. */
interface ImageLayout {
  /** The ENTRYPOINT: where the binary is. */
  binary: string;
  /** `ENV PATH=…`. */
  path: string;
  /** `USER uid:gid`. */
  user: { uid: number; gid: number };
}

async function run(argv: string[], cwd = "/"): Promise<string> {
  const out = await new Deno.Command(argv[0]!, {
    args: argv.slice(1),
    cwd,
    env: { HOME: Deno.env.get("HOME") ?? "/root", PATH: "/usr/bin:/bin" },
    clearEnv: true,
    stdout: "piped",
    stderr: "piped",
  }).output();
  const text = new TextDecoder().decode(out.stdout);
  assert.ok(out.success, `${argv.join(" ")}: ${new TextDecoder().decode(out.stderr)}${text}`);
  return text;
}

/** The image `aicr image save` writes for the built binary, unpacked by GNU tar into a root. */
async function unpackImage(): Promise<{ root: string; layout: ImageLayout }> {
  const binary = await ensureBinary();
  const work = await mkdtemp(join(tmpdir(), "aicr-image-"));
  try {
    await run([binary, "image", "save", "-o", join(work, "aicr.tar")]);
    await mkdir(join(work, "layout"));
    await run(["tar", "-xf", join(work, "aicr.tar"), "-C", join(work, "layout")]);
    const blob = async (digest: string) =>
      JSON.parse(await readFile(join(work, "layout", "blobs", "sha256", digest.slice(7)), "utf8"));
    const top = JSON.parse(await readFile(join(work, "layout", "index.json"), "utf8"));
    const index = await blob(top.manifests[0].digest);
    const entry = index.manifests.find((m: { platform: { architecture: string } }) =>
      m.platform.architecture === "amd64"
    );
    const manifest = await blob(entry.digest);
    const config = (await blob(manifest.config.digest)).config;
    const root = await mkdtemp(join(tmpdir(), "aicr-image-root-"));
    await chmod(root, 0o755);
    for (const layer of manifest.layers) {
      await run([
        "tar",
        "-xzf",
        join(work, "layout", "blobs", "sha256", layer.digest.slice(7)),
        "-C",
        root,
        "--numeric-owner",
        "--same-permissions",
      ]);
    }
    // What a runtime adds: the mount points of /proc, /sys and /dev.
    for (const dir of ["proc", "sys", "dev"]) await mkdir(join(root, dir));
    const [uid, gid] = String(config.User).split(":").map(Number);
    const path = (config.Env as string[]).find((e) => e.startsWith("PATH="))!.slice(5);
    return { root, layout: { binary: config.Entrypoint[0], path, user: { uid: uid!, gid: gid! } } };
  } finally {
    await rm(work, { recursive: true, force: true });
  }
}

const CHROOT = "/usr/sbin/chroot";
const CAN_CHROOT = canIsolate() && (() => {
  try {
    return Deno.statSync(CHROOT).isFile;
  } catch {
    return false;
  }
})();
const IMAGE = await unpackImage();
const LAYOUT = IMAGE.layout;
const RUN_ID = "20260103-103000-0123456789abcdef";

/** Where PATH finds `command` in the image, or undefined. */
function resolveOnPath(command: string): string | undefined {
  if (command.startsWith("/")) return command === LAYOUT.binary ? command : undefined;
  return LAYOUT.path.split(":").map((dir) => join(dir, command)).find((p) => p === LAYOUT.binary);
}

Deno.test("binary image: the Job's and the DaemonSet's command finds the binary on the image's PATH", () => {
  assert.equal(LAYOUT.binary, "/usr/local/bin/aicr");
  const job: AgentJobConfig = {
    namespace: "default",
    runId: RUN_ID,
    invocationId: "fedcba9876543210",
    serviceAccountName: `aicr-${RUN_ID}`,
    image: "ghcr.io/nvidia/aicr:v0.1.0",
  };
  for (const privileged of [true, false]) {
    const container = buildAgentJob({ ...job, privileged }).spec.template.spec.containers[0]!;
    const command = container.command?.[0] ?? "";
    assert.equal(resolveOnPath(command), LAYOUT.binary, `Job command ${container.command}`);
  }
  const daemonConfig: DaemonSetConfig = {
    namespace: "default",
    image: job.image,
    tls: { secretName: "aicr-daemon-tls" },
  };
  const daemon = buildDaemonSet(daemonConfig);
  const command = daemon.spec.template.spec.containers[0]!.command?.[0] ?? "";
  assert.equal(resolveOnPath(command), LAYOUT.binary, `DaemonSet command ${command}`);
});

Deno.test("binary image: the image's default user is the restricted pod's user, and the privileged pod overrides it", () => {
  const job: AgentJobConfig = {
    namespace: "default",
    runId: RUN_ID,
    invocationId: "fedcba9876543210",
    serviceAccountName: `aicr-${RUN_ID}`,
    image: "ghcr.io/nvidia/aicr:v0.1.0",
  };
  const restricted = buildAgentJob({ ...job, privileged: false }).spec.template.spec;
  assert.equal(LAYOUT.user.uid, NOBODY);
  assert.equal(restricted.securityContext?.runAsUser, LAYOUT.user.uid);
  assert.equal(restricted.securityContext?.runAsGroup, LAYOUT.user.gid);
  assert.equal(restricted.containers[0]!.securityContext?.readOnlyRootFilesystem, true);
  const privileged = buildAgentJob({ ...job, privileged: true }).spec.template.spec;
  assert.equal(privileged.securityContext?.runAsUser, 0);
});

async function runInImage(
  root: string,
  args: readonly string[],
  user: { uid: number; gid: number } = LAYOUT.user,
): Promise<Ran> {
  // $1 = root: bind it read-only, mount what a container gets over it, exec `aicr` by bare name.
  const script = [
    `r="$1"`,
    `shift`,
    `/bin/mount --bind "$r" "$r"`,
    `/bin/mount -o remount,bind,ro "$r"`,
    `/bin/mount --rbind /proc "$r/proc"`,
    `/bin/mount --rbind /sys "$r/sys"`,
    `/bin/mount --rbind /dev "$r/dev"`,
    `exec ${CHROOT} --userspec=${user.uid}:${user.gid} "$r" aicr "$@"`,
  ].join(" && ");
  const argv = ["/usr/bin/unshare", "-m", "-n", "/bin/sh", "-c", script, "sh", root, ...args];
  const out = await new Deno.Command(argv[0]!, {
    args: argv.slice(1),
    cwd: "/",
    clearEnv: true,
    env: { PATH: LAYOUT.path },
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).output();
  const decoder = new TextDecoder();
  return {
    code: out.code,
    stdout: decoder.decode(out.stdout),
    stderr: decoder.decode(out.stderr),
    argv,
  };
}

const IGNORED = CAN_CHROOT ? "" : " (ignored: needs root with unshare, mount, chroot and tar)";

async function assertRunsInImage(user?: { uid: number; gid: number }): Promise<void> {
  const version = await runInImage(IMAGE.root, ["version"], user);
  assert.equal(version.code, 0, describeRun(version));
  assert.match(version.stdout, new RegExp(`^aicr ${PACKAGE_VERSION}$`, "m"), describeRun(version));
  const agent = await runInImage(IMAGE.root, ["agent"], user);
  assert.equal(agent.code, 0, describeRun(agent));
  assert.match(agent.stdout, /^apiVersion: aicr\.run\/v1$/m, describeRun(agent));
  // Restricted mode reads the image's own os-release: Debian 12, from the pinned base-files.
  assert.match(agent.stdout, /bookworm|Debian GNU\/Linux 12/, describeRun(agent));
}

Deno.test({
  name:
    `binary image: the saved image's own root filesystem (pinned Debian base, ${LAYOUT.binary}) runs \`aicr version\` and \`aicr agent\` by name as the image's user, read-only, with no network${IGNORED}`,
  ignore: !CAN_CHROOT,
  fn: () => assertRunsInImage(),
});

Deno.test({
  name:
    `binary image: the same runs as an arbitrary uid with no passwd entry and no HOME (OpenShift's restricted SCC)${IGNORED}`,
  ignore: !CAN_CHROOT,
  fn: () => assertRunsInImage({ uid: 1000680000, gid: 0 }),
});

Deno.test("binary image: the image tag is this project's image of this version, the version exactly", () => {
  const tag = imageTag();
  assert.equal(tag, `ghcr.io/aicr-run/aicr:${PACKAGE_VERSION.replace(/^v/, "")}`);
  assert.equal(imageTag({ version: true }), PACKAGE_VERSION.replace(/^v/, ""));
});

Deno.test("binary image: the unpacked image holds no shell", async () => {
  for (const shell of ["bin/sh", "bin/bash", "usr/bin/sh", "bin/busybox"]) {
    await assert.rejects(Deno.lstat(join(IMAGE.root, shell)), Deno.errors.NotFound, shell);
  }
});

Deno.test("binary image: SIGTERM while the binary's layer is compressed stops the compression, exit 130, nothing written or cached", async () => {
  const binary = await ensureBinary();
  const home = Deno.env.get("HOME") ?? "/root";
  const work = await mkdtemp(join(tmpdir(), "aicr-image-signal-"));
  try {
    // A cache of its own, so the layer is compressed anew (seconds of work); the base's Debian
    // packages are those unpackImage() fetched into the default cache.
    const cache = join(work, "cache");
    await mkdir(cache);
    await symlink(join(home, ".cache", "aicr", "debs"), join(cache, "debs"));
    const child = new Deno.Command(binary, {
      args: ["image", "save", "-o", join(work, "aicr.tar")],
      env: { HOME: home, PATH: "/usr/bin:/bin", AICR_CACHE_DIR: cache },
      clearEnv: true,
      stdout: "null",
      stderr: "piped",
    }).spawn();
    let stderr = "";
    const decoder = new TextDecoder();
    const reader = child.stderr.getReader();
    // The layer's line comes right before its compression starts.
    while (!/^layer linux\/amd64: /m.test(stderr)) {
      const { value, done } = await reader.read();
      if (done) break;
      stderr += decoder.decode(value, { stream: true });
    }
    await new Promise((r) => setTimeout(r, 300));
    const sent = Date.now();
    child.kill("SIGTERM");
    const guard = setTimeout(() => child.kill("SIGKILL"), 60_000);
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      stderr += decoder.decode(value, { stream: true });
    }
    const { code } = await child.status;
    clearTimeout(guard);
    const seconds = (Date.now() - sent) / 1000;
    assert.equal(code, 130, stderr);
    // Stopped between two compressed chunks, not after the whole layer: a finished layer is
    // cached (its .tar.gz and .json), a stopped one leaves nothing (proved by the files, not
    // by the time it took).
    assert.deepEqual(
      await readdir(join(cache, "layers")),
      [],
      `the layer was finished and cached: exited ${seconds} s after SIGTERM`,
    );
    assert.match(
      stderr,
      /^error: Cannot build the image layer of '[^']+': interrupted \(received SIGTERM\); nothing was written$/m,
    );
    assert.deepEqual(
      (await readdir(work)).sort(),
      ["cache"],
      "no archive, no temporary file",
    );
  } finally {
    await rm(work, { recursive: true, force: true });
  }
});

globalThis.addEventListener("unload", () => {
  Deno.removeSync(IMAGE.root, { recursive: true });
});
