/**
 * Reads the JUnit report `deno test --junit-path=FILE` writes: one `<testcase>` per test and per
 * test step (a step is named `<test> > <step>`), with `<failure>` or `<skipped/>` inside. This file
 * and the record `tests/runner/preload.ts` writes beside it, not anything a test prints, are where
 * the runner learns what passed.
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

/** What {@link parseJunit} read. */
export interface JunitReport {
  /** Every test and step, in report order (tests a filter left out are not among them). */
  cases: TestCase[];
  /** Tests the filter left out. */
  filteredOut: number;
}

/**
 * Parses a JUnit report of one or more test files.
 *
 * Tests are told from steps by how many tests each file registered (`tests/runner/preload.ts`
 * counts them), never by name: deno lists a file's tests, in the order they were registered,
 * before any of its steps, so the first `n` cases of a file's suite are its tests and the rest
 * are steps (each named after a case before it, `<test> > <step>`). A test named `X > Y` beside
 * a test `X` is a test.
 *
 * With a filter, deno lists the tests it filtered out as skipped; those are counted in
 * `filteredOut`, not returned (a test the filter selects that is still skipped was ignored, and
 * stays).
 *
 * @param xml the report
 * @param options `tests`: the number of tests registered per file, keyed by the suite's name
 *   without a leading `./`; `filter`: the `--filter` the run used
 * @returns every test and step, and how many tests the filter left out
 * @throws {Error} when the report is not a deno test JUnit document, or does not agree with the
 *   registered tests
 */
export function parseJunit(
  xml: string,
  options: { tests: ReadonlyMap<string, number>; filter?: string },
): JunitReport {
  const root = parseXml(xml);
  if (root.name !== "testsuites") {
    throw new Error(`Cannot read the JUnit report: its root is <${root.name}>, not <testsuites>`);
  }
  const cases: TestCase[] = [];
  let filteredOut = 0;
  const seen = new Set<string>();
  // Across suites: a step whose t.step call sits in a helper module is listed under that file.
  const names = new Set<string>();
  for (const suite of children(root, "testsuite")) {
    const file = (suite.attributes.name ?? "").replace(/^\.\//, "");
    const entries = children(suite, "testcase");
    const tests = options.tests.get(file) ?? 0;
    if (entries.length < tests) {
      throw new Error(
        `Cannot read the JUnit report: '${file}' registered ${tests} tests, the report lists ` +
          `${entries.length} cases`,
      );
    }
    entries.forEach((entry, i) => {
      const name = entry.attributes.name ?? "";
      const step = i >= tests;
      if (step && !isStepOf(name, names)) {
        throw new Error(
          `Cannot read the JUnit report: '${file}' registered ${tests} tests, but case ` +
            `'${name}' after them is not a step of any case before it`,
        );
      }
      names.add(name);
      const failure = children(entry, "failure")[0] ?? children(entry, "error")[0];
      const skipped = children(entry, "skipped").length > 0;
      const status: CaseStatus = failure ? "failed" : skipped ? "skipped" : "passed";
      if (status === "skipped" && !step && options.filter !== undefined) {
        if (!filterSelects(name, options.filter)) {
          filteredOut += 1;
          return;
        }
      }
      const message = failure?.attributes.message;
      cases.push({ file, name, step, status, ...(message === undefined ? {} : { message }) });
    });
    seen.add(file);
  }
  for (const [file, tests] of options.tests) {
    if (tests > 0 && !seen.has(file)) {
      throw new Error(
        `Cannot read the JUnit report: '${file}' registered ${tests} tests, the report has none`,
      );
    }
  }
  return { cases, filteredOut };
}

function isStepOf(name: string, names: ReadonlySet<string>): boolean {
  for (let cut = name.indexOf(" > "); cut > 0; cut = name.indexOf(" > ", cut + 3)) {
    if (names.has(name.slice(0, cut))) return true;
  }
  return false;
}
