import assert from "node:assert/strict";
import {
  AGENT_REPORT_MAX_BYTES,
  AgentReportError,
  agentReportOfLine,
  digestText,
  formatAgentReport,
  formatAgentReportLine,
  parseAgentReport,
} from "./agent_report.ts";

Deno.test("digestText() is the SHA-256 of the text's UTF-8 bytes, with their count", () => {
  assert.deepEqual(digestText("abc"), {
    digest: "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
    bytes: 3,
  });
  assert.equal(digestText("é").bytes, 2);
});

Deno.test("parseAgentReport() reads what formatAgentReport() writes, well under the kubelet's cap", () => {
  const report = { ...digestText("kind: Snapshot\n"), version: "0.1.0", commit: "3c5f0d2" };
  const text = formatAgentReport(report);
  assert.ok(text.length < AGENT_REPORT_MAX_BYTES / 10, text);
  assert.deepEqual(parseAgentReport(text), report);
});

Deno.test("parseAgentReport() refuses an absent, oversized, non-JSON or malformed report, saying which", () => {
  const good = { ...digestText("x"), version: "0.1.0", commit: "unknown" };
  const absent = (() => {
    try {
      parseAgentReport(undefined);
    } catch (e) {
      return e;
    }
  })();
  assert.ok(absent instanceof AgentReportError && absent.absent, String(absent));
  assert.equal(absent.exitCode, 10);
  const cases: [string, RegExp][] = [
    ["   ", /termination message is empty/],
    ["{".repeat(AGENT_REPORT_MAX_BYTES + 1), /over 4096 bytes/],
    ["Error: the agent crashed", /is not JSON$/],
    ["[1,2]", /is not a JSON object$/],
    [JSON.stringify({ ...good, extra: 1 }), /unknown fields: "extra"/],
    [JSON.stringify({ ...good, digest: "sha256:abc" }), /'digest' is not sha256/],
    [JSON.stringify({ ...good, bytes: -1 }), /'bytes' is not a whole number/],
    [JSON.stringify({ ...good, bytes: "1" }), /'bytes' is not a whole number/],
    [
      JSON.stringify({ ...good, version: "0.1.0\nforged: line" }),
      /'version' is missing or malformed/,
    ],
    [JSON.stringify({ digest: good.digest, bytes: 1, version: "0.1.0" }), /'commit' is missing/],
  ];
  for (const [text, why] of cases) {
    assert.throws(
      () => parseAgentReport(text),
      (e) =>
        e instanceof AgentReportError && why.test(e.message) && e.absent === (text.trim() === ""),
      text.slice(0, 40),
    );
  }
});

Deno.test("agentReportOfLine() takes the report from the line formatAgentReportLine() writes, with this run's nonce only", () => {
  const report = { ...digestText("kind: Snapshot\n"), version: "0.1.0", commit: "3c5f0d2" };
  const line = formatAgentReportLine("9f3a", report);
  assert.equal(line, `aicr-agent-report 9f3a ${formatAgentReport(report)}`);
  assert.deepEqual(parseAgentReport(agentReportOfLine(line, "9f3a")), report);
  assert.equal(agentReportOfLine(`${line}\r`, "9f3a"), formatAgentReport(report));
  for (const other of ["9f3", "9f3aa", ""]) assert.equal(agentReportOfLine(line, other), undefined);
  assert.equal(agentReportOfLine(`x ${line}`, "9f3a"), undefined);
  assert.equal(agentReportOfLine("aicr-agent-report 9f3a not json", "9f3a"), undefined);
});
