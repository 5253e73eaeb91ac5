/**
 * The OCI image archive: an OCI image layout (`oci-layout`, `index.json`, `blobs/sha256/...`) in
 * one tar, as `skopeo copy oci-archive:...`, `ctr images import` and `podman load` read it. The
 * layout's `index.json` names one entry, the image's index, with the reference it is known by
 * (`io.containerd.image.name` for containerd, `org.opencontainers.image.ref.name` for the others).
 * Written deterministically into a temporary file beside the target and renamed over it only when
 * complete: an interrupted or failed save leaves nothing behind. A device or a pipe (`-o /dev/null`,
 * `-o >(gzip)`) is written into, never replaced.
 *
 * @module
 */
import { InterruptedError, UsageError } from "../errors.ts";
import { type AtomicFile, openAtomicFile } from "../io.ts";
import type { AssembledImage, Blob } from "./assemble.ts";
import { createHasher, type Digest } from "./digest.ts";
import { MEDIA_TYPES } from "./oci.ts";
import { type TarData, type TarEntry, tarStream } from "./tar.ts";

/**
 * The layout's `index.json`: one entry, the image index, named by `reference`.
 *
 * @param image the image
 * @param reference e.g. `ghcr.io/example/aicr:0.2.0`
 * @returns the document's bytes
 */
export function layoutIndex(image: AssembledImage, reference: string): Uint8Array {
  const { digest, size } = image.index.descriptor;
  return new TextEncoder().encode(JSON.stringify({
    schemaVersion: 2,
    mediaType: MEDIA_TYPES.index,
    manifests: [{
      mediaType: MEDIA_TYPES.index,
      digest,
      size,
      annotations: {
        "io.containerd.image.name": reference,
        "org.opencontainers.image.ref.name": reference,
      },
    }],
  }));
}

/** Every blob of the layout, documents included, sorted by digest. */
function layoutBlobs(image: AssembledImage): Blob[] {
  const documents = [
    image.index,
    ...image.platforms.map((p) => p.manifest),
  ].map((doc): Blob => ({
    descriptor: doc.descriptor,
    async *read() {
      yield doc.bytes;
    },
  }));
  const all = new Map<Digest, Blob>();
  for (const blob of [...image.blobs, ...documents]) all.set(blob.descriptor.digest, blob);
  return [...all.values()].sort((a, b) => a.descriptor.digest.localeCompare(b.descriptor.digest));
}

/**
 * The archive's tar entries, in name order.
 *
 * @param image the image
 * @param reference the name the layout gives it
 * @returns the entries and their data
 */
export function archiveEntries(
  image: AssembledImage,
  reference: string,
): { entry: TarEntry; data?: TarData }[] {
  const text = (path: string, bytes: Uint8Array) => ({
    entry: { path, type: "file" as const, mode: 0o644, size: bytes.length },
    data: bytes,
  });
  return [
    { entry: { path: "blobs", type: "dir", mode: 0o755 } },
    { entry: { path: "blobs/sha256", type: "dir", mode: 0o755 } },
    ...layoutBlobs(image).map((blob) => ({
      entry: {
        path: `blobs/sha256/${blob.descriptor.digest.slice("sha256:".length)}`,
        type: "file" as const,
        mode: 0o644,
        size: blob.descriptor.size,
      },
      data: () => blob.read(),
    })),
    text("index.json", layoutIndex(image, reference)),
    text("oci-layout", new TextEncoder().encode(JSON.stringify({ imageLayoutVersion: "1.0.0" }))),
  ];
}

/** What {@link writeArchive} wrote. */
export interface WrittenArchive {
  path: string;
  bytes: number;
  /** SHA256 of the archive file. */
  sha256: string;
}

function writeFailure(path: string, error: unknown): UsageError {
  const code = (error as { code?: string }).code;
  const why = code === "ENOSPC"
    ? "the disk is full; free space there or write it elsewhere"
    : code === "EDQUOT"
    ? "the disk quota is used up; free space there or write it elsewhere"
    : (error as Error).message;
  return new UsageError(`Cannot write the image archive '${path}': ${why}`, { cause: error });
}

/** A failure of io.ts's atomic file, worded for the archive (a full disk said as such). */
function archiveFailure(path: string, error: unknown): Error {
  if (error instanceof InterruptedError) return error;
  const cause = error instanceof UsageError ? error.cause : error;
  const code = (cause as { code?: string } | undefined)?.code;
  if (error instanceof UsageError && code !== "ENOSPC" && code !== "EDQUOT") return error;
  return writeFailure(path, cause ?? error);
}

/**
 * Writes the image as an OCI archive, atomically.
 *
 * @param image the image
 * @param path the archive file
 * @param options the reference it is named by, cancellation, progress (bytes written)
 * @returns the path, size and SHA256
 * @throws {UsageError} when the file cannot be written (a full disk named as such); nothing is left
 * @throws {InterruptedError} when the signal aborts; nothing is left
 */
export async function writeArchive(
  image: AssembledImage,
  path: string,
  options: { reference: string; signal?: AbortSignal; progress?: (bytes: number) => void },
): Promise<WrittenArchive> {
  // io.ts's atomic file: folders made one level at a time, a device (`-o /dev/null`) or a pipe
  // written into, never renamed over, and a link planted where it goes followed as for a snapshot.
  let file: AtomicFile;
  try {
    file = await openAtomicFile(path, 0o644, {
      what: "the image archive",
      ...(options.signal ? { signal: options.signal } : {}),
    });
  } catch (error) {
    throw archiveFailure(path, error);
  }
  const hasher = createHasher();
  try {
    for await (const chunk of tarStream(archiveEntries(image, options.reference))) {
      if (options.signal?.aborted) {
        throw new InterruptedError(
          `Cannot finish the image archive '${path}': interrupted (${
            String((options.signal.reason as Error)?.message ?? options.signal.reason)
          }); nothing was written`,
        );
      }
      await file.write(chunk);
      hasher.update(chunk);
      options.progress?.(hasher.size);
    }
    await file.commit();
  } catch (error) {
    await file.discard();
    throw archiveFailure(path, error);
  }
  return { path, bytes: hasher.size, sha256: hasher.digest().slice("sha256:".length) };
}
