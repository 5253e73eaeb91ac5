/**
 * The drift HTML pages in a real browser. Mixed fleets of 8, 200 and 2,000 nodes (H100, GB200
 * and CPU system nodes built from the real captures, with planted outliers) are rendered by
 * `aicr diff --fleet -t html`'s renderer; headless Chromium takes a screenshot and dumps the
 * DOM it built, and the highlighted cells, the cohorts, the row order and the outliers-only
 * fold are checked against the plant exactly. The two-snapshot page (`aicr diff -b A --target
 * B -t html`) is checked the same way. Needs Debian's `chromium` (`apt-get install -y
 * chromium`); set AICR_SCREENSHOT_DIR to keep the pages and the screenshots.
 */
import assert from "node:assert/strict";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  buildFleetReport,
  DEFAULT_IGNORE_PATTERNS,
  diffSnapshots,
  renderDiffHtml,
  renderFleetHtml,
} from "../../snapshot/mod.ts";
import type { Snapshot } from "../../snapshot/mod.ts";
import { setReading } from "../../snapshot/testdata/generate.ts";
import { makeMixedFleet } from "../../snapshot/testdata/mixed_fleet.ts";

const CHROMIUM = Deno.env.get("CHROMIUM") ?? "/usr/bin/chromium";
const WIDTH = 1600;
const HEIGHT = 1000;

function chromium(args: string[]): Promise<Deno.CommandOutput> {
  return new Deno.Command(CHROMIUM, {
    args: [
      "--headless",
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
      ...args,
    ],
    stdout: "piped",
    stderr: "piped",
    signal: AbortSignal.timeout(120_000),
  }).output();
}

/** Screenshots the page and returns the DOM Chromium built from it. */
async function inChromium(dir: string, name: string, html: string): Promise<string> {
  const profile = mkdtempSync(join(tmpdir(), "aicr-chromium-"));
  try {
    const page = join(dir, `${name}.html`);
    const png = join(dir, `${name}.png`);
    writeFileSync(page, html);
    const shot = await chromium([
      `--user-data-dir=${profile}`,
      `--screenshot=${png}`,
      `--window-size=${WIDTH},${HEIGHT}`,
      `file://${page}`,
    ]);
    assert.equal(shot.code, 0, new TextDecoder().decode(shot.stderr));
    const image = readFileSync(png);
    assert.deepEqual([...image.subarray(1, 4)], [0x50, 0x4e, 0x47], "a PNG file");
    const view = new DataView(image.buffer, image.byteOffset);
    assert.deepEqual([view.getUint32(16), view.getUint32(20)], [WIDTH, HEIGHT]);
    assert.ok(image.length > 20_000, `screenshot has content (${image.length} bytes)`);
    const dump = await chromium([`--user-data-dir=${profile}`, "--dump-dom", `file://${page}`]);
    assert.equal(dump.code, 0, new TextDecoder().decode(dump.stderr));
    return new TextDecoder().decode(dump.stdout);
  } finally {
    rmSync(profile, { recursive: true, force: true });
  }
}

async function withPages(fn: (dir: string) => Promise<void>): Promise<void> {
  assert.ok(
    existsSync(CHROMIUM),
    `headless Chromium not found at ${CHROMIUM}: install it with 'apt-get update && apt-get install -y chromium' (as root), or set CHROMIUM to its path`,
  );
  const keep = Deno.env.get("AICR_SCREENSHOT_DIR");
  const dir = keep ?? mkdtempSync(join(tmpdir(), "aicr-html-"));
  mkdirSync(dir, { recursive: true });
  try {
    await fn(dir);
  } finally {
    if (!keep) rmSync(dir, { recursive: true, force: true });
  }
}

/** node → shown path → shown value, for every planted outlier reading. */
type Plant = Record<string, Record<string, string>>;

function plantFor(total: number): { counts: Record<string, number>; plant: Plant } {
  const h100 = Math.max(4, Math.floor(total * 0.55));
  const gb200 = Math.max(3, Math.floor(total * 0.3));
  const cpu = total - h100 - gb200;
  const plant: Plant = {
    "p5-h100-2": { "GPU.smi.driver": "570.124.06" },
    "p6-gb200-3": { "OS.sysctl./proc/sys/vm/swappiness": "10" },
    [`p5-h100-${h100}`]: { "GPU.gpu-0..7.power.limit.current": "500.00 W" },
  };
  if (total >= 200) {
    plant["p5-h100-99"] = { "OS.kmod.nvidia_peermem": "(absent)" };
    plant["p5-h100-101"] = { "OS.sysctl.*": "(absent)" };
    plant["p6-gb200-40"] = { "GPU.gpu-3.ecc.current": "Disabled" };
    plant[`system-m7i-${cpu}`] = { "SystemD.kubelet.service.ActiveState": "failed" };
  }
  return { counts: { "p5-h100": h100, "p6-gb200": gb200, "system-m7i": cpu }, plant };
}

function plantedFleet(total: number): { snapshots: Snapshot[]; plant: Plant } {
  const { counts, plant } = plantFor(total);
  const snapshots = makeMixedFleet(counts);
  for (const snapshot of snapshots) {
    for (const [path, value] of Object.entries(plant[snapshot.metadata["source-node"]] ?? {})) {
      if (path.endsWith(".*")) {
        // The whole subtype is gone, as when its collector failed on that node.
        const [type, subtype] = path.split(".");
        const m = snapshot.measurements.find((x) => x.type === type);
        if (m) m.subtypes = m.subtypes.filter((x) => x.subtype !== subtype);
      } else if (path.startsWith("GPU.gpu-0..7.")) {
        const key = path.slice("GPU.gpu-0..7.".length);
        for (let i = 0; i < 8; i++) setReading(snapshot, `GPU.gpu-${i}.${key}`, value);
      } else setReading(snapshot, path, value === "(absent)" ? undefined : value);
    }
  }
  return { snapshots, plant };
}

for (const total of [8, 200, 2000]) {
  Deno.test(`fleet html: Chromium shows ${total} mixed nodes in cohorts, outliers first, exactly the planted cells`, async () => {
    const { snapshots, plant } = plantedFleet(total);
    const report = buildFleetReport(
      snapshots.map((snapshot) => ({ node: snapshot.metadata["source-node"], snapshot })),
      { ignore: DEFAULT_IGNORE_PATTERNS },
    );
    const html = renderFleetHtml(report, { subtitle: `e2e: ${total} generated nodes` });
    assert.ok(!/<script|<link|https?:\/\//i.test(html), "the page must not load anything");
    await withPages(async (dir) => {
      const dom = await inChromium(dir, `fleet-${total}`, html);
      // Every node has one row in its cohort's matrix only if the cohort has an outlier.
      const rows = [
        ...dom.matchAll(/<tr class="([a-z-]+)" data-node="([^"]+)" id="[^"]+">(.*?)<\/tr>/gs),
      ];
      const withOutliers = report.cohorts.filter((c) => c.outliers > 0);
      assert.equal(rows.length, withOutliers.reduce((n, c) => n + c.nodes.length, 0));
      const found: Plant = {};
      for (const [, , node, cells] of rows) {
        for (
          const cell of (cells as string).matchAll(
            /<td class="outlier[^"]*" data-path="([^"]+)"[^>]*>([^<]*)<\/td>/g,
          )
        ) {
          (found[node as string] ??= {})[cell[1] as string] = cell[2] as string;
        }
      }
      assert.deepEqual(found, plant);
      // In each cohort's matrix: the outlier rows, one fold line, then the matching rows.
      for (const section of dom.matchAll(/<section class="cohort"[^>]*>(.*?)<\/section>/gs)) {
        const kinds = [...(section[1] as string).matchAll(/<tr class="([a-z-]+)"/g)].map((m) =>
          m[1]
        );
        const firstSame = kinds.indexOf("same-row");
        const outlierRows = kinds.filter((k) => k === "outlier-row").length;
        assert.ok(outlierRows > 0);
        assert.deepEqual(kinds.slice(0, outlierRows + 1), [
          ...Array(outlierRows).fill("outlier-row"),
          "match-summary",
        ]);
        assert.equal(firstSame, outlierRows + 1);
      }
      // One cohort row per machine kind; model differences are never outliers.
      const cohorts = [...dom.matchAll(/<tr data-cohort="([^"]+)">/g)].map((m) => m[1]);
      assert.deepEqual(cohorts, [
        "NVIDIA H100 80GB HBM3 ×8 · p5.48xlarge",
        "NVIDIA GB200 192GB HBM3e ×8 · p6.48xlarge",
        "no GPU · m7i.4xlarge",
      ]);
      assert.equal(report.summary.outliers, Object.keys(plant).length);
      // Headers break at separators only: no header text is cut inside a word.
      assert.match(
        dom,
        /<div class="h-sub">gpu-0\.\.7\.<\/div><div class="h-key">power\.<wbr>limit\.<wbr>current<\/div>/,
      );
      assert.match(dom, /<input type="checkbox" id="only-outliers" checked="">/);
    });
  });
}

Deno.test("diff html: Chromium shows the changes of one node between two snapshots, GPU ranges once", async () => {
  const before = makeMixedFleet({ "p5-h100": 1 })[0] as Snapshot;
  const after = structuredClone(before);
  for (let i = 0; i < 8; i++) setReading(after, `GPU.gpu-${i}.power.limit.current`, "500.00 W");
  setReading(after, "GPU.smi.driver", "570.124.06");
  setReading(after, "OS.sysctl./proc/sys/vm/swappiness", "10");
  setReading(after, "OS.kmod.nvidia_peermem", undefined);
  const result = diffSnapshots(before, after, {
    baselineSource: "before.yaml",
    targetSource: "after.yaml",
    ignore: DEFAULT_IGNORE_PATTERNS,
  });
  const html = renderDiffHtml(result, { subtitle: "e2e" });
  await withPages(async (dir) => {
    const dom = await inChromium(dir, "diff", html);
    assert.deepEqual(
      [...dom.matchAll(/<tr class="(\w+)" data-path="([^"]+)">/g)].map((m) => `${m[1]} ${m[2]}`),
      [
        "modified GPU.gpu-0..7.power.limit.current",
        "modified GPU.smi.driver",
        "removed OS.kmod.nvidia_peermem",
        "modified OS.sysctl./proc/sys/vm/swappiness",
      ],
    );
    assert.match(dom, /11 changes: 0 added, 1 removed, 10 modified/);
  });
});
