/**
 * Loaded by the test command before each test file (`deno test --preload`), it writes what the
 * JUnit report cannot say to the file named by `AICR_TEST_RECORD`, one JSON object a line:
 *
 * - `{"test": "<file URL>"}` for every `Deno.test` registration, with the file deno records as
 *   the test's location. A JUnit report names a step `<test> > <step>`, so a test named `X > Y`
 *   beside a test `X` reads like a step; deno lists a file's tests before any of its steps, so
 *   the number registered per file tells them apart (`tests/runner/junit.ts`).
 * - `{"unload": {"pendingWork": true|false, "open": [...]}}` once the file's tests have run:
 *   whether a timer, a promise, a server or a child process was still pending (and the kinds of
 *   resource still open, as a hint). deno test does not run the event loop after the last test,
 *   so a failure such work would raise is never seen; the runner fails the file instead.
 *
 * Without `AICR_TEST_RECORD` it does nothing.
 *
 * @module
 */
import vm from "node:vm";

type Register = (...args: unknown[]) => void;

const RECORD = Deno.env.get("AICR_TEST_RECORD");
/** Frames deno skips when it records a test's location (its own and node's built-in code). */
const INTERNAL_REGEXP = /^(ext|node):/;
const FRAME_REGEXP = /\(?([a-z][a-z0-9+.-]*:[^\s()]*?):\d+:\d+\)?$/;

function write(entry: unknown): void {
  Deno.writeTextFileSync(RECORD!, `${JSON.stringify(entry)}\n`, { append: true });
}

/** The first frame outside deno's, node's and this file's code: the file deno gives the test. */
function callerFile(): string {
  const limit = Error.stackTraceLimit;
  Error.stackTraceLimit = 50;
  const stack = new Error().stack ?? "";
  Error.stackTraceLimit = limit;
  for (const line of stack.split("\n").slice(1)) {
    const url = FRAME_REGEXP.exec(line.trim())?.[1];
    if (url !== undefined && url !== import.meta.url && !INTERNAL_REGEXP.test(url)) return url;
  }
  return "";
}

/**
 * The wrapper is compiled under a `node:` file name: deno takes a test's location from the first
 * stack frame outside `ext:` and `node:` code, so the test keeps its own file, line and column.
 */
const wrap = vm.runInThisContext(
  `(function wrap(register, recorded) {
    return function test(...args) {
      const result = register.apply(this, args);
      recorded();
      return result;
    };
  })`,
  { filename: "node:aicr-test-record" },
) as (register: Register, recorded: () => void) => Register;

if (RECORD !== undefined) {
  const recorded = () => write({ test: callerFile() });
  const original = Deno.test as unknown as Register & Record<string, unknown>;
  const test = wrap(original, recorded) as Register & Record<string, unknown>;
  // The other members (beforeAll, afterAll, beforeEach, afterEach) register no test.
  for (const key of Object.getOwnPropertyNames(original)) {
    if (key === "length" || key === "name" || key === "prototype") continue;
    const member = original[key];
    test[key] = (key === "ignore" || key === "only") && typeof member === "function"
      ? wrap(member as Register, recorded)
      : member;
  }
  (Deno as unknown as { test: unknown }).test = test;

  const internal = (Deno as unknown as Record<symbol, { core?: Record<string, unknown> }>)[
    (Deno as unknown as { internal: symbol }).internal
  ];
  const hasMoreWork = internal?.core?.eventLoopHasMoreWork;
  const resources = internal?.core?.resources;
  addEventListener("unload", () => {
    const pendingWork = typeof hasMoreWork === "function" ? Boolean(hasMoreWork()) : null;
    // What is still open, as a hint for finding the pending work (timers are not listed).
    const open = pendingWork && typeof resources === "function"
      ? Object.values(resources() as Record<string, string>)
        .filter((name) => !["stdin", "stdout", "stderr"].includes(name))
      : [];
    write({ unload: { pendingWork, open } });
  });
}
