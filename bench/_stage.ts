/**
 * Staging a built binary for a measurement, as a container runtime would unpack it.
 *
 * @module
 */
import { createReadStream, createWriteStream } from "node:fs";
import { join } from "node:path";
import { pipeline } from "node:stream/promises";

/**
 * Copies a binary into the work folder in 64 KiB writes, as a container runtime unpacking an image
 * layer does. How a file was written decides its peak RSS: a file written in one large write (a
 * linker's, postject's) sits in the page cache as large folios, and every page of a folio a process
 * touches counts whole (measured here: 86 MiB for our `version` run from the file postject wrote,
 * 58 MiB from a 64 KiB-chunk copy of it; upstream 65 vs 41 MiB). Every binary compared is staged
 * the same way.
 */
export async function stage(binary: string, dir: string, name: string): Promise<string> {
  const out = join(dir, name);
  await pipeline(
    createReadStream(binary, { highWaterMark: 64 * 1024 }),
    createWriteStream(out, { mode: 0o755 }),
  );
  return out;
}
