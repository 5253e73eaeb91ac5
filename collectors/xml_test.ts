import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";
import { child, children, decodeEntities, parseXml, textAt, XmlError } from "./xml.ts";

const testdata = (name: string) => new URL(`./testdata/${name}`, import.meta.url);

Deno.test("parseXml() builds the element tree with attributes and raw text", () => {
  const root = parseXml(
    `<?xml version="1.0"?>\n<a x="1" y='two'>\n <b>hi </b><b/><c><d>deep</d></c></a>\n`,
  );
  assert.equal(root.name, "a");
  assert.deepEqual(root.attributes, { x: "1", y: "two" });
  assert.equal(children(root, "b").length, 2);
  assert.equal(child(root, "b")?.text, "hi ");
  assert.equal(textAt(root, "c/d"), "deep");
  assert.equal(textAt(root, "c/missing"), "");
  assert.equal(parseXml("<a><![CDATA[x<y>&amp;]]>z&lt;</a>").text, "x<y>&amp;z<");
});

Deno.test("decodeEntities() decodes only the five predefined entities and numeric references", () => {
  assert.equal(decodeEntities("&lt;&gt;&amp;&quot;&apos;&#65;&#x42;"), `<>&"'AB`);
  assert.equal(decodeEntities("&lol; &xxe; &#0; &#xD800;"), "&lol; &xxe; &#0; &#xD800;");
});

Deno.test("parseXml() skips a DOCTYPE internal subset and never expands its entities", async () => {
  const root = parseXml(await readFile(testdata("nvidia-smi-entities.xml"), "utf8"));
  assert.equal(textAt(root, "driver_version"), "&lol3;");
  assert.equal(textAt(root, "cuda_version"), "&xxe;12.8");
  assert.equal(textAt(root, "gpu/product_name"), "NVIDIA H100 80GB HBM3 & friends AB");
  assert.equal(textAt(root, "gpu/product_architecture").trim(), "Hop<per>");
  assert.equal(child(root, "gpu")?.attributes.id, "00000000:04:00.0");
});

Deno.test("parseXml() rejects a truncated document instead of returning part of it", async () => {
  const text = await readFile(testdata("nvidia-smi-truncated.xml"), "utf8");
  assert.throws(
    () => parseXml(text),
    (e: unknown) => e instanceof XmlError && /truncated|unterminated/.test(e.message),
  );
  assert.throws(() => parseXml("<a><b></b>"), /truncated: element 'a' is not closed/);
  assert.throws(() => parseXml("<a></b>"), /does not match/);
  assert.throws(() => parseXml(""), /no root element/);
  assert.throws(() => parseXml("<a/><b/>"), /second root/);
  assert.throws(() => parseXml("<!DOCTYPE a [ <!ENTITY x 'y'>"), /unterminated DOCTYPE/);
});

Deno.test("parseXml() enforces its size and depth bounds", () => {
  assert.throws(() => parseXml("<a>" + "x".repeat(100) + "</a>", { maxChars: 50 }), /too large/);
  const deep = "<a>".repeat(70) + "</a>".repeat(70);
  assert.throws(() => parseXml(deep), /nest too deep: limit is 64/);
  assert.equal(parseXml("<a>".repeat(10) + "</a>".repeat(10), { maxDepth: 10 }).name, "a");
  // Elements with attributes, and a self-closing one, nest no deeper than plain ones.
  const attributed = '<a x="1">'.repeat(70) + "</a>".repeat(70);
  assert.throws(() => parseXml(attributed), /nest too deep: limit is 64/);
  const selfClosing = (n: number) => "<a>".repeat(n) + "<b/>" + "</a>".repeat(n);
  assert.equal(parseXml(selfClosing(9), { maxDepth: 10 }).name, "a");
  assert.throws(() => parseXml(selfClosing(10), { maxDepth: 10 }), /nest too deep: limit is 10/);
  assert.throws(() => parseXml("<a><b/><b/><b/></a>", { maxElements: 3 }), /too many elements/);
});

Deno.test("parseXml() with a selection builds only the selected elements and their leaves' text", () => {
  const doc = `<log><v>1.0</v><skip a="b">${"<p><q>x</q></p>\n".repeat(1000)}</skip>` +
    `<gpu id="g0"><name>H100</name><big>${
      "<s>y</s>".repeat(1000)
    }</big>\n<pci><bus>04</bus><other/></pci></gpu></log>`;
  const root = parseXml(doc, { select: { v: {}, gpu: { name: {}, pci: { bus: {} } } } });
  assert.deepEqual(root.children.map((c) => c.name), ["v", "gpu"]);
  const gpu = child(root, "gpu");
  assert.equal(gpu?.attributes.id, "g0");
  assert.deepEqual(gpu?.children.map((c) => c.name), ["name", "pci"]);
  assert.equal(gpu?.text, "", "a non-leaf keeps no text");
  assert.equal(textAt(root, "gpu/pci/bus"), "04");
  assert.deepEqual(child(gpu, "pci")?.children.map((c) => c.name), ["bus"]);
  // What is skipped is still checked: a broken element anywhere fails the document.
  assert.throws(
    () => parseXml("<log><skip><p></q></skip></log>", { select: { v: {} } }),
    /does not match/,
  );
  assert.throws(
    () => parseXml("<log><v/><v/><v/></log>", { select: { v: {} }, maxKept: 3 }),
    /too many elements to keep: limit is 3/,
  );
});

Deno.test("parseXml() reads plain tags and leaves as it reads spaced, attributed and referencing ones", () => {
  const plain = parseXml("<a><b>x y</b><c><d>1</d></c><e></e></a>");
  const general = parseXml("<a ><b >x y</b ><c\n><d >1</d\n></c ><e ></e ></a >");
  assert.deepEqual(plain, general);
  assert.equal(parseXml("<a><b>x&amp;y</b></a>").children[0]?.text, "x&y");
  // Skipped plain elements still count, nest and match.
  const select = { b: {} };
  assert.throws(() => parseXml("<a><s>1</s><s>2</s></a>", { select, maxElements: 2 }), /too many/);
  assert.throws(() => parseXml("<a><s><t>1</t></s></a>", { select, maxDepth: 2 }), /nest too deep/);
  assert.throws(() => parseXml("<a><s><t>1</t></a></s>", { select }), /does not match/);
  assert.throws(() => parseXml("<a><b>1</b>", { select }), /element 'a' is not closed/);
  assert.deepEqual(
    parseXml("<a><s><b>1</b></s><b>2</b></a>", { select }).children.map((c) => c.text),
    [
      "2",
    ],
  );
});

Deno.test("parseXml() reads past a skipped plain subtree with the same counts, depths and errors", () => {
  const select = { v: {} };
  const sub = "<s><p><q>1</q><q>2</q></p>\n<p><q>3</q></p></s>"; // 6 elements, 3 deep
  const doc = `<log><v>x</v>${sub}${sub}<v>y</v></log>`; // 15 elements
  assert.deepEqual(parseXml(doc, { select }).children.map((c) => c.text), ["x", "y"]);
  assert.equal(parseXml(doc, { select, maxElements: 15 }).name, "log");
  assert.throws(() => parseXml(doc, { select, maxElements: 14 }), /too many elements: limit is 14/);
  assert.equal(parseXml(doc, { select, maxDepth: 4 }).name, "log");
  assert.throws(() => parseXml(doc, { select, maxDepth: 3 }), /nest too deep: limit is 3/);
  // Not plain all through, or not well-formed: read tag by tag, with the same outcome.
  const mixed = `<log><s><p a="1"><q>1</q></p><!-- c --><s><q/></s></s><v>z</v></log>`;
  assert.deepEqual(parseXml(mixed, { select }).children.map((c) => c.text), ["z"]);
  assert.throws(() => parseXml("<log><s><p><q>1</p></q></s></log>", { select }), /does not match/);
  assert.throws(() => parseXml("<log><s><p>1</p>", { select }), /element 's' is not closed/);
});

Deno.test("parseXml() keeps no view of the document in the texts and attributes it keeps", async () => {
  // V8 makes a slice of 13 or more characters a view that keeps its whole string alive. In a
  // process of its own, with a collection forced: trees kept from two 4 MB documents (a selection,
  // and the whole tree) hold a few hundred bytes, not the documents.
  const script = `
    import { parseXml } from ${JSON.stringify(new URL("./xml.ts", import.meta.url).href)};
    globalThis.gc();
    const before = Deno.memoryUsage().heapUsed;
    const make = () => '<log><gpu id="00000000:04:00.0-long"><uuid>GPU-0123456789abcdef</uuid></gpu>' +
      '<!--' + "z".repeat(4_000_000) + '--><v>' + "y".repeat(40) + '</v><w>a&amp;b and more</w></log>';
    // Parsed in a function of their own: a frame still running may hold a document in a register.
    const keep = () => [parseXml(make(), { select: { gpu: { uuid: {} }, v: {} } }), parseXml(make())];
    const kept = keep();
    /x/.test("x"); // V8 keeps the last subject of a regular expression (RegExp.input)
    globalThis.gc();
    const grew = Deno.memoryUsage().heapUsed - before;
    const [gpu, v, w] = kept[1].children;
    console.log(JSON.stringify({ grew, uuid: kept[0].children[0].children[0].text,
      id: gpu.attributes.id, v: v.text.length, w: w.text }));`;
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["eval", "--v8-flags=--expose-gc", script],
    stdout: "piped",
    stderr: "piped",
  }).output();
  assert.equal(out.code, 0, new TextDecoder().decode(out.stderr));
  const figures = JSON.parse(new TextDecoder().decode(out.stdout));
  assert.equal(figures.uuid, "GPU-0123456789abcdef");
  assert.equal(figures.id, "00000000:04:00.0-long");
  assert.equal(figures.v, 40);
  assert.equal(figures.w, "a&b and more");
  assert.ok(figures.grew < 2_000_000, `the kept trees hold ${figures.grew} bytes of heap`);
});
