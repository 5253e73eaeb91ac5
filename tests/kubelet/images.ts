/**
 * The images the kubelet stand-in can "pull": only those the test world publishes, each with the
 * executable it runs per node architecture. A reference it does not know fails to pull, as on a
 * real node (`ErrImagePull`, then `ImagePullBackOff`), and so does a known image on a node of an
 * architecture it lacks ("no match for platform in manifest").
 *
 * - this build's default image (`version.ts` `releaseImage` of package.json's version) and the
 *   test world's own name for the build under test (`aicr:<any tag>`): the built binary,
 *   `dist/aicr` on amd64 nodes and `dist/aicr-linux-arm64` on arm64 nodes, run under qemu-user
 *   (`scripts/node_base.ts`) there, as a real arm64 node runs the arm64 image; a binary that is
 *   another build than `dist/aicr` (left from an earlier commit: `scripts/build_record.ts`) is
 *   refused, naming the rebuild, rather than run as a daemon that answers as another build;
 * - NVIDIA's Go aicr (`ghcr.io/nvidia/aicr:v0.11.1`): the test world's stand-in for it
 *   (`notaicr.ts`), amd64 only;
 * - host userland images (`busybox`, `alpine`, ...): the host's own commands;
 * - extra entries from the caller and `$AICR_KUBELET_IMAGES` (JSON): an exact reference or a
 *   repository (without tag or digest) to an executable (run on any node) or `"host"`.
 *
 * @module
 */
import { existsSync } from "node:fs";
import { basename } from "node:path";
import type { Arch, Emulator } from "../../scripts/node_base.ts";

/** How an image runs here: an executable (maybe under an emulator), or the host's userland. */
export type ImageTarget =
  | { kind: "exe"; path: string; emulator?: Emulator }
  | { kind: "host" };

/** One image the test world publishes. */
export type ImageEntry =
  | {
    kind: "exe";
    platforms: Partial<Record<Arch, string>>;
    anyArch?: boolean;
    /** Why a platform's executable cannot be pulled now (checked at each pull), if it cannot. */
    refuse?: (path: string) => string | undefined;
  }
  | { kind: "host" };

/** The outcome of a pull: what to run, or the pull error's message. */
export type PullResult = { target: ImageTarget } | { error: string };

/** Images the host's userland stands in for (matched by the repository's last element). */
export const HOST_IMAGES: readonly string[] = [
  "busybox",
  "alpine",
  "debian",
  "ubuntu",
  "shell",
  "bash",
];

/** An image reference's repository: without tag or digest. */
export function imageRepository(image: string): string {
  const noDigest = image.split("@")[0] ?? image;
  const slash = noDigest.lastIndexOf("/");
  const colon = noDigest.lastIndexOf(":");
  return colon > slash ? noDigest.slice(0, colon) : noDigest;
}

/** What the test world publishes. */
export interface CatalogOptions {
  /** This build's default image reference. */
  defaultImage: string;
  /** The binary per architecture (an absent or missing file: the image lacks that platform). */
  aicr: Partial<Record<Arch, string>>;
  /**
   * Why one of `aicr`'s binaries is not the build under test (`scripts/build_record.ts`): it is
   * then refused, as the image under test must be one build on every platform.
   */
  otherBuild?: (path: string) => string | undefined;
  /** The stand-in for NVIDIA's Go aicr, and its reference. */
  notAicr?: { image: string; path: string };
  /** Extra entries: reference or repository to an executable or `"host"`. */
  extra?: Record<string, string>;
}

/**
 * The test world's images, by exact reference or repository.
 *
 * @param options what it publishes
 * @returns the catalog
 */
export function testWorldImages(options: CatalogOptions): Map<string, ImageEntry> {
  const catalog = new Map<string, ImageEntry>();
  const aicr: ImageEntry = {
    kind: "exe",
    platforms: options.aicr,
    ...(options.otherBuild ? { refuse: options.otherBuild } : {}),
  };
  catalog.set(options.defaultImage, aicr);
  // The test world's own name for the build under test (`aicr:dev`): a repository with no
  // registry, which no real registry serves.
  catalog.set("aicr", aicr);
  if (options.notAicr) {
    catalog.set(options.notAicr.image, { kind: "exe", platforms: { amd64: options.notAicr.path } });
  }
  for (const [key, value] of Object.entries(options.extra ?? {})) {
    catalog.set(
      key,
      value === "host"
        ? { kind: "host" }
        : { kind: "exe", platforms: { amd64: value }, anyArch: true },
    );
  }
  return catalog;
}

/**
 * Pulls an image for a node: the catalog entry of its exact reference, else of its repository,
 * else (host images only) of the repository's last element.
 *
 * @param catalog the test world's images
 * @param image the pod's image reference
 * @param arch the node's architecture
 * @param emulatorFor how to run another architecture's executable here
 * @returns what to run, or the pull error
 */
export function pullImage(
  catalog: Map<string, ImageEntry>,
  image: string,
  arch: string,
  emulatorFor: (arch: Arch) => Emulator | undefined,
): PullResult {
  const repository = imageRepository(image);
  const entry = catalog.get(image) ?? catalog.get(repository) ??
    (HOST_IMAGES.includes(basename(repository)) ? { kind: "host" as const } : undefined);
  const failed = (why: string) => ({
    error:
      `Failed to pull image "${image}": rpc error: code = NotFound desc = failed to pull and unpack image "${image}": ${why}`,
  });
  if (!entry) return failed(`failed to resolve reference "${image}": ${image}: not found`);
  if (entry.kind === "host") return { target: { kind: "host" } };
  const path = entry.anyArch ? entry.platforms.amd64 : entry.platforms[arch as Arch];
  if (!path || !existsSync(path)) {
    return failed(`no match for platform in manifest (linux/${arch}): not found`);
  }
  const refused = entry.refuse?.(path);
  if (refused !== undefined) return failed(refused);
  let emulator: Emulator | undefined;
  try {
    emulator = entry.anyArch ? undefined : emulatorFor(arch as Arch);
  } catch (error) {
    return failed(`cannot run linux/${arch} here: ${(error as Error).message}`);
  }
  return { target: { kind: "exe", path, ...(emulator ? { emulator } : {}) } };
}
