/**
 * The fleet HTML report in a real browser: 200 generated H100 nodes with planted outliers
 * are rendered by `aicr diff --fleet -t html`'s renderer, then headless Chromium takes a
 * screenshot and dumps the DOM it built, and the highlighted cells are checked against
 * the planted ones exactly. Needs Debian's `chromium` (`apt-get install -y chromium`);
 * set AICR_SCREENSHOT_DIR to keep the page and the screenshot.
 */
import assert from "node:assert/strict";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { buildFleetReport, DEFAULT_IGNORE_PATTERNS, renderFleetHtml } from "../../snapshot/mod.ts";
import { makeNodeSnapshot, setReading } from "../../snapshot/testdata/generate.ts";

const CHROMIUM = Deno.env.get("CHROMIUM") ?? "/usr/bin/chromium";
const NODES = Array.from({ length: 200 }, (_, i) => `gpu-node-${i + 1}`);

/** node → path → shown value, for every planted outlier reading. */
const PLANTED: Record<string, Record<string, string>> = {
  "gpu-node-17": { "GPU.smi.driver": "570.86.15" },
  "gpu-node-42": { "OS.sysctl./proc/sys/vm/swappiness": "10", "OS.grub.hugepages": "4096" },
  "gpu-node-99": { "OS.kmod.nvidia_peermem": "(absent)" },
  "gpu-node-120": { "OS.sysctl.*": "(absent)" },
  "gpu-node-150": { "SystemD.kubelet.service.ActiveState": "failed" },
  "gpu-node-200": { "K8s.node.kubelet-version": "v1.32.9-eks-113cf36" },
};

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
    signal: AbortSignal.timeout(90_000),
  }).output();
}

Deno.test("fleet html: Chromium shows 200 nodes with exactly the planted outlier cells highlighted", async () => {
  assert.ok(
    existsSync(CHROMIUM),
    `headless Chromium not found at ${CHROMIUM}: install it with 'apt-get update && apt-get install -y chromium' (as root), or set CHROMIUM to its path`,
  );
  const members = NODES.map((node, i) => {
    const snapshot = makeNodeSnapshot(node, { clusterNodes: NODES, boot: i + 1 });
    setReading(snapshot, "GPU.smi.driver", "570.124.06");
    for (const [path, value] of Object.entries(PLANTED[node] ?? {})) {
      if (path.endsWith(".*")) {
        // The whole subtype is gone, as when its collector failed on that node.
        const [type, subtype] = path.split(".");
        const m = snapshot.measurements.find((x) => x.type === type);
        if (m) m.subtypes = m.subtypes.filter((x) => x.subtype !== subtype);
        continue;
      }
      setReading(snapshot, path, value === "(absent)" ? undefined : value);
    }
    return { node, snapshot };
  });
  const report = buildFleetReport(members, { ignore: DEFAULT_IGNORE_PATTERNS });
  const html = renderFleetHtml(report, { subtitle: "e2e: 200 generated H100 nodes" });
  assert.ok(!/<script|<link|https?:\/\//i.test(html), "the page must not load anything");

  const keep = Deno.env.get("AICR_SCREENSHOT_DIR");
  const dir = keep ?? mkdtempSync(join(tmpdir(), "aicr-html-"));
  mkdirSync(dir, { recursive: true });
  const profile = mkdtempSync(join(tmpdir(), "aicr-chromium-"));
  try {
    const page = join(dir, "fleet.html");
    const png = join(dir, "fleet.png");
    writeFileSync(page, html);
    const shot = await chromium([
      `--user-data-dir=${profile}`,
      `--screenshot=${png}`,
      "--window-size=1600,1000",
      `file://${page}`,
    ]);
    assert.equal(shot.code, 0, new TextDecoder().decode(shot.stderr));
    const image = readFileSync(png);
    assert.deepEqual([...image.subarray(1, 4)], [0x50, 0x4e, 0x47], "a PNG file");
    const view = new DataView(image.buffer, image.byteOffset);
    assert.deepEqual([view.getUint32(16), view.getUint32(20)], [1600, 1000]);
    assert.ok(image.length > 20_000, `screenshot has content (${image.length} bytes)`);

    const dump = await chromium([`--user-data-dir=${profile}`, "--dump-dom", `file://${page}`]);
    assert.equal(dump.code, 0, new TextDecoder().decode(dump.stderr));
    const dom = new TextDecoder().decode(dump.stdout);
    const rows = [
      ...dom.matchAll(/<tr(?: class="outlier-row")? data-node="([^"]+)" id="[^"]+">(.*?)<\/tr>/gs),
    ];
    assert.equal(rows.length, 200, "one matrix row per node");
    const found: Record<string, Record<string, string>> = {};
    for (const [, node, cells] of rows) {
      for (
        const cell of (cells as string).matchAll(
          /<td class="outlier[^"]*" data-path="([^"]+)"[^>]*>([^<]*)<\/td>/g,
        )
      ) {
        (found[node as string] ??= {})[cell[1] as string] = cell[2] as string;
      }
    }
    assert.deepEqual(found, PLANTED);
    // The header carries the fleet value of each differing reading.
    assert.match(
      dom,
      /data-path="GPU\.smi\.driver"[^>]*>.*?<div class="h-fleet">570\.124\.06<\/div><div class="h-count">on 199\/200 nodes<\/div>/s,
    );
  } finally {
    rmSync(profile, { recursive: true, force: true });
    if (!keep) rmSync(dir, { recursive: true, force: true });
  }
});
