/**
 * Pushes an assembled image to a registry in the order that never publishes half an image: every
 * blob first (each skipped when the registry already has it, so a rerun after an interruption
 * uploads only what is missing), then each platform's manifest by its digest, and last the index
 * under the tag. Until that last request nothing is tagged: a push cut short leaves only untagged
 * content a registry's garbage collection removes.
 *
 * @module
 */
import { readFileSync } from "node:fs";
import { InterruptedError, ToolError, UsageError } from "../errors.ts";
import { type AssembledImage, type Blob, buildReference } from "./assemble.ts";
import { lookupCredentials } from "./auth.ts";
import type { Digest } from "./digest.ts";
import { createHttpClient } from "./http.ts";
import { platformName } from "./oci.ts";
import { parseReference } from "./reference.ts";
import { createRegistryClient, type RegistryClient } from "./registry.ts";
import { imageFromSource, type ImageSource } from "./source.ts";

/** A step of a push, for progress output. */
export type PushEvent =
  | { kind: "blob"; digest: Digest; size: number; state: "exists" | "uploading" | "uploaded" }
  | { kind: "sent"; digest: Digest; bytes: number; size: number }
  | { kind: "manifest"; digest: Digest; platform: string }
  | { kind: "index"; digest: Digest; tag: string };

/** What {@link pushImage} did. */
export interface PushResult {
  /** The index's digest: what `--image REPO@<digest>` names. */
  digest: Digest;
  /** Blobs uploaded and blobs the registry already had. */
  uploaded: number;
  skipped: number;
  /** Bytes of blobs and documents sent. */
  bytesSent: number;
}

/**
 * Pushes the image.
 *
 * @param image the assembled image
 * @param registry the repository's client
 * @param options the tag, progress, cancellation
 * @returns the index digest and counts
 * @throws {InterruptedError} when the signal aborts (nothing tagged)
 * @throws {ToolError} as the registry client raises them
 */
export async function pushImage(
  image: AssembledImage,
  registry: RegistryClient,
  options: { tag: string; progress?: (event: PushEvent) => void; signal?: AbortSignal },
): Promise<PushResult> {
  const { tag, progress = () => {}, signal } = options;
  const check = () => {
    if (signal?.aborted) {
      const reason = signal.reason instanceof Error ? signal.reason.message : String(signal.reason);
      throw new InterruptedError(`Cannot finish the push: interrupted (${reason})`);
    }
  };
  let uploaded = 0;
  let skipped = 0;
  let bytesSent = 0;
  try {
    await registry.ping();
    for (const blob of image.blobs) {
      check();
      const sent = await pushBlob(registry, blob, progress);
      if (sent === 0) skipped++;
      else uploaded++;
      bytesSent += sent;
    }
    for (const p of image.platforms) {
      check();
      const { digest, mediaType } = p.manifest.descriptor;
      if (!(await registry.manifestExists(digest, mediaType))) {
        await registry.putManifest(digest, p.manifest);
        bytesSent += p.manifest.bytes.length;
      }
      progress({
        kind: "manifest",
        digest,
        platform: `${p.platform.os}/${p.platform.architecture}`,
      });
    }
    check();
    await registry.putManifest(tag, image.index);
    bytesSent += image.index.bytes.length;
    progress({ kind: "index", digest: image.index.descriptor.digest, tag });
  } catch (error) {
    if (error instanceof InterruptedError) {
      throw new InterruptedError(
        `${error.message}: no tag was published; ${uploaded} blob(s) were uploaded, and a rerun uploads only what is missing`,
        { cause: error },
      );
    }
    if (error instanceof ToolError) throw error;
    throw new ToolError(`Cannot push the image: ${(error as Error).message}`, "internal", 500, {
      cause: error,
    });
  }
  return { digest: image.index.descriptor.digest, uploaded, skipped, bytesSent };
}

async function pushBlob(
  registry: RegistryClient,
  blob: Blob,
  progress: (event: PushEvent) => void,
): Promise<number> {
  const { digest, size } = blob.descriptor;
  if (await registry.blobExists(digest)) {
    progress({ kind: "blob", digest, size, state: "exists" });
    return 0;
  }
  progress({ kind: "blob", digest, size, state: "uploading" });
  await registry.uploadBlob(
    { digest, size, read: () => blob.read() },
    (bytes) => progress({ kind: "sent", digest, bytes, size }),
  );
  progress({ kind: "blob", digest, size, state: "uploaded" });
  return size;
}

/** Options of {@link pushToRegistry}. */
export interface PushOptions {
  source: ImageSource;
  /** `REGISTRY/REPOSITORY[:TAG]`; the tag defaults to this version's. */
  target: string;
  /** PEM file of a CA to trust besides the system's. */
  caFile?: string;
  /** Speak plain HTTP (only when asked). */
  plainHttp?: boolean;
  /** A Docker config file with the credentials. */
  registryConfig?: string;
  env: (name: string) => string | undefined;
  signal?: AbortSignal;
  progress?: (event: PushEvent) => void;
}

/** What {@link pushToRegistry} published. */
export interface PushedImage extends PushResult {
  /** `registry/repository`. */
  repository: string;
  tag: string;
  /** `registry/repository@digest`: what to give `--image`. */
  pinned: string;
  platforms: string[];
}

/**
 * Assembles the image and pushes it.
 *
 * @param options source, target, TLS, credentials
 * @returns what was published
 * @throws {UsageError} for a bad target, CA file or binary
 * @throws {ToolError} as the registry answers (see `registry.ts`)
 */
export async function pushToRegistry(options: PushOptions): Promise<PushedImage> {
  const target = parseReference(options.target);
  if (target.digest) {
    throw new UsageError(
      `Cannot push to '${options.target}': name a repository and optionally a tag; the digest is the image's own`,
    );
  }
  let extraCa: string | undefined;
  if (options.caFile) {
    try {
      extraCa = readFileSync(options.caFile, "utf8");
    } catch (error) {
      throw new UsageError(
        `Cannot read the CA file '${options.caFile}': ${(error as Error).message}`,
        {
          cause: error,
        },
      );
    }
    if (!extraCa.includes("-----BEGIN CERTIFICATE-----")) {
      throw new UsageError(
        `Cannot use the CA file '${options.caFile}': it holds no PEM certificate`,
      );
    }
  }
  const image = await imageFromSource(options.source);
  const http = createHttpClient(extraCa ? { extraCa } : {});
  try {
    const tag = target.tag ?? parseReference(buildReference(image.build)).tag ??
      image.build.version;
    const registry = createRegistryClient({
      ref: target,
      http,
      scheme: options.plainHttp ? "http" : "https",
      credentials: () =>
        lookupCredentials(target.registry, {
          env: options.env,
          ...(options.registryConfig ? { configFile: options.registryConfig } : {}),
        }),
      ...(options.signal ? { signal: options.signal } : {}),
    });
    const result = await pushImage(image, registry, {
      tag,
      ...(options.progress ? { progress: options.progress } : {}),
      ...(options.signal ? { signal: options.signal } : {}),
    });
    const repository = `${target.registry}/${target.repository}`;
    return {
      ...result,
      repository,
      tag,
      pinned: `${repository}@${result.digest}`,
      platforms: image.platforms.map((p) => platformName(p.platform)),
    };
  } finally {
    http.close();
    await image.dispose();
  }
}
