import assert from "node:assert/strict";
import { exitCodeOf } from "../errors.ts";
import { encodeSnapshot, loadSnapshot } from "../snapshot/mod.ts";
import { sampleSnapshot } from "../tests/fakes/snapshot.ts";
import { createFsSourceLoader } from "./sources.ts";

/** A self-signed certificate for 127.0.0.1 (openssl, as the daemon tests use it). */
async function selfSigned(): Promise<{ cert: string; key: string }> {
  const dir = await Deno.makeTempDir();
  try {
    const out = await new Deno.Command("openssl", {
      args: [
        "req",
        "-x509",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:P-256",
        "-nodes",
        "-subj",
        "/CN=aicr-test",
        "-addext",
        "subjectAltName=IP:127.0.0.1",
        "-days",
        "1",
        "-keyout",
        `${dir}/key.pem`,
        "-out",
        `${dir}/cert.pem`,
      ],
      stdout: "null",
      stderr: "piped",
    }).output();
    assert.equal(out.code, 0, new TextDecoder().decode(out.stderr));
    return {
      cert: await Deno.readTextFile(`${dir}/cert.pem`),
      key: await Deno.readTextFile(`${dir}/key.pem`),
    };
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

Deno.test("diff sources: https URLs are read with the certificate verified, bounded in size and time", async () => {
  const { cert, key } = await selfSigned();
  const text = encodeSnapshot(sampleSnapshot(), "yaml");
  const stop = new AbortController();
  await using server = Deno.serve({
    hostname: "127.0.0.1",
    port: 0,
    cert,
    key,
    signal: stop.signal,
    onListen: () => {},
  }, async (req) => {
    const path = new URL(req.url).pathname;
    if (path === "/snap.yaml") return new Response(text);
    if (path === "/big") return new Response("x".repeat(4096));
    if (path === "/down") {
      return new Response(null, { status: 302, headers: { location: "http://127.0.0.1:9/x" } });
    }
    if (path === "/slow") {
      // Answers only when the test ends (the client gives up first).
      await new Promise((resolve) =>
        stop.signal.addEventListener("abort", resolve, { once: true })
      );
      return new Response(text);
    }
    return new Response("no", { status: 404 });
  });
  const base = `https://127.0.0.1:${server.addr.port}`;
  try {
    const trusted = createFsSourceLoader({ httpsCa: cert, urlTimeoutMs: 2000 });
    const snapshot = await loadSnapshot(`${base}/snap.yaml`, trusted, { cwd: "/" });
    assert.deepEqual(snapshot, sampleSnapshot());

    // The system's trust store does not know this certificate: refused, not read.
    const system = createFsSourceLoader({ urlTimeoutMs: 2000 });
    const untrusted = await loadSnapshot(`${base}/snap.yaml`, system, { cwd: "/" }).catch((e) => e);
    assert.equal(exitCodeOf(untrusted), 6);
    assert.match(String(untrusted.message), /self.signed|certificate/i);

    const big = await trusted.readUrl!(`${base}/big`, 1024).catch((e) => e);
    assert.equal(exitCodeOf(big), 2);
    assert.match(String(big.message), /over the 1024-byte cap|exceeds the 1024-byte cap/);

    const missing = await loadSnapshot(`${base}/nope`, trusted, { cwd: "/" }).catch((e) => e);
    assert.equal(exitCodeOf(missing), 3);

    const down = await loadSnapshot(`${base}/down`, trusted, { cwd: "/" }).catch((e) => e);
    assert.equal(exitCodeOf(down), 2);
    assert.match(String(down.message), /redirects from https to 'http:', which is refused/);

    // Credentials and query values never reach a message (nor the parse error's source name).
    const secret = `https://alice:hunter2@127.0.0.1:${server.addr.port}/nope?token=s3cr3t&x=1`;
    const hidden = await loadSnapshot(secret, trusted, { cwd: "/" }).catch((e) => e);
    assert.equal(exitCodeOf(hidden), 3);
    assert.equal(
      hidden.message,
      `Cannot read snapshot 'https://***@127.0.0.1:${server.addr.port}/nope?token=***&x=***': HTTP 404`,
    );
    const refused = await loadSnapshot(secret.replace("https:", "ftp:"), trusted, { cwd: "/" })
      .catch((e) => e);
    assert.equal(exitCodeOf(refused), 3);
    assert.match(refused.message, /'ftp:\/\/\*\*\*@127.0.0.1:\d+\/nope\?token=\*\*\*&x=\*\*\*'/);
    for (const leak of ["alice", "hunter2", "s3cr3t"]) {
      assert.ok(!refused.message.includes(leak), refused.message);
    }

    const hasty = createFsSourceLoader({ httpsCa: cert, urlTimeoutMs: 200 });
    const slow = await loadSnapshot(`${base}/slow`, hasty, { cwd: "/" }).catch((e) => e);
    assert.equal(exitCodeOf(slow), 5);
    assert.match(String(slow.message), /no complete answer within 0s/);
  } finally {
    stop.abort();
  }
});
