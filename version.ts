/**
 * Build information: the version every role reports and stamps on what it writes, and the agent
 * image a build deploys by default. Release builds inject `globalThis.__AICR_BUILD__` (esbuild
 * `define`, or a generated module for `deno compile`); a run from source reports the package
 * version plus `-dev`.
 *
 * The image is one release setting, `aicr.image` in package.json: the repository this project
 * publishes its image to (`ghcr.io/aicr-run/aicr`; a fork or mirror changes it there, and the build
 * injects it as it does the version). The tag is the version exactly as `aicr version` prints it.
 *
 * @module
 */
import pkg from "./package.json" with { type: "json" };

/** What a build knows about itself. */
export interface BuildInfo {
  /** Version without a leading `v`, e.g. `0.1.0`. */
  version: string;
  /** Git commit the build came from, or `unknown`. */
  commit: string;
  /** `deno-compile`, `node-sea`, or `source` when run by `deno run`. */
  backend: string;
  /** The repository this build's image is published to (package.json `aicr.image`). */
  imageRepository: string;
}

declare global {
  var __AICR_BUILD__: BuildInfo | undefined;
}

/** The release setting: package.json `aicr.image`, the repository of this project's image. */
export const IMAGE_REPOSITORY: string = pkg.aicr.image;

/**
 * The platforms a release image of this project holds: a release builds the binary for both and
 * pushes one multi-arch image (`scripts/release.ts`).
 */
export const RELEASE_PLATFORMS: readonly string[] = ["linux/amd64", "linux/arm64"];

/**
 * The build information of this binary.
 *
 * @returns version, commit, backend and image repository
 */
export function buildInfo(): BuildInfo {
  const injected = globalThis.__AICR_BUILD__;
  if (injected) {
    return { ...injected, imageRepository: injected.imageRepository ?? IMAGE_REPOSITORY };
  }
  return {
    version: `${pkg.version}-dev`,
    commit: "unknown",
    backend: "source",
    imageRepository: IMAGE_REPOSITORY,
  };
}

/**
 * Whether a build is a run from source (or a `-dev` version): it has no published image.
 *
 * @param info the build
 * @returns true for a source run
 */
export function isSourceBuild(info: BuildInfo): boolean {
  return info.backend === "source" || /-dev\b/.test(info.version);
}

/**
 * The published image of a version: `<repository>:<version>`, the version exactly as
 * `aicr version` prints it (no leading `v`).
 *
 * @param version the version
 * @param repository the image repository. @default {@link IMAGE_REPOSITORY}
 * @returns the image reference
 */
export function releaseImage(version: string, repository: string = IMAGE_REPOSITORY): string {
  return `${repository}:${version.replace(/^v/, "")}`;
}

/**
 * The version a source build is a development of: `0.1.0` for `0.1.0-dev`.
 *
 * @param version the version
 * @returns it without the `-dev` suffix
 */
export function releaseVersion(version: string): string {
  return version.replace(/^v/, "").replace(/-dev$/, "");
}

/**
 * The agent image a build deploys by default: its own published image, {@link releaseImage} of
 * its version in its repository. A source run has no image of its own (none is published for a
 * `-dev` version): it deploys the release of the version it is a development of, and says so
 * (`cli/_image.ts`).
 *
 * @param info the build. @default this one
 * @returns the image reference
 */
export function defaultImage(info: BuildInfo = buildInfo()): string {
  return releaseImage(releaseVersion(info.version), info.imageRepository);
}
