/**
 * The OS collector: `grub` (/proc/cmdline), `sysctl` (/proc/sys), `kmod` (/proc/modules)
 * and `release` (/etc/os-release), read through a {@link HostReader} so a host-root
 * prefix (a pod's `/host` mount, or a fixture tree) works.
 *
 * @module
 */
import type { Measurement, ReadingMap, SourceStatus, Subtype } from "../snapshot/mod.ts";
import { setOwn } from "../snapshot/mod.ts";
import { ToolError } from "../errors.ts";
import { decodeUtf8, messageOf, statusOf, subtype, throwIfAborted } from "./status.ts";
import type { CollectorDeps, HostReader } from "./types.ts";

/** Upstream's file parser bound: larger files are rejected. */
export const MAX_OS_FILE_BYTES = 1 << 20;
/** The four OS subtypes, in order. */
export const OS_SUBTYPES = ["grub", "sysctl", "kmod", "release"] as const;
/** Kernel command-line keys removed for privacy. */
export const GRUB_REMOVED_KEYS: readonly string[] = ["root"];
const SYSCTL_ROOT = "/proc/sys";
const SYSCTL_EXCLUDED_DIRS: readonly string[] = ["/proc/sys/net"];
const SYSCTL_EXCLUDED_PREFIXES: readonly string[] = ["/proc/sys/dev/cdrom/"];
const RELEASE_PATHS = ["/etc/os-release", "/usr/lib/os-release"] as const;
const SYSCTL_READ_CONCURRENCY = 32;

/**
 * Upstream's shared line parser: split on a delimiter, trim each piece, and drop
 * empty pieces and pieces starting with `#`.
 *
 * @param text file content
 * @param delimiter the separator, `\n` for lines
 * @returns the kept pieces
 */
export function splitPieces(text: string, delimiter = "\n"): string[] {
  return text.split(delimiter).map((piece) => piece.trim()).filter((piece) =>
    piece !== "" && !piece.startsWith("#")
  );
}

/**
 * Parses `/proc/cmdline`: tokens split on the first `=`, key-only tokens give `""`,
 * the last duplicate wins and `root` is removed.
 *
 * @param text the command line
 * @returns readings (all strings)
 */
export function parseCmdline(text: string): ReadingMap {
  const data: ReadingMap = {};
  for (const token of splitPieces(text.replace(/\n/g, " "), " ")) {
    const eq = token.indexOf("=");
    const key = eq < 0 ? token : token.slice(0, eq);
    if (key === "") continue;
    setOwn(data, key, eq < 0 ? "" : token.slice(eq + 1));
  }
  for (const key of GRUB_REMOVED_KEYS) delete data[key];
  return data;
}

/**
 * Parses `/proc/modules`: the first field of each line, as bool `true`.
 *
 * @param text the module list
 * @returns readings (all `true`)
 */
export function parseModules(text: string): ReadingMap {
  const data: ReadingMap = {};
  for (const line of splitPieces(text)) {
    const name = line.split(/\s+/)[0];
    if (name) setOwn(data, name, true);
  }
  return data;
}

/**
 * Parses an os-release file: `KEY=VALUE` lines, values trimmed of `"` and `'` at both
 * ends; comments, key-only lines and empty values are skipped.
 *
 * @param text the file
 * @returns readings (all strings)
 */
export function parseOsRelease(text: string): ReadingMap {
  const data: ReadingMap = {};
  for (const line of splitPieces(text)) {
    const eq = line.indexOf("=");
    if (eq <= 0) continue;
    const key = line.slice(0, eq).trim();
    const value = line.slice(eq + 1).trim().replace(/^["']+|["']+$/g, "");
    if (key !== "" && value !== "") setOwn(data, key, value);
  }
  return data;
}

/**
 * Turns one sysctl file's content into readings. Usually `{path: content}` with lines
 * joined by `\n`; when the file has several lines and every line has two or more
 * whitespace-separated fields, one reading per line under `<path>/<first-field>`.
 *
 * @param path the file's full path, the key
 * @param text its content
 * @returns readings (all strings)
 */
export function parseSysctlFile(path: string, text: string): ReadingMap {
  const data: ReadingMap = {};
  addSysctlFile(data, path, text);
  return data;
}

/**
 * Adds one sysctl file's readings ({@link parseSysctlFile}) to the walk's readings in place
 * (paths start with `/proc/sys/`, so a plain assignment is an own property), without a record
 * per file: each file's own record with its own key gave V8 a new object shape per file.
 */
function addSysctlFile(data: ReadingMap, path: string, text: string): void {
  const newline = text.indexOf("\n");
  if (newline < 0 || newline === text.length - 1) {
    // One line at most: its trimmed text, or nothing when blank or a comment.
    const line = text.trim();
    data[path] = line === "" || line.startsWith("#") ? "" : line;
    return;
  }
  const lines = splitPieces(text);
  if (lines.length > 1) {
    const fields = lines.map((line) => line.split(/\s+/));
    if (fields.every((f) => f.length >= 2)) {
      for (const f of fields) data[`${path}/${f[0]}`] = f.slice(1).join(" ");
      return;
    }
  }
  data[path] = lines.join("\n");
}

/** Result of {@link readSysctl}. */
export interface SysctlResult {
  /** Readings by full path. */
  data: ReadingMap;
  /** Files skipped because they were unreadable, oversized or not UTF-8. */
  skipped: number;
  /** Files read. */
  files: number;
}

/**
 * Walks `/proc/sys` (without `net` and `dev/cdrom`), skipping symlinks and unreadable,
 * oversized or non-UTF-8 files.
 *
 * @param host the host reader
 * @param signal aborts the walk
 * @returns readings and counts
 * @throws {ToolError} when a directory cannot be listed (the whole subtype fails)
 */
export async function readSysctl(host: HostReader, signal?: AbortSignal): Promise<SysctlResult> {
  const files: string[] = [];
  async function walk(dir: string): Promise<void> {
    throwIfAborted(signal, "sysctl");
    const entries = await host.readDir(dir);
    const subdirs: string[] = [];
    // Indexed: see `child()` in xml.ts.
    for (let i = 0; i < entries.length; i++) {
      const entry = entries[i] as (typeof entries)[number];
      const full = `${dir}/${entry.name}`;
      if (entry.isSymlink) continue;
      if (entry.isDirectory) {
        if (!SYSCTL_EXCLUDED_DIRS.includes(full)) subdirs.push(full);
      } else if (entry.isFile) {
        if (!SYSCTL_EXCLUDED_PREFIXES.some((prefix) => full.startsWith(prefix))) files.push(full);
      }
    }
    await Promise.all(subdirs.map(walk));
  }
  await walk(SYSCTL_ROOT);
  files.sort();
  throwIfAborted(signal, "sysctl");
  const texts = host.readTexts
    ? await host.readTexts(files, MAX_OS_FILE_BYTES)
    : await readEach(host, files, signal);
  const data: ReadingMap = {};
  let skipped = 0;
  files.forEach((file, index) => {
    const text = texts[index];
    if (text === undefined) skipped++;
    else addSysctlFile(data, file, text);
  });
  return { data, skipped, files: files.length };
}

/** Reads each file with `readFile`, a few at a time: its text, or undefined when unreadable. */
async function readEach(
  host: HostReader,
  files: readonly string[],
  signal?: AbortSignal,
): Promise<(string | undefined)[]> {
  const texts = new Array<string | undefined>(files.length);
  let next = 0;
  async function worker(): Promise<void> {
    while (next < files.length) {
      const index = next++;
      throwIfAborted(signal, "sysctl");
      texts[index] = await readText(host, files[index] as string).catch(() => undefined);
    }
  }
  await Promise.all(Array.from({ length: SYSCTL_READ_CONCURRENCY }, worker));
  return texts;
}

async function readText(host: HostReader, path: string): Promise<string> {
  const bytes = await host.readFile(path, MAX_OS_FILE_BYTES);
  const text = decodeUtf8(bytes);
  if (text === undefined) {
    throw new ToolError(`Cannot read '${path}': it is not valid UTF-8`, "usage", 415);
  }
  return text;
}

async function fileSubtype(
  host: HostReader,
  name: string,
  path: string,
  parse: (text: string) => ReadingMap,
): Promise<Subtype> {
  try {
    return subtype(name, parse(await readText(host, path)), "ok", path);
  } catch (error) {
    return subtype(name, {}, statusOf(error), path, messageOf(error));
  }
}

async function releaseSubtype(host: HostReader): Promise<Subtype> {
  const [primary, fallback] = RELEASE_PATHS;
  // Upstream falls back only when the primary does not exist, not when it is unreadable.
  const path = (await host.exists(primary)) || !(await host.exists(fallback)) ? primary : fallback;
  return await fileSubtype(host, "release", path, parseOsRelease);
}

async function sysctlSubtype(host: HostReader, signal?: AbortSignal): Promise<Subtype> {
  try {
    const { data, skipped, files } = await readSysctl(host, signal);
    const message = skipped > 0
      ? `${skipped} of ${files} files skipped (unreadable, oversized or not UTF-8)`
      : undefined;
    return subtype("sysctl", data, "ok", SYSCTL_ROOT, message);
  } catch (error) {
    return subtype("sysctl", {}, statusOf(error), SYSCTL_ROOT, messageOf(error));
  }
}

/**
 * The OS measurement when the collector as a whole could not finish.
 *
 * @param status why
 * @param message one line of detail
 * @returns four empty subtypes carrying the status
 */
export function osUnavailable(status: SourceStatus, message: string): Measurement {
  const sources = ["/proc/cmdline", SYSCTL_ROOT, "/proc/modules", RELEASE_PATHS[0]];
  return {
    type: "OS",
    subtypes: OS_SUBTYPES.map((name, i) =>
      subtype(name, {}, status, sources[i] as string, message)
    ),
  };
}

/**
 * Reads the four OS sources concurrently. Never throws: a failing source gives its
 * subtype with `data: {}` and a non-ok status.
 *
 * @param deps the host reader
 * @param options the signal
 * @returns the measurement, subtypes in upstream order
 */
export async function collectOs(
  deps: Pick<CollectorDeps, "host">,
  options: { signal?: AbortSignal } = {},
): Promise<Measurement> {
  const { host } = deps;
  const subtypes = await Promise.all([
    fileSubtype(host, "grub", "/proc/cmdline", parseCmdline),
    sysctlSubtype(host, options.signal),
    fileSubtype(host, "kmod", "/proc/modules", parseModules),
    releaseSubtype(host),
  ]);
  return { type: "OS", subtypes };
}
