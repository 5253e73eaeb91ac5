/**
 * The commit messages of this repository from issue #24 on: a subject of at most 72 characters,
 * in the imperative, without a closing period, and the why in a body below it. The history before
 * {@link BASE} is left as it is (it is never rewritten); every commit after it is checked, so a
 * message that breaks the rule fails the suite that lands it.
 *
 * @module
 */
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { existsSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..");

/** The last commit before the rule: everything after it is checked. */
const BASE = "db86a3efaafe0313b7ab8e61681490ac6d4f682c";

/**
 * Commits that landed after {@link BASE} while their authors worked on clones without this test,
 * each with what is wrong; history is never rewritten, so they are named here instead. Add none:
 * a new commit that breaks the rule is mended before it lands.
 */
const LANDED_BEFORE_THE_CHECK = new Map([
  ["93052fa", "subject is 73 characters"],
  ["d78385b", "subject starts with 'a', not a verb"],
  ["7461389", "subject starts with 'the', not a verb (written before this test reached its clone)"],
  ["ce49b4e", "subject starts with 'a', not a verb (its scope has a space)"],
  ["1fde39c", "subject starts with 'the' after its scope, not a verb"],
  [
    "d75a2d1",
    "read as scope 'Add --redact to snapshot and agent' then 'keyed' (the colon ends a list)",
  ],
  ["f578827", "subject is 73 characters (pushed before this test ran on it)"],
]);

/** The longest subject (kind, Hono and kubectl keep theirs around 50-58). */
const MAX_SUBJECT = 72;

/** First words that say what a commit is, not what it does (not the imperative). */
const NOT_A_VERB = new Set(["a", "an", "the", "this", "new", "more", "some", "wip", "misc"]);

/** Words ending in `s` that are still imperative (or the same in every person). */
const S_WORDS = new Set([
  "access",
  "address",
  "bias",
  "bypass",
  "focus",
  "pass",
  "process",
  "redress",
]);

/**
 * What is wrong with one commit message, per the rule; empty when nothing is.
 *
 * @param subject the first line
 * @param body the lines after it
 * @returns the problems, in words
 */
function messageProblems(subject: string, body: string): string[] {
  const problems: string[] = [];
  if (subject.length > MAX_SUBJECT) {
    problems.push(`subject is ${subject.length} characters (at most ${MAX_SUBJECT})`);
  }
  if (/\.\s*$/.test(subject)) problems.push("subject ends with a period");
  // An optional scope first ("kube/rest.ts: ..."), as this history has it.
  const description = subject.replace(/^[\w./, -]+:\s+/, "");
  const word = (/^[A-Za-z][\w-]*/.exec(description)?.[0] ?? "").toLowerCase();
  if (word === "") problems.push("subject does not start with a word");
  else if (NOT_A_VERB.has(word)) problems.push(`subject starts with '${word}', not a verb`);
  else if (
    /(ed|ing)$/.test(word) &&
    !/^(need|embed|feed|seed|shred|speed|bring|ring|ping|string)$/.test(word)
  ) {
    problems.push(`subject's first word '${word}' is not the imperative`);
  } else if (/[^s]s$/.test(word) && !S_WORDS.has(word)) {
    problems.push(`subject's first word '${word}' is not the imperative (drop the 's')`);
  }
  if (body.trim() === "") problems.push("no body: say why below the subject");
  return problems;
}

Deno.test("commits: the rule reads subjects and bodies as it should (a broken check would pass all)", () => {
  const why = "Because the old way lost data.";
  assert.deepEqual(messageProblems("Keep the fleet report when one node is huge", why), []);
  assert.deepEqual(messageProblems("kube/rest.ts: retry a stale socket once", why), []);
  assert.deepEqual(messageProblems("Process the daemons' requests in order", why), []);
  assert.deepEqual(messageProblems("Ping a silent connection", why), []);
  assert.match(messageProblems(`Fix ${"x".repeat(69)}`, why).join(), /73 characters/);
  assert.match(messageProblems("Fix the sweep.", why).join(), /period/);
  assert.match(messageProblems("Fixed the sweep", why).join(), /imperative/);
  assert.match(messageProblems("Adds a sweep", why).join(), /drop the 's'/);
  assert.match(messageProblems("charts/aicr: a Helm chart", why).join(), /not a verb/);
  assert.match(messageProblems("Fix the sweep", "").join(), /no body/);
});

const HAS_HISTORY = existsSync(join(ROOT, ".git"));

Deno.test({
  name: "commits: every commit after the rule's base has a short imperative subject and a body",
  ignore: !HAS_HISTORY,
  fn() {
    const git = (...args: string[]) =>
      execFileSync("git", args, { cwd: ROOT, encoding: "utf8", maxBuffer: 64 << 20 });
    // A clone without the base (a shallow one) cannot be checked: say so rather than pass.
    assert.doesNotThrow(
      () => git("cat-file", "-e", `${BASE}^{commit}`),
      `the base commit ${BASE} is not in this clone (fetch the history: git fetch --unshallow)`,
    );
    const log = git("log", "--no-merges", "--format=%H%x00%s%x00%b%x1e", `${BASE}..HEAD`);
    const found: string[] = [];
    for (const record of log.split("\x1e")) {
      const [hash = "", subject = "", body = ""] = record.replace(/^\n/, "").split("\x00");
      if (hash === "" || LANDED_BEFORE_THE_CHECK.has(hash.slice(0, 7))) continue;
      const problems = messageProblems(subject, body);
      if (problems.length > 0) found.push(`${hash.slice(0, 7)} ${subject}: ${problems.join("; ")}`);
    }
    assert.deepEqual(found, []);
  },
});
