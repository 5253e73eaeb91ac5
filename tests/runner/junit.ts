/**
 * Reads the JUnit report `deno test --junit-path=FILE` writes: one `<testcase>` per test and per
 * test step (a step is named `<test> > <step>`), with `<failure>` or `<skipped/>` inside. This file,
 * not anything a test prints, is where the runner learns what passed.
 *
 * @module
 */
import { children, parseXml } from "../../collectors/xml.ts";

/** What became of one test or step. */
export type CaseStatus = "passed" | "failed" | "skipped";

/** One test or test step of the report. */
export interface TestCase {
  /** The test file, relative to the repository (`daemon/app_test.ts`). */
  file: string;
  /** The test's name; a step's is `<test> > <step>`. */
  name: string;
  /** Whether it is a step inside a test. */
  step: boolean;
  /** Its outcome. */
  status: CaseStatus;
  /** The failure message, when it failed. */
  message?: string;
}

/**
 * Whether `deno test --filter <filter>` selects a test of this name: a `/regex/` or a substring.
 *
 * @param name the test's name
 * @param filter the filter as given to deno test
 * @returns whether the test runs under the filter
 */
export function filterSelects(name: string, filter: string): boolean {
  if (filter.length > 1 && filter.startsWith("/") && filter.endsWith("/")) {
    return new RegExp(filter.slice(1, -1)).test(name);
  }
  return name.includes(filter);
}

/**
 * Parses a JUnit report of one or more test files.
 *
 * Steps are told from tests by their name: a case named `P > rest` is a step when a case named
 * `P` (a test or an outer step) is in the same file. A test whose own name contains ` > ` is
 * still a test unless another test of the file is named like its prefix.
 *
 * With a filter, deno lists the tests it filtered out as skipped; those are left out here (a test
 * the filter selects that is still skipped was ignored, and stays).
 *
 * @param xml the report
 * @param options the `--filter` the run used
 * @returns every test and step, in report order
 * @throws {Error} when the report is not a deno test JUnit document
 */
export function parseJunit(xml: string, options: { filter?: string } = {}): TestCase[] {
  const root = parseXml(xml);
  if (root.name !== "testsuites") {
    throw new Error(`Cannot read the JUnit report: its root is <${root.name}>, not <testsuites>`);
  }
  const cases: TestCase[] = [];
  for (const suite of children(root, "testsuite")) {
    const file = (suite.attributes.name ?? "").replace(/^\.\//, "");
    const entries = children(suite, "testcase");
    const names = new Set(entries.map((e) => e.attributes.name ?? ""));
    for (const entry of entries) {
      const name = entry.attributes.name ?? "";
      const cut = name.lastIndexOf(" > ");
      const step = cut > 0 && isStepOf(name, names);
      const failure = children(entry, "failure")[0] ?? children(entry, "error")[0];
      const skipped = children(entry, "skipped").length > 0;
      const status: CaseStatus = failure ? "failed" : skipped ? "skipped" : "passed";
      if (status === "skipped" && !step && options.filter !== undefined) {
        if (!filterSelects(name, options.filter)) continue;
      }
      const message = failure?.attributes.message;
      cases.push({ file, name, step, status, ...(message === undefined ? {} : { message }) });
    }
  }
  return cases;
}

function isStepOf(name: string, names: ReadonlySet<string>): boolean {
  for (let cut = name.indexOf(" > "); cut > 0; cut = name.indexOf(" > ", cut + 3)) {
    if (names.has(name.slice(0, cut))) return true;
  }
  return false;
}
