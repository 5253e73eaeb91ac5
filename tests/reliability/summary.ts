/**
 * Prints the reliability suite's totals (`deno task reliability:summary`): faults
 * injected and survived, concurrent runs held, bad inputs tried, objects left behind,
 * over-grants found, identity attacks tried and refused. Exits 1 when anything was left behind
 * or over-granted, or an identity attack was not refused.
 *
 * @module
 */
import { reportPath, summarize, summaryText } from "./_report.ts";
import { existsSync, readFileSync } from "node:fs";

if (import.meta.main) {
  const path = Deno.args[0] ?? reportPath();
  // deno-lint-ignore no-console
  console.log(summaryText(path));
  const totals = summarize(existsSync(path) ? readFileSync(path, "utf8") : "");
  Deno.exit(
    totals.leftovers === 0 && totals.overGrants === 0 &&
      totals.identityAttacksRefused === totals.identityAttacks
      ? 0
      : 1,
  );
}
