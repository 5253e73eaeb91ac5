import assert from "node:assert/strict";
import { exitCodeOf, formatError } from "../errors.ts";
import { fakeCli } from "../tests/fakes/cli.ts";
import { runCli } from "./mod.ts";
import { checkOutputNotFormat, snapshotFormatFlag } from "./_output.ts";

Deno.test("checkOutputNotFormat() refuses a bare format word, naming -t/--format", () => {
  for (const word of ["json", "yaml", "wide", "table", "JSON"]) {
    const error = (() => {
      try {
        checkOutputNotFormat(word, { formats: ["yaml", "json", "table"] });
      } catch (e) {
        return e;
      }
    })();
    assert.equal(exitCodeOf(error), 2, word);
    const text = formatError(error);
    assert.match(text, new RegExp(`Cannot use '-o ${word}'`));
    assert.match(text, /the format is '-t\/--format' \(yaml, json, table\)/);
    assert.match(text, new RegExp(`-o \\./${word}`));
  }
});

Deno.test("checkOutputNotFormat() lets paths, stdout and ConfigMaps through", () => {
  for (const value of ["./json", "out/json", "json.yaml", "-", "cm://ns/json", undefined]) {
    assert.equal(checkOutputNotFormat(value), value);
  }
});

const harness = () => fakeCli();

Deno.test("every verb refuses '-o json' with exit 2 before any cluster contact; version takes -t", async () => {
  for (
    const args of [
      ["snapshot", "-o", "json"],
      ["snapshot", "--output", "yaml"],
      ["agent", "-o", "table"],
      ["daemonset", "fetch", "-o", "wide"],
      ["diff", "--baseline", "a.yaml", "--target", "b.yaml", "-o", "json"],
      ["version", "-o", "json"],
    ]
  ) {
    const h = harness();
    const code = await runCli(args, h.deps);
    assert.equal(code, 2, args.join(" "));
    assert.equal(h.connects(), 0, args.join(" "));
  }
  const h = harness();
  assert.equal(await runCli(["version", "-t", "json"], h.deps), 0);
  assert.match(JSON.parse(h.stdout()).version, /^\d/);
});

Deno.test("--template is refused with exit 2 pointing to -t json | jq", async () => {
  for (const verb of ["snapshot", "agent"]) {
    const h = harness();
    assert.equal(await runCli([verb, "--template", "t.tmpl"], h.deps), 2, verb);
    const err = h.stderr();
    assert.match(err, /Go text\/template with Sprig functions is not supported/);
    assert.match(err, /aicr snapshot -t json \| jq/);
    assert.equal(h.connects(), 0);
  }
});

Deno.test("-v prints the version; AICR_DEBUG passes --debug (with --log-json) to the agent Job", async () => {
  const v = harness();
  assert.equal(await runCli(["-v"], v.deps), 0);
  assert.match(v.stdout(), /^\d+\.\d+\.\d+/);
  for (const [env, args] of [[{}, []], [{ AICR_DEBUG: "1" }, []], [{}, ["--debug"]]] as const) {
    const h = harness();
    h.deps.env = (name) => (env as Record<string, string>)[name];
    assert.equal(
      await runCli(["snapshot", "--dry-run", "--offline", "-t", "json", ...args], h.deps),
      0,
    );
    const job = JSON.parse(h.stdout()).items.at(-1);
    const agentArgs: string[] = job.spec.template.spec.containers[0].args;
    const debug = "AICR_DEBUG" in env || args.length > 0;
    assert.deepEqual(
      agentArgs.slice(0, 2),
      debug ? ["--debug", "--log-json"] : ["agent", "-o"],
      JSON.stringify({ env, args }),
    );
  }
});

Deno.test("snapshotFormatFlag() takes yaml, json and table; table never into a ConfigMap", () => {
  assert.deepEqual(snapshotFormatFlag("json", { kind: "stdout" }), {
    format: "json",
    table: false,
  });
  assert.deepEqual(snapshotFormatFlag("table", { kind: "file", path: "x" }), {
    format: "yaml",
    table: true,
  });
  assert.throws(
    () => snapshotFormatFlag("table", { kind: "configmap", ref: { namespace: "a", name: "b" } }),
    /Cannot write '-t table' to a ConfigMap/,
  );
  assert.throws(() => snapshotFormatFlag("wide", { kind: "stdout" }), /'yaml', 'json' or 'table'/);
});
