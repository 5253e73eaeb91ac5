/**
 * The user documentation as data: the pages (README.md, docs/*.md), their fenced `sh` blocks that a
 * `<!-- runnable -->` line marks (run by `tests/e2e/docs_test.ts`), and their relative links.
 *
 * @module
 */
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

/** The repository root. */
export const ROOT: string = resolve(dirname(fileURLToPath(import.meta.url)), "..");

/** The marker line before a runnable block; `<!-- runnable: release -->` asks for a release folder. */
const MARKER_REGEXP = /^<!-- runnable(?::\s*([a-z-]+))? -->$/;

/** One runnable `sh` block of a page. */
export interface RunnableBlock {
  /** The page, relative to the root. */
  page: string;
  /** The line of the opening fence (1-based). */
  line: number;
  /** What the block needs staged first (`release`: a release folder in its working folder). */
  needs?: string;
  /** The commands. */
  script: string;
}

/** The user pages, README first, then docs/ by name: the order their blocks run in. */
export function userPages(): string[] {
  const docs = readdirSync(join(ROOT, "docs")).filter((f) => f.endsWith(".md")).sort();
  return ["README.md", ...docs.map((f) => `docs/${f}`)];
}

/**
 * The runnable blocks of a page. A marker not followed (on the next line) by a fenced `sh` block
 * is an error, so a typo cannot silently leave a block out.
 *
 * @param page the page, relative to the root
 * @returns its blocks, in order
 * @throws {Error} naming the page and line of a marker without its block
 */
export function runnableBlocks(page: string): RunnableBlock[] {
  const lines = readFileSync(join(ROOT, page), "utf8").split("\n");
  const blocks: RunnableBlock[] = [];
  lines.forEach((text, index) => {
    const marker = MARKER_REGEXP.exec(text.trim());
    if (!marker && !text.startsWith("<!-- runnable")) return;
    // deno fmt puts one blank line between the marker and the fence.
    const fence = lines[index + 1] === "" ? index + 2 : index + 1;
    if (!marker || lines[fence] !== "```sh") {
      throw new Error(
        `${page}:${index + 1}: a runnable marker must be followed by a \`\`\`sh block`,
      );
    }
    const end = lines.indexOf("```", fence + 1);
    if (end < 0) throw new Error(`${page}:${fence + 1}: the sh block is not closed`);
    blocks.push({
      page,
      line: fence + 1,
      ...(marker[1] ? { needs: marker[1] } : {}),
      script: lines.slice(fence + 1, end).join("\n") + "\n",
    });
  });
  return blocks;
}

/** Every relative link `[text](target)` of a page, without its `#anchor`. */
export function relativeLinks(page: string): string[] {
  const text = readFileSync(join(ROOT, page), "utf8");
  return [...text.matchAll(/\]\(([^)\s]+)\)/g)]
    .map((m) => m[1]!)
    .filter((target) => !/^[a-z]+:/.test(target) && !target.startsWith("#"))
    .map((target) => target.replace(/#.*$/, ""));
}

/** The rows `| code | meaning |` of a page's "## Exit codes" table. */
export function exitCodeRows(page: string): string[] {
  const text = readFileSync(join(ROOT, page), "utf8");
  const section = text.slice(text.indexOf("## Exit codes"));
  const table = section.slice(0, section.indexOf("\n## ", 3));
  return table.split("\n").filter((l) => /^\|\s*\d+\s*\|/.test(l)).map((l) => {
    const cells = l.split("|").map((c) => c.trim());
    return `${cells[1]}  ${cells[2]}`;
  });
}
