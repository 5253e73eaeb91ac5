/**
 * The record `scripts/build.ts` writes beside each binary (`<binary>.build.json`): its version,
 * commit, architecture and the digest of the bundle sealed in it. Two binaries of one tree have
 * the same bundle digest whatever their architecture, so the record tells the test world whether
 * `dist/aicr-linux-arm64` is the build under test or one left from an earlier commit (a stale one
 * runs on the arm64 nodes and reports another commit: `daemonset fetch` calls it wrong-build).
 *
 * @module
 */
import { readFileSync } from "node:fs";
import { writeFile } from "node:fs/promises";
import { basename } from "node:path";

/** What a binary was built from. */
export interface BuildRecord {
  version: string;
  commit: string;
  /** `linux/<arch>`. */
  platform: string;
  /** SHA-256 of the bundle sealed in the binary: the same for every architecture of one tree. */
  bundleSha256: string;
}

/**
 * The record's path beside a binary.
 *
 * @param binary the binary's path
 * @returns `<binary>.build.json`
 */
export function buildRecordPath(binary: string): string {
  return `${binary}.build.json`;
}

/**
 * Writes a binary's record.
 *
 * @param binary the binary's path
 * @param record what it was built from
 */
export async function writeBuildRecord(binary: string, record: BuildRecord): Promise<void> {
  await writeFile(buildRecordPath(binary), JSON.stringify(record, null, 2) + "\n");
}

/**
 * Reads a binary's record.
 *
 * @param binary the binary's path
 * @returns the record, or undefined when there is none (built before records, or elsewhere)
 */
export function readBuildRecord(binary: string): BuildRecord | undefined {
  try {
    const record = JSON.parse(readFileSync(buildRecordPath(binary), "utf8")) as BuildRecord;
    return typeof record.bundleSha256 === "string" ? record : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Why `other` is not the same build as `underTest`, or undefined when it is. A binary under test
 * without a record (`$AICR_BIN` built elsewhere) cannot be compared and is taken as is.
 *
 * @param other another architecture's binary
 * @param underTest the binary under test
 * @returns the reason, naming both commits and the rebuild, or undefined
 */
export function otherBuildReason(other: string, underTest: string): string | undefined {
  const want = readBuildRecord(underTest);
  if (!want) return undefined;
  const got = readBuildRecord(other);
  if (got?.bundleSha256 === want.bundleSha256) return undefined;
  const arch = got?.platform.replace(/^linux\//, "");
  const which = got ? `commit ${got.commit}` : "no build record: built before records";
  return `${basename(other)} is another build than ${basename(underTest)} under test (${which}; ` +
    `${basename(underTest)} is commit ${want.commit}): rebuild it with ` +
    `'deno run -A scripts/build.ts --arch ${arch ?? "all"}'`;
}
