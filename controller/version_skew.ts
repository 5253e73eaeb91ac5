/**
 * Version skew between this CLI and the daemons it talks to: the version an image's tag says,
 * and the one warning `fetch` and `status` give when the daemons run another version.
 *
 * @module
 */
import type { Logger } from "../log.ts";

/**
 * The version an image reference's tag says: `ghcr.io/aicr-run/aicr:0.2.0` is `0.2.0`, `v0.2.0`
 * too; undefined for a digest only, `latest` or no tag.
 *
 * @param image the reference
 * @returns the version
 */
export function imageVersion(image: string | undefined): string | undefined {
  if (!image) return undefined;
  const name = image.split("@")[0] ?? "";
  const last = name.slice(name.lastIndexOf("/") + 1);
  const colon = last.lastIndexOf(":");
  if (colon < 0) return undefined;
  const tag = last.slice(colon + 1).replace(/^v(?=\d)/, "");
  return /^\d+\.\d+/.test(tag) ? tag : undefined;
}

/**
 * Says, once, that the daemons run another version than this CLI, and how to upgrade.
 *
 * @param log the logger
 * @param versions the other versions seen
 * @param cliVersion this CLI's version
 * @param namespace the daemon's namespace, for the remedy
 */
export function warnVersionSkew(
  log: Logger,
  versions: readonly string[],
  cliVersion: string,
  namespace?: string,
): void {
  if (versions.length === 0) return;
  log.warn("the daemons run another version than this CLI", {
    daemons: versions.join(","),
    cli: cliVersion,
    remedy: `aicr daemonset upgrade${namespace ? ` -n ${namespace}` : ""}`,
  });
}
