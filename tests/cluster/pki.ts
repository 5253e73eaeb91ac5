/**
 * Throwaway PKI for the test cluster, made with the `openssl` CLI (EC P-256 keys: fast to make).
 *
 * @module
 */

import { join } from "node:path";

/** Paths of a certificate and its key. */
export interface CertFiles {
  /** PEM certificate. */
  cert: string;
  /** PEM private key. */
  key: string;
}

/** What a leaf certificate says about its holder and where it may be used. */
export interface CertRequest {
  /** Subject common name: the user name for client certificates. */
  cn: string;
  /** Subject organizations: the groups for client certificates. */
  orgs?: readonly string[];
  /** DNS subject alternative names (serving certificates). */
  dns?: readonly string[];
  /** IP subject alternative names (serving certificates). */
  ips?: readonly string[];
  /** "client", "server" or "both" extended key usage. */
  usage: "client" | "server" | "both";
}

/**
 * Runs openssl with the given arguments.
 *
 * @param args openssl arguments
 * @param options.cwd working folder
 * @throws {Error} when openssl exits non-zero, with its stderr
 */
async function openssl(args: string[], options: { cwd?: string } = {}): Promise<void> {
  const out = await new Deno.Command("openssl", {
    args,
    stdout: "null",
    stderr: "piped",
    ...(options.cwd ? { cwd: options.cwd } : {}),
  }).output();
  if (!out.success) {
    throw new Error(
      `Cannot run "openssl ${args[0]}": ${new TextDecoder().decode(out.stderr).trim()}`,
    );
  }
}

/**
 * Builds the `-subj` string of a certificate request, escaping the characters openssl treats specially.
 *
 * @param cn common name
 * @param orgs organizations
 * @returns the subject string
 */
function subject(cn: string, orgs: readonly string[] = []): string {
  const esc = (s: string): string => s.replace(/[/,+=\\]/g, (c) => `\\${c}`);
  return orgs.map((o) => `/O=${esc(o)}`).join("") + `/CN=${esc(cn)}`;
}

/**
 * Creates a self-signed CA (10 years is fine: it dies with the state folder).
 *
 * @param dir folder to write `<name>.crt` and `<name>.key` into
 * @param name file base name and CN
 * @returns the CA's files
 * @throws {Error} when openssl fails
 */
export async function createCa(dir: string, name: string): Promise<CertFiles> {
  const files = { cert: join(dir, `${name}.crt`), key: join(dir, `${name}.key`) };
  await openssl([
    "req",
    "-x509",
    "-newkey",
    "ec",
    "-pkeyopt",
    "ec_paramgen_curve:P-256",
    "-nodes",
    "-keyout",
    files.key,
    "-out",
    files.cert,
    "-days",
    "3650",
    "-subj",
    subject(name),
    "-addext",
    "basicConstraints=critical,CA:TRUE",
    "-addext",
    "keyUsage=critical,keyCertSign,cRLSign,digitalSignature",
  ]);
  return files;
}

/**
 * Creates a leaf certificate signed by `ca` in one openssl call.
 *
 * @param dir folder to write `<name>.crt` and `<name>.key` into
 * @param name file base name
 * @param ca the signing CA
 * @param req subject, SANs and usage
 * @returns the leaf's files
 * @throws {Error} when openssl fails
 */
export async function createCert(
  dir: string,
  name: string,
  ca: CertFiles,
  req: CertRequest,
): Promise<CertFiles> {
  const files = { cert: join(dir, `${name}.crt`), key: join(dir, `${name}.key`) };
  const sans = [
    ...(req.dns ?? []).map((d) => `DNS:${d}`),
    ...(req.ips ?? []).map((ip) => `IP:${ip}`),
  ];
  const eku = { client: "clientAuth", server: "serverAuth", both: "serverAuth,clientAuth" }[
    req.usage
  ];
  await openssl([
    "req",
    "-x509",
    "-newkey",
    "ec",
    "-pkeyopt",
    "ec_paramgen_curve:P-256",
    "-nodes",
    "-keyout",
    files.key,
    "-out",
    files.cert,
    "-CA",
    ca.cert,
    "-CAkey",
    ca.key,
    "-days",
    "3650",
    "-subj",
    subject(req.cn, req.orgs),
    "-addext",
    "basicConstraints=critical,CA:FALSE",
    "-addext",
    "keyUsage=critical,digitalSignature,keyEncipherment",
    "-addext",
    `extendedKeyUsage=${eku}`,
    ...(sans.length ? ["-addext", `subjectAltName=${sans.join(",")}`] : []),
  ]);
  return files;
}

/**
 * Creates the ServiceAccount token signing key pair (`sa.key`, `sa.pub`).
 *
 * @param dir folder to write into
 * @returns the private and public key paths
 * @throws {Error} when openssl fails
 */
export async function createServiceAccountKeys(
  dir: string,
): Promise<{ key: string; pub: string }> {
  const key = join(dir, "sa.key");
  const pub = join(dir, "sa.pub");
  await openssl([
    "genpkey",
    "-algorithm",
    "EC",
    "-pkeyopt",
    "ec_paramgen_curve:P-256",
    "-out",
    key,
  ]);
  await openssl(["pkey", "-in", key, "-pubout", "-out", pub]);
  return { key, pub };
}
