/**
 * Gzip for image layers, the same bytes on every machine and runtime: a pure-JavaScript deflate
 * (`fflate`) at one fixed level, no file name and a zero modification time in the header. Native
 * zlib is not used because its output differs between builds of it (Node's Chromium zlib picks
 * its hash by CPU feature; Deno's is another zlib again): a layer compressed by the release and by
 * an operator's `aicr image push` must have one digest. Level 4 gives the size Node's native
 * `gzip -6` gives on the aicr binary (40.5 MiB of 107.8), at about 1.2 times its time.
 *
 * @module
 */
import { Gzip } from "fflate";

/** The deflate level of every layer aicr writes. Changing it changes every digest. */
export const LAYER_GZIP_LEVEL = 4;

/**
 * Compresses a stream.
 *
 * @param source the uncompressed chunks
 * @returns the gzip stream's chunks
 */
export async function* gzipStream(source: AsyncIterable<Uint8Array>): AsyncIterable<Uint8Array> {
  const out: Uint8Array[] = [];
  const gzip = new Gzip({ level: LAYER_GZIP_LEVEL, mtime: 0 }, (chunk) => {
    out.push(chunk);
  });
  for await (const chunk of source) {
    // fflate copies what it is given into its own window, so a reused buffer is safe.
    gzip.push(chunk);
    while (out.length) yield out.shift()!;
  }
  gzip.push(new Uint8Array(0), true);
  while (out.length) yield out.shift()!;
}

/**
 * Compresses bytes held in memory.
 *
 * @param bytes the content
 * @returns the gzip bytes
 */
export async function gzipBytes(bytes: Uint8Array): Promise<Uint8Array> {
  const parts: Uint8Array[] = [];
  let size = 0;
  for await (const chunk of gzipStream(once(bytes))) {
    parts.push(chunk);
    size += chunk.length;
  }
  const out = new Uint8Array(size);
  let at = 0;
  for (const part of parts) {
    out.set(part, at);
    at += part.length;
  }
  return out;
}

async function* once(bytes: Uint8Array): AsyncIterable<Uint8Array> {
  yield bytes;
}
