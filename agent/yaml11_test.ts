/**
 * A real snapshot of this host (`aicr agent`, whose sysctl readings hold tabs, e.g.
 * `/proc/sys/fs/dentry-state`) loads with PyYAML, a strict YAML 1.1 reader (what Ansible
 * and most Python scripts use). js-yaml 5, the JavaScript reader at hand, reads YAML 1.2
 * and accepts raw tabs, so it would prove nothing. Ignored where no `python3` with the
 * `yaml` module exists (`apt-get install python3-yaml`).
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { parseSnapshot } from "../snapshot/mod.ts";

const PYYAML = (() => {
  try {
    const probe = new Deno.Command("python3", { args: ["-c", "import yaml"] }).outputSync();
    return probe.code === 0;
  } catch {
    return false;
  }
})();

const LOADER = `
import json, sys, yaml
doc = yaml.load(sys.stdin, Loader=yaml.SafeLoader)
out = {}
for m in doc["measurements"]:
    for s in m.get("subtypes", []):
        out[m["type"] + "." + s["subtype"]] = {k: str(v) for k, v in s["data"].items()}
print(json.dumps(out))
`;

Deno.test({
  name: "aicr agent: a snapshot of this host loads with PyYAML (YAML 1.1), tabs included",
  ignore: !PYYAML || !readFileSync("/proc/sys/fs/dentry-state", "utf8").includes("\t"),
  async fn() {
    const root = new URL("..", import.meta.url).pathname;
    const agent = await new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", "mod.ts", "agent", "-o", "-"],
      cwd: root,
      stdout: "piped",
      stderr: "piped",
    }).output();
    assert.equal(agent.code, 0, new TextDecoder().decode(agent.stderr));
    const text = new TextDecoder().decode(agent.stdout);
    const ours = parseSnapshot(text, { source: "aicr agent" });
    const sysctl = ours.measurements.find((m) =>
      m.type === "OS"
    )?.subtypes.find((s) => s.subtype === "sysctl")?.data ?? {};
    const dentry = sysctl["/proc/sys/fs/dentry-state"];
    assert.ok(typeof dentry === "string" && dentry.includes("\t"), "the snapshot holds a tab");

    const child = new Deno.Command("python3", {
      args: ["-c", LOADER],
      stdin: "piped",
      stdout: "piped",
      stderr: "piped",
    }).spawn();
    const writer = child.stdin.getWriter();
    await writer.write(agent.stdout);
    await writer.close();
    const loaded = await child.output();
    assert.equal(loaded.code, 0, new TextDecoder().decode(loaded.stderr));
    const python = JSON.parse(new TextDecoder().decode(loaded.stdout)) as Record<
      string,
      Record<string, string>
    >;
    assert.equal(python["OS.sysctl"]?.["/proc/sys/fs/dentry-state"], dentry);
    // Every subtype and every key PyYAML read is the one aicr reads back.
    for (const m of ours.measurements) {
      for (const s of m.subtypes) {
        assert.deepEqual(
          Object.keys(python[`${m.type}.${s.subtype}`] ?? {}).sort(),
          Object.keys(s.data).sort(),
          `${m.type}.${s.subtype}`,
        );
      }
    }
  },
});
