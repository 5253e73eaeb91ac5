/**
 * A small lexer for the house's own (deno fmt-formatted) TypeScript, enough for source checks
 * that a regular expression over raw text would get wrong: it tells code from comments, string
 * literals and template text (regular-expression literals included), so a check can read the
 * string literals alone, or match braces in code alone. No TypeScript compiler is a dependency.
 *
 * @module
 */

/** One string literal (or one template literal's text parts) and the line it starts on. */
export interface StringToken {
  /** The literal's text between its quotes (a template's `${…}` parts left out). */
  text: string;
  /** 1-based line of the opening quote. */
  line: number;
}

/** What {@link scanSource} finds. */
export interface ScannedSource {
  /** The source with comments, strings and regexps blanked (newlines kept, so lines match). */
  code: string;
  /** Every string and template literal, in order. */
  strings: StringToken[];
}

// After one of these (or a keyword), a `/` starts a regexp, not a division.
const BEFORE_REGEXP = new Set([..."(,=:[!&|?{};+-*%<>~^"]);
const REGEXP_KEYWORDS = /(?:^|[^\w$])(?:return|typeof|case|in|of|void|throw|yield|await)$/;

/**
 * Splits a TypeScript source into its code and its string literals.
 *
 * @param source the file's text
 * @returns the code with everything else blanked, and the string literals
 */
export function scanSource(source: string): ScannedSource {
  const out: string[] = [];
  const strings: StringToken[] = [];
  // One entry per open template literal: the depth of `${` braces inside its current hole.
  const templates: number[] = [];
  let line = 1;
  let i = 0;

  function blank(from: number, to: number): void {
    for (let k = from; k < to; k++) {
      const ch = source[k] ?? "";
      out.push(ch === "\n" ? "\n" : " ");
      if (ch === "\n") line++;
    }
  }

  function readQuoted(quote: string): void {
    const start = i;
    const startLine = line;
    let text = "";
    i++;
    while (i < source.length && source[i] !== quote && source[i] !== "\n") {
      if (source[i] === "\\") {
        text += source.slice(i, i + 2);
        i += 2;
      } else {
        text += source[i];
        i++;
      }
    }
    i++;
    strings.push({ text, line: startLine });
    blank(start, i);
  }

  // Reads template text from `i` (just after "`" or a hole's closing "}") to "`" or "${".
  function readTemplateText(): void {
    const start = i;
    const startLine = line;
    let text = "";
    while (i < source.length) {
      const ch = source[i];
      if (ch === "\\") {
        text += source.slice(i, i + 2);
        i += 2;
        continue;
      }
      if (ch === "`") {
        i++;
        templates.pop();
        break;
      }
      if (ch === "$" && source[i + 1] === "{") {
        i += 2;
        templates[templates.length - 1] = 0;
        break;
      }
      text += ch;
      i++;
    }
    strings.push({ text, line: startLine });
    blank(start, i);
  }

  while (i < source.length) {
    const ch = source[i] ?? "";
    const next = source[i + 1];
    if (ch === "/" && next === "/") {
      const end = source.indexOf("\n", i);
      const stop = end < 0 ? source.length : end;
      blank(i, stop);
      i = stop;
    } else if (ch === "/" && next === "*") {
      const end = source.indexOf("*/", i + 2);
      const stop = end < 0 ? source.length : end + 2;
      blank(i, stop);
      i = stop;
    } else if (ch === '"' || ch === "'") {
      readQuoted(ch);
    } else if (ch === "`") {
      templates.push(-1);
      i++;
      out.push(" ");
      readTemplateText();
    } else if (ch === "/" && isRegexpStart(out)) {
      const start = i;
      let inClass = false;
      i++;
      while (i < source.length && source[i] !== "\n") {
        const c = source[i];
        if (c === "\\") i++;
        else if (c === "[") inClass = true;
        else if (c === "]") inClass = false;
        else if (c === "/" && !inClass) break;
        i++;
      }
      i++;
      while (/[a-z]/.test(source[i] ?? "")) i++;
      blank(start, i);
    } else if (
      templates.length > 0 && (templates[templates.length - 1] ?? -1) >= 0 &&
      (ch === "{" || ch === "}")
    ) {
      const depth = templates[templates.length - 1] ?? 0;
      if (ch === "}" && depth === 0) {
        i++;
        out.push(" ");
        readTemplateText();
      } else {
        templates[templates.length - 1] = depth + (ch === "{" ? 1 : -1);
        out.push(ch);
        i++;
      }
    } else {
      out.push(ch);
      if (ch === "\n") line++;
      i++;
    }
  }
  return { code: out.join(""), strings };
}

function isRegexpStart(out: string[]): boolean {
  // The last non-blank code before the slash decides.
  let k = out.length - 1;
  while (k >= 0 && /\s/.test(out[k] ?? "")) k--;
  if (k < 0) return true;
  const last = out[k] ?? "";
  if (BEFORE_REGEXP.has(last)) return true;
  const tail = out.slice(Math.max(0, k - 8), k + 1).join("");
  return REGEXP_KEYWORDS.test(tail);
}

/** One function found by {@link longFunctions}. */
export interface FunctionSpan {
  /** The function's name (`name`, `Class.method` is not tracked: methods give `method`). */
  name: string;
  /** 1-based first line (the declaration). */
  start: number;
  /** Lines from the declaration to the closing brace, both included. */
  lines: number;
}

// Heads of named functions as deno fmt writes them: declarations, arrow or function
// expressions bound to a const/let, and methods (object or class).
const HEAD_REGEXPS = [
  /^\s*(?:export\s+)?(?:default\s+)?(?:async\s+)?function\s*\*?\s*([A-Za-z_$][\w$]*)/,
  /^\s*(?:export\s+)?(?:const|let)\s+([A-Za-z_$][\w$]*)\s*(?::[^=]+)?=\s*(?:async\s+)?(?:function\b|\([^)]*$|\((?:[^()]|\([^()]*\))*\)\s*(?::\s*[^=]+)?=>|[A-Za-z_$][\w$]*\s*=>)/,
  /^\s*(?:(?:public|private|protected|static|async|override|readonly|get|set)\s+)*#?([A-Za-z_$][\w$]*)\s*(?:<[^>]*>)?\((?:(?:[^()]|\([^()]*\))*\)\s*(?::\s*[^{]+)?\{\s*$|[^)]*$)/,
];
const NOT_METHODS = new Set([
  "if",
  "for",
  "while",
  "switch",
  "catch",
  "with",
  "return",
  "function",
]);

/**
 * The named functions of a source and their lengths, from the first line of the declaration to
 * its closing brace (nested functions counted on their own and inside their parent).
 *
 * @param source the file's text, formatted by deno fmt
 * @returns every named function whose body is a block
 */
export function functionSpans(source: string): FunctionSpan[] {
  const lines = scanSource(source).code.split("\n");
  const spans: FunctionSpan[] = [];
  for (let index = 0; index < lines.length; index++) {
    const text = lines[index] ?? "";
    let name: string | undefined;
    for (const regexp of HEAD_REGEXPS) {
      const match = regexp.exec(text);
      if (match?.[1] && !NOT_METHODS.has(match[1])) {
        name = match[1];
        break;
      }
    }
    if (name === undefined) continue;
    const end = bodyEnd(lines, index);
    if (end !== undefined) spans.push({ name, start: index + 1, lines: end - index + 1 });
  }
  return spans;
}

// From a head line, finds the line of the brace closing the body: the first `{` outside
// parentheses, angle brackets and type literals that does not start a type (after `:`, `|`,
// `&`, `,`, `(`, `<` or `=`), matched.
function bodyEnd(lines: string[], from: number): number | undefined {
  let parens = 0;
  let braces = 0;
  let opened = false;
  let previous = "";
  for (let index = from; index < lines.length && index < from + 2000; index++) {
    const text = lines[index] ?? "";
    for (let k = 0; k < text.length; k++) {
      const ch = text[k] ?? "";
      if (!opened) {
        if (ch === "(" || ch === "[" || ch === "<") parens++;
        else if (ch === ")" || ch === "]" || (ch === ">" && previous !== "=")) parens--;
        else if (ch === "{" && parens <= 0 && braces <= 0 && !":|&,(<=".includes(previous)) {
          opened = true;
          braces = 1;
        } else if (ch === "{") braces++;
        else if (ch === "}") braces--;
        else if (ch === ";" && parens <= 0 && braces <= 0) return undefined;
        if (!/\s/.test(ch)) previous = ch;
        continue;
      }
      if (ch === "{") braces++;
      else if (ch === "}" && --braces === 0) return index;
    }
  }
  return undefined;
}
