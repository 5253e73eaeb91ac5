import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Buffer } from "node:buffer";
import { NoKubeconfigError } from "../kube/mod.ts";
import type { KubeClient, RestRequest } from "../kube/mod.ts";
import { generateDaemonCa, issueServingCertificate, parseCsr } from "../x509.ts";
import { createLogger } from "../log.ts";
import { fakeCollector, generateTestTls } from "../daemon/_testing.ts";
import type { CliDeps } from "./context.ts";
import { daemonCommand } from "./daemon.ts";
import type { DaemonCommandDeps } from "./daemon.ts";
import { waitUntil } from "../tests/_wait.ts";

const TLS = generateTestTls();

interface Harness {
  deps: DaemonCommandDeps;
  controller: AbortController;
  logs: () => string;
  stderr: () => string;
}

function harness(overrides: Partial<DaemonCommandDeps> = {}): Harness {
  const controller = new AbortController();
  let logText = "";
  let errText = "";
  const kube = {
    tokenReview: (token: string) =>
      Promise.resolve(
        token === "good"
          ? { authenticated: true, user: { username: "alice", groups: [] } }
          : { authenticated: false },
      ),
    subjectAccessReview: (user: { username: string }) =>
      Promise.resolve({ allowed: user.username === "alice" }),
  } as unknown as KubeClient;
  const base: CliDeps = {
    stdout: { write: () => {} },
    stderr: { write: (text) => void (errText += text) },
    env: (name) => (name === "NODE_NAME" ? "node-7" : undefined),
    cwd: "/",
    now: () => new Date(),
    stdoutIsTerminal: false,
    stderrIsTerminal: false,
    signal: controller.signal,
    makeLogger: () => createLogger({ write: (text) => void (logText += text) }, { level: "debug" }),
    connectKube: () => kube,
    collectorDeps: () => {
      throw new Error("collectorDeps must not be used when makeCollect is given");
    },
  };
  const deps: DaemonCommandDeps = {
    ...base,
    makeCollect: () => fakeCollector().collect,
    ...overrides,
  };
  return { deps, controller, logs: () => logText, stderr: () => errText };
}

/** Runs the `daemon` command as commander parses it (the dispatcher adds only exit codes). */
async function runDaemonCli(args: string[], deps: DaemonCommandDeps): Promise<number> {
  await daemonCommand(deps).exitOverride().parseAsync(args, { from: "user" });
  return 0;
}

async function waitForUrl(logs: () => string): Promise<string> {
  let url: string | undefined;
  await waitUntil("the daemon to log its URL", () => {
    url = /listening url=(\S+)/.exec(logs())?.[1];
    if (url === undefined) throw new Error(`not yet; its log so far:\n${logs()}`);
    return true;
  });
  return url!;
}

function certFiles(): { dir: string; cert: string; key: string } {
  const dir = mkdtempSync(join(tmpdir(), "aicr-daemon-cli-"));
  writeFileSync(join(dir, "tls.crt"), TLS.cert);
  writeFileSync(join(dir, "tls.key"), TLS.key);
  return { dir, cert: join(dir, "tls.crt"), key: join(dir, "tls.key") };
}

Deno.test("aicr daemon serves HTTPS with auth, then drains and exits 0 on SIGTERM", async () => {
  const files = certFiles();
  const h = harness();
  const client = Deno.createHttpClient({ caCerts: [TLS.ca] });
  try {
    const run = runDaemonCli([
      "--listen",
      "127.0.0.1",
      "--port",
      "0",
      "--tls-cert-file",
      files.cert,
      "--tls-key-file",
      files.key,
    ], h.deps);
    const url = await waitForUrl(h.logs);
    assert.match(url, /^https:\/\/127\.0\.0\.1:\d+$/);
    assert.equal(await fetch(`${url}/healthz`, { client }).then((r) => r.text()), "ok\n");
    const anonymous = await fetch(`${url}/v1/snapshot`, { client });
    assert.equal(anonymous.status, 401);
    await anonymous.body?.cancel();
    const bad = await fetch(`${url}/v1/snapshot`, {
      client,
      headers: { authorization: "Bearer nope" },
    });
    assert.equal(bad.status, 401);
    await bad.body?.cancel();
    const ok = await fetch(`${url}/v1/snapshot?format=json`, {
      client,
      headers: { authorization: "Bearer good" },
    });
    assert.equal(ok.status, 200);
    assert.equal(ok.headers.get("x-aicr-node"), "node-7");
    assert.equal((await ok.json()).kind, "Snapshot");
    assert.equal((await fetch(`${url}/readyz`, { client })).status, 200);
    h.controller.abort(new Error("received SIGTERM"));
    assert.equal(await run, 0);
    assert.match(h.logs(), /daemon stopped/);
  } finally {
    client.close();
    rmSync(files.dir, { recursive: true, force: true });
  }
});

Deno.test("aicr daemon --insecure-http --insecure-no-auth serves anyone and warns", async () => {
  const h = harness();
  const run = runDaemonCli(
    ["--listen", "127.0.0.1", "--port", "0", "--insecure-http", "--insecure-no-auth"],
    h.deps,
  );
  const url = await waitForUrl(h.logs);
  const res = await fetch(`${url}/v1/snapshot`);
  assert.equal(res.status, 200);
  await res.body?.cancel();
  h.controller.abort();
  assert.equal(await run, 0);
  assert.match(h.logs(), /WARN authentication is OFF/);
  assert.match(h.logs(), /WARN serving plain HTTP/);
});

Deno.test("aicr daemon refuses to start without TLS files, a node name or a cluster for auth", async (t) => {
  const cases: { name: string; args: string[]; deps?: Partial<DaemonCommandDeps>; want: RegExp }[] =
    [
      { name: "no TLS", args: [], want: /'--tls-cert-file' and '--tls-key-file' are not set/ },
      {
        name: "half TLS",
        args: ["--tls-cert-file", "/x"],
        want: /go together: only one is set/,
      },
      {
        name: "unreadable cert",
        args: ["--tls-cert-file", "/nonexistent/c", "--tls-key-file", "/nonexistent/k"],
        want: /Cannot read '--tls-cert-file' file '\/nonexistent\/c'/,
      },
      {
        name: "key of another certificate",
        args: ["--tls-cert-file", "CERT", "--tls-key-file", "OTHER_KEY"],
        want: /Cannot serve TLS with .*does not match the certificate/,
      },
      {
        name: "bad duration",
        args: ["--insecure-http", "--max-age", "soon"],
        want: /'--max-age' as it must be a duration/,
      },
      { name: "bad port", args: ["--insecure-http", "--port", "70000"], want: /at most 65535/ },
      {
        name: "no node name",
        args: ["--insecure-http"],
        deps: { env: () => undefined },
        want: /node name is unknown/,
      },
      {
        name: "no cluster for auth",
        args: ["--insecure-http"],
        deps: {
          connectKube: () => {
            throw new NoKubeconfigError();
          },
        },
        want: /Cannot authenticate callers without a Kubernetes client/,
      },
    ];
  const files = certFiles();
  const otherKey = join(files.dir, "other.key");
  writeFileSync(otherKey, generateTestTls().key);
  try {
    for (const c of cases) {
      await t.step(c.name, async () => {
        const h = harness(c.deps);
        const args = c.args.map((a) =>
          a === "CERT" ? files.cert : a === "OTHER_KEY" ? otherKey : a
        );
        await assert.rejects(runDaemonCli(["--port", "0", ...args], h.deps), c.want);
      });
    }
  } finally {
    rmSync(files.dir, { recursive: true, force: true });
  }
});

Deno.test("aicr daemon serves a rotated certificate and keeps the old one when the new is broken", async () => {
  const files = certFiles();
  const rotated = generateTestTls();
  const h = harness();
  const oldClient = Deno.createHttpClient({ caCerts: [TLS.ca] });
  const newClient = Deno.createHttpClient({ caCerts: [rotated.ca] });
  try {
    const run = runDaemonCli([
      "--listen",
      "127.0.0.1",
      "--port",
      "0",
      "--tls-cert-file",
      files.cert,
      "--tls-key-file",
      files.key,
      "--tls-reload-interval",
      "50ms",
    ], h.deps);
    const url = await waitForUrl(h.logs);
    assert.equal((await fetch(`${url}/healthz`, { client: oldClient })).status, 200);
    // A broken pair (new certificate, old key) is refused and the old one stays.
    writeFileSync(files.cert, rotated.cert);
    await waitUntil("the broken pair to be refused", () => /not reloaded/.test(h.logs()));
    assert.match(h.logs(), /WARN TLS certificate not reloaded/);
    const stillOld = Deno.createHttpClient({ caCerts: [TLS.ca] });
    try {
      assert.equal((await fetch(`${url}/healthz`, { client: stillOld })).status, 200);
    } finally {
      stillOld.close();
    }
    writeFileSync(files.key, rotated.key);
    await waitUntil("the new pair to be loaded", () => /TLS certificate reloaded/.test(h.logs()));
    assert.equal((await fetch(`${url}/healthz`, { client: newClient })).status, 200);
    h.controller.abort();
    assert.equal(await run, 0);
  } finally {
    oldClient.close();
    newClient.close();
    rmSync(files.dir, { recursive: true, force: true });
  }
});

Deno.test("aicr daemon --csr-signer needs its pod's name, UID and IP, and no other certificate source", async () => {
  const h = harness();
  const files = certFiles();
  try {
    for (
      const [args, want] of [
        [
          ["--csr-signer", "aicr.run/daemon-serving"],
          /needs '--pod-name', '--pod-uid' and '--pod-ip'/,
        ],
        [
          ["--csr-signer", "s", "--pod-name", "p", "--pod-uid", "u", "--pod-ip", "not-an-ip"],
          /an IP address; current value is 'not-an-ip'/,
        ],
        [["--pod-name", "p"], /'--pod-name' and '--pod-uid' apart/],
        [
          [
            "--csr-signer",
            "s",
            "--pod-name",
            "p",
            "--pod-uid",
            "u",
            "--pod-ip",
            "10.0.0.7",
            "--tls-cert-file",
            files.cert,
            "--tls-key-file",
            files.key,
          ],
          /the certificate comes from one place/,
        ],
      ] as const
    ) {
      await assert.rejects(runDaemonCli(["--port", "0", ...args], h.deps), want);
    }
  } finally {
    rmSync(files.dir, { recursive: true, force: true });
  }
});

Deno.test("aicr daemon --csr-signer serves the certificate its request got, naming its node", async () => {
  const ca = generateDaemonCa({ now: new Date() });
  const requests: { name: string; request: string }[] = [];
  const rest = {
    json: <T>(request: RestRequest): Promise<T> => {
      if (request.method === "POST") {
        const body = request.body as { metadata: { name: string }; spec: { request: string } };
        requests.push({ name: body.metadata.name, request: body.spec.request });
        return Promise.resolve({} as T);
      }
      // Signed at once, as the installer would for a matching pod.
      const parsed = parseCsr(Buffer.from(requests[0]?.request ?? "", "base64").toString());
      const cert = issueServingCertificate({
        ca,
        publicKey: parsed.publicKey,
        node: "node-7",
        ipAddresses: ["127.0.0.1"],
        now: new Date(),
        lifetimeSeconds: 3600,
      });
      return Promise.resolve(
        { status: { certificate: Buffer.from(cert).toString("base64") } } as T,
      );
    },
  };
  const kube = {
    rest,
    tokenReview: () => Promise.resolve({ authenticated: false }),
    subjectAccessReview: () => Promise.resolve({ allowed: false }),
  } as unknown as KubeClient;
  const h = harness({ connectKube: () => kube });
  const client = Deno.createHttpClient({ caCerts: [ca.caCert] });
  try {
    const run = runDaemonCli([
      "--listen",
      "127.0.0.1",
      "--port",
      "0",
      "--csr-signer",
      "aicr.run/daemon-serving",
      "--pod-name",
      "aicr-daemon-x",
      "--pod-uid",
      "0f1e2d3c-0000",
      "--pod-ip",
      "127.0.0.1",
      "--require-node-bound-token",
    ], h.deps);
    const url = await waitForUrl(h.logs);
    // The CA's client verifies the certificate names 127.0.0.1 (the pod IP); it is ours once signed.
    await waitUntil("the daemon to serve its signed certificate", async () => {
      const status = await fetch(`${url}/readyz`, { client }).then(async (r) => {
        await r.body?.cancel();
        return r.status;
      }, () => 0);
      if (status !== 200) throw new Error(`readyz ${status}; its log:\n${h.logs()}`);
      return true;
    }, { intervalMs: 20 });
    assert.match(h.logs(), /serving its own certificate/);
    assert.equal(requests.length, 1);
    h.controller.abort(new Error("received SIGTERM"));
    assert.equal(await run, 0);
  } finally {
    client.close();
  }
});
