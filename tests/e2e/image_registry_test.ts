/**
 * `aicr image` with the built binaries against a real registry (Debian's docker-registry with TLS
 * from a test CA and htpasswd credentials, `tests/registry/registry.ts`), checked with an
 * independent client, skopeo: the pushed index lists linux/amd64 and linux/arm64 and has the digest
 * aicr printed; the archive `aicr image save` writes, copied by skopeo, is the same image byte for
 * byte; a rerun uploads nothing; wrong credentials, an untrusted certificate, plain HTTP to a TLS
 * port, nothing listening, a full disk and Ctrl-C mid-push each end in one line with the exit code
 * of errors.ts, and nothing is tagged.
 */
import assert from "node:assert/strict";
import { mkdtemp, readdir, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { canIsolate, ensureBinary, freePort } from "./binary_harness.ts";
import {
  registryUnavailable,
  skopeo,
  startRegistry,
  type TestRegistry,
} from "../registry/registry.ts";

const AMD64 = await ensureBinary("amd64");
const ARM64 = await ensureBinary("arm64");
const HOME = Deno.env.get("HOME") ?? "/root";

interface Ran {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs the amd64 binary with only HOME set (its cache folder: ~/.cache/aicr). */
async function aicr(args: string[], cwd = tmpdir()): Promise<Ran> {
  const out = await new Deno.Command(AMD64, {
    args,
    cwd,
    env: { HOME },
    clearEnv: true,
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).output();
  return {
    code: out.code,
    stdout: new TextDecoder().decode(out.stdout),
    stderr: new TextDecoder().decode(out.stderr),
  };
}

function show(ran: Ran): string {
  return `exit ${ran.code}\nstdout: ${ran.stdout}\nstderr: ${ran.stderr.slice(-3000)}`;
}

async function withRegistry(test: (registry: TestRegistry, dir: string) => Promise<void>) {
  const dir = await mkdtemp(join(tmpdir(), "aicr-registry-"));
  const registry = await startRegistry({ dir });
  try {
    await test(registry, dir);
  } finally {
    await registry.stop();
    await rm(dir, { recursive: true, force: true });
  }
}

function pushArgs(registry: TestRegistry, repo: string, extra: string[] = []): string[] {
  return [
    "image",
    "push",
    `${registry.host}/${repo}`,
    "--binary",
    `linux/arm64=${ARM64}`,
    "--ca-file",
    registry.caFile,
    "--registry-config",
    registry.authFile,
    ...extra,
  ];
}

async function sha256(text: string): Promise<string> {
  const hash = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text));
  return `sha256:${[...new Uint8Array(hash)].map((b) => b.toString(16).padStart(2, "0")).join("")}`;
}

const unavailable = registryUnavailable();

Deno.test({
  name:
    "aicr image push: both platforms to a real registry, read back by skopeo; a rerun uploads nothing",
  ignore: unavailable !== undefined,
  async fn() {
    await withRegistry(async (registry) => {
      const pushed = await aicr(pushArgs(registry, "tools/aicr"));
      assert.equal(pushed.code, 0, show(pushed));
      const pinned = pushed.stdout.trim();
      assert.match(
        pinned,
        new RegExp(`^${registry.host.replace(/\./g, "\\.")}/tools/aicr@sha256:[0-9a-f]{64}$`),
      );
      assert.ok(pushed.stderr.includes(`--image ${pinned}`), show(pushed));
      const tag = /pushed \S+:(\S+) /.exec(pushed.stderr)?.[1];
      assert.ok(tag, show(pushed));
      const raw = await skopeo(registry, [
        "inspect",
        "--raw",
        `docker://${registry.host}/tools/aicr:${tag}`,
      ]);
      assert.equal(raw.code, 0, raw.stderr);
      assert.equal(
        await sha256(raw.stdout),
        pinned.split("@")[1],
        "skopeo's index has the printed digest",
      );
      const index = JSON.parse(raw.stdout);
      assert.equal(index.mediaType, "application/vnd.oci.image.index.v1+json");
      assert.deepEqual(
        index.manifests.map((m: { platform: { architecture: string } }) => m.platform.architecture),
        ["amd64", "arm64"],
      );
      for (const m of index.manifests as { digest: string; platform: { architecture: string } }[]) {
        const config = await skopeo(registry, [
          "inspect",
          "--config",
          `docker://${registry.host}/tools/aicr@${m.digest}`,
        ]);
        assert.equal(config.code, 0, config.stderr);
        const parsed = JSON.parse(config.stdout);
        assert.equal(parsed.architecture, m.platform.architecture);
        assert.equal(parsed.config.User, "65534:65534");
        assert.deepEqual(parsed.config.Entrypoint, ["/usr/local/bin/aicr"]);
      }
      const again = await aicr(pushArgs(registry, "tools/aicr"));
      assert.equal(again.code, 0, show(again));
      assert.equal(again.stdout.trim(), pinned);
      assert.match(again.stderr, /0 blob\(s\) uploaded, 6 already there/);
    });
  },
});

Deno.test({
  name: "aicr image save: skopeo copies the archive to the registry as the very image push makes",
  ignore: unavailable !== undefined,
  async fn() {
    await withRegistry(async (registry, dir) => {
      const archive = join(dir, "aicr.tar");
      const saved = await aicr([
        "image",
        "save",
        "--binary",
        `linux/arm64=${ARM64}`,
        "-o",
        archive,
      ]);
      assert.equal(saved.code, 0, show(saved));
      const copied = await skopeo(registry, [
        "copy",
        "--all",
        "--preserve-digests",
        `oci-archive:${archive}`,
        `docker://${registry.host}/copied/aicr:1`,
      ]);
      assert.equal(copied.code, 0, copied.stderr);
      const raw = await skopeo(registry, [
        "inspect",
        "--raw",
        `docker://${registry.host}/copied/aicr:1`,
      ]);
      const pushed = await aicr(pushArgs(registry, "pushed/aicr"));
      assert.equal(pushed.code, 0, show(pushed));
      assert.equal(await sha256(raw.stdout), pushed.stdout.trim().split("@")[1]);
      assert.match(saved.stderr, new RegExp(`@${await sha256(raw.stdout)}`));
    });
  },
});

Deno.test({
  name:
    "aicr image push: wrong credentials, an untrusted certificate, plain HTTP, nothing listening: one line each, nothing tagged",
  ignore: unavailable !== undefined,
  async fn() {
    await withRegistry(async (registry) => {
      const wrong = await aicr([
        ...pushArgs(registry, "bad/aicr").slice(0, -1),
        registry.wrongAuthFile,
      ]);
      assert.equal(wrong.code, 4, show(wrong));
      assert.ok(wrong.stderr.includes(`'${registry.host}/bad/aicr'`), show(wrong));
      assert.ok(wrong.stderr.includes(`in '${registry.wrongAuthFile}'`), show(wrong));
      const noCa = await aicr(
        pushArgs(registry, "bad/aicr").filter((a) => a !== "--ca-file" && a !== registry.caFile),
      );
      assert.equal(noCa.code, 6, show(noCa));
      assert.match(noCa.stderr, /its certificate is not trusted .*give its CA with --ca-file/);
      const plain = await aicr(pushArgs(registry, "bad/aicr", ["--plain-http"]));
      assert.notEqual(plain.code, 0, show(plain));
      assert.ok(
        plain.stderr.split("\n").filter((l) => l.startsWith("error:")).length === 1,
        show(plain),
      );
      const listed = await skopeo(registry, ["list-tags", `docker://${registry.host}/bad/aicr`]);
      assert.notEqual(listed.code, 0, "no tag (no repository) after the failed pushes");
    });
    const closed = `127.0.0.1:${freePort()}`;
    const none = await aicr(["image", "push", `${closed}/aicr`]);
    assert.equal(none.code, 6, show(none));
    assert.match(none.stderr, new RegExp(`Cannot reach the registry '${closed}' .*ECONNREFUSED`));
  },
});

Deno.test({
  name:
    "aicr image push: Ctrl-C mid-upload exits 130 with no tag; the rerun uploads only what is missing",
  ignore: unavailable !== undefined,
  async fn() {
    await withRegistry(async (registry) => {
      // The layers are compressed (and cached) by a save first, so the push starts uploading at once.
      const warm = await aicr([
        "image",
        "save",
        "--binary",
        `linux/arm64=${ARM64}`,
        "-o",
        "/dev/null",
      ]);
      assert.equal(warm.code, 0, show(warm));
      const child = new Deno.Command(AMD64, {
        args: pushArgs(registry, "cut/aicr"),
        env: { HOME },
        clearEnv: true,
        stdin: "null",
        stdout: "piped",
        stderr: "piped",
      }).spawn();
      let stderr = "";
      const reader = child.stderr.pipeThrough(new TextDecoderStream()).getReader();
      while (true) {
        const { value, done } = await reader.read();
        if (done) break;
        stderr += value;
        // The first big layer (a binary, about 40 MiB): interrupt it in flight.
        if (/uploading blob \S+ \([1-9]\d\.\d MiB\)/.test(stderr)) {
          child.kill("SIGINT");
          break;
        }
      }
      for (let r = await reader.read(); !r.done; r = await reader.read()) stderr += r.value;
      const status = await child.status;
      await child.stdout.cancel();
      assert.equal(status.code, 130, stderr);
      assert.match(stderr, /interrupted \(received SIGINT\): no tag was published/);
      assert.equal(stderr.split("\n").filter((l) => l.startsWith("error:")).length, 1, stderr);
      const tags = await skopeo(registry, ["list-tags", `docker://${registry.host}/cut/aicr`]);
      assert.ok(tags.code !== 0 || JSON.parse(tags.stdout).Tags.length === 0, tags.stdout);
      const rerun = await aicr(pushArgs(registry, "cut/aicr"));
      assert.equal(rerun.code, 0, show(rerun));
      const already = Number(/, (\d) already there/.exec(rerun.stderr)?.[1]);
      assert.ok(already >= 1 && already < 6, show(rerun));
    });
  },
});

Deno.test({
  name: "aicr image save: a full disk is one line, exit 2, and leaves no file behind",
  ignore: !canIsolate(),
  async fn() {
    const dir = await mkdtemp(join(tmpdir(), "aicr-full-"));
    try {
      const script =
        `mount -t tmpfs -o size=8m tmpfs "$1" && "$2" image save -o "$1/aicr.tar"; code=$?; ls -A "$1"; exit $code`;
      const out = await new Deno.Command("/usr/bin/unshare", {
        args: ["-m", "--propagation", "private", "/bin/sh", "-c", script, "sh", dir, AMD64],
        env: { HOME, PATH: "/usr/bin:/bin" },
        clearEnv: true,
        stdout: "piped",
        stderr: "piped",
      }).output();
      const ran = {
        code: out.code,
        stdout: new TextDecoder().decode(out.stdout),
        stderr: new TextDecoder().decode(out.stderr),
      };
      assert.equal(ran.code, 2, show(ran));
      assert.match(ran.stderr, /Cannot write the image archive '.*aicr\.tar': the disk is full/);
      assert.equal(ran.stdout.trim(), "", "nothing is left in the full folder");
      assert.deepEqual(await readdir(dir), []);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  },
});
