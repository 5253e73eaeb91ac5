/**
 * A small X.509 v3 and PKCS#10 toolkit for DaemonSet mode, all P-256 ECDSA with SHA-256: the
 * installer's CA, the serving certificates it issues, the certificate signing request each
 * daemon makes for its own in-memory key (`buildCsr`), the reader of such a request
 * (`parseCsr`: names, key, proof of possession) and the daemon's self-signed placeholder.
 *
 * Why it exists: the release binary cannot shell out to `openssl` (the image holds nothing but
 * the binary), and `node:crypto` generates keys and signs but cannot build or read a
 * certificate request. DER is a short grammar; only what these documents need is here
 * (SEQUENCE, SET, INTEGER, BOOLEAN, OID, UTF8String, IA5String, OCTET and BIT STRING,
 * UTCTime/GeneralizedTime, context tags). Keys and signatures come from `node:crypto`; the
 * tests read every certificate back with `X509Certificate` and `openssl` and serve it over a
 * real TLS handshake. Floor 0 because both sides of DaemonSet mode use it (`controller/`
 * issues, `daemon/` requests) and they never import each other.
 *
 * @module
 */
import { Buffer } from "node:buffer";
import {
  createHash,
  createPrivateKey,
  createPublicKey,
  generateKeyPairSync,
  randomBytes,
  sign,
  verify,
  X509Certificate,
} from "node:crypto";
import type { KeyObject } from "node:crypto";
import { isIP } from "node:net";

function length(n: number): Buffer {
  if (n < 0x80) return Buffer.from([n]);
  const bytes: number[] = [];
  for (let v = n; v > 0; v = Math.floor(v / 256)) bytes.unshift(v & 0xff);
  return Buffer.from([0x80 | bytes.length, ...bytes]);
}

/**
 * One DER TLV.
 *
 * @param tag the tag byte
 * @param content the content octets
 * @returns the encoding
 */
export function tlv(tag: number, ...content: Buffer[]): Buffer {
  const body = Buffer.concat(content);
  return Buffer.concat([Buffer.from([tag]), length(body.length), body]);
}

function sequence(...items: Buffer[]): Buffer {
  return tlv(0x30, ...items);
}

function set(...items: Buffer[]): Buffer {
  return tlv(0x31, ...items);
}

function octetString(bytes: Buffer): Buffer {
  return tlv(0x04, bytes);
}

function bitString(bytes: Buffer, unusedBits = 0): Buffer {
  return tlv(0x03, Buffer.from([unusedBits]), bytes);
}

function booleanTrue(): Buffer {
  return tlv(0x01, Buffer.from([0xff]));
}

/** A context-specific constructed tag `[n]` (EXPLICIT). */
function explicit(n: number, inner: Buffer): Buffer {
  return tlv(0xa0 | n, inner);
}

/**
 * A DER INTEGER of unsigned big-endian bytes (a leading zero added when the top bit is set).
 *
 * @param bytes the magnitude
 * @returns the encoding
 */
export function derInteger(bytes: Buffer): Buffer {
  let start = 0;
  while (start < bytes.length - 1 && bytes[start] === 0 && (bytes[start + 1] ?? 0) < 0x80) start++;
  const trimmed = bytes.subarray(start);
  return tlv(
    0x02,
    (trimmed[0] ?? 0) >= 0x80 ? Buffer.concat([Buffer.from([0]), trimmed]) : trimmed,
  );
}

/**
 * A DER OBJECT IDENTIFIER.
 *
 * @param dotted e.g. `2.5.4.3`
 * @returns the encoding
 * @throws {RangeError} when it has fewer than two arcs
 */
export function derOid(dotted: string): Buffer {
  const arcs = dotted.split(".").map(Number);
  if (arcs.length < 2 || arcs.some((a) => !Number.isInteger(a) || a < 0)) {
    throw new RangeError(`Cannot encode OID "${dotted}": it needs two or more numeric arcs`);
  }
  const out: number[] = [(arcs[0] as number) * 40 + (arcs[1] as number)];
  for (const arc of arcs.slice(2)) {
    const base128: number[] = [arc & 0x7f];
    for (let v = Math.floor(arc / 128); v > 0; v = Math.floor(v / 128)) {
      base128.unshift(0x80 | (v & 0x7f));
    }
    out.push(...base128);
  }
  return tlv(0x06, Buffer.from(out));
}

/**
 * A DER time: UTCTime up to 2049, GeneralizedTime from 2050 (RFC 5280 §4.1.2.5).
 *
 * @param date the instant (whole seconds are kept)
 * @returns the encoding
 */
export function derTime(date: Date): Buffer {
  const iso = date.toISOString(); // YYYY-MM-DDTHH:MM:SS.sssZ
  const digits = iso.slice(0, 19).replace(/[-:T]/g, "") + "Z";
  const year = date.getUTCFullYear();
  return year < 2050
    ? tlv(0x17, Buffer.from(digits.slice(2), "ascii"))
    : tlv(0x18, Buffer.from(digits, "ascii"));
}

const OID = {
  commonName: "2.5.4.3",
  organization: "2.5.4.10",
  ecdsaWithSha256: "1.2.840.10045.4.3.2",
  subjectKeyIdentifier: "2.5.29.14",
  keyUsage: "2.5.29.15",
  subjectAltName: "2.5.29.17",
  basicConstraints: "2.5.29.19",
  authorityKeyIdentifier: "2.5.29.35",
  extKeyUsage: "2.5.29.37",
  serverAuth: "1.3.6.1.5.5.7.3.1",
  extensionRequest: "1.2.840.113549.1.9.14",
} as const;

function name(commonName: string, organization?: string): Buffer {
  const rdn = (oid: string, value: string) =>
    set(sequence(derOid(oid), tlv(0x0c, Buffer.from(value, "utf8"))));
  return sequence(
    ...(organization ? [rdn(OID.organization, organization)] : []),
    rdn(OID.commonName, commonName),
  );
}

function extension(oid: string, critical: boolean, value: Buffer): Buffer {
  return sequence(derOid(oid), ...(critical ? [booleanTrue()] : []), octetString(value));
}

function ipBytes(ip: string): Buffer {
  if (isIP(ip) === 4) return Buffer.from(ip.split(".").map(Number));
  // IPv6: expand "::" and write eight 16-bit groups.
  const [head = "", tail] = ip.split("::");
  const left = head ? head.split(":") : [];
  const right = tail !== undefined && tail !== "" ? tail.split(":") : [];
  const groups = tail === undefined
    ? left
    : [...left, ...Array(8 - left.length - right.length).fill("0"), ...right];
  const out = Buffer.alloc(16);
  groups.forEach((g, i) => out.writeUInt16BE(parseInt(g, 16), i * 2));
  return out;
}

function keyId(publicKey: KeyObject): Buffer {
  // RFC 5280 §4.2.1.2 method 1: SHA-1 of the subjectPublicKey BIT STRING's value.
  const spki = publicKey.export({ type: "spki", format: "der" });
  // A P-256 SPKI ends with the 65-byte uncompressed point.
  return createHash("sha1").update(spki.subarray(spki.length - 65)).digest();
}

/** Key usages this builder writes (bit numbers of RFC 5280 §4.2.1.3). */
const KEY_USAGE_BITS = { digitalSignature: 0, keyCertSign: 5, cRLSign: 6 } as const;

function keyUsage(usages: readonly (keyof typeof KEY_USAGE_BITS)[]): Buffer {
  let bits = 0;
  let highest = 0;
  for (const usage of usages) {
    const bit = KEY_USAGE_BITS[usage];
    bits |= 0x80 >> bit;
    highest = Math.max(highest, bit);
  }
  return bitString(Buffer.from([bits]), 7 - highest);
}

/** What one certificate says. */
export interface CertificateSpec {
  /** Subject common name. */
  commonName: string;
  /** Subject organization. */
  organization?: string;
  /** Not valid before. */
  notBefore: Date;
  /** Not valid after. */
  notAfter: Date;
  /** The subject's public key. */
  publicKey: KeyObject;
  /** A CA certificate (basicConstraints CA:true, keyCertSign). */
  isCa: boolean;
  /** DNS names of the subjectAltName (server certificates). */
  dnsNames?: readonly string[];
  /** IP addresses of the subjectAltName. */
  ipAddresses?: readonly string[];
  /** Serial number bytes. @default 16 random bytes */
  serial?: Buffer;
}

/** Who signs. */
export interface Issuer {
  /** The issuer's common name. */
  commonName: string;
  /** The issuer's organization. */
  organization?: string;
  /** The issuer's private key. */
  privateKey: KeyObject;
  /** The issuer's public key (for the authority key identifier). */
  publicKey: KeyObject;
  /**
   * The issuer's subject as its certificate encodes it (DER), written as the issuer name
   * instead of `commonName` and `organization`: a CA made elsewhere (Helm's `genCAWithKey`,
   * an operator's) has its own name, and a chain verifies only when the two match.
   */
  nameDer?: Buffer;
  /** The issuer's subject key identifier as its certificate states it. @default from the key */
  keyId?: Buffer;
}

function pem(label: string, der: Buffer): string {
  const b64 = der.toString("base64").replace(/.{1,64}/g, "$&\n");
  return `-----BEGIN ${label}-----\n${b64}-----END ${label}-----\n`;
}

/**
 * Builds and signs one X.509 v3 certificate (ECDSA P-256 with SHA-256).
 *
 * @param spec the subject, validity, key and extensions
 * @param issuer who signs (the subject itself for a self-signed CA)
 * @returns the certificate as PEM
 * @throws {RangeError} when a SAN entry is neither a DNS name nor an IP address
 */
export function buildCertificate(spec: CertificateSpec, issuer: Issuer): string {
  const serial = spec.serial ?? randomBytes(16);
  serial[0] = (serial[0] ?? 0) & 0x7f; // positive
  const algorithm = sequence(derOid(OID.ecdsaWithSha256));
  const spki = spec.publicKey.export({ type: "spki", format: "der" });
  const extensions: Buffer[] = [
    extension(
      OID.basicConstraints,
      true,
      spec.isCa ? sequence(booleanTrue(), derInteger(Buffer.from([0]))) : sequence(),
    ),
    extension(
      OID.keyUsage,
      true,
      keyUsage(spec.isCa ? ["digitalSignature", "keyCertSign", "cRLSign"] : ["digitalSignature"]),
    ),
    extension(OID.subjectKeyIdentifier, false, octetString(keyId(spec.publicKey))),
    extension(
      OID.authorityKeyIdentifier,
      false,
      sequence(tlv(0x80, issuer.keyId ?? keyId(issuer.publicKey))),
    ),
  ];
  if (!spec.isCa) {
    extensions.push(extension(OID.extKeyUsage, false, sequence(derOid(OID.serverAuth))));
  }
  const sans = sanEntries(spec.dnsNames ?? [], spec.ipAddresses ?? []);
  if (sans.length > 0) extensions.push(extension(OID.subjectAltName, false, sequence(...sans)));
  const tbs = sequence(
    explicit(0, derInteger(Buffer.from([2]))),
    derInteger(serial),
    algorithm,
    issuer.nameDer ?? name(issuer.commonName, issuer.organization),
    sequence(derTime(spec.notBefore), derTime(spec.notAfter)),
    name(spec.commonName, spec.organization),
    Buffer.from(spki),
    explicit(3, sequence(...extensions)),
  );
  const signature = sign("sha256", tbs, issuer.privateKey); // DER ECDSA-Sig-Value
  return pem("CERTIFICATE", sequence(tbs, algorithm, bitString(signature)));
}

/** A CA and a serving certificate made for one daemon install. */
export interface DaemonTlsBundle {
  /** The CA certificate (PEM): what clients trust. */
  caCert: string;
  /** The serving certificate (PEM), signed by the CA. */
  cert: string;
  /** The serving certificate's private key (PEM, PKCS#8). */
  key: string;
  /** When both stop being valid. */
  notAfter: Date;
}

/** Options for {@link generateDaemonTls}. */
export interface DaemonTlsOptions {
  /** DNS names of the serving certificate. */
  dnsNames: readonly string[];
  /** IP addresses of the serving certificate. @default none */
  ipAddresses?: readonly string[];
  /** The clock reading. */
  now: Date;
  /** Validity. @default 10 years */
  validDays?: number;
  /** CA common name. @default "aicr-daemon-ca" */
  caCommonName?: string;
}

/**
 * Makes a fresh P-256 CA (the key is thrown away after signing: nothing else can ever be signed
 * by it) and a serving certificate for the given names. Validity starts one hour back to
 * absorb clock skew.
 *
 * @param options names, clock, validity
 * @returns the PEMs
 */
export function generateDaemonTls(options: DaemonTlsOptions): DaemonTlsBundle {
  const { now, validDays = 3650, caCommonName = "aicr-daemon-ca" } = options;
  const notBefore = new Date(Math.floor(now.getTime() / 1000) * 1000 - 3600_000);
  const notAfter = new Date(notBefore.getTime() + validDays * 86_400_000);
  const ca = generateKeyPairSync("ec", { namedCurve: "P-256" });
  const leaf = generateKeyPairSync("ec", { namedCurve: "P-256" });
  const caIssuer: Issuer = {
    commonName: caCommonName,
    organization: "aicr",
    privateKey: ca.privateKey,
    publicKey: ca.publicKey,
  };
  const caCert = buildCertificate({
    commonName: caCommonName,
    organization: "aicr",
    notBefore,
    notAfter,
    publicKey: ca.publicKey,
    isCa: true,
  }, caIssuer);
  const cert = buildCertificate({
    commonName: options.dnsNames[0] ?? "aicr-daemon",
    notBefore,
    notAfter,
    publicKey: leaf.publicKey,
    isCa: false,
    dnsNames: options.dnsNames,
    ...(options.ipAddresses ? { ipAddresses: options.ipAddresses } : {}),
  }, caIssuer);
  return {
    caCert,
    cert,
    key: leaf.privateKey.export({ type: "pkcs8", format: "pem" }) as string,
    notAfter,
  };
}

/** The common name and organization of every aicr daemon CA. */
export const DAEMON_CA_NAME = { commonName: "aicr-daemon-ca", organization: "aicr" } as const;

/** A CA of one install: its certificate and private key (PEM). */
export interface DaemonCa {
  /** The CA certificate (PEM): what the fetch trusts. */
  caCert: string;
  /** The CA's private key (PEM, PKCS#8): kept in a Secret only the installer reads. */
  caKey: string;
}

/**
 * Makes a fresh P-256 CA for one install (validity starts one hour back, for clock skew).
 *
 * @param options the clock reading and the validity in days (default 10 years)
 * @returns the certificate and key
 */
export function generateDaemonCa(options: { now: Date; validDays?: number }): DaemonCa {
  const { now, validDays = 3650 } = options;
  const notBefore = new Date(Math.floor(now.getTime() / 1000) * 1000 - 3600_000);
  const ca = generateKeyPairSync("ec", { namedCurve: "P-256" });
  const caCert = buildCertificate({
    ...DAEMON_CA_NAME,
    notBefore,
    notAfter: new Date(notBefore.getTime() + validDays * 86_400_000),
    publicKey: ca.publicKey,
    isCa: true,
  }, { ...DAEMON_CA_NAME, privateKey: ca.privateKey, publicKey: ca.publicKey });
  return { caCert, caKey: ca.privateKey.export({ type: "pkcs8", format: "pem" }) as string };
}

/** What {@link issueServingCertificate} writes into a certificate. */
export interface ServingCertificateRequest {
  /** The CA that signs. */
  ca: DaemonCa;
  /** The subject's public key (from the checked request). */
  publicKey: KeyObject;
  /** The node: common name and the only DNS name. */
  node: string;
  /** IP addresses (the pod's). */
  ipAddresses: readonly string[];
  /** The clock reading. */
  now: Date;
  /** Lifetime in seconds. */
  lifetimeSeconds: number;
}

/**
 * Issues one daemon's serving certificate: CN and DNS SAN the node, IP SANs the pod's address,
 * `serverAuth` only, valid from five minutes back (clock skew) for `lifetimeSeconds`.
 *
 * @param request CA, key, names, clock and lifetime
 * @returns the certificate (PEM)
 * @throws {Error} when the CA pair cannot be read
 */
export function issueServingCertificate(request: ServingCertificateRequest): string {
  const caKey = createPrivateKey(request.ca.caKey);
  const caPublic = new X509Certificate(request.ca.caCert).publicKey;
  const issuer = certificateIssuerFields(request.ca.caCert);
  const notBefore = new Date(Math.floor(request.now.getTime() / 1000) * 1000 - 300_000);
  return buildCertificate({
    commonName: request.node,
    notBefore,
    notAfter: new Date(notBefore.getTime() + 300_000 + request.lifetimeSeconds * 1000),
    publicKey: request.publicKey,
    isCa: false,
    dnsNames: [request.node],
    ipAddresses: request.ipAddresses,
  }, {
    ...DAEMON_CA_NAME,
    privateKey: caKey,
    publicKey: caPublic,
    nameDer: issuer.subject,
    ...(issuer.subjectKeyId ? { keyId: issuer.subjectKeyId } : {}),
  });
}

/**
 * What a certificate says of its subject, as an issuer of others needs it: the subject name
 * exactly as encoded (DER) and the subject key identifier, when it has one.
 *
 * @param certificate the certificate (PEM)
 * @returns the subject's DER and key identifier
 * @throws {RangeError} when it is not a well-formed certificate
 */
export function certificateIssuerFields(
  certificate: string,
): { subject: Buffer; subjectKeyId?: Buffer } {
  const der = Buffer.from(new X509Certificate(certificate).raw);
  const outer = readDer(der, 0);
  const [tbs] = childrenOf(der, outer);
  if (!tbs || tbs.tag !== 0x30) throw new RangeError("not a certificate");
  const fields = childrenOf(der, tbs);
  // version [0] is optional (v1 certificates); the subject is the fifth field after it.
  const at = fields[0]?.tag === 0xa0 ? 1 : 0;
  const subject = fields[at + 4];
  if (!subject || subject.tag !== 0x30) throw new RangeError("the certificate has no subject");
  const extensions = fields.find((f) => f.tag === 0xa3);
  let subjectKeyId: Buffer | undefined;
  for (const ext of extensions ? childrenOf(der, childrenOf(der, extensions)[0]!) : []) {
    const parts = childrenOf(der, ext);
    const oid = parts[0];
    const value = parts[parts.length - 1];
    if (oid && value && oidText(der, oid) === OID.subjectKeyIdentifier) {
      const inner = readDer(der, value.start, value.end);
      subjectKeyId = Buffer.from(der.subarray(inner.start, inner.end));
    }
  }
  return {
    subject: Buffer.from(der.subarray(subject.from, subject.end)),
    ...(subjectKeyId ? { subjectKeyId } : {}),
  };
}

/** A fresh P-256 key pair; the private key stays in memory. */
export function generateServingKey(): { privateKey: KeyObject; publicKey: KeyObject } {
  return generateKeyPairSync("ec", { namedCurve: "P-256" });
}

/** The common name of the self-signed placeholder a daemon serves until its CSR is signed. */
export const PLACEHOLDER_COMMON_NAME = "aicr-daemon-awaiting-certificate";

/**
 * A self-signed certificate for the daemon's own key, served only until its CSR is signed, so
 * the health endpoints answer (probes do not verify certificates); no client trusts it.
 *
 * @param key the daemon's key pair
 * @param now the clock reading
 * @returns the certificate (PEM), valid for one day
 */
export function placeholderCertificate(
  key: { privateKey: KeyObject; publicKey: KeyObject },
  now: Date,
): string {
  const notBefore = new Date(Math.floor(now.getTime() / 1000) * 1000 - 300_000);
  return buildCertificate({
    commonName: PLACEHOLDER_COMMON_NAME,
    notBefore,
    notAfter: new Date(notBefore.getTime() + 86_400_000),
    publicKey: key.publicKey,
    isCa: false,
  }, { commonName: PLACEHOLDER_COMMON_NAME, ...key });
}

/**
 * Builds a PKCS#10 certificate signing request (RFC 2986) for a P-256 key: the subject's common
 * name and a subjectAltName extension request, signed with the key (proof of possession).
 *
 * @param options the subject, its names and the key pair
 * @returns the request as PEM (`CERTIFICATE REQUEST`)
 * @throws {RangeError} when a name is neither a DNS name nor an IP address
 */
export function buildCsr(options: {
  commonName: string;
  dnsNames: readonly string[];
  ipAddresses: readonly string[];
  privateKey: KeyObject;
  publicKey: KeyObject;
}): string {
  const spki = options.publicKey.export({ type: "spki", format: "der" });
  const sans = sequence(...sanEntries(options.dnsNames, options.ipAddresses));
  const extensionRequest = sequence(
    derOid(OID.extensionRequest),
    set(sequence(extension(OID.subjectAltName, false, sans))),
  );
  const info = sequence(
    derInteger(Buffer.from([0])),
    name(options.commonName),
    Buffer.from(spki),
    tlv(0xa0, extensionRequest),
  );
  const signature = sign("sha256", info, options.privateKey);
  return pem(
    "CERTIFICATE REQUEST",
    sequence(info, sequence(derOid(OID.ecdsaWithSha256)), bitString(signature)),
  );
}

function sanEntries(dnsNames: readonly string[], ipAddresses: readonly string[]): Buffer[] {
  return [
    ...dnsNames.map((dns) => {
      if (!/^[A-Za-z0-9*]([-A-Za-z0-9.]*[A-Za-z0-9])?$/.test(dns)) {
        throw new RangeError(`Cannot put "${dns}" in a certificate: it is not a DNS name`);
      }
      return tlv(0x82, Buffer.from(dns, "ascii"));
    }),
    ...ipAddresses.map((ip) => {
      if (isIP(ip) === 0) {
        throw new RangeError(`Cannot put "${ip}" in a certificate: it is not an IP address`);
      }
      return tlv(0x87, ipBytes(ip));
    }),
  ];
}

/** One DER element: its tag, where its content starts and ends, and where it ends. */
interface Der {
  tag: number;
  start: number;
  end: number;
  /** Where the whole element (header included) starts. */
  from: number;
}

function readDer(buf: Buffer, from: number, limit = buf.length): Der {
  if (from + 2 > limit) throw new RangeError("truncated DER");
  const tag = buf[from] as number;
  let len = buf[from + 1] as number;
  let start = from + 2;
  if (len & 0x80) {
    const count = len & 0x7f;
    if (count === 0 || count > 4 || start + count > limit) throw new RangeError("bad DER length");
    len = 0;
    for (let i = 0; i < count; i++) len = len * 256 + (buf[start + i] as number);
    start += count;
  }
  const end = start + len;
  if (end > limit) throw new RangeError("DER element overruns its parent");
  return { tag, start, end, from };
}

function childrenOf(buf: Buffer, parent: Der): Der[] {
  const out: Der[] = [];
  for (let at = parent.start; at < parent.end;) {
    const child = readDer(buf, at, parent.end);
    out.push(child);
    at = child.end;
  }
  return out;
}

function oidText(buf: Buffer, el: Der): string {
  const bytes = buf.subarray(el.start, el.end);
  const first = bytes[0] ?? 0;
  const arcs = [Math.floor(first / 40), first % 40];
  let value = 0;
  for (const byte of bytes.subarray(1)) {
    value = value * 128 + (byte & 0x7f);
    if ((byte & 0x80) === 0) {
      arcs.push(value);
      value = 0;
    }
  }
  return arcs.join(".");
}

/**
 * An IP address in one spelling per address: dotted IPv4, or eight lowercase hex groups.
 *
 * @param ip an IPv4 or IPv6 address
 * @returns the canonical spelling
 */
export function canonicalIp(ip: string): string {
  return ipText(ipBytes(ip));
}

function ipText(bytes: Buffer): string {
  if (bytes.length === 4) return [...bytes].join(".");
  const groups: string[] = [];
  for (let i = 0; i + 1 < bytes.length; i += 2) groups.push(bytes.readUInt16BE(i).toString(16));
  return groups.join(":");
}

/** What a certificate signing request asks for, once read and checked. */
export interface ParsedCsr {
  /** Subject common name ("" when none). */
  commonName: string;
  /** Requested DNS names. */
  dnsNames: string[];
  /** Requested IP addresses ({@link canonicalIp} spelling). */
  ipAddresses: string[];
  /** Requested names of other kinds (e-mail, URI, …), as `tag:<n>`. */
  otherNames: string[];
  /** The subject's public key. */
  publicKey: KeyObject;
  /** Whether the key is P-256 (the only kind aicr signs). */
  isP256: boolean;
  /** Whether the request's signature verifies with its own key (proof of possession). */
  signatureValid: boolean;
}

/**
 * Reads a PKCS#10 request (PEM or DER) and checks its signature with the key it carries.
 *
 * @param request the request
 * @returns the subject, names and key, and whether the signature holds
 * @throws {RangeError} when it is not a well-formed request
 */
export function parseCsr(request: string | Buffer): ParsedCsr {
  const der = typeof request === "string"
    ? Buffer.from(
      request.replace(/-----(BEGIN|END) CERTIFICATE REQUEST-----/g, "").replace(/\s+/g, ""),
      "base64",
    )
    : request;
  const outer = readDer(der, 0);
  if (outer.tag !== 0x30) throw new RangeError("not a certificate request");
  const [info, algorithm, signature] = childrenOf(der, outer);
  if (!info || !algorithm || !signature || info.tag !== 0x30 || signature.tag !== 0x03) {
    throw new RangeError("not a certificate request");
  }
  const [, subject, spki, attributes] = childrenOf(der, info);
  if (!subject || !spki) throw new RangeError("the request has no subject or key");
  const publicKey = createPublicKey({
    key: der.subarray(spki.from, spki.end),
    format: "der",
    type: "spki",
  });
  const isP256 = publicKey.asymmetricKeyType === "ec" &&
    publicKey.asymmetricKeyDetails?.namedCurve === "prime256v1";
  const names = {
    dnsNames: [] as string[],
    ipAddresses: [] as string[],
    otherNames: [] as string[],
  };
  if (attributes && attributes.tag === 0xa0) readRequestedNames(der, attributes, names);
  const [algorithmOid] = childrenOf(der, algorithm);
  const signatureValid = algorithmOid !== undefined &&
    oidText(der, algorithmOid) === OID.ecdsaWithSha256 &&
    verify(
      "sha256",
      der.subarray(info.from, info.end),
      publicKey,
      der.subarray(signature.start + 1, signature.end),
    );
  return { commonName: commonNameOf(der, subject), ...names, publicKey, isP256, signatureValid };
}

function commonNameOf(der: Buffer, subject: Der): string {
  for (const rdn of childrenOf(der, subject)) {
    for (const pair of childrenOf(der, rdn)) {
      const [oid, value] = childrenOf(der, pair);
      if (oid && value && oidText(der, oid) === OID.commonName) {
        return der.subarray(value.start, value.end).toString("utf8");
      }
    }
  }
  return "";
}

function readRequestedNames(
  der: Buffer,
  attributes: Der,
  out: { dnsNames: string[]; ipAddresses: string[]; otherNames: string[] },
): void {
  for (const attribute of childrenOf(der, attributes)) {
    const [oid, values] = childrenOf(der, attribute);
    if (!oid || !values || oidText(der, oid) !== OID.extensionRequest) continue;
    for (const extensions of childrenOf(der, values)) {
      for (const ext of childrenOf(der, extensions)) {
        const parts = childrenOf(der, ext);
        const extOid = parts[0];
        const value = parts[parts.length - 1];
        if (!extOid || !value || oidText(der, extOid) !== OID.subjectAltName) continue;
        const [sans] = childrenOf(der, value);
        if (!sans) continue;
        for (const san of childrenOf(der, sans)) {
          const bytes = der.subarray(san.start, san.end);
          if (san.tag === 0x82) out.dnsNames.push(bytes.toString("ascii"));
          else if (san.tag === 0x87 && (bytes.length === 4 || bytes.length === 16)) {
            out.ipAddresses.push(ipText(Buffer.from(bytes)));
          } else out.otherNames.push(`tag:${san.tag & 0x1f}`);
        }
      }
    }
  }
}

/**
 * The CA of a served chain (leaf first, then its issuer, as the daemons' signers write a
 * certificate request's `status.certificate`): the second certificate, when it is a CA and did
 * sign the first. The daemons verify their cohort's baseline with it: the one party that could
 * write it is a signer of their certificates.
 *
 * @param chain PEM certificates, leaf first
 * @returns the issuing CA's certificate, or undefined when the chain holds none that signed the leaf
 */
export function chainIssuer(chain: string): X509Certificate | undefined {
  const blocks = chain.match(/-----BEGIN CERTIFICATE-----[\s\S]*?-----END CERTIFICATE-----/g) ??
    [];
  if (blocks.length < 2) return undefined;
  try {
    const leaf = new X509Certificate(blocks[0] as string);
    const issuer = new X509Certificate(blocks[1] as string);
    if (!issuer.ca || !leaf.checkIssued(issuer) || !leaf.verify(issuer.publicKey)) return undefined;
    return issuer;
  } catch {
    return undefined;
  }
}
