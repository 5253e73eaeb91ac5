/**
 * The linux/arm64 binary under qemu-user beside this host's amd64 binary, in one run, alternating:
 * `aicr version` and `aicr agent` on a fake 8x H100 node (the H100 capture printed by a fake
 * `nvidia-smi`, host files from the collectors' fixture tree). A report, no goal: it shows what
 * emulation costs here (tests and the build's code caches run the arm64 Node this way), not how
 * fast a real Grace CPU is.
 *
 * ```sh
 * deno run -A scripts/build.ts --arch all && deno task bench:arm64 [--runs 11]
 * ```
 *
 * @module
 */
import { chmod, mkdtemp, rm, writeFile } from "node:fs/promises";
import { existsSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { defaultOut, REPO_ROOT } from "../scripts/build.ts";
import { type Arch, commandLine, findEmulator } from "../scripts/node_base.ts";

const { values } = parseArgs({ args: Deno.args, options: { runs: { type: "string" } } });
const runs = Number(values.runs ?? 11);

function say(line: string): void {
  // deno-lint-ignore no-console
  console.log(line);
}

const binaries = (["amd64", "arm64"] as Arch[]).map((arch) => ({
  arch,
  bin: defaultOut(arch),
  emulator: findEmulator(arch),
}));
for (const b of binaries) {
  if (!existsSync(b.bin)) {
    say(
      `Cannot benchmark: '${b.bin}' does not exist: run 'deno run -A scripts/build.ts --arch all'`,
    );
    Deno.exit(1);
  }
}

const fake = await mkdtemp(join(tmpdir(), "aicr-arm64-bench-"));
await writeFile(
  join(fake, "nvidia-smi"),
  `#!/bin/sh\nexec cat '${join(REPO_ROOT, "tests", "fixtures", "nvidia-smi-q-x.h100.xml")}'\n`,
);
await chmod(join(fake, "nvidia-smi"), 0o755);
const hostRoot = join(REPO_ROOT, "collectors", "testdata", "host");
const cases: { name: string; args: string[] }[] = [
  { name: "version", args: ["version"] },
  { name: "agent (fake 8x H100)", args: ["agent", "--host-root", hostRoot, "-o", "/dev/null"] },
];

async function once(b: (typeof binaries)[number], args: string[]): Promise<number> {
  const line = commandLine(b.emulator, b.bin, args);
  const started = performance.now();
  const out = await new Deno.Command(line.command, {
    args: line.args,
    env: { PATH: `${fake}:/usr/bin:/bin`, NODE_NAME: "bench-h100" },
    clearEnv: true,
    stdout: "null",
    stderr: "piped",
  }).output();
  const ms = performance.now() - started;
  if (!out.success) {
    throw new Error(`${b.arch} ${args.join(" ")}: ${new TextDecoder().decode(out.stderr)}`);
  }
  return ms;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? 0;
const load = readFileSync("/proc/loadavg", "utf8").split(" ").slice(0, 3).join(" ");
say(
  `# arm64 bench: ${runs} alternating runs each, load ${load}, qemu: ${
    binaries[1]?.emulator?.command ?? "native"
  }`,
);
say("| command | linux/amd64 (native) | linux/arm64 (qemu-user) | ratio |");
say("| --- | --- | --- | --- |");
try {
  for (const c of cases) {
    const times: Record<Arch, number[]> = { amd64: [], arm64: [] };
    await once(binaries[0]!, c.args);
    await once(binaries[1]!, c.args);
    for (let i = 0; i < runs; i++) {
      for (const b of binaries) times[b.arch].push(await once(b, c.args));
    }
    const a = median(times.amd64);
    const r = median(times.arm64);
    say(`| ${c.name} | ${a.toFixed(0)} ms | ${r.toFixed(0)} ms | ${(r / a).toFixed(1)}x |`);
  }
} finally {
  await rm(fake, { recursive: true, force: true });
}
