/**
 * A small, safe XML parser for `nvidia-smi -q -x` output. It builds a plain element
 * tree and is deliberately not a general XML processor:
 *
 * - a DOCTYPE is skipped, internal subset included; its entity declarations are
 *   never read, so no entity is ever defined or expanded (no "billion laughs", no XXE);
 * - only the five predefined entities and numeric character references are decoded;
 *   any other `&name;` stays in the text literally;
 * - input size and element depth are bounded;
 * - a truncated or malformed document throws {@link XmlError} instead of returning
 *   a partial tree;
 * - kept text and attribute values are strings of their own: a tree kept (or a value taken
 *   from it) never keeps the document alive.
 *
 * @module
 */

/** One element: its name, attributes, child elements and its own text. */
export interface XmlElement {
  /** Tag name. */
  name: string;
  /** Attributes, decoded. */
  attributes: Record<string, string>;
  /** Child elements in document order. */
  children: XmlElement[];
  /** The element's direct character data (CDATA included), raw (untrimmed). */
  text: string;
}

/** Limits of {@link parseXml}. */
export interface XmlLimits {
  /** Maximum input length in UTF-16 code units. @default 16 MiB */
  maxChars?: number;
  /** Maximum element nesting depth. @default 64 */
  maxDepth?: number;
  /** Maximum number of elements. @default 2,000,000 */
  maxElements?: number;
  /**
   * Which elements to build, below the root: each key names a child element to keep and
   * maps to the selection of its own children (`{}` keeps the element's text only). An
   * element outside the selection is still checked for well-formedness but never built
   * and its text never kept, so memory follows what the caller reads, not the input.
   * @default everything
   */
  select?: XmlSelection;
  /** Maximum number of elements built (with a selection, fewer than read). @default maxElements */
  maxKept?: number;
}

/** A selection of elements to build: child name to the selection of its children. */
export interface XmlSelection {
  readonly [name: string]: XmlSelection;
}

/** The document is not well-formed, too large or too deep. */
export class XmlError extends Error {
  /**
   * Creates the error.
   *
   * @param message what is wrong, with the offset
   */
  constructor(message: string) {
    super(message);
    this.name = "XmlError";
  }
}

const PREDEFINED: Readonly<Record<string, string>> = {
  lt: "<",
  gt: ">",
  amp: "&",
  quot: '"',
  apos: "'",
};
const NAME_REGEXP = /[A-Za-z_:][-A-Za-z0-9_:.]*/y;
/**
 * A start tag without attributes or spaces, with (group 2) the text and end tag of a leaf whose
 * text holds no markup or reference.
 */
const PLAIN_START_REGEXP = /<([A-Za-z_:][-A-Za-z0-9_:.]*)>(?:([^<&]*)<\/\1>)?/y;
const SLASH = 0x2f;
const GT = 0x3e;
const QUESTION = 0x3f;
const BANG = 0x21;
const ATTRIBUTE_REGEXP = /\s*([A-Za-z_:][-A-Za-z0-9_:.]*)\s*=\s*("([^"]*)"|'([^']*)')/y;

/**
 * Decodes character references: the five predefined entities and `&#N;`/`&#xN;`.
 * Any other reference is kept as written.
 *
 * @param text raw character data
 * @returns the decoded text
 */
export function decodeEntities(text: string): string {
  if (!text.includes("&")) return text;
  return text.replace(
    /&(#x[0-9A-Fa-f]{1,6}|#[0-9]{1,7}|[A-Za-z_][-A-Za-z0-9_.]*);/g,
    (ref, body) => {
      const name = body as string;
      if (name.startsWith("#")) {
        const code = name[1] === "x" ? parseInt(name.slice(2), 16) : parseInt(name.slice(1), 10);
        if (code === 0 || code > 0x10ffff || (code >= 0xd800 && code <= 0xdfff)) return ref;
        return String.fromCodePoint(code);
      }
      return PREDEFINED[name] ?? ref;
    },
  );
}

/**
 * `text` as a string of its own. V8 makes a slice of 13 or more characters a view of the string it
 * was sliced from: a leaf's text kept from a 200 KB `nvidia-smi` document would keep the whole
 * document alive as long as the reading (the daemon holds its last snapshot for hours). The
 * concatenation is flattened into a new string by the slice that follows.
 */
function detached(text: string): string {
  return text.length < 13 ? text : (text + " ").slice(0, -1);
}

/**
 * Parses a document into its root element.
 *
 * @param input the document text
 * @param limits size, depth and element bounds
 * @returns the root element
 * @throws {XmlError} when the document is malformed, truncated, empty or over a limit
 */
export function parseXml(input: string, limits: XmlLimits = {}): XmlElement {
  const { maxChars = 16 << 20, maxDepth = 64, maxElements = 2_000_000 } = limits;
  if (input.length > maxChars) {
    throw new XmlError(
      `Cannot parse XML: it is too large: current length is ${input.length}, limit ${maxChars}`,
    );
  }
  let pos = 0;
  const length = input.length;
  function fail(reason: string, at = pos): never {
    throw new XmlError(`Cannot parse XML at offset ${at}: ${reason}`);
  }
  const tree = newTreeBuilder(
    { maxDepth, maxElements, maxKept: limits.maxKept ?? maxElements, select: limits.select },
    (reason) => fail(reason),
  );

  // One loop with the common path inline: a helper called per tag is hot enough for V8 to compile
  // it on the main thread, in the middle of a run that ends a few milliseconds later.
  while (pos < length) {
    const lt = input.indexOf("<", pos);
    const textEnd = lt < 0 ? length : lt;
    // Character data is decoded only where it is kept or checked: outside the root (it must be
    // blank), in a whole-tree parse, or in a selected leaf. Anything else is read past.
    if (textEnd > pos && (tree.stack.length === 0 || tree.keeps[tree.keeps.length - 1] === true)) {
      appendText(tree, decodeEntities(input.slice(pos, textEnd)));
    }
    if (lt < 0) break;
    pos = lt;
    const next = input.charCodeAt(pos + 1);
    if (next === SLASH) {
      pos = closeAt(tree, input, pos, fail);
      continue;
    }
    const afterMarkup = next === QUESTION || next === BANG
      ? readMarkup(tree, input, pos, fail)
      : -1;
    if (afterMarkup >= 0) {
      pos = afterMarkup;
      continue;
    }
    // The common start tag, `<name>` with no attribute or space, and when it is a leaf
    // (`<name>text</name>`, no markup or references) its text and end tag, in one test (its
    // parts sliced, no result array per tag): the general path's steps (open, text, close).
    PLAIN_START_REGEXP.lastIndex = pos;
    if (!PLAIN_START_REGEXP.test(input)) {
      const tag = readStartTag(input, pos, fail);
      pos = tag.end;
      openElement(tree, tag.element, tag.selfClosing);
      continue;
    }
    const gt = input.indexOf(">", pos);
    const name = input.slice(pos + 1, gt);
    const matchEnd = PLAIN_START_REGEXP.lastIndex;
    // A leaf's match runs past its start tag to the end of `</name>`.
    const leafText = matchEnd === gt + 1
      ? undefined
      : input.slice(gt + 1, matchEnd - name.length - 3);
    pos = matchEnd;
    const depth = tree.stack.length;
    const selection = tree.selections[depth - 1];
    if (depth === 0 || (selection !== SKIP && (!selection || Object.hasOwn(selection, name)))) {
      openPlain(tree, name, leafText);
      continue;
    }
    // Not built: counted and bounded as openElement does; a subtree is read past whole when it
    // is plain all through, else tag by tag, and its elements too.
    if (++tree.elements > maxElements) tree.fail(`too many elements: limit is ${maxElements}`);
    if (depth >= maxDepth) tree.fail(`elements nest too deep: limit is ${maxDepth}`);
    if (leafText !== undefined) continue;
    tree.stack.push({ name, attributes: {}, children: [], text: "" });
    tree.selections.push(SKIP);
    tree.keeps.push(false);
    if (tree.stack.length > tree.skipUpTo) continue;
    const end = skipPlainSubtree(tree, input, pos, name);
    if (end < 0) tree.skipUpTo = tree.stack.length;
    else pos = end;
  }
  return rootOf(tree);
}

/** The root of a finished parse. @throws {XmlError} when an element is open or none was read */
function rootOf(tree: TreeBuilder): XmlElement {
  if (tree.stack.length > 0) {
    throw new XmlError(
      `Cannot parse XML: the document is truncated: element '${
        tree.stack[tree.stack.length - 1]?.name
      }' is not closed`,
    );
  }
  if (tree.root === undefined) throw new XmlError("Cannot parse XML: there is no root element");
  return tree.root;
}

/**
 * Reads the end tag at `start` (its `</`) and closes its element: the open element's own plain
 * end tag (`</name>`) checked in place, any other through {@link readEndTag}.
 *
 * @returns the offset after the tag
 */
function closeAt(
  tree: TreeBuilder,
  input: string,
  start: number,
  fail: (reason: string, at: number) => never,
): number {
  // The usual end tag closes the open element, `</name>` with no space: checked in place.
  const open = tree.stack[tree.stack.length - 1];
  if (open !== undefined) {
    const end = start + 2 + open.name.length;
    if (input.charCodeAt(end) === GT && input.startsWith(open.name, start + 2)) {
      closeElement(tree, open.name);
      return end + 1;
    }
  }
  const { name, close } = readEndTag(input, start, fail);
  closeElement(tree, name);
  return close + 1;
}

/**
 * Reads the markup at `start` (its `<`, followed by `?` or `!`) that is no element: a processing
 * instruction, a comment, a CDATA section (its text appended) or a DOCTYPE (skipped). Called for
 * those only, as the closure below would cost 0.1 MB of an H100 node's parse if made per tag.
 *
 * @returns the offset after it, or -1 when it is none of them (read then as a start tag, which
 *   fails)
 */
function readMarkup(
  tree: TreeBuilder,
  input: string,
  start: number,
  fail: (reason: string, at: number) => never,
): number {
  const next = input.charCodeAt(start + 1);
  const indexOrFail = (needle: string, from: number, what: string): number => {
    const index = input.indexOf(needle, from);
    if (index < 0) fail(`unterminated ${what}`, start);
    return index;
  };
  if (next === QUESTION) return indexOrFail("?>", start + 2, "processing instruction") + 2;
  if (input.startsWith("<!--", start)) return indexOrFail("-->", start + 4, "comment") + 3;
  if (input.startsWith("<![CDATA[", start)) {
    const end = indexOrFail("]]>", start + 9, "CDATA section");
    if (tree.stack.length === 0) fail("CDATA outside the root element", start);
    appendText(tree, input.slice(start + 9, end));
    return end + 3;
  }
  if (input.startsWith("<!DOCTYPE", start)) {
    if (tree.root !== undefined || tree.stack.length > 0) {
      fail("DOCTYPE after the root element", start);
    }
    return skipDoctype(input, start + 9, (reason) => fail(reason, start));
  }
  return -1;
}

/** An empty {@link TreeBuilder} with its bounds and the parse's failure. */
function newTreeBuilder(
  bounds: Pick<TreeBuilder, "maxDepth" | "maxElements" | "maxKept" | "select">,
  fail: (reason: string) => never,
): TreeBuilder {
  return {
    ...bounds,
    stack: [],
    selections: [],
    keeps: [],
    skipUpTo: Infinity,
    root: undefined,
    elements: 0,
    kept: 0,
    fail,
  };
}

/** The tree {@link parseXml} builds: its bounds, the open elements, the root once read. */
interface TreeBuilder {
  maxDepth: number;
  maxElements: number;
  maxKept: number;
  select: XmlSelection | undefined;
  /** The open elements, outermost first. */
  stack: XmlElement[];
  /** Per open element: its selection (undefined = keep everything), or SKIP when not built. */
  selections: (XmlSelection | typeof SKIP | undefined)[];
  /** Per open element: whether its text is kept. */
  keeps: boolean[];
  /**
   * Skipped subtrees are read past whole ({@link skipPlainSubtree}) only up to this depth: below
   * one that was not plain all through, tag by tag (each character is tried at most once).
   */
  skipUpTo: number;
  root: XmlElement | undefined;
  /** Elements read, and elements built. */
  elements: number;
  kept: number;
  /** Throws the parse error at the current offset. */
  fail: (reason: string) => never;
}

function appendText(tree: TreeBuilder, text: string): void {
  const top = tree.stack[tree.stack.length - 1];
  if (!top) {
    if (text.trim() !== "") tree.fail("text outside the root element");
    return;
  }
  if (tree.keeps[tree.keeps.length - 1]) top.text += detached(text);
}

function openElement(tree: TreeBuilder, element: XmlElement, selfClosing: boolean): void {
  if (++tree.elements > tree.maxElements) {
    tree.fail(`too many elements: limit is ${tree.maxElements}`);
  }
  const parent = tree.stack[tree.stack.length - 1];
  const parentSelection = tree.selections[tree.selections.length - 1];
  // The root is always built; below it, what the selection names.
  const selection = !parent ? tree.select : childSelection(parentSelection, element.name);
  if (selection === SKIP) element.attributes = {};
  else if (++tree.kept > tree.maxKept) {
    tree.fail(`too many elements to keep: limit is ${tree.maxKept}`);
  }
  if (parent) {
    if (selection !== SKIP) parent.children.push(element);
  } else if (tree.root !== undefined) tree.fail("a second root element");
  // guard: xml-depth: elements nesting too deeply are refused (a self-closing one too)
  if (tree.stack.length >= tree.maxDepth) {
    tree.fail(`elements nest too deep: limit is ${tree.maxDepth}`);
  }
  if (selfClosing) {
    if (!parent) tree.root = element;
  } else {
    tree.stack.push(element);
    tree.selections.push(selection);
    // Text is kept for whole-tree parses and for the selection's leaves only.
    tree.keeps.push(
      selection === undefined ||
        (selection !== SKIP && (LEAF_SELECTIONS.get(selection) ?? isLeaf(selection))),
    );
  }
}

/**
 * A plain start tag (see {@link PLAIN_START_REGEXP}) of an element the selection keeps (or the
 * root) and, given the leaf's text, its text and end tag: {@link openElement}, the text and
 * {@link closeElement} (for a kept leaf below the root, {@link keepLeaf}), in their order and with
 * their checks.
 */
function openPlain(tree: TreeBuilder, name: string, leafText: string | undefined): void {
  const element: XmlElement = { name, attributes: {}, children: [], text: "" };
  const depth = tree.stack.length;
  if (leafText === undefined || depth === 0) {
    openElement(tree, element, false);
    if (leafText === undefined) return;
    if (leafText !== "" && tree.keeps[tree.keeps.length - 1]) element.text = detached(leafText);
    closeElement(tree, name);
    return;
  }
  // The parent's selection is the whole tree's or names the element.
  keepLeaf(tree, element, tree.selections[depth - 1] as XmlSelection | undefined, leafText);
}

/**
 * A kept leaf below the root, its end tag already matched: what {@link openElement}, the text and
 * {@link closeElement} do for it, with the same checks in the same order, without the stack.
 */
function keepLeaf(
  tree: TreeBuilder,
  element: XmlElement,
  parentSelection: XmlSelection | undefined,
  leafText: string,
): void {
  const depth = tree.stack.length;
  if (++tree.elements > tree.maxElements) {
    tree.fail(`too many elements: limit is ${tree.maxElements}`);
  }
  if (++tree.kept > tree.maxKept) tree.fail(`too many elements to keep: limit is ${tree.maxKept}`);
  (tree.stack[depth - 1] as XmlElement).children.push(element);
  if (depth >= tree.maxDepth) tree.fail(`elements nest too deep: limit is ${tree.maxDepth}`);
  // The parent's selection is the whole tree's (undefined) or names this element.
  const selection = parentSelection === undefined ? undefined : parentSelection[element.name];
  if (
    leafText !== "" &&
    (selection === undefined || (LEAF_SELECTIONS.get(selection) ?? isLeaf(selection)))
  ) {
    element.text = detached(leafText);
  }
  if (depth < tree.skipUpTo) tree.skipUpTo = Infinity;
}

/** An innermost element with plain tags: what {@link skipPlainSubtree} removes, level by level. */
const PLAIN_LEAF_GLOBAL = /<([A-Za-z_:][-A-Za-z0-9_:.]*)>[^<]*<\/\1>/g;
/** Each `<`, for counting a plain subtree's tags. */
const LT_GLOBAL = /</g;
/** Levels {@link skipPlainSubtree} removes before it leaves a subtree to the tag-by-tag reading. */
const MAX_SKIP_LEVELS = 8;

/**
 * Reads past the content of a skipped element just opened (`<name>`, at the top of the stack)
 * in a few native passes instead of tag by tag, when it is plain all through: the content up to
 * the first `</name>` is text and elements with plain tags only, which removing the innermost
 * elements level by level empties of markup. That content is exactly what the tag-by-tag reading
 * would accept there; its elements are counted (one end tag each) and its depth checked against
 * the same limits. Anything else (attributes, comments, CDATA, a self-closing tag, a nested
 * `name`, a mismatch, a limit reached) gives -1 and nothing changed.
 *
 * @returns the offset after the element's end tag, or -1
 */
function skipPlainSubtree(tree: TreeBuilder, input: string, from: number, name: string): number {
  const endTag = `</${name}>`;
  const at = input.indexOf(endTag, from);
  if (at < 0) return -1;
  let content = input.slice(from, at);
  // Every element of plain content has one `<` in its start tag and one in its end tag, and
  // its text none: counted in one native pass. A match of each `<` allocates only the list (V8
  // shares one-character strings), where a replace would allocate a copy of the whole content.
  const elements = (content.match(LT_GLOBAL)?.length ?? 0) / 2;
  if (tree.elements + elements > tree.maxElements) return -1;
  // The element's children open with it on the stack; each level below one deeper.
  const depth = tree.stack.length;
  for (let level = 1; content.includes("<"); level++) {
    if (level > MAX_SKIP_LEVELS || depth + level - 1 >= tree.maxDepth) return -1;
    const reduced = content.replace(PLAIN_LEAF_GLOBAL, "");
    if (reduced.length === content.length) return -1;
    content = reduced;
  }
  tree.elements += elements;
  closeElement(tree, name);
  return at + endTag.length;
}

function closeElement(tree: TreeBuilder, name: string): void {
  const top = tree.stack.pop();
  tree.selections.pop();
  tree.keeps.pop();
  if (tree.stack.length < tree.skipUpTo) tree.skipUpTo = Infinity;
  if (!top || top.name !== name) {
    tree.fail(`end tag '${name}' does not match '${top?.name ?? ""}'`);
  }
  if (tree.stack.length === 0) tree.root = top;
}

const SKIP = Symbol("skip");

/**
 * Reads a start tag at `start` (its `<`): the name, the attributes (decoded), and whether it
 * closes itself.
 *
 * @returns the element (no children yet) and the offset after the tag
 */
function readStartTag(
  input: string,
  start: number,
  fail: (reason: string, at: number) => never,
): { element: XmlElement; selfClosing: boolean; end: number } {
  NAME_REGEXP.lastIndex = start + 1;
  const match = NAME_REGEXP.exec(input);
  if (!match) fail("bad start tag", start);
  const element: XmlElement = { name: match[0], attributes: {}, children: [], text: "" };
  let pos = start + 1 + element.name.length;
  for (;;) {
    ATTRIBUTE_REGEXP.lastIndex = pos;
    const attribute = ATTRIBUTE_REGEXP.exec(input);
    if (!attribute) break;
    element.attributes[attribute[1] as string] = detached(
      decodeEntities(attribute[3] ?? attribute[4] ?? ""),
    );
    pos = ATTRIBUTE_REGEXP.lastIndex;
  }
  while (pos < input.length && /\s/.test(input[pos] as string)) pos++;
  if (input.startsWith("/>", pos)) return { element, selfClosing: true, end: pos + 2 };
  if (input[pos] === ">") return { element, selfClosing: false, end: pos + 1 };
  return fail(
    pos >= input.length ? "unterminated start tag" : `bad start tag '${element.name}'`,
    pos,
  );
}

/** Reads an end tag at `start` (its `</`): the name and the offset of its `>`. */
function readEndTag(
  input: string,
  start: number,
  fail: (reason: string, at: number) => never,
): { name: string; close: number } {
  NAME_REGEXP.lastIndex = start + 2;
  const match = NAME_REGEXP.exec(input);
  if (!match) fail("bad end tag", start);
  const name = match[0];
  const close = input.indexOf(">", start + 2 + name.length);
  if (close < 0) fail("unterminated end tag", start);
  if (input.slice(start + 2 + name.length, close).trim() !== "") {
    fail(`bad end tag '${name}'`, start);
  }
  return { name, close };
}

/** A child element's selection: SKIP below a skipped element or for a name not selected. */
function childSelection(
  parent: XmlSelection | typeof SKIP | undefined,
  name: string,
): XmlSelection | typeof SKIP | undefined {
  if (parent === SKIP) return SKIP;
  if (parent === undefined) return undefined;
  return Object.hasOwn(parent, name) ? parent[name] : SKIP;
}

/** Whether a selection names no child, by selection (each is asked once per parse, not per tag). */
const LEAF_SELECTIONS = new WeakMap<XmlSelection, boolean>();

/** Whether a selection names no child; remembered in {@link LEAF_SELECTIONS}. */
function isLeaf(selection: XmlSelection): boolean {
  let leaf = true;
  for (const _ in selection) {
    leaf = false;
    break;
  }
  LEAF_SELECTIONS.set(selection, leaf);
  return leaf;
}

function skipDoctype(input: string, from: number, fail: (reason: string) => never): number {
  // Skip `<!DOCTYPE name ... [internal subset] >` without interpreting anything, honouring
  // quoted strings so a `]` or `>` inside a literal does not end the declaration early.
  let pos = from;
  let inSubset = false;
  while (pos < input.length) {
    const ch = input[pos];
    if (ch === '"' || ch === "'") {
      const end = input.indexOf(ch, pos + 1);
      if (end < 0) break;
      pos = end + 1;
      continue;
    }
    if (inSubset && input.startsWith("<!--", pos)) {
      const end = input.indexOf("-->", pos + 4);
      if (end < 0) break;
      pos = end + 3;
      continue;
    }
    if (ch === "[") inSubset = true;
    else if (ch === "]") inSubset = false;
    else if (ch === ">" && !inSubset) return pos + 1;
    pos++;
  }
  return fail("unterminated DOCTYPE");
}

/**
 * The first child element with a name.
 *
 * @param element the parent (may be undefined)
 * @param name the child's tag name
 * @returns the child, if any
 */
export function child(element: XmlElement | undefined, name: string): XmlElement | undefined {
  if (element === undefined) return undefined;
  // Indexed, as on every path the agent runs once: until V8 optimises a function, each step of a
  // for-of over an array allocates an iterator result (here 0.2 MB of an H100 node's parse).
  const all = element.children;
  for (let i = 0; i < all.length; i++) if ((all[i] as XmlElement).name === name) return all[i];
  return undefined;
}

/**
 * Every child element with a name.
 *
 * @param element the parent (may be undefined)
 * @param name the children's tag name
 * @returns the children in document order
 */
export function children(element: XmlElement | undefined, name: string): XmlElement[] {
  return element?.children.filter((c) => c.name === name) ?? [];
}

/**
 * The raw text at a slash-separated path below an element, `""` when any step is missing.
 *
 * @param element the starting element
 * @param path e.g. `pci/pci_gpu_link_info/pcie_gen/max_link_gen`
 * @returns the text, untrimmed
 */
export function textAt(element: XmlElement | undefined, path: string): string {
  let current = element;
  for (const step of path.split("/")) current = child(current, step);
  return current?.text ?? "";
}
