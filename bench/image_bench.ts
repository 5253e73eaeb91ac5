/**
 * `aicr image` beside the anchors, in one run:
 *
 * 1. Push of the two-platform image to a local registry (Debian's docker-registry, TLS, htpasswd;
 *    a fresh one per push, so everything is uploaded): `aicr image push --binary ...` (compressed
 *    layers cached, as on a second push from the same binary; once also cold, compressing both
 *    binaries first) beside `skopeo copy --all` of the archive `aicr image save` wrote. Wall time
 *    and bytes on the wire both ways, counted by a TCP relay in front of the registry.
 * 2. Image size per platform (compressed, what a node pulls): ours (the pinned Debian base and the
 *    binary) beside the same binary on a distroless-cc-like base and upstream's Go aicr on a
 *    distroless-static-like base (the base of upstream's ko-built aicrd; its agent's base is
 *    NVIDIA's CUDA runtime, whose packages are not reachable here to estimate). The distroless
 *    bases are estimated offline: their Debian packages (bookworm, newest) as layers written by
 *    the same tar and gzip, without man pages, locales and docs beyond copyright files.
 *
 * ```sh
 * deno task bench:image                       # 3 pushes each, upstream arm64 built if go is here
 * deno task bench:image --runs 5 --no-upstream-arm64
 * ```
 *
 * @module
 */
import { spawnSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { mkdir, mkdtemp, rm } from "node:fs/promises";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import process from "node:process";
import { parseArgs } from "node:util";
import { gunzipSync } from "node:zlib";
import { ensureBinary } from "../tests/e2e/binary_harness.ts";
import { skopeo, startRegistry, type TestRegistry } from "../tests/registry/registry.ts";
import { defaultCacheDir } from "../image/mod.ts";
import { fetchPackage, openPackage } from "../image/debian.ts";
import { gzipBytes } from "../image/gzip.ts";
import { concat, type TarEntry, tarStream } from "../image/tar.ts";
import { latestPackages } from "../scripts/pin_base.ts";

const MIB = 1024 * 1024;
const HOME = Deno.env.get("HOME") ?? "/root";

/** Counts bytes relayed to and from a TCP address. */
function relay(target: { hostname: string; port: number }) {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const counts = { up: 0, down: 0 };
  const pipe = async (from: Deno.Conn, to: Deno.Conn, key: "up" | "down") => {
    const buffer = new Uint8Array(1 << 16);
    try {
      while (true) {
        const n = await from.read(buffer);
        if (n === null) break;
        counts[key] += n;
        let at = 0;
        while (at < n) at += await to.write(buffer.subarray(at, n));
      }
    } catch {
      // a side closed
    }
    try {
      to.closeWrite();
    } catch {
      // closed already
    }
  };
  (async () => {
    for await (const conn of listener) {
      const upstream = await Deno.connect(target);
      Promise.all([pipe(conn, upstream, "up"), pipe(upstream, conn, "down")]).finally(() => {
        try {
          conn.close();
        } catch { /* closed */ }
        try {
          upstream.close();
        } catch { /* closed */ }
      });
    }
  })().catch(() => {});
  return { port: (listener.addr as Deno.NetAddr).port, counts, close: () => listener.close() };
}

interface Measured {
  ms: number;
  up: number;
  down: number;
}

async function measure(
  dir: string,
  run: (registry: TestRegistry, host: string) => Promise<void>,
): Promise<Measured> {
  await rm(dir, { recursive: true, force: true });
  await mkdir(dir, { recursive: true });
  const registry = await startRegistry({ dir });
  const [hostname, port] = registry.host.split(":") as [string, string];
  const counter = relay({ hostname, port: Number(port) });
  // The registry's certificate names 127.0.0.1: the relay's address is the same host.
  const host = `127.0.0.1:${counter.port}`;
  const auth = join(dir, "relay-auth.json");
  Deno.writeTextFileSync(
    auth,
    JSON.stringify({
      auths: { [host]: { auth: btoa(`${registry.username}:${registry.password}`) } },
    }),
  );
  try {
    const t0 = performance.now();
    await run({ ...registry, authFile: auth }, host);
    return { ms: performance.now() - t0, up: counter.counts.up, down: counter.counts.down };
  } finally {
    counter.close();
    await registry.stop();
  }
}

function check(out: { code: number; stdout?: string; stderr?: string }, what: string): void {
  if (out.code !== 0) throw new Error(`${what} failed (${out.code}): ${out.stderr ?? ""}`);
}

async function aicr(
  args: string[],
  env: Record<string, string>,
): Promise<{ code: number; stderr: string }> {
  const out = await new Deno.Command(args[0]!, {
    args: args.slice(1),
    env: { HOME, ...env },
    clearEnv: true,
    stdout: "piped",
    stderr: "piped",
  }).output();
  return { code: out.code, stderr: new TextDecoder().decode(out.stderr) };
}

function print(line: string): void {
  process.stdout.write(`${line}\n`);
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)]!;
}

/** A layer made of whole Debian packages (docs trimmed), compressed as aicr compresses. */
async function packagesLayer(arch: string, names: readonly string[]): Promise<number> {
  const cacheDir = defaultCacheDir((n) => Deno.env.get(n));
  const files = new Map<string, { entry: TarEntry; data?: Uint8Array }>();
  for (const pkg of await latestPackages(arch, names)) {
    const opened = await openPackage(await fetchPackage(pkg, { cacheDir }));
    for (const { entry, data } of opened.members) {
      const path = entry.path.replace(/\/$/, "");
      if (/^usr\/share\/(man|info|lintian|locale)\//.test(path)) continue;
      if (/^usr\/share\/doc\//.test(path) && !/\/copyright$/.test(path) && entry.type === "file") {
        continue;
      }
      files.set(path, {
        entry: { ...entry, path, size: entry.type === "file" ? data.length : 0 },
        data,
      });
    }
  }
  const parts: Uint8Array[] = [];
  for await (const chunk of tarStream([...files.keys()].sort().map((p) => files.get(p)!))) {
    parts.push(chunk);
  }
  return (await gzipBytes(concat(parts))).length;
}

const STATIC = ["base-files", "netbase", "tzdata", "ca-certificates", "media-types"];
const CC = [...STATIC, "libc6", "libssl3", "libgcc-s1", "libgomp1", "libstdc++6", "gcc-12-base"];

/** Upstream's Go aicr for arm64, built offline as the upstream bench builds amd64 (cached). */
function upstreamArm64(): string | undefined {
  const src = "/work/upstream/src";
  const out = join(HOME, ".cache", "aicr", "bench", "upstream-aicr-linux-arm64");
  if (existsSync(out)) return out;
  if (!existsSync(src)) return undefined;
  const built = spawnSync("go", ["build", "-mod=vendor", "-o", out, "./cmd/aicr"], {
    cwd: src,
    env: { ...process.env, GOOS: "linux", GOARCH: "arm64", CGO_ENABLED: "0" },
    stdio: "inherit",
  });
  return built.status === 0 ? out : undefined;
}

async function gzSize(path: string): Promise<number> {
  return (await gzipBytes(new Uint8Array(readFileSync(path)))).length;
}

if (import.meta.main) {
  const { values } = parseArgs({
    args: process.argv.slice(2),
    options: {
      runs: { type: "string", default: "3" },
      "no-upstream-arm64": { type: "boolean", default: false },
    },
  });
  const runs = Math.max(1, Number(values.runs) || 3);
  const amd64 = await ensureBinary("amd64");
  const arm64 = await ensureBinary("arm64");
  const work = await mkdtemp(join(tmpdir(), "aicr-image-bench-"));
  try {
    const archive = join(work, "aicr.tar");
    check(
      await aicr([amd64, "image", "save", "--binary", `linux/arm64=${arm64}`, "-o", archive], {}),
      "save",
    );
    const push = (registry: TestRegistry, host: string, env: Record<string, string> = {}) =>
      aicr([
        amd64,
        "image",
        "push",
        `${host}/aicr`,
        "--binary",
        `linux/arm64=${arm64}`,
        "--ca-file",
        registry.caFile,
        "--registry-config",
        registry.authFile,
      ], env).then((out) => check(out, "aicr image push"));
    const copy = (registry: TestRegistry, host: string) =>
      skopeo(registry, [
        "copy",
        "--all",
        "--preserve-digests",
        `oci-archive:${archive}`,
        `docker://${host}/aicr:1`,
      ])
        .then((out) => check(out, "skopeo copy"));
    const ours: Measured[] = [];
    const theirs: Measured[] = [];
    for (let i = 0; i < runs; i++) {
      ours.push(await measure(join(work, "r"), (r, h) => push(r, h)));
      theirs.push(await measure(join(work, "r"), copy));
    }
    const coldCache = join(work, "cold-cache");
    const cold = await measure(
      join(work, "r"),
      (r, h) => push(r, h, { AICR_CACHE_DIR: coldCache }),
    );
    const row = (name: string, m: Measured[]) =>
      `  ${name.padEnd(44)} ${(median(m.map((x) => x.ms)) / 1000).toFixed(2).padStart(6)} s  up ${
        (median(m.map((x) => x.up)) / MIB).toFixed(1).padStart(6)
      } MiB  down ${(median(m.map((x) => x.down)) / MIB).toFixed(2).padStart(5)} MiB`;
    print(
      `push of the linux/amd64 + linux/arm64 image to a fresh local registry (median of ${runs}, load ${
        loadavg()[0]!.toFixed(1)
      })`,
    );
    print(row("aicr image push (layers cached)", ours));
    print(row("skopeo copy --all oci-archive:", theirs));
    print(row("aicr image push, cold (compresses both first)", [cold]));
    print(
      `  ratio aicr/skopeo: time ${
        (median(ours.map((x) => x.ms)) / median(theirs.map((x) => x.ms))).toFixed(2)
      }, bytes up ${(median(ours.map((x) => x.up)) / median(theirs.map((x) => x.up))).toFixed(3)}`,
    );

    // 2. Sizes per platform, from the archive's manifests.
    const { readTar } = await import("../image/tar.ts");
    const members = new Map(
      readTar(new Uint8Array(readFileSync(archive))).map((m) => [m.entry.path, m.data]),
    );
    const blob = (digest: string) => members.get(`blobs/sha256/${digest.slice(7)}`)!;
    const json = (digest: string) => JSON.parse(new TextDecoder().decode(blob(digest)));
    const layout = JSON.parse(new TextDecoder().decode(members.get("index.json")!));
    const index = json(layout.manifests[0].digest);
    const upstreamBins: Record<string, string | undefined> = {
      amd64: existsSync("/work/upstream/aicr") ? "/work/upstream/aicr" : undefined,
      arm64: values["no-upstream-arm64"] ? undefined : upstreamArm64(),
    };
    print("\nimage size per platform (compressed layers, what a node pulls)");
    for (const m of index.manifests as { digest: string; platform: { architecture: string } }[]) {
      const arch = m.platform.architecture;
      const manifest = json(m.digest);
      const [base, binary] = manifest.layers.map((l: { size: number }) => l.size) as [
        number,
        number,
      ];
      const unpacked = manifest.layers.map((l: { digest: string }) =>
        gunzipSync(blob(l.digest)).length
      )
        .reduce((a: number, b: number) => a + b, 0);
      const staticBase = await packagesLayer(arch, STATIC);
      const ccBase = await packagesLayer(arch, CC);
      const upstream = upstreamBins[arch] ? await gzSize(upstreamBins[arch]!) : undefined;
      const total = base + binary;
      print(`  linux/${arch}`);
      print(
        `    aicr (pinned Debian base ${(base / MIB).toFixed(1)} + binary ${
          (binary / MIB).toFixed(1)
        })   ${(total / MIB).toFixed(1)} MiB (unpacked ${(unpacked / MIB).toFixed(1)} MiB)`,
      );
      print(
        `    the same binary on a distroless-cc-like base (est. ${(ccBase / MIB).toFixed(1)})  ${
          ((ccBase + binary) / MIB).toFixed(1)
        } MiB  ratio ours/that ${(total / (ccBase + binary)).toFixed(2)}`,
      );
      print(
        upstream
          ? `    upstream Go aicr on a distroless-static-like base (est. ${
            (staticBase / MIB).toFixed(1)
          } + ${(upstream / MIB).toFixed(1)})  ${
            ((staticBase + upstream) / MIB).toFixed(1)
          } MiB  ratio ours/upstream ${(total / (staticBase + upstream)).toFixed(2)}`
          : `    upstream Go aicr: no ${arch} binary here (distroless-static-like base est. ${
            (staticBase / MIB).toFixed(1)
          } MiB)`,
      );
    }
    print(
      "  (upstream's agent image itself is ko-built on nvcr.io/nvidia/cuda:13.1.0-runtime-ubuntu24.04: not estimated offline)",
    );
  } finally {
    await rm(work, { recursive: true, force: true });
  }
}
