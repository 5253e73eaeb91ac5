import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";

const MOD = fileURLToPath(new URL("../mod.ts", import.meta.url));
const HOST = fileURLToPath(new URL("../collectors/testdata/host", import.meta.url));

async function agent(args: string[], env: Record<string, string>) {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", MOD, "agent", "--host-root", HOST, "--kubeconfig", "/nonexistent", ...args],
    env: { NODE_NAME: "gpu-node-7", ...env },
    stdout: "piped",
    stderr: "piped",
  }).output();
  const text = (b: Uint8Array) => new TextDecoder().decode(b);
  return { code: out.code, stdout: text(out.stdout), stderr: text(out.stderr) };
}

Deno.test("aicr agent --redact writes no node name, with the key from AICR_REDACT_KEY or a file", async () => {
  const plain = await agent([], {});
  assert.equal(plain.code, 0, plain.stderr);
  assert.match(plain.stdout, /gpu-node-7/);
  const key = "0123456789abcdef-key";
  const viaEnv = await agent(["--redact"], { AICR_REDACT_KEY: key });
  assert.equal(viaEnv.code, 0, viaEnv.stderr);
  assert.doesNotMatch(viaEnv.stdout, /gpu-node-7/);
  assert.match(viaEnv.stdout, /redacted: hostnames,node-names,ip-addresses,registry-hosts/);
  assert.match(viaEnv.stdout, /source-node: redacted-[0-9a-f]{12}/);
  const file = await Deno.makeTempFile();
  try {
    await Deno.writeTextFile(file, key);
    const viaFile = await agent(["--redact", "--redact-key-file", file], {});
    assert.equal(viaFile.code, 0, viaFile.stderr);
    const token = (s: string) => /source-node: (redacted-[0-9a-f]{12})/.exec(s)?.[1];
    assert.equal(token(viaFile.stdout), token(viaEnv.stdout), "the same key, the same token");
  } finally {
    await Deno.remove(file);
  }
  const keyless = await agent(["--redact"], {});
  assert.equal(keyless.code, 2);
  assert.match(
    keyless.stderr,
    /Cannot use '--redact' without a key: pass '--redact-key-file <path>' or set AICR_REDACT_KEY/,
  );
  assert.equal(keyless.stdout, "");
});
