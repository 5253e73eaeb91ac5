/**
 * Which test files the test command runs, and why any other is not run. Every file deno test would
 * take for a test file (`*_test.ts`, `*.test.ts`, `test.ts`) belongs to exactly one lane, or is
 * named in a not-run list with its reason; a file that looks like a test but deno test would never
 * find (`*_tests.ts`, `*-test.ts`, a file calling `Deno.test` under another name), or a test file in
 * a folder deno.json excludes, is a problem the run reports and fails on.
 *
 * @module
 */
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { join, posix } from "node:path";

/** A group of test files run the same way, e.g. unit tests or tests against the local cluster. */
export interface Lane {
  /** Short name, used by `AICR_SKIP_LANES` and in the output. */
  name: string;
  /** What runs in it. */
  description: string;
  /** Whether a test file (repository-relative, `/`-separated) belongs here. */
  match: (path: string) => boolean;
  /** Files run at the same time. */
  jobs: number;
  /** A file whose `deno test` has not ended by then is stopped and fails, named. */
  deadlineMs: number;
  /** Needs the local cluster started by the run. */
  needsCluster: boolean;
  /**
   * Why the lane cannot run on this machine, or undefined when it can. A lane that says why is
   * skipped, named in the output with the reason; under `CI=true` that fails the run.
   */
  unavailable?: () => Promise<string | undefined>;
}

/** What {@link discoverTests} found. */
export interface Discovery {
  /** Test files per lane name, sorted by path. */
  lanes: Map<string, string[]>;
  /** Test files the run leaves out on purpose, with the reason. */
  notRun: { path: string; reason: string }[];
  /** Files that look like tests but would not run, and stale not-run entries: each fails the run. */
  problems: string[];
}

const CODE_REGEXP = /\.(ts|tsx|mts|js|mjs|jsx)$/;
/** deno test's default pattern: `{*_,*.,}test.{ts,tsx,mts,js,mjs,jsx}`. */
const TEST_NAME_REGEXP = /(^|[_.])test\.(ts|tsx|mts|js|mjs|jsx)$/;
/** Names that read as tests but that deno test never takes. */
const LOOKS_LIKE_TEST_REGEXP =
  /([_.-](tests|spec|specs)|-test)\.(ts|tsx|mts|js|mjs|jsx)$|^tests?[_.-].*\.(ts|tsx|mts|js|mjs|jsx)$/;
const CALLS_DENO_TEST_REGEXP = /\bDeno\.test\s*[(.]/;
const SKIP_WALKING = new Set([".git", "node_modules"]);

/**
 * Lists the repository's files: tracked and untracked-but-not-ignored ones when it is a git
 * checkout, otherwise every file outside `.git` and `node_modules`.
 *
 * @param root the repository
 * @returns repository-relative, `/`-separated paths
 */
export async function listRepositoryFiles(root: string): Promise<string[]> {
  if (existsSync(join(root, ".git"))) {
    const out = await new Deno.Command("git", {
      args: ["ls-files", "-z", "--cached", "--others", "--exclude-standard"],
      cwd: root,
      stdout: "piped",
      stderr: "piped",
    }).output();
    if (out.success) {
      const listed = new TextDecoder().decode(out.stdout).split("\0").filter((p) => p !== "");
      // A tracked file deleted in the work tree is listed too; only what exists counts.
      return [...new Set(listed)].filter((p) => existsSync(join(root, p))).sort();
    }
  }
  const found: string[] = [];
  const walk = (dir: string) => {
    for (const entry of readdirSync(join(root, dir), { withFileTypes: true })) {
      if (SKIP_WALKING.has(entry.name)) continue;
      const path = dir ? `${dir}/${entry.name}` : entry.name;
      if (entry.isDirectory()) walk(path);
      else if (entry.isFile()) found.push(path);
    }
  };
  walk("");
  return found.sort();
}

/**
 * The `exclude` patterns of the repository's deno.json (top level and `test.exclude`) as a test.
 *
 * @param root the repository
 * @returns whether deno test leaves a path out
 */
export function denoExcludes(root: string): (path: string) => boolean {
  const file = join(root, "deno.json");
  if (!existsSync(file)) return () => false;
  const config = JSON.parse(readFileSync(file, "utf8")) as {
    exclude?: string[];
    test?: { exclude?: string[] };
  };
  const patterns = [...(config.exclude ?? []), ...(config.test?.exclude ?? [])].map(globRegExp);
  return (path) => patterns.some((re) => re.test(path));
}

function globRegExp(pattern: string): RegExp {
  const clean = posix.normalize(pattern.replace(/^\.\//, "")).replace(/\/$/, "");
  const body = clean.split("**").map((part) =>
    part.replace(/[.+^${}()|[\]\\]/g, "\\$&").replace(/\*/g, "[^/]*").replace(/\?/g, "[^/]")
  ).join(".*");
  return new RegExp(`^${body}(/.*)?$`);
}

/**
 * Sorts the repository's test files into lanes.
 *
 * @param root the repository
 * @param files its files ({@link listRepositoryFiles})
 * @param options the lanes (first match wins) and the files left out on purpose, with reasons
 * @returns the lanes' files, the files not run, and the problems
 */
export function discoverTests(
  root: string,
  files: readonly string[],
  options: { lanes: readonly Lane[]; notRun: Readonly<Record<string, string>> },
): Discovery {
  const excluded = denoExcludes(root);
  const lanes = new Map<string, string[]>(options.lanes.map((l) => [l.name, []]));
  const notRun: Discovery["notRun"] = [];
  const problems: string[] = [];
  for (const path of files) {
    const name = posix.basename(path);
    if (!CODE_REGEXP.test(name)) continue;
    const reason = options.notRun[path];
    if (TEST_NAME_REGEXP.test(name)) {
      if (reason !== undefined) {
        notRun.push({ path, reason });
      } else if (excluded(path)) {
        problems.push(
          `${path}: a test file in a folder deno.json excludes, so deno test never runs it ` +
            "(move it, or list it in the runner's not-run list with the reason)",
        );
      } else {
        const lane = options.lanes.find((l) => l.match(path));
        if (lane) lanes.get(lane.name)!.push(path);
        else problems.push(`${path}: a test file no lane takes`);
      }
      continue;
    }
    if (reason !== undefined) {
      problems.push(`${path}: listed as not run, but it is not named as a test file`);
      continue;
    }
    const callsDenoTest = statSync(join(root, path)).size < 4 << 20 &&
      CALLS_DENO_TEST_REGEXP.test(readFileSync(join(root, path), "utf8"));
    if (callsDenoTest || LOOKS_LIKE_TEST_REGEXP.test(name)) {
      problems.push(
        `${path}: ${
          callsDenoTest ? "calls Deno.test" : "is named like a test"
        } but deno test only runs *_test.ts files (rename it, e.g. to ${suggestName(name)})`,
      );
    }
  }
  for (const path of Object.keys(options.notRun)) {
    if (!files.includes(path)) {
      problems.push(`${path}: listed as not run, but there is no such file`);
    }
  }
  for (const list of lanes.values()) list.sort();
  return { lanes, notRun, problems };
}

function suggestName(name: string): string {
  const ext = /\.(ts|tsx|mts|js|mjs|jsx)$/.exec(name)?.[0] ?? ".ts";
  const stem = name.slice(0, -ext.length).replace(/([_.-](tests|spec|specs|test))$/, "")
    .replace(/^tests?[_.-]/, "");
  return `${stem}_test${ext}`;
}
