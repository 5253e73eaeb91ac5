/**
 * Pins the Debian packages of the image's base (`image/base_packages.ts`): for each architecture,
 * the newest version of each package in bookworm, bookworm-updates and bookworm-security on the
 * Debian mirror, with its pool file name, size and SHA256 from the archive's Packages index.
 * Run it when Debian publishes a point release or a security update (the mirror drops superseded
 * files from its pool, so an old pin stops downloading there; the cache in ~/.cache/aicr keeps
 * working until then), review the diff, and rebuild: every base layer digest changes.
 *
 * ```sh
 * deno run -A scripts/pin_base.ts            # rewrites image/base_packages.ts
 * deno run -A scripts/pin_base.ts --check    # exits 1 when a newer version is out
 * ```
 *
 * @module
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import process from "node:process";
import { BASE_ARCHITECTURES, BASE_PACKAGE_NAMES, BASE_SUITE } from "../image/base_packages.ts";
import type { DebianPackage } from "../image/base_packages.ts";
import { debianArchiveUrl } from "../image/debian.ts";
import { REPO_ROOT } from "./build.ts";

const ARCHIVES = [
  { archive: "debian", suite: BASE_SUITE },
  { archive: "debian", suite: `${BASE_SUITE}-updates` },
  { archive: "debian-security", suite: `${BASE_SUITE}-security` },
] as const;

function parseIndex(text: string): Map<string, string>[] {
  return text.split("\n\n").map((block) => {
    const fields = new Map<string, string>();
    for (const line of block.split("\n")) {
      const match = /^([A-Za-z0-9-]+): (.*)$/.exec(line);
      if (match) fields.set(match[1]!, match[2]!);
    }
    return fields;
  });
}

function newer(a: string, b: string): boolean {
  return spawnSync("dpkg", ["--compare-versions", a, "gt", b]).status === 0;
}

async function readIndex(archive: string, suite: string, arch: string): Promise<string> {
  const url = `${debianArchiveUrl(archive)}/dists/${suite}/main/binary-${arch}/Packages.xz`;
  const response = await fetch(url);
  if (!response.ok) throw new Error(`Cannot read '${url}': HTTP ${response.status}`);
  // Through a file: a large stdin to spawnSync stalls under Deno.
  const dir = mkdtempSync(join(tmpdir(), "aicr-pin-"));
  try {
    const file = join(dir, "Packages.xz");
    writeFileSync(file, new Uint8Array(await response.arrayBuffer()));
    const xz = spawnSync("xz", ["-dc", file], { maxBuffer: 1 << 30 });
    if (xz.status !== 0) throw new Error(`Cannot unpack '${url}' with xz: ${xz.stderr}`);
    return xz.stdout.toString("utf8");
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * The newest version of each named package for an architecture, across bookworm, -updates and
 * -security, as the archive's indices list it.
 *
 * @param arch `amd64` or `arm64`
 * @param names the packages
 * @returns one pin per name, in the order given
 * @throws {Error} when an index cannot be read or lists a name nowhere
 */
export async function latestPackages(
  arch: string,
  names: readonly string[],
): Promise<DebianPackage[]> {
  const best = new Map<string, DebianPackage>();
  for (const { archive, suite } of ARCHIVES) {
    for (const fields of parseIndex(await readIndex(archive, suite, arch))) {
      const name = fields.get("Package") ?? "";
      if (!names.includes(name)) continue;
      const version = fields.get("Version") ?? "";
      const current = best.get(name);
      if (current && !newer(version, current.version)) continue;
      best.set(name, {
        name,
        version,
        architecture: fields.get("Architecture") ?? arch,
        source: (fields.get("Source") ?? name).split(" ")[0]!,
        archive,
        filename: fields.get("Filename") ?? "",
        size: Number(fields.get("Size")),
        sha256: fields.get("SHA256") ?? "",
      });
    }
  }
  return names.map((name) => {
    const found = best.get(name);
    if (!found) throw new Error(`Cannot pin '${name}' for ${arch}: no index lists it`);
    return found;
  });
}

function render(all: Record<string, DebianPackage[]>): string {
  const file = join(REPO_ROOT, "image", "base_packages.ts");
  const text = readFileSync(file, "utf8");
  const start = text.indexOf("export const BASE_PACKAGES");
  const end = text.indexOf("\n};\n", start) + 4;
  const body =
    `export const BASE_PACKAGES: Readonly<Record<BaseArchitecture, readonly DebianPackage[]>> = ${
      JSON.stringify(all, null, 2)
    };\n`;
  return text.slice(0, start) + body + text.slice(end);
}

if (import.meta.main) {
  const all: Record<string, DebianPackage[]> = {};
  for (const arch of BASE_ARCHITECTURES) {
    all[arch] = await latestPackages(arch, BASE_PACKAGE_NAMES);
  }
  const file = join(REPO_ROOT, "image", "base_packages.ts");
  const next = render(all);
  const fmt = spawnSync(process.execPath, ["fmt", "-"], { input: next, cwd: REPO_ROOT });
  const formatted = fmt.status === 0 ? fmt.stdout.toString("utf8") : next;
  if (process.argv.includes("--check")) {
    const same = formatted === readFileSync(file, "utf8");
    process.stdout.write(same ? "pins are current\n" : "newer Debian packages are out\n");
    process.exitCode = same ? 0 : 1;
  } else {
    writeFileSync(file, formatted);
    process.stdout.write(`wrote ${file}\n`);
  }
}
