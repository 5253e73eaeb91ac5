/**
 * The aicr image, assembled from binaries: per platform the base layer ({@link BaseLayer}) and a
 * layer holding the binary at `/usr/local/bin/aicr`, the config the manifests assume (user
 * 65534:65534, the `PATH` and the NVIDIA runtime's environment, the entrypoint), the manifest, and
 * one index over every platform. Everything is deterministic: the same binaries and pins give the
 * same index digest, here, in the release, and in an operator's `aicr image push`.
 *
 * The binary's layer (about 40 MiB compressed) is written once per binary into the cache folder
 * (`layers/<sha256 of the binary>...`) and read from there on later runs.
 *
 * @module
 */
import { createReadStream } from "node:fs";
import { mkdir, mkdtemp, open, readFile, rename, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import process from "node:process";
import { Buffer } from "node:buffer";
import { InterruptedError, ToolError, UsageError } from "../errors.ts";
import { IMAGE_REPOSITORY, releaseImage, releaseVersion } from "../version.ts";
import type { BaseArchitecture } from "./base_packages.ts";
import type { BaseLayer } from "./base.ts";
import { createHasher, type Digest, hashing, isDigest } from "./digest.ts";
import { elfArchitecture } from "./elf.ts";
import { gzipStream, LAYER_GZIP_LEVEL } from "./gzip.ts";
import {
  type Descriptor,
  type EncodedDocument,
  encodeDocument,
  imageConfig,
  imageIndex,
  imageManifest,
  MEDIA_TYPES,
  type Platform,
  platformName,
  type RunConfig,
} from "./oci.ts";
import { type TarEntry, tarStream } from "./tar.ts";

/** The layout every Job and DaemonSet aicr renders assumes of its image. */
export const IMAGE_LAYOUT = {
  /** Where the binary is; the pods run `aicr`, found on PATH. */
  binary: "/usr/local/bin/aicr",
  /** The restricted pod's user; the privileged pod sets 0 itself. */
  user: "65534:65534",
  env: [
    "PATH=/usr/local/bin:/usr/bin:/bin",
    // The NVIDIA container runtime injects nvidia-smi (and NVML) when these ask for it.
    "NVIDIA_VISIBLE_DEVICES=all",
    "NVIDIA_DRIVER_CAPABILITIES=utility",
  ],
  /** Every layer's and document's time: the epoch, so builds are reproducible. */
  created: "1970-01-01T00:00:00Z",
} as const;

/** What a binary says about its build (the `version.ts` build information sealed into it). */
export interface BinaryBuild {
  version: string;
  commit: string;
  backend: string;
  /** The repository its image is published to (absent in builds before the setting). */
  imageRepository?: string;
}

/** One binary of the image, for one platform. */
export interface ImageBinary {
  platform: Platform;
  /** Path of the binary. */
  path: string;
}

/** A blob of the image: its descriptor and how to read it. */
export interface Blob {
  descriptor: Descriptor;
  /** Reads the blob's bytes. */
  read(): AsyncIterable<Uint8Array>;
}

/** One platform's image. */
export interface PlatformImage {
  platform: Platform;
  config: EncodedDocument;
  manifest: EncodedDocument;
  /** Bottom first: the base, then the binary. */
  layers: Blob[];
  /** The base's Debian packages. */
  base: BaseLayer;
  /** The binary's size and SHA256. */
  binary: { path: string; size: number; sha256: string };
}

/** An assembled image. */
export interface AssembledImage {
  build: BinaryBuild;
  platforms: PlatformImage[];
  index: EncodedDocument;
  /** Every blob once, layers and configs, in the order a push uploads them. */
  blobs: Blob[];
  /** Removes temporary files (when the cache folder could not be written). */
  dispose(): Promise<void>;
}

const BUILD_REGEXP =
  /\{\s*"?version"?\s*:\s*"([^"]{1,64})"\s*,\s*"?commit"?\s*:\s*"([^"]{1,64})"\s*,\s*"?backend"?\s*:\s*"([^"]{1,32})"\s*(?:,\s*"?imageRepository"?\s*:\s*"([^"]{1,255})"\s*)?\}/;

/**
 * Reads a binary's platform (ELF machine) and the build information sealed into it.
 *
 * @param path the binary
 * @returns its architecture and build, each undefined when not found
 * @throws {UsageError} when the file cannot be read
 */
export async function inspectBinary(
  path: string,
): Promise<{ architecture: string | undefined; build: BinaryBuild | undefined }> {
  let handle;
  try {
    handle = await open(path, "r");
  } catch (error) {
    throw new UsageError(`Cannot read the binary '${path}': ${(error as Error).message}`, {
      cause: error,
    });
  }
  try {
    const header = new Uint8Array(64);
    await handle.read(header, 0, 64, 0);
    const architecture = elfArchitecture(header);
    // The build information is a small object literal in the sealed bundle: scan for it in
    // overlapping windows instead of holding the whole file as text.
    const window = 8 << 20;
    const overlap = 512;
    const buffer = Buffer.alloc(window + overlap);
    const marker = Buffer.from("commit");
    let position = 0;
    while (true) {
      const { bytesRead } = await handle.read(buffer, 0, buffer.length, position);
      if (bytesRead === 0) break;
      const view = buffer.subarray(0, bytesRead);
      for (let at = view.indexOf(marker); at >= 0; at = view.indexOf(marker, at + 1)) {
        const text = view.subarray(Math.max(0, at - 64), at + 420).toString("latin1");
        const match = BUILD_REGEXP.exec(text);
        if (match) {
          const build: BinaryBuild = { version: match[1]!, commit: match[2]!, backend: match[3]! };
          if (match[4]) build.imageRepository = match[4];
          return { architecture, build };
        }
      }
      if (bytesRead < buffer.length) break;
      position += window;
    }
    return { architecture, build: undefined };
  } finally {
    await handle.close();
  }
}

async function sha256File(path: string): Promise<{ sha256: string; size: number }> {
  const hasher = createHasher();
  for await (const chunk of createReadStream(path, { highWaterMark: 1 << 20 })) {
    hasher.update(chunk as Uint8Array);
  }
  return { sha256: hasher.digest().slice("sha256:".length), size: hasher.size };
}

function fileBlob(descriptor: Descriptor, path: string): Blob {
  return {
    descriptor,
    read: () => createReadStream(path, { highWaterMark: 1 << 20 }) as AsyncIterable<Uint8Array>,
  };
}

function bytesBlob(descriptor: Descriptor, bytes: Uint8Array): Blob {
  return {
    descriptor,
    async *read() {
      yield bytes;
    },
  };
}

/** The binary layer's entries: its folders and the file. */
function binaryEntries(
  path: string,
  size: number,
): { entry: TarEntry; data?: () => AsyncIterable<Uint8Array> }[] {
  const dirs = ["usr", "usr/local", "usr/local/bin"];
  return [
    ...dirs.map((dir) => ({ entry: { path: dir, type: "dir" as const, mode: 0o755 } })),
    {
      entry: { path: IMAGE_LAYOUT.binary.slice(1), type: "file" as const, mode: 0o755, size },
      data: () => createReadStream(path, { highWaterMark: 1 << 20 }) as AsyncIterable<Uint8Array>,
    },
  ];
}

interface LayerRecord {
  digest: Digest;
  diffId: Digest;
  size: number;
}

/**
 * The binary's layer from the cache, or written into it: tar → gzip, hashed on the way.
 */
async function binaryLayer(
  binary: { path: string; size: number; sha256: string },
  dir: string,
  signal: AbortSignal | undefined,
): Promise<{ blob: Blob; diffId: Digest }> {
  const stem = join(dir, `${binary.sha256}.gz${LAYER_GZIP_LEVEL}`);
  const describe = (record: LayerRecord) => ({
    blob: fileBlob(
      { mediaType: MEDIA_TYPES.layerGzip, digest: record.digest, size: record.size },
      `${stem}.tar.gz`,
    ),
    diffId: record.diffId,
  });
  try {
    const record = JSON.parse(await readFile(`${stem}.json`, "utf8")) as LayerRecord;
    const found = await stat(`${stem}.tar.gz`);
    if (isDigest(record.digest) && isDigest(record.diffId) && found.size === record.size) {
      return describe(record);
    }
  } catch {
    // not cached yet
  }
  const diff = createHasher();
  const blob = createHasher();
  const temp = `${stem}.${process.pid}.tmp`;
  const out = await open(temp, "w");
  try {
    const tar = hashing(tarStream(binaryEntries(binary.path, binary.size)), diff);
    for await (const chunk of hashing(gzipStream(tar), blob)) {
      // Compressing a binary takes seconds: a signal ends it between two chunks, nothing cached.
      if (signal?.aborted) {
        throw new InterruptedError(
          `Cannot build the image layer of '${binary.path}': interrupted (${
            String((signal.reason as Error)?.message ?? signal.reason)
          }); nothing was written`,
        );
      }
      await out.write(chunk);
    }
    await out.close();
  } catch (error) {
    await out.close().catch(() => {});
    await rm(temp, { force: true });
    throw error;
  }
  const record: LayerRecord = { digest: blob.digest(), diffId: diff.digest(), size: blob.size };
  await rename(temp, `${stem}.tar.gz`);
  await writeFile(`${stem}.json`, JSON.stringify(record) + "\n");
  return describe(record);
}

/** Options of {@link assembleImage}. */
export interface AssembleOptions {
  /** One binary per platform, in index order. */
  binaries: readonly ImageBinary[];
  /** The base layer of an architecture. */
  base: (architecture: BaseArchitecture) => Promise<BaseLayer>;
  /** Folder for the binaries' compressed layers. */
  cacheDir: string;
  /** Progress lines. @default none */
  log?: (line: string) => void;
  /** Ends the layer's compression (SIGINT/SIGTERM). */
  signal?: AbortSignal;
}

/** A layers folder that can be written: the cache's, else a temporary one removed by dispose. */
async function layersDir(cacheDir: string): Promise<{ dir: string; dispose(): Promise<void> }> {
  const dir = join(cacheDir, "layers");
  try {
    await mkdir(dir, { recursive: true });
    const probe = join(dir, `.probe-${process.pid}`);
    await writeFile(probe, "");
    await rm(probe);
    return { dir, dispose: async () => {} };
  } catch {
    const temp = await mkdtemp(join(tmpdir(), "aicr-layers-"));
    return { dir: temp, dispose: () => rm(temp, { recursive: true, force: true }) };
  }
}

/**
 * The reference an image of a build is known by: its release setting's repository, tagged with its
 * version (`version.ts` `releaseImage`).
 *
 * @param build the build
 * @returns e.g. `ghcr.io/aicr-run/aicr:0.2.0`
 */
export function buildReference(build: BinaryBuild): string {
  return releaseImage(releaseVersion(build.version), build.imageRepository ?? IMAGE_REPOSITORY);
}

/**
 * Checks the binaries: one per platform, each an ELF of its platform's architecture carrying aicr
 * build information, all of one build.
 *
 * @param binaries the binaries
 * @returns the build they share
 * @throws {UsageError} naming the binary that does not fit
 */
export async function checkBinaries(binaries: readonly ImageBinary[]): Promise<BinaryBuild> {
  if (binaries.length === 0) throw new UsageError("Cannot build an image without a binary");
  const seen = new Set<string>();
  let shared: { build: BinaryBuild; path: string } | undefined;
  for (const { platform, path } of binaries) {
    const name = platformName(platform);
    if (seen.has(name)) {
      throw new UsageError(`Cannot build an image with two binaries for '${name}'`);
    }
    seen.add(name);
    const { architecture, build } = await inspectBinary(path);
    if (architecture !== platform.architecture) {
      throw new UsageError(
        `Cannot use '${path}' as the ${name} binary: it is ${
          architecture ? `an ELF for ${architecture}` : "not a 64-bit Linux ELF executable"
        }`,
      );
    }
    if (!build) {
      throw new UsageError(`Cannot use '${path}' as the ${name} binary: it is not an aicr build`);
    }
    if (
      shared && (shared.build.version !== build.version || shared.build.commit !== build.commit)
    ) {
      throw new UsageError(
        `Cannot build one image from two builds: '${path}' is aicr ${build.version} (commit ${build.commit}), '${shared.path}' is ${shared.build.version} (commit ${shared.build.commit})`,
      );
    }
    shared ??= { build, path };
  }
  return shared!.build;
}

function runConfig(build: BinaryBuild): RunConfig {
  return {
    User: IMAGE_LAYOUT.user,
    Env: [...IMAGE_LAYOUT.env],
    Entrypoint: [IMAGE_LAYOUT.binary],
    Cmd: ["--help"],
    WorkingDir: "/",
    Labels: {
      "org.opencontainers.image.title": "aicr",
      "org.opencontainers.image.description":
        "Capture, serve and compare what every GPU node really runs",
      "org.opencontainers.image.version": build.version,
      "org.opencontainers.image.revision": build.commit,
      "org.opencontainers.image.licenses": "Apache-2.0",
    },
  };
}

/**
 * Assembles the image of the binaries given, trusting them as they are (see
 * {@link checkBinaries} for the checks a user's input gets first).
 *
 * @param build the build the binaries are of (their labels)
 * @param options binaries, base layers, cache folder
 * @returns the image: index, per-platform documents, blobs
 * @throws {ToolError} when a base layer cannot be had or a layer cannot be written
 */
export async function assembleImage(
  build: BinaryBuild,
  options: AssembleOptions,
): Promise<AssembledImage> {
  const { binaries, log = () => {} } = options;
  const layers = await layersDir(options.cacheDir);
  try {
    const platforms: PlatformImage[] = [];
    for (const { platform, path } of binaries) {
      const base = await options.base(platform.architecture);
      const binary = { path, ...(await sha256File(path)) };
      log(`layer ${platformName(platform)}: ${path} (${(binary.size / 1048576).toFixed(1)} MiB)`);
      const layer = await binaryLayer(binary, layers.dir, options.signal);
      const history = [
        {
          created: IMAGE_LAYOUT.created,
          created_by: `aicr base: ${
            base.packages.map((p) => `${p.name} ${p.version}`).join(", ")
          } (Debian ${platform.architecture})`,
        },
        {
          created: IMAGE_LAYOUT.created,
          created_by: `aicr ${build.version} (commit ${build.commit}) at ${IMAGE_LAYOUT.binary}`,
        },
      ];
      const config = encodeDocument(
        imageConfig(platform, {
          run: runConfig(build),
          diffIds: [base.diffId, layer.diffId],
          history,
          created: IMAGE_LAYOUT.created,
        }),
        MEDIA_TYPES.config,
      );
      const baseBlob = bytesBlob(
        { mediaType: MEDIA_TYPES.layerGzip, digest: base.digest, size: base.bytes.length },
        base.bytes,
      );
      const manifest = encodeDocument(
        imageManifest(config.descriptor, [baseBlob.descriptor, layer.blob.descriptor]),
        MEDIA_TYPES.manifest,
        { platform },
      );
      platforms.push({ platform, config, manifest, layers: [baseBlob, layer.blob], base, binary });
    }
    const index = encodeDocument(
      imageIndex(platforms.map((p) => p.manifest.descriptor), {
        "org.opencontainers.image.title": "aicr",
        "org.opencontainers.image.version": build.version,
        "org.opencontainers.image.revision": build.commit,
      }),
      MEDIA_TYPES.index,
    );
    const blobs = new Map<string, Blob>();
    for (const p of platforms) {
      for (const blob of [...p.layers, bytesBlob(p.config.descriptor, p.config.bytes)]) {
        if (!blobs.has(blob.descriptor.digest)) blobs.set(blob.descriptor.digest, blob);
      }
    }
    return { build, platforms, index, blobs: [...blobs.values()], dispose: layers.dispose };
  } catch (error) {
    await layers.dispose();
    if (error instanceof ToolError) throw error;
    throw new ToolError(`Cannot assemble the image: ${(error as Error).message}`, "internal", 500, {
      cause: error,
    });
  }
}
