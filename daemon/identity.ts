/**
 * The daemon's own serving identity (DaemonSet mode): a P-256 key made in memory at start (never
 * written anywhere), a `certificates.k8s.io/v1` CertificateSigningRequest for exactly this
 * node's name and this pod's IP under the aicr signer, sent with the pod-bound ServiceAccount
 * token (the API server records the pod and node in the request: that is the proof aicr
 * checks before signing), and a bounded poll with back-off until the certificate appears.
 *
 * Until then the server holds a self-signed placeholder no client trusts, `/readyz` is 503 and
 * `/healthz` says so. A denied request is logged with its reason and asked again (new key, new
 * request) after a pause; a certificate is renewed the same way at two thirds of its life.
 *
 * @module
 */
import { Buffer } from "node:buffer";
import { createHash, X509Certificate } from "node:crypto";
import type { KeyObject } from "node:crypto";
import { sleep } from "../io.ts";
import { KubeApiError } from "../kube/mod.ts";
import type { KubeClient } from "../kube/mod.ts";
import type { Logger } from "../log.ts";
import { buildCsr, canonicalIp, generateServingKey, placeholderCertificate } from "../x509.ts";

const CSR_PATH = "/apis/certificates.k8s.io/v1/certificatesigningrequests";

/** Where this daemon runs (downward API) and which signer it asks. */
export interface IdentityOptions {
  /** The signer (`aicr.run/daemon-serving`). */
  signerName: string;
  /** This node. */
  nodeName: string;
  /** This pod's name. */
  podName: string;
  /** This pod's UID. */
  podUid: string;
  /** This pod's IP (the certificate's IP SAN). */
  podIp: string;
  /** Labels for the request (the daemon's instance labels). @default none */
  labels?: Record<string, string>;
  /** First poll delay. @default 500 */
  initialPollMs?: number;
  /** Longest poll delay. @default 30000 */
  maxPollMs?: number;
  /**
   * For this long after a request is sent, polls stay at most {@link fastPollMs} apart: an
   * in-cluster signer signs within a second or two, and the daemon should serve at once.
   * @default 120000
   */
  fastWindowMs?: number;
  /** The longest poll delay within {@link fastWindowMs}. @default 4000 */
  fastPollMs?: number;
  /** Pause after a denied or vanished request before asking again. @default 300000 */
  retryAfterDenialMs?: number;
}

/** A serving pair in PEM. */
export interface ServingPair {
  /** Certificate. */
  cert: string;
  /** Private key (PKCS#8). */
  key: string;
}

/** What {@link createServingIdentity} returns. */
export interface ServingIdentity {
  /** The placeholder pair to start the server with. */
  placeholder: ServingPair;
  /** Why the daemon does not serve its own certificate yet; undefined once it does. */
  awaiting(): string | undefined;
  /**
   * Asks for certificates until `signal` aborts: each issued one goes to `install`.
   *
   * @param install hands the pair to the server
   * @param signal ends the loop
   */
  run(install: (pair: ServingPair) => void, signal: AbortSignal): Promise<void>;
}

/**
 * The request's name: derived from the node, the pod UID and the key (a new key, a new name).
 *
 * @param options node and pod UID
 * @param publicKey the key asked for
 * @returns a DNS subdomain of at most 253 characters
 */
export function csrName(
  options: { nodeName: string; podUid: string },
  publicKey: KeyObject,
): string {
  const digest = createHash("sha256").update(publicKey.export({ type: "spki", format: "der" }))
    .digest("hex").slice(0, 10);
  const pod = options.podUid.replace(/[^a-z0-9]/g, "").slice(0, 8);
  return `aicr-daemon.${options.nodeName.slice(0, 200)}.${pod}.${digest}`;
}

function pem(key: KeyObject): string {
  return key.export({ type: "pkcs8", format: "pem" }) as string;
}

/** What {@link createServingIdentity} works with. */
interface IdentityDeps {
  /** The daemon's client (its pod-bound token). */
  kube: Pick<KubeClient, "rest">;
  /** The daemon's logger. */
  log: Logger;
  /** The clock. */
  now: () => Date;
  /** An abortable sleep. @default a timer */
  sleep?: (ms: number, signal: AbortSignal) => Promise<void>;
}

type ServingKey = ReturnType<typeof generateServingKey>;

/** Hands a serving pair to the server. */
type InstallPair = (pair: ServingPair) => void;

/** The part of a CertificateSigningRequest the poll reads. */
interface CsrStatus {
  status?: {
    certificate?: string;
    conditions?: CsrCondition[];
  };
}

interface CsrCondition {
  type: string;
  reason?: string;
  message?: string;
}

/**
 * Builds the daemon's identity keeper.
 *
 * @param deps the daemon's client (its pod-bound token), logger, clock, sleep
 * @param options node, pod and signer
 * @returns the placeholder, the readiness reason and the request loop
 */
export function createServingIdentity(
  deps: IdentityDeps,
  options: IdentityOptions,
): ServingIdentity {
  return new ServingIdentityKeeper(deps, options);
}

/** The serving certificate's state (the placeholder, why not served yet) and the request loop. */
class ServingIdentityKeeper implements ServingIdentity {
  readonly placeholder: ServingPair;
  readonly #kube: Pick<KubeClient, "rest">;
  readonly #log: Logger;
  readonly #now: () => Date;
  readonly #sleep: (ms: number, signal: AbortSignal) => Promise<void>;
  readonly #options: IdentityOptions;
  readonly #initialPollMs: number;
  readonly #maxPollMs: number;
  readonly #fastWindowMs: number;
  readonly #fastPollMs: number;
  readonly #retryAfterDenialMs: number;
  #waiting: string | undefined = "awaiting its serving certificate";
  #nextKey: ServingKey | undefined;

  constructor(deps: IdentityDeps, options: IdentityOptions) {
    this.#kube = deps.kube;
    this.#log = deps.log;
    this.#now = deps.now;
    this.#sleep = deps.sleep ?? sleep;
    this.#options = options;
    const { initialPollMs = 500, maxPollMs = 30_000, retryAfterDenialMs = 300_000 } = options;
    this.#initialPollMs = initialPollMs;
    this.#maxPollMs = maxPollMs;
    this.#fastWindowMs = options.fastWindowMs ?? 120_000;
    this.#fastPollMs = options.fastPollMs ?? 4_000;
    this.#retryAfterDenialMs = retryAfterDenialMs;
    const first = generateServingKey();
    this.placeholder = {
      cert: placeholderCertificate(first, this.#now()),
      key: pem(first.privateKey),
    };
    this.#nextKey = first;
  }

  /** Why the daemon does not serve its own certificate yet (bound: callers pass it on). */
  readonly awaiting = (): string | undefined => this.#waiting;

  async run(install: InstallPair, signal: AbortSignal): Promise<void> {
    while (!signal.aborted) {
      const key = this.#nextKey ?? generateServingKey();
      this.#nextKey = undefined;
      const name = await this.#ask(key, signal);
      if (name === undefined) {
        if (signal.aborted) return;
        await this.#sleep(this.#maxPollMs, signal);
        continue;
      }
      const cert = await this.#poll(name, signal);
      if (signal.aborted) return;
      const x509 = cert !== undefined ? this.#serve(cert, key, name, install) : undefined;
      if (!x509) {
        await this.#sleep(this.#retryAfterDenialMs, signal);
        continue;
      }
      await this.#awaitRenewal(x509, name, signal);
    }
  }

  /** Sends a request for `key`; its name, or undefined (logged) when it cannot be sent. */
  async #ask(key: ServingKey, signal: AbortSignal): Promise<string | undefined> {
    try {
      const name = await this.#request(key, signal);
      if (this.#waiting) this.#waiting = `awaiting its serving certificate (request ${name})`;
      this.#log.info("serving certificate requested", {
        csr: name,
        signer: this.#options.signerName,
      });
      return name;
    } catch (error) {
      if (signal.aborted) return undefined;
      this.#log.warn("cannot request a serving certificate; retrying", {
        error: error instanceof Error ? error.message.split("\n")[0] : String(error),
      });
      return undefined;
    }
  }

  /** Creates the CertificateSigningRequest for `key` (one that exists already is fine). */
  async #request(key: ServingKey, signal: AbortSignal): Promise<string> {
    const options = this.#options;
    const name = csrName(options, key.publicKey);
    const csr = buildCsr({
      commonName: options.nodeName,
      dnsNames: [options.nodeName],
      ipAddresses: [options.podIp],
      ...key,
    });
    try {
      await this.#kube.rest.json({
        method: "POST",
        path: CSR_PATH,
        body: {
          apiVersion: "certificates.k8s.io/v1",
          kind: "CertificateSigningRequest",
          metadata: { name, ...(options.labels ? { labels: options.labels } : {}) },
          spec: {
            request: Buffer.from(csr).toString("base64"),
            signerName: options.signerName,
            usages: ["digital signature", "key encipherment", "server auth"],
          },
        },
        idempotent: false,
        timeoutMs: 10_000,
        signal,
      });
    } catch (error) {
      if (!(error instanceof KubeApiError && error.status === 409)) throw error;
    }
    return name;
  }

  /** Polls one request; returns the certificate, or undefined when denied or gone. */
  async #poll(name: string, signal: AbortSignal): Promise<string | undefined> {
    let delay = this.#initialPollMs;
    const asked = this.#now().getTime();
    for (;;) {
      await this.#sleep(delay, signal);
      if (signal.aborted) return undefined;
      // Doubling, but at most a few seconds while a signer would answer (a fetch or the
      // in-cluster signer), then at most maxPollMs (no signer: the API is spared).
      const fast = this.#now().getTime() - asked < this.#fastWindowMs;
      delay = Math.min(
        delay * 2,
        fast ? Math.min(this.#fastPollMs, this.#maxPollMs) : this.#maxPollMs,
      );
      let csr: CsrStatus;
      try {
        csr = await this.#kube.rest.json({
          method: "GET",
          path: `${CSR_PATH}/${name}`,
          idempotent: true,
          timeoutMs: 10_000,
          signal,
        });
      } catch (error) {
        if (error instanceof KubeApiError && error.isNotFound) {
          this.#log.warn("serving certificate request vanished; asking again", { csr: name });
          return undefined;
        }
        this.#log.warn("cannot read the serving certificate request; retrying", {
          csr: name,
          error: error instanceof Error ? error.message.split("\n")[0] : String(error),
        });
        continue;
      }
      if (csr.status?.certificate) {
        return Buffer.from(csr.status.certificate, "base64").toString("utf8");
      }
      const refused = csr.status?.conditions?.find((c) =>
        c.type === "Denied" || c.type === "Failed"
      );
      if (refused) {
        this.#refused(name, refused);
        return undefined;
      }
    }
  }

  /** Records a denied or failed request as the reason the daemon is not ready, and logs it. */
  #refused(name: string, refused: CsrCondition): void {
    this.#waiting = `its serving certificate request ${name} was ${refused.type.toLowerCase()}: ${
      refused.reason ?? ""
    } ${refused.message ?? ""}`.trim();
    this.#log.error("serving certificate request refused", {
      csr: name,
      condition: refused.type,
      reason: refused.reason ?? "",
      message: refused.message ?? "",
    });
  }

  /** Hands an issued certificate to the server if it is usable; the parsed one, or undefined (logged). */
  #serve(
    cert: string,
    key: ServingKey,
    name: string,
    install: InstallPair,
  ): X509Certificate | undefined {
    const x509 = this.#usable(cert, key.privateKey);
    if (!x509) {
      this.#log.error("the issued certificate does not match this key, node and IP; ignored", {
        csr: name,
      });
      return undefined;
    }
    try {
      install({ cert, key: pem(key.privateKey) });
    } catch (error) {
      this.#log.error("the issued certificate cannot be served; asking again", {
        csr: name,
        error: error instanceof Error ? error.message : String(error),
      });
      return undefined;
    }
    this.#waiting = undefined;
    return x509;
  }

  /** Checks the issued certificate is for this key and this node before serving it. */
  #usable(cert: string, key: KeyObject): X509Certificate | undefined {
    try {
      const x509 = new X509Certificate(cert);
      // guard: identity-key: a certificate for another key is never served
      if (!x509.checkPrivateKey(key)) return undefined;
      // guard: identity-node: nor one for another node
      if (x509.checkHost(this.#options.nodeName, { subject: "never" }) === undefined) {
        return undefined;
      }
      // guard: identity-pod-ip: nor one for another pod IP
      if (x509.checkIP(canonicalIp(this.#options.podIp)) === undefined) return undefined;
      return x509;
    } catch {
      return undefined;
    }
  }

  /** Logs the served certificate and sleeps until it is due for renewal. */
  async #awaitRenewal(x509: X509Certificate, name: string, signal: AbortSignal): Promise<void> {
    const from = Date.parse(x509.validFrom);
    const to = Date.parse(x509.validTo);
    this.#log.info("serving its own certificate", { csr: name, notAfter: x509.validTo });
    // Renew at two thirds of the lifetime: a new key, a new request.
    const renewIn = from + (to - from) * 2 / 3 - this.#now().getTime();
    await this.#sleep(Math.max(60_000, renewIn), signal);
  }
}
