/**
 * Build information: the version every role reports and stamps on what it writes.
 * Release builds inject `globalThis.__AICR_BUILD__` (esbuild `define`, or a generated
 * module for `deno compile`); a run from source reports the package version plus `-dev`.
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
}

declare global {
  var __AICR_BUILD__: BuildInfo | undefined;
}

/**
 * The build information of this binary.
 *
 * @returns version, commit and backend
 */
export function buildInfo(): BuildInfo {
  const injected = globalThis.__AICR_BUILD__;
  if (injected) return injected;
  return { version: `${pkg.version}-dev`, commit: "unknown", backend: "source" };
}

/**
 * The default agent image for a version: `ghcr.io/nvidia/aicr:v<version>`, or
 * `:latest` for dev and `-next` builds.
 *
 * @param version the CLI version
 * @returns the image reference
 */
export function defaultImage(version: string): string {
  const dev = version === "dev" || version.includes("-dev") || version.includes("-next");
  return `ghcr.io/nvidia/aicr:${dev ? "latest" : `v${version.replace(/^v/, "")}`}`;
}
