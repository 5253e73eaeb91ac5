/**
 * Prints the agent image reference this version deploys by default, the tag to give the image
 * built from `Containerfile`: `<package.json aicr.image>:<package.json version>`
 * (`ghcr.io/aicr-run/aicr:0.1.0`). It comes from `version.ts` `releaseImage`, so the image and
 * the CLI cannot disagree.
 *
 * ```sh
 * podman build -f Containerfile -t "$(deno run -A scripts/image_tag.ts)" \
 *   --build-arg VERSION="$(deno run -A scripts/image_tag.ts --version)" dist/
 * ```
 *
 * @module
 */
import process from "node:process";
import pkg from "../package.json" with { type: "json" };
import { releaseImage } from "../version.ts";

/**
 * The image reference (or, with `version: true`, the bare version) of this tree.
 *
 * @param options `version: true` for the version without a leading `v`
 * @returns the text to print
 */
export function imageTag(options: { version?: boolean } = {}): string {
  const version = pkg.version.replace(/^v/, "");
  return options.version ? version : releaseImage(version);
}

if (import.meta.main) {
  process.stdout.write(imageTag({ version: process.argv.includes("--version") }) + "\n");
}
