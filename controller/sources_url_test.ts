import assert from "node:assert/strict";
import { exitCodeOf, formatError } from "../errors.ts";
import { encodeSnapshot, loadSnapshot } from "../snapshot/mod.ts";
import { sampleSnapshot } from "../tests/fakes/snapshot.ts";
import { createFsSourceLoader, urlSourceError } from "./sources.ts";

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
    if (path === "/fail") return new Response("busy", { status: 503 });
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
    assert.equal(exitCodeOf(untrusted), 11);
    assert.match(
      String(untrusted.message),
      new RegExp(
        `^Cannot read snapshot '${base}/snap.yaml': TLS with 127.0.0.1:\\d+ failed: .*(self.signed|certificate)`,
        "i",
      ),
    );
    assert.match(untrusted.details.join("\n"), /NODE_EXTRA_CA_CERTS/);
    assert.doesNotMatch(formatError(untrusted), /use-system-ca|API server|VPN/);

    const big = await trusted.readUrl!(`${base}/big`, 1024).catch((e) => e);
    assert.equal(exitCodeOf(big), 2);
    assert.match(String(big.message), /over the 1024-byte cap|exceeds the 1024-byte cap/);

    const missing = await loadSnapshot(`${base}/nope`, trusted, { cwd: "/" }).catch((e) => e);
    assert.equal(exitCodeOf(missing), 3);
    assert.match(missing.message, /: the server answered HTTP 404 Not Found$/);

    const failing = await loadSnapshot(`${base}/fail`, trusted, { cwd: "/" }).catch((e) => e);
    assert.equal(exitCodeOf(failing), 11);
    assert.equal(
      failing.message,
      `Cannot read snapshot '${base}/fail': the server answered HTTP 503 Service Unavailable`,
    );

    const down = await loadSnapshot(`${base}/down`, trusted, { cwd: "/" }).catch((e) => e);
    assert.equal(exitCodeOf(down), 2);
    assert.match(String(down.message), /redirects from https to 'http:', which is refused/);

    // Credentials and query values never reach a message (nor the parse error's source name).
    const secret = `https://alice:hunter2@127.0.0.1:${server.addr.port}/nope?token=s3cr3t&x=1`;
    const hidden = await loadSnapshot(secret, trusted, { cwd: "/" }).catch((e) => e);
    assert.equal(exitCodeOf(hidden), 3);
    assert.equal(
      hidden.message,
      `Cannot read snapshot 'https://***@127.0.0.1:${server.addr.port}/nope?token=***&x=***': the server answered HTTP 404 Not Found`,
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
    assert.equal(exitCodeOf(slow), 11);
    assert.match(
      String(slow.message),
      /^Cannot read snapshot '.*\/slow': timeout: no complete answer from 127.0.0.1:\d+ within 0s$/,
    );
  } finally {
    stop.abort();
  }
});

Deno.test("diff sources: an unresolvable host or a refused port is a URL error (exit 11), never the API server's", async () => {
  const loader = createFsSourceLoader({ urlTimeoutMs: 5000 });
  // `.invalid` never resolves (RFC 6761), whatever the resolver.
  const dns = await loadSnapshot("https://alice:pw@aicr-test.invalid/x.yaml?token=s3cr3t", loader, {
    cwd: "/",
  }).catch((e) => e);
  assert.equal(exitCodeOf(dns), 11);
  assert.match(
    dns.message,
    /^Cannot read snapshot 'https:\/\/\*\*\*@aicr-test\.invalid\/x\.yaml\?token=\*\*\*': DNS: the host name 'aicr-test\.invalid' does not resolve \((ENOTFOUND|EAI_AGAIN|EAI_FAIL)\)$/,
  );
  assert.doesNotMatch(formatError(dns), /API server|VPN|s3cr3t|alice/);

  // A port that was just free: nothing listens there.
  const probe = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (probe.addr as Deno.NetAddr).port;
  probe.close();
  const refused = await loadSnapshot(`http://127.0.0.1:${port}/x.yaml`, loader, { cwd: "/" })
    .catch((e) => e);
  assert.equal(exitCodeOf(refused), 11);
  assert.equal(
    refused.message,
    `Cannot read snapshot 'http://127.0.0.1:${port}/x.yaml': the connection to 127.0.0.1:${port} was refused (nothing listens there) (ECONNREFUSED)`,
  );
  assert.equal(formatError(refused).split("\n").length, 2, "the message and its fix, said once");
});

Deno.test("urlSourceError() says what failed for each kind of socket error", () => {
  const url = new URL("https://files.example:8443/x.yaml");
  const shown = "https://files.example:8443/x.yaml";
  const of = (code: string) =>
    urlSourceError(shown, url, { error: Object.assign(new Error(`boom ${code}`), { code }) });
  const cases: [string, RegExp][] = [
    ["ENOTFOUND", /DNS: the host name 'files\.example' does not resolve \(ENOTFOUND\)$/],
    ["ECONNRESET", /the connection to files\.example:8443 was cut before a complete answer/],
    ["EHOSTUNREACH", /files\.example:8443 is unreachable \(no route to the host\)/],
    ["ETIMEDOUT", /connecting to files\.example:8443 timed out \(ETIMEDOUT\)$/],
    ["CERT_HAS_EXPIRED", /TLS with files\.example:8443 failed: boom CERT_HAS_EXPIRED/],
    ["ERR_TLS_CERT_ALTNAME_INVALID", /TLS with files\.example:8443 failed/],
    ["EWHATEVER", /the request to files\.example:8443 failed: boom EWHATEVER$/],
  ];
  for (const [code, expected] of cases) {
    const error = of(code);
    assert.equal(error.exitCode, 11, code);
    assert.match(error.message, /^Cannot read snapshot 'https:\/\/files\.example:8443\/x\.yaml': /);
    assert.match(error.message, expected);
  }
  assert.equal(urlSourceError(shown, url, { status: 404 }).exitCode, 3);
  assert.equal(urlSourceError(shown, new URL("http://h/x"), { timeoutMs: 1 }).exitCode, 11);
  assert.match(
    urlSourceError(shown, new URL("http://h/x"), { timeoutMs: 30_000 }).message,
    /timeout: no complete answer from h:80 within 30s$/,
  );
});
