import assert from "node:assert/strict";
import {
  EXIT_CODE_HELP,
  EXIT_CODE_TABLE,
  EXIT_CODES,
  exitCodeOf,
  formatError,
  formatErrorJson,
  UsageError,
} from "./errors.ts";

Deno.test("EXIT_CODE_HELP lists every code of the one table once, in order, shared codes on one line", () => {
  const codes = EXIT_CODE_HELP.map((line) => Number(line.split(" ")[0]));
  assert.deepEqual(
    codes,
    [...new Set(Object.values(EXIT_CODE_TABLE).map((r) => r.code))].sort(
      (a, b) => a - b,
    ),
  );
  assert.ok(
    EXIT_CODE_HELP.includes("2  invalid input (flags, files, documents), or a conflict (CONFLICT)"),
  );
  assert.equal(EXIT_CODES.interrupted, 130);
  assert.equal(exitCodeOf(new UsageError("x")), EXIT_CODE_TABLE.usage.code);
});

Deno.test("ToolError names options by their own name until nameOptions() gives flags", () => {
  const error = new UsageError((option) => `Cannot use '${option("imagePullSecret")}': bad`, {
    details: ["  plain", (option) => `  pass ${option("nodeSelector")}`],
  });
  assert.equal(error.message, "Cannot use 'imagePullSecret': bad");
  assert.deepEqual(error.details, ["  plain", "  pass nodeSelector"]);
  error.nameOptions((option) => `--${option.toLowerCase()}`);
  assert.equal(error.message, "Cannot use '--imagepullsecret': bad");
  assert.deepEqual(error.details, ["  plain", "  pass --nodeselector"]);
});

Deno.test("formatError() redacts URL credentials and query values in messages, details and causes", () => {
  const error = new UsageError("Cannot read 'https://a:b@h/x?t=1'", {
    details: ["  try http://c:d@h/"],
    cause: new Error("connect to https://e:f@h/?q=2 failed"),
  });
  const text = formatError(error);
  assert.equal(
    text,
    [
      "error: Cannot read 'https://***@h/x?t=***'",
      "  try http://***@h/",
      "  caused by: connect to https://***@h/?q=*** failed",
    ].join("\n"),
  );
});

Deno.test("formatError() says a cause once when the message above already quotes it", () => {
  const yamlError =
    "Nested mappings are not allowed at line 4, column 11:\n\n  - name: x\n          ^\n";
  const error = new UsageError(`Cannot load kubeconfig 'k.yaml': ${yamlError}`, {
    details: ["pass --kubeconfig with a valid kubeconfig file"],
    cause: new Error(yamlError, { cause: new Error("the root cause") }),
  });
  const text = formatError(error);
  assert.equal(text.split("Nested mappings").length - 1, 1, text);
  assert.ok(text.endsWith("  caused by: the root cause"), text);
  // A cause that adds something is still shown.
  assert.match(
    formatError(new UsageError("Cannot read 'x'", { cause: new Error("EACCES") })),
    /caused by: EACCES/,
  );
});

Deno.test("formatErrorJson() is one JSON line: message, details, causes said once, exit code", () => {
  const error = new UsageError("Cannot read 'https://a:b@h/x?t=1': no", {
    details: ["  fix it"],
    cause: new Error("socket closed"),
  });
  const line = formatErrorJson(error, new Date(0));
  assert.ok(!line.includes("\n"));
  assert.deepEqual(JSON.parse(line), {
    time: "1970-01-01T00:00:00.000Z",
    level: "error",
    msg: "Cannot read 'https://***@h/x?t=***': no",
    details: ["fix it"],
    causes: ["socket closed"],
    exitCode: 2,
  });
  assert.equal(
    formatError(error),
    "error: Cannot read 'https://***@h/x?t=***': no\n  fix it\n  caused by: socket closed",
  );
});
