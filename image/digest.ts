/**
 * Content digests as OCI writes them (`sha256:<64 hex>`), of bytes or of a stream, and a hashing
 * pass-through for streams that are written and digested at once.
 *
 * @module
 */
import { createHash } from "node:crypto";

/** An OCI content digest: `sha256:` and 64 lowercase hex digits. */
export type Digest = `sha256:${string}`;

const DIGEST_REGEXP = /^sha256:[0-9a-f]{64}$/;

/**
 * Whether a text is a sha256 digest.
 *
 * @param text the text
 * @returns true for `sha256:<64 hex>`
 */
export function isDigest(text: string): text is Digest {
  return DIGEST_REGEXP.test(text);
}

/**
 * The digest of bytes.
 *
 * @param bytes the content
 * @returns `sha256:<hex>`
 */
export function digestOf(bytes: Uint8Array): Digest {
  return `sha256:${createHash("sha256").update(bytes).digest("hex")}`;
}

/** Counts and hashes the bytes that pass through it. */
export interface Hasher {
  /** Adds bytes. */
  update(bytes: Uint8Array): void;
  /** Bytes seen so far. */
  readonly size: number;
  /** The digest of what was seen (call once, at the end). */
  digest(): Digest;
}

/**
 * A running sha256 with a byte count.
 *
 * @returns the hasher
 */
export function createHasher(): Hasher {
  const hash = createHash("sha256");
  let size = 0;
  return {
    update(bytes) {
      hash.update(bytes);
      size += bytes.length;
    },
    get size() {
      return size;
    },
    digest: () => `sha256:${hash.digest("hex")}`,
  };
}

/**
 * Passes chunks on while hashing them.
 *
 * @param source the chunks
 * @param hasher where they are counted
 * @returns the same chunks
 */
export async function* hashing(
  source: AsyncIterable<Uint8Array>,
  hasher: Hasher,
): AsyncIterable<Uint8Array> {
  for await (const chunk of source) {
    hasher.update(chunk);
    yield chunk;
  }
}
