/**
 * Runs aicr's bash completion script the way bash calls it on TAB: the script, then
 * `COMP_WORDS`/`COMP_CWORD` for a command line (its last word the one being completed), then
 * `_aicr_complete`; used by the unit tests of `cli/completion.ts` and the e2e completion test.
 *
 * @module
 */
import assert from "node:assert/strict";

/** What one completion gave back. */
export interface BashCompletion {
  /** `COMPREPLY`, in its order. */
  words: string[];
  /** What the completion wrote to stderr (a shell would show it). */
  stderr: string;
}

/**
 * Completes a command line with the script.
 *
 * @param script the output of `aicr completion bash`
 * @param words the command line, the word being completed last
 * @param options the working directory (for file completion)
 * @returns the words offered and the stderr
 */
export async function completeInBash(
  script: string,
  words: readonly string[],
  options: { cwd?: string } = {},
): Promise<BashCompletion> {
  const program = [
    script,
    `COMP_WORDS=(${words.map((w) => `'${w}'`).join(" ")})`,
    `COMP_CWORD=${words.length - 1}`,
    "_aicr_complete",
    'printf "%s\\n" "${COMPREPLY[@]}"',
  ].join("\n");
  const out = await new Deno.Command("bash", {
    args: ["-c", program],
    stdout: "piped",
    stderr: "piped",
    ...(options.cwd ? { cwd: options.cwd } : {}),
  }).output();
  const stderr = new TextDecoder().decode(out.stderr);
  assert.equal(out.code, 0, stderr);
  return { words: new TextDecoder().decode(out.stdout).split("\n").filter(Boolean), stderr };
}
