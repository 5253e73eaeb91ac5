/**
 * `aicr image save`: the image of this binary (and the other platform's, when given) written as
 * one OCI image archive, named by the reference the CLI deploys by default.
 *
 * @module
 */
import { writeArchive } from "./archive.ts";
import { buildReference } from "./assemble.ts";
import type { Digest } from "./digest.ts";
import { platformName } from "./oci.ts";
import { imageFromSource, type ImageSource } from "./source.ts";

/** Options of {@link saveImage}. */
export interface SaveOptions {
  source: ImageSource;
  /** The archive file to write. */
  output: string;
  /** The reference the archive names the image by. @default this version's default image */
  reference?: string;
  signal?: AbortSignal;
  /** Bytes written so far of the total. */
  progress?: (written: number, total: number) => void;
}

/** What {@link saveImage} wrote. */
export interface SavedImage {
  path: string;
  bytes: number;
  /** SHA256 of the archive file. */
  sha256: string;
  /** The image index's digest. */
  digest: Digest;
  reference: string;
  platforms: string[];
}

/**
 * Writes the image archive.
 *
 * @param options source, output, reference
 * @returns the archive and the image's digest
 * @throws {UsageError} for a binary that does not fit, or a file that cannot be written
 * @throws {InterruptedError} when cancelled (nothing is left behind)
 */
export async function saveImage(options: SaveOptions): Promise<SavedImage> {
  const image = await imageFromSource(options.source);
  try {
    const reference = options.reference ?? buildReference(image.build);
    const total = image.blobs.reduce((n, b) => n + b.descriptor.size, 0);
    const written = await writeArchive(image, options.output, {
      reference,
      ...(options.signal ? { signal: options.signal } : {}),
      ...(options.progress ? { progress: (bytes: number) => options.progress!(bytes, total) } : {}),
    });
    return {
      ...written,
      digest: image.index.descriptor.digest,
      reference,
      platforms: image.platforms.map((p) => platformName(p.platform)),
    };
  } finally {
    await image.dispose();
  }
}
