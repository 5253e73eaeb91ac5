import assert from "node:assert/strict";
import { DEFAULT_IGNORE_PATTERNS } from "./diff.ts";
import { buildFleetReport } from "./fleet.ts";
import { escapeHtml, renderFleetHtml } from "./fleet_html.ts";
import { makeNodeSnapshot, setReading } from "./testdata/generate.ts";

const NODES = Array.from({ length: 30 }, (_, i) => `gpu-node-${i + 1}`);

function report(
  plant: (node: string, snapshot: ReturnType<typeof makeNodeSnapshot>) => void,
  allReadings = false,
) {
  const members = NODES.map((node, i) => {
    const snapshot = makeNodeSnapshot(node, { clusterNodes: NODES, boot: i + 1 });
    plant(node, snapshot);
    return { node, snapshot };
  });
  return buildFleetReport(members, { ignore: DEFAULT_IGNORE_PATTERNS, allReadings });
}

function outlierCells(html: string): string[] {
  return [...html.matchAll(/<tr[^>]* data-node="([^"]+)"[^>]*>(.*?)<\/tr>/gs)].flatMap((
    [, node, row],
  ) =>
    [...(row as string).matchAll(/<td class="(outlier[^"]*)" data-path="([^"]+)"[^>]*>([^<]*)</g)]
      .map((c) => `${node} ${c[2]} ${c[1]} ${c[3]}`)
  );
}

Deno.test("renderFleetHtml() marks exactly the differing cells and puts the fleet value in the header", () => {
  const html = renderFleetHtml(report((node, s) => {
    if (node === "gpu-node-3") setReading(s, "GPU.smi.driver", "570.124.06");
    if (node === "gpu-node-12") setReading(s, "OS.kmod.nvidia_peermem", undefined);
    if (node === "gpu-node-12") setReading(s, "OS.kmod.nouveau", true);
  }));
  assert.deepEqual(outlierCells(html), [
    "gpu-node-3 GPU.smi.driver outlier 570.124.06",
    "gpu-node-12 OS.kmod.nouveau outlier extra true",
    "gpu-node-12 OS.kmod.nvidia_peermem outlier missing (absent)",
  ]);
  assert.match(
    html,
    /<th scope="col"[^>]* data-path="GPU\.smi\.driver"[^>]*><div class="h-type">GPU<\/div><div class="h-sub">smi\.<\/div><div class="h-key">driver<\/div><div class="h-fleet">570\.86\.15<\/div><div class="h-count">on 29\/30 nodes<\/div><\/th>/,
  );
  assert.equal(html.match(/<tr[^>]* data-node=/g)?.length, 30);
  assert.equal(html.match(/<tr class="outlier-row"/g)?.length, 2);
  // Outliers first, then one line for the rest, then the rest (hidden while "only outliers").
  assert.deepEqual(
    [...html.matchAll(/<tr class="([a-z-]+)"(?: data-node="([^"]+)")?/g)].slice(0, 4).map((m) =>
      m[2] ?? m[1]
    ),
    ["gpu-node-3", "gpu-node-12", "match-summary", "gpu-node-1"],
  );
  assert.match(html, /<input type="checkbox" id="only-outliers" checked>/);
  assert.match(html, /28 more nodes match the cohort on every column/);
  assert.match(
    html,
    /<a href="#node-gpu-node-3">gpu-node-3: GPU\.smi\.driver 570\.124\.06 \(cohort: 570\.86\.15 on 29 nodes\)<\/a>/,
  );
});

Deno.test("renderFleetHtml() is self-contained: no scripts, links or network addresses", () => {
  const html = renderFleetHtml(report((node, s) => {
    if (node === "gpu-node-9") setReading(s, "K8s.image.aicr", "https://evil.example/<script>");
  }));
  assert.ok(!/<script|<link|<img|<iframe|https?:\/\//i.test(html.replaceAll("https://evil", "")));
  assert.ok(html.includes("https://evil.example/&lt;script&gt;"));
  assert.match(
    html,
    /Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'"/,
  );
});

Deno.test("renderFleetHtml() gives a subtype a node lacks one column, not one per reading", () => {
  const html = renderFleetHtml(report((node, s) => {
    if (node === "gpu-node-7") {
      const os = s.measurements.find((m) => m.type === "OS");
      os!.subtypes = os!.subtypes.filter((x) => x.subtype !== "sysctl");
    }
    if (node === "gpu-node-8") setReading(s, "OS.sysctl./proc/sys/vm/swappiness", "10");
  }));
  assert.deepEqual(outlierCells(html), [
    "gpu-node-7 OS.sysctl.* outlier missing (absent)",
    "gpu-node-8 OS.sysctl./proc/sys/vm/swappiness outlier 10",
  ]);
  assert.equal(html.match(/<th scope="col"/g)?.length, 2);
  assert.match(
    html,
    /gpu-node-7: OS\.sysctl\.\* \(absent: 22 readings\) \(cohort: present on 29 nodes\)/,
  );
});

Deno.test("renderFleetHtml() says so when every node is the same", () => {
  const html = renderFleetHtml(report(() => {}));
  assert.match(html, /NO DRIFT/);
  assert.match(html, /Every node has the configuration of its cohort/);
  assert.ok(!html.includes('<table class="matrix"'));
});

Deno.test("escapeHtml() escapes markup and quotes", () => {
  assert.equal(
    escapeHtml(`<a href="x">'&'</a>`),
    "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;",
  );
});

Deno.test("renderFleetHtml() with allReadings shows every reading with its fleet value", () => {
  const plant = (node: string, s: ReturnType<typeof makeNodeSnapshot>) => {
    if (node === "gpu-node-3") setReading(s, "GPU.smi.driver", "570.124.06");
  };
  const all = report(plant, true);
  const html = renderFleetHtml(all, { allReadings: true });
  const readings = all.cohorts[0]!.columns.length;
  // Every reading the reference has (identity and volatile ones left out).
  assert.ok(readings > 100, String(readings));
  assert.equal(html.match(/<th scope="col"/g)?.length, readings);
  assert.deepEqual(outlierCells(html), ["gpu-node-3 GPU.smi.driver outlier 570.124.06"]);
  assert.match(
    html,
    /data-path="OS\.kmod\.nvidia"[^>]*>.*?<div class="h-fleet">true<\/div><div class="h-count">on 30\/30 nodes/s,
  );
  assert.match(html, /columns: every reading/);
  // Without the option the same report still shows only the differing one.
  assert.equal(renderFleetHtml(all).match(/<th scope="col"/g)?.length, 1);
});
