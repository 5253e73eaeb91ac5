/**
 * Smoke test of the single file: `dist/aicr` (or `$AICR_BIN`) is copied alone into an empty
 * directory and run there with an EMPTY environment (no PATH, no HOME, no node_modules anywhere
 * near it): as this user, as uid/gid 65534, from a read-only bind mount and without a network.
 * The binary is built by `scripts/build.ts` first when it is missing or older than the sources.
 *
 * Verbs needed: `version`, `--version`, `agent` (local mode: Snapshot YAML on stdout),
 * `snapshot --add-roles-to-service-account` (renders RBAC, no cluster) and `daemon`
 * (`--insecure-http --insecure-no-auth` on loopback). A verb that is missing fails its test. The isolation cases need root, `setpriv`, `unshare` and `mount`; without them
 * they are ignored and say so.
 */
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { readdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import {
  assertQuiet,
  canIsolate,
  describeRun,
  ensureBinary,
  freePort,
  isolatedCopy,
  NOBODY,
  PACKAGE_VERSION,
  runAicr,
  spawnAicr,
} from "./binary_harness.ts";
import type { IsolatedCopy, Ran, RunOptions } from "./binary_harness.ts";

const ISOLATE = canIsolate();
const NEEDS_ROOT = ISOLATE ? "" : " (ignored: needs root with setpriv, unshare and mount)";
const BACKEND_REGEXP = /^backend: (node-sea|deno-compile)$/m;
const RBAC_DIR_REGEXP = /^snapshot-rbac-\d{8}-\d{6}-[0-9a-f]{16}$/;

function assertOk(ran: Ran): void {
  assert.equal(ran.code, 0, describeRun(ran));
}

function assertVersion(ran: Ran): void {
  assertOk(ran);
  const lines = ran.stdout.split("\n");
  assert.equal(lines[0], `aicr ${PACKAGE_VERSION}`, describeRun(ran));
  assert.doesNotMatch(lines[0] ?? "", /^aicr v/, "the version has no leading v");
  assert.match(ran.stdout, BACKEND_REGEXP, describeRun(ran));
  assert.match(ran.stdout, /^commit: \S+$/m, describeRun(ran));
  assert.match(ran.stdout, /^runtime: (node|deno) \d+\.\d+\.\d+/m, describeRun(ran));
  assert.match(ran.stdout, /^platform: linux\/amd64$/m, describeRun(ran));
}

function assertSnapshot(ran: Ran): void {
  assertOk(ran);
  assert.match(ran.stdout, /^kind: Snapshot$/m, describeRun(ran));
  assert.match(ran.stdout, /^apiVersion: aicr\.run\/v1$/m, describeRun(ran));
  assert.match(
    ran.stdout,
    new RegExp(`^  version: "?${PACKAGE_VERSION}"?$`, "m"),
    describeRun(ran),
  );
  assert.match(ran.stdout, /^measurements:$/m, describeRun(ran));
}

async function assertRbacRendered(ran: Ran, dir: string): Promise<void> {
  assertOk(ran);
  const made = (await readdir(dir)).filter((name) => name.startsWith("snapshot-rbac-"));
  assert.equal(
    made.length,
    1,
    `one snapshot-rbac-<runID>/ in ${dir}: ${made}\n${describeRun(ran)}`,
  );
  assert.match(made[0]!, RBAC_DIR_REGEXP);
  const files = (await readdir(join(dir, made[0]!))).sort();
  assert.equal(files.length, 4, `four files in ${made[0]}: ${files}`);
  for (const file of files) assert.match(file, /\.ya?ml$/);
}

const bin = await ensureBinary();

Deno.test("binary: `aicr version` prints the package version without a leading v, the backend, the commit and the runtime, alone in an empty directory with an empty environment", async () => {
  await using box = await isolatedCopy(bin);
  assertVersion(await runAicr(box.bin, ["version"], { cwd: box.dir }));
  const json = await runAicr(box.bin, ["version", "--format", "json"], { cwd: box.dir });
  assertOk(json);
  const info = JSON.parse(json.stdout) as Record<string, string>;
  assert.equal(info.version, PACKAGE_VERSION);
  assert.match(info.backend ?? "", /^(node-sea|deno-compile)$/);
});

Deno.test("binary: `aicr --version` prints only the version", async () => {
  await using box = await isolatedCopy(bin);
  const ran = await runAicr(box.bin, ["--version"], { cwd: box.dir });
  assertOk(ran);
  assert.equal(ran.stdout, `${PACKAGE_VERSION}\n`, describeRun(ran));
});

Deno.test("binary: the version lines the loader answers without the CLI are the CLI's own bytes", async () => {
  await using box = await isolatedCopy(bin);
  // `--debug` before the verb is not a form the loader answers: the CLI prints these.
  for (const argv of [["version"], ["version", "-t", "json"], ["version", "--format=text"]]) {
    const fast = await runAicr(box.bin, argv, { cwd: box.dir });
    const full = await runAicr(box.bin, ["--debug", ...argv], { cwd: box.dir });
    assertOk(fast);
    assertOk(full);
    assert.equal(fast.stdout, full.stdout, argv.join(" "));
    assert.equal(fast.stderr, "", describeRun(fast));
  }
  // A form it leaves alone still reaches the CLI.
  const refused = await runAicr(box.bin, ["version", "-t", "yaml"], { cwd: box.dir });
  assert.equal(refused.code, 2, describeRun(refused));
  assert.match(refused.stderr, /'--format' must be 'text' or 'json'/);
});

Deno.test("binary: `aicr agent` prints a Snapshot of this host (apiVersion aicr.run/v1) on stdout with an empty environment", async () => {
  await using box = await isolatedCopy(bin);
  assertSnapshot(await runAicr(box.bin, ["agent"], { cwd: box.dir }));
});

Deno.test("binary: `aicr snapshot --add-roles-to-service-account x` writes snapshot-rbac-<runID>/ with four files and contacts no cluster", async () => {
  await using box = await isolatedCopy(bin);
  const ran = await runAicr(box.bin, ["snapshot", "--add-roles-to-service-account", "x"], {
    cwd: box.writable,
  });
  await assertRbacRendered(ran, box.writable);
});

Deno.test("binary: a kubeconfig with an exec credential plugin loads @kubernetes/client-node (a lazy chunk in a Node single executable), runs the plugin, then says the API server cannot be reached", async () => {
  await using box = await isolatedCopy(bin);
  const marker = join(box.writable, "plugin-ran");
  const plugin = join(box.writable, "credential.sh");
  await writeFile(
    plugin,
    `#!/bin/sh\n: > '${marker}'\necho '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"t"}}'\n`,
    { mode: 0o755 },
  );
  const kubeconfig = join(box.writable, "kubeconfig");
  await writeFile(
    kubeconfig,
    [
      "apiVersion: v1",
      "kind: Config",
      "clusters:",
      `- {name: c, cluster: {server: "https://127.0.0.1:${freePort()}"}}`,
      "users:",
      "- name: u",
      "  user:",
      "    exec: {apiVersion: client.authentication.k8s.io/v1, command: " + plugin +
      ", interactiveMode: Never}",
      "contexts:",
      "- {name: x, context: {cluster: c, user: u, namespace: default}}",
      "current-context: x",
      "",
    ].join("\n"),
  );
  const ran = await runAicr(box.bin, ["snapshot", "--kubeconfig", kubeconfig], {
    cwd: box.writable,
  });
  assert.equal(ran.code, 6, describeRun(ran));
  assert.match(ran.stderr, /Cannot reach Kubernetes API server 'https:\/\/127\.0\.0\.1:/);
  assert.ok(existsSync(marker), `the exec plugin ran: ${describeRun(ran)}`);
  // Reaching for the API server is the bundle's import("node:https"), which Node answered with
  // an ExperimentalWarning on stderr before the build turned those off.
  assertQuiet(ran.stderr, "the CLI's stderr");
});

Deno.test("binary: `aicr daemon` serves /healthz, /readyz and /v1/snapshot with an empty environment and stops cleanly on SIGTERM", async () => {
  await using box = await isolatedCopy(bin);
  const port = freePort();
  const child = spawnAicr(box.bin, [
    "daemon",
    "--insecure-http",
    "--insecure-no-auth",
    "--listen",
    "127.0.0.1",
    "--port",
    String(port),
    "--node-name",
    "smoke",
  ], box.dir);
  const stderr = new Response(child.stderr).text();
  const base = `http://127.0.0.1:${port}`;
  try {
    let ready = 0;
    for (let i = 0; i < 100 && ready !== 200; i++) {
      ready = await fetch(`${base}/readyz`).then(
        async (r) => (await r.body?.cancel(), r.status),
        () => 0,
      );
      if (ready !== 200) await new Promise((resolve) => setTimeout(resolve, 200));
    }
    assert.equal(ready, 200, "/readyz turns 200 after the first collection");
    const health = await fetch(`${base}/healthz`);
    assert.equal(health.status, 200);
    await health.body?.cancel();
    const snapshot = await fetch(`${base}/v1/snapshot`);
    assert.equal(snapshot.status, 200);
    const text = await snapshot.text();
    assert.match(text, /^apiVersion: aicr\.run\/v1$/m);
    assert.match(text, /^ {2}source-node: smoke$/m);
  } finally {
    child.kill("SIGTERM");
  }
  const status = await child.status;
  const log = await stderr;
  assert.equal(status.code, 0, `exit ${status.code} signal ${status.signal}\n${log}`);
  assert.match(log, /daemon stopped/);
});

/** The three verbs, each a step, under one isolation. */
async function verbsUnder(t: Deno.TestContext, box: IsolatedCopy, as: RunOptions): Promise<void> {
  await t.step("aicr version", async () => {
    assertVersion(await runAicr(box.bin, ["version"], as));
  });
  await t.step("aicr agent", async () => {
    assertSnapshot(await runAicr(box.bin, ["agent"], as));
  });
  await t.step("aicr snapshot --add-roles-to-service-account x", async () => {
    const ran = await runAicr(box.bin, ["snapshot", "--add-roles-to-service-account", "x"], {
      ...as,
      cwd: box.writable,
    });
    await assertRbacRendered(ran, box.writable);
    for (const name of await readdir(box.writable)) {
      await Deno.remove(join(box.writable, name), { recursive: true });
    }
  });
}

Deno.test({
  name: `binary: runs as uid/gid ${NOBODY} with no home and no network${NEEDS_ROOT}`,
  ignore: !ISOLATE,
  async fn(t) {
    await using box = await isolatedCopy(bin);
    await verbsUnder(t, box, { cwd: box.dir, user: "nobody", noNetwork: true });
  },
});

for (const user of ["root", "nobody"] as const) {
  Deno.test({
    name: `binary: runs from a read-only filesystem with no network as ${
      user === "root" ? "root" : `uid/gid ${NOBODY}`
    }${NEEDS_ROOT}`,
    ignore: !ISOLATE,
    async fn(t) {
      await using box = await isolatedCopy(bin);
      const as: RunOptions = { cwd: box.dir, user, readOnly: box.dir, noNetwork: true };
      const touch = await runAicr("/usr/bin/touch", [join(box.dir, "probe")], as);
      assert.notEqual(touch.code, 0, `the binary's directory is read-only: ${describeRun(touch)}`);
      await verbsUnder(t, box, as);
    },
  });
}
