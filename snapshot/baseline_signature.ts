/**
 * The signed-baseline envelope: a baseline ConfigMap is trusted only when it carries a signature
 * by the install's CA over everything that decides what drift it reports: its namespace and
 * name, the cohort it says it holds (key label, name and values annotations) and every data
 * entry (the snapshot text, its format, when and from where it was set). Anyone who may write
 * ConfigMaps in the daemon's namespace can edit or plant a baseline; only a holder of the CA key
 * (the CLI of someone who may read the CA Secret, and the in-cluster signer) can sign one. A
 * signed baseline copied to another cohort's name, another namespace, or edited in any byte is
 * refused, as is one signed by another install's CA.
 *
 * The signature is ECDSA P-256 with SHA-256 (the CA's own key type) over a text that starts with
 * {@link BASELINE_SIGNATURE_CONTEXT}: a certificate's signed part is DER (it starts with a
 * SEQUENCE, byte 0x30), this starts with `a`, so a baseline signature can never pass for a
 * certificate's, nor the other way round.
 *
 * Pure: keys and certificates come in as PEM or key objects; `node:crypto` is loaded on first
 * use.
 *
 * @module
 */
import { Buffer } from "node:buffer";
import process from "node:process";
import type { KeyObject } from "node:crypto";
import { baselineCohortOf } from "./baseline.ts";

/** The data key of a baseline ConfigMap holding its signature envelope (JSON). */
export const BASELINE_SIGNATURE_KEY = "signature";

/** What every signed text starts with: the purpose and version, never DER. */
export const BASELINE_SIGNATURE_CONTEXT = "aicr.run/baseline-signature/v1\n";

/** The parts of a ConfigMap a signature covers. */
export interface BaselineObject {
  /** Name, namespace, labels and annotations. */
  metadata?: {
    name?: string;
    namespace?: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
  };
  /** The data entries (the signature's own among them, when signed). */
  data?: Record<string, string>;
}

/** The envelope stored under {@link BASELINE_SIGNATURE_KEY}. */
interface Envelope {
  /** Format version. */
  v: 1;
  /** `ES256`: ECDSA P-256, SHA-256, DER-encoded signature. */
  alg: "ES256";
  /** The signer's key id ({@link keyId}). */
  key: string;
  /** The signature, base64. */
  sig: string;
}

/** Whether a baseline may be used, and why not. */
export type BaselineTrust =
  | { state: "signed"; key: string }
  | { state: "unsigned"; reason: string }
  | { state: "other-ca"; key: string; reason: string }
  | { state: "edited"; reason: string };

function crypto(): typeof import("node:crypto") {
  return process.getBuiltinModule("node:crypto");
}

/**
 * The id of a public key: 16 hex digits of SHA-256 over its SubjectPublicKeyInfo.
 *
 * @param key the public key, or a certificate or key in PEM
 * @returns the id
 */
export function keyId(key: KeyObject | string): string {
  const { createHash, createPublicKey } = crypto();
  const publicKey = typeof key === "string" ? createPublicKey(key) : key;
  const der = publicKey.export({ type: "spki", format: "der" });
  return createHash("sha256").update(der).digest("hex").slice(0, 16);
}

/**
 * The text a baseline's signature covers: the context line, then one JSON document of its
 * namespace, name, cohort (from its labels and annotations) and the SHA-256 of every data
 * entry but the signature, in key order.
 *
 * @param object the ConfigMap (as written, or as read)
 * @returns the bytes to sign or verify
 */
export function baselineSignedText(object: BaselineObject): Uint8Array {
  const { createHash } = crypto();
  const metadata = object.metadata ?? {};
  const cohort = baselineCohortOf(metadata) ?? null;
  const data = object.data ?? {};
  const entries = Object.keys(data).filter((k) => k !== BASELINE_SIGNATURE_KEY).sort()
    .map((k) => [k, createHash("sha256").update(data[k] ?? "").digest("hex")]);
  const values = cohort
    ? Object.keys(cohort.values).sort().map((k) => [k, cohort.values[k] ?? null])
    : null;
  const document = {
    namespace: metadata.namespace ?? "",
    name: metadata.name ?? "",
    cohort: cohort ? { key: cohort.key, name: cohort.name, values } : null,
    data: entries,
  };
  return new TextEncoder().encode(BASELINE_SIGNATURE_CONTEXT + JSON.stringify(document));
}

/**
 * Signs a baseline ConfigMap with the CA's key: the envelope to store under
 * {@link BASELINE_SIGNATURE_KEY}.
 *
 * @param object the ConfigMap as it will be written (namespace, name, labels, annotations, data)
 * @param caKey the CA's private key (PEM or key object)
 * @returns the envelope (JSON)
 */
export function signBaseline(object: BaselineObject, caKey: string | KeyObject): string {
  const { createPrivateKey, createPublicKey, sign } = crypto();
  const privateKey = typeof caKey === "string" ? createPrivateKey(caKey) : caKey;
  const signature = sign("sha256", baselineSignedText(object), {
    key: privateKey,
    dsaEncoding: "der",
  });
  const envelope: Envelope = {
    v: 1,
    alg: "ES256",
    key: keyId(createPublicKey(privateKey)),
    sig: signature.toString("base64"),
  };
  return JSON.stringify(envelope);
}

function readEnvelope(text: string): Envelope | undefined {
  try {
    const value = JSON.parse(text) as Partial<Envelope>;
    if (
      value?.v !== 1 || value.alg !== "ES256" || typeof value.key !== "string" ||
      typeof value.sig !== "string"
    ) return undefined;
    return value as Envelope;
  } catch {
    return undefined;
  }
}

/**
 * Verifies a baseline ConfigMap against the install's CA.
 *
 * @param object the ConfigMap as read
 * @param ca the CA's public key, or its certificate in PEM
 * @returns `signed`, or why it is not to be trusted
 */
export function verifyBaseline(object: BaselineObject, ca: KeyObject | string): BaselineTrust {
  const { createPublicKey, verify, X509Certificate } = crypto();
  const publicKey = typeof ca === "string"
    ? (ca.includes("CERTIFICATE") ? new X509Certificate(ca).publicKey : createPublicKey(ca))
    : ca;
  const text = object.data?.[BASELINE_SIGNATURE_KEY];
  // guard: baseline-signature: a baseline is trusted only under the install's CA signature
  if (text === undefined) {
    return {
      state: "unsigned",
      reason: "it carries no signature (written by hand, or by an aicr that did not sign)",
    };
  }
  const envelope = readEnvelope(text);
  if (!envelope) {
    return { state: "edited", reason: "its signature is not an aicr signature envelope" };
  }
  const expected = keyId(publicKey);
  if (envelope.key !== expected) {
    return {
      state: "other-ca",
      key: envelope.key,
      reason:
        `it is signed by another CA (key ${envelope.key}), not this install's (key ${expected})`,
    };
  }
  let good = false;
  try {
    good = verify("sha256", baselineSignedText(object), {
      key: publicKey,
      dsaEncoding: "der",
    }, Buffer.from(envelope.sig, "base64"));
  } catch {
    good = false;
  }
  return good ? { state: "signed", key: expected } : {
    state: "edited",
    reason:
      "its signature does not match its content, cohort, name or namespace: it was changed or copied after it was signed",
  };
}
