import assert from "node:assert/strict";
import {
  Counter,
  createDaemonMetrics,
  escapeLabelValue,
  Gauge,
  Histogram,
  renderMetrics,
} from "./metrics.ts";

Deno.test("Counter renders HELP, TYPE and one line per label set", () => {
  const counter = new Counter({ name: "x_total", help: "Things.", labelNames: ["kind"] });
  counter.inc({ kind: "a" });
  counter.inc({ kind: "a" }, 2);
  counter.inc({ kind: "b" });
  assert.equal(
    counter.render(),
    '# HELP x_total Things.\n# TYPE x_total counter\nx_total{kind="a"} 3\nx_total{kind="b"} 1\n',
  );
  assert.throws(() => counter.inc({ kind: "a" }, -1), RangeError);
});

Deno.test("Gauge renders an unlabelled value", () => {
  const gauge = new Gauge({ name: "g", help: "A gauge." });
  gauge.set(1.5);
  assert.equal(gauge.render(), "# HELP g A gauge.\n# TYPE g gauge\ng 1.5\n");
});

Deno.test("Histogram renders cumulative buckets, +Inf, sum and count", () => {
  const histogram = new Histogram({
    name: "h_seconds",
    help: "Latency.",
    labelNames: ["route"],
    buckets: [0.1, 1],
  });
  histogram.observe(0.05, { route: "/a" });
  histogram.observe(0.5, { route: "/a" });
  histogram.observe(5, { route: "/a" });
  assert.equal(
    histogram.render(),
    [
      "# HELP h_seconds Latency.",
      "# TYPE h_seconds histogram",
      'h_seconds_bucket{route="/a",le="0.1"} 1',
      'h_seconds_bucket{route="/a",le="1"} 2',
      'h_seconds_bucket{route="/a",le="+Inf"} 3',
      'h_seconds_sum{route="/a"} 5.55',
      'h_seconds_count{route="/a"} 3',
      "",
    ].join("\n"),
  );
});

Deno.test("escapeLabelValue() escapes backslash, quote and newline", () => {
  assert.equal(escapeLabelValue('a\\b"c\nd'), 'a\\\\b\\"c\\nd');
});

Deno.test("metric constructors reject invalid names", () => {
  assert.throws(() => new Counter({ name: "bad-name", help: "x" }), TypeError);
  assert.throws(() => new Counter({ name: "ok", help: "x", labelNames: ["le"] }), TypeError);
  assert.throws(() => new Histogram({ name: "h", help: "x", buckets: [1, 0.5] }), TypeError);
});

Deno.test("createDaemonMetrics() records a collection's collectors and result", () => {
  const metrics = createDaemonMetrics({ version: "1.2.3", commit: "abc" });
  metrics.recordCollection({
    ok: true,
    durationMs: 1500,
    endedAt: 1_700_000_000_000,
    reports: [
      { collector: "gpu", type: "GPU", status: "timeout", durationMs: 10_000, error: "slow" },
      { collector: "os", type: "OS", status: "ok", durationMs: 3 },
    ],
  });
  metrics.recordCollection({ ok: false, durationMs: 10, endedAt: 1_700_000_100_000, reports: [] });
  const text = metrics.render();
  assert.match(text, /^aicr_build_info\{version="1\.2\.3",commit="abc",backend="unknown"\} 1$/m);
  assert.match(text, /^aicr_collections_total\{result="success"\} 1$/m);
  assert.match(text, /^aicr_collections_total\{result="failure"\} 1$/m);
  assert.match(text, /^aicr_collection_duration_seconds 0\.01$/m);
  assert.match(text, /^aicr_collector_duration_seconds\{collector="gpu"\} 10$/m);
  assert.match(text, /^aicr_collector_errors_total\{collector="gpu"\} 1$/m);
  assert.match(text, /^aicr_collector_errors_total\{collector="os"\} 0$/m);
  assert.match(text, /^aicr_snapshot_last_success_timestamp_seconds 1700000000$/m);
  // Every sample line is `name{labels} value` or `name value`.
  for (const line of text.trimEnd().split("\n")) {
    assert.match(line, /^(# (HELP|TYPE) .+|[a-z_:]+(\{.*\})? [-+0-9.eInfNa]+)$/);
  }
  assert.equal(renderMetrics([]), "");
});
