import assert from "node:assert/strict";
import { createLogger, formatLogLine } from "./log.ts";

Deno.test("formatLogLine() writes WARN lines with bare and quoted values", () => {
  assert.equal(
    formatLogLine("warn", "could not verify", {
      serviceAccount: "irsa-snapshotter",
      uncheckedRules: 20,
      remedy: "grant the caller 'x'",
      skipped: undefined,
    }),
    `WARN could not verify serviceAccount=irsa-snapshotter uncheckedRules=20 remedy="grant the caller 'x'"`,
  );
  assert.equal(
    formatLogLine("info", "snapshot agent run: runID=abc"),
    "snapshot agent run: runID=abc",
  );
});

Deno.test("createLogger() drops lines below its level and prefixes the rest", () => {
  const lines: string[] = [];
  const log = createLogger({ write: (t) => lines.push(t) }, { prefix: "agent" });
  log.debug("hidden");
  log.info("shown", { k: "v" });
  assert.deepEqual(lines, ["[agent] shown k=v\n"]);
});

Deno.test("createLogger() writes JSON lines when asked", () => {
  const lines: string[] = [];
  const log = createLogger({ write: (t) => lines.push(t) }, {
    json: true,
    now: () => new Date(0),
  });
  log.warn("w", { n: 1 });
  assert.deepEqual(JSON.parse(lines[0] ?? ""), {
    time: "1970-01-01T00:00:00.000Z",
    level: "warn",
    msg: "w",
    n: 1,
  });
});

Deno.test("createLogger() renders option-naming messages and fields with its namer", () => {
  let text = "";
  const log = createLogger({ write: (t) => void (text += t) }, {
    nameOption: (option) => `--${option}`,
  });
  log.warn((option) => `${option("x")}: kept`, { remedy: (option) => `pass ${option("y")}` });
  assert.equal(text, 'WARN --x: kept remedy="pass --y"\n');
  text = "";
  createLogger({ write: (t) => void (text += t) }).info((option) => `${option("x")} on`);
  assert.equal(text, "x on\n");
});

Deno.test("createLogger() never writes a URL's credentials or query values, text or JSON", () => {
  for (const json of [false, true]) {
    let out = "";
    const log = createLogger({ write: (t) => void (out += t) }, { json });
    log.warn("cannot read https://bob:pw@h.example/x?token=abc", {
      source: "http://u:p@h/y?sig=zz",
      count: 3,
    });
    for (const leak of ["bob", "pw@", "abc", "u:p", "zz"]) assert.ok(!out.includes(leak), out);
    assert.ok(out.includes("https://***@h.example/x?token=***"), out);
  }
});
