/**
 * Release artifacts of this tree in `dist/release/`: the binary built by `scripts/build.ts` under
 * its release name `aicr-<version>-linux-amd64`, `SHA256SUMS` (the `sha256sum -c` format),
 * `build-info.json` (version, commit, backend and why, size, digest, image tag) and `image/aicr`
 * (a hard link: the image's whole build context). It then prints the
 * commands that build and push the agent image from `Containerfile` under the tag the CLI deploys.
 * Nothing is uploaded and no image is built here.
 *
 * ```sh
 * deno run -A scripts/release.ts                       # build (node-sea) and stage
 * deno run -A scripts/release.ts --backend node-sea
 * ```
 *
 * @module
 */
import { copyFile, link, mkdir, rm, writeFile } from "node:fs/promises";
import { join, relative } from "node:path";
import process from "node:process";
import { parseArgs } from "node:util";
import { build, REPO_ROOT } from "./build.ts";
import type { Backend } from "./build.ts";
import { imageTag } from "./image_tag.ts";

/** What {@link release} staged. */
export interface Release {
  dir: string;
  binary: string;
  /** The image tag. */
  image: string;
  /** The image's build context: a folder holding only `aicr`. */
  context: string;
}

/**
 * Builds and stages the release artifacts.
 *
 * @param options the build backend
 * @returns the staged folder, binary and image tag
 * @throws {Error} when the build fails
 */
export async function release(options: { backend?: Backend } = {}): Promise<Release> {
  const built = await build(options.backend ? { backend: options.backend } : {});
  const dir = join(REPO_ROOT, "dist", "release");
  await rm(dir, { recursive: true, force: true });
  await mkdir(dir, { recursive: true });
  const name = `aicr-${built.info.version}-linux-amd64`;
  const binary = join(dir, name);
  await copyFile(built.out, binary);
  // The image's build context: only the binary, under the name Containerfile copies.
  await mkdir(join(dir, "image"));
  await link(binary, join(dir, "image", "aicr"));
  const image = imageTag();
  await writeFile(join(dir, "SHA256SUMS"), `${built.sha256}  ${name}\n`);
  await writeFile(
    join(dir, "build-info.json"),
    JSON.stringify(
      {
        ...built.info,
        reason: built.reason,
        file: name,
        bytes: built.bytes,
        sha256: built.sha256,
        image,
      },
      null,
      2,
    ) + "\n",
  );
  return { dir, binary, image, context: join(dir, "image") };
}

if (import.meta.main) {
  const { values } = parseArgs({
    args: process.argv.slice(2),
    options: { backend: { type: "string", default: "node-sea" } },
  });
  const backend = values.backend;
  if (backend !== "node-sea" && backend !== "deno-compile") {
    process.stderr.write(
      `Cannot release as '--backend' must be 'node-sea' (the backend the tests run) or 'deno-compile': current value is '${backend}'\n`,
    );
    process.exitCode = 2;
  } else {
    try {
      const staged = await release({ backend });
      const version = imageTag({ version: true });
      process.stdout.write(
        [
          `aicr release: staged ${staged.dir} (binary, SHA256SUMS, build-info.json)`,
          `  image: podman build -f Containerfile --build-arg VERSION=${version} -t ${staged.image} ${
            relative(process.cwd(), staged.context) || "."
          }`,
          `         podman push ${staged.image}`,
          "",
        ].join("\n"),
      );
    } catch (error) {
      process.stderr.write(`aicr release: ${(error as Error).message}\n`);
      process.exitCode = 1;
    }
  }
}
