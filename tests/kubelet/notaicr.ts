/**
 * Builds the test world's stand-in for NVIDIA's Go aicr (`notaicr/main.go`: its snapshot document,
 * its exit on `daemon`), once per source hash, into
 * `${AICR_NOTAICR_CACHE:-~/.cache/aicr/notaicr}/<hash>/aicr` (outside the repository, shared by
 * clones as the control plane is). Standard library only, `CGO_ENABLED=0`: a static binary that
 * also runs alone in an image. Go builds only the test world; aicr itself is TypeScript.
 *
 * @module
 */
import { createHash } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import { mkdir, rename, rm } from "node:fs/promises";
import { homedir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

/** The program's source folder. */
const SOURCE = join(dirname(fileURLToPath(import.meta.url)), "notaicr");

/** The image reference the test world gives NVIDIA's Go aicr: a real node would pull that program. */
export const NOT_AICR_IMAGE = "ghcr.io/nvidia/aicr:v0.11.1";

/**
 * The built program, building it first when its source changed.
 *
 * @returns the path of the static binary, named `aicr`
 * @throws {Error} when `go build` fails
 */
export async function ensureNotAicr(): Promise<string> {
  const hash = createHash("sha256")
    .update(readFileSync(join(SOURCE, "go.mod")))
    .update(readFileSync(join(SOURCE, "main.go")))
    .digest("hex")
    .slice(0, 16);
  const root = Deno.env.get("AICR_NOTAICR_CACHE") ??
    join(Deno.env.get("HOME") || homedir(), ".cache", "aicr", "notaicr");
  const bin = join(root, hash, "aicr");
  if (existsSync(bin)) return bin;
  const partial = `${bin}.${Deno.pid}.partial`;
  await mkdir(dirname(bin), { recursive: true });
  const go = Deno.env.get("GO") ??
    (existsSync("/usr/local/go/bin/go") ? "/usr/local/go/bin/go" : "go");
  const out = await new Deno.Command(go, {
    args: ["build", "-trimpath", "-ldflags=-s -w", "-o", partial, "."],
    cwd: SOURCE,
    env: { CGO_ENABLED: "0", GOTOOLCHAIN: "local", GOFLAGS: "-mod=mod" },
    stdout: "piped",
    stderr: "piped",
  }).output();
  if (!out.success) {
    await rm(partial, { force: true });
    throw new Error(
      `Cannot build the test world's stand-in for NVIDIA's Go aicr (${SOURCE}): ${
        new TextDecoder().decode(out.stderr).trim()
      }`,
    );
  }
  await rename(partial, bin);
  return bin;
}

/**
 * What `aicr snapshot --image` {@link NOT_AICR_IMAGE} must end with: the agent named as NVIDIA's
 * Go aicr by its failure line (it has no `agent` verb taking `-o`), this build named, the image
 * named.
 */
export const REFUSED_AGENT: RegExp = new RegExp(
  `Cannot get a snapshot: the agent that ran is NVIDIA's Go aicr, not aicr \\S+ \\(commit \\w+\\) \\(its log: '[^']*ERROR command failed error="flag provided but not defined: -o" exitCode=1'\\): the image '${
    NOT_AICR_IMAGE.replace(/[.]/g, "\\.")
  }' is not this build's`,
);
