import assert from "node:assert/strict";
import { summarize, summaryText } from "./_report.ts";

Deno.test("summarize() counts real restarts, the latest line of each case only", () => {
  const line = (key: string, figures: Record<string, number>) =>
    JSON.stringify({ key, at: "2026-12-03T00:00:00Z", ...figures });
  const text = [
    line("restarts: etcd killed while cleanup runs", {
      faultsInjected: 1,
      faultsSurvived: 0,
      realRestarts: 1,
      leftovers: 2,
    }),
    line("restarts: etcd killed while cleanup runs", {
      faultsInjected: 1,
      faultsSurvived: 1,
      realRestarts: 1,
      leftovers: 0,
    }),
    line("restarts: kube-apiserver killed while the Job runs", {
      faultsInjected: 1,
      faultsSurvived: 1,
      realRestarts: 1,
      leftovers: 0,
    }),
    "{torn",
  ].join("\n");
  const totals = summarize(text);
  assert.equal(totals.cases, 2);
  assert.equal(totals.realRestarts, 2);
  assert.equal(totals.faultsSurvived, 2);
  assert.equal(totals.leftovers, 0, "the rerun's line replaced the failed one");
});

Deno.test("summarize() and summaryText() count identity attacks tried and refused", async () => {
  const text = [
    JSON.stringify({
      key: "identity_test: per-node identity attacks",
      at: "2026-12-03T00:00:00Z",
      identityAttacks: 9,
      identityAttacksRefused: 9,
    }),
  ].join("\n");
  const totals = summarize(text);
  assert.equal(totals.identityAttacks, 9);
  assert.equal(totals.identityAttacksRefused, 9);
  const path = await Deno.makeTempFile();
  try {
    await Deno.writeTextFile(path, text + "\n");
    assert.match(summaryText(path), /identity attacks tried: 9 \(refused: 9\)/);
  } finally {
    await Deno.remove(path);
  }
});
