/**
 * Helm templates from rendered objects: the chart generator (`scripts/chart.ts`) renders the
 * daemon's objects once per value of each chart knob, with sentinel strings where a value goes,
 * and this module folds those renders into one template tree whose differences are Helm
 * conditionals (`{{- if .Values.privileged }}`), whose sentinels are Helm expressions
 * (`{{ .Values.name }}`), and whose user-given subtrees are `toYaml` blocks. The emitter writes
 * that tree as YAML with Helm directives, so the chart holds no object written by hand: what
 * `helm template` gives is what the builders gave for those values (a test holds them equal).
 *
 * @module
 */
import { stringify } from "yaml";

/** A plain scalar. */
export type Scalar = string | number | boolean | null;

/** A node of the template tree. */
export type TNode = Scalar | TMap | TList | TExpr | TBlock;

/** A mapping, its entries in order; some are conditional. */
export interface TMap {
  kind: "map";
  entries: TEntry[];
}

/** A sequence, its items in order; some are conditional, some expanded by a range. */
export interface TList {
  kind: "list";
  items: TItem[];
}

/** One key and its value. */
export interface TKeyValue {
  kind: "entry";
  key: string;
  value: TNode;
}

/** One sequence item. */
export interface TValueItem {
  kind: "item";
  value: TNode;
}

/** Template text standing for more items (a `range`), emitted as given, indented. */
export interface TRawItems {
  kind: "raw";
  lines: string[];
}

/** A scalar computed by Helm: parts of literal text and expressions. */
export interface TExpr {
  kind: "expr";
  /** Literal text and `{ expr }` pieces, in order. */
  parts: (string | { expr: string })[];
  /** How a whole-value expression is written: quoted (a string) or raw (a number). */
  type: "string" | "number";
}

/** A value given whole by the user: `{{- toYaml <expr> | nindent N }}`. */
export interface TBlock {
  kind: "block";
  expr: string;
}

/** Entries or items that exist only under a test (`if` / `else if` / `else`). */
export interface TCond<T> {
  kind: "cond";
  branches: { test: string | undefined; body: T[] }[];
}

/** A map entry. */
export type TEntry = TKeyValue | TCond<TEntry>;
/** A list item. */
export type TItem = TValueItem | TRawItems | TCond<TItem>;

/** How a sentinel in the rendered objects becomes a Helm expression. */
export interface Substitutions {
  /** Exact string values replaced whole by an expression (checked first). */
  exact: { value: string; expr: string }[];
  /** Substrings replaced by an expression wherever they occur in a string. */
  strings: { sentinel: string; expr: string }[];
  /** Numbers replaced by an expression (a port); their decimal text too, in strings, where whole. */
  numbers: { sentinel: number; expr: string }[];
  /**
   * Subtrees the user gives whole: a map holding the sentinel key, or a list holding the
   * sentinel or an object with it as a value, becomes `toYaml expr`; its key then exists only when the
   * value is not empty (as the builders leave an empty map or list out).
   */
  blocks: { sentinel: string; expr: string }[];
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** The block a value stands for, when it is one of the user's whole subtrees. */
function blockOf(value: unknown, subs: Substitutions): TBlock | undefined {
  if (!isPlainObject(value) && !Array.isArray(value)) return undefined;
  const hit = subs.blocks.find((b) =>
    Array.isArray(value)
      ? value.some((item) =>
        item === b.sentinel || (isPlainObject(item) && Object.values(item).includes(b.sentinel))
      )
      : Object.hasOwn(value, b.sentinel)
  );
  return hit ? { kind: "block", expr: hit.expr } : undefined;
}

/**
 * Where `digits` first stands as a whole number in `text` (no digit either side), or -1: a
 * replica count of 9 is in `--replicas=9`, not in `96Mi`.
 */
export function wholeNumberAt(text: string, digits: string): number {
  const isDigit = (c: string | undefined) => c !== undefined && c >= "0" && c <= "9";
  for (let at = text.indexOf(digits); at >= 0; at = text.indexOf(digits, at + 1)) {
    if (!isDigit(text[at - 1]) && !isDigit(text[at + digits.length])) return at;
  }
  return -1;
}

function stringExpr(value: string, subs: Substitutions): TExpr | string {
  const exact = subs.exact.find((e) => e.value === value);
  if (exact) return { kind: "expr", parts: [{ expr: exact.expr }], type: "string" };
  const needles = [
    ...subs.strings.map((s) => ({ text: s.sentinel, expr: s.expr, number: false })),
    ...subs.numbers.map((n) => ({ text: String(n.sentinel), expr: n.expr, number: true })),
  ];
  const parts: TExpr["parts"] = [];
  let rest = value;
  for (;;) {
    let first: { at: number; text: string; expr: string } | undefined;
    for (const needle of needles) {
      const at = needle.number ? wholeNumberAt(rest, needle.text) : rest.indexOf(needle.text);
      if (at >= 0 && (first === undefined || at < first.at)) first = { at, ...needle };
    }
    if (!first) break;
    if (first.at > 0) parts.push(rest.slice(0, first.at));
    parts.push({ expr: first.expr });
    rest = rest.slice(first.at + first.text.length);
  }
  if (parts.length === 0) return value;
  if (rest) parts.push(rest);
  return { kind: "expr", parts, type: "string" };
}

/**
 * Turns a rendered object into a template tree, replacing sentinels.
 *
 * @param value the rendered value (JSON-like)
 * @param subs the sentinels and their expressions
 * @returns the tree
 */
export function toTemplate(value: unknown, subs: Substitutions): TNode {
  if (typeof value === "string") return stringExpr(value, subs);
  if (typeof value === "number") {
    const hit = subs.numbers.find((n) => n.sentinel === value);
    return hit ? { kind: "expr", parts: [{ expr: hit.expr }], type: "number" } : value;
  }
  if (typeof value === "boolean" || value === null) return value;
  if (Array.isArray(value)) {
    return {
      kind: "list",
      items: value.map((v) => ({ kind: "item", value: toTemplate(v, subs) })),
    };
  }
  if (isPlainObject(value)) {
    const entries: TEntry[] = [];
    for (const [key, v] of Object.entries(value)) {
      if (v === undefined) continue;
      const block = blockOf(v, subs);
      const entry: TKeyValue = { kind: "entry", key, value: block ?? toTemplate(v, subs) };
      // A user's subtree exists only when not empty, as the builders leave empty ones out.
      entries.push(
        block ? { kind: "cond", branches: [{ test: block.expr, body: [entry] }] } : entry,
      );
    }
    return { kind: "map", entries };
  }
  throw new TypeError(`Cannot template a value of type ${typeof value}`);
}

/** Canonical text of a node: equality of template trees. */
export function nodeKey(node: unknown): string {
  return JSON.stringify(node);
}

function isMap(node: unknown): node is TMap {
  return isPlainObject(node) && (node as { kind?: string }).kind === "map";
}

function isList(node: unknown): node is TList {
  return isPlainObject(node) && (node as { kind?: string }).kind === "list";
}

/** `not (<test>)`: the else side of a binary test. */
export function negate(test: string): string {
  const inner = /^not \((.*)\)$/.exec(test);
  return inner ? inner[1]! : `not (${test})`;
}

function cond<T>(test: string, whenTrue: T[], whenFalse: T[]): TCond<T>[] {
  if (whenTrue.length === 0 && whenFalse.length === 0) return [];
  if (whenFalse.length === 0) return [{ kind: "cond", branches: [{ test, body: whenTrue }] }];
  if (whenTrue.length === 0) {
    return [{ kind: "cond", branches: [{ test: negate(test), body: whenFalse }] }];
  }
  return [{
    kind: "cond",
    branches: [{ test, body: whenTrue }, { test: undefined, body: whenFalse }],
  }];
}

/** The key an entry is matched by across branches. */
function entryKey(entry: TEntry): string {
  return entry.kind === "entry" ? `key:${entry.key}` : `cond:${nodeKey(entry)}`;
}

/** The key an item is matched by across branches: its `name`, else its whole text. */
function itemKey(item: TItem): string {
  if (item.kind === "item" && isMap(item.value)) {
    const name = item.value.entries.find((e) => e.kind === "entry" && e.key === "name");
    if (name && name.kind === "entry" && typeof name.value === "string") {
      return `name:${name.value}`;
    }
  }
  return `text:${nodeKey(item)}`;
}

/** `a`'s keys in order, with `b`'s other keys inserted after their predecessor in `b`. */
function unionOrder(a: string[], b: string[]): string[] {
  const out = [...a];
  let at = -1;
  for (const key of b) {
    const found = out.indexOf(key);
    if (found >= 0) {
      at = found;
      continue;
    }
    out.splice(at + 1, 0, key);
    at += 1;
  }
  return out;
}

/** Whether both key sequences keep their shared keys in one order (a union exists). */
function sameOrder(a: string[], b: string[]): boolean {
  const shared = a.filter((k) => b.includes(k));
  const inB = b.filter((k) => a.includes(k));
  return shared.every((k, i) => k === inB[i]);
}

function unique(keys: string[]): boolean {
  return new Set(keys).size === keys.length;
}

/** Coalesces neighbouring one-branch conds of one test into one. */
function coalesce<T>(list: (T | TCond<T>)[]): (T | TCond<T>)[] {
  const out: (T | TCond<T>)[] = [];
  for (const element of list) {
    const last = out.at(-1);
    const isCond = (x: unknown): x is TCond<T> =>
      isPlainObject(x) && (x as { kind?: string }).kind === "cond";
    if (
      isCond(last) && isCond(element) && last.branches.length === 1 &&
      element.branches.length === 1 && last.branches[0]!.test === element.branches[0]!.test
    ) {
      out[out.length - 1] = {
        kind: "cond",
        branches: [{
          test: last.branches[0]!.test,
          body: [...last.branches[0]!.body, ...element.branches[0]!.body],
        }],
      };
    } else out.push(element);
  }
  return out;
}

function mergeEntries(test: string, a: TEntry[], b: TEntry[]): TEntry[] {
  const byA = new Map(a.map((e) => [entryKey(e), e]));
  const byB = new Map(b.map((e) => [entryKey(e), e]));
  const out: TEntry[] = [];
  for (const key of unionOrder([...byA.keys()], [...byB.keys()])) {
    const ea = byA.get(key);
    const eb = byB.get(key);
    if (ea && eb && nodeKey(ea) === nodeKey(eb)) out.push(ea);
    else if (ea && eb && ea.kind === "entry" && eb.kind === "entry") {
      const merged = mergeValues(test, ea.value, eb.value);
      out.push(...(merged ? [{ ...ea, value: merged }] : cond<TEntry>(test, [ea], [eb])));
    } else out.push(...cond<TEntry>(test, ea ? [ea] : [], eb ? [eb] : []));
  }
  return coalesce(out);
}

/** Longest common subsequence of two key lists, as index pairs. */
function lcs(a: string[], b: string[]): [number, number][] {
  const table = Array.from({ length: a.length + 1 }, () => new Array<number>(b.length + 1).fill(0));
  for (let i = a.length - 1; i >= 0; i--) {
    for (let j = b.length - 1; j >= 0; j--) {
      table[i]![j] = a[i] === b[j]
        ? table[i + 1]![j + 1]! + 1
        : Math.max(table[i + 1]![j]!, table[i]![j + 1]!);
    }
  }
  const pairs: [number, number][] = [];
  let i = 0;
  let j = 0;
  while (i < a.length && j < b.length) {
    if (a[i] === b[j]) {
      pairs.push([i, j]);
      i++;
      j++;
    } else if (table[i + 1]![j]! >= table[i]![j + 1]!) i++;
    else j++;
  }
  return pairs;
}

function mergeItems(test: string, a: TItem[], b: TItem[]): TItem[] {
  const keysA = a.map(itemKey);
  const keysB = b.map(itemKey);
  if (unique(keysA) && unique(keysB) && sameOrder(keysA, keysB)) {
    // Matched by name (containers, volumes, env): a changed item merges field by field.
    const out: TItem[] = [];
    for (const key of unionOrder(keysA, keysB)) {
      const ia = a[keysA.indexOf(key)];
      const ib = b[keysB.indexOf(key)];
      if (ia && ib && nodeKey(ia) === nodeKey(ib)) out.push(ia);
      else if (ia && ib && ia.kind === "item" && ib.kind === "item") {
        const merged = mergeValues(test, ia.value, ib.value);
        out.push(...(merged ? [{ ...ia, value: merged }] : cond<TItem>(test, [ia], [ib])));
      } else out.push(...cond<TItem>(test, ia ? [ia] : [], ib ? [ib] : []));
    }
    return coalesce(out);
  }
  // Scalars with repeats (args): the common subsequence stays, the rest is conditional.
  const out: TItem[] = [];
  let i = 0;
  let j = 0;
  for (const [pi, pj] of [...lcs(keysA, keysB), [a.length, b.length] as [number, number]]) {
    out.push(...cond<TItem>(test, a.slice(i, pi), b.slice(j, pj)));
    if (pi < a.length) out.push(a[pi]!);
    i = pi + 1;
    j = pj + 1;
  }
  return coalesce(out);
}

/**
 * Merges two values of one place: `a` where `test` holds, `b` where it does not. Maps and lists
 * merge part by part; anything else cannot be merged here (undefined: the caller makes the
 * whole entry or item conditional).
 *
 * @param test the Helm test (`.Values.privileged`)
 * @param a the value when it holds
 * @param b the value when it does not
 * @returns the merged value, or undefined
 */
export function mergeValues(test: string, a: TNode, b: TNode): TNode | undefined {
  if (nodeKey(a) === nodeKey(b)) return a;
  if (isMap(a) && isMap(b)) {
    return { kind: "map", entries: mergeEntries(test, a.entries, b.entries) };
  }
  if (isList(a) && isList(b)) return { kind: "list", items: mergeItems(test, a.items, b.items) };
  return undefined;
}

/** One template file's documents: each an object's tree, present under its conditions. */
export interface TDoc {
  /** `Kind/name` (sentinels in the name), the object's identity across renders. */
  id: string;
  /** Tests every one of which must hold for the object to exist (outermost first). */
  when: string[];
  /** The object. */
  tree: TNode;
}

/**
 * Merges two renders' documents: an object in both merges its trees; one in only one side
 * exists under that side's test.
 *
 * @param test the Helm test
 * @param a the documents when it holds
 * @param b the documents when it does not
 * @returns the merged documents, in `a`'s order with `b`'s others after their predecessor
 */
export function mergeDocs(test: string, a: TDoc[], b: TDoc[]): TDoc[] {
  const byA = new Map(a.map((d) => [d.id, d]));
  const byB = new Map(b.map((d) => [d.id, d]));
  return unionOrder([...byA.keys()], [...byB.keys()]).map((id) => {
    const da = byA.get(id);
    const db = byB.get(id);
    if (da && db) {
      if (nodeKey(da.when) !== nodeKey(db.when)) {
        throw new Error(`Cannot merge '${id}': it exists under different conditions per branch`);
      }
      const merged = mergeValues(test, da.tree, db.tree);
      if (!merged) throw new Error(`Cannot merge '${id}': its two renders differ in shape`);
      return { ...da, tree: merged };
    }
    const only = (da ?? db)!;
    return { ...only, when: [da ? test : negate(test), ...only.when] };
  });
}

// ---- emitting ----

function scalarText(value: Scalar): string {
  if (value === null) return "null";
  if (typeof value === "string") {
    // A multi-line string as one double-quoted (JSON) line: block scalars would need the
    // indentation of where they land.
    if (value.includes("\n")) return JSON.stringify(value);
    return stringify(value, { lineWidth: 0, defaultStringType: "PLAIN" }).trimEnd();
  }
  return String(value);
}

/** Escapes literal text for a YAML double-quoted scalar. */
function doubleQuoted(text: string): string {
  return text.replace(/\\/g, "\\\\").replace(/"/g, '\\"');
}

function exprText(node: TExpr): string {
  const [only] = node.parts;
  if (node.parts.length === 1 && typeof only === "object") {
    return node.type === "number" ? `{{ ${only.expr} }}` : `{{ ${only.expr} | quote }}`;
  }
  return `"${
    node.parts.map((p) => typeof p === "string" ? doubleQuoted(p) : `{{ ${p.expr} }}`).join("")
  }"`;
}

function directive(pad: string, text: string): string {
  return `${pad}{{- ${text} }}`;
}

function emitCond<T>(
  node: TCond<T>,
  pad: string,
  body: (elements: T[]) => string[],
): string[] {
  const lines: string[] = [];
  node.branches.forEach((branch, i) => {
    const head = i === 0 ? `if ${branch.test}` : branch.test ? `else if ${branch.test}` : "else";
    lines.push(directive(pad, head), ...body(branch.body));
  });
  lines.push(directive(pad, "end"));
  return lines;
}

function valueLines(head: string, value: TNode, indent: number): string[] {
  const pad = " ".repeat(indent);
  if (value === null || typeof value !== "object") return [`${pad}${head} ${scalarText(value)}`];
  switch (value.kind) {
    case "expr":
      return [`${pad}${head} ${exprText(value)}`];
    case "block":
      return [`${pad}${head}`, `${pad}  {{- toYaml ${value.expr} | nindent ${indent + 2} }}`];
    case "map":
      if (value.entries.length === 0) return [`${pad}${head} {}`];
      return [`${pad}${head}`, ...emitEntries(value.entries, indent + 2)];
    case "list":
      if (value.items.length === 0) return [`${pad}${head} []`];
      return [`${pad}${head}`, ...emitItems(value.items, indent + 2)];
  }
}

/**
 * Emits map entries at an indentation.
 *
 * @param entries the entries
 * @param indent spaces
 * @returns the lines
 */
export function emitEntries(entries: TEntry[], indent: number): string[] {
  const pad = " ".repeat(indent);
  return entries.flatMap((entry) =>
    entry.kind === "cond"
      ? emitCond(entry, pad, (body) => emitEntries(body, indent))
      : valueLines(`${scalarKey(entry.key)}:`, entry.value, indent)
  );
}

function scalarKey(key: string): string {
  return scalarText(key);
}

function emitItems(items: TItem[], indent: number): string[] {
  const pad = " ".repeat(indent);
  return items.flatMap((item) => {
    if (item.kind === "cond") return emitCond(item, pad, (body) => emitItems(body, indent));
    if (item.kind === "raw") return item.lines.map((line) => `${pad}${line}`);
    const value = item.value;
    if (isMap(value) && value.entries.length > 0) {
      const [first] = value.entries;
      if (first && first.kind === "entry") {
        // `- key: value`, the other entries under it.
        const lines = emitEntries(value.entries, indent + 2);
        return [`${pad}- ${lines[0]!.trimStart()}`, ...lines.slice(1)];
      }
      return [`${pad}-`, ...emitEntries(value.entries, indent + 2)];
    }
    return valueLines("-", value, indent);
  });
}

/**
 * Emits one object as a template document (without the `---` line).
 *
 * @param doc the document
 * @returns the template text, ending in a newline
 */
export function emitDoc(doc: TDoc): string {
  if (!isMap(doc.tree)) throw new Error(`Cannot emit '${doc.id}': not a map`);
  const body = emitEntries(doc.tree.entries, 0);
  const open = doc.when.map((test) => `{{- if ${test} }}`);
  const close = doc.when.map(() => "{{- end }}");
  return [...open, ...body, ...close].join("\n") + "\n";
}
