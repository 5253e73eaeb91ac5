/**
 * The agent image of a run (`aicr snapshot`, `aicr daemonset install|render`): `--image` (or
 * `AICR_IMAGE`), else this build's own published image (`version.ts` `defaultImage`), and the
 * platforms it has, from which the pods' `kubernetes.io/arch` affinity is made.
 *
 * Platforms: this build's image is a release's, made for every platform a release builds
 * (`version.ts` `RELEASE_PLATFORMS`). An image named with `--image` is taken for a copy of it (a
 * mirror, or `aicr image push` from a release folder: both platforms) unless `--image-platforms`
 * (or `AICR_IMAGE_PLATFORMS`) says which it has, e.g. `linux/amd64` for the image `aicr image push`
 * makes from one binary alone: then the pods never land on a node of another architecture, and
 * the run says which nodes it left out.
 *
 * @module
 */
import { Option } from "commander";
import type { Command } from "commander";
import { UsageError } from "../errors.ts";
import { buildInfo, defaultImage, isSourceBuild, RELEASE_PLATFORMS } from "../version.ts";
import type { BuildInfo } from "../version.ts";
import type { Logger } from "../log.ts";

/** What to do when a build has no image of its own, or an image turns out not to be this build. */
export const NO_IMAGE_FIX =
  "put this binary's image in a registry the cluster pulls from ('aicr image push REGISTRY/REPO') and pass the '--image REPO@sha256:...' it prints (or set AICR_IMAGE)";

/** The image a run deploys and the platforms it has. */
export interface AgentImage {
  /** The image reference. */
  image: string;
  /** Its platforms, e.g. `linux/amd64`. */
  platforms: string[];
  /** Whether it was named (`--image`) rather than this build's own. */
  named: boolean;
  /** Where the platforms come from, for the run's lines. */
  platformsFrom: string;
  /** A warning to log: a source build deploys a release's image, not its own tree. */
  warning?: string;
}

/**
 * Adds `--image-platforms` to a verb that deploys the agent image.
 *
 * @param command the verb
 * @returns the same verb
 */
export function addImagePlatformsFlag(command: Command): Command {
  return command.addOption(
    new Option(
      "--image-platforms <list>",
      "platforms the image has, comma-separated (default: a release image's, linux/amd64,linux/arm64); pods land only on nodes of these architectures",
    ).env("AICR_IMAGE_PLATFORMS"),
  );
}

/**
 * Reads `--image-platforms`: `os/arch` entries, comma-separated, Linux only.
 *
 * @param value the flag's value
 * @returns the platforms, deduplicated, in the order given
 * @throws {UsageError} on an entry that is not `linux/<arch>`
 */
export function parseImagePlatforms(value: string): string[] {
  const platforms = value.split(",").map((p) => p.trim()).filter((p) => p !== "");
  if (platforms.length === 0) {
    throw new UsageError(
      `Cannot use '--image-platforms' as it names no platform: give one or more, e.g. 'linux/amd64,linux/arm64'`,
    );
  }
  for (const platform of platforms) {
    if (!/^linux\/[a-z0-9]+(\/[a-z0-9]+)?$/.test(platform)) {
      throw new UsageError(
        `Cannot use '--image-platforms' as '${platform}' is not a Linux platform such as 'linux/amd64' or 'linux/arm64': current value is '${value}'`,
      );
    }
  }
  return [...new Set(platforms)];
}

/**
 * The CPU architectures of some platforms, as the `kubernetes.io/arch` label names them.
 *
 * @param platforms e.g. `linux/arm64/v8`
 * @returns e.g. `arm64`
 */
export function platformArchitectures(platforms: readonly string[]): string[] {
  return [...new Set(platforms.map((p) => p.split("/")[1] ?? ""))];
}

/**
 * Chooses the run's image and its platforms.
 *
 * @param flags `--image` and `--image-platforms`
 * @param info this build. @default buildInfo()
 * @returns the image and its platforms
 * @throws {UsageError} on bad platforms
 */
export function chooseAgentImage(
  flags: { image?: string | undefined; imagePlatforms?: string | undefined },
  info: BuildInfo = buildInfo(),
): AgentImage {
  const given = flags.imagePlatforms === undefined
    ? undefined
    : parseImagePlatforms(flags.imagePlatforms);
  if (flags.image !== undefined) {
    return {
      image: flags.image,
      platforms: given ?? [...RELEASE_PLATFORMS],
      named: true,
      platformsFrom: given ? "--image-platforms" : "assumed for --image: a release image's",
    };
  }
  const image = defaultImage(info);
  return {
    image,
    platforms: given ?? [...RELEASE_PLATFORMS],
    named: false,
    platformsFrom: given ? "--image-platforms" : "this build's release image",
    ...(isSourceBuild(info)
      ? {
        warning:
          `this is a source build of aicr (${info.version}): no image is published for it, so the agent is ${image}, the release it is a development of, not this tree; to run this tree, build the binary ('deno task build'), then ${NO_IMAGE_FIX}`,
      }
      : {}),
  };
}

/**
 * Logs the image choice's warning, if it has one (a source build deploying a release's image).
 * Bad flags are left to the verb's own checks, which report them in their order.
 *
 * @param log the verb's logger
 * @param flags `--image` and `--image-platforms`
 */
export function warnAboutImage(
  log: Logger,
  flags: { image?: string | undefined; imagePlatforms?: string | undefined },
): void {
  let warning: string | undefined;
  try {
    warning = chooseAgentImage(flags).warning;
  } catch {
    return;
  }
  if (warning) log.warn(warning);
}
