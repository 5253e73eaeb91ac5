/**
 * The image's base layer, per architecture: the shared libraries the binary's Node.js runtime
 * needs, taken from the pinned Debian packages (`base_packages.ts`) with everything they need in
 * turn (their `DT_NEEDED`, read from the files themselves), the dynamic loader, Debian's
 * `os-release`, each package's copyright file and dpkg status entry (what image scanners read),
 * `/etc/passwd` and `/etc/group` with root and nobody (65534), an `nsswitch.conf` and `/tmp`.
 * No shell and no package manager. Written as a deterministic tar (sorted paths, owner 0, time 0)
 * and gzip ({@link gzipBytes}), so the same pins give the same digest anywhere.
 *
 * A built aicr binary carries its base layers as assets (`scripts/build.ts` embeds them), so it
 * needs neither the network nor `dpkg-deb`; from source they are built from the packages, which
 * are cached under the cache folder.
 *
 * @module
 */
import { posix } from "node:path";
import { ToolError } from "../errors.ts";
import { singleExecutableAsset } from "../runtime.ts";
import {
  BASE_PACKAGES,
  BASE_SUITE,
  type BaseArchitecture,
  type DebianPackage,
} from "./base_packages.ts";
import {
  fetchPackage,
  type FetchPackageOptions,
  type OpenedPackage,
  openPackage,
} from "./debian.ts";
import { type Digest, digestOf } from "./digest.ts";
import { readElf } from "./elf.ts";
import { gzipBytes } from "./gzip.ts";
import { concat, type TarEntry, type TarMember, tarStream } from "./tar.ts";

/** Sonames the Node.js 24 runtime of the binary links (`ldd`, the same on amd64 and arm64). */
export const RUNTIME_NEEDED: readonly string[] = [
  "libdl.so.2",
  "libstdc++.so.6",
  "libm.so.6",
  "libgcc_s.so.1",
  "libpthread.so.0",
  "libc.so.6",
];

/** Where each architecture's libraries and loader are. */
export const ARCH_PATHS: Readonly<
  Record<BaseArchitecture, { triplet: string; interpreter: string }>
> = {
  amd64: { triplet: "x86_64-linux-gnu", interpreter: "/lib64/ld-linux-x86-64.so.2" },
  arm64: { triplet: "aarch64-linux-gnu", interpreter: "/lib/ld-linux-aarch64.so.1" },
};

/** A base layer, ready to go into an image. */
export interface BaseLayer {
  architecture: BaseArchitecture;
  /** The gzip blob. */
  bytes: Uint8Array;
  /** The blob's digest. */
  digest: Digest;
  /** The uncompressed tar's digest (the config's `diff_id`). */
  diffId: Digest;
  /** The packages it was made from. */
  packages: readonly DebianPackage[];
}

/** The users and groups of the image: root and nobody/nogroup (65534). */
const GENERATED_FILES: Readonly<Record<string, string>> = {
  "etc/passwd": "root:x:0:0:root:/root:/sbin/nologin\n" +
    "nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n",
  "etc/group": "root:x:0:\nnogroup:x:65534:\n",
  "etc/nsswitch.conf": "passwd: files\ngroup: files\nhosts: files dns\n",
};

type Members = Map<string, TarMember>;

function memberIndex(opened: readonly OpenedPackage[]): Members {
  const all: Members = new Map();
  for (const pkg of opened) {
    for (const member of pkg.members) all.set(member.entry.path.replace(/\/$/, ""), member);
  }
  return all;
}

/** Follows a path through symlinks, recording every link and the file it ends at. */
function follow(all: Members, path: string, keep: Set<string>): TarMember | undefined {
  let current = path.replace(/^\/+/, "");
  for (let hops = 0; hops < 16; hops++) {
    const member = all.get(current);
    if (!member) return undefined;
    keep.add(current);
    if (member.entry.type !== "symlink") return member;
    const link = member.entry.linkname ?? "";
    current = link.startsWith("/")
      ? link.slice(1)
      : posix.normalize(posix.join(posix.dirname(current), link));
  }
  return undefined;
}

/**
 * The paths of the base: the runtime's libraries and what they need, the loader, `os-release`,
 * and each package's copyright (through a linked doc folder too).
 *
 * @param arch the architecture
 * @param opened the pinned packages, opened, in pin order
 * @returns the package paths to keep
 * @throws {ToolError} when a needed library is in none of the packages
 */
export function selectBasePaths(
  arch: BaseArchitecture,
  opened: readonly (OpenedPackage & { name: string })[],
): Set<string> {
  const all = memberIndex(opened);
  const keep = new Set<string>();
  const { triplet, interpreter } = ARCH_PATHS[arch];
  const dirs = [`lib/${triplet}`, `usr/lib/${triplet}`, "lib", "usr/lib"];
  const queue = [...RUNTIME_NEEDED];
  const seen = new Set<string>();
  if (!follow(all, interpreter, keep)) {
    throw new ToolError(`Cannot build the ${arch} base: no package holds '${interpreter}'`);
  }
  while (queue.length) {
    const soname = queue.shift()!;
    if (seen.has(soname)) continue;
    seen.add(soname);
    const file = dirs.map((dir) => follow(all, `${dir}/${soname}`, keep)).find(Boolean);
    if (!file) throw new ToolError(`Cannot build the ${arch} base: no package holds '${soname}'`);
    queue.push(...(readElf(file.data)?.needed ?? []));
  }
  follow(all, "etc/os-release", keep);
  for (const { name } of opened) follow(all, `usr/share/doc/${name}/copyright`, keep);
  return keep;
}

function ancestors(path: string): string[] {
  const parts = path.split("/");
  return parts.slice(0, -1).map((_, i) => parts.slice(0, i + 1).join("/"));
}

/**
 * The base layer's tar entries, sorted by path: the selected package files (their modes, owner 0,
 * time 0), the generated `/etc` files, one dpkg status file per package, `/tmp` and every parent
 * folder.
 *
 * @param arch the architecture
 * @param opened the pinned packages, opened
 * @returns the entries with their data
 */
export function baseEntries(
  arch: BaseArchitecture,
  opened: readonly (OpenedPackage & { name: string })[],
): { entry: TarEntry; data?: Uint8Array }[] {
  const all = memberIndex(opened);
  const files = new Map<string, { entry: TarEntry; data?: Uint8Array }>();
  for (const path of selectBasePaths(arch, opened)) {
    const { entry, data } = all.get(path)!;
    files.set(path, {
      entry: {
        path,
        type: entry.type,
        mode: entry.mode,
        size: entry.type === "file" ? data.length : 0,
        ...(entry.linkname !== undefined ? { linkname: entry.linkname } : {}),
      },
      ...(entry.type === "file" ? { data } : {}),
    });
  }
  const text = (path: string, content: string) => {
    const data = new TextEncoder().encode(content);
    files.set(path, { entry: { path, type: "file", mode: 0o644, size: data.length }, data });
  };
  for (const [path, content] of Object.entries(GENERATED_FILES)) text(path, content);
  for (const pkg of opened) text(`var/lib/dpkg/status.d/${pkg.name}`, pkg.control);
  files.set("tmp", { entry: { path: "tmp", type: "dir", mode: 0o1777 } });
  for (const path of [...files.keys()]) {
    for (const dir of ancestors(path)) {
      if (!files.has(dir)) files.set(dir, { entry: { path: dir, type: "dir", mode: 0o755 } });
    }
  }
  return [...files.keys()].sort().map((path) => files.get(path)!);
}

/** Options of {@link buildBaseLayer} and {@link baseLayer}. */
export type BaseLayerOptions = FetchPackageOptions;

/**
 * Builds a base layer from the pinned packages (fetched into, or read from, the cache).
 *
 * @param arch the architecture
 * @param options cache folder, log, HTTP client
 * @returns the layer
 * @throws {ToolError} when a package cannot be fetched, checked or opened
 */
export async function buildBaseLayer(
  arch: BaseArchitecture,
  options: BaseLayerOptions,
): Promise<BaseLayer> {
  const packages = BASE_PACKAGES[arch];
  const opened = [];
  for (const pkg of packages) {
    const path = await fetchPackage(pkg, options);
    opened.push({ name: pkg.name, ...(await openPackage(path)) });
  }
  const parts: Uint8Array[] = [];
  for await (const chunk of tarStream(baseEntries(arch, opened))) parts.push(chunk);
  const tar = concat(parts);
  const bytes = await gzipBytes(tar);
  return { architecture: arch, bytes, digest: digestOf(bytes), diffId: digestOf(tar), packages };
}

/** Name of the asset that holds an architecture's base layer in a built binary. */
export function baseAssetName(arch: BaseArchitecture): string {
  return `image-base-${arch}.tar.gz`;
}

/** Name of the asset describing the embedded base layers ({@link EmbeddedBase}). */
export const BASE_INDEX_ASSET = "image-base.json";

/** What the build records about each embedded base layer. */
export type EmbeddedBase = Partial<
  Record<BaseArchitecture, { digest: Digest; diffId: Digest; size: number; suite: string }>
>;

/**
 * The base layer embedded in this binary, checked against the digest the build recorded.
 *
 * @param arch the architecture
 * @returns the layer, or undefined when this process carries none (run from source)
 * @throws {ToolError} when the asset is there but does not match its record
 */
export function embeddedBaseLayer(arch: BaseArchitecture): BaseLayer | undefined {
  const index = singleExecutableAsset(BASE_INDEX_ASSET);
  const bytes = singleExecutableAsset(baseAssetName(arch));
  if (!index || !bytes) return undefined;
  const record = (JSON.parse(new TextDecoder().decode(index)) as EmbeddedBase)[arch];
  if (!record) return undefined;
  const digest = digestOf(bytes);
  if (digest !== record.digest || record.suite !== BASE_SUITE) {
    throw new ToolError(
      `Cannot use the ${arch} base layer this binary carries: its digest is ${digest}, the build recorded ${record.digest}`,
    );
  }
  return {
    architecture: arch,
    bytes,
    digest,
    diffId: record.diffId,
    packages: BASE_PACKAGES[arch],
  };
}

/**
 * An architecture's base layer: the one this binary carries, else built from the pinned packages.
 *
 * @param arch the architecture
 * @param options cache folder and log (used only when building)
 * @returns the layer
 */
export async function baseLayer(
  arch: BaseArchitecture,
  options: BaseLayerOptions,
): Promise<BaseLayer> {
  return embeddedBaseLayer(arch) ?? await buildBaseLayer(arch, options);
}
