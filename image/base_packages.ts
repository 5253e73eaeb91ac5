/**
 * The pinned Debian packages the image's base is made of, per architecture: the runtime libraries
 * the Node.js 24 base of the binary links (glibc's `libc6`, `libstdc++6`, `libgcc-s1`), the
 * copyright of `gcc-12-base` (where the last two keep theirs) and the `os-release` of
 * `base-files`. Each is one file of the Debian archive, named by its pool path and checked by its
 * SHA256. `scripts/pin_base.ts` writes the {@link BASE_PACKAGES} table from the
 * archive's indices; nothing else edits it.
 *
 * @module
 */

/** The Debian release the base comes from (what distroless `cc-debian12` is built from too). */
export const BASE_SUITE = "bookworm";

/** Architectures with a base, by their Debian (and OCI) names. */
export const BASE_ARCHITECTURES = ["amd64", "arm64"] as const;

/** One of {@link BASE_ARCHITECTURES}. */
export type BaseArchitecture = (typeof BASE_ARCHITECTURES)[number];

/** The packages, in the order the base is built from them. */
export const BASE_PACKAGE_NAMES: readonly string[] = [
  "libc6",
  "libgcc-s1",
  "libstdc++6",
  "gcc-12-base",
  "base-files",
];

/** One pinned package: a file of the Debian archive. */
export interface DebianPackage {
  name: string;
  version: string;
  /** The package's architecture (`all` for architecture-independent ones). */
  architecture: string;
  /** Its source package. */
  source: string;
  /** The archive that holds it: `debian` or `debian-security`. */
  archive: string;
  /** Its path in that archive's pool. */
  filename: string;
  size: number;
  /** SHA256 of the `.deb`, hex. */
  sha256: string;
}

/** The pins, by architecture (written by `scripts/pin_base.ts`). */
export const BASE_PACKAGES: Readonly<Record<BaseArchitecture, readonly DebianPackage[]>> = {
  "amd64": [
    {
      "name": "libc6",
      "version": "2.36-9+deb12u14",
      "architecture": "amd64",
      "source": "glibc",
      "archive": "debian",
      "filename": "pool/main/g/glibc/libc6_2.36-9+deb12u14_amd64.deb",
      "size": 2759320,
      "sha256": "ba4f88f73dbc3ae9055f3c20f4523bfdbaf1ad13ff95e258924f77d20b4fbedf",
    },
    {
      "name": "libgcc-s1",
      "version": "12.2.0-14+deb12u1",
      "architecture": "amd64",
      "source": "gcc-12",
      "archive": "debian",
      "filename": "pool/main/g/gcc-12/libgcc-s1_12.2.0-14+deb12u1_amd64.deb",
      "size": 49856,
      "sha256": "3016e62cb4b7cd8038822870601f5ed131befe942774d0f745622cc77d8a88f7",
    },
    {
      "name": "libstdc++6",
      "version": "12.2.0-14+deb12u1",
      "architecture": "amd64",
      "source": "gcc-12",
      "archive": "debian",
      "filename": "pool/main/g/gcc-12/libstdc++6_12.2.0-14+deb12u1_amd64.deb",
      "size": 612604,
      "sha256": "5cd3171216d4ab0fc911cfe9c35509bf2dd8f47761c43b7f6a4296701551a24d",
    },
    {
      "name": "gcc-12-base",
      "version": "12.2.0-14+deb12u1",
      "architecture": "amd64",
      "source": "gcc-12",
      "archive": "debian",
      "filename": "pool/main/g/gcc-12/gcc-12-base_12.2.0-14+deb12u1_amd64.deb",
      "size": 37596,
      "sha256": "1896a2aacf4ad681ff5eacc24a5b0ca4d5d9c9b9c9e4b6de5197bc1e116ea619",
    },
    {
      "name": "base-files",
      "version": "12.4+deb12u15",
      "architecture": "amd64",
      "source": "base-files",
      "archive": "debian",
      "filename": "pool/main/b/base-files/base-files_12.4+deb12u15_amd64.deb",
      "size": 70936,
      "sha256": "3eb1ea6d85488f488cc2a163b98ad640ef88cee4c79287cf14e361aaf6206f47",
    },
  ],
  "arm64": [
    {
      "name": "libc6",
      "version": "2.36-9+deb12u14",
      "architecture": "arm64",
      "source": "glibc",
      "archive": "debian",
      "filename": "pool/main/g/glibc/libc6_2.36-9+deb12u14_arm64.deb",
      "size": 2324660,
      "sha256": "01f4330719fd4f65580e16ea5a0527f372fca750e8f588d26deaf09f2d3b1cf4",
    },
    {
      "name": "libgcc-s1",
      "version": "12.2.0-14+deb12u1",
      "architecture": "arm64",
      "source": "gcc-12",
      "archive": "debian",
      "filename": "pool/main/g/gcc-12/libgcc-s1_12.2.0-14+deb12u1_arm64.deb",
      "size": 34816,
      "sha256": "576926b283613db80168ddf76380a3bd877602778cf0d226caa7bfbfa71eacf3",
    },
    {
      "name": "libstdc++6",
      "version": "12.2.0-14+deb12u1",
      "architecture": "arm64",
      "source": "gcc-12",
      "archive": "debian",
      "filename": "pool/main/g/gcc-12/libstdc++6_12.2.0-14+deb12u1_arm64.deb",
      "size": 556608,
      "sha256": "26e138c677a985775331373828a6c286c551ff397cb735d00e2383cb273d1cb2",
    },
    {
      "name": "gcc-12-base",
      "version": "12.2.0-14+deb12u1",
      "architecture": "arm64",
      "source": "gcc-12",
      "archive": "debian",
      "filename": "pool/main/g/gcc-12/gcc-12-base_12.2.0-14+deb12u1_arm64.deb",
      "size": 37624,
      "sha256": "674cf6cba6d432bd200c45fe866c1652c7a53523cc2e7a613e05bc4abf7b5440",
    },
    {
      "name": "base-files",
      "version": "12.4+deb12u15",
      "architecture": "arm64",
      "source": "base-files",
      "archive": "debian",
      "filename": "pool/main/b/base-files/base-files_12.4+deb12u15_arm64.deb",
      "size": 70936,
      "sha256": "b1272fbdc197f7d5bd22c05b741a03840f8bec66ca68c8d797f567ff2c99d42d",
    },
  ],
};
