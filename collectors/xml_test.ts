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
  assert.throws(() => parseXml("<a><b/><b/><b/></a>", { maxElements: 3 }), /too many elements/);
});
