/**
 * The independent SPDX validator: `pyspdxtools` of the PyPI package `spdx-tools`, installed once
 * into a venv under `~/.cache/aicr/tools/` from the pinned list beside this file (python3 with its
 * `venv` module and PyPI are what it needs; `.ci/run` installs python3-venv).
 *
 * @module
 */
import { existsSync, readFileSync } from "node:fs";
import { createHash } from "node:crypto";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const REQUIREMENTS = join(dirname(fileURLToPath(import.meta.url)), "spdx-tools.txt");

async function run(argv: string[]): Promise<{ code: number; out: string }> {
  const out = await new Deno.Command(argv[0]!, {
    args: argv.slice(1),
    stdout: "piped",
    stderr: "piped",
  })
    .output();
  return {
    code: out.code,
    out: new TextDecoder().decode(out.stdout) + new TextDecoder().decode(out.stderr),
  };
}

/**
 * The `pyspdxtools` command, installed first when missing.
 *
 * @returns its path
 * @throws {Error} when the venv or the install fails (with pip's output)
 */
export async function pyspdxtools(): Promise<string> {
  const pins = readFileSync(REQUIREMENTS, "utf8");
  const key = createHash("sha256").update(pins).digest("hex").slice(0, 12);
  const venv = join(
    Deno.env.get("HOME") ?? "/root",
    ".cache",
    "aicr",
    "tools",
    `spdx-tools-${key}`,
  );
  const bin = join(venv, "bin", "pyspdxtools");
  if (existsSync(bin)) return bin;
  const made = await run(["python3", "-m", "venv", venv]);
  if (made.code !== 0) throw new Error(`Cannot make a venv for spdx-tools: ${made.out}`);
  const installed = await run([
    join(venv, "bin", "pip"),
    "install",
    "-q",
    "--no-deps",
    "-r",
    REQUIREMENTS,
  ]);
  if (installed.code !== 0) {
    await Deno.remove(venv, { recursive: true }).catch(() => {});
    throw new Error(`Cannot install spdx-tools: ${installed.out}`);
  }
  return bin;
}

/**
 * Validates an SPDX document with pyspdxtools.
 *
 * @param file the document
 * @returns pyspdxtools' exit code and output
 */
export async function validateSpdx(file: string): Promise<{ code: number; out: string }> {
  return await run([await pyspdxtools(), "-i", file]);
}
