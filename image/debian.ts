/**
 * Pinned Debian packages, fetched and opened: the mirror apt uses on this machine (its sources
 * lists), a cache folder where each `.deb` is kept under its pool name and checked by SHA256 on
 * every read, and the package's files and control fields through `dpkg-deb`.
 *
 * @module
 */
import { spawn } from "node:child_process";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { mkdir, readFile, rename, rm, writeFile } from "node:fs/promises";
import { basename, join } from "node:path";
import process from "node:process";
import { NotFoundError, ToolError, UnavailableError } from "../errors.ts";
import type { DebianPackage } from "./base_packages.ts";
import { digestOf } from "./digest.ts";
import { readTar, type TarMember } from "./tar.ts";

const DEFAULT_MIRRORS: Readonly<Record<string, string>> = {
  debian: "http://deb.debian.org/debian",
  "debian-security": "http://deb.debian.org/debian-security",
};

/**
 * The suites → base URIs apt's sources lists name (one-line `deb` lines and deb822 `.sources`).
 *
 * @param root the root of the apt configuration @default "/etc/apt"
 * @returns each suite's first URI
 */
export function aptSources(root = "/etc/apt"): Map<string, string> {
  const suites = new Map<string, string>();
  const files: string[] = [];
  if (existsSync(join(root, "sources.list"))) files.push(join(root, "sources.list"));
  try {
    for (const name of readdirSync(join(root, "sources.list.d")).sort()) {
      files.push(join(root, "sources.list.d", name));
    }
  } catch {
    // no sources.list.d
  }
  for (const file of files) {
    let text: string;
    try {
      text = readFileSync(file, "utf8");
    } catch {
      continue;
    }
    if (file.endsWith(".sources")) {
      for (const stanza of text.split(/\n\s*\n/)) {
        const uri = /^URIs:\s*(\S+)/m.exec(stanza)?.[1];
        const names = /^Suites:\s*(.+)$/m.exec(stanza)?.[1]?.trim().split(/\s+/) ?? [];
        if (!uri || /^Types:.*\bdeb\b/m.test(stanza) === false) continue;
        for (const suite of names) if (!suites.has(suite)) suites.set(suite, uri);
      }
    } else if (file.endsWith(".list")) {
      for (const line of text.split("\n")) {
        const match = /^deb\s+(?:\[[^\]]*\]\s+)?(\S+)\s+(\S+)/.exec(line.trim());
        if (match && !suites.has(match[2]!)) suites.set(match[2]!, match[1]!);
      }
    }
  }
  return suites;
}

/**
 * The base URL of a Debian archive as apt here reaches it: the URI of the sources entry for
 * bookworm (or bookworm-security), else deb.debian.org.
 *
 * @param archive `debian` or `debian-security`
 * @param sources the sources lists' suites @default what /etc/apt names
 * @returns the URL, without a trailing `/`
 */
export function debianArchiveUrl(archive: string, sources = aptSources()): string {
  const suite = archive === "debian-security" ? "bookworm-security" : "bookworm";
  const found = sources.get(suite);
  return (found ?? DEFAULT_MIRRORS[archive] ?? DEFAULT_MIRRORS.debian!).replace(/\/+$/, "");
}

/** Options of {@link fetchPackage}. */
export interface FetchPackageOptions {
  /** Folder the `.deb` files are kept in. */
  cacheDir: string;
  /** Progress lines. @default none */
  log?: (line: string) => void;
  /** The HTTP client. @default globalThis.fetch */
  fetch?: typeof fetch;
  /** The archive URL for a package. @default {@link debianArchiveUrl} */
  archiveUrl?: (archive: string) => string;
}

/**
 * A pinned package's file: from the cache when it is there with the pinned SHA256, else
 * downloaded from the mirror, checked, and kept.
 *
 * @param pkg the pin
 * @param options cache and client
 * @returns the path of the checked `.deb`
 * @throws {UnavailableError} when the mirror cannot be reached
 * @throws {NotFoundError} when the mirror no longer has the pinned file (re-pin)
 * @throws {ToolError} when the downloaded file's SHA256 is not the pinned one
 */
export async function fetchPackage(
  pkg: DebianPackage,
  options: FetchPackageOptions,
): Promise<string> {
  const { cacheDir, log = () => {}, fetch: get = fetch, archiveUrl = debianArchiveUrl } = options;
  const dir = join(cacheDir, "debs");
  const path = join(dir, basename(pkg.filename));
  const want = `sha256:${pkg.sha256}`;
  try {
    if (digestOf(await readFile(path)) === want) return path;
    await rm(path, { force: true });
  } catch {
    // not cached
  }
  const url = `${archiveUrl(pkg.archive)}/${pkg.filename}`;
  log(`fetching ${pkg.name} ${pkg.version} (${pkg.architecture}) from ${url}`);
  let response: Response;
  try {
    response = await get(url);
  } catch (error) {
    throw new UnavailableError(
      `Cannot fetch the Debian package '${pkg.name}' from '${url}': ${(error as Error).message}`,
      { cause: error },
    );
  }
  if (response.status === 404) {
    throw new NotFoundError(
      `Cannot fetch the Debian package '${pkg.name}' ${pkg.version}: the mirror no longer has '${url}'; re-pin with 'deno run -A scripts/pin_base.ts'`,
    );
  }
  if (!response.ok) {
    throw new UnavailableError(`Cannot fetch '${url}': HTTP ${response.status}`);
  }
  const bytes = new Uint8Array(await response.arrayBuffer());
  const got = digestOf(bytes);
  if (got !== want) {
    throw new ToolError(
      `Cannot use the Debian package '${pkg.name}' from '${url}': its SHA256 is ${got}, the pin says ${want}`,
      "internal",
    );
  }
  await mkdir(dir, { recursive: true });
  const temp = `${path}.${process.pid}.tmp`;
  await writeFile(temp, bytes);
  await rename(temp, path);
  return path;
}

function runDpkgDeb(args: string[]): Promise<Uint8Array> {
  return new Promise((resolve, reject) => {
    const child = spawn("dpkg-deb", args, { stdio: ["ignore", "pipe", "pipe"] });
    const out: Uint8Array[] = [];
    let err = "";
    child.stdout.on("data", (chunk: Uint8Array) => out.push(chunk));
    child.stderr.on("data", (chunk: Uint8Array) => err += new TextDecoder().decode(chunk));
    child.on("error", (error) =>
      reject(
        new ToolError(
          `Cannot open Debian packages as 'dpkg-deb' cannot run (${error.message}): build the base on a Debian machine, or use a built aicr binary (it carries its base)`,
          "internal",
          500,
          { cause: error },
        ),
      ));
    child.on("close", (code) => {
      if (code !== 0) {
        reject(new ToolError(`Cannot run 'dpkg-deb ${args.join(" ")}': ${err.trim()}`, "internal"));
      } else {
        let size = 0;
        for (const chunk of out) size += chunk.length;
        const bytes = new Uint8Array(size);
        let at = 0;
        for (const chunk of out) {
          bytes.set(chunk, at);
          at += chunk.length;
        }
        resolve(bytes);
      }
    });
  });
}

/** A package's content, opened. */
export interface OpenedPackage {
  /** Its files, links and folders. */
  members: TarMember[];
  /** Its control fields, as `dpkg-deb -f` prints them. */
  control: string;
}

/**
 * Opens a `.deb`: its file system tree and its control fields.
 *
 * @param path the `.deb`
 * @returns the members and the control text
 * @throws {ToolError} when `dpkg-deb` is missing or fails
 */
export async function openPackage(path: string): Promise<OpenedPackage> {
  const [tree, control] = await Promise.all([
    runDpkgDeb(["--fsys-tarfile", path]),
    runDpkgDeb(["-f", path]),
  ]);
  return { members: readTar(tree), control: new TextDecoder().decode(control) };
}
