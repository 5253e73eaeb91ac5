/**
 * Builds the real-kubelet lane's helper images offline as OCI image layouts (one uncompressed layer
 * each) for `ctr -n k8s.io images import`: the sandbox (pause) image, `/bin/true` and the
 * stand-in of NVIDIA's Go aicr. The aicr image itself is not among them: the lane pushes it with
 * `aicr image push` into its registry, and the nodes pull it from there.
 *
 * @module
 */
import { copyFile, mkdir, mkdtemp, rename, rm, stat, writeFile } from "node:fs/promises";
import { createHash } from "node:crypto";
import { createReadStream } from "node:fs";
import { dirname, join } from "node:path";

/** One file of an image's root filesystem. */
export interface ImageFile {
  /** Path on this machine. */
  src: string;
  /** Absolute path in the image. */
  dest: string;
  /** Permission bits (default 0o755). */
  mode?: number;
}

/** What the image runs (the OCI image config's `config`). */
export interface ImageRunConfig {
  User?: string;
  Env?: string[];
  Entrypoint?: string[];
  Cmd?: string[];
  WorkingDir?: string;
  Labels?: Record<string, string>;
}

/** Inputs of {@link buildOciImage}. */
export interface ImageSpec {
  /** Full reference the import gives the image, e.g. `ghcr.io/nvidia/aicr:v0.1.0`. */
  ref: string;
  files: ImageFile[];
  /** Extra text files (`/etc/passwd`, ...): path in the image → content. */
  text?: Record<string, string>;
  /** Empty folders with their modes (e.g. `/tmp`: 0o1777). */
  dirs?: Record<string, number>;
  config: ImageRunConfig;
}

/**
 * Hex SHA-256 of a file, streamed.
 *
 * @param path the file
 * @returns the digest's hex
 */
async function sha256File(path: string): Promise<string> {
  const hash = createHash("sha256");
  for await (const chunk of createReadStream(path)) hash.update(chunk as Uint8Array);
  return hash.digest("hex");
}

/**
 * Runs a command and throws with its stderr when it fails.
 *
 * @param argv the command
 * @returns stdout
 * @throws {Error} naming the command
 */
async function run(argv: string[]): Promise<string> {
  const out = await new Deno.Command(argv[0]!, {
    args: argv.slice(1),
    stdout: "piped",
    stderr: "piped",
  })
    .output();
  if (!out.success) {
    throw new Error(`Cannot run ${argv.join(" ")}: ${new TextDecoder().decode(out.stderr).trim()}`);
  }
  return new TextDecoder().decode(out.stdout);
}

/**
 * The shared libraries (and the loader) a dynamically linked executable needs, from `ldd`.
 *
 * @param exe the executable
 * @returns absolute paths as `ldd` names them (the loader included); empty for a static one
 */
export async function sharedLibraries(exe: string): Promise<string[]> {
  const out = await new Deno.Command("ldd", { args: [exe], stdout: "piped", stderr: "piped" })
    .output();
  const text = new TextDecoder().decode(out.stdout);
  const libs = new Set<string>();
  for (const line of text.split("\n")) {
    const m = /=>\s+(\/\S+)/.exec(line) ?? /^\s*(\/\S+)\s+\(/.exec(line);
    if (m) libs.add(m[1]!);
  }
  return [...libs];
}

/**
 * An executable and the shared libraries it links (each at the path `ldd` names), as image files.
 *
 * @param bin the executable on this machine
 * @param dest its path in the image
 * @returns the files
 */
export async function withLibraries(bin: string, dest: string): Promise<ImageFile[]> {
  const libs = await sharedLibraries(bin);
  return [
    { src: bin, dest, mode: 0o755 },
    ...libs.map((lib) => ({ src: lib, dest: lib, mode: 0o755 })),
  ];
}

/**
 * Writes an OCI image layout tarball (`oci-layout`, `index.json`, `blobs/sha256/...`) holding one
 * image with one uncompressed layer. The layer is tarred with fixed owners and mtimes.
 *
 * @param spec the image
 * @param out path of the tarball to write
 * @returns the manifest digest (`sha256:...`)
 * @throws {Error} when a file is missing or tar fails
 */
export async function buildOciImage(spec: ImageSpec, out: string): Promise<string> {
  const work = await mkdtemp(join(dirname(out), ".image-"));
  try {
    const root = join(work, "rootfs");
    const layout = join(work, "layout");
    const blobs = join(layout, "blobs", "sha256");
    await mkdir(root, { recursive: true });
    await mkdir(blobs, { recursive: true });
    for (const [dir, mode] of Object.entries(spec.dirs ?? {})) {
      await mkdir(join(root, dir), { recursive: true });
      await Deno.chmod(join(root, dir), mode);
    }
    for (const f of spec.files) {
      const dest = join(root, f.dest);
      await mkdir(dirname(dest), { recursive: true });
      await copyFile(f.src, dest); // follows symlinks: the library's real bytes at ldd's path
      await Deno.chmod(dest, f.mode ?? 0o755);
    }
    for (const [path, content] of Object.entries(spec.text ?? {})) {
      await mkdir(dirname(join(root, path)), { recursive: true });
      await writeFile(join(root, path), content, { mode: 0o644 });
    }
    const layerTmp = join(blobs, "layer.tmp");
    await run([
      "tar",
      "--sort=name",
      "--numeric-owner",
      "--owner=0",
      "--group=0",
      "--mtime=@0",
      "-C",
      root,
      "-cf",
      layerTmp,
      ".",
    ]);
    const layerDigest = await sha256File(layerTmp);
    const layerSize = (await stat(layerTmp)).size;
    await rename(layerTmp, join(blobs, layerDigest));
    const blob = async (obj: unknown) => {
      const bytes = new TextEncoder().encode(JSON.stringify(obj));
      const digest = createHash("sha256").update(bytes).digest("hex");
      await writeFile(join(blobs, digest), bytes);
      return { digest: `sha256:${digest}`, size: bytes.length };
    };
    const config = await blob({
      architecture: "amd64",
      os: "linux",
      created: "1970-01-01T00:00:00Z",
      config: spec.config,
      rootfs: { type: "layers", diff_ids: [`sha256:${layerDigest}`] },
      history: [{ created: "1970-01-01T00:00:00Z", created_by: "aicr tests/realnode/images.ts" }],
    });
    const manifest = await blob({
      schemaVersion: 2,
      mediaType: "application/vnd.oci.image.manifest.v1+json",
      config: { mediaType: "application/vnd.oci.image.config.v1+json", ...config },
      layers: [{
        mediaType: "application/vnd.oci.image.layer.v1.tar",
        digest: `sha256:${layerDigest}`,
        size: layerSize,
      }],
    });
    const tag = spec.ref.slice(spec.ref.lastIndexOf(":") + 1);
    await writeFile(join(layout, "oci-layout"), JSON.stringify({ imageLayoutVersion: "1.0.0" }));
    await writeFile(
      join(layout, "index.json"),
      JSON.stringify({
        schemaVersion: 2,
        mediaType: "application/vnd.oci.image.index.v1+json",
        manifests: [{
          mediaType: "application/vnd.oci.image.manifest.v1+json",
          ...manifest,
          platform: { architecture: "amd64", os: "linux" },
          annotations: {
            "io.containerd.image.name": spec.ref,
            "org.opencontainers.image.ref.name": tag,
          },
        }],
      }),
    );
    await run(["tar", "--sort=name", "--owner=0", "--group=0", "-C", layout, "-cf", out, "."]);
    return manifest.digest;
  } finally {
    await rm(work, { recursive: true, force: true });
  }
}

/**
 * The sandbox image: the static `pause` built with the control plane.
 *
 * @param pauseBin the pause binary
 * @param ref its reference
 * @returns the image spec
 */
export function pauseImageSpec(pauseBin: string, ref: string): ImageSpec {
  return {
    ref,
    files: [{ src: pauseBin, dest: "/pause", mode: 0o755 }],
    config: { User: "65535:65535", Entrypoint: ["/pause"], WorkingDir: "/" },
  };
}

/**
 * A minimal image whose `/bin/true` is this machine's (with the libraries it links): what the
 * benchmarks' floor Job runs, like the stand-in's `busybox true`.
 *
 * @param ref its reference
 * @returns the image spec
 */
export async function trueImageSpec(ref: string): Promise<ImageSpec> {
  const bin = ["/usr/bin/true", "/bin/true"].find((p) => {
    try {
      return Deno.statSync(p).isFile;
    } catch {
      return false;
    }
  }) ?? "/bin/true";
  return {
    ref,
    files: await withLibraries(bin, "/bin/true"),
    config: { User: "65534:65534", Entrypoint: ["/bin/true"], WorkingDir: "/" },
  };
}
