import assert from "node:assert/strict";
import { NOOP_LOGGER } from "../log.ts";
import { parseSnapshot } from "../snapshot/mod.ts";
import type { Snapshot } from "../snapshot/mod.ts";
import { setReading } from "../snapshot/testdata/generate.ts";
import { makeMixedFleet } from "../snapshot/testdata/mixed_fleet.ts";
import { createCachingAuthorizer } from "./auth.ts";
import { createDaemon } from "./daemon.ts";
import type { Daemon } from "./daemon.ts";
import { negotiateFormat, resolveMeasurementType } from "./app.ts";
import { fakeCollector, fakeKubeAuth, OK_REPORTS } from "./_testing.ts";
import type { FakeCollector, FakeKubeAuth } from "./_testing.ts";
import { waitUntil } from "../tests/_wait.ts";

const BUILD = { version: "0.1.0", commit: "abc123", backend: "source" };

interface Setup {
  daemon: Daemon;
  collector: FakeCollector;
  kube: FakeKubeAuth;
  clock: { now: number };
}

function setup(
  options: { auth?: boolean; maxAgeMs?: number; freshMinIntervalMs?: number } = {},
): Setup {
  const { auth = true, maxAgeMs = 60_000, freshMinIntervalMs = 10_000 } = options;
  const clock = { now: Date.parse("2026-03-21T10:30:05Z") };
  const collector = fakeCollector();
  const kube = fakeKubeAuth();
  const daemon = createDaemon({
    collect: collector.collect,
    auth: auth ? createCachingAuthorizer(kube, { clock: () => clock.now }) : undefined,
    clock: () => clock.now,
    log: NOOP_LOGGER,
    build: BUILD,
    nodeName: "node-1",
  }, { maxAgeMs, freshMinIntervalMs, failureBackoffMs: 5_000 });
  return { daemon, collector, kube, clock };
}

function bearer(token: string, extra: Record<string, string> = {}): RequestInit {
  return { headers: { authorization: `Bearer ${token}`, ...extra } };
}

Deno.test("createApp() serves /healthz without credentials", async () => {
  const { daemon } = setup();
  const res = await daemon.app.request("/healthz");
  assert.equal(res.status, 200);
  assert.equal(await res.text(), "ok\n");
});

Deno.test("createApp() answers /readyz 503 before the first collection and 200 after", async () => {
  const { daemon, collector } = setup();
  collector.hold = true;
  daemon.start();
  const before = await daemon.app.request("/readyz");
  assert.equal(before.status, 503);
  assert.match(await before.text(), /not ready/);
  collector.release();
  // Wait for the background collection to land.
  await waitUntil("the first collection to land", () => daemon.cache.ready);
  const after = await daemon.app.request("/readyz");
  assert.equal(after.status, 200);
  await daemon.close();
});

Deno.test("createApp() is not ready while awaiting its own certificate, and /healthz says so", async () => {
  const collector = fakeCollector();
  let awaiting: string | undefined = "awaiting its serving certificate (request r1)";
  const daemon = createDaemon({
    collect: collector.collect,
    auth: undefined,
    clock: Date.now,
    log: NOOP_LOGGER,
    build: BUILD,
    nodeName: "node-1",
    awaitingCertificate: () => awaiting,
  });
  await daemon.cache.refresh();
  const health = await daemon.app.request("/healthz");
  assert.equal(health.status, 200, "alive: no restart while waiting");
  assert.equal(await health.text(), "ok: awaiting its serving certificate (request r1)\n");
  const waiting = await daemon.app.request("/readyz");
  assert.equal(waiting.status, 503);
  assert.match(await waiting.text(), /awaiting its serving certificate/);
  awaiting = undefined;
  assert.equal((await daemon.app.request("/readyz")).status, 200);
  assert.equal(await (await daemon.app.request("/healthz")).text(), "ok\n");
  await daemon.close();
});

Deno.test("createApp() keeps /readyz at 503 while collections fail", async () => {
  const { daemon, collector } = setup();
  collector.failWith = new Error("nvidia-smi exploded");
  await daemon.cache.refresh();
  assert.equal((await daemon.app.request("/readyz")).status, 503);
  collector.failWith = undefined;
  await daemon.cache.refresh();
  assert.equal((await daemon.app.request("/readyz")).status, 200);
});

Deno.test("createApp() answers 401 without a token, with a malformed one or an invalid one", async (t) => {
  const { daemon } = setup();
  for (
    const [name, init] of [
      ["no token", {}],
      ["basic credentials", { headers: { authorization: "Basic dXNlcjpwYXNz" } }],
      ["invalid token", bearer("nope")],
    ] as const
  ) {
    await t.step(name, async () => {
      const res = await daemon.app.request("/v1/snapshot", init);
      assert.equal(res.status, 401);
      assert.equal(res.headers.get("www-authenticate"), 'Bearer realm="aicr"');
      const body = await res.json();
      assert.equal(body.kind, "Status");
      assert.equal(body.reason, "Unauthorized");
    });
  }
});

Deno.test("createApp() answers 403 to an authenticated user without access", async () => {
  const { daemon, kube } = setup();
  const res = await daemon.app.request("/v1/snapshot", bearer("token-other"));
  assert.equal(res.status, 403);
  const body = await res.json();
  assert.equal(body.reason, "Forbidden");
  assert.match(
    body.message,
    /User "other" cannot get resource "snapshots" in API group "aicr.run"/,
  );
  assert.deepEqual(kube.checks[0], {
    user: "other",
    attributes: { verb: "get", group: "aicr.run", resource: "snapshots", name: "node-1" },
  });
});

Deno.test("createApp() serves the snapshot as YAML to an authorized user", async () => {
  const { daemon } = setup();
  const res = await daemon.app.request("/v1/snapshot", bearer("token-reader"));
  assert.equal(res.status, 200);
  assert.equal(res.headers.get("content-type"), "application/yaml; charset=utf-8");
  assert.equal(res.headers.get("cache-control"), "no-store");
  assert.equal(res.headers.get("x-aicr-node"), "node-1");
  // The daemon's build, which `aicr daemonset fetch` checks it against.
  assert.equal(res.headers.get("x-aicr-version"), BUILD.version);
  assert.equal(res.headers.get("x-aicr-commit"), BUILD.commit);
  assert.equal(res.headers.get("x-aicr-collected-at"), "2026-03-21T10:30:05.000Z");
  assert.equal(res.headers.get("last-modified"), "Sat, 21 Mar 2026 10:30:05 GMT");
  assert.match(res.headers.get("etag") ?? "", /^"[0-9a-f]{32}"$/);
  const snapshot = parseSnapshot(await res.text());
  assert.equal(snapshot.metadata["source-node"], "node-1");
  assert.deepEqual(snapshot.measurements.map((m) => m.type), ["GPU", "OS"]);
});

Deno.test("createApp() reads the token from X-Aicr-Authorization (apiserver proxy)", async () => {
  const { daemon } = setup();
  const res = await daemon.app.request("/v1/snapshot", {
    headers: { "x-aicr-authorization": "Bearer token-reader" },
  });
  assert.equal(res.status, 200);
});

Deno.test("createApp() picks the format from ?format= first, then Accept", async (t) => {
  const { daemon } = setup();
  const cases: { name: string; path: string; accept?: string; want: string }[] = [
    { name: "default", path: "/v1/snapshot", want: "application/yaml" },
    {
      name: "Accept json",
      path: "/v1/snapshot",
      accept: "application/json",
      want: "application/json",
    },
    {
      name: "Accept text/yaml",
      path: "/v1/snapshot",
      accept: "text/yaml",
      want: "application/yaml",
    },
    {
      name: "query wins",
      path: "/v1/snapshot?format=json",
      accept: "text/yaml",
      want: "application/json",
    },
    {
      name: "query yaml",
      path: "/v1/snapshot?format=yaml",
      accept: "application/json",
      want: "application/yaml",
    },
    { name: "unknown Accept", path: "/v1/snapshot", accept: "text/html", want: "application/yaml" },
  ];
  for (const c of cases) {
    await t.step(c.name, async () => {
      const res = await daemon.app.request(
        c.path,
        bearer("token-reader", c.accept ? { accept: c.accept } : {}),
      );
      assert.equal(res.status, 200);
      assert.equal(res.headers.get("content-type")?.split(";")[0], c.want);
      const text = await res.text();
      if (c.want === "application/json") assert.equal(JSON.parse(text).kind, "Snapshot");
      else assert.equal(parseSnapshot(text).kind, "Snapshot");
    });
  }
});

Deno.test("createApp() answers 400 to an unknown format or fresh value", async () => {
  const { daemon, collector } = setup();
  const res = await daemon.app.request("/v1/snapshot?format=xml", bearer("token-reader"));
  assert.equal(res.status, 400);
  assert.match((await res.json()).message, /'format' must be 'yaml' or 'json'/);
  const fresh = await daemon.app.request("/v1/snapshot?fresh=maybe", bearer("token-reader"));
  assert.equal(fresh.status, 400);
  assert.equal(collector.calls, 0);
});

Deno.test("createApp() serves one measurement, case-insensitively, and 404 otherwise", async () => {
  const { daemon } = setup();
  const gpu = await daemon.app.request("/v1/snapshot/GPU?format=json", bearer("token-reader"));
  assert.equal(gpu.status, 200);
  const doc = await gpu.json();
  assert.equal(doc.kind, "Snapshot");
  assert.deepEqual(doc.measurements.map((m: { type: string }) => m.type), ["GPU"]);
  const lower = await daemon.app.request("/v1/snapshot/os", bearer("token-reader"));
  assert.equal(lower.status, 200);
  assert.deepEqual(parseSnapshot(await lower.text()).measurements.map((m) => m.type), ["OS"]);
  const absent = await daemon.app.request("/v1/snapshot/SystemD", bearer("token-reader"));
  assert.equal(absent.status, 404);
  assert.match((await absent.json()).message, /'SystemD' in the snapshot of node "node-1"/);
  const unknown = await daemon.app.request("/v1/snapshot/Disk", bearer("token-reader"));
  assert.equal(unknown.status, 404);
  assert.match(
    (await unknown.json()).message,
    /known types are K8s, GPU, OS, SystemD, NodeTopology/,
  );
});

Deno.test("createApp() checks access before it says whether a measurement exists", async () => {
  const { daemon } = setup();
  assert.equal((await daemon.app.request("/v1/snapshot/Disk")).status, 401);
  assert.equal((await daemon.app.request("/v1/snapshot/Disk", bearer("token-other"))).status, 403);
});

Deno.test("createApp() answers 304 to a matching If-None-Match", async () => {
  const { daemon } = setup();
  const first = await daemon.app.request("/v1/snapshot", bearer("token-reader"));
  const etag = first.headers.get("etag") ?? "";
  await first.body?.cancel();
  const again = await daemon.app.request(
    "/v1/snapshot",
    bearer("token-reader", { "if-none-match": etag }),
  );
  assert.equal(again.status, 304);
  assert.equal(await again.text(), "");
  const json = await daemon.app.request(
    "/v1/snapshot?format=json",
    bearer("token-reader", { "if-none-match": etag }),
  );
  assert.equal(json.status, 200, "another representation has another ETag");
  await json.body?.cancel();
});

Deno.test("createApp() shares one collection among 100 simultaneous cold requests", async () => {
  const { daemon, collector } = setup();
  collector.hold = true;
  const requests = Array.from(
    { length: 100 },
    () => daemon.app.request("/v1/snapshot", bearer("token-reader")),
  );
  await new Promise((r) => setTimeout(r, 5));
  collector.release();
  const responses = await Promise.all(requests);
  assert.deepEqual([...new Set(responses.map((r) => r.status))], [200]);
  await Promise.all(responses.map((r) => r.body?.cancel()));
  assert.equal(collector.calls, 1);
});

Deno.test("createApp() collects again only once the snapshot is older than the max age", async () => {
  const { daemon, collector, clock } = setup({ maxAgeMs: 60_000 });
  const get = async () => {
    const res = await daemon.app.request("/v1/snapshot", bearer("token-reader"));
    await res.body?.cancel();
    return res;
  };
  await get();
  clock.now += 59_000;
  await get();
  assert.equal(collector.calls, 1);
  clock.now += 2_000;
  const res = await get();
  assert.equal(collector.calls, 2);
  assert.equal(res.headers.get("x-aicr-collected-at"), "2026-03-21T10:31:06.000Z");
});

Deno.test("createApp() rate-limits ?fresh=true with 429 and Retry-After", async () => {
  const { daemon, collector, clock } = setup({ freshMinIntervalMs: 10_000 });
  const fresh = () => daemon.app.request("/v1/snapshot?fresh=true", bearer("token-reader"));
  const first = await fresh();
  assert.equal(first.status, 200);
  await first.body?.cancel();
  clock.now += 3_000;
  const limited = await fresh();
  assert.equal(limited.status, 429);
  assert.equal(limited.headers.get("retry-after"), "7");
  assert.equal((await limited.json()).reason, "TooManyRequests");
  assert.equal(collector.calls, 1);
  clock.now += 7_000;
  const second = await fresh();
  assert.equal(second.status, 200);
  await second.body?.cancel();
  assert.equal(collector.calls, 2);
});

Deno.test("createApp() lets ?fresh=true join a running collection", async () => {
  const { daemon, collector } = setup();
  collector.hold = true;
  const plain = daemon.app.request("/v1/snapshot", bearer("token-reader"));
  await new Promise((r) => setTimeout(r, 1));
  const fresh = daemon.app.request("/v1/snapshot?fresh=1", bearer("token-reader"));
  await new Promise((r) => setTimeout(r, 1));
  collector.release();
  const [a, b] = await Promise.all([plain, fresh]);
  assert.equal(a.status, 200);
  assert.equal(b.status, 200);
  await Promise.all([a.body?.cancel(), b.body?.cancel()]);
  assert.equal(collector.calls, 1);
});

Deno.test("createApp() answers 503 after a failed collection and recovers after the back-off", async () => {
  const { daemon, collector, clock } = setup();
  collector.failWith = new Error("nvidia-smi exploded");
  const failed = await daemon.app.request("/v1/snapshot", bearer("token-reader"));
  assert.equal(failed.status, 503);
  assert.match((await failed.json()).message, /Cannot collect snapshot: nvidia-smi exploded/);
  collector.failWith = undefined;
  clock.now += 1_000;
  const backoff = await daemon.app.request("/v1/snapshot", bearer("token-reader"));
  assert.equal(backoff.status, 503);
  assert.equal(backoff.headers.get("retry-after"), "4");
  await backoff.body?.cancel();
  assert.equal(collector.calls, 1, "no new collection inside the back-off");
  clock.now += 4_000;
  const ok = await daemon.app.request("/v1/snapshot", bearer("token-reader"));
  assert.equal(ok.status, 200);
  await ok.body?.cancel();
  assert.equal(collector.calls, 2);
});

Deno.test("createApp() protects /metrics with nodes/metrics like the kubelet", async () => {
  const { daemon, kube } = setup();
  assert.equal((await daemon.app.request("/metrics")).status, 401);
  const denied = await daemon.app.request("/metrics", bearer("token-reader"));
  assert.equal(denied.status, 403);
  await denied.body?.cancel();
  const res = await daemon.app.request("/metrics", bearer("token-prometheus"));
  assert.equal(res.status, 200);
  assert.equal(res.headers.get("content-type"), "text/plain; version=0.0.4; charset=utf-8");
  await res.body?.cancel();
  assert.deepEqual(kube.checks.at(-1)?.attributes, {
    verb: "get",
    group: "",
    resource: "nodes",
    subresource: "metrics",
    name: "node-1",
  });
});

Deno.test("createApp() exposes collection and request metrics", async () => {
  const { daemon, clock } = setup();
  const snap = await daemon.app.request("/v1/snapshot", bearer("token-reader"));
  await snap.body?.cancel();
  clock.now += 1;
  await (await daemon.app.request("/v1/snapshot/Nope", bearer("token-reader"))).body?.cancel();
  await (await daemon.app.request("/random/path")).body?.cancel();
  const text = await (await daemon.app.request("/metrics", bearer("token-prometheus"))).text();
  assert.match(text, /^aicr_build_info\{version="0\.1\.0",commit="abc123",backend="source"\} 1$/m);
  assert.match(text, /^aicr_collections_total\{result="success"\} 1$/m);
  assert.match(text, /^aicr_collector_duration_seconds\{collector="gpu"\} 0\.12$/m);
  assert.match(text, /^aicr_collector_errors_total\{collector="gpu"\} 0$/m);
  assert.match(text, /^aicr_snapshot_last_success_timestamp_seconds 1774089005$/m);
  assert.match(text, /^aicr_http_requests_total\{route="\/v1\/snapshot",code="200"\} 1$/m);
  assert.match(
    text,
    /^aicr_http_requests_total\{route="\/v1\/snapshot\/\{measurement\}",code="404"\} 1$/m,
  );
  assert.match(text, /^aicr_http_requests_total\{route="other",code="404"\} 1$/m);
  assert.match(text, /^aicr_http_request_duration_seconds_count\{route="\/v1\/snapshot"\} 1$/m);
});

Deno.test("createApp() caches authentication and authorization decisions", async () => {
  const { daemon, kube } = setup();
  for (let i = 0; i < 5; i++) {
    await (await daemon.app.request("/v1/snapshot", bearer("token-reader"))).body?.cancel();
    await (await daemon.app.request("/v1/snapshot", bearer("token-other"))).body?.cancel();
  }
  assert.equal(kube.reviews, 2);
  assert.equal(kube.checks.length, 2);
});

Deno.test("createApp() with --insecure-no-auth serves without credentials", async () => {
  const { daemon } = setup({ auth: false });
  const res = await daemon.app.request("/v1/snapshot");
  assert.equal(res.status, 200);
  await res.body?.cancel();
  assert.equal((await daemon.app.request("/metrics")).status, 200);
});

Deno.test("createApp() answers 405 to other methods on known paths and 404 elsewhere", async () => {
  const { daemon } = setup();
  const post = await daemon.app.request("/v1/snapshot", { method: "POST" });
  assert.equal(post.status, 405);
  assert.equal(post.headers.get("allow"), "GET, HEAD");
  await post.body?.cancel();
  const missing = await daemon.app.request("/v2/whatever");
  assert.equal(missing.status, 404);
  assert.equal((await missing.json()).reason, "NotFound");
});

Deno.test("createApp() answers HEAD like GET without a body", async () => {
  const { daemon } = setup();
  const res = await daemon.app.request("/v1/snapshot", {
    method: "HEAD",
    ...bearer("token-reader"),
  });
  assert.equal(res.status, 200);
  assert.match(res.headers.get("etag") ?? "", /^"/);
  assert.equal(await res.text(), "");
});

Deno.test("createApp() hides unexpected errors behind a 500", async () => {
  const { daemon } = setup();
  const auth = createCachingAuthorizer({
    authenticator: { review: () => Promise.reject(new Error("secret internals")) },
    authorizer: { allowed: () => Promise.resolve(true) },
  });
  const broken = createDaemon({
    collect: fakeCollector().collect,
    auth,
    clock: Date.now,
    log: NOOP_LOGGER,
    build: BUILD,
    nodeName: "n",
  });
  const res = await broken.app.request("/v1/snapshot", bearer("x"));
  assert.equal(res.status, 500);
  const body = await res.json();
  assert.doesNotMatch(body.message, /secret/);
  await daemon.close();
});

Deno.test("negotiateFormat() honours quality values", () => {
  assert.equal(negotiateFormat(undefined, "application/yaml;q=0.5, application/json"), "json");
  assert.equal(negotiateFormat(undefined, "application/json;q=0.2, text/yaml;q=0.9"), "yaml");
  assert.equal(negotiateFormat(undefined, "application/json;q=0"), "yaml");
  assert.equal(negotiateFormat(undefined, "*/*"), "yaml");
  assert.throws(() => negotiateFormat("JSON", undefined), /'format' must be/);
});

Deno.test("resolveMeasurementType() matches exactly first, then case-insensitively", () => {
  assert.equal(resolveMeasurementType("NodeTopology"), "NodeTopology");
  assert.equal(resolveMeasurementType("systemd"), "SystemD");
  assert.equal(resolveMeasurementType("k8s"), "K8s");
  assert.equal(resolveMeasurementType("disk"), undefined);
});

Deno.test("createDaemon() answers GET /v1/history with when and which readings changed, behind the snapshot's access", async () => {
  const clock = { now: Date.parse("2026-03-21T10:30:05Z") };
  let current = makeMixedFleet({ "p5-h100": 1 })[0] as Snapshot;
  const daemon = createDaemon({
    collect: () => Promise.resolve({ snapshot: current, reports: OK_REPORTS }),
    auth: createCachingAuthorizer(fakeKubeAuth(), { clock: () => clock.now }),
    clock: () => clock.now,
    log: NOOP_LOGGER,
    build: BUILD,
    nodeName: "p5-h100-1",
    processStats: () => ({
      cpuSeconds: 1.5,
      residentBytes: 104857600,
      openFds: 12,
      maxFds: 1048576,
      startTimeSeconds: 1774085400,
    }),
  }, { maxAgeMs: 60_000, freshMinIntervalMs: 0 });
  await daemon.cache.refresh();
  current = setReading(structuredClone(current), "GPU.smi.driver", "570.124.06");
  clock.now += 600_000;
  await daemon.cache.refresh();
  clock.now += 600_000;
  await daemon.cache.refresh(); // same readings: no entry
  assert.equal((await daemon.app.request("/v1/history")).status, 401);
  const denied = await daemon.app.request("/v1/history", bearer("token-other"));
  assert.equal(denied.status, 403);
  await denied.body?.cancel();
  const res = await daemon.app.request("/v1/history", bearer("token-reader"));
  assert.equal(res.status, 200);
  const body = await res.json();
  assert.deepEqual(body.entries, [
    { at: "2026-03-21T10:30:05Z", initial: true, total: 0, changes: [] },
    {
      at: "2026-03-21T10:40:05Z",
      initial: false,
      total: 1,
      changes: [{
        path: "GPU.smi.driver",
        kind: "modified",
        before: "570.86.15",
        after: "570.124.06",
      }],
    },
  ]);
  const text = await (await daemon.app.request("/metrics", bearer("token-prometheus"))).text();
  assert.match(text, /^aicr_snapshot_last_change_timestamp_seconds 1774089605$/m);
  assert.match(text, /^aicr_snapshot_changes_total 1$/m);
  // One info series, with the facts of the last snapshot.
  assert.equal(text.match(/^aicr_node_info\{/gm)?.length, 1);
  assert.match(
    text,
    /^aicr_node_info\{node="p5-h100-1",driver_version="570\.124\.06",cuda_version="12\.8",gpu_model="NVIDIA H100 80GB HBM3",gpu_count="8",kernel="6\.8\.0-1028-aws",os_release="Ubuntu 24\.04\.1 LTS",kubelet_version="v1\.33\.5-eks-3025e55",container_runtime="containerd:\/\/2\.0\.3"\} 1$/m,
  );
  assert.match(text, /^process_cpu_seconds_total 1\.5$/m);
  assert.match(text, /^process_resident_memory_bytes 104857600$/m);
  assert.match(text, /^process_open_fds 12$/m);
  assert.match(text, /^process_start_time_seconds 1774085400$/m);
  await daemon.close();
});

Deno.test("createDaemon() checks /metrics with its own authorizer (the API server's audience) and the snapshot with the dedicated one", async () => {
  const clock = { now: Date.parse("2026-03-21T10:30:05Z") };
  // The dedicated audience knows only the reader's token; the default one only Prometheus's.
  const only = (token: string) => {
    const kube = fakeKubeAuth();
    const review = kube.authenticator.review;
    kube.authenticator.review = (t, signal) =>
      t === token ? review(t, signal) : Promise.resolve({ authenticated: false });
    return createCachingAuthorizer(kube, { clock: () => clock.now });
  };
  const daemon = createDaemon({
    collect: fakeCollector().collect,
    auth: only("token-reader"),
    metricsAuth: only("token-prometheus"),
    clock: () => clock.now,
    log: NOOP_LOGGER,
    build: BUILD,
    nodeName: "node-1",
  });
  const metrics = await daemon.app.request("/metrics", bearer("token-prometheus"));
  assert.equal(metrics.status, 200);
  await metrics.body?.cancel();
  const snapshotWithPrometheus = await daemon.app.request(
    "/v1/snapshot",
    bearer("token-prometheus"),
  );
  assert.equal(snapshotWithPrometheus.status, 401);
  await snapshotWithPrometheus.body?.cancel();
  const snapshot = await daemon.app.request("/v1/snapshot", bearer("token-reader"));
  assert.equal(snapshot.status, 200);
  await snapshot.body?.cancel();
  await daemon.close();
});
