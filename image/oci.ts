/**
 * The OCI image format's documents, built as data: platforms, descriptors, the image config, the
 * image manifest and the image index. Every document is serialised by {@link encodeDocument}, the
 * one place that fixes its bytes (and so its digest): keys in the order they are built, no
 * whitespace.
 *
 * @module
 */
import { type Digest, digestOf } from "./digest.ts";

/** Media types aicr writes and reads. */
export const MEDIA_TYPES = {
  index: "application/vnd.oci.image.index.v1+json",
  manifest: "application/vnd.oci.image.manifest.v1+json",
  config: "application/vnd.oci.image.config.v1+json",
  layerGzip: "application/vnd.oci.image.layer.v1.tar+gzip",
  dockerManifest: "application/vnd.docker.distribution.manifest.v2+json",
  dockerList: "application/vnd.docker.distribution.manifest.list.v2+json",
} as const;

/** A platform aicr builds for. */
export interface Platform {
  os: "linux";
  architecture: "amd64" | "arm64";
  /** `v8` for arm64, as containerd and the Go toolchain name it. */
  variant?: string;
}

/** The platforms aicr has a base for, by their `os/arch` name. */
export const PLATFORMS: Readonly<Record<string, Platform>> = {
  "linux/amd64": { os: "linux", architecture: "amd64" },
  "linux/arm64": { os: "linux", architecture: "arm64", variant: "v8" },
};

/**
 * A platform's `os/arch` name.
 *
 * @param platform the platform
 * @returns e.g. `linux/arm64`
 */
export function platformName(platform: Platform): string {
  return `${platform.os}/${platform.architecture}`;
}

/**
 * The platform an `os/arch` name (or `os/arch/variant`) stands for.
 *
 * @param name e.g. `linux/arm64` or `linux/arm64/v8`
 * @returns the platform, or undefined for one aicr has no base for
 */
export function parsePlatform(name: string): Platform | undefined {
  const [os, arch, variant] = name.split("/");
  const platform = PLATFORMS[`${os}/${arch}`];
  if (!platform) return undefined;
  if (variant !== undefined && variant !== (platform.variant ?? "")) return undefined;
  return platform;
}

/** An OCI content descriptor. */
export interface Descriptor {
  mediaType: string;
  digest: Digest;
  size: number;
  platform?: Platform;
  annotations?: Record<string, string>;
}

/** What the image runs: the OCI image config's `config`. */
export interface RunConfig {
  User: string;
  Env: string[];
  Entrypoint: string[];
  Cmd: string[];
  WorkingDir: string;
  Labels: Record<string, string>;
}

/** One layer's history entry. */
export interface History {
  created: string;
  created_by: string;
  comment?: string;
}

/** The image config document. */
export interface ImageConfig {
  created: string;
  architecture: string;
  variant?: string;
  os: string;
  config: RunConfig;
  rootfs: { type: "layers"; diff_ids: Digest[] };
  history: History[];
}

/** The image manifest document. */
export interface ImageManifest {
  schemaVersion: 2;
  mediaType: typeof MEDIA_TYPES.manifest;
  config: Descriptor;
  layers: Descriptor[];
  annotations?: Record<string, string>;
}

/** The image index document. */
export interface ImageIndex {
  schemaVersion: 2;
  mediaType: typeof MEDIA_TYPES.index;
  manifests: Descriptor[];
  annotations?: Record<string, string>;
}

/** A document's bytes with its descriptor. */
export interface EncodedDocument {
  bytes: Uint8Array;
  descriptor: Descriptor;
}

/**
 * Serialises a document and describes it.
 *
 * @param document the JSON document
 * @param mediaType its media type
 * @param extra platform or annotations for the descriptor
 * @returns its bytes and descriptor
 */
export function encodeDocument(
  document: unknown,
  mediaType: string,
  extra: Pick<Descriptor, "platform" | "annotations"> = {},
): EncodedDocument {
  const bytes = new TextEncoder().encode(JSON.stringify(document));
  return {
    bytes,
    descriptor: { mediaType, digest: digestOf(bytes), size: bytes.length, ...extra },
  };
}

/**
 * Builds an image config.
 *
 * @param platform the platform
 * @param options what the image runs, its layers' uncompressed digests and histories, and when
 * @returns the document
 */
export function imageConfig(
  platform: Platform,
  options: { run: RunConfig; diffIds: Digest[]; history: History[]; created: string },
): ImageConfig {
  return {
    created: options.created,
    architecture: platform.architecture,
    ...(platform.variant ? { variant: platform.variant } : {}),
    os: platform.os,
    config: options.run,
    rootfs: { type: "layers", diff_ids: options.diffIds },
    history: options.history,
  };
}

/**
 * Builds an image manifest.
 *
 * @param config the config's descriptor
 * @param layers the layers' descriptors, bottom first
 * @param annotations manifest annotations
 * @returns the document
 */
export function imageManifest(
  config: Descriptor,
  layers: Descriptor[],
  annotations?: Record<string, string>,
): ImageManifest {
  return {
    schemaVersion: 2,
    mediaType: MEDIA_TYPES.manifest,
    config,
    layers,
    ...(annotations ? { annotations } : {}),
  };
}

/**
 * Builds an image index.
 *
 * @param manifests the per-platform manifests' descriptors (with their platform)
 * @param annotations index annotations
 * @returns the document
 */
export function imageIndex(
  manifests: Descriptor[],
  annotations?: Record<string, string>,
): ImageIndex {
  return {
    schemaVersion: 2,
    mediaType: MEDIA_TYPES.index,
    manifests,
    ...(annotations ? { annotations } : {}),
  };
}
