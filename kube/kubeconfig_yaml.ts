/**
 * A kubeconfig read without the `yaml` library when it is in the plain block layout kubeconfig
 * writers use (kubectl, client-go's `clientcmd.Write`, cloud CLIs, this project's test clusters):
 * mappings and sequences by indentation, plain or simply quoted scalars, `{}` and `[]`. Every CLI
 * run reads one before its first request, and the library took 20-35 ms of CPU to load and parse
 * a 5 KiB file there (its first run is interpreted, and base64 certificates are long scalars it
 * scans a character at a time). Anything beyond that layout (comments, anchors, tags, flow
 * collections, block scalars, escapes, numbers, tabs, repeated keys, several documents) gives
 * `undefined`, and the caller parses the file with the library: a value is returned only where
 * it is beyond doubt what the library returns (`kubeconfig_yaml_test.ts` holds them equal).
 *
 * @module
 */

/** One non-empty line: its indentation and what follows it. */
interface Line {
  indent: number;
  text: string;
}

/** Keys written plain by every kubeconfig writer (a key read as a number or null is refused). */
const KEY_REGEXP = /^[A-Za-z_][A-Za-z0-9_.\/-]*$/;
/** The first characters a plain scalar may not start with (YAML indicators). */
const INDICATORS = new Set([..."?:,[]{}#&*!|>'\"%@`"]);
/** What makes a plain scalar anything but a string, or needs the library to decide. */
const NOT_PLAIN_STRING_REGEXP = /^(?:[-+]?[0-9.]|[-+]?\.(?:inf|Inf|INF)$|\.(?:nan|NaN|NAN)$)/;
const TRUE_REGEXP = /^(?:true|True|TRUE)$/;
const FALSE_REGEXP = /^(?:false|False|FALSE)$/;
const NULL_REGEXP = /^(?:null|Null|NULL|~)$/;

/** Thrown inside the reader when the text leaves the plain layout; never escapes it. */
class NotPlain extends Error {}

/**
 * Parses a kubeconfig in the plain block layout as the `yaml` library's `parse` would.
 *
 * @param text the file's text
 * @returns the document, or undefined when the text is not in that layout
 */
export function parsePlainKubeconfig(text: string): unknown {
  if (/[\t\r#&*!|>%`]/.test(text)) return undefined;
  const lines: Line[] = [];
  for (const raw of text.split("\n")) {
    // YAML's white space is the space (tabs are refused above), not all that trimEnd() removes.
    const trimmed = trimSpaces(raw);
    if (trimmed === "") continue;
    const indent = raw.length - trimStartSpaces(raw).length;
    lines.push({ indent, text: trimmed.slice(indent) });
  }
  if (lines.length === 0 || lines[0]?.indent !== 0) return undefined;
  try {
    const reader = { lines, at: 0 };
    const document = readBlock(reader, 0);
    return reader.at === lines.length ? document : undefined;
  } catch (error) {
    if (error instanceof NotPlain) return undefined;
    throw error;
  }
}

interface Reader {
  lines: Line[];
  at: number;
}

function trimStartSpaces(text: string): string {
  let at = 0;
  while (text.charCodeAt(at) === 32) at++;
  return text.slice(at);
}

function trimSpaces(text: string): string {
  let end = text.length;
  while (end > 0 && text.charCodeAt(end - 1) === 32) end--;
  return text.slice(0, end);
}

function isItem(text: string): boolean {
  return text === "-" || text.startsWith("- ");
}

/** A mapping or a sequence whose lines start at `indent`. */
function readBlock(reader: Reader, indent: number): unknown {
  const line = reader.lines[reader.at];
  if (!line || line.indent !== indent) throw new NotPlain();
  return isItem(line.text) ? readSequence(reader, indent) : readMapping(reader, indent, {});
}

function readSequence(reader: Reader, indent: number): unknown[] {
  const items: unknown[] = [];
  for (;;) {
    const line = reader.lines[reader.at];
    if (!line || line.indent !== indent || !isItem(line.text)) return items;
    const rest = trimStartSpaces(line.text.slice(1));
    if (rest === "") {
      reader.at++;
      const next = reader.lines[reader.at];
      items.push(next && next.indent > indent ? readBlock(reader, next.indent) : null);
      continue;
    }
    // The item's content starts at its own column: a mapping's further keys line up with it.
    const column = indent + (line.text.length - rest.length);
    if (isItem(rest)) throw new NotPlain();
    if (keyOf(rest) !== undefined) {
      reader.lines[reader.at] = { indent: column, text: rest };
      items.push(readMapping(reader, column, {}));
    } else {
      reader.at++;
      items.push(scalar(rest));
    }
  }
}

/** The key of a `key: value` or `key:` line, or undefined for a line of another form. */
function keyOf(text: string): string | undefined {
  const colon = text.indexOf(":");
  if (colon <= 0 || (colon + 1 < text.length && text[colon + 1] !== " ")) return undefined;
  const key = text.slice(0, colon);
  if (!KEY_REGEXP.test(key) || TRUE_REGEXP.test(key) || FALSE_REGEXP.test(key)) {
    throw new NotPlain();
  }
  if (NULL_REGEXP.test(key)) throw new NotPlain();
  return key;
}

function readMapping(
  reader: Reader,
  indent: number,
  into: Record<string, unknown>,
): Record<string, unknown> {
  for (;;) {
    const line = reader.lines[reader.at];
    if (!line || line.indent < indent) return into;
    if (line.indent > indent || isItem(line.text)) throw new NotPlain();
    const key = keyOf(line.text);
    if (key === undefined || Object.hasOwn(into, key)) throw new NotPlain();
    const rest = trimStartSpaces(line.text.slice(key.length + 1));
    reader.at++;
    let value: unknown;
    if (rest !== "") value = scalar(rest);
    else {
      const next = reader.lines[reader.at];
      // A nested block: deeper, or a sequence at the key's own indentation.
      if (next && (next.indent > indent || (next.indent === indent && isItem(next.text)))) {
        value = readBlock(reader, next.indent);
      } else value = null;
    }
    Object.defineProperty(into, key, {
      value,
      enumerable: true,
      writable: true,
      configurable: true,
    });
  }
}

/** A scalar as the library's core schema reads it, when that is beyond doubt. */
function scalar(text: string): unknown {
  if (text === "{}") return {};
  if (text === "[]") return [];
  const first = text[0] as string;
  if (first === "'") return singleQuoted(text);
  if (first === '"') return doubleQuoted(text);
  if (INDICATORS.has(first) || (first === "-" && (text.length === 1 || text[1] === " "))) {
    throw new NotPlain();
  }
  if (text.includes(": ") || text.endsWith(":") || text.includes(" #")) throw new NotPlain();
  if (TRUE_REGEXP.test(text)) return true;
  if (FALSE_REGEXP.test(text)) return false;
  if (NULL_REGEXP.test(text)) return null;
  if (NOT_PLAIN_STRING_REGEXP.test(text)) throw new NotPlain();
  return text;
}

function singleQuoted(text: string): string {
  if (text.length < 2 || !text.endsWith("'")) throw new NotPlain();
  const body = text.slice(1, -1);
  // '' is a quote inside; a lone quote would end the scalar early.
  if (body.replaceAll("''", "").includes("'")) throw new NotPlain();
  return body.replaceAll("''", "'");
}

function doubleQuoted(text: string): string {
  if (text.length < 2 || !text.endsWith('"')) throw new NotPlain();
  const body = text.slice(1, -1);
  if (body.includes("\\") || body.includes('"')) throw new NotPlain();
  return body;
}
