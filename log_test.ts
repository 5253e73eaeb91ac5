import assert from "node:assert/strict";
import {
  createLogger,
  formatLogLine,
  logLevelFor,
  logLineWriter,
  parseLogLine,
  screenedWriter,
} from "./log.ts";

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

Deno.test("relay() puts [source] on a relayed text line, once, and keeps its level", () => {
  const lines: string[] = [];
  const log = createLogger({ write: (t) => lines.push(t) });
  log.relay("namespace from the kubeconfig context namespace=default", "agent");
  log.relay("[agent] WARN snapshot has no GPU data", "agent");
  log.relay("DEBUG hidden below the level", "agent");
  log.relay("", "agent");
  assert.deepEqual(lines, [
    "[agent] namespace from the kubeconfig context namespace=default\n",
    "[agent] WARN snapshot has no GPU data\n",
  ]);
});

Deno.test("relay() renders a relayed JSON line as text with its fields, prefixed", () => {
  const lines: string[] = [];
  const log = createLogger({ write: (t) => lines.push(t) }, { level: "debug" });
  log.relay(
    '{"time":"2026-01-01T00:00:00.000Z","level":"debug","msg":"collected","collector":"gpu","durationMs":12.5,"component":"agent"}',
    "agent",
  );
  log.relay('{"level":"info","msg":"no component","uri":"cm://ns/x"}', "agent");
  assert.deepEqual(lines, [
    "[agent] DEBUG collected collector=gpu durationMs=12.5\n",
    "[agent] no component uri=cm://ns/x\n",
  ]);
});

Deno.test("relay() writes every relayed line as JSON in JSON mode, text lines included", () => {
  const lines: string[] = [];
  const log = createLogger({ write: (t) => lines.push(t) }, {
    json: true,
    now: () => new Date(0),
  });
  log.relay("[agent] WARN cannot read https://u:p@h/x?t=1", "agent");
  log.relay("plain text from the runtime", "agent");
  log.relay(
    '{"time":"2026-01-01T00:00:00.000Z","level":"info","msg":"saved","uri":"cm://a/b","component":"agent"}',
    "agent",
  );
  log.relay('{"level":"debug","msg":"below the level"}', "agent");
  assert.deepEqual(lines.map((line) => JSON.parse(line)), [
    {
      time: "1970-01-01T00:00:00.000Z",
      level: "warn",
      msg: "cannot read https://***@h/x?t=***",
      component: "agent",
    },
    {
      time: "1970-01-01T00:00:00.000Z",
      level: "info",
      msg: "plain text from the runtime",
      component: "agent",
    },
    {
      time: "2026-01-01T00:00:00.000Z",
      level: "info",
      msg: "saved",
      uri: "cm://a/b",
      component: "agent",
    },
  ]);
});

Deno.test("parseLogLine() reads text and JSON lines, and a brace that is no JSON as text", () => {
  assert.deepEqual(parseLogLine("[signer] ERROR boom k=v", "agent"), {
    level: "error",
    msg: "boom k=v",
    record: { component: "signer" },
  });
  assert.deepEqual(parseLogLine("{not json", "agent"), {
    level: "info",
    msg: "{not json",
    record: { component: "agent" },
  });
  assert.equal(parseLogLine("   ", "agent"), undefined);
});

Deno.test("screenedWriter() passes text as is until a screen is set, then learns node fields first", () => {
  let out = "";
  const stderr = screenedWriter({ write: (t) => void (out += t) });
  const names = new Set<string>();
  const screen = {
    learn: (given: Iterable<string>) => {
      for (const n of given) if (n) names.add(n);
    },
    text: (value: string) => [...names].reduce((t, n) => t.replaceAll(n, "<token>"), value),
  };
  const log = createLogger(stderr, { learnNames: (n) => stderr.learn(n) });
  log.info("before", { node: "gpu-7" });
  stderr.screen(screen);
  log.info("waiting for the agent", { node: "gpu-7", nodes: "gpu-8 (arm64),gpu-9" });
  stderr.write("error: the Job ran on gpu-7; gpu-8 and gpu-9 left out\n");
  const json = createLogger(stderr, { json: true, learnNames: (n) => stderr.learn(n) });
  json.warn("placement", { host: "gpu-10" });
  assert.deepEqual(out.split("\n"), [
    "before node=gpu-7",
    'waiting for the agent node=<token> nodes="<token> (arm64),<token>"',
    "error: the Job ran on <token>; <token> and <token> left out",
    out.split("\n")[3],
    "",
  ]);
  assert.match(out.split("\n")[3] ?? "", /"host":"<token>"/);
  assert.ok(!names.has("arm64"), "a list's note is not a name");
  // The agent's relayed JSON records teach their node fields too.
  log.relay('{"level":"info","msg":"collected","node":"gpu-11"}', "agent");
  assert.ok(names.has("gpu-11"));
  assert.ok(!out.includes("gpu-11"), out);
});

Deno.test("logLineWriter() turns written lines into the logger's info lines: text, JSON, or none when quiet", () => {
  const lines = (options: { json?: boolean; level?: "info" | "error" }) => {
    const out: string[] = [];
    const writer = logLineWriter(
      createLogger({ write: (t) => out.push(t) }, { ...options, now: () => new Date(0) }),
    );
    writer.write("NODE   STATUS\nnode-a ok");
    writer.write("\n");
    return out;
  };
  assert.deepEqual(lines({}), ["NODE   STATUS\n", "node-a ok\n"]);
  assert.deepEqual(lines({ json: true }).map((l) => JSON.parse(l).msg), [
    "NODE   STATUS",
    "node-a ok",
  ]);
  assert.deepEqual(lines({ level: "error" }), []);
});

Deno.test("logLevelFor() gives debug for --debug, error for --quiet, info otherwise", () => {
  assert.equal(logLevelFor({ debug: true }), "debug");
  assert.equal(logLevelFor({ debug: false, quiet: true }), "error");
  assert.equal(logLevelFor({ debug: false }), "info");
});
