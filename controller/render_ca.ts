/**
 * Where `aicr daemonset render`'s CA comes from, so a re-render does not rotate it:
 * - `--ca-secret <file>`: the CA Secret of an earlier render (`-o` file, or `kubectl get secret
 *   <name>-signer -o yaml`): the same Secret and CA ConfigMap come out again;
 * - `--existing-ca <file>`: only the CA's certificate (PEM, or the `<name>-ca` ConfigMap): no
 *   Secret is rendered, the key stays where it is (an earlier install, sealed-secrets,
 *   external-secrets, `kubectl create secret tls`);
 * - neither: a new CA (the key then is in the output: keep it private).
 *
 * Each is checked before anything is written: a certificate that is no CA, a key of another
 * type than P-256 (the signers sign with ECDSA P-256) or a key that does not belong to the
 * certificate is refused with the file and the fix named.
 *
 * @module
 */
import { Buffer } from "node:buffer";
import { createPrivateKey, X509Certificate } from "node:crypto";
import { parseAllDocuments } from "yaml";
import { UsageError } from "../errors.ts";
import type { OptionNamer } from "../errors.ts";
import { daemonCaConfigMapName, daemonSignerSecretName } from "../manifests/mod.ts";
import type { DaemonCa } from "../x509.ts";

/** The options a CA file comes from (named as flags by the CLI). */
type CaOption = "caSecret" | "existingCa";

/** The CA a render uses: a full pair, or only the certificate of a CA kept elsewhere. */
export type RenderCa = DaemonCa | { caCert: string; caKey?: undefined };

interface Manifest {
  kind?: string;
  type?: string;
  metadata?: { name?: string };
  data?: Record<string, string>;
}

/** Every document of a YAML or JSON text (a `List`'s items too). */
function manifestsOf(text: string, path: string, flag: CaOption): Manifest[] {
  let docs: unknown[];
  try {
    docs = parseAllDocuments(text).flatMap((doc) => {
      if (doc.errors.length > 0) throw doc.errors[0];
      return [doc.toJS() as unknown];
    });
  } catch (error) {
    const why = error instanceof Error ? error.message.split("\n")[0] : String(error);
    throw new UsageError((o) => `Cannot read '${o(flag)}' file '${path}' as YAML or JSON: ${why}`);
  }
  return docs.flatMap((doc) => {
    const m = doc as Manifest & { items?: Manifest[] };
    if (m && m.kind === "List" && Array.isArray(m.items)) return m.items;
    return m && typeof m === "object" ? [m] : [];
  });
}

function decode(value: string | undefined): string {
  return value === undefined ? "" : Buffer.from(value, "base64").toString("utf8");
}

/**
 * Checks a CA: a CA certificate with a P-256 key, and the key (when given) its own.
 *
 * @param ca the certificate and maybe the key
 * @param source the option and file, for the message
 * @throws {UsageError} naming what is wrong
 */
export function checkRenderCa(ca: RenderCa, source: { flag: CaOption; path: string }): void {
  const where = (o: OptionNamer) => `'${o(source.flag)}' file '${source.path}'`;
  let cert: X509Certificate;
  try {
    cert = new X509Certificate(ca.caCert);
  } catch {
    throw new UsageError((o) => `Cannot use ${where(o)} as it holds no PEM certificate`);
  }
  if (!cert.ca) {
    const subject = cert.subject;
    throw new UsageError((o) =>
      `Cannot use ${
        where(o)
      } as its certificate is not a CA (basicConstraints CA:TRUE): '${subject}'`
    );
  }
  const details = cert.publicKey.asymmetricKeyDetails;
  if (cert.publicKey.asymmetricKeyType !== "ec" || details?.namedCurve !== "prime256v1") {
    const current = `${cert.publicKey.asymmetricKeyType} ${
      details?.namedCurve ?? details?.modulusLength ?? ""
    }`.trimEnd();
    throw new UsageError((o) =>
      `Cannot use ${
        where(o)
      } as the CA's key must be ECDSA P-256 (the daemons' certificates are signed with it): current key is ${current}`
    );
  }
  if (ca.caKey === undefined) return;
  let matches = false;
  try {
    matches = cert.checkPrivateKey(createPrivateKey(ca.caKey));
  } catch {
    throw new UsageError((o) => `Cannot use ${where(o)} as its 'tls.key' is not a PEM private key`);
  }
  if (!matches) {
    throw new UsageError((o) =>
      `Cannot use ${where(o)} as its 'tls.key' does not belong to its 'tls.crt'`
    );
  }
}

/**
 * Reads the CA Secret out of a file (one Secret, or a whole earlier render: then the daemon's
 * `<name>-signer`), for `--ca-secret`.
 *
 * @param text the file's text
 * @param options the file's path and the daemon's name
 * @returns the checked CA pair
 * @throws {UsageError} when no such Secret is there or the CA is not usable
 */
export function caFromSecretFile(
  text: string,
  options: { path: string; name: string },
): DaemonCa {
  const flag = "caSecret";
  const secrets = manifestsOf(text, options.path, flag).filter((m) => m.kind === "Secret");
  const wanted = daemonSignerSecretName(options.name);
  const secret = secrets.find((s) => s.metadata?.name === wanted) ??
    (secrets.length === 1 ? secrets[0] : undefined);
  if (!secret) {
    const found = secrets.length === 0
      ? "no Secret"
      : secrets.map((s) => `'${s.metadata?.name ?? "?"}'`).join(", ");
    throw new UsageError(
      (o) =>
        `Cannot use '${
          o(flag)
        }' file '${options.path}' as it holds no Secret '${wanted}' (found ${found})`,
      {
        details: [
          `  pass an earlier render's output, or: kubectl get secret ${wanted} -o yaml > ca-secret.yaml`,
        ],
      },
    );
  }
  const ca = { caCert: decode(secret.data?.["tls.crt"]), caKey: decode(secret.data?.["tls.key"]) };
  if (!ca.caCert || !ca.caKey) {
    const secretName = secret.metadata?.name ?? "?";
    throw new UsageError((o) =>
      `Cannot use '${
        o(flag)
      }' file '${options.path}' as Secret '${secretName}' lacks 'tls.crt' or 'tls.key' under data`
    );
  }
  checkRenderCa(ca, { flag, path: options.path });
  return ca;
}

/**
 * Reads the CA's certificate for `--existing-ca`: a PEM file, or a ConfigMap (`ca.crt`) or
 * Secret (`tls.crt`) manifest. A file holding a private key is refused: the point of the flag is
 * that the key stays out of the output.
 *
 * @param text the file's text
 * @param options the file's path and the daemon's name
 * @returns the checked certificate
 * @throws {UsageError} when no certificate is there, or a key is
 */
export function caCertificateFromFile(
  text: string,
  options: { path: string; name: string },
): { caCert: string } {
  const flag = "existingCa";
  let caCert: string | undefined;
  if (text.trimStart().startsWith("-----BEGIN ")) {
    if (/-----BEGIN [A-Z ]*PRIVATE KEY-----/.test(text)) {
      throw new UsageError((o) =>
        `Cannot use '${
          o(flag)
        }' file '${options.path}' as it holds a private key: give the CA's certificate only (or pass the Secret with ${
          o("caSecret")
        })`
      );
    }
    caCert = text;
  } else {
    const docs = manifestsOf(text, options.path, flag);
    const configMap = docs.find((m) =>
      m.kind === "ConfigMap" && m.metadata?.name === daemonCaConfigMapName(options.name)
    ) ?? docs.find((m) =>
      m.kind === "ConfigMap" && m.data?.["ca.crt"]
    );
    const secret = docs.find((m) => m.kind === "Secret" && m.data?.["tls.crt"]);
    caCert = configMap?.data?.["ca.crt"] ?? (secret ? decode(secret.data?.["tls.crt"]) : undefined);
  }
  if (!caCert) {
    throw new UsageError(
      (o) =>
        `Cannot use '${
          o(flag)
        }' file '${options.path}' as it holds no CA certificate (PEM, ConfigMap 'ca.crt' or Secret 'tls.crt')`,
      {
        details: [
          `  kubectl get configmap ${
            daemonCaConfigMapName(options.name)
          } -o jsonpath='{.data.ca\\.crt}' > ca.crt`,
        ],
      },
    );
  }
  checkRenderCa({ caCert }, { flag, path: options.path });
  return { caCert };
}
