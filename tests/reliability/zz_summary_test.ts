/**
 * The last test of the suite (files run in path order): prints the reliability totals
 * so CI output shows them, and holds the two goals (nothing left behind, nothing
 * over-granted) over every case that reported.
 */
import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import { reportPath, summarize, summaryText } from "./_report.ts";
import { ENABLED } from "./_env.ts";

Deno.test({
  name: "reliability: summary of the figures",
  // Only after the suite ran (a cluster is named); unit runs have no figures to hold.
  ignore: !ENABLED,
  fn() {
    const path = reportPath();
    // deno-lint-ignore no-console
    console.log(summaryText(path));
    const totals = summarize(existsSync(path) ? readFileSync(path, "utf8") : "");
    assert.equal(totals.leftovers, 0, "objects left behind");
    assert.equal(totals.overGrants, 0, "over-grants found");
    assert.equal(totals.faultsSurvived, totals.faultsInjected, "every injected fault survived");
  },
});
