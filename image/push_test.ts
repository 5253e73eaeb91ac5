/**
 * The push against a registry written here to the distribution API's rules (blob uploads, manifests
 * that must reference blobs it has, tags), with each way a real registry answers: Basic and Bearer
 * challenges, wrong credentials, a refused push, no such repository, an answer that is not the API,
 * nothing listening, and a push cut short. The real registry (Debian's docker-registry) is driven
 * in tests/e2e/image_registry_test.ts.
 */
import assert from "node:assert/strict";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { AssembledImage, Blob } from "./assemble.ts";
import { lookupCredentials, parseChallenge } from "./auth.ts";
import { digestOf } from "./digest.ts";
import { createHttpClient } from "./http.ts";
import {
  encodeDocument,
  imageConfig,
  imageIndex,
  imageManifest,
  MEDIA_TYPES,
  PLATFORMS,
} from "./oci.ts";
import { pushImage } from "./push.ts";
import { parseReference } from "./reference.ts";
import { createRegistryClient } from "./registry.ts";

/** A small image: per platform one layer of a few KiB and its config. */
function smallImage(): AssembledImage {
  const blob = (bytes: Uint8Array, mediaType: string): Blob => ({
    descriptor: { mediaType, digest: digestOf(bytes), size: bytes.length },
    async *read() {
      for (let at = 0; at < bytes.length; at += 1000) yield bytes.subarray(at, at + 1000);
    },
  });
  const platforms = ["linux/amd64", "linux/arm64"].map((name, i) => {
    const platform = PLATFORMS[name]!;
    const layer = blob(new Uint8Array(5000).fill(i + 1), MEDIA_TYPES.layerGzip);
    const config = encodeDocument(
      imageConfig(platform, {
        run: {
          User: "65534:65534",
          Env: [],
          Entrypoint: ["/x"],
          Cmd: [],
          WorkingDir: "/",
          Labels: {},
        },
        diffIds: [layer.descriptor.digest],
        history: [],
        created: "1970-01-01T00:00:00Z",
      }),
      MEDIA_TYPES.config,
    );
    const manifest = encodeDocument(
      imageManifest(config.descriptor, [layer.descriptor]),
      MEDIA_TYPES.manifest,
      { platform },
    );
    return { platform, config, manifest, layers: [layer] };
  });
  const index = encodeDocument(
    imageIndex(platforms.map((p) => p.manifest.descriptor)),
    MEDIA_TYPES.index,
  );
  const blobs = platforms.flatMap((p) => [
    ...p.layers,
    blob(p.config.bytes, MEDIA_TYPES.config),
  ]);
  return {
    build: { version: "0.9.0", commit: "abc", backend: "node-sea" },
    platforms: platforms as unknown as AssembledImage["platforms"],
    index,
    blobs,
    dispose: async () => {},
  };
}

interface FakeOptions {
  auth?: "none" | "basic" | "bearer";
  /** What the registry does instead of the API. */
  mode?: "ok" | "garbage" | "no-repo" | "forbidden";
  /** Called when a blob PUT starts (the test may abort then). */
  onBlobPut?: () => void;
}

/** A distribution API in memory. */
class FakeRegistry {
  blobs = new Map<string, number>();
  manifests = new Map<string, unknown>();
  tags = new Map<string, string>();
  uploads = 0;
  tokenRequests: string[] = [];
  #server: Server;
  port = 0;

  constructor(readonly options: FakeOptions) {
    this.#server = createServer((req, res) => this.#handle(req, res));
  }

  async start(): Promise<string> {
    await new Promise<void>((done) => this.#server.listen(0, "127.0.0.1", done));
    this.port = (this.#server.address() as { port: number }).port;
    return `127.0.0.1:${this.port}`;
  }

  async stop(): Promise<void> {
    this.#server.closeAllConnections();
    await new Promise<void>((done) => this.#server.close(() => done()));
  }

  #authorized(req: IncomingMessage, res: ServerResponse): boolean {
    const auth = this.options.auth ?? "none";
    const given = req.headers.authorization ?? "";
    if (auth === "none") return true;
    if (auth === "basic" && given === `Basic ${btoa("alice:secret")}`) return true;
    if (auth === "bearer" && given === "Bearer token-for-alice") return true;
    res.writeHead(401, {
      "www-authenticate": auth === "basic"
        ? 'Basic realm="fake"'
        : `Bearer realm="http://127.0.0.1:${this.port}/token",service="fake",scope="repository:team/aicr:pull"`,
      "content-type": "application/json",
    });
    res.end(
      JSON.stringify({ errors: [{ code: "UNAUTHORIZED", message: "authentication required" }] }),
    );
    return false;
  }

  #handle(req: IncomingMessage, res: ServerResponse): void {
    const url = new URL(req.url ?? "/", "http://x");
    const chunks: Uint8Array[] = [];
    if (url.pathname.startsWith("/v2/team/aicr/blobs/uploads/") && req.method === "PUT") {
      this.options.onBlobPut?.();
    }
    req.on("data", (c: Uint8Array) => chunks.push(c));
    req.on("end", () => this.#answer(req, res, url, new Uint8Array(Buffer.concat(chunks))));
  }

  #answer(req: IncomingMessage, res: ServerResponse, url: URL, body: Uint8Array): void {
    const json = (status: number, value: unknown, headers: Record<string, string> = {}) => {
      res.writeHead(status, { "content-type": "application/json", ...headers });
      res.end(JSON.stringify(value));
    };
    if (url.pathname === "/token") {
      this.tokenRequests.push(`${req.method} ${url.search} ${req.headers.authorization ?? ""}`);
      if (req.headers.authorization !== `Basic ${btoa("alice:secret")}`) {
        return json(401, { errors: [{ code: "UNAUTHORIZED", message: "bad credentials" }] });
      }
      return json(200, { token: "token-for-alice" });
    }
    if (this.options.mode === "garbage") {
      res.writeHead(200, { "content-type": "text/html" });
      return void res.end("<html><body>Welcome to our proxy</body></html>");
    }
    if (!this.#authorized(req, res)) return;
    if (this.options.mode === "forbidden" && req.method !== "GET" && req.method !== "HEAD") {
      return json(403, {
        errors: [{ code: "DENIED", message: "requested access to the resource is denied" }],
      });
    }
    const path = url.pathname;
    if (path === "/v2/") {
      return json(200, {}, { "docker-distribution-api-version": "registry/2.0" });
    }
    if (!path.startsWith("/v2/team/aicr/")) {
      return json(404, {
        errors: [{ code: "NAME_UNKNOWN", message: "repository name not known to registry" }],
      });
    }
    if (this.options.mode === "no-repo") {
      return json(404, {
        errors: [{ code: "NAME_UNKNOWN", message: "repository name not known to registry" }],
      });
    }
    const rest = path.slice("/v2/team/aicr/".length);
    if (rest.startsWith("blobs/uploads/") && req.method === "POST") {
      return json(202, {}, { location: `/v2/team/aicr/blobs/uploads/u${++this.uploads}` });
    }
    if (rest.startsWith("blobs/uploads/") && req.method === "PUT") {
      const digest = url.searchParams.get("digest") ?? "";
      if (digestOf(body) !== digest) return json(400, { errors: [{ code: "DIGEST_INVALID" }] });
      this.blobs.set(digest, body.length);
      return json(201, {}, { "docker-content-digest": digest });
    }
    if (rest.startsWith("blobs/") && req.method === "HEAD") {
      res.writeHead(this.blobs.has(rest.slice(6)) ? 200 : 404);
      return void res.end();
    }
    if (rest.startsWith("manifests/")) return this.#manifest(req, res, rest.slice(10), body);
    json(404, { errors: [{ code: "NOT_FOUND" }] });
  }

  #manifest(req: IncomingMessage, res: ServerResponse, ref: string, body: Uint8Array): void {
    if (req.method === "HEAD") {
      res.writeHead(this.manifests.has(ref) ? 200 : 404);
      return void res.end();
    }
    const doc = JSON.parse(new TextDecoder().decode(body)) as {
      config?: { digest: string };
      layers?: { digest: string }[];
      manifests?: { digest: string }[];
    };
    // As a real registry: a manifest's blobs, and an index's manifests, must already be there.
    const missing = [
      ...(doc.config ? [doc.config.digest] : []),
      ...(doc.layers ?? []).map((l) => l.digest),
    ].filter((d) => !this.blobs.has(d));
    const missingManifests = (doc.manifests ?? []).map((m) => m.digest).filter((d) =>
      !this.manifests.has(d)
    );
    if (missing.length || missingManifests.length) {
      res.writeHead(400, { "content-type": "application/json" });
      return void res.end(JSON.stringify({ errors: [{ code: "MANIFEST_BLOB_UNKNOWN" }] }));
    }
    const digest = digestOf(body);
    this.manifests.set(digest, doc);
    if (!ref.startsWith("sha256:")) this.tags.set(ref, digest);
    res.writeHead(201, { "docker-content-digest": digest });
    res.end();
  }
}

async function withRegistry(
  options: FakeOptions,
  test: (registry: FakeRegistry, host: string, dir: string) => Promise<void>,
): Promise<void> {
  const registry = new FakeRegistry(options);
  const host = await registry.start();
  const dir = mkdtempSync(join(tmpdir(), "aicr-push-"));
  try {
    await test(registry, host, dir);
  } finally {
    await registry.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

function config(dir: string, host: string, user = "alice", password = "secret"): string {
  const file = join(dir, "config.json");
  writeFileSync(file, JSON.stringify({ auths: { [host]: { auth: btoa(`${user}:${password}`) } } }));
  return file;
}

async function push(host: string, configFile: string | undefined, signal?: AbortSignal) {
  const http = createHttpClient();
  const ref = parseReference(`${host}/team/aicr:0.9.0`);
  try {
    const registry = createRegistryClient({
      ref,
      http,
      scheme: "http",
      credentials: () =>
        lookupCredentials(ref.registry, {
          env: () => undefined,
          ...(configFile ? { configFile } : {}),
        }),
      ...(signal ? { signal } : {}),
    });
    return await pushImage(smallImage(), registry, { tag: "0.9.0", ...(signal ? { signal } : {}) });
  } finally {
    http.close();
  }
}

Deno.test("pushImage() uploads blobs, then manifests, then tags the index; a rerun uploads nothing", async () => {
  await withRegistry({ auth: "basic" }, async (registry, host, dir) => {
    const image = smallImage();
    const result = await push(host, config(dir, host));
    assert.equal(result.digest, image.index.descriptor.digest);
    assert.equal(registry.tags.get("0.9.0"), image.index.descriptor.digest);
    assert.equal(result.uploaded, 4);
    const again = await push(host, config(dir, host));
    assert.deepEqual([again.uploaded, again.skipped], [0, 4]);
  });
});

Deno.test("pushImage() answers a Bearer challenge with a token asked for with the Basic credentials", async () => {
  await withRegistry({ auth: "bearer" }, async (registry, host, dir) => {
    await push(host, config(dir, host));
    assert.ok(registry.tags.has("0.9.0"));
    assert.match(
      registry.tokenRequests[0]!,
      /^GET \?service=fake&scope=repository%3Ateam%2Faicr%3Apull%2Cpush Basic /,
    );
  });
});

Deno.test("pushImage() with wrong credentials names the registry and where they came from (exit 4)", async () => {
  for (const auth of ["basic", "bearer"] as const) {
    await withRegistry({ auth }, async (registry, host, dir) => {
      const file = config(dir, host, "alice", "wrong");
      await assert.rejects(push(host, file), (error: Error & { exitCode?: number }) => {
        assert.equal(error.exitCode, 4, error.message);
        assert.ok(error.message.includes(`'${host}`), error.message);
        assert.ok(
          error.message.includes(`the credentials for '${host}' in '${file}'`),
          error.message,
        );
        return true;
      });
      assert.equal(registry.tags.size, 0);
    });
  }
});

Deno.test("pushImage() without credentials for a registry that asks says where it looked (exit 4)", async () => {
  await withRegistry({ auth: "basic" }, async (_registry, host, dir) => {
    const file = join(dir, "other.json");
    writeFileSync(file, JSON.stringify({ auths: { "elsewhere.example": { auth: btoa("a:b") } } }));
    await assert.rejects(push(host, file), (error: Error & { exitCode?: number }) => {
      assert.equal(error.exitCode, 4);
      assert.match(
        error.message,
        /asks for credentials and aicr found no credentials \(none for '127\.0\.0\.1:\d+' in '.*other\.json'\)/,
      );
      return true;
    });
  });
});

Deno.test("pushImage() refused (403) with valid credentials names the registry and where they came from (exit 4)", async () => {
  await withRegistry({ auth: "basic", mode: "forbidden" }, async (registry, host, dir) => {
    const file = config(dir, host);
    await assert.rejects(push(host, file), (error: Error & { exitCode?: number }) => {
      assert.equal(error.exitCode, 4, error.message);
      assert.match(
        error.message,
        new RegExp(
          `^Cannot push to '${
            host.replace(/\./g, "\\.")
          }/team/aicr': the registry refused access to the credentials for '${
            host.replace(/\./g, "\\.")
          }' in '.*config\\.json' \\(HTTP 403, DENIED`,
        ),
      );
      return true;
    });
    assert.equal(registry.tags.size, 0);
  });
});

Deno.test("pushImage() refused (403), no repository (404), garbage and nothing listening: one line, its exit code", async () => {
  await withRegistry({ mode: "forbidden" }, async (_r, host) => {
    await assert.rejects(
      push(host, undefined),
      (e: Error & { exitCode?: number }) =>
        e.exitCode === 4 && /refused access to .*HTTP 403, DENIED/.test(e.message),
    );
  });
  await withRegistry({ mode: "no-repo" }, async (_r, host) => {
    await assert.rejects(
      push(host, undefined),
      (e: Error & { exitCode?: number }) =>
        e.exitCode === 3 && /the repository does not exist there \(NAME_UNKNOWN/.test(e.message),
    );
  });
  await withRegistry({ mode: "garbage" }, async (_r, host) => {
    await assert.rejects(
      push(host, undefined),
      (e: Error & { exitCode?: number }) =>
        e.exitCode === 6 &&
        /text\/html: '<html><body>Welcome to our proxy.*not the OCI distribution API/.test(
          e.message,
        ),
    );
  });
  const closed = new FakeRegistry({});
  const host = await closed.start();
  await closed.stop();
  await assert.rejects(
    push(host, undefined),
    (e: Error & { exitCode?: number }) =>
      e.exitCode === 6 && e.message.includes(`Cannot reach the registry '${host}'`) &&
      /ECONNREFUSED/.test(e.message),
  );
});

Deno.test("pushImage() cut short mid-upload tags nothing; the rerun uploads only what is missing", async () => {
  const abort = new AbortController();
  let puts = 0;
  await withRegistry(
    { onBlobPut: () => ++puts === 2 && abort.abort(new Error("received SIGINT")) },
    async (registry, host) => {
      await assert.rejects(
        push(host, undefined, abort.signal),
        (e: Error & { exitCode?: number }) =>
          e.exitCode === 130 &&
          /interrupted \(received SIGINT\): no tag was published; [12] blob\(s\) were uploaded/
            .test(
              e.message,
            ),
      );
      assert.equal(registry.tags.size, 0);
      assert.equal(registry.manifests.size, 0);
      const before = registry.blobs.size;
      assert.ok(before >= 1 && before < 4, `${before} blobs before the rerun`);
      const rerun = await push(host, undefined);
      assert.equal(rerun.skipped, before);
      assert.equal(rerun.uploaded, 4 - before);
      assert.ok(registry.tags.has("0.9.0"));
    },
  );
});

Deno.test("parseChallenge() reads Basic and Bearer challenges with quoted parameters", () => {
  assert.deepEqual(parseChallenge('Basic realm="Registry Realm"'), {
    scheme: "basic",
    params: { realm: "Registry Realm" },
  });
  assert.deepEqual(
    parseChallenge(
      'Bearer realm="https://auth.example/token",service="registry.example",scope="repository:a/b:pull"',
    ),
    {
      scheme: "bearer",
      params: {
        realm: "https://auth.example/token",
        service: "registry.example",
        scope: "repository:a/b:pull",
      },
    },
  );
  assert.equal(parseChallenge(undefined), undefined);
});

Deno.test("lookupCredentials() reads REGISTRY_AUTH_FILE, auth keys with a scheme, and refuses a broken file", async () => {
  const dir = mkdtempSync(join(tmpdir(), "aicr-auth-"));
  try {
    const file = join(dir, "auth.json");
    writeFileSync(
      file,
      JSON.stringify({ auths: { "https://reg.example:5000": { username: "u", password: "p" } } }),
    );
    const found = await lookupCredentials("reg.example:5000", {
      env: (n) => (n === "REGISTRY_AUTH_FILE" ? file : undefined),
    });
    assert.deepEqual([found.credentials?.username, found.credentials?.password], ["u", "p"]);
    const none = await lookupCredentials("reg.example:5000", {
      env: (n) => (n === "HOME" ? dir : undefined),
    });
    assert.match(none.describe, /no Docker config at '.*\.docker\/config\.json'/);
    writeFileSync(file, "{not json");
    await assert.rejects(
      lookupCredentials("reg.example", { env: () => undefined, configFile: file }),
      /is not a Docker config JSON document/,
    );
    await assert.rejects(
      lookupCredentials("reg.example", {
        env: () => undefined,
        configFile: join(dir, "missing.json"),
      }),
      /Cannot read the registry credentials/,
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
