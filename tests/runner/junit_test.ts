import assert from "node:assert/strict";
import { filterSelects, parseJunit } from "./junit.ts";

/** deno's report of: X; X > Y (a test); with steps (s1 > inner fails, s2 ignored); ignored. */
const REPORT = `<?xml version="1.0" encoding="UTF-8"?>
<testsuites name="deno test" tests="8" failures="3" errors="0" time="0.015">
    <testsuite name="./a_test.ts" tests="8" disabled="2" errors="0" failures="3">
        <testcase name="x" classname="./a_test.ts" time="0.001" line="1" col="6">
        </testcase>
        <testcase name="x &gt; y" classname="./a_test.ts" time="0.001" line="2" col="6">
            <failure message="Uncaught Error: boom">Error: boom</failure>
        </testcase>
        <testcase name="with steps" classname="./a_test.ts" time="0.002" line="4" col="6">
            <failure message="1 test step failed">1 test step failed.</failure>
        </testcase>
        <testcase name="ignored" classname="./a_test.ts" time="0.000" line="3" col="6">
            <skipped/>
        </testcase>
        <testcase name="with steps &gt; s1" classname="./a_test.ts" time="0.000" line="5" col="11">
            <failure message="1 test step failed">1 test step failed.</failure>
        </testcase>
        <testcase name="with steps &gt; s1 &gt; inner" classname="./a_test.ts" time="0.000">
            <failure message="Uncaught Error: x">Error: x</failure>
        </testcase>
        <testcase name="with steps &gt; s2" classname="./a_test.ts" time="0.000" line="6" col="11">
            <skipped/>
        </testcase>
        <testcase name="x &gt; y" classname="./a_test.ts" time="0.000" line="6" col="11">
        </testcase>
    </testsuite>
</testsuites>
`;
const TESTS = new Map([["a_test.ts", 4]]);

Deno.test("parseJunit() tells tests from steps by the registered count, not by name", () => {
  const { cases } = parseJunit(REPORT, { tests: TESTS });
  assert.deepEqual(cases.map((c) => [c.name, c.step, c.status]), [
    ["x", false, "passed"],
    ["x > y", false, "failed"],
    ["with steps", false, "failed"],
    ["ignored", false, "skipped"],
    ["with steps > s1", true, "failed"],
    ["with steps > s1 > inner", true, "failed"],
    ["with steps > s2", true, "skipped"],
    // A step y of test x, after the test named "x > y".
    ["x > y", true, "passed"],
  ]);
  assert.equal(cases[1]?.message, "Uncaught Error: boom");
  assert.equal(cases[0]?.file, "a_test.ts");
});

Deno.test("parseJunit() refuses a report that disagrees with the registered tests", () => {
  assert.throws(
    () => parseJunit(REPORT, { tests: new Map([["a_test.ts", 9]]) }),
    /'a_test.ts' registered 9 tests, the report lists 8 cases/,
  );
  // Three tests: "ignored" would be a step, and it names no case before it.
  assert.throws(
    () => parseJunit(REPORT, { tests: new Map([["a_test.ts", 3]]) }),
    /case 'ignored' after them is not a step/,
  );
  assert.throws(
    () => parseJunit(REPORT, { tests: new Map([...TESTS, ["b_test.ts", 1]]) }),
    /'b_test.ts' registered 1 tests, the report has none/,
  );
});

Deno.test("parseJunit() counts the tests a filter left out, and keeps the ignored ones it selected", () => {
  const ignored = parseJunit(REPORT, { tests: TESTS, filter: "ignored" });
  assert.deepEqual(ignored.cases.filter((c) => !c.step).map((c) => c.name), [
    "x",
    "x > y",
    "with steps",
    "ignored",
  ]);
  assert.equal(ignored.filteredOut, 0);
  const report = REPORT.replace(
    '<testcase name="x" classname="./a_test.ts" time="0.001" line="1" col="6">\n        ',
    '<testcase name="x" classname="./a_test.ts" time="0.001" line="1" col="6"><skipped/>',
  );
  const filtered = parseJunit(report, { tests: TESTS, filter: "with" });
  assert.deepEqual(filtered.cases.filter((c) => !c.step).map((c) => c.name), [
    "x > y",
    "with steps",
  ]);
  assert.equal(filtered.filteredOut, 2, "x and ignored");
});

Deno.test("filterSelects() follows deno test: a /regex/ or a substring", () => {
  assert.equal(filterSelects("daemon serves", "serves"), true);
  assert.equal(filterSelects("daemon serves", "/^daemon/"), true);
  assert.equal(filterSelects("daemon serves", "/^serves/"), false);
});

Deno.test("parseJunit() refuses a document that is not a deno test report", () => {
  assert.throws(() => parseJunit("<html></html>", { tests: TESTS }), /not <testsuites>/);
  assert.throws(() => parseJunit("<testsuites>", { tests: TESTS }), /XML/i);
});
