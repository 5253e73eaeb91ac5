import assert from "node:assert/strict";
import { findGuards, mutate } from "./mutate.ts";

const SOURCE = `function usable(x: X): X | undefined {
  // guard: same-key: a certificate for another key is never served
  if (!x.checkPrivateKey(key)) return undefined;
  // guard: same-node: nor one for another node
  // (a second comment line)
  if (x.checkHost(node, { subject: "never" }) === undefined) {
    log("a } in a string", \`and \${"}"} in a template\`);
    return undefined;
  } else if (other) {
    return x;
  }
  // guard: pinned: the delete is pinned to the UID
  const body = { kind: "DeleteOptions", preconditions: { uid }, };
  call({
    // guard: pinned-too: the property alone
    preconditions: { uid },
    name,
  });
  // guard: decided: the review decides;
  // mutant: \`decision.allowed\` -> \`true\`
  return decision.allowed;
}
`;

Deno.test("findGuards() finds each marker's statement, through comments, strings and else branches", () => {
  const guards = findGuards(SOURCE);
  assert.deepEqual(guards.map((g) => [g.name, g.line, SOURCE.slice(g.start, g.end)]), [
    ["same-key", 2, "if (!x.checkPrivateKey(key)) return undefined;"],
    [
      "same-node",
      4,
      SOURCE.slice(
        SOURCE.indexOf("if (x.checkHost"),
        SOURCE.indexOf("return x;\n  }") + "return x;\n  }".length,
      ),
    ],
    ["pinned", 12, 'const body = { kind: "DeleteOptions", preconditions: { uid }, };'],
    ["pinned-too", 15, "preconditions: { uid },"],
    ["decided", 19, "return decision.allowed;"],
  ]);
  assert.equal(guards[0]!.what, "a certificate for another key is never served");
  assert.equal(guards[1]!.what, "nor one for another node (a second comment line)");
  assert.equal(guards[4]!.what, "the review decides");
  assert.deepEqual(guards[4]!.replace, { from: "decision.allowed", to: "true" });
});

Deno.test("mutate() turns an if's condition false, removes any other statement, or replaces the text the marker names", () => {
  const [key, node, , pinned, decided] = findGuards(SOURCE);
  assert.ok(mutate(SOURCE, key!).includes("\n  if (false) return undefined;\n"));
  const noNode = mutate(SOURCE, node!);
  assert.ok(noNode.includes('\n  if (false) {\n    log("a } in a string"'));
  assert.match(noNode, /\} else if \(other\) \{/, "only the first condition");
  const noPin = mutate(SOURCE, pinned!);
  assert.ok(
    noPin.includes("call({\n    // guard: pinned-too: the property alone\n    \n    name,"),
  );
  assert.ok(mutate(SOURCE, decided!).includes("\n  return true;\n}"));
});

Deno.test("findGuards() and mutate() refuse a marker without a statement, or a replacement that is not there once", () => {
  assert.throws(
    () => findGuards("x;\n// guard: dangling: nothing\n", "a.ts"),
    /a\.ts:2: .*'dangling' marks no statement/,
  );
  const twice = "// guard: twice: x; mutant: `a` -> `b`\nf(a, a);\n";
  assert.throws(() => mutate(twice, findGuards(twice)[0]!), /holds 2 times/);
});
