/**
 * Finds the safety checks marked in the source and removes them, one at a time, for the mutation
 * check (`tests/mutants/mutants.ts`). A check is marked by a comment on the line above it:
 *
 * ```ts
 * // guard: identity-key: a certificate for another key is never served
 * if (!x509.checkPrivateKey(key)) return undefined;
 * ```
 *
 * The marker's text may go on in the comment lines right below it. The marked statement is the
 * first line after the marker that is neither blank nor a comment, up to the end of that
 * statement. Its mutant:
 * - an `if`: the condition becomes `false` (the check never fires);
 * - a marker ending `` ; mutant: `from` -> `to` ``: that text, which must occur exactly once in
 *   the statement, is replaced (a decision inverted, a condition dropped);
 * - anything else (a call, a property): the statement is removed.
 *
 * The marker travels with the code it guards, so moving code never loses or misplaces a check.
 *
 * @module
 */

/** One marked check. */
export interface Guard {
  /** Its name, e.g. `identity-key`. */
  name: string;
  /** What it protects (the marker's text after the name). */
  what: string;
  /** The line of the marker (1-based). */
  line: number;
  /** Offsets of the marked statement in the file's text. */
  start: number;
  end: number;
  /** The replacement the marker asks for, if any. */
  replace?: { from: string; to: string };
}

const MARKER_REGEXP = /^[ \t]*\/\/ guard: ([a-z0-9][a-z0-9-]*)(?::\s*(.*))?$/;
const REPLACE_REGEXP = /mutant: `([^`]+)` -> `([^`]*)`/;
const IF_REGEXP = /^(\}\s*else\s+)?if\s*\(/;

/**
 * Finds every marked check of a file.
 *
 * @param text the file's text
 * @param file its name, for errors
 * @returns the checks, in order
 * @throws {Error} when a marker has no statement after it, or its statement cannot be delimited
 */
export function findGuards(text: string, file = "input"): Guard[] {
  const guards: Guard[] = [];
  const lines = text.split("\n");
  let offset = 0;
  const starts = lines.map((l) => {
    const s = offset;
    offset += l.length + 1;
    return s;
  });
  for (const [i, line] of lines.entries()) {
    const marker = MARKER_REGEXP.exec(line);
    if (!marker) continue;
    // The marker's text may go on in the comment lines right below it.
    let said = marker[2] ?? "";
    let j = i + 1;
    for (; j < lines.length && /^\s*\/\/ (?!guard: )/.test(lines[j]!); j++) {
      said += ` ${lines[j]!.trim().slice(3)}`;
    }
    while (j < lines.length && /^\s*(\/\/.*)?$/.test(lines[j]!)) j++;
    if (j >= lines.length) {
      throw new Error(`${file}:${i + 1}: the guard '${marker[1]}' marks no statement`);
    }
    const start = starts[j]! + lines[j]!.length - lines[j]!.trimStart().length;
    const end = statementEnd(text, start);
    if (end === undefined) {
      throw new Error(`${file}:${i + 1}: the statement of guard '${marker[1]}' has no end`);
    }
    const what = said.trim();
    const replace = REPLACE_REGEXP.exec(what);
    guards.push({
      name: marker[1]!,
      what: what.replace(REPLACE_REGEXP, "").trim().replace(/[;,]$/, ""),
      line: i + 1,
      start,
      end,
      ...(replace ? { replace: { from: replace[1]!, to: replace[2]! } } : {}),
    });
  }
  return guards;
}

/**
 * Where the statement starting at `start` ends: after its `;` (or the `,` of a property), or
 * after the block of an `if` (and its `else`), skipping strings, templates and comments.
 */
function statementEnd(text: string, start: number): number | undefined {
  let depth = 0;
  let sawBlock = false;
  for (let i = start; i < text.length; i++) {
    const c = text[i]!;
    if (c === '"' || c === "'" || c === "`") {
      i = skipString(text, i);
      continue;
    }
    if (c === "/" && text[i + 1] === "/") {
      i = text.indexOf("\n", i);
      if (i < 0) return undefined;
      continue;
    }
    if (c === "/" && text[i + 1] === "*") {
      i = text.indexOf("*/", i + 2) + 1;
      if (i <= 0) return undefined;
      continue;
    }
    if (c === "(" || c === "[" || c === "{") {
      if (c === "{" && depth === 0) sawBlock = true;
      depth++;
    } else if (c === ")" || c === "]" || c === "}") {
      depth--;
      if (depth < 0) return i;
      if (depth === 0 && c === "}" && sawBlock && IF_REGEXP.test(text.slice(start))) {
        const rest = text.slice(i + 1);
        if (/^\s*else\b/.test(rest)) {
          sawBlock = false;
          continue;
        }
        return i + 1;
      }
    } else if ((c === ";" || c === ",") && depth === 0) {
      return i + 1;
    }
  }
  return undefined;
}

function skipString(text: string, open: number): number {
  const quote = text[open]!;
  for (let i = open + 1; i < text.length; i++) {
    const c = text[i]!;
    if (c === "\\") {
      i++;
    } else if (c === quote) {
      return i;
    } else if (quote === "`" && c === "$" && text[i + 1] === "{") {
      // A template's expression: skip to its closing brace.
      let depth = 1;
      i += 2;
      for (; i < text.length && depth > 0; i++) {
        const d = text[i]!;
        if (d === '"' || d === "'" || d === "`") i = skipString(text, i);
        else if (d === "{") depth++;
        else if (d === "}") depth--;
      }
      i--;
    }
  }
  return text.length;
}

/**
 * The file's text with one check removed (see the module doc for how).
 *
 * @param text the file's text
 * @param guard a check {@link findGuards} found in it
 * @returns the mutant's text
 * @throws {Error} when a replacement's text is not in the statement exactly once
 */
export function mutate(text: string, guard: Guard): string {
  const statement = text.slice(guard.start, guard.end);
  let mutant: string;
  if (guard.replace) {
    const { from, to } = guard.replace;
    const count = statement.split(from).length - 1;
    if (count !== 1) {
      throw new Error(
        `The guard '${guard.name}' asks to replace '${from}', which its statement holds ${count} times`,
      );
    }
    mutant = statement.replace(from, () => to);
  } else if (IF_REGEXP.test(statement)) {
    const open = statement.indexOf("(");
    const close = matchingParen(statement, open);
    mutant = `${statement.slice(0, open)}(false)${statement.slice(close + 1)}`;
  } else {
    mutant = "";
  }
  return text.slice(0, guard.start) + mutant + text.slice(guard.end);
}

function matchingParen(text: string, open: number): number {
  let depth = 0;
  for (let i = open; i < text.length; i++) {
    const c = text[i]!;
    if (c === '"' || c === "'" || c === "`") {
      i = skipString(text, i);
    } else if (c === "(") {
      depth++;
    } else if (c === ")" && --depth === 0) {
      return i;
    }
  }
  throw new Error("Cannot find the end of the condition");
}
