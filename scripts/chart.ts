/**
 * Writes the Helm chart `charts/aicr/` from the builders of `aicr daemonset render`
 * (`scripts/chart/generate.ts`), or with `--check` says which files differ from what it would
 * write (exit 1), without writing.
 *
 * ```sh
 * deno task chart            # regenerate after changing a builder, the rules or the version
 * deno task chart --check    # what tests/chart/ checks
 * ```
 *
 * The chart's version, app version and default image tag are the package's version: what a
 * release binary of this source renders by default.
 *
 * @module
 */
import { existsSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { mkdir, writeFile } from "node:fs/promises";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import pkg from "../package.json" with { type: "json" };
import { chartFiles } from "./chart/generate.ts";

/** The chart's folder. */
export const CHART_DIR: string = resolve(
  dirname(fileURLToPath(import.meta.url)),
  "..",
  "charts",
  "aicr",
);

/** Files under the chart folder that the generator does not make (written by hand). */
const HAND_WRITTEN = new Set(["README.md", ".helmignore"]);

function filesUnder(dir: string): string[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir, { withFileTypes: true, recursive: true })
    .filter((e) => e.isFile())
    .map((e) => relative(dir, join(e.parentPath, e.name)))
    .filter((path) => !HAND_WRITTEN.has(path));
}

/**
 * Compares the chart folder with what the generator makes.
 *
 * @param dir the chart folder
 * @returns the paths that differ, are missing or are extra
 */
export function chartDrift(dir: string = CHART_DIR): string[] {
  const want = chartFiles(pkg.version);
  const wanted = new Set(want.map((f) => f.path));
  const differ = want.filter((f) => {
    const path = join(dir, f.path);
    return !existsSync(path) || readFileSync(path, "utf8") !== f.text;
  }).map((f) => f.path);
  const extra = filesUnder(dir).filter((path) => !wanted.has(path));
  return [...differ, ...extra.map((p) => `${p} (not generated)`)];
}

async function main(args: string[]): Promise<number> {
  if (args.includes("--check")) {
    const drift = chartDrift();
    if (drift.length === 0) return 0;
    // deno-lint-ignore no-console
    console.error(
      `charts/aicr/ is not what scripts/chart.ts generates (run: deno task chart):\n  ${
        drift.join("\n  ")
      }`,
    );
    return 1;
  }
  for (const path of filesUnder(CHART_DIR)) rmSync(join(CHART_DIR, path));
  for (const file of chartFiles(pkg.version)) {
    const path = join(CHART_DIR, file.path);
    await mkdir(dirname(path), { recursive: true });
    await writeFile(path, file.text);
  }
  return 0;
}

if (import.meta.main) Deno.exit(await main(Deno.args));
