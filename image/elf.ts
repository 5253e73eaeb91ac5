/**
 * What an ELF file says about itself, enough to put it in an image: its machine (which platform a
 * binary is for), its program interpreter and the libraries it needs (`DT_NEEDED`), read from the
 * 64-bit little-endian files of amd64 and arm64.
 *
 * @module
 */

/** ELF machine numbers of the platforms aicr builds for. */
export const ELF_MACHINES: Readonly<Record<string, number>> = { amd64: 0x3e, arm64: 0xb7 };

/** What {@link readElf} found. */
export interface ElfInfo {
  /** `amd64`, `arm64`, or `machine 0x..` for another. */
  architecture: string;
  /** `PT_INTERP`, if any. */
  interpreter?: string;
  /** `DT_NEEDED` sonames, in order. */
  needed: string[];
  /** `DT_SONAME`, if any. */
  soname?: string;
}

/**
 * The architecture an ELF header names.
 *
 * @param header at least the first 20 bytes of the file
 * @returns `amd64`, `arm64`, `machine 0x..`, or undefined when it is not a 64-bit little-endian ELF
 */
export function elfArchitecture(header: Uint8Array): string | undefined {
  if (header.length < 20) return undefined;
  if (header[0] !== 0x7f || header[1] !== 0x45 || header[2] !== 0x4c || header[3] !== 0x46) {
    return undefined;
  }
  if (header[4] !== 2 || header[5] !== 1) return undefined;
  const machine = header[18]! | (header[19]! << 8);
  const found = Object.entries(ELF_MACHINES).find(([, m]) => m === machine);
  return found ? found[0] : `machine 0x${machine.toString(16)}`;
}

interface Segment {
  type: number;
  offset: number;
  vaddr: number;
  filesz: number;
}

function segments(bytes: Uint8Array, view: DataView): Segment[] {
  const phoff = Number(view.getBigUint64(0x20, true));
  const phentsize = view.getUint16(0x36, true);
  const phnum = view.getUint16(0x38, true);
  const out: Segment[] = [];
  for (let i = 0; i < phnum; i++) {
    const at = phoff + i * phentsize;
    if (at + 56 > bytes.length) break;
    out.push({
      type: view.getUint32(at, true),
      offset: Number(view.getBigUint64(at + 8, true)),
      vaddr: Number(view.getBigUint64(at + 16, true)),
      filesz: Number(view.getBigUint64(at + 32, true)),
    });
  }
  return out;
}

function cString(bytes: Uint8Array, at: number): string {
  let end = at;
  while (end < bytes.length && bytes[end] !== 0) end++;
  return new TextDecoder().decode(bytes.subarray(at, end));
}

/**
 * Reads an ELF file's machine, interpreter and needed libraries.
 *
 * @param bytes the whole file
 * @returns what it says, or undefined when it is not a 64-bit little-endian ELF
 */
export function readElf(bytes: Uint8Array): ElfInfo | undefined {
  const architecture = elfArchitecture(bytes);
  if (!architecture || bytes.length < 64) return undefined;
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const all = segments(bytes, view);
  const toOffset = (vaddr: number) => {
    const load = all.find((s) => s.type === 1 && vaddr >= s.vaddr && vaddr < s.vaddr + s.filesz);
    return load ? vaddr - load.vaddr + load.offset : undefined;
  };
  const info: ElfInfo = { architecture, needed: [] };
  const interp = all.find((s) => s.type === 3);
  if (interp) info.interpreter = cString(bytes, interp.offset);
  const dynamic = all.find((s) => s.type === 2);
  if (!dynamic) return info;
  const entries: [number, number][] = [];
  for (let at = dynamic.offset; at + 16 <= dynamic.offset + dynamic.filesz; at += 16) {
    const tag = Number(view.getBigInt64(at, true));
    if (tag === 0) break;
    entries.push([tag, Number(view.getBigUint64(at + 8, true))]);
  }
  const strtab = toOffset(entries.find(([tag]) => tag === 5)?.[1] ?? -1);
  if (strtab === undefined) return info;
  for (const [tag, value] of entries) {
    if (tag === 1) info.needed.push(cString(bytes, strtab + value));
    if (tag === 14) info.soname = cString(bytes, strtab + value);
  }
  return info;
}
