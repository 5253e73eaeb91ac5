import assert from "node:assert/strict";
import { Buffer } from "node:buffer";
import { execFileSync } from "node:child_process";
import { createPrivateKey, X509Certificate } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  buildCsr,
  canonicalIp,
  chainIssuer,
  derInteger,
  derOid,
  derTime,
  generateDaemonCa,
  generateDaemonTls,
  generateServingKey,
  issueServingCertificate,
  parseCsr,
  placeholderCertificate,
} from "./x509.ts";

const NOW = new Date("2026-12-02T18:00:00Z");

Deno.test("x509: DER integers, OIDs and times encode as the standard examples", () => {
  assert.equal(derInteger(Buffer.from([2])).toString("hex"), "020102");
  assert.equal(derInteger(Buffer.from([0x80])).toString("hex"), "02020080");
  assert.equal(derInteger(Buffer.from([0, 0, 0x7f])).toString("hex"), "02017f");
  // The common name and ecdsa-with-SHA256 OIDs as RFC 5280 and RFC 5758 write them.
  assert.equal(derOid("2.5.4.3").toString("hex"), "0603550403");
  assert.equal(derOid("1.2.840.10045.4.3.2").toString("hex"), "06082a8648ce3d040302");
  assert.equal(derTime(new Date("2026-01-02T03:04:05Z")).toString("ascii", 2), "260102030405Z");
  assert.equal(derTime(new Date("2051-01-02T03:04:05Z"))[0], 0x18, "GeneralizedTime from 2050");
  assert.throws(() => derOid("1"), RangeError);
});

Deno.test("x509: the CA is self-signed, a CA, and signs the serving certificate for its names", () => {
  const tls = generateDaemonTls({
    dnsNames: ["aicr-daemon.aicr-system.svc", "aicr-daemon.aicr-system.svc.cluster.local"],
    ipAddresses: ["127.0.0.1", "fd00::1"],
    now: NOW,
    validDays: 30,
  });
  const ca = new X509Certificate(tls.caCert);
  const leaf = new X509Certificate(tls.cert);
  assert.equal(ca.ca, true);
  assert.equal(leaf.ca, false);
  assert.ok(ca.verify(ca.publicKey), "self-signed");
  assert.ok(leaf.verify(ca.publicKey), "signed by the CA");
  assert.ok(leaf.checkIssued(ca));
  assert.equal(leaf.checkHost("aicr-daemon.aicr-system.svc"), "aicr-daemon.aicr-system.svc");
  assert.equal(leaf.checkHost("aicr-daemon.other.svc"), undefined);
  assert.equal(leaf.checkIP("127.0.0.1"), "127.0.0.1");
  assert.equal(leaf.checkIP("fd00:0:0:0:0:0:0:1"), "fd00:0:0:0:0:0:0:1");
  // (Deno's keyUsage lists key usages, Node's the extended ones: openssl checks EKU below.)
  assert.ok(leaf.keyUsage?.length, "usages are present");
  assert.equal(new Date(leaf.validFrom).getTime(), NOW.getTime() - 3600_000);
  assert.equal(new Date(leaf.validTo).getTime(), NOW.getTime() - 3600_000 + 30 * 86_400_000);
  assert.equal(leaf.issuer, ca.subject);
  assert.ok(leaf.checkPrivateKey(createPrivateKey(tls.key)), "the key matches the certificate");
  // Two bundles share nothing.
  const other = generateDaemonTls({ dnsNames: ["x.y.svc"], now: NOW });
  assert.equal(new X509Certificate(other.cert).verify(ca.publicKey), false);
});

function hasOpenssl(): boolean {
  try {
    execFileSync("openssl", ["version"], { stdio: "pipe" });
    return true;
  } catch {
    return false;
  }
}

Deno.test({
  name: "x509: openssl verifies the chain with the serverAuth purpose and reads every extension",
  ignore: !hasOpenssl(),
  fn() {
    const tls = generateDaemonTls({ dnsNames: ["aicr-daemon.ns.svc"], now: new Date() });
    const dir = mkdtempSync(join(tmpdir(), "aicr-x509-"));
    try {
      writeFileSync(join(dir, "ca.pem"), tls.caCert);
      writeFileSync(join(dir, "leaf.pem"), tls.cert);
      const out = execFileSync("openssl", [
        "verify",
        "-x509_strict",
        "-purpose",
        "sslserver",
        "-verify_hostname",
        "aicr-daemon.ns.svc",
        "-CAfile",
        join(dir, "ca.pem"),
        join(dir, "leaf.pem"),
      ], { stdio: "pipe" }).toString();
      assert.match(out, /leaf\.pem: OK/);
      const text = execFileSync("openssl", ["x509", "-noout", "-text", "-in", join(dir, "ca.pem")])
        .toString();
      assert.match(text, /CA:TRUE/);
      assert.match(text, /Certificate Sign/);
      assert.match(text, /Version: 3/);
      const leafText = execFileSync("openssl", [
        "x509",
        "-noout",
        "-text",
        "-in",
        join(dir, "leaf.pem"),
      ]).toString();
      assert.match(leafText, /TLS Web Server Authentication/);
      assert.match(leafText, /DNS:aicr-daemon\.ns\.svc/);
      assert.match(leafText, /CA:FALSE/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  },
});

Deno.test("x509: a CSR reads back with its names and key; a changed byte breaks its signature", () => {
  const key = generateServingKey();
  const pem = buildCsr({
    commonName: "gpu-node-1",
    dnsNames: ["gpu-node-1"],
    ipAddresses: ["10.0.0.7", "fd00::1"],
    ...key,
  });
  assert.match(pem, /^-----BEGIN CERTIFICATE REQUEST-----\n/);
  const parsed = parseCsr(pem);
  assert.equal(parsed.commonName, "gpu-node-1");
  assert.deepEqual(parsed.dnsNames, ["gpu-node-1"]);
  assert.deepEqual(parsed.ipAddresses, ["10.0.0.7", canonicalIp("fd00::1")]);
  assert.deepEqual(parsed.otherNames, []);
  assert.ok(parsed.isP256);
  assert.ok(parsed.signatureValid);
  assert.ok(parsed.publicKey.equals(key.publicKey));
  // Another key's signature over the same request: no proof of possession.
  const der = Buffer.from(pem.replace(/-----[A-Z ]+-----|\s/g, ""), "base64");
  const nameAt = der.indexOf(Buffer.from("gpu-node-1"));
  const tampered = Buffer.from(der);
  tampered[nameAt] = "x".charCodeAt(0);
  assert.equal(parseCsr(tampered).signatureValid, false);
  assert.throws(() => parseCsr("not a request"), RangeError);
  assert.equal(canonicalIp("fd00::1"), "fd00:0:0:0:0:0:0:1");
});

Deno.test("x509: a served certificate is issued by the CA for the node and pod IP only", () => {
  const ca = generateDaemonCa({ now: NOW });
  const key = generateServingKey();
  const cert = new X509Certificate(issueServingCertificate({
    ca,
    publicKey: key.publicKey,
    node: "gpu-node-1",
    ipAddresses: ["10.0.0.7"],
    now: NOW,
    lifetimeSeconds: 30 * 86_400,
  }));
  const caCert = new X509Certificate(ca.caCert);
  assert.ok(cert.verify(caCert.publicKey));
  assert.ok(cert.checkIssued(caCert));
  assert.equal(cert.checkHost("gpu-node-1"), "gpu-node-1");
  assert.equal(cert.checkHost("gpu-node-2"), undefined);
  assert.equal(cert.checkIP("10.0.0.7"), "10.0.0.7");
  assert.ok(cert.checkPrivateKey(key.privateKey));
  assert.equal(
    new Date(cert.validTo).getTime() - new Date(cert.validFrom).getTime(),
    30 * 86_400_000 + 300_000,
  );
  const placeholder = new X509Certificate(placeholderCertificate(key, NOW));
  assert.equal(placeholder.verify(caCert.publicKey), false, "the placeholder is not the CA's");
  assert.ok(placeholder.checkPrivateKey(key.privateKey));
});

Deno.test({
  name: "x509: openssl verifies the CSR's signature and reads its names",
  ignore: !hasOpenssl(),
  fn() {
    const key = generateServingKey();
    const dir = mkdtempSync(join(tmpdir(), "aicr-csr-"));
    try {
      writeFileSync(
        join(dir, "req.pem"),
        buildCsr({ commonName: "n1", dnsNames: ["n1"], ipAddresses: ["10.1.2.3"], ...key }),
      );
      const out = execFileSync("openssl", [
        "req",
        "-verify",
        "-noout",
        "-text",
        "-in",
        join(dir, "req.pem"),
      ], { stdio: "pipe" }).toString();
      assert.match(out, /DNS:n1, IP Address:10\.1\.2\.3/);
      assert.match(out, /CN ?= ?n1/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  },
});

Deno.test({
  name:
    "x509: a CA made elsewhere (openssl, its own name and key identifier) issues certificates openssl verifies",
  ignore: !hasOpenssl(),
  fn() {
    const dir = mkdtempSync(join(tmpdir(), "aicr-foreign-ca-"));
    try {
      // Another CN, an O in UTF8String as openssl writes it, and openssl's key identifier.
      execFileSync("openssl", [
        "req",
        "-x509",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:P-256",
        "-nodes",
        "-keyout",
        join(dir, "ca.key"),
        "-out",
        join(dir, "ca.crt"),
        "-days",
        "30",
        "-subj",
        "/O=operator/CN=gitops-ca",
        "-addext",
        "subjectKeyIdentifier=hash",
      ], { stdio: "pipe" });
      const ca = {
        caCert: execFileSync("cat", [join(dir, "ca.crt")]).toString(),
        caKey: execFileSync("cat", [join(dir, "ca.key")]).toString(),
      };
      const key = generateServingKey();
      const pem = issueServingCertificate({
        ca,
        publicKey: key.publicKey,
        node: "gpu-node-1",
        ipAddresses: ["10.0.0.7"],
        now: new Date(),
        lifetimeSeconds: 86_400,
      });
      const cert = new X509Certificate(pem);
      assert.equal(cert.issuer, new X509Certificate(ca.caCert).subject);
      assert.ok(cert.checkIssued(new X509Certificate(ca.caCert)));
      writeFileSync(join(dir, "leaf.crt"), pem);
      const verified = execFileSync("openssl", [
        "verify",
        "-CAfile",
        join(dir, "ca.crt"),
        "-purpose",
        "sslserver",
        join(dir, "leaf.crt"),
      ]).toString();
      assert.match(verified, /leaf\.crt: OK/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  },
});

Deno.test("chainIssuer() takes the CA after the leaf only when it signed the leaf", () => {
  const ca = generateDaemonCa({ now: new Date("2026-01-01T00:00:00Z") });
  const other = generateDaemonCa({ now: new Date("2026-01-01T00:00:00Z") });
  const leaf = issueServingCertificate({
    ca,
    publicKey: generateServingKey().publicKey,
    node: "gpu-1",
    ipAddresses: ["10.0.0.1"],
    now: new Date("2026-01-02T00:00:00Z"),
    lifetimeSeconds: 3600,
  });
  assert.equal(
    chainIssuer(leaf + ca.caCert)?.fingerprint256,
    new X509Certificate(ca.caCert).fingerprint256,
  );
  assert.equal(chainIssuer(leaf), undefined, "no CA after the leaf");
  assert.equal(chainIssuer(leaf + other.caCert), undefined, "a CA that did not sign it");
  assert.equal(chainIssuer(leaf + leaf), undefined, "not a CA");
});
