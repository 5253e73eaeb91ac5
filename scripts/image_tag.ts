/**
 * Prints the agent image reference this version deploys by default:
 * `<package.json aicr.image>:<package.json version>` (`ghcr.io/aicr-run/aicr:0.1.0`), the
 * reference `aicr image save` names its archive by and `aicr image push` tags by default. It comes
 * from `version.ts` `releaseImage`, so the image and the CLI cannot disagree.
 *
 * ```sh
 * deno run -A scripts/image_tag.ts             # ghcr.io/aicr-run/aicr:0.1.0
 * deno run -A scripts/image_tag.ts --version   # 0.1.0
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
