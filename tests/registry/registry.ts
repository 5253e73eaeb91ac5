/**
 * A real OCI registry for tests: Debian's `docker-registry` (distribution 2.8) serving TLS with a
 * certificate from a test CA and htpasswd (bcrypt) credentials, its storage in a state folder.
 * It listens on 127.0.0.1 by default, or inside a network namespace (the real-kubelet lane's) when
 * given a command prefix and an address there. `.ci/run` installs `docker-registry`, `skopeo` (the
 * independent client the tests check with) and `apache2-utils` (`htpasswd`).
 *
 * ```ts ignore
 * await using registry = await startRegistry({ dir });
 * await aicr(["image", "push", `${registry.host}/aicr`, "--ca-file", registry.caFile,
 *   "--registry-config", registry.authFile]);
 * ```
 *
 * @module
 */
import { existsSync } from "node:fs";
import { mkdir, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { type CertFiles, createCa, createCert } from "../cluster/pki.ts";

/** The programs the registry tests need, each with its Debian package. */
export const REGISTRY_TOOLS: Readonly<Record<string, string>> = {
  "/usr/bin/docker-registry": "docker-registry",
  "/usr/bin/skopeo": "skopeo",
  "/usr/bin/htpasswd": "apache2-utils",
  "/usr/bin/openssl": "openssl",
};

/**
 * What is missing to run a registry here.
 *
 * @returns one line naming the missing programs and packages, or undefined
 */
export function registryUnavailable(): string | undefined {
  const missing = Object.entries(REGISTRY_TOOLS).filter(([path]) => !existsSync(path));
  if (missing.length === 0) return undefined;
  return `the registry tests need ${missing.map(([p]) => p).join(", ")} (Debian: apt-get install ${
    [...new Set(missing.map(([, pkg]) => pkg))].join(" ")
  }; .ci/run installs them)`;
}

/** Options of {@link startRegistry}. */
export interface RegistryOptions {
  /** State folder (certificates, htpasswd, storage, log). */
  dir: string;
  /** Address to listen on. @default "127.0.0.1" */
  address?: string;
  /** Port. @default a free one */
  port?: number;
  /** A command prefix that runs the registry elsewhere (e.g. `nsenter --net=...`). */
  prefix?: string[];
  /** The CA to sign its certificate with. @default a new one in `dir` */
  ca?: CertFiles;
  /** The user it accepts. @default "aicr" */
  username?: string;
  /** Its password. @default random */
  password?: string;
}

/** A running registry. */
export interface TestRegistry extends AsyncDisposable {
  /** `address:port`: the registry part of a reference. */
  host: string;
  /** The CA that signed its certificate (PEM). */
  caFile: string;
  /** A folder holding the CA as `ca.crt` (skopeo's `--cert-dir`). */
  certDir: string;
  username: string;
  password: string;
  /** A Docker config with the credentials (what `--registry-config` and skopeo's `--authfile` read). */
  authFile: string;
  /** The same with a wrong password. */
  wrongAuthFile: string;
  /** Its log. */
  log: string;
  stop(): Promise<void>;
}

async function run(argv: string[]): Promise<string> {
  const out = await new Deno.Command(argv[0]!, {
    args: argv.slice(1),
    stdout: "piped",
    stderr: "piped",
  })
    .output();
  if (!out.success) {
    throw new Error(`Cannot run ${argv.join(" ")}: ${new TextDecoder().decode(out.stderr).trim()}`);
  }
  return new TextDecoder().decode(out.stdout);
}

function freePort(): number {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const { port } = listener.addr as Deno.NetAddr;
  listener.close();
  return port;
}

function authConfig(host: string, username: string, password: string): string {
  return JSON.stringify({ auths: { [host]: { auth: btoa(`${username}:${password}`) } } }, null, 2);
}

/** A registry's files, written and not yet started ({@link prepareRegistry}). */
export interface PreparedRegistry extends Omit<TestRegistry, "stop" | typeof Symbol.asyncDispose> {
  /** The registry's configuration file. */
  config: string;
  /** The command that serves it (without the prefix). */
  argv: string[];
}

/**
 * Writes a registry's certificate, htpasswd, configuration and Docker configs.
 *
 * @param options state folder, address, CA, credentials
 * @returns the files and the command that serves it
 * @throws {Error} when a tool is missing or openssl/htpasswd fail
 */
export async function prepareRegistry(options: RegistryOptions): Promise<PreparedRegistry> {
  const missing = registryUnavailable();
  if (missing) throw new Error(`Cannot start a registry: ${missing}`);
  const { dir, address = "127.0.0.1", username = "aicr" } = options;
  const password = options.password ?? crypto.randomUUID();
  const port = options.port ?? freePort();
  const host = `${address}:${port}`;
  await mkdir(join(dir, "data"), { recursive: true });
  await mkdir(join(dir, "certs"), { recursive: true });
  const ca = options.ca ?? await createCa(dir, "registry-ca");
  const serving = await createCert(dir, "registry", ca, {
    cn: "aicr-test-registry",
    ips: [address],
    dns: ["localhost"],
    usage: "server",
  });
  await writeFile(join(dir, "certs", "ca.crt"), await readFile(ca.cert));
  const htpasswd = (await run(["/usr/bin/htpasswd", "-Bbn", username, password])).trim();
  await writeFile(join(dir, "htpasswd"), htpasswd + "\n");
  const config = join(dir, "config.yml");
  await writeFile(
    config,
    [
      "version: 0.1",
      "log:",
      "  level: info",
      "storage:",
      "  filesystem:",
      `    rootdirectory: ${join(dir, "data")}`,
      "  delete:",
      "    enabled: true",
      "http:",
      `  addr: ${host}`,
      `  secret: ${crypto.randomUUID()}`,
      "  tls:",
      `    certificate: ${serving.cert}`,
      `    key: ${serving.key}`,
      "auth:",
      "  htpasswd:",
      "    realm: aicr-test-registry",
      `    path: ${join(dir, "htpasswd")}`,
      "",
    ].join("\n"),
  );
  const authFile = join(dir, "auth.json");
  await writeFile(authFile, authConfig(host, username, password));
  const wrongAuthFile = join(dir, "wrong-auth.json");
  await writeFile(wrongAuthFile, authConfig(host, username, `${password}-wrong`));
  return {
    host,
    caFile: ca.cert,
    certDir: join(dir, "certs"),
    username,
    password,
    authFile,
    wrongAuthFile,
    log: join(dir, "registry.log"),
    config,
    argv: ["/usr/bin/docker-registry", "serve", config],
  };
}

/**
 * Starts a registry and waits until it answers `/v2/` (401 without credentials).
 *
 * @param options state folder, address, prefix, CA, credentials
 * @returns the running registry
 * @throws {Error} when a tool is missing or it does not come up in 20 s (with its log)
 */
export async function startRegistry(options: RegistryOptions): Promise<TestRegistry> {
  const prepared = await prepareRegistry(options);
  const prefix = options.prefix ?? [];
  const logFile = await Deno.open(prepared.log, { write: true, create: true, truncate: true });
  const argv = [...prefix, ...prepared.argv];
  const child = new Deno.Command(argv[0]!, {
    args: argv.slice(1),
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const pump = Promise.all([
    child.stdout.pipeTo(logFile.writable, { preventClose: true }),
    child.stderr.pipeTo((await Deno.open(prepared.log, { append: true })).writable),
  ]).catch(() => {});
  let stopped = false;
  const stop = async () => {
    if (stopped) return;
    stopped = true;
    try {
      child.kill("SIGTERM");
    } catch {
      // already gone
    }
    await child.status;
    await pump;
    try {
      logFile.close();
    } catch {
      // closed with the pipe
    }
  };
  const { config: _config, argv: _argv, ...info } = prepared;
  const registry: TestRegistry = { ...info, stop, [Symbol.asyncDispose]: stop };
  try {
    await waitReady(registry, prefix);
  } catch (error) {
    await stop();
    throw new Error(
      `${(error as Error).message}; its log:\n${
        (await readFile(prepared.log, "utf8")).slice(-2000)
      }`,
    );
  }
  return registry;
}

/**
 * Waits until the registry's TLS port answers with a certificate its CA verifies.
 *
 * @param registry its host and CA
 * @param prefix the command prefix it runs under (a netns)
 * @throws {Error} after 20 s
 */
export async function waitReady(
  registry: Pick<TestRegistry, "host" | "caFile">,
  prefix: string[],
): Promise<void> {
  const deadline = Date.now() + 20_000;
  while (Date.now() < deadline) {
    const argv = [
      ...prefix,
      "/usr/bin/openssl",
      "s_client",
      "-connect",
      registry.host,
      "-CAfile",
      registry.caFile,
      "-verify_return_error",
    ];
    const out = await new Deno.Command(argv[0]!, {
      args: argv.slice(1),
      stdin: "null",
      stdout: "null",
      stderr: "null",
    }).output();
    if (out.success) return;
    await new Promise((done) => setTimeout(done, 200));
  }
  throw new Error(`Cannot reach the test registry at ${registry.host} within 20 s`);
}

/**
 * Runs skopeo against the registry (credentials and CA given), e.g. `inspect --raw docker://...`.
 *
 * @param registry the registry
 * @param args skopeo's arguments after the subcommand's TLS and credential flags are added
 * @param options a command prefix (the netns)
 * @returns exit status and output
 */
export async function skopeo(
  registry: Pick<TestRegistry, "certDir" | "authFile">,
  args: string[],
  options: { prefix?: string[] } = {},
): Promise<{ code: number; stdout: string; stderr: string }> {
  const [sub, ...rest] = args;
  const withCreds = sub === "copy"
    ? ["--dest-cert-dir", registry.certDir, "--dest-authfile", registry.authFile]
    : ["--cert-dir", registry.certDir, "--authfile", registry.authFile];
  const argv = [...(options.prefix ?? []), "/usr/bin/skopeo", sub!, ...withCreds, ...rest];
  const out = await new Deno.Command(argv[0]!, {
    args: argv.slice(1),
    stdout: "piped",
    stderr: "piped",
    env: { HOME: "/nonexistent", PATH: "/usr/bin:/bin" },
    clearEnv: true,
  }).output();
  return {
    code: out.code,
    stdout: new TextDecoder().decode(out.stdout),
    stderr: new TextDecoder().decode(out.stderr),
  };
}
