/**
 * CertificateSigningRequests sent as someone else, for the tests of the daemons' identity and of
 * the in-cluster signer: a request as the daemon of a pod would send it (its pod-bound token),
 * or as an attacker would (another key type, other names, other usages, another signer).
 *
 * @module
 */
import { Buffer } from "node:buffer";
import type { KeyObject } from "node:crypto";
import { buildCsr, generateServingKey } from "../../x509.ts";
import type { Api, Obj } from "../kubelet/api.ts";

/** The collection path of CertificateSigningRequests. */
export const CSR_PATH = "/apis/certificates.k8s.io/v1/certificatesigningrequests";
/** aicr's signer name. */
export const SIGNER = "aicr.run/daemon-serving";

/**
 * Sends a CSR to the API server as the holder of `token`.
 *
 * @param server the API server
 * @param ca the cluster's CA
 * @param token the bearer token
 * @param body the request
 * @returns the API's answer
 */
export async function postCsrAs(
  server: string,
  ca: string,
  token: string,
  body: Obj,
): Promise<{ status: number; body: Obj }> {
  const client = Deno.createHttpClient({ caCerts: [ca] });
  try {
    const res = await fetch(server + CSR_PATH, {
      client,
      method: "POST",
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
      body: JSON.stringify(body),
    });
    return { status: res.status, body: await res.json() };
  } finally {
    client.close();
  }
}

/**
 * A CSR for a node's name and an IP, with a fresh P-256 key unless another key is given.
 *
 * @param name the request's name
 * @param names the node (CN and DNS) and the IP it asks for
 * @param options another key pair, usages or signer name
 * @returns the request object
 */
export function csrBody(
  name: string,
  names: { node: string; ip: string },
  options: {
    key?: { publicKey: KeyObject; privateKey: KeyObject };
    usages?: string[];
    signerName?: string;
  } = {},
): Obj {
  const key = options.key ?? generateServingKey();
  const pem = buildCsr({
    commonName: names.node,
    dnsNames: [names.node],
    ipAddresses: [names.ip],
    ...key,
  });
  return {
    apiVersion: "certificates.k8s.io/v1",
    kind: "CertificateSigningRequest",
    metadata: { name },
    spec: {
      request: Buffer.from(pem).toString("base64"),
      signerName: options.signerName ?? SIGNER,
      usages: options.usages ?? ["digital signature", "key encipherment", "server auth"],
    },
  };
}

/**
 * Reads one CSR.
 *
 * @param admin an admin client
 * @param name its name
 * @returns the object, or undefined when it does not exist
 */
export async function getCsr(admin: Api, name: string): Promise<Obj | undefined> {
  const res = await admin.request("GET", `${CSR_PATH}/${name}`);
  return res.status === 200 ? res.body : undefined;
}

/**
 * One condition of a CSR's status.
 *
 * @param object the CSR
 * @param type `Approved`, `Denied` or `Failed`
 * @returns the condition, if present
 */
export function condition(object: Obj | undefined, type: string): Obj | undefined {
  return ((object?.status?.conditions ?? []) as Obj[]).find((c) => c.type === type);
}
