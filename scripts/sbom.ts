/**
 * The release's software bill of materials, SPDX 2.3 JSON: the multi-arch image and, per
 * architecture, the aicr binary with what is inside it (the Node.js runtime it is sealed into and
 * every npm package esbuild bundles from `mod.ts`, each with its version, license and purl) and the
 * Debian packages of the image's base (pinned versions, the `.deb` SHA256, Debian purls). Only
 * facts the build knows are stated; what it does not (the Debian packages' licenses, which their
 * copyright files list) is `NOASSERTION`.
 *
 * @module
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import * as esbuild from "esbuild";
import type { BaseArchitecture, DebianPackage } from "../image/mod.ts";
import { debianArchiveUrl } from "../image/debian.ts";

/** One npm package found in the bundle. */
export interface NpmPackage {
  name: string;
  version: string;
  license: string;
}

/**
 * The npm packages `mod.ts` bundles (statically and through dynamic imports), from esbuild's
 * metafile: the `node_modules/<name>` folders its inputs come from, each package.json read for the
 * version and license.
 *
 * @param root the repository
 * @returns the packages, sorted by name
 */
export async function bundledPackages(root: string): Promise<NpmPackage[]> {
  // esbuild's service process outlives the build unless stopped (build.ts does the same).
  const result = await esbuild.build({
    entryPoints: [join(root, "mod.ts")],
    bundle: true,
    platform: "node",
    format: "esm",
    target: "node24",
    write: false,
    metafile: true,
    logLevel: "silent",
    absWorkingDir: root,
  }).finally(() => esbuild.stop());
  const folders = new Set<string>();
  for (const input of Object.keys(result.metafile.inputs)) {
    const match = /(?:^|\/)node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(input);
    if (match) {
      const at = input.lastIndexOf(`node_modules/${match[1]}/`);
      folders.add(input.slice(0, at + `node_modules/${match[1]}`.length));
    }
  }
  const packages = new Map<string, NpmPackage>();
  for (const folder of folders) {
    const pkg = JSON.parse(readFileSync(join(root, folder, "package.json"), "utf8")) as {
      name: string;
      version: string;
      license?: string | { type?: string };
    };
    const license = typeof pkg.license === "string" ? pkg.license : pkg.license?.type;
    packages.set(`${pkg.name}@${pkg.version}`, {
      name: pkg.name,
      version: pkg.version,
      license: license ?? "NOASSERTION",
    });
  }
  return [...packages.values()].sort((a, b) => a.name.localeCompare(b.name));
}

/** What the SBOM describes. */
export interface SbomInput {
  version: string;
  commit: string;
  /** When the release's commit was made (ISO 8601): the document's creation time. */
  created: string;
  /** The image repository and the index digest. */
  image: { repository: string; digest: string };
  binaries: { arch: BaseArchitecture; file: string; sha256: string }[];
  /** The backend that sealed the binaries, as `aicr version` reports it: `node-sea`, `deno-compile`. */
  backend: string;
  /** The runtime inside the binaries (Node.js for `node-sea`, Deno's denort for `deno-compile`). */
  runtime: SbomRuntime;
  npm: readonly NpmPackage[];
  debian: Readonly<Record<BaseArchitecture, readonly DebianPackage[]>>;
}

/** A runtime a binary is sealed into. */
export interface SbomRuntime {
  name: string;
  version: string;
  downloadLocation: string;
  license: string;
  supplier: string;
}

/**
 * The runtime a backend seals the binary into.
 *
 * @param backend `node-sea` or `deno-compile`
 * @param versions the pinned Node.js and Deno versions
 * @returns the runtime's SBOM entry
 */
export function backendRuntime(
  backend: string,
  versions: { node: string; deno: string },
): SbomRuntime {
  return backend === "deno-compile"
    ? {
      name: "denort",
      version: versions.deno,
      downloadLocation: `https://github.com/denoland/deno/releases/tag/v${versions.deno}`,
      license: "MIT",
      supplier: "Organization: Deno Land Inc.",
    }
    : {
      name: "node",
      version: versions.node,
      downloadLocation: `https://nodejs.org/dist/v${versions.node}/`,
      license: "MIT",
      supplier: "Organization: OpenJS Foundation",
    };
}

interface SpdxPackage {
  SPDXID: string;
  name: string;
  versionInfo: string;
  downloadLocation: string;
  filesAnalyzed: false;
  licenseConcluded: string;
  licenseDeclared: string;
  copyrightText: string;
  supplier?: string;
  primaryPackagePurpose?: string;
  checksums?: { algorithm: "SHA256"; checksumValue: string }[];
  sourceInfo?: string;
  externalRefs?: {
    referenceCategory: "PACKAGE-MANAGER";
    referenceType: "purl";
    referenceLocator: string;
  }[];
}

function id(text: string): string {
  return `SPDXRef-${text.replace(/[^A-Za-z0-9.-]/g, "-")}`;
}

function purl(locator: string): NonNullable<SpdxPackage["externalRefs"]> {
  return [{
    referenceCategory: "PACKAGE-MANAGER",
    referenceType: "purl",
    referenceLocator: locator,
  }];
}

function npmPurl(pkg: NpmPackage): string {
  const name = pkg.name.startsWith("@") ? `%40${pkg.name.slice(1)}` : pkg.name;
  return `pkg:npm/${name}@${pkg.version}`;
}

/** SPDX wants `YYYY-MM-DDThh:mm:ssZ`. */
function spdxTime(iso: string): string {
  return new Date(iso).toISOString().replace(/\.\d{3}Z$/, "Z");
}

function debianPackage(pkg: DebianPackage, arch: string): SpdxPackage {
  return {
    SPDXID: id(`deb-${arch}-${pkg.name}`),
    name: pkg.name,
    versionInfo: pkg.version,
    downloadLocation: `${debianArchiveUrl(pkg.archive, new Map())}/${pkg.filename}`,
    filesAnalyzed: false,
    licenseConcluded: "NOASSERTION",
    licenseDeclared: "NOASSERTION",
    copyrightText: "NOASSERTION",
    supplier: "Organization: Debian",
    checksums: [{ algorithm: "SHA256", checksumValue: pkg.sha256 }],
    sourceInfo:
      `built from the Debian source package ${pkg.source}; its copyright file is in the image`,
    externalRefs: purl(
      `pkg:deb/debian/${encodeURIComponent(pkg.name)}@${
        encodeURIComponent(pkg.version)
      }?arch=${pkg.architecture}&distro=debian-12`,
    ),
  };
}

/**
 * Builds the SPDX 2.3 document.
 *
 * @param input what the release holds
 * @returns the document (serialise with JSON.stringify)
 */
export function spdxDocument(input: SbomInput): Record<string, unknown> {
  const image: SpdxPackage = {
    SPDXID: id("image"),
    name: "aicr image",
    versionInfo: input.version,
    downloadLocation: "NOASSERTION",
    filesAnalyzed: false,
    licenseConcluded: "NOASSERTION",
    licenseDeclared: "NOASSERTION",
    copyrightText: "NOASSERTION",
    primaryPackagePurpose: "CONTAINER",
    checksums: [{ algorithm: "SHA256", checksumValue: input.image.digest.replace(/^sha256:/, "") }],
    externalRefs: purl(
      `pkg:oci/aicr@${encodeURIComponent(input.image.digest)}?repository_url=${
        encodeURIComponent(input.image.repository)
      }&tag=${input.version}`,
    ),
  };
  const packages: SpdxPackage[] = [image];
  const relationships: {
    spdxElementId: string;
    relationshipType: string;
    relatedSpdxElement: string;
  }[] = [
    {
      spdxElementId: "SPDXRef-DOCUMENT",
      relationshipType: "DESCRIBES",
      relatedSpdxElement: image.SPDXID,
    },
  ];
  const contains = (a: string, b: string) =>
    relationships.push({ spdxElementId: a, relationshipType: "CONTAINS", relatedSpdxElement: b });
  for (const binary of input.binaries) {
    const binId = id(`binary-${binary.arch}`);
    packages.push({
      SPDXID: binId,
      name: binary.file,
      versionInfo: input.version,
      downloadLocation: "NOASSERTION",
      filesAnalyzed: false,
      licenseConcluded: "NOASSERTION",
      licenseDeclared: "Apache-2.0",
      copyrightText: "NOASSERTION",
      primaryPackagePurpose: "APPLICATION",
      checksums: [{ algorithm: "SHA256", checksumValue: binary.sha256 }],
      sourceInfo:
        `aicr ${input.version}, commit ${input.commit}, built with the ${input.backend} backend (${input.runtime.name} ${input.runtime.version})`,
    });
    relationships.push({
      spdxElementId: "SPDXRef-DOCUMENT",
      relationshipType: "DESCRIBES",
      relatedSpdxElement: binId,
    });
    contains(image.SPDXID, binId);
    const { runtime } = input;
    const nodeId = id(`${runtime.name}-${binary.arch}`);
    packages.push({
      SPDXID: nodeId,
      name: runtime.name,
      versionInfo: runtime.version,
      downloadLocation: runtime.downloadLocation,
      filesAnalyzed: false,
      licenseConcluded: "NOASSERTION",
      licenseDeclared: runtime.license,
      copyrightText: "NOASSERTION",
      supplier: runtime.supplier,
      primaryPackagePurpose: "APPLICATION",
      externalRefs: purl(`pkg:generic/${runtime.name}@${runtime.version}?arch=${binary.arch}`),
    });
    contains(binId, nodeId);
    for (const pkg of input.npm) {
      const pkgId = id(`npm-${binary.arch}-${pkg.name}-${pkg.version}`);
      packages.push({
        SPDXID: pkgId,
        name: pkg.name,
        versionInfo: pkg.version,
        downloadLocation: `https://registry.npmjs.org/${pkg.name}/-/${
          pkg.name.split("/").pop()
        }-${pkg.version}.tgz`,
        filesAnalyzed: false,
        licenseConcluded: "NOASSERTION",
        licenseDeclared: /^[A-Za-z0-9.+-]+( (OR|AND) [A-Za-z0-9.+-]+)*$/.test(pkg.license)
          ? pkg.license
          : "NOASSERTION",
        copyrightText: "NOASSERTION",
        primaryPackagePurpose: "LIBRARY",
        externalRefs: purl(npmPurl(pkg)),
      });
      contains(binId, pkgId);
    }
    for (const deb of input.debian[binary.arch]) {
      const deb_ = debianPackage(deb, binary.arch);
      packages.push(deb_);
      contains(image.SPDXID, deb_.SPDXID);
    }
  }
  return {
    spdxVersion: "SPDX-2.3",
    dataLicense: "CC0-1.0",
    SPDXID: "SPDXRef-DOCUMENT",
    name: `aicr-${input.version}`,
    documentNamespace: `https://${input.image.repository}/spdx/${input.version}/${
      input.image.digest.replace(/^sha256:/, "")
    }`,
    creationInfo: {
      created: spdxTime(input.created),
      creators: [`Tool: aicr-release-${input.version}`],
    },
    packages,
    relationships,
  };
}
