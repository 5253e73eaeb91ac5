/**
 * The agent image's layout, checked without a container runtime: `Containerfile` is read for its
 * COPY target, PATH and USER; the Job and DaemonSet builders must run a command that PATH finds
 * there, as the user the image defaults to in restricted mode. Then the image is imitated: a
 * root filesystem holding only the binary at its COPY target and the glibc libraries `ldd` names
 * and the /etc/passwd entries of the distroless "cc" base, plus the /proc, /sys and /dev every
 * container gets, mounted read-only; `aicr version` and `aicr agent` are run there by bare name
 * through PATH, as uid/gid 65534 and with no network, and again as an arbitrary uid that has no
 * passwd entry (as OpenShift assigns). Those cases need root, `unshare`, `mount`, `chroot`, `ldd`.
 */
import assert from "node:assert/strict";
import { chmod, copyFile, mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { buildAgentJob, buildDaemonSet } from "../../manifests/mod.ts";
import type { AgentJobConfig, DaemonSetConfig } from "../../manifests/mod.ts";
import {
  canIsolate,
  describeRun,
  ensureBinary,
  NOBODY,
  PACKAGE_VERSION,
  REPO_ROOT,
} from "./binary_harness.ts";
import type { Ran } from "./binary_harness.ts";
import { imageTag } from "../../scripts/image_tag.ts";

/** What the image's build file says about its layout. */
interface ImageLayout {
  /** Where `COPY … aicr <dest>` puts the binary. */
  binary: string;
  /** `ENV PATH=…`. */
  path: string;
  /** `USER uid:gid`. */
  user: { uid: number; gid: number };
}

function readLayout(text: string): ImageLayout {
  const lines = text.replace(/\\\n\s*/g, " ").split("\n").filter((l) => !l.startsWith("#"));
  const copy = lines.map((l) => /^COPY\s+(?:--\S+\s+)*aicr\s+(\S+)\s*$/.exec(l)).find(Boolean);
  const path = lines.map((l) => /^ENV\s.*\bPATH=(\S+)/.exec(l)).find(Boolean);
  const user = lines.map((l) => /^USER\s+(\d+):(\d+)\s*$/.exec(l)).find(Boolean);
  assert.ok(copy, "Containerfile copies the binary: COPY aicr <dest>");
  assert.ok(path, "Containerfile sets ENV PATH");
  assert.ok(user, "Containerfile sets a numeric USER uid:gid");
  return {
    binary: copy[1]!,
    path: path[1]!,
    user: { uid: Number(user[1]), gid: Number(user[2]) },
  };
}

const LAYOUT = readLayout(await readFile(join(REPO_ROOT, "Containerfile"), "utf8"));
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

const CHROOT = "/usr/sbin/chroot";
const LDD = "/usr/bin/ldd";
const CAN_CHROOT = canIsolate() && [CHROOT, LDD].every((p) => {
  try {
    return Deno.statSync(p).isFile;
  } catch {
    return false;
  }
});

/** The absolute library paths `ldd` lists for a binary (including the dynamic loader). */
async function sharedLibraries(binary: string): Promise<string[]> {
  const out = await new Deno.Command(LDD, { args: [binary], stdout: "piped", stderr: "piped" })
    .output();
  assert.ok(out.success, `ldd ${binary}: ${new TextDecoder().decode(out.stderr)}`);
  const paths = new Set<string>();
  for (const line of new TextDecoder().decode(out.stdout).split("\n")) {
    const match = /(?:=>\s*)?(\/\S+)\s+\(0x/.exec(line);
    if (match) paths.add(match[1]!);
  }
  return [...paths];
}

/** Builds the imitation root filesystem: binary, libraries, empty mount points. */
async function imageRoot(binary: string): Promise<{ root: string; libraries: string[] }> {
  const root = await mkdtemp(join(tmpdir(), "aicr-image-root-"));
  await chmod(root, 0o755);
  const target = join(root, LAYOUT.binary);
  await mkdir(dirname(target), { recursive: true });
  await copyFile(binary, target);
  await chmod(target, 0o755);
  const libraries = await sharedLibraries(binary);
  for (const lib of libraries) {
    await mkdir(dirname(join(root, lib)), { recursive: true });
    // Copy through symlinks: the file itself lands at the path the loader asks for.
    await copyFile(await Deno.realPath(lib), join(root, lib));
  }
  for (const dir of ["proc", "sys", "dev"]) await mkdir(join(root, dir));
  // The accounts distroless ships (it has no shell, so none is named).
  await mkdir(join(root, "etc"));
  await writeFile(
    join(root, "etc", "passwd"),
    "root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n",
  );
  await writeFile(join(root, "etc", "group"), "root:x:0:\nnogroup:x:65534:\n");
  return { root, libraries };
}

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

const IGNORED = CAN_CHROOT ? "" : " (ignored: needs root with unshare, mount, chroot and ldd)";

async function assertRunsInImage(user?: { uid: number; gid: number }): Promise<void> {
  const { root, libraries } = await imageRoot(await ensureBinary());
  try {
    for (const lib of libraries) {
      assert.match(lib, /\/(ld-linux[^/]*|lib(c|m|dl|pthread|stdc\+\+|gcc_s)\.so[.\d]*)$/, lib);
    }
    const version = await runInImage(root, ["version"], user);
    assert.equal(version.code, 0, describeRun(version));
    assert.match(
      version.stdout,
      new RegExp(`^aicr ${PACKAGE_VERSION}$`, "m"),
      describeRun(version),
    );
    const agent = await runInImage(root, ["agent"], user);
    assert.equal(agent.code, 0, describeRun(agent));
    assert.match(agent.stdout, /^apiVersion: aicr\.run\/v1$/m, describeRun(agent));
  } finally {
    await rm(root, { recursive: true, force: true });
  }
}

Deno.test({
  name:
    `binary image: a root filesystem of only glibc's libraries, /etc/passwd and ${LAYOUT.binary} runs \`aicr version\` and \`aicr agent\` by name as the image's user, read-only, with no network${IGNORED}`,
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
