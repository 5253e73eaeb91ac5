/**
 * The mutation check (`deno task test:mutants`, and a gate of `npm test` with the unit lane):
 * each safety check listed in {@link GUARDS} is removed (or inverted) in a scratch copy of the
 * repository, one at a time, and the tests beside its module run against that mutant. A check
 * whose removal fails no test is named and fails the run: nothing would notice it gone.
 *
 * Checks are found by their markers (`// guard: <name>: ...`, `tests/mutants/mutate.ts`), so
 * code can move between files and folders; the tests run are the marked file's sibling
 * `<module>_test.ts`. A listed check without a marker, a marker not listed, or tests that fail
 * before any mutation, fail the run too.
 *
 * Arguments: `--only <name>[,<name>]` checks only those; `--list` prints the list and exits.
 *
 * @module
 */
import { spawn } from "node:child_process";
import { copyFile, mkdir, mkdtemp, readFile, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import process from "node:process";
import { fileURLToPath } from "node:url";
import { listRepositoryFiles } from "../runner/discover.ts";
import { findGuards, type Guard, mutate } from "./mutate.ts";

const ROOT = dirname(dirname(dirname(fileURLToPath(import.meta.url))));

/** How long one mutant's tests may run; a mutant that hangs them counts as caught. */
const MUTANT_DEADLINE_MS = 180_000;

/**
 * The checks whose removal must fail a test, by marker name, with what each protects. Grouped as
 * issue #26 lists them.
 */
export const GUARDS: Readonly<Record<string, string>> = {
  // Node identity: the daemon serves only a certificate issued for its own key, node and pod IP.
  "identity-key": "daemon identity: a certificate for another key is never served",
  "identity-node": "daemon identity: a certificate for another node is never served",
  "identity-pod-ip": "daemon identity: a certificate for another pod IP is never served",
  // The CSR signer's decision.
  "signer-requester": "signer: only this install's ServiceAccount's requests are decided",
  "signer-pod-bound": "signer: a request without a pod-bound token is denied",
  "signer-live-pod": "signer: a request from a pod not live in this DaemonSet is denied",
  "signer-pod-name": "signer: a token naming another pod than its UID is denied",
  "signer-node": "signer: a token naming another node than the pod's is denied",
  "signer-node-uid": "signer: a token issued on a node since replaced is denied",
  "signer-key-type": "signer: only P-256 keys are signed",
  "signer-proof": "signer: a request whose signature does not verify is denied",
  "signer-names": "signer: only the pod's node name and IP are signed",
  "signer-usages": "signer: only server-auth usages are signed",
  // UID preconditions and the invocation-ID proof of cleanup.
  "uid-delete": "kube: every delete is pinned to the UID read (preconditions.uid)",
  "uid-configmap-check": "kube: a ConfigMap is rewritten only when its UID is the one created",
  "ledger-owns": "ledger: ownership needs every label, the invocation ID included",
  "ledger-adopt-proof": "ledger: a create's lost answer adopts only an object proven ours",
  "ledger-delete-proof": "ledger: cleanup deletes an unconfirmed object only when proven ours",
  // The permission gate.
  "gate-denied": "gate: a missing permission stops the run before anything is written",
  "gate-unchecked-sa-only": "gate: only the agent's questions may go unchecked, never the caller's",
  // Output-path checks.
  "output-directory": "output: a directory is refused as the output file",
  "output-never-exists": "output: a path under a regular file is refused up front",
  "output-pipe": "output: a pipe is written into, never renamed over",
  "output-device": "output: a device is written into, never renamed over",
  "output-no-follow": "output: a file named in an output folder is never written through a link",
  // TokenReview and SubjectAccessReview decisions.
  "review-authenticated": "daemon auth: a TokenReview that did not authenticate admits no user",
  "review-bound-node": "daemon auth: a token bound to another node is refused",
  "review-allowed": "daemon auth: the SubjectAccessReview's answer decides",
  "app-unauthenticated": "daemon: a request without a valid token is answered 401",
  "app-denied": "daemon: a request the review denies is answered 403",
  "token-review-limit": "daemon auth: reviews of unseen tokens are bounded per source and overall",
  // Baselines decide drift only when the install's CA signed them.
  "baseline-signature": "baseline: trusted only under the install's CA signature",
  "baseline-trust": "daemon: only a baseline the install's CA signed decides drift",
  // Size and depth limits.
  "token-size": "daemon auth: an over-long bearer token is refused before any review",
  "body-size": "daemon: a request body over the bound is refused",
  "fleet-declared-size": "fleet: an answer declaring more than the bound is refused unread",
  "fleet-streamed-size": "fleet: an answer streaming past the bound is cut",
  "snapshot-size": "snapshot: a document over 16 MiB is refused",
  "snapshot-depth": "snapshot: a document nesting too deeply is refused",
  "snapshot-aliases": "snapshot: YAML alias expansion is bounded",
  "xml-depth": "nvidia-smi XML: elements nesting too deeply are refused",
  "dbus-depth": "D-Bus: a signature nesting too deeply is refused",
};

/** One marked check, where it is. */
interface Located extends Guard {
  file: string;
  tests: string[];
}

/** How one mutant went. */
interface Verdict {
  guard: Located;
  /** caught: a test failed; survived: none did; broken: its tests did not run. */
  outcome: "caught" | "survived" | "broken";
  detail: string;
  seconds: number;
}

function say(line: string): void {
  // deno-lint-ignore no-console
  console.log(line);
}

/** Finds every marker in the repository's modules. */
async function locateGuards(files: readonly string[]): Promise<Located[]> {
  const found: Located[] = [];
  for (const file of files) {
    if (!file.endsWith(".ts") || /(^|[_.])test\.ts$/.test(file) || file.startsWith("tests/")) {
      continue;
    }
    const text = await readFile(join(ROOT, file), "utf8");
    if (!text.includes("// guard: ")) continue;
    const sibling = file.replace(/\.ts$/, "_test.ts");
    for (const guard of findGuards(text, file)) {
      found.push({ ...guard, file, tests: files.includes(sibling) ? [sibling] : [] });
    }
  }
  return found;
}

/** What is wrong with the list and the markers, if anything. */
function listProblems(found: readonly Located[], only: readonly string[] | undefined): string[] {
  const problems: string[] = [];
  const names = found.map((g) => g.name);
  for (const name of only ?? Object.keys(GUARDS)) {
    if (!names.includes(name)) {
      problems.push(`the listed check '${name}' has no marker in the code ('// guard: ${name}')`);
    }
  }
  for (const g of found) {
    const where = `${g.file}:${g.line}`;
    if (!(g.name in GUARDS)) problems.push(`${where}: the marker '${g.name}' is not listed`);
    if (names.indexOf(g.name) !== names.lastIndexOf(g.name)) {
      problems.push(`${where}: the marker '${g.name}' is used twice`);
    }
    if (g.tests.length === 0) {
      problems.push(`${where}: '${g.name}' has no test beside its module (${g.file} has no _test)`);
    }
  }
  return [...new Set(problems)];
}

/** A copy of the repository's files, sharing `node_modules`. */
async function scratchCopy(files: readonly string[]): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), "aicr-mutants-"));
  for (const file of files) {
    if (file.startsWith("node_modules/")) continue;
    await mkdir(dirname(join(dir, file)), { recursive: true });
    await copyFile(join(ROOT, file), join(dir, file));
  }
  await symlink(join(ROOT, "node_modules"), join(dir, "node_modules"));
  return dir;
}

/** Runs test files in the scratch copy: whether a test failed, and the output's tail. */
function runTests(
  dir: string,
  tests: readonly string[],
  report: string,
): Promise<{ failedTests: string[]; code: number; hung: boolean; tail: string }> {
  const env = { ...process.env };
  for (const name of Object.keys(env)) if (name.startsWith("AICR_")) delete env[name];
  const child = spawn(
    Deno.execPath(),
    ["test", "-A", "--no-check", "--no-prompt", `--junit-path=${report}`, ...tests],
    { cwd: dir, env, stdio: ["ignore", "pipe", "pipe"], detached: true },
  );
  let output = "";
  child.stdout.setEncoding("utf8").on("data", (t: string) => (output += t));
  child.stderr.setEncoding("utf8").on("data", (t: string) => (output += t));
  let hung = false;
  const timer = setTimeout(() => {
    hung = true;
    try {
      process.kill(-child.pid!, "SIGKILL");
    } catch {
      // gone
    }
  }, MUTANT_DEADLINE_MS);
  return new Promise((resolve) => {
    child.on("close", async (code) => {
      clearTimeout(timer);
      let xml = "";
      try {
        xml = await readFile(report, "utf8");
      } catch {
        // no report: it did not run
      }
      const failedTests = [...xml.matchAll(/<testcase name="([^"]*)"[^>]*>\s*<(failure|error)\b/g)]
        .map((m) => m[1]!.replaceAll("&gt;", ">").replaceAll("&lt;", "<").replaceAll("&amp;", "&"));
      await rm(report, { force: true });
      resolve({
        failedTests,
        code: code ?? 1,
        hung,
        tail: output.trim().split("\n").slice(-15).join("\n"),
      });
    });
  });
}

async function checkGuard(dir: string, guard: Located): Promise<Verdict> {
  const started = performance.now();
  const path = join(dir, guard.file);
  const original = await readFile(path, "utf8");
  await writeFile(path, mutate(original, guard));
  try {
    const run = await runTests(dir, guard.tests, join(dir, ".mutant-report.xml"));
    const seconds = (performance.now() - started) / 1000;
    if (run.hung) {
      return {
        guard,
        outcome: "caught",
        detail: `its tests hung (stopped after ${MUTANT_DEADLINE_MS / 1000} s)`,
        seconds,
      };
    }
    if (run.failedTests.length > 0) {
      return {
        guard,
        outcome: "caught",
        detail: `${run.failedTests.length} failed: ${run.failedTests.slice(0, 2).join("; ")}`,
        seconds,
      };
    }
    if (run.code !== 0) {
      return {
        guard,
        outcome: "broken",
        detail: `its tests did not run (exit ${run.code}):\n${run.tail}`,
        seconds,
      };
    }
    return {
      guard,
      outcome: "survived",
      detail: `every test of ${guard.tests.join(", ")} passed`,
      seconds,
    };
  } finally {
    await writeFile(path, original);
  }
}

async function main(args: string[]): Promise<number> {
  const onlyArg = args.find((a) => a.startsWith("--only="))?.slice(7) ??
    (args.includes("--only") ? args[args.indexOf("--only") + 1] : undefined);
  const only = onlyArg?.split(",").filter((s) => s !== "");
  const files = await listRepositoryFiles(ROOT);
  const found = (await locateGuards(files)).filter((g) => !only || only.includes(g.name));
  if (args.includes("--list")) {
    for (const g of found) {
      say(
        `${g.name}\t${g.file}:${g.line}\t${g.tests.join(",")}\t${GUARDS[g.name] ?? "(not listed)"}`,
      );
    }
    return 0;
  }
  const problems = listProblems(found, only);
  const runnable = found.filter((g) => g.tests.length > 0);
  const started = performance.now();
  const dir = await scratchCopy(files);
  const verdicts: Verdict[] = [];
  try {
    const suites = [...new Set(runnable.flatMap((g) => g.tests))].sort();
    say(`== baseline: ${suites.length} test files, unmutated`);
    const base = await runTests(dir, suites, join(dir, ".baseline-report.xml"));
    if (base.code !== 0 || base.hung) {
      problems.push(
        `the tests fail before any mutation (${
          base.failedTests.join("; ") || `exit ${base.code}`
        }):\n${base.tail}`,
      );
    } else {
      for (const guard of runnable) {
        const v = await checkGuard(dir, guard);
        verdicts.push(v);
        say(
          `${
            v.outcome === "caught" ? "caught  " : v.outcome.toUpperCase().padEnd(8)
          } ${guard.name} (${guard.file}:${guard.line}, ${v.seconds.toFixed(1)} s): ${v.detail}`,
        );
      }
    }
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
  say("== result");
  for (const p of problems) say(`PROBLEM ${p}`);
  const survived = verdicts.filter((v) => v.outcome === "survived");
  const broken = verdicts.filter((v) => v.outcome === "broken");
  for (const v of survived) {
    say(
      `SURVIVED ${v.guard.name} (${v.guard.file}:${v.guard.line}): ${
        GUARDS[v.guard.name]
      }: no test of ${v.guard.tests.join(", ")} fails without it`,
    );
  }
  for (const v of broken) {
    say(`BROKEN ${v.guard.name} (${v.guard.file}:${v.guard.line}): the mutant did not run`);
  }
  say(
    `mutants: ${
      verdicts.length - survived.length - broken.length
    } caught, ${survived.length} survived, ${broken.length} broken, of ${found.length} checks (${
      ((performance.now() - started) / 1000).toFixed(0)
    } s)`,
  );
  return problems.length === 0 && survived.length === 0 && broken.length === 0 &&
      verdicts.length > 0
    ? 0
    : 1;
}

if (import.meta.main) Deno.exitCode = await main(Deno.args);
