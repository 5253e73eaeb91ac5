import assert from "node:assert/strict";
import { Buffer } from "node:buffer";
import { parse, stringify } from "yaml";
import { parsePlainKubeconfig } from "./kubeconfig_yaml.ts";

/** What the `yaml` library reads, or the first line of its error. */
function library(text: string): { value: unknown } | { error: string } {
  try {
    return { value: parse(text, { logLevel: "error" }) };
  } catch (error) {
    return { error: (error as Error).message.split("\n")[0] ?? "" };
  }
}

/** Holds one text to the library: when the plain reader answers, the library answers the same. */
function holdsEqual(text: string): boolean {
  const plain = parsePlainKubeconfig(text);
  if (plain === undefined) return false;
  const lib = library(text);
  assert.ok("value" in lib, `the library refuses what the plain reader read:\n${text}\n${lib}`);
  assert.deepEqual(plain, lib.value, `read differently:\n${text}`);
  return true;
}

const b64 = (s: string) => Buffer.from(s.repeat(40)).toString("base64");

/** `kubectl config view --raw` (client-go's writer): sequences at their key's indentation. */
const KUBECTL_WRITTEN = [
  "apiVersion: v1",
  "clusters:",
  "- cluster:",
  `    certificate-authority-data: ${b64("-----BEGIN CERTIFICATE-----")}`,
  "    server: https://127.0.0.1:6443",
  "  name: kind-gpu",
  "- cluster:",
  "    insecure-skip-tls-verify: true",
  "    server: https://[fd00::1]:6443",
  "    tls-server-name: api.internal",
  "  name: lab",
  "contexts:",
  "- context:",
  "    cluster: kind-gpu",
  "    namespace: gpu-operator",
  "    user: kind-gpu",
  "  name: kind-gpu",
  "- context:",
  "    cluster: lab",
  "    user: eks-user",
  "  name: lab",
  "current-context: kind-gpu",
  "kind: Config",
  "preferences: {}",
  "users:",
  "- name: kind-gpu",
  "  user:",
  `    client-certificate-data: ${b64("CERT")}`,
  `    client-key-data: ${b64("KEY")}`,
  "- name: eks-user",
  "  user:",
  "    exec:",
  "      apiVersion: client.authentication.k8s.io/v1beta1",
  "      args:",
  "      - --region",
  "      - us-west-2",
  "      - eks",
  "      - get-token",
  "      - --cluster-name",
  "      - gpu-prod",
  "      command: aws",
  "      env: null",
  "      interactiveMode: IfAvailable",
  "      provideClusterInfo: false",
  "- name: basic",
  "  user:",
  "    password: 'it''s: secret'",
  '    username: "ops"',
  "    token: ''",
  "    as: ~",
  "    as-groups: []",
  "",
].join("\n");

/** A kubeconfig as this project's test clusters and the `yaml` library write one. */
const LIBRARY_WRITTEN = stringify({
  apiVersion: "v1",
  kind: "Config",
  clusters: [{
    name: "aicr-test",
    cluster: { server: "https://127.0.0.1:41443", "certificate-authority-data": b64("CA") },
  }],
  users: [{
    name: "aicr-admin",
    user: { "client-certificate-data": b64("C"), "client-key-data": b64("K") },
  }],
  contexts: [{ name: "aicr-admin", context: { cluster: "aicr-test", user: "aicr-admin" } }],
  "current-context": "aicr-admin",
});

Deno.test("parsePlainKubeconfig() reads kubectl's and the yaml library's layouts as the library does", () => {
  assert.ok(holdsEqual(KUBECTL_WRITTEN), "kubectl's layout is read without the library");
  assert.ok(holdsEqual(LIBRARY_WRITTEN), "the library's layout is read without the library");
  assert.ok(holdsEqual(stringify(parse(KUBECTL_WRITTEN), { indentSeq: false })));
  const read = parsePlainKubeconfig(KUBECTL_WRITTEN) as Record<string, unknown>;
  assert.equal(read["current-context"], "kind-gpu");
  assert.deepEqual(read.preferences, {});
});

Deno.test("parsePlainKubeconfig() reads each scalar form it takes as the library does", () => {
  const cases = [
    "a: true\nb: False\nc: TRUE\nd: null\ne: ~\nf: Null\ng:\n",
    "a: 'x'\nb: 'it''s'\nc: ''\nd: \"x y\"\ne: \"\"\ng: \"a: b\"\n",
    "a: yes\nb: no\nc: on\nd: off\ne: y\n",
    'a: https://host:6443/path?x=1\nb: x,y\nc: a[1]\nd: x"y\ne: -x\nf: x-\n',
    "a: x \u00a0\nb: \u00e9t\u00e9\n",
    "a:\n- b\n-\n  c: d\n- 'e'\n- {}\n- []\n",
    "a:\n  - b: c\n    d: e\n  - f\n",
    "a:   spaced   \nb:\n\n\nc: after blank lines\n",
    "list:\n- name: one\n  value: v1x\n",
  ];
  for (const text of cases) assert.ok(holdsEqual(text), `read without the library:\n${text}`);
});

Deno.test("parsePlainKubeconfig() leaves every other form to the library", () => {
  const cases = [
    "", // the library: null
    '{"apiVersion": "v1"}\n', // JSON
    "a: b # comment\n",
    "# head\na: b\n",
    "a: &x b\nc: *x\n",
    "a: !!str 1\n",
    "a: |\n  line\n",
    "a: >\n  folded\n",
    "a: 1\n",
    "a: 1.5\n",
    "a: .inf\n",
    "a: -1\n",
    "a: 0x10\n",
    "a: {b: c}\n",
    "a: [b, c]\n",
    "a: multi\n  line\n",
    "a:\n- multi\n  line\n",
    "a: b\na: c\n", // a repeated key: the library's error
    "a: b\r\n",
    "a:\tb\n",
    "---\na: b\n",
    "a: b\n---\nc: d\n",
    "1: b\n",
    "null: b\n",
    "true: b\n",
    "'a': b\n",
    "a b: c\n",
    "a:b\n",
    'a: "x\\ty"\n',
    "a: 'unclosed\n",
    "a: - b\n",
    "- - a\n",
    "  a: b\n",
    "a:\n  b: c\n   d: e\n",
    "a: b: c\n",
    "a: b:\n",
    "? a\n: b\n",
    "a: %x\n",
    "a: @x\n",
    "a: `x\n",
  ];
  for (const text of cases) {
    assert.equal(parsePlainKubeconfig(text), undefined, `left to the library:\n${text}`);
  }
});

/** A small deterministic generator, so a failure can be run again. */
function random(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const TRICKY = [
  "v1",
  "Config",
  "https://10.0.0.1:6443",
  "kind-gpu",
  "",
  " ",
  "a b",
  "x:",
  "x: y",
  "- x",
  "#x",
  "x #y",
  "'q'",
  '"d"',
  "it's",
  "1",
  "1.0",
  "0x1F",
  "1e3",
  "-1",
  "+1",
  ".5",
  ".inf",
  "-.Inf",
  ".NaN",
  "true",
  "False",
  "null",
  "~",
  "yes",
  "no",
  "on",
  "[]",
  "{}",
  "[a]",
  "{a: b}",
  "&a",
  "*a",
  "!tag",
  "|",
  ">",
  "%x",
  "@x",
  "`x",
  "?x",
  "a,b",
  "a\nb",
  "a\tb",
  "tab\t",
  " lead",
  "trail ",
  "é",
  "\u00a0nbsp",
  "x\u2028y",
  "---",
  "...",
  "<<",
  "=",
  "-",
  "--flag",
  "a-b",
  "_x",
  "2024-01-01",
  "12:30",
  "0o17",
  "0b1",
  "007",
  "1_000",
];
const KEYS = [
  "apiVersion",
  "kind",
  "clusters",
  "cluster",
  "server",
  "name",
  "user",
  "token",
  "args",
  "env",
  "exec",
  "command",
  "as",
  "x.y/z",
  "a-b",
  "_k",
  "1",
  "1.0",
  "null",
  "true",
  "on",
  "a b",
  "a:b",
  "#k",
  "'k'",
  "__proto__",
  "constructor",
  "toString",
];

function generate(next: () => number, depth: number): unknown {
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(next() * xs.length)] as T;
  const roll = next();
  if (depth > 3 || roll < 0.45) {
    const scalar = next();
    if (scalar < 0.8) return pick(TRICKY);
    if (scalar < 0.88) return next() < 0.5;
    if (scalar < 0.94) return null;
    return Math.floor(next() * 1000) / (next() < 0.5 ? 1 : 8);
  }
  if (roll < 0.7) {
    return Array.from({ length: Math.floor(next() * 4) }, () => generate(next, depth + 1));
  }
  const map: Record<string, unknown> = {};
  const size = Math.floor(next() * 5);
  for (let i = 0; i < size; i++) {
    Object.defineProperty(map, pick(KEYS), {
      value: generate(next, depth + 1),
      enumerable: true,
      writable: true,
      configurable: true,
    });
  }
  return map;
}

Deno.test("parsePlainKubeconfig() reads 3,000 random documents as the library does, or not at all", () => {
  const next = random(30);
  let read = 0;
  for (let i = 0; i < 3000; i++) {
    const document = { apiVersion: "v1", kind: "Config", ...(generate(next, 0) as object) };
    const text = stringify(document, { indentSeq: next() < 0.5 });
    if (holdsEqual(text)) read++;
  }
  // Most are within the plain layout, so the comparison is not vacuous.
  assert.ok(read > 500, `only ${read} of 3000 read without the library`);
});

Deno.test("parsePlainKubeconfig() reads 5,000 edited kubeconfigs as the library does, or not at all", () => {
  const next = random(31);
  const pieces = [
    " ",
    "  ",
    "-",
    "- ",
    ":",
    ": ",
    "'",
    '"',
    "#",
    "\n",
    "\n  ",
    "{}",
    "[]",
    "1",
    "~",
    "a",
    "\t",
  ];
  let read = 0;
  for (let i = 0; i < 5000; i++) {
    let text = next() < 0.5 ? KUBECTL_WRITTEN : LIBRARY_WRITTEN;
    for (let edits = 1 + Math.floor(next() * 3); edits > 0; edits--) {
      const at = Math.floor(next() * text.length);
      const kind = next();
      if (kind < 0.5) {
        text = text.slice(0, at) + pieces[Math.floor(next() * pieces.length)] + text.slice(at);
      } else if (kind < 0.8) text = text.slice(0, at) + text.slice(at + 1 + Math.floor(next() * 3));
      else {
        const lines = text.split("\n");
        const line = Math.floor(next() * lines.length);
        lines.splice(line, 0, lines[line] ?? "");
        text = lines.join("\n");
      }
    }
    if (holdsEqual(text)) read++;
  }
  assert.ok(read > 500, `only ${read} of 5000 read without the library`);
});
