/**
 * Edges of input found by the outside review (issue #18), through the built binary: a
 * snapshot nested thousands of levels deep (exit 2 naming the file, no stack overflow; in a
 * fleet, one unreadable node and exit 9), a
 * reading keyed `__proto__` (compared like any other key, so `--fail-on-drift` exits 1;
 * the binary runs on Node, whose `__proto__` setter used to swallow the key), and a very
 * large but valid `nvidia-smi` output (read as the plain one, memory kept to what is kept).
 * No cluster is touched; the file runs with the suite.
 */
import assert from "node:assert/strict";
import { chmod, mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseSnapshot } from "../../snapshot/mod.ts";
import { aicr } from "../e2e/_aicr.ts";
import { record } from "./_report.ts";
import { ENABLED } from "./_env.ts";

const HEAD = "kind: Snapshot\napiVersion: aicr.run/v1\nmeasurements:\n- type: OS\n  subtypes:\n" +
  "  - subtype: sysctl\n    data:\n";

Deno.test({
  name: "reliability: deep documents, __proto__ readings and huge nvidia-smi output",
  ignore: !ENABLED,
  async fn(t) {
    const dir = await mkdtemp(join(tmpdir(), "aicr-edges-"));
    let tried = 0;
    let handled = 0;
    try {
      await t.step("a snapshot nested 50,000 levels deep: exit 2 naming the file", async () => {
        tried++;
        const deep = join(dir, "deep.yaml");
        await writeFile(deep, HEAD + "      x: " + "[".repeat(50_000) + "]".repeat(50_000) + "\n");
        const good = join(dir, "good.yaml");
        await writeFile(good, HEAD + "      x: 1\n");
        const pair = await aicr(["diff", "--baseline", deep, "--target", good]);
        assert.equal(pair.code, 2, pair.stderr);
        assert.match(
          pair.stderr,
          /^error: Cannot parse snapshot '.*deep\.yaml.*': it nests too deeply/m,
        );
        assert.doesNotMatch(pair.stderr, /Maximum call stack/);
        // In a fleet it is one unreadable node (exit 9), and the good one is still compared.
        const fleet = await aicr(["diff", "--fleet", dir]);
        assert.equal(fleet.code, 9, fleet.stderr);
        assert.match(fleet.stderr, /deep\.yaml: .*it nests too deeply/);
        assert.match(fleet.stdout, /^FLEET \(1 nodes in 1 cohort, .*1 unreadable\)/m);
        assert.doesNotMatch(fleet.stderr, /Maximum call stack/);
        handled++;
        await rm(deep);
        await rm(good);
      });

      await t.step("a reading keyed __proto__ is compared: --fail-on-drift exits 1", async () => {
        tried++;
        const a = join(dir, "a.yaml");
        const b = join(dir, "b.yaml");
        await writeFile(a, HEAD + '      "__proto__": "5"\n      y: "1"\n');
        await writeFile(b, HEAD + '      "__proto__": "6"\n      y: "1"\n');
        const run = await aicr([
          "diff",
          "--baseline",
          a,
          "--target",
          b,
          "--fail-on-drift",
          "-t",
          "json",
        ]);
        assert.equal(run.code, 1, run.stderr);
        assert.match(run.stdout, /OS\.sysctl\.__proto__/);
        const same = await aicr(["diff", "--baseline", a, "--target", a, "--fail-on-drift"]);
        assert.equal(same.code, 0, same.stderr);
        handled++;
      });

      await t.step("a valid 15 MiB nvidia-smi output reads as the plain one", async () => {
        tried++;
        const fixture = await readFile(
          new URL("../fixtures/nvidia-smi-q-x.h100.xml", import.meta.url),
          "utf8",
        );
        const proc =
          "<process_info><pid>1</pid><type>C</type><process_name>python3 train.py</process_name><used_memory>1 MiB</used_memory></process_info>\n";
        const big = fixture.replace(
          /<processes>[\s\S]*?<\/processes>|<processes\/>/g,
          `<processes>${proc.repeat(Math.floor((15 << 20) / 8 / proc.length))}</processes>`,
        );
        const snapshots: string[] = [];
        for (const [name, text] of [["plain", fixture], ["big", big]] as const) {
          const bin = join(dir, name, "bin");
          await mkdir(bin, { recursive: true });
          await writeFile(join(dir, name, "smi.xml"), text);
          await writeFile(
            join(bin, "nvidia-smi"),
            `#!/bin/sh\nexec cat '${join(dir, name, "smi.xml")}'\n`,
          );
          await chmod(join(bin, "nvidia-smi"), 0o755);
          const run = await aicr(["agent", "-o", "-"], {
            env: { HOME: dir, PATH: `${bin}:/usr/bin:/bin` },
          });
          assert.equal(run.code, 0, run.stderr);
          snapshots.push(run.stdout);
        }
        const gpu = (text: string) =>
          parseSnapshot(text).measurements.find((m) => m.type === "GPU")?.subtypes;
        assert.equal(gpu(snapshots[1]!)?.find((s) => s.subtype === "smi")?.data["gpu-count"], 8);
        assert.deepEqual(gpu(snapshots[1]!), gpu(snapshots[0]!));
        handled++;
      });
    } finally {
      record("bad input: edges of input", { badInputs: tried, badInputsRefused: handled });
      await rm(dir, { recursive: true, force: true });
    }
  },
});
