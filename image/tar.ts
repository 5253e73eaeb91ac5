/**
 * Tar, written deterministically and read back: POSIX ustar headers (a PAX `path` record only for
 * a name ustar cannot hold), fixed owners and times chosen by the caller, no user or group names,
 * two zero blocks at the end and no padding to a record size. The same entries in the same order
 * always give the same bytes, which is what an image layer's digest needs.
 *
 * @module
 */

/** Size of a tar block. */
export const TAR_BLOCK = 512;

/** What kind of entry. */
export type TarEntryType = "file" | "dir" | "symlink";

/** One entry's header. */
export interface TarEntry {
  /** Path without a leading `/` (a directory's may end with `/`; it is added if missing). */
  path: string;
  type: TarEntryType;
  /** Permission bits. */
  mode: number;
  /** Owner. @default 0 */
  uid?: number;
  /** Group. @default 0 */
  gid?: number;
  /** Modification time, seconds since 1970. @default 0 */
  mtime?: number;
  /** A file's size in bytes. @default 0 */
  size?: number;
  /** A symlink's target. */
  linkname?: string;
}

const ENCODER = new TextEncoder();
const DECODER = new TextDecoder();

function octal(value: number, width: number): string {
  if (!Number.isSafeInteger(value) || value < 0 || value >= 8 ** (width - 1)) {
    throw new RangeError(
      `Cannot write a tar header as a number does not fit: current value is ${value}`,
    );
  }
  return value.toString(8).padStart(width - 1, "0") + "\0";
}

function put(block: Uint8Array, offset: number, text: string, width: number): void {
  const bytes = ENCODER.encode(text);
  if (bytes.length > width) {
    throw new RangeError(`Cannot write a tar header field of ${width} bytes: '${text}' is longer`);
  }
  block.set(bytes, offset);
}

/** Splits a long path into ustar's prefix (155) and name (100) at a `/`, if it can. */
function splitPath(path: string): { prefix: string; name: string } | undefined {
  const bytes = ENCODER.encode(path).length;
  if (bytes <= 100) return { prefix: "", name: path };
  for (let i = path.indexOf("/"); i >= 0; i = path.indexOf("/", i + 1)) {
    const prefix = path.slice(0, i);
    const name = path.slice(i + 1);
    if (ENCODER.encode(prefix).length <= 155 && ENCODER.encode(name).length <= 100 && name) {
      return { prefix, name };
    }
  }
  return undefined;
}

function typeFlag(type: TarEntryType): string {
  return type === "file" ? "0" : type === "dir" ? "5" : "2";
}

function headerBlock(entry: TarEntry, name: string, prefix: string, flag: string, size: number) {
  const block = new Uint8Array(TAR_BLOCK);
  put(block, 0, name, 100);
  put(block, 100, octal(entry.mode & 0o7777, 8), 8);
  put(block, 108, octal(entry.uid ?? 0, 8), 8);
  put(block, 116, octal(entry.gid ?? 0, 8), 8);
  put(block, 124, octal(size, 12), 12);
  put(block, 136, octal(entry.mtime ?? 0, 12), 12);
  block.fill(0x20, 148, 156); // the checksum counts its own field as spaces
  put(block, 156, flag, 1);
  if (entry.type === "symlink") put(block, 157, entry.linkname ?? "", 100);
  put(block, 257, "ustar\0", 6);
  put(block, 263, "00", 2);
  put(block, 329, octal(0, 8), 8);
  put(block, 337, octal(0, 8), 8);
  put(block, 345, prefix, 155);
  let sum = 0;
  for (const byte of block) sum += byte;
  put(block, 148, sum.toString(8).padStart(6, "0") + "\0 ", 8);
  return block;
}

/** A PAX extended header holding one `path` record. */
function paxPath(entry: TarEntry, path: string): Uint8Array {
  // The record's length counts its own digits: grow it until it is stable.
  const body = ` path=${path}\n`;
  let length = ENCODER.encode(body).length;
  while (String(length).length + ENCODER.encode(body).length !== length) {
    length = String(length).length + ENCODER.encode(body).length;
  }
  const record = ENCODER.encode(`${length}${body}`);
  const pax = headerBlock(
    { path: "", type: "file", mode: 0o644, mtime: entry.mtime ?? 0 },
    "PaxHeader",
    "",
    "x",
    record.length,
  );
  return concat([pax, record, new Uint8Array(padding(record.length))]);
}

/**
 * The bytes of zero padding after a file's data.
 *
 * @param size the data's size
 * @returns 0 to 511
 */
export function padding(size: number): number {
  return (TAR_BLOCK - (size % TAR_BLOCK)) % TAR_BLOCK;
}

/**
 * The header of one entry: one ustar block, or a PAX `path` record first when the path does not
 * fit ustar's name and prefix.
 *
 * @param entry the entry
 * @returns the header bytes (a multiple of 512)
 * @throws {RangeError} when a number or a symlink target does not fit
 */
export function tarHeader(entry: TarEntry): Uint8Array {
  let path = entry.path.replace(/^\/+/, "");
  if (entry.type === "dir" && !path.endsWith("/")) path += "/";
  const size = entry.type === "file" ? entry.size ?? 0 : 0;
  const flag = typeFlag(entry.type);
  const split = splitPath(path);
  if (split) return headerBlock(entry, split.name, split.prefix, flag, size);
  const short = path.slice(0, 99);
  return concat([paxPath(entry, path), headerBlock(entry, short, "", flag, size)]);
}

/** The end of an archive: two zero blocks. */
export const TAR_END: Uint8Array = new Uint8Array(2 * TAR_BLOCK);

/** A file's content for {@link tarStream}: bytes, or chunks read on demand. */
export type TarData = Uint8Array | (() => AsyncIterable<Uint8Array>);

/**
 * Streams an archive: each entry's header, its data (checked against its size) and padding, then
 * the end blocks. The caller chooses the order.
 *
 * @param entries the entries, with a file's data
 * @returns the archive's bytes, in pieces
 * @throws {RangeError} when a file's data is not the size its entry says
 */
export async function* tarStream(
  entries: Iterable<{ entry: TarEntry; data?: TarData }>,
): AsyncIterable<Uint8Array> {
  for (const { entry, data } of entries) {
    const size = entry.type === "file" ? entry.size ?? 0 : 0;
    yield tarHeader(entry);
    if (entry.type !== "file") continue;
    let written = 0;
    if (data instanceof Uint8Array) {
      written = data.length;
      if (written === size) yield data;
    } else if (data) {
      for await (const chunk of data()) {
        written += chunk.length;
        if (written > size) break;
        yield chunk;
      }
    }
    if (written !== size) {
      throw new RangeError(
        `Cannot write '${entry.path}' into a tar: it has ${written} bytes where its entry says ${size}`,
      );
    }
    const pad = padding(size);
    if (pad) yield new Uint8Array(pad);
  }
  yield TAR_END;
}

/** One entry read back by {@link readTar}. */
export interface TarMember {
  entry: TarEntry;
  /** A file's data (a view into the archive). */
  data: Uint8Array;
}

function field(block: Uint8Array, offset: number, width: number): string {
  const bytes = block.subarray(offset, offset + width);
  const end = bytes.indexOf(0);
  return DECODER.decode(end < 0 ? bytes : bytes.subarray(0, end));
}

function number(block: Uint8Array, offset: number, width: number): number {
  const text = field(block, offset, width).trim();
  return text ? parseInt(text, 8) : 0;
}

function paxRecords(data: Uint8Array): Map<string, string> {
  const records = new Map<string, string>();
  const text = DECODER.decode(data);
  for (const line of text.split("\n")) {
    const match = /^\d+ ([^=]+)=(.*)$/s.exec(line);
    if (match) records.set(match[1]!, match[2]!);
  }
  return records;
}

/**
 * Reads an archive held in memory: ustar, PAX `path`/`linkpath` records and GNU long names (as
 * `dpkg-deb --fsys-tarfile` writes). Hard links are reported as symlinks to their target's path;
 * other entry kinds (devices, fifos) are skipped. Leading `./` is dropped from paths.
 *
 * @param archive the tar
 * @returns the entries in archive order
 * @throws {SyntaxError} when a header's checksum is wrong or the archive is cut short
 */
export function readTar(archive: Uint8Array): TarMember[] {
  const members: TarMember[] = [];
  let offset = 0;
  let longName: string | undefined;
  let longLink: string | undefined;
  let pax = new Map<string, string>();
  while (offset + TAR_BLOCK <= archive.length) {
    const block = archive.subarray(offset, offset + TAR_BLOCK);
    if (block.every((b) => b === 0)) break;
    checkSum(block, offset);
    const size = number(block, 124, 12);
    const flag = String.fromCharCode(block[156] ?? 0x30);
    const start = offset + TAR_BLOCK;
    if (start + size > archive.length) {
      throw new SyntaxError(`Cannot read a tar: the entry at byte ${offset} is cut short`);
    }
    const data = archive.subarray(start, start + size);
    offset = start + size + padding(size);
    if (flag === "L" || flag === "K") {
      const text = DECODER.decode(data).replace(/\0+$/, "");
      if (flag === "L") longName = text;
      else longLink = text;
      continue;
    }
    if (flag === "x") {
      pax = paxRecords(data);
      continue;
    }
    if (flag === "g") continue;
    const prefix = field(block, 345, 155);
    const rawName = pax.get("path") ?? longName ??
      (prefix ? `${prefix}/${field(block, 0, 100)}` : field(block, 0, 100));
    const linkname = pax.get("linkpath") ?? longLink ?? field(block, 157, 100);
    longName = longLink = undefined;
    pax = new Map();
    const type: TarEntryType | undefined = flag === "0" || flag === "\0" || flag === "7"
      ? "file"
      : flag === "5"
      ? "dir"
      : flag === "2" || flag === "1"
      ? "symlink"
      : undefined;
    if (!type) continue;
    const path = rawName.replace(/^\.\//, "").replace(/^\/+/, "");
    if (!path || path === ".") continue;
    members.push({
      entry: {
        path,
        type,
        mode: number(block, 100, 8),
        uid: number(block, 108, 8),
        gid: number(block, 116, 8),
        mtime: number(block, 136, 12),
        size: type === "file" ? size : 0,
        ...(type === "symlink"
          ? { linkname: flag === "1" ? "/" + linkname.replace(/^\.\//, "") : linkname }
          : {}),
      },
      data: type === "file" ? data : new Uint8Array(0),
    });
  }
  return members;
}

function checkSum(block: Uint8Array, offset: number): void {
  let sum = 0;
  for (let i = 0; i < TAR_BLOCK; i++) sum += i >= 148 && i < 156 ? 0x20 : block[i]!;
  if (sum !== number(block, 148, 8)) {
    throw new SyntaxError(`Cannot read a tar: the header at byte ${offset} has a wrong checksum`);
  }
}

/**
 * Joins byte arrays.
 *
 * @param parts the pieces
 * @returns one array
 */
export function concat(parts: readonly Uint8Array[]): Uint8Array {
  let length = 0;
  for (const part of parts) length += part.length;
  const out = new Uint8Array(length);
  let at = 0;
  for (const part of parts) {
    out.set(part, at);
    at += part.length;
  }
  return out;
}
