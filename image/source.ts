/**
 * Which binaries an image is made of: the ones named per platform, those of a release folder
 * (`aicr-<version>-linux-<arch>`), and this executable for its own platform. Then the image
 * itself, assembled with the base layers this binary carries (or builds from the pins).
 *
 * @module
 */
import { readdirSync } from "node:fs";
import { join } from "node:path";
import { UsageError } from "../errors.ts";
import { type AssembledImage, assembleImage, checkBinaries, type ImageBinary } from "./assemble.ts";
import { baseLayer } from "./base.ts";
import { type Platform, platformName, PLATFORMS } from "./oci.ts";

/** Where an image's binaries come from. */
export interface ImageSource {
  /** Binaries named per platform (`--binary linux/arm64=PATH`). */
  binaries?: readonly ImageBinary[];
  /** A release folder holding `aicr-<version>-linux-<arch>` files. */
  releaseDir?: string;
  /** This executable and its platform, when it is a built aicr. */
  self?: ImageBinary;
  /** Cache folder (Debian packages, compressed layers). */
  cacheDir: string;
  /** Progress lines. */
  log?: (line: string) => void;
  /** Ends the image's assembly (SIGINT/SIGTERM): nothing is cached half-written. */
  signal?: AbortSignal;
}

/**
 * The cache folder: `AICR_CACHE_DIR`, else `$XDG_CACHE_HOME/aicr`, else `~/.cache/aicr`.
 *
 * @param env environment lookup
 * @returns the folder
 */
export function defaultCacheDir(env: (name: string) => string | undefined): string {
  return env("AICR_CACHE_DIR") ||
    `${env("XDG_CACHE_HOME") || `${env("HOME") || "/tmp"}/.cache`}/aicr`;
}

const RELEASE_FILE_REGEXP = /^aicr-.+-linux-(amd64|arm64)$/;

/**
 * The binaries of a release folder.
 *
 * @param dir the folder
 * @returns one binary per platform found
 * @throws {UsageError} when the folder cannot be read, holds none, or two for one platform
 */
export function releaseBinaries(dir: string): ImageBinary[] {
  let names: string[];
  try {
    names = readdirSync(dir).sort();
  } catch (error) {
    throw new UsageError(`Cannot read the release folder '${dir}': ${(error as Error).message}`, {
      cause: error,
    });
  }
  const found = new Map<string, ImageBinary>();
  for (const name of names) {
    const arch = RELEASE_FILE_REGEXP.exec(name)?.[1];
    if (!arch) continue;
    const platform = PLATFORMS[`linux/${arch}`]!;
    if (found.has(arch)) {
      throw new UsageError(
        `Cannot use the release folder '${dir}': it holds two linux/${arch} binaries ('${
          found.get(arch)!.path
        }', '${join(dir, name)}')`,
      );
    }
    found.set(arch, { platform, path: join(dir, name) });
  }
  if (found.size === 0) {
    throw new UsageError(
      `Cannot use the release folder '${dir}': it holds no aicr-<version>-linux-<arch> binary`,
    );
  }
  return [...found.values()];
}

/**
 * The binaries of an image, one per platform, in platform order (amd64, arm64): named ones win
 * over a release folder's, which win over this executable.
 *
 * @param source the sources
 * @returns the binaries
 * @throws {UsageError} when there is none
 */
export function resolveBinaries(source: ImageSource): ImageBinary[] {
  const byPlatform = new Map<string, ImageBinary>();
  const add = (binary: ImageBinary) => {
    const name = platformName(binary.platform);
    if (!byPlatform.has(name)) byPlatform.set(name, binary);
  };
  const named = new Set<string>();
  for (const binary of source.binaries ?? []) {
    const name = platformName(binary.platform);
    if (named.has(name)) {
      throw new UsageError(`Cannot build an image with two binaries for '${name}'`);
    }
    named.add(name);
    add(binary);
  }
  if (source.releaseDir) releaseBinaries(source.releaseDir).forEach(add);
  if (source.self) add(source.self);
  if (byPlatform.size === 0) {
    throw new UsageError((name) =>
      `Cannot build the image: no binary to put in it (this is not a built aicr); give one with ${
        name("binary")
      } linux/amd64=PATH or a release folder with ${name("from")}`
    );
  }
  return Object.keys(PLATFORMS).filter((p) => byPlatform.has(p)).map((p) => byPlatform.get(p)!);
}

/**
 * The platform this process runs on, if aicr builds for it.
 *
 * @param arch `process.arch`
 * @returns the platform
 */
export function platformOfProcess(arch: string): Platform | undefined {
  return arch === "x64"
    ? PLATFORMS["linux/amd64"]
    : arch === "arm64"
    ? PLATFORMS["linux/arm64"]
    : undefined;
}

/**
 * Resolves, checks and assembles the image.
 *
 * @param source where the binaries come from
 * @returns the image (dispose it when done)
 * @throws {UsageError} when a binary does not fit
 */
export async function imageFromSource(source: ImageSource): Promise<AssembledImage> {
  const binaries = resolveBinaries(source);
  const build = await checkBinaries(binaries);
  const options = { cacheDir: source.cacheDir, ...(source.log ? { log: source.log } : {}) };
  return await assembleImage(build, {
    binaries,
    cacheDir: source.cacheDir,
    base: (arch) => baseLayer(arch, options),
    ...(source.log ? { log: source.log } : {}),
    ...(source.signal ? { signal: source.signal } : {}),
  });
}
