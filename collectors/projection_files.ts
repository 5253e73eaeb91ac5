/**
 * Reading the controller-side projection files (a cloud CLI's dump of OKE add-ons, AKS or GKE GPU
 * node pools): every file read and projected before a run contacts a cluster, so a bad one fails
 * with exit 2 and nothing created. Parsing is `projections.ts`; messages name each projection's
 * flag, which `PROJECTIONS` carries as data.
 *
 * @module
 */
import { open } from "node:fs/promises";
import { resolve } from "node:path";
import { UsageError } from "../errors.ts";
import type { Subtype } from "../snapshot/mod.ts";
import {
  MAX_PROJECTION_BYTES,
  projectAksGpuPools,
  projectGkeGpuPools,
  PROJECTIONS,
  projectOkeAddons,
} from "./projections.ts";

/**
 * The projection files a run names, by projection (`aicr snapshot`'s and `aicr agent`'s
 * `--oke-addons`, `--aks-gpu-pools`, `--gke-gpu-pools`).
 */
export interface ProjectionFiles {
  /** `--oke-addons <path>`. */
  okeAddons?: string | undefined;
  /** `--aks-gpu-pools <path>`. */
  aksGpuPools?: string | undefined;
  /** `--gke-gpu-pools <path>`. */
  gkeGpuPools?: string | undefined;
}

/** Reads a whole text file. */
export type ReadTextFile = (path: string) => Promise<string>;

const READERS = [
  ["okeAddons", projectOkeAddons],
  ["aksGpuPools", projectAksGpuPools],
  ["gkeGpuPools", projectGkeGpuPools],
] as const;

function reasonOf(error: unknown): string {
  const code = (error as { code?: unknown } | null)?.code;
  if (code === "ENOENT") return "no such file";
  if (code === "EACCES" || code === "EPERM") return "permission denied";
  if (code === "EISDIR") return "it is a directory";
  return error instanceof Error ? error.message : String(error);
}

/**
 * Reads every projection file given and projects it, in flag order (OKE, AKS, GKE).
 *
 * @param flags the projection flags; unset ones are skipped
 * @param readFile reads a file as text (see {@link createProjectionFileReader})
 * @returns the projected K8s subtypes, possibly none
 * @throws {UsageError} naming the flag and the path when a file cannot be read or is
 *   not the expected JSON (exit 2)
 */
export async function readProjections(
  flags: ProjectionFiles,
  readFile: ReadTextFile,
): Promise<Subtype[]> {
  const given = READERS.flatMap(([key, project]) => {
    const path = flags[key];
    return path === undefined ? [] : [{ flag: PROJECTIONS[key].flag, path, project }];
  });
  // Read at once, but report the first failure in flag order, whatever finished first.
  const settled = await Promise.allSettled(given.map(async ({ flag, path, project }) => {
    if (path.trim() === "") {
      throw new UsageError(`Cannot read '${flag}' as it must name a file: current value is ''`);
    }
    let text: string;
    try {
      text = await readFile(path);
    } catch (error) {
      throw new UsageError(`Cannot read '${flag}' file '${path}': ${reasonOf(error)}`, {
        cause: error,
      });
    }
    return project(text, path);
  }));
  return settled.map((result) => {
    if (result.status === "rejected") throw result.reason;
    return result.value;
  });
}

/**
 * The real file reader: resolves a path against the working directory and reads at
 * most `maxBytes` (pipes such as `<(az aks nodepool list -o json)` work too). UTF-16
 * files with a byte order mark (PowerShell's `>`) are decoded; UTF-8 is the default.
 *
 * @param cwd the working directory for relative paths
 * @param maxBytes the largest file read @default MAX_PROJECTION_BYTES
 * @returns the reader
 */
export function createProjectionFileReader(
  cwd: string,
  maxBytes: number = MAX_PROJECTION_BYTES,
): ReadTextFile {
  return async (path) => {
    const file = await open(resolve(cwd, path), "r");
    try {
      const chunks: Uint8Array[] = [];
      let total = 0;
      while (true) {
        const chunk = new Uint8Array(64 * 1024);
        const { bytesRead } = await file.read(chunk, 0, chunk.length, null);
        if (bytesRead === 0) break;
        total += bytesRead;
        if (total > maxBytes) {
          throw new RangeError(`it is larger than ${maxBytes} bytes`);
        }
        chunks.push(chunk.subarray(0, bytesRead));
      }
      const bytes = new Uint8Array(total);
      let offset = 0;
      for (const chunk of chunks) {
        bytes.set(chunk, offset);
        offset += chunk.length;
      }
      const encoding = bytes[0] === 0xff && bytes[1] === 0xfe
        ? "utf-16le"
        : bytes[0] === 0xfe && bytes[1] === 0xff
        ? "utf-16be"
        : "utf-8";
      return new TextDecoder(encoding).decode(bytes);
    } finally {
      await file.close();
    }
  };
}
