/**
 * Registry credentials as Docker, Podman and the kubelet's pull secrets keep them: a Docker config
 * file (`--registry-config`, else `REGISTRY_AUTH_FILE`, else `$DOCKER_CONFIG/config.json`, else
 * `~/.docker/config.json`) with `auths` entries (`auth` or `username`/`password`, an
 * `identitytoken`, a `registrytoken`) or a credential helper (`credHelpers`, `credsStore`: the
 * `docker-credential-<name> get` program). And the two challenges of the distribution API:
 * `Basic` and `Bearer` (a token from the challenge's realm, asked for with the credentials, or
 * with the identity token as an OAuth2 refresh token).
 *
 * @module
 */
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { UsageError } from "../errors.ts";

/** Credentials for one registry, and where they came from (for messages). */
export interface Credentials {
  username?: string;
  password?: string;
  /** An OAuth2 refresh token (Docker's `identitytoken`). */
  identityToken?: string;
  /** A bearer token to send as is (Docker's `registrytoken`). */
  registryToken?: string;
  /** E.g. `/root/.docker/config.json` or `docker-credential-pass`. */
  source: string;
}

/** Where credentials were looked for: the config file (if any) and what it holds for a host. */
export interface CredentialLookup {
  /** The credentials, if the config has any for the registry. */
  credentials?: Credentials;
  /** The config file read, or undefined when none exists. */
  file?: string;
  /** A sentence for messages: which file was read, and what it had for the registry. */
  describe: string;
}

/** Where the config is looked for. */
export interface CredentialSources {
  /** An explicit file (`--registry-config`): it must exist. */
  configFile?: string;
  /** Environment lookup. */
  env: (name: string) => string | undefined;
}

interface DockerConfig {
  auths?: Record<string, {
    auth?: string;
    username?: string;
    password?: string;
    identitytoken?: string;
    registrytoken?: string;
  }>;
  credHelpers?: Record<string, string>;
  credsStore?: string;
}

/**
 * The Docker config file to read.
 *
 * @param sources explicit file and environment
 * @returns the path and how it was chosen
 */
export function configPath(sources: CredentialSources): { path: string; explicit: boolean } {
  if (sources.configFile) return { path: sources.configFile, explicit: true };
  const authFile = sources.env("REGISTRY_AUTH_FILE");
  if (authFile) return { path: authFile, explicit: true };
  const dir = sources.env("DOCKER_CONFIG");
  if (dir) return { path: join(dir, "config.json"), explicit: false };
  return { path: join(sources.env("HOME") ?? "/root", ".docker", "config.json"), explicit: false };
}

/** The keys an `auths` entry of a registry may be stored under. */
function authKeys(registry: string): string[] {
  const hosts = registry === "docker.io"
    ? ["https://index.docker.io/v1/", "index.docker.io", "docker.io", "registry-1.docker.io"]
    : [registry];
  return hosts.flatMap((h) =>
    h.includes("://")
      ? [h]
      : [h, `https://${h}`, `http://${h}`, `https://${h}/v1/`, `https://${h}/v2/`]
  );
}

function readConfig(path: string, explicit: boolean): DockerConfig | undefined {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (error) {
    if (!explicit && (error as { code?: string }).code === "ENOENT") return undefined;
    throw new UsageError(
      `Cannot read the registry credentials '${path}': ${(error as Error).message}`,
      {
        cause: error,
      },
    );
  }
  try {
    const parsed = JSON.parse(text) as unknown;
    if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) {
      throw new Error("not an object");
    }
    return parsed as DockerConfig;
  } catch (error) {
    throw new UsageError(
      `Cannot read the registry credentials '${path}': it is not a Docker config JSON document (${
        (error as Error).message
      })`,
      { cause: error },
    );
  }
}

function fromEntry(entry: NonNullable<DockerConfig["auths"]>[string], source: string): Credentials {
  const creds: Credentials = { source };
  if (entry.auth) {
    const decoded = atob(entry.auth);
    const colon = decoded.indexOf(":");
    if (colon < 0) {
      throw new UsageError(
        `Cannot use the credentials in '${source}': an 'auth' value is not base64 of 'user:password'`,
      );
    }
    creds.username = decoded.slice(0, colon);
    creds.password = decoded.slice(colon + 1);
  }
  if (entry.username) creds.username = entry.username;
  if (entry.password) creds.password = entry.password;
  if (entry.identitytoken) creds.identityToken = entry.identitytoken;
  if (entry.registrytoken) creds.registryToken = entry.registrytoken;
  return creds;
}

/** Runs `docker-credential-<helper> get` for a registry. */
function runHelper(helper: string, registry: string): Promise<Credentials | undefined> {
  const program = `docker-credential-${helper}`;
  return new Promise((resolve, reject) => {
    const child = spawn(program, ["get"], { stdio: ["pipe", "pipe", "pipe"] });
    let out = "";
    let err = "";
    child.stdout.on("data", (c: Uint8Array) => out += new TextDecoder().decode(c));
    child.stderr.on("data", (c: Uint8Array) => err += new TextDecoder().decode(c));
    child.on(
      "error",
      (error) =>
        reject(
          new UsageError(`Cannot run the credential helper '${program}': ${error.message}`, {
            cause: error,
          }),
        ),
    );
    child.on("close", (code) => {
      if (code !== 0) {
        // Helpers say "credentials not found in native keychain" for a registry they do not hold.
        if (/not found/i.test(out + err)) return resolve(undefined);
        return reject(
          new UsageError(`Cannot get credentials from '${program}': ${(err || out).trim()}`),
        );
      }
      try {
        const { Username, Secret } = JSON.parse(out) as { Username?: string; Secret?: string };
        if (!Secret) return resolve(undefined);
        resolve(
          Username === "<token>"
            ? { identityToken: Secret, source: program }
            : { username: Username ?? "", password: Secret, source: program },
        );
      } catch {
        reject(new UsageError(`Cannot read what '${program}' printed: it is not JSON`));
      }
    });
    child.stdin.end(registry);
  });
}

/**
 * Looks up a registry's credentials.
 *
 * @param registry the reference's registry (`docker.io` for Docker Hub)
 * @param sources explicit file and environment
 * @returns the credentials (if any) and a description of where they were looked for
 * @throws {UsageError} when an explicit file is missing or a config file is not valid
 */
export async function lookupCredentials(
  registry: string,
  sources: CredentialSources,
): Promise<CredentialLookup> {
  const { path, explicit } = configPath(sources);
  const config = readConfig(path, explicit);
  if (!config) return { describe: `no credentials (no Docker config at '${path}')` };
  const helper = config.credHelpers?.[registry] ?? config.credsStore;
  const key = authKeys(registry).find((k) => config.auths?.[k] !== undefined);
  if (key) {
    const entry = config.auths![key]!;
    const hasInline = entry.auth || entry.username || entry.identitytoken || entry.registrytoken;
    if (hasInline) {
      const credentials = fromEntry(entry, path);
      return { credentials, file: path, describe: `the credentials for '${key}' in '${path}'` };
    }
  }
  if (helper) {
    const credentials = await runHelper(helper, registry);
    return credentials
      ? {
        credentials,
        file: path,
        describe: `the credentials of 'docker-credential-${helper}' (named in '${path}')`,
      }
      : {
        file: path,
        describe: `no credentials ('docker-credential-${helper}' has none for '${registry}')`,
      };
  }
  return { file: path, describe: `no credentials (none for '${registry}' in '${path}')` };
}

/** A parsed `WWW-Authenticate` challenge. */
export interface Challenge {
  /** `basic` or `bearer` (lowercase). */
  scheme: string;
  params: Record<string, string>;
}

/**
 * Parses a `WWW-Authenticate` header (the first challenge).
 *
 * @param header the header's value
 * @returns the scheme and parameters, or undefined when there is none
 */
export function parseChallenge(header: string | undefined): Challenge | undefined {
  const match = /^\s*([A-Za-z]+)\s*(.*)$/s.exec(header ?? "");
  if (!match) return undefined;
  const params: Record<string, string> = {};
  const PARAM_REGEXP = /([A-Za-z_]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s,]*))/g;
  for (const p of match[2]!.matchAll(PARAM_REGEXP)) {
    params[p[1]!.toLowerCase()] = p[2] !== undefined ? p[2].replace(/\\(.)/g, "$1") : p[3]!;
  }
  return { scheme: match[1]!.toLowerCase(), params };
}

/**
 * The `Authorization` value of Basic credentials.
 *
 * @param credentials username and password
 * @returns `Basic <base64>`
 */
export function basicAuthorization(credentials: Credentials): string {
  const bytes = new TextEncoder().encode(
    `${credentials.username ?? ""}:${credentials.password ?? ""}`,
  );
  let binary = "";
  for (const b of bytes) binary += String.fromCharCode(b);
  return `Basic ${btoa(binary)}`;
}
