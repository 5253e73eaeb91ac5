import assert from "node:assert/strict";
import { filterSelects, parseJunit } from "./junit.ts";

const REPORT = `<?xml version="1.0" encoding="UTF-8"?>
<testsuites name="deno test" tests="6" failures="2" errors="0" time="0.015">
    <testsuite name="./a_test.ts" tests="6" disabled="2" errors="0" failures="2">
        <testcase name="x &gt; y" classname="./a_test.ts" time="0.001" line="1" col="6">
        </testcase>
        <testcase name="with steps" classname="./a_test.ts" time="0.002" line="4" col="6">
            <failure message="1 test step failed">1 test step failed.</failure>
        </testcase>
        <testcase name="ignored" classname="./a_test.ts" time="0.000" line="3" col="6">
            <skipped/>
        </testcase>
        <testcase name="with steps &gt; s1" classname="./a_test.ts" time="0.000" line="5" col="11">
        </testcase>
        <testcase name="with steps &gt; s1 &gt; inner" classname="./a_test.ts" time="0.000">
            <failure message="Uncaught Error: x">Error: x</failure>
        </testcase>
        <testcase name="with steps &gt; s2" classname="./a_test.ts" time="0.000" line="6" col="11">
            <skipped/>
        </testcase>
    </testsuite>
</testsuites>
`;

Deno.test("parseJunit() tells tests from steps (nested too) and reads each outcome", () => {
  assert.deepEqual(parseJunit(REPORT).map((c) => [c.name, c.step, c.status]), [
    ["x > y", false, "passed"],
    ["with steps", false, "failed"],
    ["ignored", false, "skipped"],
    ["with steps > s1", true, "passed"],
    ["with steps > s1 > inner", true, "failed"],
    ["with steps > s2", true, "skipped"],
  ]);
  assert.equal(parseJunit(REPORT)[4]?.message, "Uncaught Error: x");
  assert.equal(parseJunit(REPORT)[0]?.file, "a_test.ts");
});

Deno.test("parseJunit() leaves out the tests a filter did not select, not the ignored ones it did", () => {
  const names = parseJunit(REPORT, { filter: "ignored" }).filter((c) => !c.step).map((c) => c.name);
  assert.deepEqual(names, ["x > y", "with steps", "ignored"]);
  assert.deepEqual(
    parseJunit(REPORT, { filter: "with" }).filter((c) => !c.step).map((c) => c.name),
    ["x > y", "with steps"],
  );
});

Deno.test("filterSelects() follows deno test: a /regex/ or a substring", () => {
  assert.equal(filterSelects("daemon serves", "serves"), true);
  assert.equal(filterSelects("daemon serves", "/^daemon/"), true);
  assert.equal(filterSelects("daemon serves", "/^serves/"), false);
});

Deno.test("parseJunit() refuses a document that is not a deno test report", () => {
  assert.throws(() => parseJunit("<html></html>"), /not <testsuites>/);
  assert.throws(() => parseJunit("<testsuites>"), /XML/i);
});
