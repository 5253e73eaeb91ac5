/**
 * The only module that knows which runtime runs aicr (Deno in development,
 * `deno compile` or a Node.js single executable in release). Everything else uses
 * web APIs and `node:` modules.
 *
 * @module
 */
import process from "node:process";

interface DenoLike {
  args: string[];
  version: { deno: string };
}

function denoGlobal(): DenoLike | undefined {
  return (globalThis as { Deno?: DenoLike }).Deno;
}

/**
 * The command-line arguments after the program (and script) name.
 *
 * @returns the arguments
 */
export function commandArgs(): string[] {
  const deno = denoGlobal();
  if (deno) return [...deno.args];
  // A Node single executable has argv = [execPath, argv0 as typed, ...args] (verified with
  // Node 24 SEA); plain node has [node, script, ...args].
  return process.argv.slice(2);
}

/**
 * Names the runtime, e.g. `deno 2.9.6` or `node 24.22.3`.
 *
 * @returns the runtime name and version
 */
export function runtimeName(): string {
  const deno = denoGlobal();
  return deno ? `deno ${deno.version.deno}` : `node ${process.versions.node}`;
}
